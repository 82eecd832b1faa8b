//! Part 3: ingest throughput of `cat` of a 50 MB text file in the container, the hub (a
//! WebSocket subscriber, byte-exact) against a raw `tmux -C` control client through a non-TTY
//! exec, interleaved; where the CPU went; and what a vt100 screen costs for the same bytes.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_hub::backend::tmux::control::{send_bytes_commands, ControlMessage, ControlParser};
use agent_hub::backend::TermSize;
use agent_hub::screen::Screen;
use anyhow::{anyhow, ensure, Result};
use bollard::Docker;

use super::common::hub::HubUnderTest;
use super::common::ingest::{
    fnv1a, ingested_at, write_text_file, ws_lag_ms, Tally, FNV_OFFSET, LINE_CHARS,
};
use super::common::procfs::{cpu_secs, CpuTimes};
use super::common::report::{join, opt_secs, table, verdict};
use super::common::stats::{mb_per_s, median};
use super::common::ws::WsView;
use super::common::{timed_out, SAMPLE_TIMEOUT};
use super::docker::{container_cpu_secs, docker_cli, dockerd_pid, full_container_id, RawExec};
use super::{Plan, SummaryRow, TMUX_SESSION};

/// No output for this long means the shell is waiting.
const QUIET: Duration = Duration::from_millis(300);
/// Longest one throughput run may take.
const INGEST_TIMEOUT: Duration = Duration::from_secs(180);
/// Hub throughput must be at least this share of the raw control client's.
const THROUGHPUT_RATIO_TARGET: f64 = 0.8;
const FILE_IN_CONTAINER: &str = "/tmp/big.txt";
/// Typed (untimed) before each throughput run: the shell then waits in `read` for the trigger,
/// so the clock starts with the subscriber attached and nothing else in flight. The marker is
/// quoted so the typed line's echo never contains it.
const INGEST_COMMAND: &str = "read _; cat /tmp/big.txt; echo DONE_MA''RK\r";
/// What follows the file's bytes in the output.
const DONE_LINE: &[u8] = b"DONE_MARK\r\n";
/// The trigger "\r" echoed by the terminal in canonical mode: "\r\n".
const TRIGGER_ECHO: &[u8] = b"\r\n";

/// The test file, and what the terminal turns it into after the trigger.
struct IngestFile {
    local: std::path::PathBuf,
    file_bytes: u64,
    /// Trigger echo + file with every '\n' as "\r\n".
    expected: u64,
    expected_hash: u64,
}

/// Writes the test file into `dir` and works out what the terminal turns it into.
fn write_ingest_file(dir: &Path, lines: usize) -> Result<IngestFile> {
    let local = dir.join("big.txt");
    let mut hash = fnv1a(FNV_OFFSET, TRIGGER_ECHO);
    let file_bytes = write_text_file(&local, lines, |line| {
        hash = fnv1a(hash, &line[..LINE_CHARS]);
        hash = fnv1a(hash, b"\r\n");
    })?;
    Ok(IngestFile {
        local,
        file_bytes,
        expected: TRIGGER_ECHO.len() as u64 + file_bytes + lines as u64,
        expected_hash: hash,
    })
}

/// Seconds a hub `Screen` (vt100) takes to follow the output of one run, fed in 4 KiB pieces.
fn screen_cost(file: &IngestFile) -> Result<f64> {
    let data = std::fs::read(&file.local)?;
    let mut crlf = Vec::with_capacity(data.len() + data.len() / LINE_CHARS + 2);
    crlf.extend_from_slice(TRIGGER_ECHO);
    for &b in &data {
        if b == b'\n' {
            crlf.push(b'\r');
        }
        crlf.push(b);
    }
    let mut screen = Screen::new(TermSize {
        cols: 120,
        rows: 30,
    });
    let start = Instant::now();
    let mut offset = 0;
    for piece in crlf.chunks(4096) {
        screen.feed(offset, piece);
        offset += piece.len() as u64;
    }
    Ok(start.elapsed().as_secs_f64())
}

fn copy_into(file: &IngestFile, container: &str) -> Result<()> {
    let target = format!("{container}:{FILE_IN_CONTAINER}");
    docker_cli(&["cp", &file.local.display().to_string(), &target])?;
    Ok(())
}

/// One throughput run: time from the trigger to the last expected byte, and what arrived.
#[derive(Debug, Clone, Default)]
struct IngestRun {
    secs: f64,
    received: u64,
    exact: bool,
    resyncs: u64,
    dropped: u64,
    /// Hub only: the session's output_offset advance over the run (REST), and how long after
    /// the hub had ingested the last byte the WebSocket subscriber had it too.
    offset_advance: Option<u64>,
    ws_lag_ms: Option<f64>,
    /// WebSocket binary frames (hub) or `%output` lines (raw) that carried the bytes.
    chunks: u64,
    /// CPU seconds over the run: this process (hub + bench client), the container (tmux + cat),
    /// dockerd.
    cpu_process: f64,
    /// Of which: the main thread (bench client: WebSocket or exec reads, parsing, checksum)
    /// and the tokio workers (the hub's tasks).
    cpu_main: f64,
    cpu_workers: f64,
    cpu_container: Option<f64>,
    cpu_dockerd: Option<f64>,
}

/// CPU counters sampled around a run.
struct CpuMark {
    own: CpuTimes,
    container: Option<f64>,
    dockerd: Option<f64>,
}

impl CpuMark {
    fn now(container_full_id: &str, dockerd: Option<&str>) -> Self {
        CpuMark {
            own: CpuTimes::now(),
            container: container_cpu_secs(container_full_id),
            dockerd: dockerd.and_then(cpu_secs),
        }
    }

    fn into_run(self, after: CpuMark, run: &mut IngestRun) {
        let own = after.own.since(self.own);
        run.cpu_process = own.process;
        run.cpu_main = own.main;
        run.cpu_workers = own.workers;
        run.cpu_container = after.container.zip(self.container).map(|(a, b)| a - b);
        run.cpu_dockerd = after.dockerd.zip(self.dockerd).map(|(a, b)| a - b);
    }
}

/// Where a run happens: the container (name, full id for its cgroup) and dockerd's pid.
struct IngestTarget<'a> {
    container: &'a str,
    full_id: String,
    dockerd: Option<&'a str>,
}

/// [`hub_ingest`], with the agent's state added to an error (why did its stream end?).
async fn hub_ingest_explained(
    hut: &HubUnderTest,
    sid: &str,
    file: &IngestFile,
    at: &IngestTarget<'_>,
) -> Result<IngestRun> {
    match hub_ingest(hut, sid, file, at).await {
        Ok(run) => Ok(run),
        Err(e) => Err(e.context(format!(
            "hub ingest run failed; agent now: {}; container: {}",
            hut.client
                .agent("ingest")
                .await
                .map_or_else(|e| e.to_string(), |v| format!("{:?}", v.agent)),
            docker_cli(&["inspect", "-f", "{{json .State}}", at.container])
                .unwrap_or_else(|e| e.to_string())
        ))),
    }
}

async fn hub_ingest(
    hut: &HubUnderTest,
    sid: &str,
    file: &IngestFile,
    at: &IngestTarget<'_>,
) -> Result<IngestRun> {
    let since = hut.output_offset(sid).await?;
    let mut view =
        WsView::connect(&hut.client, &hut.client.stream_url(sid, Some(since)), true).await?;
    view.send_input(INGEST_COMMAND).await?;
    view.wait_quiet(QUIET, SAMPLE_TIMEOUT).await?;
    let before = hut.output_offset(sid).await?;
    ensure!(
        before == view.next_offset,
        "the WebSocket is at {} but the session at {before}",
        view.next_offset
    );
    view.tally = Some(Tally::new(file.expected, DONE_LINE));
    let frames_before = view.frames;
    // When the hub's pipeline holds every byte (in-process observer, not part of the API).
    let ingested = ingested_at(&hut.hub, sid, before + file.expected)?;
    let cpu = CpuMark::now(&at.full_id, at.dockerd);
    let start = Instant::now();
    view.send_input("\r").await?;
    let complete = |v: &WsView| v.tally.as_ref().is_some_and(Tally::complete);
    let waited = timed_out(
        async {
            while !complete(&view) {
                view.pump_live().await?;
            }
            Ok(())
        },
        INGEST_TIMEOUT,
        "the hub ingest run",
    )
    .await;
    if let Err(e) = waited {
        // Where it stopped: the subscriber short of the session's end, or the session short.
        let end = hut.output_offset(sid).await.unwrap_or(0);
        let counted = view.tally.as_ref().map_or(0, |t| t.received);
        return Err(e.context(format!(
            "the subscriber is at offset {} ({} frames, {} resyncs), the session at {end}; \
             the run began at {before}: {counted} of {} bytes counted",
            view.next_offset, view.frames, view.resyncs, file.expected,
        )));
    }
    let mut run = IngestRun::default();
    cpu.into_run(CpuMark::now(&at.full_id, at.dockerd), &mut run);
    let tally = view
        .tally
        .take()
        .unwrap_or_else(|| Tally::new(0, DONE_LINE));
    let done = tally.done_at.unwrap_or_else(Instant::now);
    run.ws_lag_ms = ws_lag_ms(ingested, done).await;
    run.secs = done.duration_since(start).as_secs_f64();
    run.received = (tally.received - tally.skipped).min(file.expected);
    run.exact = tally.exact(file.expected_hash);
    run.chunks = view.frames - frames_before;
    run.resyncs = view.resyncs;
    run.dropped = view.dropped;
    run.offset_advance = Some(hut.output_offset(sid).await? - before);
    Ok(run)
}

/// A raw control-mode client: `tmux -C` through a non-TTY exec, its `%output` decoded.
struct RawControl {
    exec: RawExec,
    parser: ControlParser,
}

impl RawControl {
    async fn attach(docker: &Docker, container: &str) -> Result<Self> {
        let target = format!("={TMUX_SESSION}");
        let cmd = [
            "tmux",
            "-u",
            "-C",
            "attach-session",
            "-f",
            "ignore-size",
            "-t",
            &target,
        ];
        let mut raw = RawControl {
            exec: RawExec::start(docker, container, &cmd, false).await?,
            parser: ControlParser::new(),
        };
        // Commands sent before the attach's own reply fail ("no current client").
        let attached = |m: &ControlMessage| {
            matches!(
                m,
                ControlMessage::Reply {
                    from_stdin: false,
                    ..
                }
            )
        };
        timed_out(
            async {
                loop {
                    if raw.next_messages().await?.iter().any(attached) {
                        return Ok(());
                    }
                }
            },
            SAMPLE_TIMEOUT,
            "the raw control client's attach",
        )
        .await?;
        Ok(raw)
    }

    async fn next_messages(&mut self) -> Result<Vec<ControlMessage>> {
        let chunk = self
            .exec
            .read()
            .await?
            .ok_or_else(|| anyhow!("the control client ended"))?;
        Ok(self.parser.feed(&chunk))
    }

    /// Types `bytes` into the pane (`send-keys -H`, as the hub does).
    async fn type_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let mut text = send_bytes_commands(TMUX_SESSION, bytes).join("\n");
        text.push('\n');
        self.exec.write(text.as_bytes()).await
    }

    async fn wait_quiet(&mut self) -> Result<()> {
        let deadline = Instant::now() + SAMPLE_TIMEOUT;
        while let Ok(read) = tokio::time::timeout(QUIET, self.next_messages()).await {
            read?;
            ensure!(Instant::now() < deadline, "the raw pane never went quiet");
        }
        Ok(())
    }

    async fn detach(mut self) {
        let _ = self.exec.write(b"detach-client\n").await;
        self.exec.drain_to_end(Duration::from_secs(3)).await;
    }
}

async fn raw_ingest(
    docker: &Docker,
    file: &IngestFile,
    at: &IngestTarget<'_>,
) -> Result<IngestRun> {
    let mut raw = RawControl::attach(docker, at.container).await?;
    raw.type_bytes(INGEST_COMMAND.as_bytes()).await?;
    raw.wait_quiet().await?;
    let mut tally = Tally::new(file.expected, DONE_LINE);
    let mut chunks = 0;
    let cpu = CpuMark::now(&at.full_id, at.dockerd);
    let start = Instant::now();
    raw.type_bytes(b"\r").await?;
    timed_out(
        async {
            while !tally.complete() {
                for message in raw.next_messages().await? {
                    if let ControlMessage::Output { data, .. } = message {
                        tally.feed(&data);
                        chunks += 1;
                    }
                }
            }
            Ok(())
        },
        INGEST_TIMEOUT,
        "the raw ingest run",
    )
    .await?;
    let mut run = IngestRun::default();
    cpu.into_run(CpuMark::now(&at.full_id, at.dockerd), &mut run);
    raw.detach().await;
    let done = tally.done_at.unwrap_or_else(Instant::now);
    run.secs = done.duration_since(start).as_secs_f64();
    run.received = (tally.received - tally.skipped).min(file.expected);
    run.exact = tally.exact(file.expected_hash);
    run.chunks = chunks;
    Ok(run)
}

pub struct IngestResults {
    file_bytes: u64,
    lines: usize,
    expected: u64,
    hub: Vec<IngestRun>,
    raw: Vec<IngestRun>,
    /// CPU time a vt100 screen takes to follow one run's bytes.
    screen_secs: f64,
}

pub async fn measure_ingest(
    hut: &HubUnderTest,
    docker: &Docker,
    raw_container: &str,
    plan: &Plan,
    dir: &Path,
) -> Result<IngestResults> {
    let file = write_ingest_file(dir, plan.file_lines)?;
    let (sid, hub_container) = hut.start_agent("ingest").await?;
    copy_into(&file, &hub_container)?;
    copy_into(&file, raw_container)?;
    let dockerd = dockerd_pid();
    let hub_at = IngestTarget {
        container: &hub_container,
        full_id: full_container_id(&hub_container),
        dockerd: dockerd.as_deref(),
    };
    let raw_at = IngestTarget {
        container: raw_container,
        full_id: full_container_id(raw_container),
        dockerd: dockerd.as_deref(),
    };
    let mut res = IngestResults {
        file_bytes: file.file_bytes,
        lines: plan.file_lines,
        expected: file.expected,
        hub: Vec::new(),
        raw: Vec::new(),
        screen_secs: screen_cost(&file)?,
    };
    // Interleaved, alternating which goes first, against the machine's drifting load.
    for i in 0..plan.ingest_runs {
        if i % 2 == 1 {
            res.hub
                .push(hub_ingest_explained(hut, &sid, &file, &hub_at).await?);
        }
        res.raw.push(raw_ingest(docker, &file, &raw_at).await?);
        if i % 2 == 0 {
            res.hub
                .push(hub_ingest_explained(hut, &sid, &file, &hub_at).await?);
        }
    }
    let _ = std::fs::remove_file(&file.local);
    Ok(res)
}

pub fn report_ingest(c: &IngestResults, summary: &mut Vec<SummaryRow>) {
    let rates = |runs: &[IngestRun]| -> Vec<f64> {
        runs.iter()
            .map(|r| mb_per_s(c.file_bytes, r.secs))
            .collect()
    };
    let (raw, hub) = (rates(&c.raw), rates(&c.hub));
    let ratio = median(&hub) / median(&raw);
    let exact = |runs: &[IngestRun]| {
        runs.iter()
            .all(|r| r.exact && r.received == c.expected && r.resyncs == 0 && r.dropped == 0)
    };
    table(
        &format!(
            "3. Ingest throughput: `cat` of a {} byte text file ({} lines of {} chars + LF) \
             in the container; expected pane output after the trigger {} bytes (CRLF); \
             MB/s = file bytes / s",
            c.file_bytes, c.lines, LINE_CHARS, c.expected
        ),
        &[
            "path",
            "runs (MB/s)",
            "median MB/s",
            "bytes per run",
            "byte-exact (FNV + done line)",
            "resyncs / dropped",
            "target",
            "result",
        ],
    );
    let raw_name = "raw `tmux -C attach` through a non-TTY bollard exec, %output decoded";
    println!(
        "| {raw_name} | {} | {:.1} | {} | {} | - | baseline | - |",
        join(&raw, |x| format!("{x:.1}")),
        median(&raw),
        join(&c.raw, |r| r.received.to_string()),
        exact(&c.raw)
    );
    let hub_name = "hub container agent -> WebSocket subscriber";
    let target = format!(
        ">= {:.0}% of raw (is {:.0}%), lossless",
        THROUGHPUT_RATIO_TARGET * 100.0,
        ratio * 100.0
    );
    let result = verdict(ratio >= THROUGHPUT_RATIO_TARGET && exact(&c.hub));
    println!(
        "| {hub_name} | {} | {:.1} | {} | {} | {} | {target} | {result} |",
        join(&hub, |x| format!("{x:.1}")),
        median(&hub),
        join(&c.hub, |r| r.received.to_string()),
        exact(&c.hub),
        join(&c.hub, |r| format!("{} / {}", r.resyncs, r.dropped)),
    );
    println!(
        "\nHub session output_offset advance per run (REST; includes the done line and the \
         next prompt): {}; WebSocket subscriber behind the hub's ingest at the end (ms): {}",
        join(&c.hub, |r| r
            .offset_advance
            .map_or("?".into(), |o| o.to_string())),
        join(&c.hub, |r| r
            .ws_lag_ms
            .map_or("?".into(), |l| format!("{l:.1}"))),
    );
    println!("\nCPU seconds per run (2 cores = 2 CPU-s per s):\n");
    println!(
        "| run | wall s | this process | of which main thread (bench client) | of which tokio \
         workers (hub) | container (tmux + cat) | dockerd | chunks (WS frames / %output lines) \
         x avg bytes |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let runs = c.raw.iter().map(|r| ("raw", r));
    for (name, r) in runs.chain(c.hub.iter().map(|r| ("hub", r))) {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} x {:.0} |",
            r.secs,
            r.cpu_process,
            r.cpu_main,
            r.cpu_workers,
            opt_secs(r.cpu_container),
            opt_secs(r.cpu_dockerd),
            r.chunks,
            r.received as f64 / r.chunks.max(1) as f64
        );
    }
    println!(
        "\nvt100 emulation of one run's bytes (the hub's screen follower does this for every \
         session), single thread in this process: {:.2} s",
        c.screen_secs
    );
    summary.push(SummaryRow::value(
        raw_name,
        c.raw.len(),
        format!("{:.1} MB/s", median(&raw)),
        "baseline",
        "-",
    ));
    summary.push(SummaryRow::value(
        hub_name,
        c.hub.len(),
        format!("{:.1} MB/s", median(&hub)),
        &target,
        result,
    ));
}
