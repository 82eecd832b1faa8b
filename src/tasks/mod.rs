//! Tasks: one shell command (`sh -c CMD`) run to completion, with a state, an exit code, a
//! timeout and cancellation. A PTY task runs in its own PTY session, so its output is an ordinary
//! session (read, stream, term_read work on it by its session id); a piped task (`pty: false`)
//! runs without a terminal in its own process group and its caller gets stdout and stderr back.
//!
//! Every task publishes `task_started`, coalesced `task_log` chunks and `task_finished` on the
//! hub's event bus, in that order. Cancelling, a timeout and hub shutdown kill every process of
//! the task (its whole terminal session or process group, children included), and so does the
//! command's own end: nothing a task started outlives it. Finished tasks (and their sessions) are
//! kept for `task_retention_s`, then purged lazily.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;

use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::actor::Actor;
use crate::error::{HubError, HubResult};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::event_bus::EventSink;
use crate::host::{CreateSession, HostSessions};
use crate::output::{CursorItem, OutputCursor};
use crate::protocol::BackendKind;
use crate::protocol::EventKind;
use crate::registry::SessionRegistry;
use crate::session::input::TermSignal;
use crate::session::{Owner, Session};

mod log;
mod piped;
mod pty;

pub use crate::protocol::{CreateTask, TaskInfo, TaskState};

use log::LogPump;
pub use piped::RunOutput;

/// Default task timeout, in seconds.
pub const DEFAULT_TIMEOUT_S: f64 = 300.0;
/// Largest accepted task timeout, in seconds (a week).
pub const MAX_TIMEOUT_S: f64 = 7.0 * 86400.0;
/// A `task_log` event is published at most this long after its first byte arrived...
const LOG_FLUSH_INTERVAL: Duration = Duration::from_millis(50);
/// ...or as soon as this many bytes are pending.
const LOG_FLUSH_BYTES: usize = 64 * 1024;
/// After killing a task's processes, how long to wait for the program's end to be recorded.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// After a piped command exits, how long its pipes may stay open (held by processes it left
/// behind) before those processes are killed.
const PIPE_DRAIN: Duration = Duration::from_millis(500);
/// How much of each of stdout and stderr a piped task keeps for its reply.
const MAX_CAPTURE_BYTES: usize = 4 << 20;
/// How long a cancel (or shutdown) waits for the task to finish.
const CANCEL_WAIT: Duration = Duration::from_secs(10);
/// Longest default name (the command itself) before it is shortened.
const MAX_DEFAULT_NAME_CHARS: usize = 80;

/// Why the hub stopped a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Cancel,
    Timeout,
    Shutdown,
}

/// One task: its record, the request to stop it and the signal that it finished.
struct Task {
    info: Mutex<TaskInfo>,
    started: Instant,
    stop: watch::Sender<Option<StopReason>>,
    done: watch::Sender<bool>,
}

impl Task {
    fn new(info: TaskInfo) -> Arc<Self> {
        Arc::new(Task {
            info: Mutex::new(info),
            started: Instant::now(),
            stop: watch::channel(None).0,
            done: watch::channel(false).0,
        })
    }

    fn info(&self) -> TaskInfo {
        self.info.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn id(&self) -> String {
        self.info
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .id
            .clone()
    }

    /// Asks the task's follower to kill it; the first reason wins.
    fn request_stop(&self, reason: StopReason) {
        self.stop.send_if_modified(|r| {
            if r.is_none() {
                *r = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Waits up to `within` for the task to finish; true if it has.
    async fn wait_done(&self, within: Duration) -> bool {
        let mut done = self.done.subscribe();
        let finished = async { done.wait_for(|d| *d).await.is_ok() };
        tokio::time::timeout(within, finished)
            .await
            .unwrap_or(false)
    }

    /// Records the end and publishes `task_finished`. The event goes out under the record's
    /// lock and before waiters wake, so whoever sees the task finished (through the API or
    /// the events) sees both.
    fn finish(&self, events: &EventSink, state: TaskState, exit_code: Option<i32>) {
        let mut info = self.info.lock().unwrap_or_else(|e| e.into_inner());
        if info.state != TaskState::Running {
            return;
        }
        let duration_ms = self.started.elapsed().as_millis() as u64;
        info.state = state;
        info.exit_code = exit_code;
        info.finished_at = Some(Utc::now());
        info.duration_ms = Some(duration_ms);
        events.emit(EventKind::TaskFinished {
            task_id: info.id.clone(),
            state,
            exit_code,
            duration_ms,
        });
        drop(info);
        self.done.send_replace(true);
    }
}

/// What tasks work with (cheap to clone: the followers of running tasks hold a copy).
#[derive(Clone)]
pub struct Handles {
    /// Where a PTY task's session is started (and a purged task's session removed).
    pub host: HostSessions,
    /// Where `task_*` events are published.
    pub events: EventSink,
    /// Where the followers run, so shutdown waits for them.
    pub tracker: TaskTracker,
    /// Cancelled at shutdown: running tasks are killed.
    pub closing: CancellationToken,
}

/// The tasks component: the task table and the operations on tasks.
pub struct Tasks {
    tasks: RwLock<BTreeMap<String, Arc<Task>>>,
    handles: Handles,
}

impl Tasks {
    /// No tasks yet.
    pub fn new(handles: Handles) -> Self {
        Tasks {
            tasks: RwLock::default(),
            handles,
        }
    }

    fn insert(&self, task: Arc<Task>) {
        let id = task.id();
        self.tasks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, task);
    }

    fn all(&self) -> Vec<Arc<Task>> {
        self.tasks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn task(&self, id: &str) -> HubResult<Arc<Task>> {
        self.tasks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| HubError::TaskNotFound { id: id.to_string() })
    }

    /// Removes finished tasks older than the retention time, with their sessions.
    fn purge(&self) {
        let retention = chrono::Duration::seconds(
            self.handles
                .host
                .config
                .task_retention_s
                .min(i64::MAX as u64) as i64,
        );
        let now = Utc::now();
        let expired: Vec<Arc<Task>> = {
            let mut tasks = self.tasks.write().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<String> = tasks
                .iter()
                .filter(|(_, t)| {
                    t.info()
                        .finished_at
                        .is_some_and(|f| now.signed_duration_since(f) >= retention)
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| tasks.remove(id)).collect()
        };
        for task in expired {
            if let Some(sid) = task.info().session_id {
                self.handles.host.sessions.remove(&sid);
            }
        }
    }

    /// All tasks, ordered by id (finished ones past their retention are purged first).
    pub fn list(&self) -> Vec<TaskInfo> {
        self.purge();
        self.all().iter().map(|t| t.info()).collect()
    }

    /// One task.
    pub fn info(&self, id: &str) -> HubResult<TaskInfo> {
        self.purge();
        Ok(self.task(id)?.info())
    }

    /// Waits up to `timeout` for a task to finish; returns it and whether it has finished.
    pub async fn wait(&self, id: &str, timeout: Duration) -> HubResult<(TaskInfo, bool)> {
        let task = self.task(id)?;
        task.wait_done(timeout).await;
        let info = task.info();
        let finished = info.state != TaskState::Running;
        Ok((info, finished))
    }

    /// Cancels a running task: kills every process of it and waits until it is recorded as
    /// cancelled. A finished task is returned unchanged.
    pub async fn cancel(&self, id: &str) -> HubResult<TaskInfo> {
        let task = self.task(id)?;
        if task.info().state == TaskState::Running {
            task.request_stop(StopReason::Cancel);
            task.wait_done(CANCEL_WAIT).await;
        }
        Ok(task.info())
    }

    /// Kills every running task (part of the hub's shutdown) and waits until they are
    /// recorded.
    pub async fn shutdown(&self) {
        let running: Vec<Arc<Task>> = self
            .all()
            .into_iter()
            .filter(|t| t.info().state == TaskState::Running)
            .collect();
        for task in &running {
            task.request_stop(StopReason::Shutdown);
        }
        for task in running {
            task.wait_done(CANCEL_WAIT).await;
        }
    }

    /// Records a new running task and publishes `task_started`.
    fn started(&self, task: Arc<Task>) {
        let info = task.info();
        self.insert(task);
        self.handles.events.emit(EventKind::TaskStarted {
            task_id: info.id.clone(),
            name: info.name.clone(),
            started_at: info.started_at,
            session_id: info.session_id.clone(),
        });
    }
}

/// What a validated request runs.
struct Plan {
    timeout: Duration,
    name: String,
}

fn plan(req: &CreateTask) -> HubResult<Plan> {
    if req.cmd.trim().is_empty() {
        return Err(HubError::bad_request("cmd must not be empty"));
    }
    if req.cmd.contains('\0') {
        return Err(HubError::bad_request("cmd must not contain NUL bytes"));
    }
    if req.cwd.as_ref().is_some_and(|c| c.contains('\0')) {
        return Err(HubError::bad_request("cwd must not contain NUL bytes"));
    }
    let timeout_s = req.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    if !(timeout_s > 0.0 && timeout_s <= MAX_TIMEOUT_S) {
        return Err(HubError::bad_request(format!(
            "timeout_s must be more than 0 and at most {MAX_TIMEOUT_S}"
        )));
    }
    if let Some(bad) = req
        .env
        .iter()
        .find(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0'))
    {
        return Err(HubError::bad_request(format!(
            "invalid environment variable '{}'",
            bad.0
        )));
    }
    let name = match &req.name {
        Some(n) if !n.trim().is_empty() => n.clone(),
        Some(_) => return Err(HubError::bad_request("name must not be empty")),
        None if req.cmd.chars().count() > MAX_DEFAULT_NAME_CHARS => {
            let short: String = req.cmd.chars().take(MAX_DEFAULT_NAME_CHARS - 3).collect();
            format!("{short}...")
        }
        None => req.cmd.clone(),
    };
    Ok(Plan {
        timeout: Duration::from_secs_f64(timeout_s),
        name,
    })
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Waits for a stop request (the current one counts).
async fn stop_requested(stop: &mut watch::Receiver<Option<StopReason>>) -> StopReason {
    let reason = stop.wait_for(Option::is_some).await.ok().and_then(|r| *r);
    match reason {
        Some(reason) => reason,
        // The sender lives in the task, which the caller holds: this cannot happen.
        None => std::future::pending().await,
    }
}

fn final_state(stopped: Option<StopReason>, exit_code: Option<i32>) -> TaskState {
    match stopped {
        Some(StopReason::Timeout) => TaskState::Timeout,
        Some(StopReason::Cancel | StopReason::Shutdown) => TaskState::Cancelled,
        None if exit_code == Some(0) => TaskState::Success,
        None => TaskState::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_validated() {
        let req = |cmd: &str, timeout_s: Option<f64>| CreateTask {
            cmd: cmd.into(),
            pty: true,
            timeout_s,
            name: None,
            cwd: None,
            env: BTreeMap::new(),
        };
        assert!(plan(&req("  ", None)).is_err());
        assert!(plan(&req("true", Some(0.0))).is_err());
        assert!(plan(&req("true", Some(f64::NAN))).is_err());
        assert!(plan(&req("true", Some(MAX_TIMEOUT_S + 1.0))).is_err());
        let p = plan(&req("true", None)).unwrap();
        assert_eq!(
            (p.timeout, p.name.as_str()),
            (Duration::from_secs(300), "true")
        );
        let long = "x".repeat(200);
        assert_eq!(
            plan(&req(&long, Some(0.5))).unwrap().name.chars().count(),
            80
        );
        let mut bad_env = req("true", None);
        bad_env.env.insert("A=B".into(), "x".into());
        assert!(plan(&bad_env).is_err());
    }

    #[test]
    fn the_end_state_follows_the_stop_reason_then_the_exit_code() {
        assert_eq!(final_state(None, Some(0)), TaskState::Success);
        assert_eq!(final_state(None, Some(3)), TaskState::Error);
        assert_eq!(final_state(None, None), TaskState::Error);
        assert_eq!(
            final_state(Some(StopReason::Timeout), Some(0)),
            TaskState::Timeout
        );
        assert_eq!(
            final_state(Some(StopReason::Shutdown), None),
            TaskState::Cancelled
        );
    }
}
