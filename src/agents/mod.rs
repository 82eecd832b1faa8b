//! Container agents: the definitions from `hub.toml`, each agent's status, and the operations
//! that start, stop and restart them. A running agent's terminal is an ordinary hub session
//! (`source: "docker"`): a tmux control client inside the container, through a persistent
//! `docker exec`, so every session operation works on it unchanged.
//!
//! Status moves `stopped -> starting -> running -> stopping -> stopped`, or to `exited` (the
//! container ended on its own, with its exit code) or `failed` (with the reason). Operations
//! on one agent are serialised by a per-agent lock; [`reconcile`] and [`sync`] keep the status
//! true to what happens to the containers behind the hub's back.
//!
//! [`Agents`] is a component: it holds narrow handles ([`Handles`]: the session registry, the
//! event sink, the metrics and the container runtime), not the hub, so its logic is unit-tested
//! above fakes of both (`tests.rs`).

mod attach;
pub mod cloned_workspace;
pub mod config_dir;
pub mod containers;
mod engine_files;
mod engines;
pub mod home;
pub mod hooks;
pub mod hub_access;
pub mod land;
mod locks;
pub mod placement;
mod prepare;
pub mod reconcile;
pub mod recreate;
pub mod resume;
mod start_slots;
pub mod sync;
pub mod team;
#[cfg(test)]
mod tests;
pub mod work;
mod workspace;
pub mod workspace_push;
pub mod workspace_setup;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::AgentDef;
use crate::config::HubConfig;
use crate::docker;
use crate::error::{HubError, HubResult};
use crate::event_bus::EventSink;
use crate::protocol::{AgentEvent, EventKind};
pub use crate::protocol::{AgentInfo, AgentStatus};
use crate::registry::SessionRegistry;
use containers::{ContainerState, Containers, Place};

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

/// What the Docker part of a start leaves for the wait until the agent is ready.
struct BroughtUp {
    /// The definition as this start applied it (workspace, home, resume arguments, token).
    def: AgentDef,
    container_id: String,
    session_id: String,
    plan: resume::Plan,
    /// The container was started by this start (not found running).
    new_run: bool,
    /// This start made the container again, and why.
    recreated: Option<recreate::Change>,
}

/// What a start did.
#[derive(Debug, Clone)]
pub struct Started {
    pub info: AgentInfo,
    /// The agent was running: the start did nothing.
    pub already_running: bool,
    /// The start removed the agent's stopped container and made it again, and why (see
    /// [`recreate`]).
    pub recreated: Option<recreate::Change>,
}

#[derive(Debug, Clone, Default)]
struct Runtime {
    status: AgentStatus,
    container_id: Option<String>,
    session_id: Option<String>,
    started_at: Option<DateTime<Utc>>,
    exit_code: Option<i64>,
    error: Option<String>,
    /// Its home in its container, as its image says (learnt at a start or a re-attach).
    home: Option<String>,
    /// Its running container was made otherwise than a start would make it now, and how (found
    /// when the hub attached to it: a start or a re-attach); a restart applies the definition.
    outdated: Option<recreate::Change>,
    /// Its work against its base, as last computed ([`work`]).
    work: Option<crate::workspace::WorkSummary>,
}

/// What the agents work with.
#[derive(Clone)]
pub struct Handles {
    /// Where an agent's terminal is registered as a session.
    pub sessions: Arc<dyn SessionRegistry>,
    /// Where lifecycle events are published.
    pub events: EventSink,
    pub metrics: crate::metrics::Metrics,
    /// The container runtime.
    pub containers: Arc<dyn Containers>,
    /// The agents' credentials: minted at each start, revoked at each stop.
    pub credentials: Arc<crate::credentials::Credentials>,
    /// How a container reaches the hub.
    pub access: hub_access::HubAccess,
    /// The CLI profiles (how each CLI resumes its conversation).
    pub profiles: crate::registry::ProfileSource,
    /// Where what each agent's model calls used is counted.
    pub ledger: Arc<crate::ledger::Ledger>,
}

/// The agents of a hub.
pub struct Agents {
    hub_id: String,
    scrollback_bytes: usize,
    defs: BTreeMap<String, AgentDef>,
    runtime: Mutex<BTreeMap<String, Runtime>>,
    op_locks: locks::AgentLocks,
    /// One work summary at a time per agent ([`work`]), apart from its operations.
    work_locks: locks::AgentLocks,
    /// One push of a cloned workspace at a time per agent ([`Agents::push_workspace`]): the
    /// push before a stop waits for a turn's end's push still running, so the stop never ends
    /// the container under it.
    push_locks: locks::AgentLocks,
    /// How many starts of an engine do their Docker work at once.
    start_slots: start_slots::StartSlots,
    handles: Handles,
}

impl Agents {
    /// The agents defined in `config`, all stopped.
    pub fn new(config: &HubConfig, handles: Handles) -> Self {
        let defs: BTreeMap<String, AgentDef> = config
            .agent_defs()
            .map(|d| (d.id.clone(), d.clone()))
            .collect();
        let agents = Agents {
            hub_id: config.hub_id.clone().unwrap_or_else(|| "default".into()),
            scrollback_bytes: config.scrollback_bytes,
            runtime: Mutex::new(
                defs.keys()
                    .map(|k| (k.clone(), Runtime::default()))
                    .collect(),
            ),
            op_locks: locks::AgentLocks::new(defs.keys()),
            work_locks: locks::AgentLocks::new(defs.keys()),
            push_locks: locks::AgentLocks::new(defs.keys()),
            start_slots: start_slots::StartSlots::new(config.agent_start_concurrency),
            defs,
            handles,
        };
        agents.restore_placements();
        agents
    }

    /// The id this hub puts on its containers.
    pub fn hub_id(&self) -> &str {
        &self.hub_id
    }

    /// How containers reach the hub.
    pub fn hub_access(&self) -> &hub_access::HubAccess {
        &self.handles.access
    }

    /// Mints the agent's credential for this start and puts it where its container reads it;
    /// returns it (for the tmux session the hub starts).
    fn mint_credential(&self, def: &AgentDef) -> Option<String> {
        if !def.hub_access {
            return None;
        }
        let who = self.identity(&def.id)?;
        let token = self.handles.credentials.mint(&def.id, who);
        if def.docker_host.is_none() {
            if let Err(e) = self.handles.access.write_token(&def.id, &token) {
                tracing::error!(agent = %def.id, "cannot write the agent's credential: {e}");
            }
        }
        Some(token)
    }

    /// The agent stopped: its credential stops working.
    fn revoke_credential(&self, id: &str) {
        self.handles.credentials.revoke(id);
        self.handles.access.remove_token(id);
    }

    /// An agent's definition.
    pub fn def(&self, id: &str) -> HubResult<&AgentDef> {
        self.defs
            .get(id)
            .ok_or_else(|| HubError::AgentNotFound { id: id.into() })
    }

    /// Why the hub cannot read what `id`'s model calls used (`None`: it can).
    pub fn usage_unread(&self, id: &str) -> HubResult<Option<String>> {
        Ok(self.usage_records(self.def(id)?).err())
    }

    /// All definitions.
    pub fn defs(&self) -> impl Iterator<Item = &AgentDef> {
        self.defs.values()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Runtime>> {
        self.runtime.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut Runtime)) {
        self.update_and(id, f);
    }

    /// [`Agents::update`], with what `f` returns (`None`: no such agent).
    fn update_and<T>(&self, id: &str, f: impl FnOnce(&mut Runtime) -> T) -> Option<T> {
        self.lock().get_mut(id).map(f)
    }

    fn op_lock(&self, id: &str) -> HubResult<Arc<tokio::sync::Mutex<()>>> {
        self.op_locks.of(id)
    }

    fn status(&self, id: &str) -> AgentStatus {
        self.lock().get(id).map(|r| r.status).unwrap_or_default()
    }

    fn session_of(&self, id: &str) -> Option<Arc<crate::session::Session>> {
        let sid = self.lock().get(id).and_then(|r| r.session_id.clone())?;
        self.handles.sessions.session(&sid)
    }

    /// Logs a lifecycle event and publishes it: a start, a stop or a failure is never silent.
    fn emit(&self, agent: &str, event: fn(AgentEvent) -> EventKind, detail: &str) {
        let kind = event(AgentEvent {
            agent_id: agent.to_string(),
            detail: detail.to_string(),
        });
        tracing::info!(agent, event = kind.type_name(), "{detail}");
        self.handles.events.emit(kind);
    }

    /// An agent as clients see it.
    pub fn info(&self, id: &str) -> HubResult<AgentInfo> {
        let def = self.def(id)?;
        let rt = self.lock().get(id).cloned().unwrap_or_default();
        let session = rt
            .session_id
            .as_deref()
            .and_then(|s| self.handles.sessions.session(s));
        let session_info = session.as_ref().map(|s| s.info());
        let plan = self.resume_plan(def, false);
        let outdated = rt.outdated.filter(|_| rt.status == AgentStatus::Running);
        Ok(AgentInfo {
            id: def.id.clone(),
            status: rt.status,
            image: def.image.get_ref().clone(),
            docker_host: match def.placed() {
                true => docker::endpoint_name(def.endpoint()),
                false => String::new(),
            },
            docker_hosts: def.docker_hosts.clone(),
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
            resumes: plan.resumes,
            resume_reason: plan.reason,
            home: self.host_home(def).map(|h| h.display().to_string()),
            workspace: self.workspace_info(def),
            work: rt.work,
            outdated: outdated.is_some(),
            changed: outdated.map(|c| c.parts()).unwrap_or_default(),
        })
    }

    /// All agents.
    pub fn list(&self) -> Vec<AgentInfo> {
        self.defs().filter_map(|d| self.info(&d.id).ok()).collect()
    }

    fn attached(&self, id: &str) -> bool {
        self.session_of(id)
            .is_some_and(|s| s.output().exit().is_none())
    }

    /// An agent whose engine does not answer is neither started nor stopped (that would
    /// write it off): `DOCKER_UNAVAILABLE`, and it stays `unreachable` until the engine
    /// answers and it is re-attached.
    fn refuse_unreachable(&self, id: &str) -> HubResult<()> {
        if self.status(id) != AgentStatus::Unreachable {
            return Ok(());
        }
        let endpoint = self.def(id)?.endpoint().to_string();
        Err(HubError::DockerUnavailable {
            endpoint: docker::endpoint_name(&endpoint),
            reason: "the engine does not answer; the agent is re-attached when it does".into(),
        })
    }

    /// Starts an agent and waits until it is ready, resuming its conversation unless `fresh`.
    /// Starting a running agent does nothing and says so (`already_running`).
    pub async fn start(&self, id: &str, fresh: bool) -> HubResult<Started> {
        let lock = self.op_lock(id)?;
        let _op = lock.lock().await;
        self.refuse_unreachable(id)?;
        if self.status(id) == AgentStatus::Running && self.attached(id) {
            return Ok(Started {
                info: self.info(id)?,
                already_running: true,
                recreated: None,
            });
        }
        self.update(id, |rt| {
            rt.status = AgentStatus::Starting;
            rt.error = None;
            rt.exit_code = None;
        });
        self.emit(id, EventKind::AgentStarting, "starting");
        let started = std::time::Instant::now();
        let result = self.start_locked(id, fresh).await;
        self.handles
            .metrics
            .agent_op("start", result.is_ok(), started);
        match result {
            Ok((plan, recreated)) => {
                self.mark_started(id);
                self.emit(
                    id,
                    EventKind::AgentStarted,
                    &started_detail(&plan, recreated.as_ref()),
                );
                Ok(Started {
                    info: self.info(id)?,
                    already_running: false,
                    recreated,
                })
            }
            Err(e) => {
                self.revoke_credential(id);
                self.update(id, |rt| {
                    rt.status = AgentStatus::Failed;
                    rt.error = Some(e.to_string());
                });
                self.emit(id, EventKind::AgentStartFailed, &e.to_string());
                Err(e)
            }
        }
    }

    /// A start under the agent's lock: its Docker work in a start slot of its engine, then the
    /// wait for its program to be ready outside it (so the next start's Docker work overlaps it).
    async fn start_locked(
        &self,
        id: &str,
        fresh: bool,
    ) -> HubResult<(resume::Plan, Option<recreate::Change>)> {
        self.place(id).await?;
        let asked = std::time::Instant::now();
        let up = {
            let _slot = self.start_slots.take(self.def(id)?.endpoint()).await;
            let in_slot = std::time::Instant::now();
            let up = self.bring_up(id, fresh).await?;
            tracing::debug!(
                agent = id,
                slot_wait_ms = in_slot.duration_since(asked).as_millis() as u64,
                docker_ms = in_slot.elapsed().as_millis() as u64,
                "attached"
            );
            up
        };
        if up.new_run {
            self.expect_hub_mcp(&up.def, &up.session_id);
        }
        let attached = std::time::Instant::now();
        self.wait_ready(&up).await?;
        self.wait_for_hub_mcp(&up.def, &up.session_id).await;
        tracing::debug!(
            agent = id,
            ready_ms = attached.elapsed().as_millis() as u64,
            "ready"
        );
        self.update(id, |rt| rt.status = AgentStatus::Running);
        Ok((up.plan, up.recreated))
    }

    /// The Docker part of a start: the image, the container (made, or made again when its
    /// definition changed, and started unless it runs), and the agent's terminal attached.
    async fn bring_up(&self, id: &str, fresh: bool) -> HubResult<BroughtUp> {
        let containers = &self.handles.containers;
        let mut def = self.def(id)?.clone();
        let endpoint = def.endpoint().to_string();
        let failed = |reason: String| HubError::AgentStartFailed {
            id: id.into(),
            reason,
            screen: None,
        };
        let image = def.image.get_ref().clone();
        let image_info = match containers.image_info(&endpoint, &image).await? {
            Some(info) => {
                def.start_tmux = docker::resolve_start_tmux(def.start_tmux, Some(&info.labels));
                self.learn_home(&def, &info);
                info
            }
            None => {
                return Err(failed(format!(
                    "image '{image}' not found on {}",
                    docker::endpoint_name(&endpoint)
                )))
            }
        };
        self.add_workspace(&mut def, &image_info).await?;
        let token = self.mint_credential(&def);
        self.handles.access.add_to(&mut def);
        if let Err(e) = self.handles.access.add_pipe_dir(&mut def) {
            tracing::warn!(agent = %def.id, "no pipe directory (its output is relayed): {e}");
        }
        let name = docker::container_name(self.hub_id(), id);
        let existing = containers
            .inspect(Place {
                endpoint: &endpoint,
                container: &name,
            })
            .await
            .ok()
            .flatten();
        let running = existing.as_ref().is_some_and(|c| c.running);
        let keeps_home = self.add_home(&mut def, &image_info);
        let executable = self.add_hub_binary_volume(&mut def).await;
        let image_id = image_info.id.as_deref();
        let (container_id, recreated) = self
            .container_for(&def, image_id, existing, keeps_home)
            .await?;
        let via = match docker::image_starts_tmux(&def) {
            true => prepare::ArgsVia::File,
            false => prepare::ArgsVia::Command,
        };
        let plan = if running {
            resume::Plan::fresh("its container was still running")
        } else {
            if engine_files::through_engine(&def) {
                self.read_through_engine(&def, &container_id).await;
            }
            let plan = self.resume_plan(&def, fresh);
            self.apply_resume(&mut def, &plan, via)?;
            if !engine_files::through_engine(&def) {
                self.hold_for_setup(&def)?;
            }
            self.install_hooks(&def);
            self.clear_status_files(&def);
            plan
        };
        if engine_files::through_engine(&def) {
            let files = engine_files::StartFiles {
                token: token.as_deref(),
                args: (!running && via == prepare::ArgsVia::File).then_some(&plan),
                user: &image_info.user,
                executable: executable.as_deref(),
                setup_pending: !running && !def.workspace_setup().is_empty(),
            };
            self.put_start_files(&def, &container_id, files).await?;
        }
        self.update(id, |rt| rt.container_id = Some(container_id.clone()));
        if !running {
            containers
                .start(Place {
                    endpoint: &endpoint,
                    container: &container_id,
                })
                .await
                .map_err(|e| match e {
                    HubError::Docker { message } => {
                        failed(format!("docker start failed: {message}"))
                    }
                    other => other,
                })?;
        }
        self.update(id, |rt| rt.started_at = Some(Utc::now()));
        if def.clones_workspace() {
            if let Err(e) = self.clone_workspace(&def, &container_id).await {
                let at = Place {
                    endpoint: &endpoint,
                    container: &container_id,
                };
                let _ = containers.stop(at, def.stop_grace).await;
                return Err(e);
            }
        }
        self.run_setup(&def, &container_id).await?;
        // Only the tmux session the hub starts gets the credential itself (the container's
        // own environment names the file, which every start rewrites).
        if let Some(token) = token {
            def.env.insert("AGENT_HUB_TOKEN".into(), token);
        }
        let session_id = self.attach(&def, &container_id, true).await?;
        Ok(BroughtUp {
            def,
            container_id,
            session_id,
            plan,
            new_run: !running,
            recreated,
        })
    }

    /// The agent's container for this start: `existing` when it is what `def` makes from the
    /// image `image_id` (or it runs), else one made (again) as `def` says. Returns its id and,
    /// when it was made again in place of `existing`, why; a running one that is not what
    /// `def` makes is marked outdated.
    async fn container_for(
        &self,
        def: &AgentDef,
        image_id: Option<&str>,
        existing: Option<ContainerState>,
        keeps_home: bool,
    ) -> HubResult<(String, Option<recreate::Change>)> {
        self.mark_outdated(&def.id, None);
        let Some(container) = existing else {
            return Ok((self.create_container(def, keeps_home).await?, None));
        };
        let definition = docker::container_definition(def, self.hub_id());
        let wanted = recreate::Wanted {
            definition: &definition,
            image_id,
        };
        match recreate::decide(&container, wanted) {
            recreate::Decision::Keep => Ok((container.id, None)),
            recreate::Decision::KeepOutdated(change) => {
                self.mark_outdated(&def.id, Some(change));
                Ok((container.id, None))
            }
            recreate::Decision::Recreate(change) => {
                tracing::info!(
                    agent = %def.id,
                    "making its container again: {change}; its home and workspace are kept"
                );
                let at = Place {
                    endpoint: def.endpoint(),
                    container: &container.id,
                };
                self.handles.containers.remove(at).await?;
                Ok((self.create_container(def, keeps_home).await?, Some(change)))
            }
        }
    }

    /// Records whether the agent's running container, which the hub attaches to as it is, is
    /// outdated and how: its info says so while it runs, and the log when it is.
    fn mark_outdated(&self, id: &str, change: Option<recreate::Change>) {
        if let Some(change) = &change {
            tracing::warn!(
                agent = id,
                "its running container is kept, but {change}: restart the agent to apply its \
                 definition"
            );
        }
        self.update(id, |rt| rt.outdated = change);
    }

    /// Makes the agent's container as `def` says (its home volume first, when it keeps one).
    async fn create_container(&self, def: &AgentDef, keeps_home: bool) -> HubResult<String> {
        if keeps_home {
            self.make_home(def).await?;
        }
        self.handles.containers.create(def, self.hub_id()).await
    }

    /// Waits for the agent's `ready_pattern` on its screen; when it does not come (or the
    /// program exits first), detaches, stops the container and says why, with the screen.
    async fn wait_ready(&self, up: &BroughtUp) -> HubResult<()> {
        let def = &up.def;
        let Some(pattern) = def.ready_regex() else {
            return Ok(());
        };
        let id = def.id.as_str();
        let session = self
            .handles
            .sessions
            .session(&up.session_id)
            .ok_or_else(|| HubError::SessionNotFound {
                id: up.session_id.clone(),
            })?;
        let deadline = tokio::time::Instant::now() + def.ready_timeout();
        let mut progress = session.output().watch_progress();
        loop {
            let screen = session.with_screen(|s| s.text());
            if pattern.is_match(&screen) {
                return Ok(());
            }
            let exited = session.output().exit().is_some();
            if exited || tokio::time::Instant::now() >= deadline {
                let reason = if exited {
                    "the agent's program exited before it was ready".to_string()
                } else {
                    format!(
                        "ready_pattern '{}' not seen within {} s",
                        pattern.as_str(),
                        def.ready_timeout
                    )
                };
                self.detach_session(id).await;
                let at = Place {
                    endpoint: def.endpoint(),
                    container: &up.container_id,
                };
                let _ = self.handles.containers.stop(at, def.stop_grace).await;
                return Err(HubError::AgentStartFailed {
                    id: id.into(),
                    reason,
                    screen: Some(screen),
                });
            }
            let _ = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + POLL_INTERVAL),
                progress.changed(),
            )
            .await;
        }
    }

    async fn detach_session(&self, id: &str) {
        if let Some(session) = self.session_of(id) {
            session.detach().await;
        }
    }

    /// Stops an agent: detaches its terminal cleanly, stops the container (SIGTERM, SIGKILL
    /// after `stop_grace`), and removes it when configured.
    pub async fn stop(&self, id: &str) -> HubResult<AgentInfo> {
        let lock = self.op_lock(id)?;
        let _op = lock.lock().await;
        let started = std::time::Instant::now();
        let result = self.stop_locked(id).await;
        self.handles
            .metrics
            .agent_op("stop", result.is_ok(), started);
        result?;
        self.info(id)
    }

    async fn stop_locked(&self, id: &str) -> HubResult<()> {
        self.refuse_unreachable(id)?;
        // Its work leaves with its container only if it is pushed (a failure is logged).
        let _ = self.push_workspace(id, "before its stop").await;
        let containers = &self.handles.containers;
        let def = self.def(id)?.clone();
        let endpoint = def.endpoint().to_string();
        let name = docker::container_name(self.hub_id(), id);
        self.update(id, |rt| rt.status = AgentStatus::Stopping);
        self.emit(id, EventKind::AgentStopping, "stopping");
        self.revoke_credential(id);
        self.detach_session(id).await;
        let at = Place {
            endpoint: &endpoint,
            container: &name,
        };
        let result = async {
            containers.stop(at, def.stop_grace).await?;
            let exit_code = containers
                .inspect(at)
                .await
                .ok()
                .flatten()
                .and_then(|c| c.exit_code);
            if engine_files::through_engine(&def) {
                // What the next start would resume, while its container is there to look in.
                self.read_through_engine(&def, &name).await;
            }
            if def.remove_on_stop {
                containers.remove(at).await?;
            }
            Ok::<_, HubError>(exit_code)
        }
        .await;
        match result {
            Ok(exit_code) => {
                self.update(id, |rt| {
                    rt.status = AgentStatus::Stopped;
                    rt.exit_code = exit_code;
                    if def.remove_on_stop {
                        rt.container_id = None;
                    }
                });
                self.emit(id, EventKind::AgentStopped, "stopped");
                Ok(())
            }
            Err(e) => {
                self.update(id, |rt| {
                    rt.status = AgentStatus::Failed;
                    rt.error = Some(format!("stop failed: {e}"));
                });
                Err(e)
            }
        }
    }

    /// Stops, then starts an agent (resuming its conversation unless `fresh`); the start
    /// applies a changed definition (see [`recreate`]).
    pub async fn restart(&self, id: &str, fresh: bool) -> HubResult<Started> {
        {
            let lock = self.op_lock(id)?;
            let _op = lock.lock().await;
            self.stop_locked(id).await?;
        }
        self.start(id, fresh).await
    }
}

/// The `agent_started` event's detail: the conversation, and the container when it was made
/// again.
fn started_detail(plan: &resume::Plan, recreated: Option<&recreate::Change>) -> String {
    let conversation = match plan.resumes {
        true => format!("resumed: {}", plan.reason),
        false => plan.reason.clone(),
    };
    match recreated {
        None => format!("running ({conversation})"),
        Some(change) => format!("running ({conversation}); container made again: {change}"),
    }
}
