//! Part 4's baseline, timed in the same run before the hub's starts: what Docker alone takes
//! to bring up N agents' containers with a tmux session each, all at once.

use std::time::{Duration, Instant};

use anyhow::Result;

/// `n` × (`docker run -d` of the image with `sleep infinity`, then `docker exec … tmux
/// new-session -d` in it), all at once, then `docker rm -f` of all of them at once.
pub struct RawStart {
    pub n: usize,
    /// Each container's time from the common start until its tmux session ran.
    pub ready: Vec<Duration>,
    pub failures: Vec<String>,
    /// Until the last tmux session ran.
    pub wall: Duration,
    pub remove_wall: Duration,
}

async fn docker_async(args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new("docker")
        .args(args)
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// One baseline container, made as the hub makes an agent's (init, no network, UTF-8 locale
/// for tmux, the hub's label so the bench's guard removes it); returns its name.
async fn raw_one(hub_id: &str, image: &str, i: usize) -> Result<String> {
    let name = format!("agent-hub-{hub_id}-raw{i:03}");
    let label = format!("agent-hub.hub={hub_id}");
    docker_async(&[
        "run",
        "-d",
        "--init",
        "--name",
        &name,
        "--label",
        &label,
        "--network",
        "none",
        "-e",
        "LANG=C.UTF-8",
        "--entrypoint",
        "sleep",
        image,
        "infinity",
    ])
    .await?;
    docker_async(&[
        "exec",
        &name,
        "tmux",
        "new-session",
        "-d",
        "-s",
        "agent",
        "-x",
        "120",
        "-y",
        "30",
        "bash",
        "--norc",
        "--noprofile",
    ])
    .await?;
    Ok(name)
}

pub async fn measure_raw_start(hub_id: &str, image: &str, n: usize) -> RawStart {
    let started = Instant::now();
    let runs = (0..n).map(|i| async move {
        let outcome = raw_one(hub_id, image, i).await;
        (outcome, started.elapsed())
    });
    let results = futures_util::future::join_all(runs).await;
    let mut raw = RawStart {
        n,
        ready: Vec::new(),
        failures: Vec::new(),
        wall: started.elapsed(),
        remove_wall: Duration::ZERO,
    };
    let mut names = Vec::new();
    for (outcome, took) in results {
        match outcome {
            Ok(name) => {
                raw.ready.push(took);
                names.push(name);
            }
            Err(e) => raw.failures.push(format!("{e:#}")),
        }
    }
    let removing = Instant::now();
    let removals = names
        .iter()
        .map(|name| async move { docker_async(&["rm", "-f", name]).await });
    futures_util::future::join_all(removals).await;
    raw.remove_wall = removing.elapsed();
    raw
}
