//! Container-agent benchmark: what the hub adds on top of a bare `docker exec`, for agents that
//! run in Docker containers.
//!
//! Run with `cargo bench --bench docker_agents`. Options after `--`: `--quick` (fewer
//! iterations), `--parts 1,3` (only those measurements), `--concurrent N`, `--idle-agents N`,
//! `--idle-wave N` (idle agents started N at a time, default 25), `--ingest-runs N` and
//! `--busy-agents N` (or a list, `20,50`: one busy fleet after the other; default 20),
//! `--start-concurrency N` (the hub's `agent_start_concurrency`; `0`: no limit, every start's
//! Docker work at once, as before #30). It
//! needs a Docker
//! engine and the test image (`AGENT_TEST_IMAGE` of `docker/images.env`, built by
//! `docker/build-offline.sh`; `AGENT_HUB_TEST_IMAGE` names another); without them it says why and exits. `cargo test
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
//! 4. starting N agents concurrently until all are ready, then stopping them, next to the raw
//!    Docker baseline timed just before (`raw_start.rs`: N × `docker run -d` + tmux in each);
//! 5. memory and CPU of the hub process with N attached idle agents;
//! 6. the producer's own cost (`producer.rs`): `seq 1 2000000` timing itself in a tmux session
//!    no client watches and in the agent's session with the hub attached and one viewer, and
//!    the hub's CPU per MB;
//! 7. a busy fleet (`busy.rs`): N agents each printing `seq 1 1000` every 0.1 s plus one quiet
//!    agent, over a 10 s window: the hub's CPU per MB and per chunk, its memory, and the quiet
//!    agent's echo and `talk true` latency.
//!
//! Every echo row runs the same program in the same image, `bash --norc --noprofile` with
//! `PS1='$ '` inside the image's tmux session `agent`, and types `#<token>` + Enter (a comment).
//! The clock stops when the token first appears in the output; between samples we wait
//! (untimed) for the next prompt.

use std::path::Path;
use std::time::Duration;

use agent_hub::config::HubConfig;
use anyhow::{anyhow, Result};
use bollard::Docker;

#[path = "docker_agents/busy.rs"]
mod busy;
#[path = "common/mod.rs"]
mod common;
#[path = "docker_agents/docker.rs"]
mod docker;
#[path = "docker_agents/echo.rs"]
mod echo;
#[path = "docker_agents/ingest.rs"]
mod ingest;
#[path = "docker_agents/interrupted.rs"]
mod interrupted;
#[path = "docker_agents/producer.rs"]
mod producer;
#[path = "docker_agents/raw_start.rs"]
mod raw_start;
#[path = "docker_agents/scale.rs"]
mod scale;

use common::args::Args;
use common::hub::{HubUnderTest, OP_TIMEOUT};
use common::procfs::{bench_command, command_output, cores, kill_tmux_server, load_average};
use common::procfs::{runtime, utc_now};
use common::report::table;
use common::stats::Stats;
use common::timed_out;
use docker::{docker_cli, start_raw_container, ContainerGuard};

const BENCH: &str = "docker_agents";
/// `docker/images.env`, where every image name is defined once.
const IMAGES_ENV: &str = include_str!("../docker/images.env");
/// The tmux session the image's entrypoint starts.
const TMUX_SESSION: &str = "agent";
/// `ready_timeout` of every agent: generous, because N containers start at once on 2 cores.
const READY_TIMEOUT_S: u64 = 300;

/// Iteration counts and scale.
struct Plan {
    options: Vec<String>,
    quick: bool,
    warmup: usize,
    echo_samples: usize,
    /// Echo samples per row between switching rows (interleaving against noise).
    echo_block: usize,
    poll_samples: usize,
    talk_samples: usize,
    ingest_runs: usize,
    file_lines: usize,
    producer_runs: usize,
    concurrent: usize,
    idle_agents: usize,
    /// How many of the idle agents are started at once.
    idle_wave: usize,
    idle_window: Duration,
    /// Sizes of the busy fleets, one after the other, and their measuring window.
    busy_agents: Vec<usize>,
    busy_window: Duration,
    /// Which of the numbered measurements to run (`--parts 1,3`; default all).
    parts: Vec<u8>,
    /// The hub's `agent_start_concurrency` (`None`: its default; `Some(0)`: no limit).
    start_concurrency: Option<usize>,
}

impl Plan {
    fn from_args(args: &Args) -> Result<Self> {
        let quick = args.quick();
        Ok(Plan {
            options: args.options(),
            quick,
            warmup: if quick { 10 } else { 30 },
            echo_samples: if quick { 100 } else { 300 },
            echo_block: 50,
            poll_samples: if quick { 10 } else { 30 },
            talk_samples: if quick { 60 } else { 200 },
            ingest_runs: args.number("--ingest-runs", if quick { 1 } else { 5 })?,
            file_lines: 500_000,
            producer_runs: args.number("--producer-runs", if quick { 1 } else { 3 })?,
            concurrent: args.number("--concurrent", 50)?,
            idle_agents: args.number("--idle-agents", 100)?,
            idle_wave: args.number("--idle-wave", 25)?.max(1),
            idle_window: Duration::from_secs(10),
            busy_agents: args.numbers("--busy-agents", 20)?,
            busy_window: Duration::from_secs(10),
            parts: args.parts(7)?,
            start_concurrency: args
                .options()
                .contains(&"--start-concurrency".to_string())
                .then(|| args.number("--start-concurrency", 0))
                .transpose()?,
        })
    }

    fn runs(&self, part: u8) -> bool {
        self.parts.contains(&part)
    }

    fn scale_agents(&self) -> usize {
        self.concurrent.max(self.idle_agents)
    }
}

fn main() {
    let image = test_image();
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test`: the check that an interrupted run removes its containers.
        return interrupted::check_as_a_test(BENCH, docker_missing(&image));
    }
    let Some(args) = Args::from_env(BENCH) else {
        return;
    };
    if let Some(why) = docker_missing(&image) {
        println!("{BENCH} benchmark: skipped ({why})");
        return;
    }
    if let Err(e) = Plan::from_args(&args).and_then(|plan| run(&plan, &image)) {
        eprintln!("{BENCH} benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

/// `AGENT_HUB_TEST_IMAGE`, else `AGENT_TEST_IMAGE` of `docker/images.env`.
fn test_image() -> String {
    std::env::var("AGENT_HUB_TEST_IMAGE").unwrap_or_else(|_| {
        IMAGES_ENV
            .lines()
            .find_map(|l| l.strip_prefix("AGENT_TEST_IMAGE="))
            .expect("AGENT_TEST_IMAGE in docker/images.env")
            .trim()
            .to_string()
    })
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
// The summary table

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
    table(
        "Summary",
        &[
            "measurement",
            "n",
            "p50 (or value)",
            "p99",
            "target",
            "result",
        ],
    );
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.name, r.n, r.p50, r.p99, r.target, r.result
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The in-process hub and its agents

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
    let busy = plan.busy_agents.iter().copied().max().unwrap_or(0);
    for id in ["echo", "ingest", "producer", busy::QUIET_AGENT]
        .map(String::from)
        .into_iter()
        .chain(scale_ids(plan.scale_agents()))
        .chain(busy::busy_ids(busy))
    {
        text.push_str(&agent_toml(&id, image));
    }
    let mut config = HubConfig::parse(&text, "bench.toml").map_err(|e| anyhow!(e))?;
    match plan.start_concurrency {
        None => {}
        // More slots than agents: no start ever waits (the hub before #30).
        Some(0) => config.agent_start_concurrency = plan.scale_agents() + 100,
        Some(n) => config.agent_start_concurrency = n,
    }
    Ok(config)
}

impl HubUnderTest {
    /// Starts an agent through the API; returns its session id and container id.
    async fn start_agent(&self, id: &str) -> Result<(String, String)> {
        timed_out(
            async { Ok(self.client.agent_op(id, "start", false).await?) },
            OP_TIMEOUT,
            "agent start",
        )
        .await?;
        let agent = self.client.agent(id).await?.agent;
        let field = |value: &Option<String>, name: &str| {
            value
                .clone()
                .ok_or_else(|| anyhow!("agent {id} has no {name}: {agent:?}"))
        };
        Ok((
            field(&agent.session_id, "session_id")?,
            field(&agent.container_id, "container_id")?,
        ))
    }
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

fn print_header(plan: &Plan, image: &str, hub_id: &str) {
    let server = |field: &str| command_output("docker", &["version", "--format", field]);
    println!("## docker_agents benchmark\n");
    println!(
        "- environment: {} cores, {} MB RAM, kernel {}, Docker Engine {} (API {}), {}, \
         image {image} ({}, {}); load average at start {} (UTC {})",
        cores(),
        command_output("sh", &["-c", "free -m | awk '/Mem:/ {print $2}'"]),
        command_output("uname", &["-r"]),
        server("{{.Server.Version}}"),
        server("{{.Server.APIVersion}}"),
        command_output("rustc", &["--version"]),
        in_image(image, "tmux", &["-V"]),
        in_image(image, "bash", &["-c", "echo bash $BASH_VERSION"]),
        load_average(),
        utc_now(),
    );
    println!(
        "- command: `CARGO_TARGET_DIR=/tmp/bench-docker-target {}` (release profile)",
        bench_command(BENCH, &plan.options)
    );
    println!(
        "- hub: in-process (hub id {hub_id}), API on 127.0.0.1:0, scrollback {} bytes per \
         session, agent_start_concurrency {}; agents: `bash --norc --noprofile` (PS1='$ ') in \
         the image's tmux session, network none; the bench client (reqwest, tokio-tungstenite) \
         in the same process",
        HubConfig::default().scrollback_bytes,
        match plan.start_concurrency {
            None => format!("{} (default)", HubConfig::default().agent_start_concurrency),
            Some(0) => "unlimited".into(),
            Some(n) => n.to_string(),
        }
    );
    println!(
        "- samples: echo {} per row after {} warm-up (interleaved in blocks of {}), older \
         design {}, talk {}, ingest {} run(s) each; {} concurrent starts; {} idle agents \
         ({} at a time) over {} s; busy fleets of {:?} over {} s{}",
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
        plan.busy_agents,
        plan.busy_window.as_secs(),
        if plan.quick { " (--quick)" } else { "" },
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
        scale::report_idle(&scale::measure_idle(hut, plan).await?, &mut summary);
    }
    if plan.runs(4) {
        eprintln!("4. starting {} agents concurrently...", plan.concurrent);
        scale::report_start_stop(
            &scale::measure_start_stop(hut, hub_id, image, plan.concurrent).await,
            &mut summary,
        );
    }
    let docker = Docker::connect_with_defaults()?.negotiate_version().await?;
    let raw_container = start_raw_container(hub_id, image)?;
    if plan.runs(1) || plan.runs(2) {
        eprintln!("1-2. measuring echo round trips and talk...");
        let (echo, talk) = measure_echo_and_talk(hut, &docker, &raw_container, plan).await?;
        echo::report_echo_and_talk(&echo, &talk, &mut summary);
    }
    if plan.runs(3) {
        eprintln!("3. measuring ingest throughput...");
        let ingest = ingest::measure_ingest(hut, &docker, &raw_container, plan, dir).await?;
        ingest::report_ingest(&ingest, &mut summary);
    }
    if plan.runs(6) {
        eprintln!("6. measuring the producer's own cost...");
        let (bare, hub) = producer::measure_producer(hut, plan).await?;
        for [name, n, value, target, result] in
            common::producer::summary("container agent", &bare, &hub)
        {
            summary.push(SummaryRow {
                name,
                n,
                p50: value,
                p99: "-".into(),
                target,
                result,
            });
        }
    }
    if plan.runs(7) {
        let mut fleets = Vec::new();
        for &n in &plan.busy_agents {
            eprintln!("7. measuring a busy fleet of {n}...");
            fleets.push(busy::measure_busy(hut, &docker, &raw_container, n, plan).await?);
        }
        busy::report_busy(&fleets, &mut summary);
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
) -> Result<(echo::EchoResults, Vec<Duration>)> {
    let mut echo = echo::EchoResults {
        rows: Vec::new(),
        old_design: Vec::new(),
    };
    if plan.runs(1) {
        echo = echo::measure_echo(hut, docker, raw_container, plan).await?;
    }
    let mut talk = Vec::new();
    if plan.runs(2) {
        let (sid, _) = hut.start_agent("echo").await?;
        talk = echo::measure_talk(hut, &sid, plan).await?;
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
    let rt = runtime()?;
    interrupted::remove_on_signal(&rt, hub_id.clone(), dir.path().to_path_buf());
    let hut = rt.block_on(HubUnderTest::start(config))?;
    let result = rt.block_on(measure_all(&hut, plan, dir.path(), &hub_id, image));
    rt.block_on(hut.stop());
    kill_tmux_server(&format!("ah-{hub_id}"));
    result
}
