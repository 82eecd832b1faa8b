//! Container-agent benchmark: what the hub adds on top of a bare `docker exec`, for agents that
//! run in Docker containers.
//!
//! Run with `cargo bench --bench docker_agents`. Options after `--`: `--quick` (fewer
//! iterations), `--parts 1,3` (only those measurements), `--concurrent N`, `--idle-agents N`,
//! `--idle-wave N` (idle agents started N at a time, default 25), `--ingest-runs N`, and the
//! experiment `--server-nodelay` (serve with TCP_NODELAY on accepted sockets). It needs a Docker
//! engine and the test image `agent-hub/agent:test` (`docker/build-offline.sh`;
//! `AGENT_HUB_TEST_IMAGE` names another); without them it says why and exits. `cargo test
//! --all-targets` also runs this binary, without `--bench`: it then prints one line and exits.
//!
//! One process serves the hub in-process on 127.0.0.1:0 (hub id `bench<pid>`, every container
//! labelled with it and removed at the end, on every exit path) and drives it over HTTP and
//! WebSocket like any client. It measures, in one run:
//! 1. keystroke -> echo round trip for a container agent: WebSocket input frame and REST
//!    `send_line`, both seen on the session's WebSocket; next to them a raw bollard TTY exec of
//!    `tmux attach` (no hub) and the older design (`docker exec tmux send-keys` + `capture-pane`
//!    polling through the docker CLI);
//! 2. `talk` latency for `true`;
//! 3. ingest throughput of `cat` of a 50 MB text file in the container, hub (WebSocket
//!    subscriber, byte-exact) against a raw `tmux -C` control client through a non-TTY exec;
//! 4. starting N agents concurrently until all are ready, then stopping them;
//! 5. memory and CPU of the hub process with N attached idle agents.
//!
//! Every echo row runs the same program in the same image, `bash --norc --noprofile` with
//! `PS1='$ '` inside the image's tmux session `agent`, and types `#<token>` + Enter (a comment).
//! The clock stops when the token first appears in the output; between samples we wait
//! (untimed) for the next prompt.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_hub::backend::tmux_control::{send_bytes_commands, ControlMessage, ControlParser};
use agent_hub::backend::TermSize;
use agent_hub::client::HubClient;
use agent_hub::config::HubConfig;
use agent_hub::hub::Hub;
use agent_hub::output::Output;
use agent_hub::protocol::{AgentStartReply, AgentStatus, ServerFrame};
use agent_hub::screen::{Screen, SCREEN_SCROLLBACK_ROWS};
use anyhow::{anyhow, bail, ensure, Context, Result};
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::query_parameters::ResizeExecOptionsBuilder;
use bollard::Docker;
use futures_util::stream::Stream;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

#[path = "common/mod.rs"]
mod common;
use common::*;

const SKIPPED: &str =
    "docker_agents benchmark: skipped (run with cargo bench --bench docker_agents)";
const DEFAULT_IMAGE: &str = "agent-hub/agent:test";
/// The tmux session the image's entrypoint starts.
const TMUX_SESSION: &str = "agent";
/// Longest any single sample may take before the benchmark gives up.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest one throughput run may take.
const INGEST_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest one agent start or stop request may take.
const OP_TIMEOUT: Duration = Duration::from_secs(600);
/// `ready_timeout` of every agent: generous, because N containers start at once on 2 cores.
const READY_TIMEOUT_S: u64 = 300;
/// No output for this long means the shell is waiting.
const QUIET: Duration = Duration::from_millis(300);
/// Idle time before measuring memory, so start-up work has settled.
const SETTLE: Duration = Duration::from_secs(2);
/// Detach keys for the raw TTY exec: a sequence this benchmark never types.
const UNUSED_DETACH_KEYS: &str = "ctrl-^,ctrl-_";
/// Name of the tokio runtime's threads (the hub's async tasks), for CPU accounting.
const WORKER_THREAD_NAME: &str = "hub-rt";

const ECHO_P50_TARGET_MS: f64 = 2.0;
const ECHO_P99_TARGET_MS: f64 = 10.0;
const TALK_P50_TARGET_MS: f64 = 3.0;
/// Hub throughput must be at least this share of the raw control client's.
const THROUGHPUT_RATIO_TARGET: f64 = 0.8;
/// Hub memory per idle agent, beyond the scrollback bytes it holds.
const RSS_PER_AGENT_TARGET_KB: f64 = 256.0;
const IDLE_CPU_TARGET_PCT: f64 = 1.0;

/// Test file: lines of 99 printable characters and '\n' (text, as agents print).
const LINE_CHARS: usize = 99;
const FILE_IN_CONTAINER: &str = "/tmp/big.txt";
/// Typed (untimed) before each throughput run: the shell then waits in `read` for the trigger,
/// so the clock starts with the subscriber attached and nothing else in flight. The marker is
/// quoted so the typed line's echo never contains it.
const INGEST_COMMAND: &str = "read _; cat /tmp/big.txt; echo DONE_MA''RK\r";
/// What follows the file's bytes in the output.
const DONE_LINE: &[u8] = b"DONE_MARK\r\n";
/// The trigger "\r" echoed by the terminal in canonical mode: "\r\n".
const TRIGGER_ECHO: &[u8] = b"\r\n";

/// Iteration counts and scale.
struct Plan {
    quick: bool,
    warmup: usize,
    echo_samples: usize,
    /// Echo samples per row between switching rows (interleaving against noise).
    echo_block: usize,
    poll_samples: usize,
    talk_samples: usize,
    ingest_runs: usize,
    file_lines: usize,
    concurrent: usize,
    idle_agents: usize,
    /// How many of the idle agents are started at once.
    idle_wave: usize,
    idle_window: Duration,
    /// Serve `api::router` with TCP_NODELAY on accepted sockets instead of `api::serve` (an
    /// experiment: what the hub would do with Nagle off on its side).
    server_nodelay: bool,
    /// Which of the numbered measurements to run (`--parts 1,3`; default all).
    parts: Vec<u8>,
}

impl Plan {
    fn from_args(args: &[String]) -> Result<Self> {
        let quick = args.iter().any(|a| a == "--quick");
        let number = |flag: &str, default: usize| -> Result<usize> {
            match args.iter().position(|a| a == flag) {
                None => Ok(default),
                Some(i) => args
                    .get(i + 1)
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| anyhow!("{flag} needs a number")),
            }
        };
        Ok(Plan {
            quick,
            warmup: if quick { 10 } else { 30 },
            echo_samples: if quick { 100 } else { 300 },
            echo_block: 50,
            poll_samples: if quick { 10 } else { 30 },
            talk_samples: if quick { 60 } else { 200 },
            ingest_runs: number("--ingest-runs", if quick { 1 } else { 5 })?,
            file_lines: 500_000,
            concurrent: number("--concurrent", 50)?,
            idle_agents: number("--idle-agents", 100)?,
            idle_wave: number("--idle-wave", 25)?.max(1),
            idle_window: Duration::from_secs(10),
            parts: parse_parts(args)?,
            server_nodelay: args.iter().any(|a| a == "--server-nodelay"),
        })
    }

    fn runs(&self, part: u8) -> bool {
        self.parts.contains(&part)
    }

    fn scale_agents(&self) -> usize {
        self.concurrent.max(self.idle_agents)
    }
}

fn parse_parts(args: &[String]) -> Result<Vec<u8>> {
    let Some(i) = args.iter().position(|a| a == "--parts") else {
        return Ok(vec![1, 2, 3, 4, 5]);
    };
    let list = args.get(i + 1).map(String::as_str).unwrap_or("");
    list.split(',')
        .map(|p| match p.trim().parse::<u8>() {
            Ok(n @ 1..=5) => Ok(n),
            _ => Err(anyhow!(
                "--parts takes numbers 1-5, e.g. 1,3 (got '{list}')"
            )),
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("{SKIPPED}");
        return;
    }
    let image = test_image();
    if let Some(why) = docker_missing(&image) {
        println!("docker_agents benchmark: skipped ({why})");
        return;
    }
    let result = Plan::from_args(&args).and_then(|plan| run(&plan, &image));
    if let Err(e) = result {
        eprintln!("docker_agents benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

fn test_image() -> String {
    std::env::var("AGENT_HUB_TEST_IMAGE").unwrap_or_else(|_| DEFAULT_IMAGE.into())
}

/// Why the benchmark cannot run here, if it cannot.
fn docker_missing(image: &str) -> Option<String> {
    if docker_cli(&["info"]).is_err() {
        return Some("no Docker engine answers `docker info`".into());
    }
    if docker_cli(&["image", "inspect", image]).is_err() {
        return Some(format!(
            "the image {image} is missing: build it with docker/build-offline.sh"
        ));
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Statistics and report

/// One line of the final summary table.
struct SummaryRow {
    name: String,
    n: String,
    p50: String,
    p99: String,
    target: String,
    result: String,
}

impl SummaryRow {
    fn latency(name: &str, s: Stats, target: &str, result: &str) -> Self {
        SummaryRow {
            name: name.into(),
            n: s.n.to_string(),
            p50: format!("{:.3} ms", s.p50_ms),
            p99: format!("{:.3} ms", s.p99_ms),
            target: target.into(),
            result: result.into(),
        }
    }

    fn value(name: &str, n: usize, value: String, target: &str, result: &str) -> Self {
        SummaryRow {
            name: name.into(),
            n: n.to_string(),
            p50: value,
            p99: "-".into(),
            target: target.into(),
            result: result.into(),
        }
    }
}

fn print_summary(rows: &[SummaryRow]) {
    println!("\n### Summary\n");
    println!("| measurement | n | p50 (or value) | p99 | target | result |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.name, r.n, r.p50, r.p99, r.target, r.result
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens, byte search, checksums

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Counts a throughput run's output after the trigger: checksums the first `expected` bytes
/// (the trigger's echo and the file) and keeps what follows, which must be [`DONE_LINE`].
struct Tally {
    expected: u64,
    received: u64,
    hash: u64,
    tail: Vec<u8>,
    /// When the `expected`-th byte arrived.
    done_at: Option<Instant>,
}

impl Tally {
    fn new(expected: u64) -> Self {
        Tally {
            expected,
            received: 0,
            hash: FNV_OFFSET,
            tail: Vec::new(),
            done_at: None,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let head = (self.expected.saturating_sub(self.received) as usize).min(bytes.len());
        self.hash = fnv1a(self.hash, &bytes[..head]);
        let room = 64usize.saturating_sub(self.tail.len());
        self.tail
            .extend_from_slice(&bytes[head..][..room.min(bytes.len() - head)]);
        self.received += bytes.len() as u64;
        if self.received >= self.expected && self.done_at.is_none() {
            self.done_at = Some(Instant::now());
        }
    }

    /// Everything up to and including the done line has arrived.
    fn complete(&self) -> bool {
        self.received >= self.expected && self.tail.len() >= DONE_LINE.len()
    }

    /// The bytes are exactly the expected ones, followed by the done line.
    fn exact(&self, expected_hash: u64) -> bool {
        self.hash == expected_hash && self.tail.starts_with(DONE_LINE)
    }
}

// ---------------------------------------------------------------------------------------------
// The docker CLI and /proc

fn docker_cli(args: &[&str]) -> Result<String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .context("run the docker CLI")?;
    ensure!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Removes every container labelled with this benchmark's hub id when dropped: on success,
/// on error and on panic.
struct ContainerGuard(String);

impl ContainerGuard {
    fn remove_all(&self) -> usize {
        let label = format!("label=agent-hub.hub={}", self.0);
        let ids: Vec<String> = docker_cli(&["ps", "-aq", "--filter", &label])
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect();
        if !ids.is_empty() {
            let mut args = vec!["rm", "-f"];
            args.extend(ids.iter().map(String::as_str));
            let _ = docker_cli(&args);
        }
        ids.len()
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let removed = self.remove_all();
        if removed > 0 {
            eprintln!(
                "cleanup: removed {removed} leftover container(s) of {}",
                self.0
            );
        }
    }
}

/// utime + stime of a process, in seconds.
fn cpu_secs(pid: &str) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name, from field 3 (state) on.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    (fields.len() == 2).then(|| (fields[0] + fields[1]) / clock_ticks_per_second())
}

fn own_cpu_secs() -> f64 {
    cpu_secs("self").unwrap_or(f64::NAN)
}

/// CPU seconds of this process's main thread (the bench client) and of its tokio workers
/// (the hub's tasks, and the bench's spawned ones).
fn thread_cpu_secs() -> (f64, f64) {
    let main = cpu_secs(&format!("self/task/{}", std::process::id())).unwrap_or(f64::NAN);
    let workers = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.starts_with(WORKER_THREAD_NAME))
        })
        .filter_map(|t| cpu_secs(&format!("self/task/{}", t.file_name().to_string_lossy())))
        .sum();
    (main, workers)
}

fn dockerd_pid() -> Option<String> {
    let pids = command_output("pidof", &["dockerd"]);
    pids.split_whitespace().next().map(String::from)
}

/// CPU seconds of a container's cgroup (cgroup v1 cpuacct or v2), if readable.
fn container_cpu_secs(full_id: &str) -> Option<f64> {
    let v1 = format!("/sys/fs/cgroup/cpuacct/docker/{full_id}/cpuacct.usage");
    if let Ok(ns) = std::fs::read_to_string(v1) {
        return ns.trim().parse::<f64>().ok().map(|n| n / 1e9);
    }
    let v2 = format!("/sys/fs/cgroup/system.slice/docker-{full_id}.scope/cpu.stat");
    let text = std::fs::read_to_string(v2).ok()?;
    let usec = text.lines().find_map(|l| l.strip_prefix("usage_usec "))?;
    usec.trim().parse::<f64>().ok().map(|u| u / 1e6)
}

/// `VmRSS` and `RssAnon` of this process, in kB.
fn rss_kb() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("RssAnon:"))
}

/// Returns freed heap memory to the kernel (glibc), so RSS shows live memory only.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() -> bool {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::os::raw::c_int;
    }
    // SAFETY: malloc_trim only releases free memory of glibc's allocator.
    unsafe { malloc_trim(0) };
    true
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() -> bool {
    false
}

// ---------------------------------------------------------------------------------------------
// The in-process hub

fn agent_toml(id: &str, image: &str) -> String {
    format!(
        "\n[[agents]]\nid = \"{id}\"\nimage = \"{image}\"\n\
         command = [\"bash\", \"--norc\", \"--noprofile\"]\nnetwork = \"none\"\n\
         env = {{ PS1 = \"$ \", HISTFILE = \"/dev/null\" }}\n\
         ready_pattern = '(?m)[$#] *$'\nready_timeout = {READY_TIMEOUT_S}\nstop_grace = 2\n\
         remove_on_stop = true\n"
    )
}

fn scale_ids(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("s{i:03}")).collect()
}

fn bench_config(hub_id: &str, data_dir: &Path, image: &str, plan: &Plan) -> Result<HubConfig> {
    let mut text = format!(
        "hub_id = \"{hub_id}\"\ndata_dir = \"{}\"\ntmux_socket = \"ah-{hub_id}\"\n",
        data_dir.display()
    );
    for id in ["echo", "ingest"]
        .map(String::from)
        .into_iter()
        .chain(scale_ids(plan.scale_agents()))
    {
        text.push_str(&agent_toml(&id, image));
    }
    HubConfig::parse(&text, "bench.toml").map_err(|e| anyhow!(e))
}

struct HubUnderTest {
    hub: Hub,
    client: HubClient,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl HubUnderTest {
    async fn start(config: HubConfig, nodelay: bool) -> Result<Self> {
        let hub = Hub::new(config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let server = if nodelay {
            tokio::spawn(serve_nodelay(listener, hub.clone()))
        } else {
            tokio::spawn(agent_hub::api::serve(listener, hub.clone(), hub.closing()))
        };
        agent_hub::agents::sync::spawn(&hub);
        Ok(HubUnderTest {
            hub,
            client: HubClient::new(&base),
            server,
        })
    }

    /// Starts an agent through the API; returns its session id and container id.
    async fn start_agent(&self, id: &str) -> Result<(String, String)> {
        timed_out(
            async { Ok(self.client.agent_op(id, "start").await?) },
            OP_TIMEOUT,
            "agent start",
        )
        .await?;
        let agent = self.client.agent(id).await?.agent;
        let field = |name: &str, value: &Option<String>| {
            value
                .clone()
                .ok_or_else(|| anyhow!("agent {id} has no {name}: {agent:?}"))
        };
        Ok((
            field("session_id", &agent.session_id)?,
            field("container_id", &agent.container_id)?,
        ))
    }

    async fn output_offset(&self, sid: &str) -> Result<u64> {
        let info = self.client.session(sid).await?;
        Ok(info.session.output_offset)
    }

    /// Stops every agent still running, then shuts the hub and its server down.
    async fn stop(self) {
        let running: Vec<String> = self
            .client
            .agents()
            .await
            .ok()
            .map(|v| v.agents)
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.status != AgentStatus::Stopped)
            .map(|a| a.id)
            .collect();
        let _ = agent_ops(self.client.base(), &running, "stop").await;
        self.hub.shutdown().await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.server).await;
    }
}

/// `api::serve`, but with TCP_NODELAY set on every accepted connection.
async fn serve_nodelay(listener: tokio::net::TcpListener, hub: Hub) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let closing = hub.closing();
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, agent_hub::api::router(hub))
        .with_graceful_shutdown(async move { closing.cancelled().await })
        .await
}

async fn timed_out<T>(
    f: impl std::future::Future<Output = Result<T>>,
    limit: Duration,
    what: &str,
) -> Result<T> {
    tokio::time::timeout(limit, f)
        .await
        .map_err(|_| anyhow!("timed out waiting for {what}"))?
}

/// One agent operation's outcome.
struct OpResult {
    id: String,
    took: Duration,
    outcome: Result<AgentStartReply>,
}

/// `POST /v1/agents/{id}/{op}` for every id at once, from a client of its own (dropped at the
/// end, so its connections do not stay in this process). Returns each outcome and the wall
/// time until the last reply.
async fn agent_ops(base: &str, ids: &[String], op: &str) -> (Vec<OpResult>, Duration) {
    let client = HubClient::new(base);
    let start = Instant::now();
    let ops = ids.iter().map(|id| {
        let client = client.clone();
        async move {
            let t0 = Instant::now();
            let outcome =
                timed_out(async { Ok(client.agent_op(id, op).await?) }, OP_TIMEOUT, op).await;
            OpResult {
                id: id.clone(),
                took: t0.elapsed(),
                outcome,
            }
        }
    });
    let results = futures_util::future::join_all(ops).await;
    (results, start.elapsed())
}

// ---------------------------------------------------------------------------------------------
// Hub WebSocket viewer

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket subscriber of one session: keeps the output bytes (or feeds them to a tally)
/// and counts what the hub says it lost.
struct WsView {
    ws: WsStream,
    buf: Vec<u8>,
    tally: Option<Tally>,
    /// Absolute offset just past the last byte received.
    next_offset: u64,
    frames: u64,
    resyncs: u64,
    dropped: u64,
}

impl WsView {
    async fn connect(url: &str) -> Result<Self> {
        // Nagle off on our side, as any interactive client would do.
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
            .await
            .with_context(|| format!("connect {url}"))?;
        Ok(WsView {
            ws,
            buf: Vec::new(),
            tally: None,
            next_offset: 0,
            frames: 0,
            resyncs: 0,
            dropped: 0,
        })
    }

    async fn send_input(&mut self, data: &str) -> Result<()> {
        let frame = json!({ "type": "input", "data": data }).to_string();
        self.ws.send(Message::text(frame)).await?;
        Ok(())
    }

    /// Handles one message; an error says why the stream ended.
    async fn pump(&mut self) -> Result<()> {
        let message = match self.ws.next().await {
            None => bail!("the session's WebSocket ended (EOF)"),
            Some(m) => m?,
        };
        match message {
            Message::Binary(bytes) => {
                self.next_offset += bytes.len() as u64;
                self.frames += 1;
                match &mut self.tally {
                    Some(t) => t.feed(&bytes),
                    None => self.buf.extend_from_slice(&bytes),
                }
            }
            Message::Text(text) => match serde_json::from_str::<ServerFrame>(text.as_str())? {
                ServerFrame::Hello { offset, .. } => self.next_offset = offset,
                ServerFrame::Resync {
                    dropped_bytes,
                    offset,
                } => {
                    self.resyncs += 1;
                    self.dropped += dropped_bytes;
                    self.next_offset = offset;
                }
                ServerFrame::Exit { exit_code, reason } => {
                    bail!("the hub ended the session's stream: exit {exit_code:?}, {reason}")
                }
                ServerFrame::Error { message, .. } => bail!("hub stream error: {message}"),
            },
            Message::Close(frame) => bail!("the hub closed the session's WebSocket: {frame:?}"),
            _ => {}
        }
        Ok(())
    }

    /// Receives until `needle` occurs in `buf` at or after `from`; returns its position.
    async fn wait_for(&mut self, needle: &[u8], from: usize) -> Result<usize> {
        let mut scan = from;
        loop {
            if let Some(at) = find(&self.buf, needle, scan) {
                return Ok(at);
            }
            scan = resume_at(self.buf.len(), needle, from);
            self.pump().await?;
        }
    }

    /// Receives until nothing has arrived for [`QUIET`].
    async fn wait_quiet(&mut self) -> Result<()> {
        let deadline = Instant::now() + SAMPLE_TIMEOUT;
        while let Ok(pumped) = tokio::time::timeout(QUIET, self.pump()).await {
            pumped?;
            ensure!(Instant::now() < deadline, "the session never went quiet");
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Raw docker exec, without the hub

type LogStream =
    Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send + 'static>>;

/// A process in a container through a bollard exec, its stdin and its output, read directly.
struct RawExec {
    output: LogStream,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    buf: Vec<u8>,
}

impl RawExec {
    /// Starts `cmd` in `container`. With `tty`, the exec gets a TTY, resized to 120x30 right
    /// after start (before start it hangs, see the field notes).
    async fn start(docker: &Docker, container: &str, cmd: &[&str], tty: bool) -> Result<Self> {
        let config = ExecConfig {
            cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(tty),
            tty: Some(tty),
            env: Some(vec!["LANG=C.UTF-8".into(), "TERM=xterm-256color".into()]),
            detach_keys: Some(UNUSED_DETACH_KEYS.into()),
            ..Default::default()
        };
        let exec = docker.create_exec(container, config).await?.id;
        // `None`: the daemon frames the stream, so every byte arrives exactly.
        let started = docker.start_exec(&exec, None::<StartExecOptions>).await?;
        let StartExecResults::Attached { output, input } = started else {
            bail!("docker exec started detached");
        };
        if tty {
            let size = ResizeExecOptionsBuilder::default().h(30).w(120).build();
            docker.resize_exec(&exec, size).await?;
        }
        Ok(RawExec {
            output,
            input,
            buf: Vec::new(),
        })
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.input.write_all(bytes).await?;
        self.input.flush().await?;
        Ok(())
    }

    /// The next chunk of output; None at the end of the stream.
    async fn read(&mut self) -> Result<Option<bytes::Bytes>> {
        Ok(self
            .output
            .next()
            .await
            .transpose()?
            .map(LogOutput::into_bytes))
    }

    /// Reads into `buf` until `needle` occurs at or after `from`; returns its position.
    async fn wait_for(&mut self, needle: &[u8], from: usize) -> Result<usize> {
        let mut scan = from;
        loop {
            if let Some(at) = find(&self.buf, needle, scan) {
                return Ok(at);
            }
            scan = resume_at(self.buf.len(), needle, from);
            let chunk = self.read().await?.ok_or_else(|| anyhow!("exec ended"))?;
            self.buf.extend_from_slice(&chunk);
        }
    }

    /// Reads (discarding) until the stream ends, for at most `limit`.
    async fn drain_to_end(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            while let Ok(Some(_)) = self.read().await {}
        })
        .await
        .is_ok()
    }
}

/// A container like an agent's but not managed by the hub: the baselines run in it.
fn start_raw_container(hub_id: &str, image: &str) -> Result<String> {
    let name = format!("agent-hub-{hub_id}-raw");
    let label = format!("agent-hub.hub={hub_id}");
    docker_cli(&[
        "run",
        "-d",
        "--name",
        &name,
        "--label",
        &label,
        "--network",
        "none",
        "--init",
        "-e",
        "PS1=$ ",
        "-e",
        "HISTFILE=/dev/null",
        "-e",
        "LANG=C.UTF-8",
        "-e",
        "TERM=xterm-256color",
        image,
        "bash",
        "--norc",
        "--noprofile",
    ])?;
    let start = Instant::now();
    while !capture_pane(&name).unwrap_or_default().contains('$') {
        ensure!(start.elapsed() < SAMPLE_TIMEOUT, "no prompt in {name}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(name)
}

fn capture_pane(container: &str) -> Result<String> {
    docker_cli(&[
        "exec",
        container,
        "tmux",
        "capture-pane",
        "-p",
        "-t",
        TMUX_SESSION,
    ])
}

fn full_container_id(name: &str) -> String {
    docker_cli(&["inspect", "-f", "{{.Id}}", name])
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// 1. Echo

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EchoRow {
    HubWs,
    HubRest,
    RawExec,
}

impl EchoRow {
    const ALL: [EchoRow; 3] = [EchoRow::HubWs, EchoRow::HubRest, EchoRow::RawExec];

    fn label(self) -> &'static str {
        match self {
            EchoRow::HubWs => "echo: hub, WS input frame -> WS output",
            EchoRow::HubRest => "echo: hub, REST send_line -> WS output",
            EchoRow::RawExec => "echo: raw bollard TTY exec `tmux attach` (no hub)",
        }
    }
}

/// The sessions the echo rows type into.
struct EchoTargets<'a> {
    client: &'a HubClient,
    sid: String,
    view: WsView,
    raw: RawExec,
}

async fn hub_ws_echo(view: &mut WsView) -> Result<Duration> {
    let token = next_token();
    view.buf.clear();
    let start = Instant::now();
    view.send_input(&format!("#{token}\r")).await?;
    let at = view.wait_for(token.as_bytes(), 0).await?;
    let elapsed = start.elapsed();
    view.wait_for(b"$", at + token.len()).await?;
    Ok(elapsed)
}

async fn hub_rest_echo(client: &HubClient, sid: &str, view: &mut WsView) -> Result<Duration> {
    let token = next_token();
    view.buf.clear();
    let line = format!("#{token}");
    let start = Instant::now();
    let seen = async {
        let at = view.wait_for(token.as_bytes(), 0).await?;
        Ok::<_, anyhow::Error>((start.elapsed(), at))
    };
    let (posted, seen) = tokio::join!(client.send_line(sid, &line), seen);
    posted?;
    let (elapsed, at) = seen?;
    view.wait_for(b"$", at + token.len()).await?;
    Ok(elapsed)
}

/// tmux re-renders the screen for an attached client: the token shows up as typed text, and
/// the prompt after it (tmux may skip its trailing blank, so wait for `$` only).
async fn raw_echo(raw: &mut RawExec) -> Result<Duration> {
    let token = next_token();
    raw.buf.clear();
    let start = Instant::now();
    raw.write(format!("#{token}\r").as_bytes()).await?;
    let at = raw.wait_for(token.as_bytes(), 0).await?;
    let elapsed = start.elapsed();
    raw.wait_for(b"$", at + token.len()).await?;
    Ok(elapsed)
}

impl EchoTargets<'_> {
    async fn sample(&mut self, row: EchoRow) -> Result<Duration> {
        let sample = async {
            match row {
                EchoRow::HubWs => hub_ws_echo(&mut self.view).await,
                EchoRow::HubRest => hub_rest_echo(self.client, &self.sid, &mut self.view).await,
                EchoRow::RawExec => raw_echo(&mut self.raw).await,
            }
        };
        timed_out(sample, SAMPLE_TIMEOUT, row.label()).await
    }

    /// `samples` samples of every row after `warmup` discarded ones, interleaved in blocks
    /// whose order rotates every round, so drifting machine load hits every row alike.
    async fn interleave(
        &mut self,
        (warmup, samples, block): (usize, usize, usize),
    ) -> Result<Vec<(EchoRow, Vec<Duration>)>> {
        let rows = EchoRow::ALL;
        let mut taken: Vec<Vec<Duration>> = vec![Vec::new(); rows.len()];
        let mut left = warmup + samples;
        let mut round = 0;
        while left > 0 {
            let n = left.min(block);
            for k in 0..rows.len() {
                let i = (round + k) % rows.len();
                for _ in 0..n {
                    taken[i].push(self.sample(rows[i]).await?);
                }
            }
            round += 1;
            left -= n;
        }
        Ok(rows
            .into_iter()
            .zip(taken)
            .map(|(row, mut s)| (row, s.split_off(warmup)))
            .collect())
    }
}

/// The older design: `docker exec tmux send-keys -l`, then `docker exec tmux capture-pane`
/// back-to-back until the token is on the screen (no sleep between polls: its lower bound).
fn old_design_echo(container: &str) -> Result<Duration> {
    let token = next_token();
    let typed = format!("#{token}");
    let start = Instant::now();
    docker_cli(&[
        "exec",
        container,
        "tmux",
        "send-keys",
        "-t",
        TMUX_SESSION,
        "-l",
        "--",
        &typed,
    ])?;
    while !capture_pane(container)?.contains(&token) {
        ensure!(start.elapsed() < SAMPLE_TIMEOUT, "token never showed up");
    }
    let elapsed = start.elapsed();
    docker_cli(&[
        "exec",
        container,
        "tmux",
        "send-keys",
        "-t",
        TMUX_SESSION,
        "Enter",
    ])?;
    Ok(elapsed)
}

struct EchoResults {
    rows: Vec<(EchoRow, Vec<Duration>)>,
    old_design: Vec<Duration>,
}

/// Detaches the raw TTY client explicitly (closing its input would leave the `tmux attach`
/// process running) and waits for its stream to end, so later baselines run there alone.
async fn detach_raw(mut raw: RawExec, container: &str) -> Result<()> {
    docker_cli(&[
        "exec",
        container,
        "tmux",
        "detach-client",
        "-s",
        TMUX_SESSION,
    ])?;
    ensure!(
        raw.drain_to_end(Duration::from_secs(5)).await,
        "the raw tmux attach did not end after detach-client"
    );
    Ok(())
}

async fn measure_echo(
    hut: &HubUnderTest,
    docker: &Docker,
    raw_container: &str,
    plan: &Plan,
) -> Result<EchoResults> {
    let (sid, _) = hut.start_agent("echo").await?;
    let mut view = WsView::connect(&hut.client.stream_url(&sid, Some(0))).await?;
    timed_out(hub_ws_echo(&mut view), SAMPLE_TIMEOUT, "the first hub echo").await?;
    let attach = ["tmux", "attach", "-t", TMUX_SESSION];
    let mut raw = RawExec::start(docker, raw_container, &attach, true).await?;
    timed_out(raw_echo(&mut raw), SAMPLE_TIMEOUT, "the first raw echo").await?;
    let mut targets = EchoTargets {
        client: &hut.client,
        sid,
        view,
        raw,
    };
    let counts = (plan.warmup, plan.echo_samples, plan.echo_block);
    let rows = targets.interleave(counts).await;
    detach_raw(targets.raw, raw_container).await?;
    let rows = rows?;
    let old_design = (0..3 + plan.poll_samples)
        .map(|_| old_design_echo(raw_container))
        .collect::<Result<Vec<_>>>()?
        .split_off(3);
    Ok(EchoResults { rows, old_design })
}

fn print_latency_row(name: &str, s: Stats, target: &str, result: &str) {
    println!(
        "| {name} | {} | {:.3} | {:.3} | {:.3} | {} | {target} | {result} |",
        s.n, s.p50_ms, s.p99_ms, s.max_ms, s.slow
    );
}

fn echo_target() -> String {
    format!("p50 <= {ECHO_P50_TARGET_MS} ms, p99 <= {ECHO_P99_TARGET_MS} ms")
}

fn report_echo_and_talk(echo: &EchoResults, talk: &[Duration], summary: &mut Vec<SummaryRow>) {
    println!("\n### 1-2. Keystroke -> echo and talk, container agent (ms)\n");
    println!("| measurement | n | p50 | p99 | max | samples >= {SLOW_MS} ms | target | result |");
    println!("|---|---|---|---|---|---|---|---|");
    for (row, samples) in &echo.rows {
        let s = stats(samples);
        let (target, result) = match row {
            EchoRow::RawExec => ("baseline".to_string(), "-"),
            _ => (
                echo_target(),
                verdict(s.p50_ms <= ECHO_P50_TARGET_MS && s.p99_ms <= ECHO_P99_TARGET_MS),
            ),
        };
        print_latency_row(row.label(), s, &target, result);
        summary.push(SummaryRow::latency(row.label(), s, &target, result));
    }
    if !echo.old_design.is_empty() {
        let old = "echo: older design, CLI `docker exec` send-keys + capture-pane polling";
        let s = stats(&echo.old_design);
        print_latency_row(old, s, "baseline", "-");
        summary.push(SummaryRow::latency(old, s, "baseline", "-"));
    }
    if talk.is_empty() {
        return;
    }
    let name = "talk `true`: REST POST .../talk round trip";
    let target = format!("p50 <= {TALK_P50_TARGET_MS} ms");
    let s = stats(talk);
    let result = verdict(s.p50_ms <= TALK_P50_TARGET_MS);
    print_latency_row(name, s, &target, result);
    summary.push(SummaryRow::latency(name, s, &target, result));
}

// ---------------------------------------------------------------------------------------------
// 2. Talk

async fn measure_talk(hut: &HubUnderTest, sid: &str, plan: &Plan) -> Result<Vec<Duration>> {
    let mut samples = Vec::new();
    for i in 0..plan.warmup + plan.talk_samples {
        let start = Instant::now();
        let reply = timed_out(
            async { Ok(hut.client.talk(sid, "true", Some(10_000)).await?) },
            SAMPLE_TIMEOUT,
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
    Ok(samples)
}

// ---------------------------------------------------------------------------------------------
// 3. Ingest throughput

/// The test file, and what the terminal turns it into after the trigger.
struct IngestFile {
    local: std::path::PathBuf,
    file_bytes: u64,
    /// Trigger echo + file with every '\n' as "\r\n".
    expected: u64,
    expected_hash: u64,
}

/// Writes `lines` lines of LINE_CHARS printable characters and '\n'.
fn write_ingest_file(dir: &Path, lines: usize) -> Result<IngestFile> {
    let local = dir.join("big.txt");
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&local)?);
    let alphabet: Vec<u8> = (b'!'..=b'~').collect();
    let mut line = vec![0u8; LINE_CHARS + 1];
    let mut hash = fnv1a(FNV_OFFSET, TRIGGER_ECHO);
    for i in 0..lines {
        let head = format!("{i:09} ");
        line[..head.len()].copy_from_slice(head.as_bytes());
        for (j, byte) in line[head.len()..LINE_CHARS].iter_mut().enumerate() {
            *byte = alphabet[(i + j) % alphabet.len()];
        }
        line[LINE_CHARS] = b'\n';
        out.write_all(&line)?;
        hash = fnv1a(hash, &line[..LINE_CHARS]);
        hash = fnv1a(hash, b"\r\n");
    }
    out.flush()?;
    let file_bytes = std::fs::metadata(&local)?.len();
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
    process: f64,
    main: f64,
    workers: f64,
    container: Option<f64>,
    dockerd: Option<f64>,
}

impl CpuMark {
    fn now(container_full_id: &str, dockerd: Option<&str>) -> Self {
        let (main, workers) = thread_cpu_secs();
        CpuMark {
            process: own_cpu_secs(),
            main,
            workers,
            container: container_cpu_secs(container_full_id),
            dockerd: dockerd.and_then(cpu_secs),
        }
    }

    fn into_run(self, after: CpuMark, run: &mut IngestRun) {
        run.cpu_process = after.process - self.process;
        run.cpu_main = after.main - self.main;
        run.cpu_workers = after.workers - self.workers;
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
    let mut view = WsView::connect(&hut.client.stream_url(sid, Some(since))).await?;
    view.send_input(INGEST_COMMAND).await?;
    view.wait_quiet().await?;
    let before = hut.output_offset(sid).await?;
    ensure!(
        before == view.next_offset,
        "the WebSocket is at {} but the session at {before}",
        view.next_offset
    );
    view.tally = Some(Tally::new(file.expected));
    let frames_before = view.frames;
    // When the hub's pipeline holds every byte (in-process observer, not part of the API).
    let mut progress = hut.hub.get(sid)?.output().watch_progress();
    let target = before + file.expected;
    let ingested = tokio::spawn(async move {
        while *progress.borrow_and_update() < target {
            if progress.changed().await.is_err() {
                break;
            }
        }
        Instant::now()
    });
    let cpu = CpuMark::now(&at.full_id, at.dockerd);
    let start = Instant::now();
    view.send_input("\r").await?;
    let complete = |v: &WsView| v.tally.as_ref().is_some_and(Tally::complete);
    timed_out(
        async {
            while !complete(&view) {
                view.pump().await?;
            }
            Ok(())
        },
        INGEST_TIMEOUT,
        "the hub ingest run",
    )
    .await?;
    let mut run = IngestRun::default();
    cpu.into_run(CpuMark::now(&at.full_id, at.dockerd), &mut run);
    let tally = view.tally.take().unwrap_or_else(|| Tally::new(0));
    let done = tally.done_at.unwrap_or_else(Instant::now);
    run.ws_lag_ms = tokio::time::timeout(Duration::from_secs(1), ingested)
        .await
        .ok()
        .and_then(Result::ok)
        .map(|at| done.saturating_duration_since(at).as_secs_f64() * 1e3);
    run.secs = done.duration_since(start).as_secs_f64();
    run.received = tally.received.min(file.expected);
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
    let mut tally = Tally::new(file.expected);
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
    run.received = tally.received.min(file.expected);
    run.exact = tally.exact(file.expected_hash);
    run.chunks = chunks;
    Ok(run)
}

struct IngestResults {
    file_bytes: u64,
    lines: usize,
    expected: u64,
    hub: Vec<IngestRun>,
    raw: Vec<IngestRun>,
    /// CPU time a vt100 screen takes to follow one run's bytes.
    screen_secs: f64,
}

async fn measure_ingest(
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

fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

fn opt_secs(v: Option<f64>) -> String {
    v.map_or("?".into(), |s| format!("{s:.2}"))
}

fn report_ingest(c: &IngestResults, summary: &mut Vec<SummaryRow>) {
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
    println!(
        "\n### 3. Ingest throughput: `cat` of a {} byte text file ({} lines of {} chars + LF) \
         in the container; expected pane output after the trigger {} bytes (CRLF); \
         MB/s = file bytes / s\n",
        c.file_bytes, c.lines, LINE_CHARS, c.expected
    );
    println!(
        "| path | runs (MB/s) | median MB/s | bytes per run | byte-exact (FNV + done line) \
         | resyncs / dropped | target | result |"
    );
    println!("|---|---|---|---|---|---|---|---|");
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

// ---------------------------------------------------------------------------------------------
// 4. Concurrent start and stop

struct OpsSummary {
    requested: usize,
    ok: Vec<Duration>,
    failures: Vec<String>,
    wall: Duration,
}

fn summarize(results: Vec<OpResult>, wall: Duration, expect_status: &str) -> OpsSummary {
    let mut s = OpsSummary {
        requested: results.len(),
        ok: Vec::new(),
        failures: Vec::new(),
        wall,
    };
    for r in results {
        match r.outcome {
            Ok(v) if v.agent.status.to_string() == expect_status => s.ok.push(r.took),
            Ok(v) => s
                .failures
                .push(format!("{}: status {}", r.id, v.agent.status)),
            Err(e) => s.failures.push(format!("{}: {e:#}", r.id)),
        }
    }
    s
}

struct StartStop {
    start: OpsSummary,
    stop: OpsSummary,
}

async fn measure_start_stop(hut: &HubUnderTest, n: usize) -> StartStop {
    let ids = scale_ids(n);
    let (results, wall) = agent_ops(hut.client.base(), &ids, "start").await;
    let start = summarize(results, wall, "running");
    let (results, wall) = agent_ops(hut.client.base(), &ids, "stop").await;
    StartStop {
        start,
        stop: summarize(results, wall, "stopped"),
    }
}

fn report_failures(what: &str, failures: &[String]) {
    if failures.is_empty() {
        return;
    }
    println!("\n{} {what} failed; the first ones:", failures.len());
    for f in failures.iter().take(5) {
        println!("- {f}");
    }
}

fn report_start_stop(r: &StartStop, summary: &mut Vec<SummaryRow>) {
    println!(
        "\n### 4. {} agents started concurrently (POST start in parallel), then stopped\n",
        r.start.requested
    );
    println!("| operation | ok / requested | wall until the last reply (s) | per agent p50 (s) | p99 (s) | max (s) |");
    println!("|---|---|---|---|---|---|");
    for (name, ops) in [("start -> ready", &r.start), ("stop (+ remove)", &r.stop)] {
        let s = stats(&ops.ok);
        println!(
            "| {name} | {} / {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            ops.ok.len(),
            ops.requested,
            ops.wall.as_secs_f64(),
            s.p50_ms / 1e3,
            s.p99_ms / 1e3,
            s.max_ms / 1e3
        );
        let all_ok = ops.ok.len() == ops.requested;
        summary.push(SummaryRow {
            name: format!(
                "{} agents concurrently, {name}: all done in {:.2} s",
                ops.requested,
                ops.wall.as_secs_f64()
            ),
            n: ops.ok.len().to_string(),
            p50: format!("{:.2} s", s.p50_ms / 1e3),
            p99: format!("{:.2} s", s.p99_ms / 1e3),
            target: "none (all must succeed)".into(),
            result: verdict(all_ok).into(),
        });
    }
    report_failures("starts", &r.start.failures);
    report_failures("stops", &r.stop.failures);
}

// ---------------------------------------------------------------------------------------------
// 5. Idle agents

struct IdleResults {
    start: OpsSummary,
    wave: usize,
    rss_before: (u64, u64),
    rss_after: (u64, u64),
    rss_trimmed: Option<(u64, u64)>,
    scrollback_capacity: usize,
    /// Output bytes held in the running agents' scrollback rings, in total.
    ring_bytes: u64,
    cpu_secs: f64,
    wall_secs: f64,
    dockerd_cpu_secs: Option<f64>,
    stop: OpsSummary,
    parts: MemoryParts,
}

/// Anonymous memory per session of two hub parts every session has, built here alone.
struct MemoryParts {
    /// `Output::new(scrollback)` holding the prompt: ring reserve and broadcast channel.
    output_kb: f64,
    /// `Screen::new(120x30)` fed the prompt: the vt100 emulator.
    screen_kb: f64,
    /// The same after enough output to fill its row scrollback (an active agent).
    screen_full_kb: f64,
}

/// RssAnon growth per item while `n` items built by `make` are alive.
fn anon_kb_per<T>(n: usize, make: impl Fn() -> T) -> f64 {
    trim_heap();
    let before = rss_kb().1;
    let items: Vec<T> = (0..n).map(|_| make()).collect();
    let after = rss_kb().1;
    drop(items);
    trim_heap();
    per_agent_kb(before, after, n)
}

fn bench_screen(fed: &[u8]) -> Screen {
    let mut screen = Screen::new(TermSize {
        cols: 120,
        rows: 30,
    });
    screen.feed(0, fed);
    screen
}

fn memory_parts(n: usize, capacity: usize) -> MemoryParts {
    let prompt = b"$ \x1b[1;3H";
    let lines: Vec<u8> = (0..SCREEN_SCROLLBACK_ROWS + 100)
        .flat_map(|i| format!("{i:09} {}\r\n", "x".repeat(LINE_CHARS - 10)).into_bytes())
        .collect();
    MemoryParts {
        output_kb: anon_kb_per(n, || {
            let output = Output::new(capacity);
            output.push(prompt);
            output
        }),
        screen_kb: anon_kb_per(n, || bench_screen(prompt)),
        screen_full_kb: anon_kb_per(10, || bench_screen(&lines)),
    }
}

/// Sum over the running sessions of the bytes their rings hold.
async fn ring_bytes(hut: &HubUnderTest, capacity: usize) -> Result<u64> {
    let list = hut.client.list().await?;
    Ok(list
        .sessions
        .iter()
        .filter(|s| s.alive)
        .map(|s| s.output_offset.min(capacity as u64))
        .sum())
}

async fn measure_idle(hut: &HubUnderTest, plan: &Plan) -> Result<IdleResults> {
    let ids = scale_ids(plan.idle_agents);
    tokio::time::sleep(SETTLE).await;
    trim_heap();
    let rss_before = rss_kb();
    let start = start_in_waves(hut, &ids, plan.idle_wave).await;
    tokio::time::sleep(SETTLE).await;
    let rss_after = rss_kb();
    let capacity = hut.hub.config().scrollback_bytes;
    let ring = ring_bytes(hut, capacity).await?;
    let dockerd = dockerd_pid();
    let (cpu0, dockerd0) = (own_cpu_secs(), dockerd.as_deref().and_then(cpu_secs));
    let t0 = Instant::now();
    tokio::time::sleep(plan.idle_window).await;
    let (cpu1, dockerd1) = (own_cpu_secs(), dockerd.as_deref().and_then(cpu_secs));
    let wall_secs = t0.elapsed().as_secs_f64();
    let rss_trimmed = trim_heap().then(rss_kb);
    let (results, wall) = agent_ops(hut.client.base(), &ids, "stop").await;
    Ok(IdleResults {
        start,
        wave: plan.idle_wave,
        rss_before,
        rss_after,
        rss_trimmed,
        scrollback_capacity: capacity,
        ring_bytes: ring,
        cpu_secs: cpu1 - cpu0,
        wall_secs,
        dockerd_cpu_secs: dockerd1.zip(dockerd0).map(|(a, b)| a - b),
        stop: summarize(results, wall, "stopped"),
        parts: memory_parts(plan.idle_agents.max(1), capacity),
    })
}

/// Starts `ids`, `wave` at a time; one summary over all of them.
async fn start_in_waves(hut: &HubUnderTest, ids: &[String], wave: usize) -> OpsSummary {
    let begin = Instant::now();
    let mut all = Vec::new();
    for chunk in ids.chunks(wave) {
        all.extend(agent_ops(hut.client.base(), chunk, "start").await.0);
    }
    summarize(all, begin.elapsed(), "running")
}

fn per_agent_kb(before: u64, after: u64, n: usize) -> f64 {
    (after as f64 - before as f64) / n.max(1) as f64
}

fn report_idle(r: &IdleResults, summary: &mut Vec<SummaryRow>) {
    let n = r.start.ok.len();
    let requested = r.start.requested;
    println!(
        "\n### 5. {n} attached idle agents (of {requested} started, {} at a time)\n",
        r.wave
    );
    let ring_per_agent = r.ring_bytes as f64 / n.max(1) as f64;
    let ring_kb = ring_per_agent / 1024.0;
    let rss = per_agent_kb(r.rss_before.0, r.rss_after.0, n);
    let anon = per_agent_kb(r.rss_before.1, r.rss_after.1, n);
    let beyond = rss - ring_kb;
    let cpu_pct = r.cpu_secs / r.wall_secs * 100.0;
    println!("| quantity | value |");
    println!("|---|---|");
    println!(
        "| start of all {requested} ({} at a time) | {} ok in {:.1} s |",
        r.wave,
        n,
        r.start.wall.as_secs_f64()
    );
    println!(
        "| hub process VmRSS before -> with agents (kB) | {} -> {} (RssAnon {} -> {}) |",
        r.rss_before.0, r.rss_after.0, r.rss_before.1, r.rss_after.1
    );
    if let Some((vm, anon)) = r.rss_trimmed {
        println!(
            "| VmRSS after malloc_trim(0) at the end of the idle window (kB) | {vm} (RssAnon {anon}) |"
        );
    }
    println!("| RSS per agent (kB) | {rss:.1} (RssAnon {anon:.1}) |");
    println!(
        "| scrollback per agent: capacity reserved (virtual) / bytes held | {} kB / {ring_per_agent:.0} bytes |",
        r.scrollback_capacity / 1024
    );
    println!("| RSS per agent beyond the scrollback bytes it holds (kB) | {beyond:.1} |");
    println!(
        "| of which, measured alone: `Output` (ring reserve + 1024-slot broadcast) / `Screen` \
         (vt100 120x30) / the rest (exec connection, tasks, session) (kB anon) | {:.1} / {:.1} / \
         {:.1} |",
        r.parts.output_kb,
        r.parts.screen_kb,
        anon - r.parts.output_kb - r.parts.screen_kb
    );
    println!(
        "| not in the idle figure: a `Screen` after {} lines of output (its {}-row scrollback \
         full), as an active agent has (kB anon) | {:.0} |",
        SCREEN_SCROLLBACK_ROWS + 100,
        SCREEN_SCROLLBACK_ROWS,
        r.parts.screen_full_kb
    );
    println!(
        "| hub process CPU over {:.1} s idle | {:.2} CPU-s = {cpu_pct:.2} % of one core (tick {:.0} ms) |",
        r.wall_secs,
        r.cpu_secs,
        1e3 / clock_ticks_per_second()
    );
    println!(
        "| dockerd CPU over the same window (not the hub) | {} CPU-s |",
        opt_secs(r.dockerd_cpu_secs)
    );
    println!(
        "| stop of all (concurrent) | {} ok in {:.1} s |",
        r.stop.ok.len(),
        r.stop.wall.as_secs_f64()
    );
    report_failures("starts", &r.start.failures);
    report_failures("stops", &r.stop.failures);
    let rss_target = format!("<= {RSS_PER_AGENT_TARGET_KB:.0} kB per agent beyond scrollback");
    summary.push(SummaryRow::value(
        &format!("{n} idle agents: hub RSS per agent beyond its scrollback"),
        n,
        format!("{beyond:.1} kB"),
        &rss_target,
        verdict(n > 0 && beyond <= RSS_PER_AGENT_TARGET_KB),
    ));
    summary.push(SummaryRow::value(
        &format!("{n} idle agents: hub CPU over {:.0} s", r.wall_secs),
        n,
        format!("{cpu_pct:.2} %"),
        &format!("< {IDLE_CPU_TARGET_PCT} %"),
        verdict(n > 0 && cpu_pct < IDLE_CPU_TARGET_PCT),
    ));
}

// ---------------------------------------------------------------------------------------------
// Orchestration

/// What `program ARGS` prints in a throwaway container of `image`.
fn in_image(image: &str, program: &str, args: &[&str]) -> String {
    let mut argv = vec![
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        program,
        image,
    ];
    argv.extend_from_slice(args);
    command_output("docker", &argv)
}

fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_header(plan: &Plan, image: &str, hub_id: &str) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let server = |field: &str| command_output("docker", &["version", "--format", field]);
    println!("## docker_agents benchmark\n");
    println!(
        "- environment: {cores} cores, {} MB RAM, kernel {}, Docker Engine {} (API {}), {}, \
         image {image} ({}, {}); load average at start {} (UTC {})",
        command_output("sh", &["-c", "free -m | awk '/Mem:/ {print $2}'"]),
        command_output("uname", &["-r"]),
        server("{{.Server.Version}}"),
        server("{{.Server.APIVersion}}"),
        command_output("rustc", &["--version"]),
        in_image(image, "tmux", &["-V"]),
        in_image(image, "bash", &["-c", "echo bash $BASH_VERSION"]),
        load_average(),
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S"),
    );
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    println!(
        "- command: `CARGO_TARGET_DIR=/tmp/bench-docker-target cargo bench --bench docker_agents{}{}` (release profile)",
        if args.is_empty() { "" } else { " -- " },
        args.join(" ")
    );
    println!(
        "- hub: in-process (hub id {hub_id}), API on 127.0.0.1:0, scrollback {} bytes per \
         session; agents: `bash --norc --noprofile` (PS1='$ ') in the image's tmux session, \
         network none; the bench client (reqwest, tokio-tungstenite) in the same process",
        HubConfig::default().scrollback_bytes
    );
    println!(
        "- samples: echo {} per row after {} warm-up (interleaved in blocks of {}), older \
         design {}, talk {}, ingest {} run(s) each; {} concurrent starts; {} idle agents \
         ({} at a time) over {} s{}{}",
        plan.echo_samples,
        plan.warmup,
        plan.echo_block,
        plan.poll_samples,
        plan.talk_samples,
        plan.ingest_runs,
        plan.concurrent,
        plan.idle_agents,
        plan.idle_wave,
        plan.idle_window.as_secs(),
        if plan.quick { " (--quick)" } else { "" },
        if plan.server_nodelay {
            "; EXPERIMENT: served with TCP_NODELAY on the hub's accepted sockets (not `api::serve`)"
        } else {
            ""
        }
    );
}

async fn measure_all(
    hut: &HubUnderTest,
    plan: &Plan,
    dir: &Path,
    hub_id: &str,
    image: &str,
) -> Result<()> {
    let mut summary = Vec::new();
    // Idle memory first, while the process holds nothing else.
    if plan.runs(5) {
        eprintln!("5. starting {} idle agents...", plan.idle_agents);
        report_idle(&measure_idle(hut, plan).await?, &mut summary);
    }
    if plan.runs(4) {
        eprintln!("4. starting {} agents concurrently...", plan.concurrent);
        report_start_stop(
            &measure_start_stop(hut, plan.concurrent).await,
            &mut summary,
        );
    }
    let docker = Docker::connect_with_defaults()?.negotiate_version().await?;
    let raw_container = start_raw_container(hub_id, image)?;
    if plan.runs(1) || plan.runs(2) {
        eprintln!("1-2. measuring echo round trips and talk...");
        let (echo, talk) = measure_echo_and_talk(hut, &docker, &raw_container, plan).await?;
        report_echo_and_talk(&echo, &talk, &mut summary);
    }
    if plan.runs(3) {
        eprintln!("3. measuring ingest throughput...");
        let ingest = measure_ingest(hut, &docker, &raw_container, plan, dir).await?;
        report_ingest(&ingest, &mut summary);
    }
    let _ = docker_cli(&["rm", "-f", &raw_container]);
    print_summary(&summary);
    println!("\nLoad average at the end: {}", load_average());
    Ok(())
}

/// Parts 1 and 2 on the `echo` agent (talk with no viewer attached).
async fn measure_echo_and_talk(
    hut: &HubUnderTest,
    docker: &Docker,
    raw_container: &str,
    plan: &Plan,
) -> Result<(EchoResults, Vec<Duration>)> {
    let mut echo = EchoResults {
        rows: Vec::new(),
        old_design: Vec::new(),
    };
    if plan.runs(1) {
        echo = measure_echo(hut, docker, raw_container, plan).await?;
    }
    let mut talk = Vec::new();
    if plan.runs(2) {
        let (sid, _) = hut.start_agent("echo").await?;
        talk = measure_talk(hut, &sid, plan).await?;
    }
    Ok((echo, talk))
}

fn run(plan: &Plan, image: &str) -> Result<()> {
    let hub_id = format!("bench{}", std::process::id());
    // Declared first, so dropped last: removes every container of this run on every path.
    let _containers = ContainerGuard(hub_id.clone());
    print_header(plan, image, &hub_id);
    let dir = tempfile::Builder::new()
        .prefix("ah-bench-docker-")
        .tempdir()?;
    let config = bench_config(&hub_id, dir.path(), image, plan)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name(WORKER_THREAD_NAME)
        .enable_all()
        .build()?;
    let hut = rt.block_on(HubUnderTest::start(config, plan.server_nodelay))?;
    let result = rt.block_on(measure_all(&hut, plan, dir.path(), &hub_id, image));
    rt.block_on(hut.stop());
    let _ = Command::new("tmux")
        .args(["-L", &format!("ah-{hub_id}"), "kill-server"])
        .env_remove("TMUX")
        .output();
    result
}
