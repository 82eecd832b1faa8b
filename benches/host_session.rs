//! Host-session benchmark: what the hub adds on top of a bare host PTY.
//!
//! Run with `cargo bench --bench host_session`. Options after `--`: `--quick` (fewer
//! iterations), `--parts 1,3` (only those measurements). `cargo test
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
//!    the hold on a possible secret prefix, and the audit log's cost per `send_line`;
//! 5. the producer's own cost (`producer.rs`): `seq 1 2000000` timing itself in a bare
//!    portable-pty and in a hub session with one WebSocket viewer, and the hub's CPU per MB.
//!
//! Echo fairness: every echo row runs the same program, `bash --norc --noprofile` with
//! `PS1='$ '`, and types the same kind of line, `#<token>` + Enter (a shell comment, so Enter
//! runs nothing). The clock stops when the token first appears in the output. Readline keeps
//! the terminal in raw mode and echoes in user space, as interactive agent CLIs do, so this is
//! the path a real keystroke takes; only the transport differs between rows. Between samples
//! we wait (untimed) for the next prompt, so samples never overlap. The bare PTY row writes and
//! reads synchronously on one thread: the lowest figure any design can reach.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_hub::config::HubConfig;
use agent_hub::hub::BackendKind;
use agent_hub::protocol::CreateSessionRequest;
use anyhow::Result;

#[path = "host_session/bare.rs"]
mod bare;
#[path = "common/mod.rs"]
mod common;
#[path = "host_session/echo.rs"]
mod echo;
#[path = "host_session/ingest.rs"]
mod ingest;
#[path = "host_session/producer.rs"]
mod producer;
#[path = "host_session/security.rs"]
mod security;

use common::args::Args;
use common::echo::hub_ws_echo;
use common::hub::HubUnderTest;
use common::procfs::{bench_command, command_output, cores, kill_tmux_server, runtime, utc_now};
use common::ws::WsView;
use common::{timed_out, SAMPLE_TIMEOUT};

const BENCH: &str = "host_session";
const BASH_ARGS: [&str; 2] = ["--norc", "--noprofile"];
/// What bash prints when it waits for the next line (`PS1='$ '`).
const PROMPT: &[u8] = b"$ ";

/// Iteration counts and the parts to run.
struct Plan {
    options: Vec<String>,
    parts: Vec<u8>,
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
    producer_runs: usize,
}

impl Plan {
    fn from_args(args: &Args) -> Result<Self> {
        let quick = args.quick();
        Ok(Plan {
            options: args.options(),
            parts: args.parts(5)?,
            warmup: if quick { 10 } else { 30 },
            echo_samples: if quick { 100 } else { 300 },
            paced_samples: if quick { 50 } else { 150 },
            echo_block: 50,
            poll_samples: if quick { 20 } else { 50 },
            talk_samples: if quick { 60 } else { 200 },
            cat_runs: if quick { 1 } else { 3 },
            file_lines: 1_000_000,
            producer_runs: if quick { 1 } else { 3 },
        })
    }

    fn runs(&self, part: u8) -> bool {
        self.parts.contains(&part)
    }
}

fn main() {
    let Some(args) = Args::from_env(BENCH) else {
        return;
    };
    if let Err(e) = Plan::from_args(&args).and_then(|plan| run(&plan)) {
        eprintln!("{BENCH} benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

/// Variables every program under test gets (the hub adds TERM, LANG and its pass-through list).
fn shell_env() -> BTreeMap<String, String> {
    [("PS1", "$ "), ("HISTFILE", "/dev/null")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The hub of this benchmark: defaults, with its own tmux server and data directory.
async fn start_hub(
    dirs: &Dirs,
    data_dir: &Path,
    adjust: impl FnOnce(&mut HubConfig),
) -> Result<HubUnderTest> {
    let mut config = HubConfig {
        tmux_socket: dirs.hub_socket.clone(),
        data_dir: data_dir.to_path_buf(),
        ..HubConfig::default()
    };
    adjust(&mut config);
    HubUnderTest::start(config).await
}

impl HubUnderTest {
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
        let mut view =
            WsView::connect(&self.client, &self.client.stream_url(&id, Some(0)), true).await?;
        // A tmux pane's first prompt may predate the control client: type a line instead.
        timed_out(
            hub_ws_echo(&mut view, PROMPT),
            SAMPLE_TIMEOUT,
            "the first prompt",
        )
        .await?;
        Ok((id, view))
    }
}

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
        kill_tmux_server(&self.hub_socket);
        kill_tmux_server(&self.poll_socket);
    }
}

fn print_header(plan: &Plan) {
    println!("## host_session benchmark\n");
    println!(
        "- environment: {} cores, {}, kernel {}, {}, {} (UTC {})",
        cores(),
        command_output("rustc", &["--version"]),
        command_output("uname", &["-r"]),
        command_output("tmux", &["-V"]),
        command_output("bash", &["-c", "echo bash $BASH_VERSION"]),
        utc_now(),
    );
    println!(
        "- command: `{}` (release profile)",
        bench_command(BENCH, &plan.options)
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
    let rt = runtime()?;
    let hut = rt.block_on(start_hub(&dirs, &dirs.work, |_| {}))?;
    let result = (|| {
        let mut echo_rows = None;
        if plan.runs(1) {
            eprintln!("measuring echo round trips...");
            echo_rows = Some(echo::measure_echo(&rt, &hut, plan, &dirs)?);
        }
        let mut talk = None;
        if plan.runs(2) {
            eprintln!("measuring talk...");
            talk = Some(rt.block_on(echo::measure_talk(&hut, plan, &dirs.work))?);
        }
        if echo_rows.is_some() || talk.is_some() {
            echo::print_latency_table(echo_rows.as_ref(), talk.as_deref());
        }
        if plan.runs(3) {
            eprintln!("measuring throughput...");
            let cat = ingest::measure_cat(&rt, &hut, plan, &dirs)?;
            ingest::print_cat_table(&cat);
        }
        if plan.runs(4) {
            eprintln!("measuring security costs...");
            let security = security::measure(&rt, &hut, plan, &dirs)?;
            security::print(&security);
        }
        if plan.runs(5) {
            eprintln!("measuring the producer's own cost...");
            let (bare, hub) = producer::measure_producer(&rt, &hut, plan, &dirs.work)?;
            common::producer::print(&common::producer::summary("host PTY session", &bare, &hub));
        }
        Ok(())
    })();
    rt.block_on(hut.stop());
    result
}
