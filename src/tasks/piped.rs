//! Piped tasks (`pty: false`): `sh -c CMD` with stdout and stderr captured, in a process group
//! of its own, run to its end for the request that waits for it.

use super::*;

/// A piped task's result.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub task: TaskInfo,
    pub stdout: String,
    pub stderr: String,
    /// Some output was left out (more than 4 MiB on a stream).
    pub truncated: bool,
}

/// Stops a piped task if the request waiting for it goes away.
struct StopOnDrop(Option<Arc<Task>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.request_stop(StopReason::Cancel);
        }
    }
}

/// Runs a piped task (`pty: false`) to its end: `sh -c CMD` with stdout and stderr captured,
/// in its own process group. A timeout is an error ([`HubError::TaskTimedOut`]) carrying the
/// partial output.
impl Tasks {
    pub async fn run(&self, actor: &Actor, req: CreateTask) -> HubResult<RunOutput> {
        let handles = &self.handles;
        handles.host.guard.check_input(&req.cmd, actor.role())?;
        self.purge();
        let plan = plan(&req)?;
        let id = handles.host.sessions.new_id("task");
        let cwd = match &req.cwd {
            Some(cwd) => {
                let cwd = PathBuf::from(cwd);
                crate::host::spawn_check::check_cwd(&cwd)?;
                cwd
            }
            None => crate::platform::home_dir(),
        };
        // The hub's home directory: not the caller's mistake.
        if !cwd.is_dir() {
            return Err(HubError::SpawnFailed {
                reason: format!(
                    "working directory '{}' does not exist or is not a directory",
                    cwd.display()
                ),
            });
        }
        let mut extra = BTreeMap::from([
            ("TERM".to_string(), "dumb".to_string()),
            ("AGENT_HUB_TASK_ID".to_string(), id.clone()),
        ]);
        extra.extend(req.env);
        let mut env = handles.host.child_env(&id, &extra);
        env.remove("AGENT_HUB_SESSION_ID");
        let path = env.get("PATH").map(String::as_str);
        let (shell, args) = crate::platform::command_shell(&req.cmd);
        crate::host::spawn_check::check_program(&shell, &cwd, path)?;
        let mut command = tokio::process::Command::new(&shell);
        command
            .args(&args)
            .env_clear()
            .envs(&env)
            .current_dir(&cwd)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        crate::process::new_group(&mut command);
        let child = command.spawn().map_err(|e| HubError::SpawnFailed {
            reason: format!("cannot start '{shell}': {e}"),
        })?;
        if let Some(pid) = child.id() {
            if let Err(e) = crate::process::contain(pid) {
                tracing::warn!(pid, "the task's processes are not held together: {e}");
            }
        }
        let info = TaskInfo {
            id,
            name: plan.name,
            state: TaskState::Running,
            pid: child.id(),
            started_at: Utc::now(),
            finished_at: None,
            exit_code: None,
            duration_ms: None,
            session_id: None,
            cmd: req.cmd,
            pty: false,
        };
        let task = Task::new(info.clone());
        self.started(task.clone());
        // The command runs on its own task, so it is followed to its end (and killed) even if this
        // request goes away; a request that goes away cancels it.
        let mut guard = StopOnDrop(Some(task.clone()));
        let follower = handles.tracker.spawn(follow_piped(
            handles.clone(),
            task.clone(),
            child,
            plan.timeout,
        ));
        let result = follower.await;
        guard.0 = None;
        let (stdout, stderr, truncated) = result.map_err(|e| HubError::Internal {
            message: format!("task follower failed: {e}"),
        })?;
        let task = task.info();
        if task.state == TaskState::Timeout {
            return Err(HubError::TaskTimedOut {
                id: task.id,
                timeout_ms: plan.timeout.as_millis() as u64,
                duration_ms: task.duration_ms.unwrap_or(0),
                stdout,
                stderr,
            });
        }
        Ok(RunOutput {
            task,
            stdout,
            stderr,
            truncated,
        })
    }
}

fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid {
        crate::process::kill_group(pgid);
    }
}

/// Follows a piped task to its end; returns stdout, stderr and whether either was cut.
async fn follow_piped(
    handles: Handles,
    task: Arc<Task>,
    mut child: tokio::process::Child,
    timeout: Duration,
) -> (String, String, bool) {
    let pgid = child.id();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(usize, Bytes)>(16);
    let mut readers = Vec::new();
    let pipes: [Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>; 2] = [
        child.stdout.take().map(|p| Box::new(p) as _),
        child.stderr.take().map(|p| Box::new(p) as _),
    ];
    for (n, pipe) in pipes.into_iter().enumerate() {
        let Some(mut pipe) = pipe else { continue };
        let tx = tx.clone();
        readers.push(handles.tracker.spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(k) => {
                        if tx
                            .send((n, Bytes::copy_from_slice(&buf[..k])))
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }
        }));
    }
    drop(tx);

    let id = task.id();
    let mut logs = [
        LogPump::new(&handles, id.clone(), Some("stdout")),
        LogPump::new(&handles, id, Some("stderr")),
    ];
    let mut captured: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut truncated = false;
    let closing = handles.closing.clone();
    let mut stop = task.stop.subscribe();
    let deadline = Instant::now() + timeout;
    let mut stopped: Option<StopReason> = None;
    let mut status: Option<Option<std::process::ExitStatus>> = None;
    let mut pipes_open = true;
    // When to kill leftovers holding the pipes, and when to stop waiting for them at all.
    let mut cutoff: Option<Instant> = None;
    let mut leftovers_killed = false;
    while pipes_open || status.is_none() {
        let running = status.is_none() && stopped.is_none();
        let reason = tokio::select! {
            msg = rx.recv(), if pipes_open => {
                match msg {
                    Some((n, bytes)) => {
                        let room = MAX_CAPTURE_BYTES.saturating_sub(captured[n].len());
                        truncated |= bytes.len() > room;
                        captured[n].extend_from_slice(&bytes[..bytes.len().min(room)]);
                        logs[n].push(&bytes, 0);
                    }
                    None => pipes_open = false,
                }
                continue;
            }
            s = child.wait(), if status.is_none() => {
                status = Some(s.ok());
                if cutoff.is_none() {
                    cutoff = Some(Instant::now() + PIPE_DRAIN);
                }
                continue;
            }
            _ = sleep_until_opt(logs[0].flush_at) => {
                logs[0].flush(false);
                continue;
            }
            _ = sleep_until_opt(logs[1].flush_at) => {
                logs[1].flush(false);
                continue;
            }
            _ = sleep_until_opt(cutoff) => {
                if leftovers_killed {
                    break;
                }
                kill_group(pgid);
                leftovers_killed = true;
                cutoff = Some(Instant::now() + KILL_WAIT);
                continue;
            }
            _ = tokio::time::sleep_until(deadline), if running => StopReason::Timeout,
            reason = stop_requested(&mut stop), if running => reason,
            _ = closing.cancelled(), if running => StopReason::Shutdown,
        };
        stopped = Some(reason);
        kill_group(pgid);
        leftovers_killed = true;
        cutoff = Some(Instant::now() + KILL_WAIT);
    }
    for reader in readers {
        reader.abort();
    }
    // Whatever the command left running in its group ends with it.
    kill_group(pgid);
    for log in &mut logs {
        log.flush(true);
    }
    let exit_code = status.flatten().and_then(|s| s.code());
    task.finish(&handles.events, final_state(stopped, exit_code), exit_code);
    let [stdout, stderr] = captured.map(|b| String::from_utf8_lossy(&b).into_owned());
    (stdout, stderr, truncated)
}
