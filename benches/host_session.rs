//! Host-session benchmark: what the hub adds on top of a bare host PTY.
//!
//! Run with `cargo bench --bench host_session` (`-- --quick` for fewer iterations). `cargo test
//! --all-targets` also runs this binary, without `--bench`: it then prints one line and exits.
//!
//! One process serves the hub in-process on 127.0.0.1:0 and measures, in one run:
//! 1. keystroke -> echo round trip: through the hub (WebSocket input frame, and REST
//!    `send_line`, both seen on the session's WebSocket), on a bare portable-pty, through a hub
//!    tmux session, and with the older design (`tmux send-keys` + `capture-pane` polling);
//!    once back-to-back and once at typing pace (20 ms idle between lines, so each sample pays
//!    for waking idle threads and CPUs, as a real keystroke does);
//! 2. `talk` latency for `true`;
//! 3. ingest throughput of `cat` of a 100 MB text file, hub (seen by a WebSocket subscriber,
//!    byte-exact) against a bare portable-pty, interleaved;
//! 4. security costs (`security.rs`): echo through the redacted stream against the raw one,
//!    the hold on a possible secret prefix, and the audit log's cost per `send_line`.
//!
//! Echo fairness: every echo row runs the same program, `bash --norc --noprofile` with
//! `PS1='$ '`, and types the same kind of line, `#<token>` + Enter (a shell comment, so Enter
//! runs nothing). The clock stops when the token first appears in the output. Readline keeps
//! the terminal in raw mode and echoes in user space, as interactive agent CLIs do, so this is
//! the path a real keystroke takes; only the transport differs between rows. Between samples
//! we wait (untimed) for the next prompt, so samples never overlap. The bare PTY row writes and
//! reads synchronously on one thread: the lowest figure any design can reach.

use std::collections::BTreeMap;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_hub::client::HubClient;
use agent_hub::config::HubConfig;
use agent_hub::hub::{BackendKind, Hub};
use agent_hub::protocol::{CreateSessionRequest, ServerFrame};
use anyhow::{anyhow, bail, ensure, Context, Result};
use futures_util::{SinkExt, StreamExt};
use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

#[path = "common/mod.rs"]
mod common;
#[path = "host_session/security.rs"]
mod security;

use common::*;

const SKIPPED: &str = "host_session benchmark: skipped (run with cargo bench --bench host_session)";
/// Longest any single sample may take before the benchmark gives up.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest one throughput run may take.
const CAT_TIMEOUT: Duration = Duration::from_secs(120);
/// Idle time between lines in the "typing pace" echo rows (a fast typist: 50 keys/s).
const TYPING_GAP: Duration = Duration::from_millis(20);
/// The hub may add at most this much to the bare PTY's echo p50.
const ECHO_OVERHEAD_TARGET_MS: f64 = 0.5;
const TALK_P50_TARGET_MS: f64 = 2.0;
/// Hub throughput must be at least this share of the bare PTY's.
const THROUGHPUT_RATIO_TARGET: f64 = 0.8;
/// Name of the tokio runtime's threads (the hub's async tasks), for CPU accounting.
const WORKER_THREAD_NAME: &str = "bench-rt";
/// Test file: lines of 99 printable characters and '\n' (text, as agents print).
const LINE_CHARS: usize = 99;
/// Waits for one line on stdin, then becomes `cat FILE`: the trigger lets the clock start when
/// the subscriber is already attached, identically for the hub and the bare PTY.
const CAT_SCRIPT: &str = "read _; exec cat \"$1\"";
/// The trigger line's echo: the PTY prints "\n" as "\r\n".
const TRIGGER_ECHO_BYTES: u64 = 2;

/// Iteration counts.
struct Plan {
    quick: bool,
    warmup: usize,
    echo_samples: usize,
    /// Echo samples per row at typing pace.
    paced_samples: usize,
    /// Echo samples per row between switching rows (interleaving against noise).
    echo_block: usize,
    poll_samples: usize,
    talk_samples: usize,
    cat_runs: usize,
    file_lines: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        Plan {
            quick,
            warmup: if quick { 10 } else { 30 },
            echo_samples: if quick { 100 } else { 300 },
            paced_samples: if quick { 50 } else { 150 },
            echo_block: 50,
            poll_samples: if quick { 20 } else { 50 },
            talk_samples: if quick { 60 } else { 200 },
            cat_runs: if quick { 1 } else { 3 },
            file_lines: 1_000_000,
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("{SKIPPED}");
        return;
    }
    let plan = Plan::new(args.iter().any(|a| a == "--quick"));
    if let Err(e) = run(&plan) {
        eprintln!("host_session benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and report

fn latency_row(name: &str, s: Stats, target: &str, result: &str) {
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

struct EchoResults {
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

fn print_latency_table(echo: &EchoResults, talk: &[Duration]) {
    println!("\n### Latency (ms)\n");
    println!("| measurement | n | p50 | p99 | min | max | target | result |");
    println!("|---|---|---|---|---|---|---|---|");
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
    let t = stats(talk);
    latency_row(
        "talk `true`: REST POST .../talk round trip, no viewer",
        t,
        &format!("p50 <= {TALK_P50_TARGET_MS} ms"),
        verdict(t.p50_ms <= TALK_P50_TARGET_MS),
    );
}

// ---------------------------------------------------------------------------------------------
// Environment of the programs under test

/// Variables every program under test gets (the hub adds TERM, LANG and its pass-through list).
fn shell_env() -> BTreeMap<String, String> {
    [("PS1", "$ "), ("HISTFILE", "/dev/null")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The bare PTY's environment: what the hub would give the same program.
fn bare_env() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = ["PATH", "HOME", "USER", "LOGNAME"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    env.insert("TERM".into(), "xterm-256color".into());
    env.insert("LANG".into(), "C.UTF-8".into());
    env.extend(shell_env());
    env
}

const BASH_ARGS: [&str; 2] = ["--norc", "--noprofile"];

// ---------------------------------------------------------------------------------------------
// Bare portable-pty

/// A program on a portable-pty PTY, read and written synchronously.
struct BarePty {
    child: Box<dyn Child + Send + Sync>,
    reader: Box<dyn Read + Send>,
    writer: Box<dyn Write + Send>,
    _master: Box<dyn MasterPty + Send>,
    buf: Vec<u8>,
}

impl BarePty {
    fn spawn(program: &str, args: &[&str], cwd: &Path) -> Result<Self> {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 30,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| anyhow!("openpty: {e:#}"))?;
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.cwd(cwd);
        cmd.env_clear();
        for (k, v) in bare_env() {
            cmd.env(k, v);
        }
        let child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| anyhow!("spawn {program}: {e:#}"))?;
        drop(pair.slave);
        let reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| anyhow!("{e:#}"))?;
        let writer = pair.master.take_writer().map_err(|e| anyhow!("{e:#}"))?;
        Ok(BarePty {
            child,
            reader,
            writer,
            _master: pair.master,
            buf: Vec::new(),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes)?;
        self.writer.flush()?;
        Ok(())
    }

    /// One read into `chunk`; 0 at the end (Linux reports EIO once the program is gone).
    fn read_some(&mut self, chunk: &mut [u8]) -> usize {
        self.reader.read(chunk).unwrap_or(0)
    }

    /// Reads into `buf` until `needle` occurs at or after `from`; returns its position.
    fn wait_for(&mut self, needle: &[u8], from: usize) -> Result<usize> {
        let mut chunk = [0u8; 4096];
        let mut scan = from;
        loop {
            if let Some(at) = find(&self.buf, needle, scan) {
                return Ok(at);
            }
            scan = resume_at(self.buf.len(), needle, from);
            let n = self.read_some(&mut chunk);
            ensure!(n > 0, "the bare PTY program ended");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

impl Drop for BarePty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Hub WebSocket viewer

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket subscriber of one session: keeps (or only counts) the output bytes and
/// counts what the hub says it lost.
struct WsView {
    ws: WsStream,
    keep: bool,
    buf: Vec<u8>,
    received: u64,
    resyncs: u64,
    dropped: u64,
    exited: bool,
}

impl WsView {
    async fn connect(url: &str, keep: bool) -> Result<Self> {
        // Nagle off on our side, as any interactive client would do.
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
            .await
            .with_context(|| format!("connect {url}"))?;
        Ok(WsView {
            ws,
            keep,
            buf: Vec::new(),
            received: 0,
            resyncs: 0,
            dropped: 0,
            exited: false,
        })
    }

    async fn send_input(&mut self, data: &str) -> Result<()> {
        let frame = json!({ "type": "input", "data": data }).to_string();
        self.ws.send(Message::text(frame)).await?;
        Ok(())
    }

    /// Handles one message; false once the stream has ended.
    async fn pump(&mut self) -> Result<bool> {
        let message = match self.ws.next().await {
            None => return Ok(false),
            Some(m) => m?,
        };
        match message {
            Message::Binary(bytes) => {
                self.received += bytes.len() as u64;
                if self.keep {
                    self.buf.extend_from_slice(&bytes);
                }
            }
            Message::Text(text) => match serde_json::from_str::<ServerFrame>(text.as_str())? {
                ServerFrame::Resync { dropped_bytes, .. } => {
                    self.resyncs += 1;
                    self.dropped += dropped_bytes;
                }
                ServerFrame::Exit { .. } => self.exited = true,
                ServerFrame::Error { message, .. } => bail!("hub stream error: {message}"),
                ServerFrame::Hello { .. } => {}
            },
            Message::Close(_) => return Ok(false),
            _ => {}
        }
        Ok(true)
    }

    /// Receives until `needle` occurs in `buf` at or after `from`; returns its position.
    async fn wait_for(&mut self, needle: &[u8], from: usize) -> Result<usize> {
        let mut scan = from;
        loop {
            if let Some(at) = find(&self.buf, needle, scan) {
                return Ok(at);
            }
            scan = resume_at(self.buf.len(), needle, from);
            ensure!(self.pump().await?, "the session's stream ended");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The in-process hub

struct HubUnderTest {
    hub: Hub,
    client: HubClient,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl HubUnderTest {
    async fn start(tmux_socket: &str, data_dir: &Path) -> Result<Self> {
        Self::start_with(tmux_socket, data_dir, |_| {}).await
    }

    async fn start_with(
        tmux_socket: &str,
        data_dir: &Path,
        adjust: impl FnOnce(&mut HubConfig),
    ) -> Result<Self> {
        let mut config = HubConfig {
            tmux_socket: tmux_socket.to_string(),
            data_dir: data_dir.to_path_buf(),
            ..HubConfig::default()
        };
        adjust(&mut config);
        let hub = Hub::new(config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(agent_hub::api::serve(
            listener,
            hub.clone(),
            shutdown.clone(),
        ));
        Ok(HubUnderTest {
            hub,
            client: HubClient::new(&base),
            shutdown,
            server,
        })
    }

    async fn create(&self, req: CreateSessionRequest) -> Result<String> {
        Ok(self.client.create(&req).await?.session_id)
    }

    /// A `bash --norc --noprofile` session on `backend`, with its WebSocket at a prompt.
    async fn bash_session(&self, backend: BackendKind, cwd: &Path) -> Result<(String, WsView)> {
        let id = self
            .create(CreateSessionRequest {
                backend,
                shell: Some("bash".into()),
                args: BASH_ARGS.map(String::from).to_vec(),
                cwd: Some(cwd.display().to_string()),
                env: shell_env(),
                ..CreateSessionRequest::default()
            })
            .await?;
        let mut view = WsView::connect(&self.client.stream_url(&id, Some(0)), true).await?;
        // A tmux pane's first prompt may predate the control client: type a line instead.
        timed_out(hub_ws_echo(&mut view), "the first prompt").await?;
        Ok((id, view))
    }

    /// Deletes every session still registered, then stops the server.
    async fn stop(self) {
        for session in self.hub.list() {
            let _ = self.client.kill(session.id()).await;
        }
        self.hub.shutdown().await;
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.server).await;
    }
}

async fn timed_out<T>(f: impl std::future::Future<Output = Result<T>>, what: &str) -> Result<T> {
    tokio::time::timeout(SAMPLE_TIMEOUT, f)
        .await
        .map_err(|_| anyhow!("timed out waiting for {what}"))?
}

// ---------------------------------------------------------------------------------------------
// 1. Echo samples

fn bare_echo(pty: &mut BarePty) -> Result<Duration> {
    let token = next_token();
    pty.buf.clear();
    let start = Instant::now();
    pty.write(format!("#{token}\r").as_bytes())?;
    let at = pty.wait_for(token.as_bytes(), 0)?;
    let elapsed = start.elapsed();
    pty.wait_for(b"$ ", at + token.len())?;
    Ok(elapsed)
}

async fn hub_ws_echo(view: &mut WsView) -> Result<Duration> {
    let token = next_token();
    view.buf.clear();
    let start = Instant::now();
    view.send_input(&format!("#{token}\r")).await?;
    let at = view.wait_for(token.as_bytes(), 0).await?;
    let elapsed = start.elapsed();
    view.wait_for(b"$ ", at + token.len()).await?;
    Ok(elapsed)
}

async fn hub_rest_echo(client: &HubClient, id: &str, view: &mut WsView) -> Result<Duration> {
    let token = next_token();
    view.buf.clear();
    let line = format!("#{token}");
    let start = Instant::now();
    let seen = async {
        let at = view.wait_for(token.as_bytes(), 0).await?;
        Ok::<_, anyhow::Error>((start.elapsed(), at))
    };
    let (posted, seen) = tokio::join!(client.send_line(id, &line), seen);
    posted?;
    let (elapsed, at) = seen?;
    view.wait_for(b"$ ", at + token.len()).await?;
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
        match row {
            EchoRow::Bare => bare_echo(&mut self.bare),
            EchoRow::HubWs => rt.block_on(timed_out(hub_ws_echo(&mut self.pty_view), "WS echo")),
            EchoRow::HubRest => rt.block_on(timed_out(
                hub_rest_echo(client, &self.pty_id, &mut self.pty_view),
                "REST echo",
            )),
            EchoRow::HubTmux => {
                rt.block_on(timed_out(hub_ws_echo(&mut self.tmux_view), "tmux WS echo"))
            }
        }
    }

    /// `samples` samples of every row after `warmup` discarded ones, interleaved in blocks
    /// whose order rotates every round, so drifting machine load (and whatever the previous
    /// block left warm or cold) hits every row alike. `gap` is idle time after each sample.
    fn interleave(
        &mut self,
        rt: &tokio::runtime::Runtime,
        client: &HubClient,
        rows: &[EchoRow],
        (warmup, samples, block): (usize, usize, usize),
        gap: Duration,
    ) -> Result<Vec<EchoSeries>> {
        let mut taken: Vec<Vec<Duration>> = vec![Vec::new(); rows.len()];
        let mut left = warmup + samples;
        let mut round = 0;
        while left > 0 {
            let n = left.min(block);
            for k in 0..rows.len() {
                let i = (round + k) % rows.len();
                for _ in 0..n {
                    taken[i].push(self.sample(rt, client, rows[i])?);
                    std::thread::sleep(gap);
                }
            }
            round += 1;
            left -= n;
        }
        Ok(rows
            .iter()
            .zip(taken)
            .map(|(&row, mut samples)| EchoSeries {
                row,
                samples: samples.split_off(warmup),
            })
            .collect())
    }
}

/// All echo rows: back-to-back (the next line is typed as soon as the prompt is back) and at
/// typing pace (idle between lines, so every sample pays the wake-ups of idle threads and
/// CPUs, as a real keystroke does), then the older polling design.
fn measure_echo(
    rt: &tokio::runtime::Runtime,
    hut: &HubUnderTest,
    plan: &Plan,
    dirs: &Dirs,
) -> Result<EchoResults> {
    let mut bare = BarePty::spawn("bash", &BASH_ARGS, &dirs.work)?;
    bare.wait_for(b"$ ", 0)?;
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

// ---------------------------------------------------------------------------------------------
// 2. Talk

async fn measure_talk(hut: &HubUnderTest, plan: &Plan, cwd: &Path) -> Result<Vec<Duration>> {
    let (id, view) = hut.bash_session(BackendKind::Pty, cwd).await?;
    // A talk is measured with no viewer attached (a viewer only adds its own fan-out work).
    drop(view);
    let mut samples = Vec::new();
    let result = async {
        for i in 0..plan.warmup + plan.talk_samples {
            let start = Instant::now();
            let reply = timed_out(
                async { Ok(hut.client.talk(&id, "true", Some(10_000)).await?) },
                "talk",
            )
            .await?;
            let elapsed = start.elapsed();
            ensure!(
                reply.result.exit_code == Some(0),
                "talk `true` replied {reply:?}"
            );
            if i >= plan.warmup {
                samples.push(elapsed);
            }
        }
        Ok(())
    }
    .await;
    let _ = hut.client.kill(&id).await;
    result.map(|_| samples)
}

// ---------------------------------------------------------------------------------------------
// 3. Throughput

/// Writes `lines` lines of LINE_CHARS printable characters and '\n'; returns the file size.
fn write_text_file(path: &Path, lines: usize) -> Result<u64> {
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let alphabet: Vec<u8> = (b'!'..=b'~').collect();
    let mut line = vec![0u8; LINE_CHARS + 1];
    for i in 0..lines {
        let head = format!("{i:09} ");
        line[..head.len()].copy_from_slice(head.as_bytes());
        for (j, byte) in line[head.len()..LINE_CHARS].iter_mut().enumerate() {
            *byte = alphabet[(i + j) % alphabet.len()];
        }
        line[LINE_CHARS] = b'\n';
        out.write_all(&line)?;
    }
    out.flush()?;
    Ok(std::fs::metadata(path)?.len())
}

/// CPU seconds used so far by this process's threads and its waited-for children (Linux
/// `/proc`; zeros where it cannot be read). Threads that ended still count in `process`.
#[derive(Debug, Clone, Copy, Default)]
struct CpuTimes {
    /// All threads of this process.
    process: f64,
    /// The main thread: the bench's client side (bare reads, or the WebSocket subscriber).
    main: f64,
    /// The tokio worker threads: the hub's async tasks (HTTP, WebSocket, screen follower).
    workers: f64,
    /// Waited-for child processes (`cat`).
    children: f64,
}

impl CpuTimes {
    fn now() -> Self {
        let tick = clock_ticks_per_second();
        let read = |path: &str| -> Option<Vec<f64>> {
            let text = std::fs::read_to_string(path).ok()?;
            // Fields after the parenthesised command name, from field 3 (state) on.
            let rest = &text[text.rfind(')')? + 2..];
            let fields: Vec<f64> = rest
                .split_whitespace()
                .skip(11)
                .take(4)
                .map(|f| f.parse::<f64>().unwrap_or(0.0) / tick)
                .collect();
            (fields.len() == 4).then_some(fields)
        };
        let comm = |task: &Path| std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        let own = read("/proc/self/stat").unwrap_or_else(|| vec![0.0; 4]);
        let main = read(&format!("/proc/self/task/{}/stat", std::process::id()))
            .map_or(0.0, |f| f[0] + f[1]);
        let workers = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|t| comm(&t.path()).starts_with(WORKER_THREAD_NAME))
            .filter_map(|t| read(&t.path().join("stat").display().to_string()))
            .map(|f| f[0] + f[1])
            .sum();
        CpuTimes {
            process: own[0] + own[1],
            main,
            workers,
            children: own[2] + own[3],
        }
    }

    fn since(self, before: CpuTimes) -> CpuTimes {
        CpuTimes {
            process: self.process - before.process,
            main: self.main - before.main,
            workers: self.workers - before.workers,
            children: self.children - before.children,
        }
    }
}

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
    let mut view = WsView::connect(&hut.client.stream_url(id, Some(0)), false).await?;
    let mut progress = hut.hub.get(id)?.output().watch_progress();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cpu_before = CpuTimes::now();
    // When the hub's pipeline holds every byte (in-process observer, not part of the API).
    let ingested = tokio::spawn(async move {
        while *progress.borrow_and_update() < expected {
            if progress.changed().await.is_err() {
                break;
            }
        }
        Instant::now()
    });
    let start = Instant::now();
    view.send_input("\n").await?;
    while view.received < expected && !view.exited && view.pump().await? {}
    let done = Instant::now();
    // Drain to the exit frame, so any byte beyond the expected count is counted too (and the
    // hub has reaped `cat`, so its CPU time is counted).
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while !view.exited && view.pump().await.unwrap_or(false) {}
    })
    .await;
    let cpu = CpuTimes::now().since(cpu_before);
    // The observer has normally finished long ago; give a starved one a moment.
    let ws_lag_ms = tokio::time::timeout(Duration::from_secs(1), ingested)
        .await
        .ok()
        .and_then(|joined| joined.ok())
        .map(|at| done.saturating_duration_since(at).as_secs_f64() * 1e3);
    let info = hut.client.session(id).await?;
    Ok(CatRun {
        secs: done.duration_since(start).as_secs_f64(),
        received: view.received,
        ws_lag_ms,
        hub_offset: Some(info.session.output_offset),
        resyncs: view.resyncs,
        dropped: view.dropped,
        cpu,
    })
}

struct CatResults {
    file_bytes: u64,
    expected: u64,
    bare: Vec<CatRun>,
    hub: Vec<CatRun>,
}

fn measure_cat(
    rt: &tokio::runtime::Runtime,
    hut: &HubUnderTest,
    plan: &Plan,
    dirs: &Dirs,
) -> Result<CatResults> {
    let file = dirs.work.join("big.txt");
    let file_bytes = write_text_file(&file, plan.file_lines)?;
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

fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

fn print_cat_table(c: &CatResults) {
    let rates = |runs: &[CatRun]| -> Vec<f64> {
        runs.iter()
            .map(|r| mb_per_s(c.file_bytes, r.secs))
            .collect()
    };
    let (bare, hub) = (rates(&c.bare), rates(&c.hub));
    let ratio = median(&hub) / median(&bare);
    let exact = |runs: &[CatRun]| runs.iter().all(|r| r.received == c.expected);
    let lossless = exact(&c.hub) && c.hub.iter().all(|r| r.resyncs == 0 && r.dropped == 0);

    println!(
        "\n### Ingest throughput: `cat` of a {} byte text file ({} lines of {} chars + LF); \
         expected PTY output {} bytes; MB/s = file bytes / s\n",
        c.file_bytes,
        c.file_bytes / (LINE_CHARS as u64 + 1),
        LINE_CHARS,
        c.expected
    );
    println!("| path | runs (MB/s) | median MB/s | bytes received per run | resyncs / dropped bytes | target | result |");
    println!("|---|---|---|---|---|---|---|");
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
    println!("\n### CPU seconds per throughput run (wall time in brackets)\n");
    println!("| path | `cat` (child) | reader side | hub tokio workers | bench client (main thread) | total |");
    println!("|---|---|---|---|---|---|");
    for r in &c.bare {
        let u = r.cpu;
        println!(
            "| bare ({:.2} s) | {:.2} | {:.2} (main thread) | - | - | {:.2} |",
            r.secs,
            u.children,
            u.main,
            u.process + u.children
        );
    }
    for r in &c.hub {
        let u = r.cpu;
        println!(
            "| hub ({:.2} s) | {:.2} | {:.2} (hub PTY threads) | {:.2} | {:.2} | {:.2} |",
            r.secs,
            u.children,
            u.process - u.main - u.workers,
            u.workers,
            u.main,
            u.process + u.children
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Orchestration, environment, cleanup

/// Temporary directory and tmux socket names; dropping it kills both tmux servers and removes
/// the directory, on every exit path.
struct Dirs {
    _tmp: tempfile::TempDir,
    work: PathBuf,
    hub_socket: String,
    poll_socket: String,
}

impl Dirs {
    fn new() -> Result<Self> {
        let tmp = tempfile::Builder::new().prefix("ah-bench-").tempdir()?;
        let pid = std::process::id();
        Ok(Dirs {
            work: tmp.path().to_path_buf(),
            _tmp: tmp,
            hub_socket: format!("ah-bench-{pid}"),
            poll_socket: format!("ah-bench-poll-{pid}"),
        })
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        for socket in [&self.hub_socket, &self.poll_socket] {
            let _ = Command::new("tmux")
                .args(["-L", socket, "kill-server"])
                .env_remove("TMUX")
                .output();
            // tmux leaves the socket file behind.
            if let Some(path) = tmux_socket_path(socket) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Where `tmux -L name` puts its socket: `$TMUX_TMPDIR` (or /tmp), `tmux-<uid>/name`.
fn tmux_socket_path(name: &str) -> Option<PathBuf> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .to_string();
    let dir = std::env::var_os("TMUX_TMPDIR").unwrap_or_else(|| "/tmp".into());
    Some(PathBuf::from(dir).join(format!("tmux-{uid}")).join(name))
}

fn print_header(plan: &Plan) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("## host_session benchmark\n");
    println!(
        "- environment: {cores} cores, {}, kernel {}, {}, {} (UTC {})",
        command_output("rustc", &["--version"]),
        command_output("uname", &["-r"]),
        command_output("tmux", &["-V"]),
        command_output("bash", &["-c", "echo bash $BASH_VERSION"]),
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S"),
    );
    println!(
        "- command: `cargo bench --bench host_session{}` (release profile)",
        if plan.quick { " -- --quick" } else { "" }
    );
    println!(
        "- hub: in-process, HubConfig::default() (scrollback {} bytes), API on 127.0.0.1:0; \
         programs: `bash --norc --noprofile` (PS1='$ '), `sh -c 'read _; exec cat FILE'`",
        HubConfig::default().scrollback_bytes
    );
    println!(
        "- samples: echo {} per row back-to-back after {} warm-up (interleaved in blocks of {}), \
         {} per row at typing pace, poll {}, talk {}, cat {} run(s) each",
        plan.echo_samples,
        plan.warmup,
        plan.echo_block,
        plan.paced_samples,
        plan.poll_samples,
        plan.talk_samples,
        plan.cat_runs
    );
}

fn run(plan: &Plan) -> Result<()> {
    print_header(plan);
    let dirs = Dirs::new()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name(WORKER_THREAD_NAME)
        .enable_all()
        .build()?;
    let hut = rt.block_on(HubUnderTest::start(&dirs.hub_socket, &dirs.work))?;
    let result = (|| {
        eprintln!("measuring echo round trips...");
        let echo = measure_echo(&rt, &hut, plan, &dirs)?;
        eprintln!("measuring talk...");
        let talk = rt.block_on(measure_talk(&hut, plan, &dirs.work))?;
        print_latency_table(&echo, &talk);
        eprintln!("measuring throughput...");
        let cat = measure_cat(&rt, &hut, plan, &dirs)?;
        print_cat_table(&cat);
        eprintln!("measuring security costs...");
        let security = security::measure(&rt, &hut, plan, &dirs)?;
        security::print(&security);
        Ok(())
    })();
    rt.block_on(hut.stop());
    result
}
