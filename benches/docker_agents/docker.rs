//! The Docker side of the benchmark: the docker CLI, the guard that removes this run's
//! containers, a raw bollard exec (the baselines, without the hub) and the container they run
//! in, and the CPU readings of a container and of dockerd.

use std::pin::Pin;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::query_parameters::ResizeExecOptionsBuilder;
use bollard::Docker;
use futures_util::stream::Stream;
use futures_util::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::common::procfs::command_output;
use super::common::search::Search;
use super::common::SAMPLE_TIMEOUT;
use super::TMUX_SESSION;

/// Detach keys for the raw TTY exec: a sequence this benchmark never types.
const UNUSED_DETACH_KEYS: &str = "ctrl-^,ctrl-_";

pub fn docker_cli(args: &[&str]) -> Result<String> {
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
pub struct ContainerGuard(pub String);

impl ContainerGuard {
    pub fn remove_all(&self) -> usize {
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
        // The agents' home volumes go with them.
        let volumes = docker_cli(&["volume", "ls", "-q", "--filter", &label]).unwrap_or_default();
        let volumes: Vec<&str> = volumes.split_whitespace().collect();
        if !volumes.is_empty() {
            let mut args = vec!["volume", "rm", "-f"];
            args.extend(volumes);
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

pub fn dockerd_pid() -> Option<String> {
    let pids = command_output("pidof", &["dockerd"]);
    pids.split_whitespace().next().map(String::from)
}

/// CPU seconds of a container's cgroup (cgroup v1 cpuacct or v2), if readable.
pub fn container_cpu_secs(full_id: &str) -> Option<f64> {
    let v1 = format!("/sys/fs/cgroup/cpuacct/docker/{full_id}/cpuacct.usage");
    if let Ok(ns) = std::fs::read_to_string(v1) {
        return ns.trim().parse::<f64>().ok().map(|n| n / 1e9);
    }
    let v2 = format!("/sys/fs/cgroup/system.slice/docker-{full_id}.scope/cpu.stat");
    let text = std::fs::read_to_string(v2).ok()?;
    let usec = text.lines().find_map(|l| l.strip_prefix("usage_usec "))?;
    usec.trim().parse::<f64>().ok().map(|u| u / 1e6)
}

type LogStream =
    Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send + 'static>>;

/// A process in a container through a bollard exec, its stdin and its output, read directly.
pub struct RawExec {
    output: LogStream,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    pub buf: Vec<u8>,
}

impl RawExec {
    /// Starts `cmd` in `container`. With `tty`, the exec gets a TTY, resized to 120x30 right
    /// after start (before start it hangs, see the field notes).
    pub async fn start(docker: &Docker, container: &str, cmd: &[&str], tty: bool) -> Result<Self> {
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

    pub async fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.input.write_all(bytes).await?;
        self.input.flush().await?;
        Ok(())
    }

    /// The next chunk of output; None at the end of the stream.
    pub async fn read(&mut self) -> Result<Option<bytes::Bytes>> {
        Ok(self
            .output
            .next()
            .await
            .transpose()?
            .map(LogOutput::into_bytes))
    }

    /// Reads into `buf` until `needle` occurs at or after `from`; returns its position.
    pub async fn wait_for(&mut self, needle: &[u8], from: usize) -> Result<usize> {
        let mut search = Search::new(needle, from);
        loop {
            if let Some(at) = search.found_in(&self.buf) {
                return Ok(at);
            }
            let chunk = self.read().await?.ok_or_else(|| anyhow!("exec ended"))?;
            self.buf.extend_from_slice(&chunk);
        }
    }

    /// Reads (discarding) until the stream ends, for at most `limit`.
    pub async fn drain_to_end(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            while let Ok(Some(_)) = self.read().await {}
        })
        .await
        .is_ok()
    }
}

/// A container like an agent's but not managed by the hub: the baselines run in it.
pub fn start_raw_container(hub_id: &str, image: &str) -> Result<String> {
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

/// `tmux ARGS` in `container`, through the docker CLI.
pub fn tmux_in(container: &str, args: &[&str]) -> Result<String> {
    let mut argv = vec!["exec", container, "tmux"];
    argv.extend_from_slice(args);
    docker_cli(&argv)
}

pub fn capture_pane(container: &str) -> Result<String> {
    tmux_in(container, &["capture-pane", "-p", "-t", TMUX_SESSION])
}

pub fn full_container_id(name: &str) -> String {
    docker_cli(&["inspect", "-f", "{{.Id}}", name])
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
