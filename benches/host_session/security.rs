//! Part 4: what the security features cost. Echo through the redacted WebSocket stream
//! against the same session's raw stream (an admin's `raw=true`), for an ordinary line and for
//! a word that could be a secret's start (`gh`, typed without Enter: the stream holds it
//! until the idle flush); and the `send_line` reply time with the audit log at
//! `synchronous = "full"` (the default), `"normal"`, and switched off.

use std::time::{Duration, Instant};

use agent_hub::hub::BackendKind;
use anyhow::Result;

use super::common::echo::{hub_ws_echo, next_token};
use super::common::hub::HubUnderTest;
use super::common::report::table;
use super::common::stats::stats;
use super::common::ws::WsView;
use super::common::{timed_out, SAMPLE_TIMEOUT};
use super::echo::latency_row;
use super::{start_hub, Dirs, Plan, PROMPT};

pub struct SecurityResults {
    echo_redacted: Vec<Duration>,
    echo_raw: Vec<Duration>,
    held_redacted: Vec<Duration>,
    held_raw: Vec<Duration>,
    send_full: Vec<Duration>,
    send_normal: Vec<Duration>,
    send_off: Vec<Duration>,
}

/// Types a word that could be the start of a secret (`gh`, as in `ghp_…`) without Enter; times
/// until the viewer shows it (the redacted stream holds it until the idle flush), then erases
/// the line (Ctrl-U).
async fn held_echo(typing: &mut WsView, watching: &mut WsView) -> Result<Duration> {
    let token = format!("{} gh", next_token());
    watching.buf.clear();
    let start = Instant::now();
    typing.send_input(&token).await?;
    watching.wait_for(token.as_bytes(), 0).await?;
    let elapsed = start.elapsed();
    typing.send_input("\x15").await?;
    // Both views see the erase; drain the typing one too when it is a different socket.
    Ok(elapsed)
}

async fn send_line_once(hut: &HubUnderTest, id: &str) -> Result<Duration> {
    let line = format!("#{}", next_token());
    let start = Instant::now();
    hut.client.send_line(id, &line).await?;
    Ok(start.elapsed())
}

pub fn measure(
    rt: &tokio::runtime::Runtime,
    hut: &HubUnderTest,
    plan: &Plan,
    dirs: &Dirs,
) -> Result<SecurityResults> {
    rt.block_on(async {
        let (id, mut redacted) = hut.bash_session(BackendKind::Pty, &dirs.work).await?;
        let raw_url = format!("{}&raw=true", hut.client.stream_url(&id, Some(0)));
        let mut raw = WsView::connect(&hut.client, &raw_url, true).await?;
        let mut r = SecurityResults {
            echo_redacted: Vec::new(),
            echo_raw: Vec::new(),
            held_redacted: Vec::new(),
            held_raw: Vec::new(),
            send_full: Vec::new(),
            send_normal: Vec::new(),
            send_off: Vec::new(),
        };
        for i in 0..plan.warmup + plan.echo_samples {
            let a = timed_out(
                hub_ws_echo(&mut redacted, PROMPT),
                SAMPLE_TIMEOUT,
                "redacted echo",
            )
            .await?;
            let b = timed_out(hub_ws_echo(&mut raw, PROMPT), SAMPLE_TIMEOUT, "raw echo").await?;
            if i >= plan.warmup {
                r.echo_redacted.push(a);
                r.echo_raw.push(b);
            }
        }
        for i in 0..plan.warmup / 3 + plan.paced_samples {
            let a = timed_out(
                held_echo(&mut raw, &mut redacted),
                SAMPLE_TIMEOUT,
                "held echo",
            )
            .await?;
            tokio::time::sleep(Duration::from_millis(30)).await;
            let b = timed_out(
                held_echo(&mut redacted, &mut raw),
                SAMPLE_TIMEOUT,
                "held raw echo",
            )
            .await?;
            tokio::time::sleep(Duration::from_millis(30)).await;
            if i >= plan.warmup / 3 {
                r.held_redacted.push(a);
                r.held_raw.push(b);
            }
        }
        let _ = hut.client.kill(&id).await;

        let normal = extra_hub(dirs, "audit-normal", |c| {
            c.audit.synchronous = "normal".into()
        })
        .await?;
        let off = extra_hub(dirs, "audit-off", |c| c.audit.enabled = false).await?;
        let result = async {
            let (full_id, _v1) = hut.bash_session(BackendKind::Pty, &dirs.work).await?;
            let (normal_id, _v2) = normal.bash_session(BackendKind::Pty, &dirs.work).await?;
            let (off_id, _v3) = off.bash_session(BackendKind::Pty, &dirs.work).await?;
            for i in 0..plan.warmup + plan.talk_samples {
                let a = send_line_once(hut, &full_id).await?;
                let b = send_line_once(&normal, &normal_id).await?;
                let c = send_line_once(&off, &off_id).await?;
                if i >= plan.warmup {
                    r.send_full.push(a);
                    r.send_normal.push(b);
                    r.send_off.push(c);
                }
            }
            let _ = hut.client.kill(&full_id).await;
            Ok::<_, anyhow::Error>(())
        }
        .await;
        normal.stop().await;
        off.stop().await;
        result.map(|_| r)
    })
}

/// A second hub on the same tmux server, with its own data directory `name`.
async fn extra_hub(
    dirs: &Dirs,
    name: &str,
    adjust: impl FnOnce(&mut agent_hub::config::HubConfig),
) -> Result<HubUnderTest> {
    let data = dirs.work.join(name);
    std::fs::create_dir_all(&data)?;
    start_hub(dirs, &data, adjust).await
}

pub fn print(r: &SecurityResults) {
    table(
        "Security costs (redaction hold, audit per send_line)",
        &[
            "path", "n", "p50 ms", "p99 ms", "min ms", "max ms", "target", "result",
        ],
    );
    let rows: [(&str, &Vec<Duration>); 7] = [
        (
            "WS echo `#token`+Enter, redacted stream (default)",
            &r.echo_redacted,
        ),
        (
            "WS echo `#token`+Enter, raw stream (admin `raw=true`)",
            &r.echo_raw,
        ),
        (
            "echo of `token gh` without Enter, redacted (`gh` held until idle flush)",
            &r.held_redacted,
        ),
        ("echo of `token gh` without Enter, raw stream", &r.held_raw),
        (
            "send_line reply, audit `synchronous=full` (default)",
            &r.send_full,
        ),
        (
            "send_line reply, audit `synchronous=normal`",
            &r.send_normal,
        ),
        ("send_line reply, audit off", &r.send_off),
    ];
    for (name, samples) in rows {
        latency_row(name, stats(samples), "-", "measured");
    }
    let p50 = |s: &Vec<Duration>| stats(s).p50_ms;
    println!(
        "\nadded by redaction to ordinary echo: {:+.3} ms p50; by the hold on a possible secret \
         prefix: {:+.3} ms p50 (bounded by the {} ms idle flush); by the audit log per \
         send_line: {:+.3} ms p50 (full), {:+.3} ms (normal)",
        p50(&r.echo_redacted) - p50(&r.echo_raw),
        p50(&r.held_redacted) - p50(&r.held_raw),
        agent_hub::redact::stream::FLUSH_AFTER.as_millis(),
        p50(&r.send_full) - p50(&r.send_off),
        p50(&r.send_normal) - p50(&r.send_off),
    );
}
