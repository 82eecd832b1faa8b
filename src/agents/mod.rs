//! Container agents: the definitions from `hub.toml`, each agent's status, and the operations
//! that start, stop and restart them. A running agent's terminal is an ordinary hub session
//! (`source: "docker"`): a tmux control client inside the container, through a persistent
//! `docker exec`, so every session operation works on it unchanged.
//!
//! Status moves `stopped -> starting -> running -> stopping -> stopped`, or to `exited` (the
//! container ended on its own, with its exit code) or `failed` (with the reason). Operations
//! on one agent are serialised by a per-agent lock; [`sync`] keeps the status true to what
//! happens to the containers behind the hub's back.

pub mod sync;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use chrono::{DateTime, Utc};

use crate::backend::tmux::{TmuxBackend, TmuxPlace};
use crate::backend::{SpawnSpec, TermSize};
use crate::config::HubConfig;
use crate::config::{AgentDef, StartTmux};
use crate::docker::{self, docker_error, Endpoints};
use crate::error::{HubError, HubResult};
use crate::hub::Hub;
use crate::output::Output;
use crate::protocol::{AgentEvent, EventKind};
pub use crate::protocol::{AgentInfo, AgentStatus};
use crate::session::{Owner, SessionSpec};

/// The tmux session every agent container runs.
pub const AGENT_TMUX_SESSION: &str = "agent";
/// In `start_tmux = "auto"`, how long to wait for the image to start tmux before the hub does.
const IMAGE_TMUX_GRACE: Duration = Duration::from_secs(3);
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// After an attach step fails, how long to wait for the container to finish exiting.
const EXIT_SETTLE: Duration = Duration::from_secs(1);

impl std::fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = serde_json::to_value(self).ok();
        write!(
            f,
            "{}",
            s.as_ref().and_then(|v| v.as_str()).unwrap_or("unknown")
        )
    }
}

#[derive(Debug, Clone, Default)]
struct Runtime {
    status: AgentStatus,
    container_id: Option<String>,
    session_id: Option<String>,
    started_at: Option<DateTime<Utc>>,
    exit_code: Option<i64>,
    error: Option<String>,
}

/// The agents of a hub.
pub struct Agents {
    hub_id: String,
    scrollback_bytes: usize,
    defs: BTreeMap<String, AgentDef>,
    runtime: Mutex<BTreeMap<String, Runtime>>,
    op_locks: BTreeMap<String, Arc<tokio::sync::Mutex<()>>>,
    endpoints: Endpoints,
}

impl Agents {
    /// The agents defined in `config`, all stopped.
    pub fn new(config: &HubConfig) -> Self {
        let defs: BTreeMap<String, AgentDef> = config
            .agent_defs()
            .map(|d| (d.id.clone(), d.clone()))
            .collect();
        Agents {
            hub_id: config.hub_id.clone().unwrap_or_else(|| "default".into()),
            scrollback_bytes: config.scrollback_bytes,
            runtime: Mutex::new(
                defs.keys()
                    .map(|k| (k.clone(), Runtime::default()))
                    .collect(),
            ),
            op_locks: defs.keys().map(|k| (k.clone(), Arc::default())).collect(),
            defs,
            endpoints: Endpoints::default(),
        }
    }

    /// The id this hub puts on its containers.
    pub fn hub_id(&self) -> &str {
        &self.hub_id
    }

    /// The Docker clients.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// An agent's definition.
    pub fn def(&self, id: &str) -> HubResult<&AgentDef> {
        self.defs
            .get(id)
            .ok_or_else(|| HubError::AgentNotFound { id: id.into() })
    }

    /// All definitions.
    pub fn defs(&self) -> impl Iterator<Item = &AgentDef> {
        self.defs.values()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Runtime>> {
        self.runtime.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut Runtime)) {
        if let Some(rt) = self.lock().get_mut(id) {
            f(rt);
        }
    }

    fn op_lock(&self, id: &str) -> HubResult<Arc<tokio::sync::Mutex<()>>> {
        self.op_locks
            .get(id)
            .cloned()
            .ok_or_else(|| HubError::AgentNotFound { id: id.into() })
    }

    fn status(&self, id: &str) -> AgentStatus {
        self.lock().get(id).map(|r| r.status).unwrap_or_default()
    }
}

/// Logs an agent lifecycle event and publishes it on the hub's event bus: a start, a stop or a
/// failure is never silent.
fn emit(hub: &Hub, agent: &str, event: fn(AgentEvent) -> EventKind, detail: &str) {
    let kind = event(AgentEvent {
        agent_id: agent.to_string(),
        detail: detail.to_string(),
    });
    tracing::info!(agent, event = kind.type_name(), "{detail}");
    hub.emit(kind);
}

/// An agent as clients see it.
pub fn info(hub: &Hub, id: &str) -> HubResult<AgentInfo> {
    let agents = hub.agents();
    let def = agents.def(id)?;
    let rt = agents.lock().get(id).cloned().unwrap_or_default();
    let session = rt.session_id.as_deref().and_then(|s| hub.get(s).ok());
    let session_info = session.as_ref().map(|s| s.info());
    Ok(AgentInfo {
        id: def.id.clone(),
        status: rt.status,
        image: def.image.get_ref().clone(),
        docker_host: docker::endpoint_name(def.endpoint()),
        container_id: rt.container_id,
        session_id: rt.session_id,
        pty_attached: session_info.as_ref().is_some_and(|s| s.alive),
        started_at: rt.started_at,
        last_activity_at: session_info.map(|s| s.last_activity_at),
        owner_agent_id: def.owner_agent_id.clone(),
        owner_role: def.owner_role.clone(),
        label: def.label.clone(),
        cli_type: def.cli_type.clone(),
        policy: def.policy.clone(),
        exit_code: rt.exit_code,
        error: rt.error,
    })
}

/// All agents.
pub fn list(hub: &Hub) -> Vec<AgentInfo> {
    hub.agents()
        .defs()
        .filter_map(|d| info(hub, &d.id).ok())
        .collect()
}

fn attached(hub: &Hub, id: &str) -> bool {
    let sid = hub
        .agents()
        .lock()
        .get(id)
        .and_then(|r| r.session_id.clone());
    sid.and_then(|s| hub.get(&s).ok())
        .is_some_and(|s| s.output().exit().is_none())
}

/// Starts an agent and waits until it is ready. Starting a running agent does nothing and
/// says so (`true` in the result).
pub async fn start(hub: &Hub, id: &str) -> HubResult<(AgentInfo, bool)> {
    let lock = hub.agents().op_lock(id)?;
    let _op = lock.lock().await;
    if hub.agents().status(id) == AgentStatus::Running && attached(hub, id) {
        return Ok((info(hub, id)?, true));
    }
    hub.agents().update(id, |rt| {
        rt.status = AgentStatus::Starting;
        rt.error = None;
        rt.exit_code = None;
    });
    emit(hub, id, EventKind::AgentStarting, "starting");
    let started = std::time::Instant::now();
    let result = start_locked(hub, id).await;
    hub.metrics().agent_op("start", result.is_ok(), started);
    match result {
        Ok(()) => {
            emit(hub, id, EventKind::AgentStarted, "running");
            Ok((info(hub, id)?, false))
        }
        Err(e) => {
            hub.agents().update(id, |rt| {
                rt.status = AgentStatus::Failed;
                rt.error = Some(e.to_string());
            });
            emit(hub, id, EventKind::AgentStartFailed, &e.to_string());
            Err(e)
        }
    }
}

async fn start_locked(hub: &Hub, id: &str) -> HubResult<()> {
    let agents = hub.agents();
    let mut def = agents.def(id)?.clone();
    let endpoint = def.endpoint().to_string();
    let docker = agents.endpoints.client(&endpoint).await?;
    let failed = |reason: String, screen: Option<String>| HubError::AgentStartFailed {
        id: id.into(),
        reason,
        screen,
    };
    match docker.inspect_image(def.image.get_ref()).await {
        Ok(image) => {
            let labels = image.config.and_then(|c| c.labels);
            def.start_tmux = docker::resolve_start_tmux(def.start_tmux, labels.as_ref());
        }
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {
            return Err(failed(
                format!(
                    "image '{}' not found on {}",
                    def.image.get_ref(),
                    docker::endpoint_name(&endpoint)
                ),
                None,
            ))
        }
        Err(e) => return Err(docker_error(&endpoint, e)),
    }
    let name = docker::container_name(agents.hub_id(), id);
    let existing = docker.inspect_container(&name, None).await.ok();
    let running = existing
        .as_ref()
        .and_then(|c| c.state.as_ref()?.running)
        .unwrap_or(false);
    let container_id = match existing.and_then(|c| c.id) {
        Some(cid) => cid,
        None => docker::create_container(&docker, &endpoint, &def, agents.hub_id()).await?,
    };
    agents.update(id, |rt| rt.container_id = Some(container_id.clone()));
    if !running {
        docker
            .start_container(&container_id, None)
            .await
            .map_err(|e| match docker_error(&endpoint, e) {
                HubError::Docker { message } => {
                    failed(format!("docker start failed: {message}"), None)
                }
                other => other,
            })?;
    }
    agents.update(id, |rt| rt.started_at = Some(Utc::now()));
    let session_id = attach(hub, &def, &docker, &container_id, true).await?;
    if let Some(pattern) = def.ready_regex() {
        let session = hub.get(&session_id)?;
        let deadline = tokio::time::Instant::now() + def.ready_timeout();
        let mut progress = session.output().watch_progress();
        loop {
            let screen = session.with_screen(|s| s.text());
            if pattern.is_match(&screen) {
                break;
            }
            if session.output().exit().is_some() || tokio::time::Instant::now() >= deadline {
                let reason = if session.output().exit().is_some() {
                    "the agent's program exited before it was ready".to_string()
                } else {
                    format!(
                        "ready_pattern '{}' not seen within {} s",
                        pattern.as_str(),
                        def.ready_timeout
                    )
                };
                stop_container_quietly(hub, &def, &docker, &container_id).await;
                return Err(failed(reason, Some(screen)));
            }
            let _ = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + POLL_INTERVAL),
                progress.changed(),
            )
            .await;
        }
    }
    agents.update(id, |rt| rt.status = AgentStatus::Running);
    Ok(())
}

async fn stop_container_quietly(hub: &Hub, def: &AgentDef, docker: &Docker, container_id: &str) {
    detach_session(hub, &def.id).await;
    let _ = docker::stop_container(docker, def.endpoint(), container_id, def.stop_grace).await;
}

/// Waits for the container's tmux session (starting it when the image does not) and attaches
/// the agent's terminal as a hub session. Returns the session id.
pub(crate) async fn attach(
    hub: &Hub,
    def: &AgentDef,
    docker: &Docker,
    container_id: &str,
    may_create: bool,
) -> HubResult<String> {
    let id = def.id.as_str();
    let endpoint = def.endpoint();
    let failed = |reason: String| HubError::AgentStartFailed {
        id: id.into(),
        reason,
        screen: None,
    };
    let place = TmuxPlace::Container {
        docker: docker.clone(),
        container_id: container_id.to_string(),
    };
    let started = tokio::time::Instant::now();
    let deadline = started + def.ready_timeout();
    loop {
        if place.has_session(AGENT_TMUX_SESSION).await {
            break;
        }
        let running = docker
            .inspect_container(container_id, None)
            .await
            .map_err(|e| docker_error(endpoint, e))?
            .state
            .and_then(|s| s.running)
            .unwrap_or(false);
        let exited = if running {
            None
        } else {
            exited_reason(docker, container_id).await
        };
        if let Some(reason) = exited {
            let hint = if def.start_tmux == StartTmux::Auto {
                "; if its image does not start tmux itself, set start_tmux = \"hub\""
            } else {
                ""
            };
            return Err(failed(format!("{reason}{hint}")));
        }
        let hub_starts = match def.start_tmux {
            StartTmux::Hub => true,
            StartTmux::Auto => started.elapsed() >= IMAGE_TMUX_GRACE,
            StartTmux::Image => false,
        };
        if hub_starts && may_create {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(failed(format!(
                "the tmux session '{AGENT_TMUX_SESSION}' did not appear within {} s",
                def.ready_timeout
            )));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    let size = TermSize {
        cols: def.cols.unwrap_or(120),
        rows: def.rows.unwrap_or(30),
    };
    let mut command = def.command.clone();
    if command.is_empty() {
        command.push("bash".into());
    }
    let spec = SpawnSpec {
        program: command.remove(0),
        args: command,
        cwd: def.workdir.clone().unwrap_or_else(|| "/".into()).into(),
        env: def.env.clone(),
        size,
    };
    let output = Arc::new(Output::new(hub.agents().scrollback_bytes));
    let started = TmuxBackend::start(place, AGENT_TMUX_SESSION, &spec, output.clone()).await;
    let (backend, _adopted) = match started {
        Ok(b) => b,
        // The container may have died under the attach: say that, not the exec error.
        Err(reason) => {
            return Err(failed(
                exited_reason(docker, container_id).await.unwrap_or(reason),
            ))
        }
    };
    // After a restart, the session keeps its id and owner (see `persist`).
    let restored = hub.take_container_session(container_id);
    let session_id = match &restored {
        Some((id, _)) => id.clone(),
        None => hub.new_id("docker"),
    };
    let spec = SessionSpec {
        id: session_id.clone(),
        backend: crate::protocol::SessionBackend::Docker,
        source: "docker".into(),
        shell: spec.program,
        args: spec.args,
        cwd: spec.cwd.display().to_string(),
        tmux_session: Some(AGENT_TMUX_SESSION.into()),
        agent_id: Some(id.into()),
        policy: def.policy.clone(),
        container_id: Some(container_id.into()),
        created_at: Utc::now(),
    };
    let session = match restored {
        Some((_, owner)) => hub.insert_restored(spec, size, owner, output, Box::new(backend)),
        None => {
            let owner = Owner {
                owner_agent_id: def.owner_agent_id.clone().or_else(|| Some(id.into())),
                owner_session_id: None,
                owner_role: def.owner_role.clone(),
                label: def.label.clone(),
                cli_type: def.cli_type.clone(),
                conversation_id: None,
            };
            hub.insert_session(spec, size, owner, output, Box::new(backend))
        }
    };
    // Replace the previous (ended) session of this agent.
    let previous = hub
        .agents()
        .lock()
        .get_mut(id)
        .and_then(|rt| rt.session_id.replace(session_id.clone()));
    if let Some(prev) = previous.filter(|p| *p != session_id) {
        hub.remove_session(&prev);
    }
    if let Err(e) = session.resize(size).await {
        let reason = exited_reason(docker, container_id).await;
        return Err(failed(reason.unwrap_or_else(|| e.to_string())));
    }
    Ok(session_id)
}

/// "the container exited at once (exit code N)" when the container is not running, or stops
/// within [`EXIT_SETTLE`] (a failure under the attach is usually a container on its way out).
async fn exited_reason(docker: &Docker, container_id: &str) -> Option<String> {
    let deadline = tokio::time::Instant::now() + EXIT_SETTLE;
    loop {
        let state = docker
            .inspect_container(container_id, None)
            .await
            .ok()?
            .state?;
        if state.running != Some(true) {
            return Some(format!(
                "the container exited at once (exit code {})",
                state.exit_code.unwrap_or(-1)
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

async fn detach_session(hub: &Hub, id: &str) {
    let sid = hub
        .agents()
        .lock()
        .get(id)
        .and_then(|r| r.session_id.clone());
    if let Some(session) = sid.and_then(|s| hub.get(&s).ok()) {
        session.detach().await;
    }
}

/// Stops an agent: detaches its terminal cleanly, stops the container (SIGTERM, SIGKILL after
/// `stop_grace`), and removes it when configured.
pub async fn stop(hub: &Hub, id: &str) -> HubResult<AgentInfo> {
    let lock = hub.agents().op_lock(id)?;
    let _op = lock.lock().await;
    let started = std::time::Instant::now();
    let result = stop_locked(hub, id).await;
    hub.metrics().agent_op("stop", result.is_ok(), started);
    result?;
    info(hub, id)
}

async fn stop_locked(hub: &Hub, id: &str) -> HubResult<()> {
    let agents = hub.agents();
    let def = agents.def(id)?.clone();
    let endpoint = def.endpoint().to_string();
    let docker = agents.endpoints.client(&endpoint).await?;
    let name = docker::container_name(agents.hub_id(), id);
    agents.update(id, |rt| rt.status = AgentStatus::Stopping);
    emit(hub, id, EventKind::AgentStopping, "stopping");
    detach_session(hub, id).await;
    let result = async {
        docker::stop_container(&docker, &endpoint, &name, def.stop_grace).await?;
        let exit_code = docker
            .inspect_container(&name, None)
            .await
            .ok()
            .and_then(|c| c.state?.exit_code);
        if def.remove_on_stop {
            docker::remove_container(&docker, &endpoint, &name).await?;
        }
        Ok::<_, HubError>(exit_code)
    }
    .await;
    match result {
        Ok(exit_code) => {
            agents.update(id, |rt| {
                rt.status = AgentStatus::Stopped;
                rt.exit_code = exit_code;
                if def.remove_on_stop {
                    rt.container_id = None;
                }
            });
            emit(hub, id, EventKind::AgentStopped, "stopped");
            Ok(())
        }
        Err(e) => {
            agents.update(id, |rt| {
                rt.status = AgentStatus::Failed;
                rt.error = Some(format!("stop failed: {e}"));
            });
            Err(e)
        }
    }
}

/// Stops, then starts an agent.
pub async fn restart(hub: &Hub, id: &str) -> HubResult<AgentInfo> {
    {
        let lock = hub.agents().op_lock(id)?;
        let _op = lock.lock().await;
        stop_locked(hub, id).await?;
    }
    start(hub, id).await.map(|(info, _)| info)
}
