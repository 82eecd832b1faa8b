//! Parts 1 and 2: keystroke -> echo round trips (bare PTY, hub PTY by WebSocket and by REST,
//! hub tmux session, and the older `send-keys` + `capture-pane` polling design), back-to-back
//! and at typing pace; and `talk` latency. Their latency table.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_hub::client::HubClient;
use agent_hub::hub::BackendKind;
use anyhow::{ensure, Context, Result};

use super::bare::{bare_env, BarePty};
use super::common::echo::{hub_rest_echo, hub_ws_echo, next_token, talk_samples};
use super::common::hub::HubUnderTest;
use super::common::report::{table, verdict};
use super::common::stats::{interleaved, stats, without_warmup, Stats};
use super::common::ws::WsView;
use super::common::{timed_out, SAMPLE_TIMEOUT};
use super::{Dirs, Plan, BASH_ARGS, PROMPT};

/// Idle time between lines in the "typing pace" echo rows (a fast typist: 50 keys/s).
pub const TYPING_GAP: Duration = Duration::from_millis(20);
/// The hub may add at most this much to the bare PTY's echo p50.
const ECHO_OVERHEAD_TARGET_MS: f64 = 0.5;
const TALK_P50_TARGET_MS: f64 = 2.0;

pub fn latency_row(name: &str, s: Stats, target: &str, result: &str) {
    println!(
        "| {name} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {target} | {result} |",
        s.n, s.p50_ms, s.p99_ms, s.min_ms, s.max_ms
    );
}

/// The echo rows measured against each other, in `EchoRow` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EchoRow {
    Bare,
    HubWs,
    HubRest,
    HubTmux,
}

impl EchoRow {
    const ALL: [EchoRow; 4] = [
        EchoRow::Bare,
        EchoRow::HubWs,
        EchoRow::HubRest,
        EchoRow::HubTmux,
    ];

    fn label(self) -> &'static str {
        match self {
            EchoRow::Bare => "bare portable-pty (bash), write -> read",
            EchoRow::HubWs => "hub PTY, WS input frame -> WS output",
            EchoRow::HubRest => "hub PTY, REST send_line -> WS output",
            EchoRow::HubTmux => "hub tmux session, WS input frame -> WS output",
        }
    }

    /// Whether the hub-overhead target applies (host PTY sessions only).
    fn has_target(self) -> bool {
        matches!(self, EchoRow::HubWs | EchoRow::HubRest)
    }
}

/// Samples of one echo row at one pace.
struct EchoSeries {
    row: EchoRow,
    samples: Vec<Duration>,
}

pub struct EchoResults {
    back_to_back: Vec<EchoSeries>,
    paced: Vec<EchoSeries>,
    poll: Vec<Duration>,
}

fn print_echo_rows(pace: &str, series: &[EchoSeries]) {
    let bare = series
        .iter()
        .find(|s| s.row == EchoRow::Bare)
        .map(|s| stats(&s.samples));
    for s in series {
        let st = stats(&s.samples);
        let name = format!("echo, {pace}: {}", s.row.label());
        match (s.row, bare) {
            (EchoRow::Bare, _) => latency_row(&name, st, "baseline", "-"),
            (row, Some(bare)) if row.has_target() => {
                let added = st.p50_ms - bare.p50_ms;
                latency_row(
                    &name,
                    st,
                    &format!("p50 <= bare + {ECHO_OVERHEAD_TARGET_MS} ms (adds {added:+.3})"),
                    verdict(added <= ECHO_OVERHEAD_TARGET_MS),
                );
            }
            _ => latency_row(&name, st, "none", "-"),
        }
    }
}

/// The latency table: the echo rows and the talk row, of the parts that ran.
pub fn print_latency_table(echo: Option<&EchoResults>, talk: Option<&[Duration]>) {
    table(
        "Latency (ms)",
        &[
            "measurement",
            "n",
            "p50",
            "p99",
            "min",
            "max",
            "target",
            "result",
        ],
    );
    if let Some(echo) = echo {
        print_echo_rows("back-to-back", &echo.back_to_back);
        print_echo_rows(
            &format!("typing pace ({} ms idle)", TYPING_GAP.as_millis()),
            &echo.paced,
        );
        latency_row(
            "echo: tmux send-keys + capture-pane polling (old design)",
            stats(&echo.poll),
            "none",
            "-",
        );
    }
    if let Some(talk) = talk {
        let t = stats(talk);
        latency_row(
            "talk `true`: REST POST .../talk round trip, no viewer",
            t,
            &format!("p50 <= {TALK_P50_TARGET_MS} ms"),
            verdict(t.p50_ms <= TALK_P50_TARGET_MS),
        );
    }
}

fn bare_echo(pty: &mut BarePty) -> Result<Duration> {
    let token = next_token();
    pty.buf.clear();
    let start = Instant::now();
    pty.write(format!("#{token}\r").as_bytes())?;
    let at = pty.wait_for(token.as_bytes(), 0)?;
    let elapsed = start.elapsed();
    pty.wait_for(PROMPT, at + token.len())?;
    Ok(elapsed)
}

/// `tmux -L socket ARGS`, isolated from any tmux the benchmark runs inside.
fn tmux(socket: &str, args: &[&str]) -> Result<String> {
    let out = Command::new("tmux")
        .arg("-L")
        .arg(socket)
        .args(args)
        .env_remove("TMUX")
        .output()
        .context("run tmux")?;
    ensure!(
        out.status.success(),
        "tmux {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The older design: one `send-keys` call, then `capture-pane` back-to-back until the token
/// is on the screen (no sleep between polls: the lower bound of that design).
fn poll_echo(socket: &str) -> Result<Duration> {
    let token = next_token();
    let typed = format!("#{token}");
    let start = Instant::now();
    tmux(socket, &["send-keys", "-t", "bench", "--", &typed, "Enter"])?;
    while !tmux(socket, &["capture-pane", "-p", "-t", "bench"])?.contains(&token) {
        ensure!(start.elapsed() < SAMPLE_TIMEOUT, "token never showed up");
    }
    let elapsed = start.elapsed();
    std::thread::sleep(Duration::from_millis(2));
    Ok(elapsed)
}

fn start_poll_server(socket: &str, cwd: &Path) -> Result<()> {
    let mut cmd = Command::new("tmux");
    cmd.args([
        "-L",
        socket,
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "bench",
    ])
    .args(["-x", "120", "-y", "30", "-c"])
    .arg(cwd)
    .arg("bash")
    .args(BASH_ARGS)
    .env_clear()
    .envs(bare_env());
    let out = cmd.output().context("start tmux")?;
    ensure!(
        out.status.success(),
        "tmux new-session: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let start = Instant::now();
    while !tmux(socket, &["capture-pane", "-p", "-t", "bench"])?.contains('$') {
        ensure!(
            start.elapsed() < SAMPLE_TIMEOUT,
            "no prompt in the poll tmux"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// The sessions the echo rows type into.
struct EchoTargets {
    bare: BarePty,
    pty_id: String,
    pty_view: WsView,
    tmux_view: WsView,
}

impl EchoTargets {
    fn sample(
        &mut self,
        rt: &tokio::runtime::Runtime,
        client: &HubClient,
        row: EchoRow,
    ) -> Result<Duration> {
        let limit = SAMPLE_TIMEOUT;
        match row {
            EchoRow::Bare => bare_echo(&mut self.bare),
            EchoRow::HubWs => rt.block_on(timed_out(
                hub_ws_echo(&mut self.pty_view, PROMPT),
                limit,
                "WS echo",
            )),
            EchoRow::HubRest => rt.block_on(timed_out(
                hub_rest_echo(client, &self.pty_id, &mut self.pty_view, PROMPT),
                limit,
                "REST echo",
            )),
            EchoRow::HubTmux => rt.block_on(timed_out(
                hub_ws_echo(&mut self.tmux_view, PROMPT),
                limit,
                "tmux WS echo",
            )),
        }
    }

    /// `samples` samples of every row after `warmup` discarded ones, interleaved
    /// ([`interleaved`]). `gap` is idle time after each sample.
    fn interleave(
        &mut self,
        rt: &tokio::runtime::Runtime,
        client: &HubClient,
        rows: &[EchoRow],
        counts: (usize, usize, usize),
        gap: Duration,
    ) -> Result<Vec<EchoSeries>> {
        let mut taken: Vec<Vec<Duration>> = vec![Vec::new(); rows.len()];
        for i in interleaved(rows.len(), counts) {
            taken[i].push(self.sample(rt, client, rows[i])?);
            std::thread::sleep(gap);
        }
        Ok(rows
            .iter()
            .zip(without_warmup(taken, counts.0))
            .map(|(&row, samples)| EchoSeries { row, samples })
            .collect())
    }
}

/// All echo rows: back-to-back (the next line is typed as soon as the prompt is back) and at
/// typing pace (idle between lines, so every sample pays the wake-ups of idle threads and
/// CPUs, as a real keystroke does), then the older polling design.
pub fn measure_echo(
    rt: &tokio::runtime::Runtime,
    hut: &HubUnderTest,
    plan: &Plan,
    dirs: &Dirs,
) -> Result<EchoResults> {
    let mut bare = BarePty::spawn("bash", &BASH_ARGS, &dirs.work)?;
    bare.wait_for(PROMPT, 0)?;
    let (pty_id, pty_view) = rt.block_on(hut.bash_session(BackendKind::Pty, &dirs.work))?;
    let (tmux_id, tmux_view) = rt.block_on(hut.bash_session(BackendKind::Tmux, &dirs.work))?;
    let mut targets = EchoTargets {
        bare,
        pty_id,
        pty_view,
        tmux_view,
    };
    let counts = (plan.warmup, plan.echo_samples, plan.echo_block);
    let back_to_back = targets.interleave(rt, &hut.client, &EchoRow::ALL, counts, Duration::ZERO);
    let paced = back_to_back.and_then(|b2b| {
        let counts = (plan.warmup / 3, plan.paced_samples, plan.echo_block / 2);
        let rows = [EchoRow::Bare, EchoRow::HubWs, EchoRow::HubRest];
        Ok((
            b2b,
            targets.interleave(rt, &hut.client, &rows, counts, TYPING_GAP)?,
        ))
    });
    drop(targets.bare);
    rt.block_on(async {
        let _ = hut.client.kill(&targets.pty_id).await;
        let _ = hut.client.kill(&tmux_id).await;
    });
    let (back_to_back, paced) = paced?;

    start_poll_server(&dirs.poll_socket, &dirs.work)?;
    let poll = (0..3 + plan.poll_samples)
        .map(|_| poll_echo(&dirs.poll_socket))
        .collect::<Result<Vec<_>>>();
    let _ = tmux(&dirs.poll_socket, &["kill-server"]);
    Ok(EchoResults {
        back_to_back,
        paced,
        poll: poll?.split_off(3),
    })
}

pub async fn measure_talk(hut: &HubUnderTest, plan: &Plan, cwd: &Path) -> Result<Vec<Duration>> {
    let (id, view) = hut.bash_session(BackendKind::Pty, cwd).await?;
    // A talk is measured with no viewer attached (a viewer only adds its own fan-out work).
    drop(view);
    let result = talk_samples(&hut.client, &id, plan.warmup, plan.talk_samples).await;
    let _ = hut.client.kill(&id).await;
    result
}
