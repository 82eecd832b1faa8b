//! Part 3: ingest throughput of `cat` of a 100 MB text file, the hub (seen by a WebSocket
//! subscriber, byte-exact) against a bare portable-pty, interleaved; and where the CPU went.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_hub::protocol::CreateSessionRequest;
use anyhow::{anyhow, ensure, Result};

use super::bare::BarePty;
use super::common::hub::HubUnderTest;
use super::common::ingest::{ingested_at, write_text_file, ws_lag_ms, LINE_CHARS};
use super::common::procfs::CpuTimes;
use super::common::report::{join, table, verdict};
use super::common::stats::{mb_per_s, median};
use super::common::ws::WsView;
use super::{Dirs, Plan};

/// Longest one throughput run may take.
const CAT_TIMEOUT: Duration = Duration::from_secs(120);
/// Hub throughput must be at least this share of the bare PTY's.
const THROUGHPUT_RATIO_TARGET: f64 = 0.8;
/// Waits for one line on stdin, then becomes `cat FILE`: the trigger lets the clock start when
/// the subscriber is already attached, identically for the hub and the bare PTY.
pub const CAT_SCRIPT: &str = "read _; exec cat \"$1\"";
/// The trigger line's echo: the PTY prints "\n" as "\r\n".
const TRIGGER_ECHO_BYTES: u64 = 2;

/// One `cat` run: time from the trigger to the last expected byte, and what arrived.
#[derive(Debug, Clone, Copy, Default)]
struct CatRun {
    secs: f64,
    received: u64,
    /// Hub only: how long after the hub had ingested the last byte (PTY -> ring) the
    /// WebSocket subscriber had it too.
    ws_lag_ms: Option<f64>,
    /// Hub only: the session's output end offset after the run.
    hub_offset: Option<u64>,
    resyncs: u64,
    dropped: u64,
    cpu: CpuTimes,
}

fn bare_cat(file: &Path, expected: u64, cwd: &Path) -> Result<CatRun> {
    let path = file.display().to_string();
    let mut pty = BarePty::spawn("sh", &["-c", CAT_SCRIPT, "sh", &path], cwd)?;
    std::thread::sleep(Duration::from_millis(200));
    let mut chunk = vec![0u8; 64 * 1024];
    let cpu_before = CpuTimes::now();
    let start = Instant::now();
    pty.write(b"\n")?;
    let mut received = 0u64;
    let mut secs = None;
    loop {
        let n = pty.read_some(&mut chunk);
        if n == 0 {
            break;
        }
        received += n as u64;
        if received >= expected && secs.is_none() {
            secs = Some(start.elapsed().as_secs_f64());
        }
        ensure!(start.elapsed() < CAT_TIMEOUT, "bare cat took too long");
    }
    drop(pty); // waits for `cat`, so its CPU time is counted
    Ok(CatRun {
        secs: secs.unwrap_or_else(|| start.elapsed().as_secs_f64()),
        received,
        cpu: CpuTimes::now().since(cpu_before),
        ..CatRun::default()
    })
}

async fn hub_cat(hut: &HubUnderTest, file: &Path, expected: u64, cwd: &Path) -> Result<CatRun> {
    let id = hut
        .create(CreateSessionRequest {
            shell: Some("sh".into()),
            args: ["-c", CAT_SCRIPT, "sh", &file.display().to_string()]
                .map(String::from)
                .to_vec(),
            cwd: Some(cwd.display().to_string()),
            ..CreateSessionRequest::default()
        })
        .await?;
    let run = tokio::time::timeout(CAT_TIMEOUT, hub_cat_run(hut, &id, expected))
        .await
        .map_err(|_| anyhow!("hub cat took too long"))
        .and_then(|r| r);
    let _ = hut.client.kill(&id).await;
    run
}

async fn hub_cat_run(hut: &HubUnderTest, id: &str, expected: u64) -> Result<CatRun> {
    let mut view = WsView::connect(&hut.client, &hut.client.stream_url(id, Some(0)), false).await?;
    let ingested = ingested_at(&hut.hub, id, expected)?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cpu_before = CpuTimes::now();
    let start = Instant::now();
    view.send_input("\n").await?;
    while view.received < expected && !view.exited() && view.pump().await? {}
    let done = Instant::now();
    // Drain to the exit frame, so any byte beyond the expected count is counted too (and the
    // hub has reaped `cat`, so its CPU time is counted).
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while !view.exited() && view.pump().await.unwrap_or(false) {}
    })
    .await;
    let cpu = CpuTimes::now().since(cpu_before);
    Ok(CatRun {
        secs: done.duration_since(start).as_secs_f64(),
        received: view.received,
        ws_lag_ms: ws_lag_ms(ingested, done).await,
        hub_offset: hut.output_offset(id).await.ok(),
        resyncs: view.resyncs,
        dropped: view.dropped,
        cpu,
    })
}

pub struct CatResults {
    file_bytes: u64,
    expected: u64,
    bare: Vec<CatRun>,
    hub: Vec<CatRun>,
}

pub fn measure_cat(
    rt: &tokio::runtime::Runtime,
    hut: &HubUnderTest,
    plan: &Plan,
    dirs: &Dirs,
) -> Result<CatResults> {
    let file = dirs.work.join("big.txt");
    let file_bytes = write_text_file(&file, plan.file_lines, |_| {})?;
    // The PTY turns every '\n' into "\r\n"; the trigger line adds its own echo.
    let expected = file_bytes + plan.file_lines as u64 + TRIGGER_ECHO_BYTES;
    let mut res = CatResults {
        file_bytes,
        expected,
        bare: Vec::new(),
        hub: Vec::new(),
    };
    // Interleaved, alternating which goes first, against the machine's drifting load.
    for i in 0..plan.cat_runs {
        let hub_run = |res: &mut CatResults| -> Result<()> {
            res.hub
                .push(rt.block_on(hub_cat(hut, &file, expected, &dirs.work))?);
            Ok(())
        };
        if i % 2 == 1 {
            hub_run(&mut res)?;
        }
        res.bare.push(bare_cat(&file, expected, &dirs.work)?);
        if i % 2 == 0 {
            hub_run(&mut res)?;
        }
    }
    let _ = std::fs::remove_file(&file);
    Ok(res)
}

pub fn print_cat_table(c: &CatResults) {
    let rates = |runs: &[CatRun]| -> Vec<f64> {
        runs.iter()
            .map(|r| mb_per_s(c.file_bytes, r.secs))
            .collect()
    };
    let (bare, hub) = (rates(&c.bare), rates(&c.hub));
    let ratio = median(&hub) / median(&bare);
    let exact = |runs: &[CatRun]| runs.iter().all(|r| r.received == c.expected);
    let lossless = exact(&c.hub) && c.hub.iter().all(|r| r.resyncs == 0 && r.dropped == 0);

    table(
        &format!(
            "Ingest throughput: `cat` of a {} byte text file ({} lines of {} chars + LF); \
             expected PTY output {} bytes; MB/s = file bytes / s",
            c.file_bytes,
            c.file_bytes / (LINE_CHARS as u64 + 1),
            LINE_CHARS,
            c.expected
        ),
        &[
            "path",
            "runs (MB/s)",
            "median MB/s",
            "bytes received per run",
            "resyncs / dropped bytes",
            "target",
            "result",
        ],
    );
    println!(
        "| bare portable-pty, 64 KiB reads | {} | {:.1} | {} | - | baseline, exact bytes | {} |",
        join(&bare, |x| format!("{x:.1}")),
        median(&bare),
        join(&c.bare, |r| r.received.to_string()),
        verdict(exact(&c.bare))
    );
    println!(
        "| hub PTY session -> WebSocket subscriber | {} | {:.1} | {} | {} | >= {:.0}% of bare (is {:.0}%), lossless | {} |",
        join(&hub, |x| format!("{x:.1}")),
        median(&hub),
        join(&c.hub, |r| r.received.to_string()),
        join(&c.hub, |r| format!("{} / {}", r.resyncs, r.dropped)),
        THROUGHPUT_RATIO_TARGET * 100.0,
        ratio * 100.0,
        verdict(ratio >= THROUGHPUT_RATIO_TARGET && lossless)
    );
    println!(
        "\nHub session output_offset after each run: {}; WebSocket subscriber behind the hub's \
         ingest at the end (ms): {}",
        join(&c.hub, |r| r
            .hub_offset
            .map_or("?".into(), |o| o.to_string())),
        join(&c.hub, |r| r
            .ws_lag_ms
            .map_or("?".into(), |l| format!("{l:.1}"))),
    );
    print_cpu_table(c);
}

/// Where the CPU went during each throughput run (2 cores = 2 CPU-seconds per second).
fn print_cpu_table(c: &CatResults) {
    table(
        "CPU seconds per throughput run (wall time in brackets)",
        &[
            "path",
            "`cat` (child)",
            "reader thread (bare) / hub threads outside the workers",
            "hub tokio workers (the PTY reader runs here on Unix)",
            "bench client (main thread)",
            "total",
        ],
    );
    for (path, runs) in [("bare", &c.bare), ("hub", &c.hub)] {
        for r in runs {
            let u = r.cpu;
            // The bare PTY's reader is its main thread; the hub has workers and a client too.
            let (outside, workers, client) = if path == "bare" {
                (
                    format!("{:.2} (main thread)", u.main),
                    "-".into(),
                    "-".into(),
                )
            } else {
                (
                    format!("{:.2} (other hub threads)", u.process - u.main - u.workers),
                    format!("{:.2}", u.workers),
                    format!("{:.2}", u.main),
                )
            };
            println!(
                "| {path} ({:.2} s) | {:.2} | {outside} | {workers} | {client} | {:.2} |",
                r.secs,
                u.children,
                u.process + u.children
            );
        }
    }
}
