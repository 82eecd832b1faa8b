//! A run stopped by Ctrl-C (SIGINT) or SIGTERM removes its containers and volumes too, as
//! `ContainerGuard` does on success, error and panic: a signal ends the process without
//! running destructors, so a handler on the runtime does the same removal, then exits.
//!
//! Run without `--bench` (as `cargo test --all-targets` does), the binary checks this itself
//! when an engine and the test image are there: it starts itself as a real run, waits for the
//! run's first container, sends SIGINT and fails when any container or volume of the run is
//! left (skipped without an engine, failed instead when `AGENT_HUB_DOCKER_TESTS=required`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};

use super::common::procfs::kill_tmux_server;
use super::docker::{docker_cli, ContainerGuard};

/// How long the checked run may take to make its first container, and to end after SIGINT.
const FIRST_CONTAINER_WITHIN: Duration = Duration::from_secs(180);
const ENDS_WITHIN: Duration = Duration::from_secs(60);

/// On SIGINT or SIGTERM: removes the run's containers, volumes, tmux server and temporary
/// directory, then exits with 130 or 143.
pub fn remove_on_signal(rt: &tokio::runtime::Runtime, hub_id: String, dir: PathBuf) {
    let (mut int, mut term) = rt.block_on(async {
        (
            signal(SignalKind::interrupt()).expect("SIGINT handler"),
            signal(SignalKind::terminate()).expect("SIGTERM handler"),
        )
    });
    rt.spawn(async move {
        let (name, code) = tokio::select! {
            _ = int.recv() => ("SIGINT", 130),
            _ = term.recv() => ("SIGTERM", 143),
        };
        eprintln!("{name}: removing the containers and volumes of {hub_id}");
        let _ = tokio::task::spawn_blocking(move || {
            let guard = ContainerGuard(hub_id.clone());
            // A start under way when the signal came may still make one: look again.
            let mut removed = guard.remove_all();
            std::thread::sleep(Duration::from_secs(1));
            removed += guard.remove_all();
            eprintln!("{name}: removed {removed} container(s) of {hub_id}");
            kill_tmux_server(&format!("ah-{hub_id}"));
            let _ = std::fs::remove_dir_all(&dir);
        })
        .await;
        std::process::exit(code);
    });
}

/// The check run by `cargo test`: an interrupted run leaves nothing of its own behind.
pub fn check_as_a_test(bench: &str, docker_missing: Option<String>) {
    let required = std::env::var("AGENT_HUB_DOCKER_TESTS").is_ok_and(|v| v == "required");
    if let Some(why) = docker_missing {
        if required {
            eprintln!("{bench}: Docker tests are required but {why}");
            std::process::exit(1);
        }
        println!("{bench} benchmark: skipped (run with cargo bench --bench {bench}); its interrupt check skipped: {why}");
        return;
    }
    match interrupted_run_leaves_nothing() {
        Ok(removed) => {
            println!("{bench}: an interrupted run removed its {removed} container(s) and left none")
        }
        Err(e) => {
            eprintln!("{bench}: interrupt check failed: {e}");
            std::process::exit(1);
        }
    }
}

fn interrupted_run_leaves_nothing() -> Result<usize, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .args(["--bench", "--parts", "1", "--quick"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start a run: {e}"))?;
    let mut run = Run(child);
    let hub_id = format!("bench{}", run.0.id());
    let label = format!("label=agent-hub.hub={hub_id}");
    let seen = wait_for_containers(&mut run, &label)?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .map_err(|e| e.to_string())?;
    let status = wait_for_exit(&mut run.0)?;
    let containers = listed(&["ps", "-aq", "--filter", &label]);
    let volumes = listed(&["volume", "ls", "-q", "--filter", &label]);
    // Whatever the outcome, nothing of the check stays.
    drop(ContainerGuard(hub_id));
    if !containers.is_empty() || !volumes.is_empty() {
        return Err(format!(
            "after SIGINT ({status}) the run left {} container(s) and {} volume(s)",
            containers.len(),
            volumes.len()
        ));
    }
    if status.code() != Some(130) {
        return Err(format!("the run ended with {status}, not 130 (SIGINT)"));
    }
    Ok(seen)
}

fn wait_for_containers(run: &mut Run, label: &str) -> Result<usize, String> {
    let start = Instant::now();
    loop {
        let ids = listed(&["ps", "-aq", "--filter", label]);
        if !ids.is_empty() {
            return Ok(ids.len());
        }
        if let Ok(Some(status)) = run.0.try_wait() {
            return Err(format!(
                "the run ended ({status}) before it made a container"
            ));
        }
        if start.elapsed() > FIRST_CONTAINER_WITHIN {
            return Err(format!("no container after {FIRST_CONTAINER_WITHIN:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_for_exit(child: &mut Child) -> Result<std::process::ExitStatus, String> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(status);
        }
        if start.elapsed() > ENDS_WITHIN {
            return Err(format!(
                "the run did not end within {ENDS_WITHIN:?} of SIGINT"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn listed(args: &[&str]) -> Vec<String> {
    docker_cli(args)
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// The checked run, killed if the check itself gives up.
struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
