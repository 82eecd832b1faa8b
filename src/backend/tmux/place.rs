//! Where a tmux server runs and how the hub reaches it: on the host (a `tmux` process, with
//! an optional `-L` socket name) or inside a Docker container (the same argv through
//! `docker exec`). The tmux backend is written once over this; it never knows which it has.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::Docker;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::Command;

use super::TmuxError;

/// How long a single tmux command may take before it is considered hung.
pub const TMUX_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a wait for a session asks tmux again.
const LOOK_INTERVAL: Duration = Duration::from_millis(100);
/// `sh -c` script of [`TmuxPlace::wait_for_session`] in a container: `$1` more looks after
/// the first, for the session `$2`; says `found` once it exists (an exec the engine ended
/// with its container may report no exit code).
const WAIT_SCRIPT: &str = "n=$1; until tmux has-session -t \"=$2\" 2>/dev/null; do [ \"$n\" -gt 0 ] || exit 1; n=$((n - 1)); sleep 0.1; done; echo found";

/// A tmux server the hub talks to.
#[derive(Clone)]
pub enum TmuxPlace {
    /// On the host; `socket_name` is tmux's `-L` (None = the user's default server).
    Host { socket_name: Option<String> },
    /// Inside a container, as the container's user (whose tmux server the image started).
    Container {
        docker: Docker,
        container_id: String,
        /// A directory of this machine's that the container has mounted, for the pane's
        /// pipe (see [`TmuxPlace::pipe_root`]); none on a remote engine.
        pipe_root: Option<PipeRoot>,
    },
}

/// A directory both the hub and the tmux server can reach: where a pane's pipe can be a FIFO
/// the hub reads itself, with no relay process (and, for a container, no `docker exec` stream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipeRoot {
    /// The directory on this machine.
    pub local: std::path::PathBuf,
    /// The same directory as the tmux server sees it.
    pub for_tmux: String,
    /// Whether the tmux server may run as another user (a container's): its FIFOs are then
    /// writable by anyone who can reach them (the directory is the agent's alone).
    pub other_user: bool,
}

/// The byte streams of a running `tmux -C` client.
pub struct ControlIo {
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
    pub writer: Pin<Box<dyn AsyncWrite + Send>>,
    /// Completes once the client process is gone (reaped on the host; at once in a container,
    /// where the exec ends with its stream).
    pub ended: BoxFuture<'static, ()>,
}

/// The standard output of a shell script run where the tmux server runs (see
/// [`TmuxPlace::open_reader`]). On the host the script is killed when this is dropped.
pub struct ReaderIo {
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
    _child: Option<tokio::process::Child>,
}

impl TmuxPlace {
    /// Whether processes in this tmux are host processes (their pids mean something here).
    pub fn is_host(&self) -> bool {
        matches!(self, TmuxPlace::Host { .. })
    }

    /// Where a pane's pipe can be a FIFO the hub reads itself: the host's temporary directory,
    /// or a container's mounted pipe directory. `None`: a relay beside the tmux server streams
    /// the FIFO to the hub ([`TmuxPlace::open_reader`]).
    pub fn pipe_root(&self) -> Option<PipeRoot> {
        match self {
            TmuxPlace::Host { .. } => {
                let local = std::env::temp_dir();
                let for_tmux = local.to_str()?.trim_end_matches('/').to_string();
                Some(PipeRoot {
                    local,
                    for_tmux,
                    other_user: false,
                })
            }
            TmuxPlace::Container { pipe_root, .. } => pipe_root.clone(),
        }
    }

    fn host_command(socket_name: &Option<String>) -> Command {
        let mut cmd = Command::new("tmux");
        if let Some(name) = socket_name {
            cmd.arg("-L").arg(name);
        }
        // A hub started from inside tmux must not talk to that tmux by accident.
        cmd.env_remove("TMUX");
        cmd.env("LANG", "C.UTF-8");
        cmd.kill_on_drop(true);
        cmd
    }

    /// Runs one tmux command; returns stdout, or stderr as the error.
    pub async fn run(&self, args: &[&str]) -> Result<String, TmuxError> {
        self.run_with_env(args, None).await
    }

    /// Runs one tmux command. On the host, `env` (when given) is the command's whole
    /// environment, so a server it starts gets exactly that environment.
    pub async fn run_with_env(
        &self,
        args: &[&str],
        env: Option<&BTreeMap<String, String>>,
    ) -> Result<String, TmuxError> {
        let run = async {
            match self {
                TmuxPlace::Host { socket_name } => {
                    let mut cmd = Self::host_command(socket_name);
                    if let Some(env) = env {
                        cmd.env_clear().envs(env).env("LANG", "C.UTF-8");
                    }
                    let out = cmd
                        .args(args)
                        .stdin(Stdio::null())
                        .output()
                        .await
                        .map_err(TmuxError::RunTmux)?;
                    if out.status.success() {
                        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
                    } else {
                        Err(command_failed(args, &out.stderr))
                    }
                }
                TmuxPlace::Container {
                    docker,
                    container_id,
                    ..
                } => exec_capture(docker, container_id, args).await,
            }
        };
        tokio::time::timeout(TMUX_CALL_TIMEOUT, run)
            .await
            .map_err(|_| TmuxError::TimedOut {
                command: command_name(args),
            })?
    }

    /// Whether a session with exactly this name exists.
    pub async fn has_session(&self, name: &str) -> bool {
        self.run(&["has-session", "-t", &format!("={name}")])
            .await
            .is_ok()
    }

    /// Whether a session with exactly this name exists or appears within `within`. In a
    /// container the whole wait is one exec (tmux asked in there every 100 ms): an exec is
    /// three engine calls and a process, and a fleet's start is bounded by them (#30).
    pub async fn wait_for_session(&self, name: &str, within: Duration) -> bool {
        match self {
            TmuxPlace::Host { .. } => {
                let deadline = tokio::time::Instant::now() + within;
                loop {
                    if self.has_session(name).await {
                        return true;
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return false;
                    }
                    tokio::time::sleep(LOOK_INTERVAL).await;
                }
            }
            TmuxPlace::Container {
                docker,
                container_id,
                ..
            } => {
                let looks = (within.as_millis() / LOOK_INTERVAL.as_millis()).to_string();
                let cmd = ["sh", "-c", WAIT_SCRIPT, "agent-hub-wait", &looks, name];
                // The exec ends with the container if it dies meanwhile.
                let waited = exec_output(docker, container_id, &cmd);
                matches!(
                    tokio::time::timeout(within + TMUX_CALL_TIMEOUT, waited).await,
                    Ok(Ok((0, out, _))) if out.starts_with(b"found")
                )
            }
        }
    }

    /// The names of the server's sessions (none when no server runs).
    pub async fn list_sessions(&self) -> Result<Vec<String>, TmuxError> {
        let out = self
            .run(&["list-sessions", "-F", "#{session_name}"])
            .await?;
        Ok(out
            .lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// Runs `sh -c script` beside the tmux server (a host process, or a non-TTY exec in the
    /// container) and streams its standard output; standard error is dropped.
    pub async fn open_reader(&self, script: &str) -> Result<ReaderIo, TmuxError> {
        match self {
            TmuxPlace::Host { .. } => {
                let mut child = Command::new("sh")
                    .args(["-c", script])
                    .env_remove("TMUX")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(TmuxError::RunSh)?;
                let out = child.stdout.take().ok_or(TmuxError::NoStream {
                    program: "sh",
                    stream: "stdout",
                })?;
                Ok(ReaderIo {
                    reader: Box::pin(out),
                    _child: Some(child),
                })
            }
            TmuxPlace::Container {
                docker,
                container_id,
                ..
            } => {
                let exec = create_exec(docker, container_id, &["sh", "-c", script], false).await?;
                let started = docker
                    .start_exec(&exec, None::<StartExecOptions>)
                    .await
                    .map_err(|source| exec_failed(container_id, source))?;
                let StartExecResults::Attached { output, .. } = started else {
                    return Err(TmuxError::ExecDetached);
                };
                let stdout = output.filter_map(|item| async move {
                    match item {
                        Ok(bollard::container::LogOutput::StdErr { .. }) => None,
                        Ok(other) => Some(Ok(other.into_bytes())),
                        Err(e) => Some(Err(std::io::Error::other(e))),
                    }
                });
                Ok(ReaderIo {
                    reader: Box::pin(tokio_util::io::StreamReader::new(Box::pin(stdout))),
                    _child: None,
                })
            }
        }
    }

    /// Starts a control-mode client (`tmux -u -C <args>`).
    pub async fn open_control(&self, args: &[&str]) -> Result<ControlIo, TmuxError> {
        match self {
            TmuxPlace::Host { socket_name } => {
                let mut cmd = Self::host_command(socket_name);
                cmd.args(["-u", "-C"])
                    .args(args)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null());
                let mut child = cmd.spawn().map_err(TmuxError::StartControl)?;
                let no_stream = |stream| TmuxError::NoStream {
                    program: "tmux control client",
                    stream,
                };
                let writer = child.stdin.take().ok_or(no_stream("stdin"))?;
                let reader = child.stdout.take().ok_or(no_stream("stdout"))?;
                Ok(ControlIo {
                    reader: Box::pin(reader),
                    writer: Box::pin(writer),
                    ended: async move {
                        let _ = child.wait().await;
                    }
                    .boxed(),
                })
            }
            TmuxPlace::Container {
                docker,
                container_id,
                ..
            } => {
                let mut cmd = vec!["tmux", "-u", "-C"];
                cmd.extend_from_slice(args);
                let exec = create_exec(docker, container_id, &cmd, true).await?;
                // `None`: the daemon frames the stream, so every byte arrives exactly.
                let started = docker
                    .start_exec(&exec, None::<StartExecOptions>)
                    .await
                    .map_err(TmuxError::StartControlExec)?;
                let StartExecResults::Attached { output, input } = started else {
                    return Err(TmuxError::ExecDetached);
                };
                let bytes = output.map(|item| {
                    item.map(|log| log.into_bytes())
                        .map_err(std::io::Error::other)
                });
                Ok(ControlIo {
                    reader: Box::pin(tokio_util::io::StreamReader::new(bytes)),
                    writer: input,
                    ended: async {}.boxed(),
                })
            }
        }
    }
}

/// `tmux <first argument>`: how a command is named in its errors.
fn command_name(args: &[&str]) -> String {
    format!("tmux {}", args.first().copied().unwrap_or(""))
}

/// The error of a tmux command that failed: what it said on its standard error.
fn command_failed(args: &[&str], stderr: &[u8]) -> TmuxError {
    TmuxError::Command {
        command: command_name(args),
        message: String::from_utf8_lossy(stderr).trim().to_string(),
    }
}

fn exec_failed(container_id: &str, source: bollard::errors::Error) -> TmuxError {
    TmuxError::Exec {
        container_id: container_id.to_string(),
        source,
    }
}

async fn create_exec(
    docker: &Docker,
    container_id: &str,
    cmd: &[&str],
    stdin: bool,
) -> Result<String, TmuxError> {
    let config = ExecConfig {
        cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
        attach_stdin: Some(stdin),
        attach_stdout: Some(true),
        attach_stderr: Some(!stdin),
        tty: Some(false),
        env: Some(vec!["LANG=C.UTF-8".into()]),
        ..Default::default()
    };
    docker
        .create_exec(container_id, config)
        .await
        .map(|r| r.id)
        .map_err(|source| exec_failed(container_id, source))
}

/// Runs `tmux ARGS` in a container and collects its output (non-TTY exec, framed streams).
async fn exec_capture(
    docker: &Docker,
    container_id: &str,
    args: &[&str],
) -> Result<String, TmuxError> {
    let mut cmd = vec!["tmux"];
    cmd.extend_from_slice(args);
    let (code, stdout, stderr) = exec_output(docker, container_id, &cmd).await?;
    if code == 0 {
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    } else {
        Err(command_failed(args, &stderr))
    }
}

/// Runs `cmd` in a container; its exit code, standard output and standard error.
async fn exec_output(
    docker: &Docker,
    container_id: &str,
    cmd: &[&str],
) -> Result<(i64, Vec<u8>, Vec<u8>), TmuxError> {
    let exec = create_exec(docker, container_id, cmd, false).await?;
    let started = docker
        .start_exec(&exec, None::<StartExecOptions>)
        .await
        .map_err(|source| exec_failed(container_id, source))?;
    let StartExecResults::Attached { mut output, .. } = started else {
        return Err(TmuxError::ExecDetached);
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    while let Some(item) = output.next().await {
        match item.map_err(TmuxError::ExecOutput)? {
            bollard::container::LogOutput::StdErr { message } => stderr.extend_from_slice(&message),
            other => stdout.extend_from_slice(&other.into_bytes()),
        }
    }
    let code = docker
        .inspect_exec(&exec)
        .await
        .map_err(TmuxError::ExecInspect)?
        .exit_code
        .unwrap_or(0);
    Ok((code, stdout, stderr))
}
