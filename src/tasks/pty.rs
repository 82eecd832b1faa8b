//! PTY tasks: `sh -c CMD` (Windows: `%COMSPEC% /D /S /C CMD`) in a PTY session of its own,
//! followed to its end (output published, timeout enforced, killed on request, the end
//! recorded).

use super::*;

/// Starts a PTY task for `actor`: `sh -c CMD` in a new PTY session. Returns at once. The
/// command line passes the command guard first, like a `send_line`.
impl Tasks {
    pub async fn start(&self, actor: &Actor, req: CreateTask) -> HubResult<TaskInfo> {
        let handles = &self.handles;
        handles.host.guard.check_input(&req.cmd, actor.role())?;
        self.purge();
        let plan = plan(&req)?;
        let id = handles.host.sessions.new_id("task");
        let mut env = req.env;
        env.insert("AGENT_HUB_TASK_ID".into(), id.clone());
        let (shell, args) = crate::platform::command_shell(&req.cmd);
        let session = handles
            .host
            .create(CreateSession {
                backend: BackendKind::Pty,
                shell: Some(shell),
                args,
                cwd: req.cwd.map(PathBuf::from),
                env,
                owner: Owner {
                    label: req.name,
                    ..Owner::default()
                },
                ..CreateSession::default()
            })
            .await?;
        // From offset 0 right away, so even a command that is already over is seen whole.
        let cursor = OutputCursor::new(session.output().clone(), 0);
        let info = TaskInfo {
            id,
            name: plan.name,
            state: TaskState::Running,
            pid: session.info().pid,
            started_at: session.spec().created_at,
            finished_at: None,
            exit_code: None,
            duration_ms: None,
            session_id: Some(session.id().to_string()),
            cmd: req.cmd,
            pty: true,
        };
        let task = Task::new(info.clone());
        self.started(task.clone());
        handles.tracker.spawn(follow_pty(
            handles.clone(),
            task,
            session,
            cursor,
            plan.timeout,
        ));
        Ok(info)
    }
}

/// Follows a PTY task to its end: publishes its output, enforces its timeout, kills it when
/// asked, and records how it ended.
async fn follow_pty(
    handles: Handles,
    task: Arc<Task>,
    session: Arc<Session>,
    mut cursor: OutputCursor,
    timeout: Duration,
) {
    let pid = session.info().pid;
    let closing = handles.closing.clone();
    let mut stop = task.stop.subscribe();
    let deadline = Instant::now() + timeout;
    let mut log = LogPump::new(&handles, task.id(), None);
    let mut stopped: Option<StopReason> = None;
    let mut give_up: Option<Instant> = None;
    let exit = loop {
        let reason = tokio::select! {
            item = cursor.next() => match item {
                Some(CursorItem::Data { bytes, dropped_bytes }) => {
                    log.push(&bytes, dropped_bytes);
                    continue;
                }
                Some(CursorItem::Exited(exit)) => break Some(exit),
                None => break None,
            },
            _ = sleep_until_opt(log.flush_at) => {
                log.flush(false);
                continue;
            }
            _ = tokio::time::sleep_until(deadline), if stopped.is_none() => StopReason::Timeout,
            reason = stop_requested(&mut stop), if stopped.is_none() => reason,
            _ = closing.cancelled(), if stopped.is_none() => StopReason::Shutdown,
            _ = sleep_until_opt(give_up) => break None,
        };
        stopped = Some(reason);
        give_up = Some(Instant::now() + KILL_WAIT);
        if let Some(pid) = pid {
            crate::process::terminate_session(pid, TermSignal::Kill).await;
        }
    };
    log.flush(true);
    // Whatever the command left running in its terminal ends with it.
    if let Some(pid) = pid {
        if !crate::process::live_session_processes(pid).await.is_empty() {
            crate::process::terminate_session(pid, TermSignal::Kill).await;
        }
    }
    let exit_code = exit.and_then(|e| e.exit_code);
    task.finish(&handles.events, final_state(stopped, exit_code), exit_code);
}
