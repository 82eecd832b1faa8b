//! Usage benchmark (#41): what following the agents' usage records costs the hub.
//!
//! Run with `cargo bench --bench usage` (`-- --quick` for a shorter window, `--agents N`).
//! `cargo test --all-targets` also runs this binary, without `--bench`: it then prints one line
//! and exits.
//!
//! One process holds the hub's usage ledger (on a temporary data dir, the shipped price table)
//! and follows 50 agents' Claude Code transcript directories, as it does for 50 running
//! container agents. A child process (bash, so its CPU is not counted) appends one transcript
//! line of an API call to each agent's transcript every second. The process's CPU time over the
//! window is the cost; every line written must have been counted by the end (the figure of a
//! follower that falls behind would mean nothing).
//!
//! Target: at most 1 % of one core with 50 agents.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_hub::ledger::{Following, Ledger};
use agent_hub::usage::price::PriceTable;
use agent_hub::usage::records::Format;
use agent_hub::usage::tally::Period;
use anyhow::{ensure, Result};
use tokio_util::sync::CancellationToken;

#[path = "common/mod.rs"]
mod common;

use common::procfs::{self, CpuTimes};

fn main() {
    let Some(args) = common::args::Args::from_env("usage") else {
        return;
    };
    let agents = args.number("--agents", 50).unwrap_or(50).max(1);
    let window = Duration::from_secs(if args.quick() { 20 } else { 60 });
    let runtime = procfs::runtime().expect("runtime");
    if let Err(e) = runtime.block_on(run(agents, window)) {
        eprintln!("usage benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

async fn run(agents: usize, window: Duration) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ledger = Arc::new(Ledger::open(
        &dir.path().join("data"),
        PriceTable::shipped(),
    ));
    let stop = CancellationToken::new();
    for n in 0..agents {
        let records = dir.path().join(format!("a{n}/projects/-work"));
        std::fs::create_dir_all(&records)?;
        let following = Following {
            agent: format!("a{n}"),
            team: "bench".into(),
            dir: dir.path().join(format!("a{n}/projects")),
            format: Format::ClaudeTranscript,
            from: Default::default(),
        };
        ledger
            .follow(following, stop.clone())
            .map_err(std::io::Error::other)?;
    }
    let mut writer = writer(dir.path(), agents)?;
    // The first lines and the first walks of every directory, before the window.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = CpuTimes::now();
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let used = CpuTimes::now().since(before);
    let elapsed = started.elapsed().as_secs_f64();
    writer.kill()?;
    writer.wait()?;
    let written = lines_written(dir.path(), agents);
    // The last lines: a look a second, and one more when the followers stop.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let counted = ledger.of_agents(|_, _| true, Period::default()).calls;
    let core_pct = 100.0 * used.process / elapsed;
    println!(
        "usage: {agents} agents, a transcript line each per second, {elapsed:.0} s on {} cores ({}): \
         the hub's CPU {:.3} s = {core_pct:.2} % of one core (target <= 1 %: {}); \
         {written} lines written, {counted} calls counted",
        procfs::cores(),
        procfs::load_average(),
        used.process,
        common::report::verdict(core_pct <= 1.0),
    );
    ensure!(
        counted == written,
        "{written} lines written but {counted} calls counted"
    );
    Ok(())
}

/// A bash loop appending one Claude Code transcript line (an API call's usage, a request id of
/// its own) to each agent's transcript every second.
fn writer(dir: &Path, agents: usize) -> Result<Child> {
    let line = r#"{"type":"assistant","timestamp":"2026-11-27T05:00:00Z","requestRef":"r%d","message":{"id":"m","model":"claude-sonnet-4-5","usage":{"input_tokens":1200,"cache_creation_input_tokens":78,"cache_read_input_tokens":560,"output_tokens":34}}}\n"#;
    let script = format!(
        "n=0; while :; do n=$((n+1)); for i in $(seq 0 {last}); do printf '{line}' $n >> \"{dir}/a$i/projects/-work/s.jsonl\"; done; sleep 1; done",
        last = agents - 1,
        dir = dir.display(),
    );
    Ok(Command::new("bash").args(["-c", &script]).spawn()?)
}

/// The lines in every agent's transcript.
fn lines_written(dir: &Path, agents: usize) -> u64 {
    (0..agents)
        .map(|n| dir.join(format!("a{n}/projects/-work/s.jsonl")))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|t| t.lines().count() as u64)
        .sum()
}
