//! Bringing the agents' status in line with their containers: after a (re)connect to an engine
//! every agent of it is reconciled, and the Docker events (see [`super::sync`]) report deaths
//! and starts in between. A running container the hub is not attached to is re-attached.

use super::containers::{ContainerState, ImageInfo, Place};
use super::{recreate, AgentStatus, Agents};
use crate::config::AgentDef;
use crate::docker;
use crate::protocol::EventKind;

impl Agents {
    /// The ids of the agents that live on `endpoint`.
    pub fn on_endpoint(&self, endpoint: &str) -> Vec<String> {
        self.defs()
            .filter(|d| d.endpoint() == endpoint)
            .map(|d| d.id.clone())
            .collect()
    }

    /// A container of a running agent ended without the hub asking.
    pub fn container_died(&self, agent: &str, exit_code: Option<i64>) {
        let mut changed = false;
        self.update(agent, |rt| {
            if rt.status == AgentStatus::Running {
                rt.status = AgentStatus::Exited;
                rt.exit_code = exit_code;
                changed = true;
            }
        });
        if changed {
            self.revoke_credential(agent);
            self.emit(
                agent,
                EventKind::AgentExited,
                &format!(
                    "container exited ({})",
                    crate::error::exit_code_text(exit_code)
                ),
            );
        }
    }

    /// A container of an agent was removed: when it is the agent's container (not an old one a
    /// start made again, whose removal may be reported after that start), it has none.
    pub fn container_removed(&self, agent: &str, container_id: &str) {
        self.update(agent, |rt| {
            let its_own = rt.container_id.as_deref().is_none_or(|c| c == container_id);
            if rt.status != AgentStatus::Starting && its_own {
                rt.container_id = None;
            }
        });
    }

    /// A stopped agent takes back the ended session it had before the hub restarted (its last
    /// screen: see `persist::restore`), unless it has a session of this run already (then that
    /// one is dropped).
    fn take_back_ended_session(&self, agent: &str) {
        let sessions = &self.handles.sessions;
        let Some(ended) = sessions.take_ended_agent_session(agent) else {
            return;
        };
        if sessions.session(&ended).is_none() {
            return; // deleted meanwhile
        }
        let mut taken = false;
        self.update(agent, |rt| {
            if rt.session_id.is_none() {
                rt.session_id = Some(ended.clone());
                taken = true;
            }
        });
        if !taken {
            sessions.remove(&ended);
        }
    }

    /// While an engine is unreachable its running agents cannot be seen: say so.
    pub fn mark_unreachable(&self, endpoint: &str) {
        for id in self.on_endpoint(endpoint) {
            let gone = self.update_and(&id, |rt| {
                let running = rt.status == AgentStatus::Running;
                if running {
                    rt.status = AgentStatus::Unreachable;
                    rt.error = Some(format!(
                        "Docker engine {} unreachable; re-attached when it answers again",
                        docker::endpoint_name(endpoint)
                    ));
                }
                running
            });
            if gone == Some(true) {
                if let Some(session) = self.session_of(&id) {
                    session.set_unreachable(Some(docker::endpoint_name(endpoint)));
                }
            }
        }
    }

    /// Brings every agent of this endpoint in line with its container.
    pub async fn reconcile(&self, endpoint: &str) {
        let with_containers = match self
            .handles
            .containers
            .agent_containers(endpoint, self.hub_id())
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("reconcile: {e}");
                return;
            }
        };
        self.adopt_placements(endpoint, &with_containers);
        for id in self.on_endpoint(endpoint) {
            self.update(&id, |rt| {
                if rt
                    .error
                    .as_deref()
                    .is_some_and(|e| e.contains("unreachable"))
                {
                    rt.error = None;
                }
            });
            if with_containers.contains(&id) {
                self.reconcile_agent(&id).await;
            } else {
                self.update(&id, |rt| {
                    if matches!(rt.status, AgentStatus::Running | AgentStatus::Unreachable) {
                        rt.status = AgentStatus::Stopped;
                    }
                    rt.container_id = None;
                });
                self.take_back_ended_session(&id);
            }
        }
    }

    /// Re-attaches a running agent container the hub is not attached to, or records that it
    /// is not running. Skipped while the hub itself is starting or stopping the agent.
    pub async fn reconcile_agent(&self, agent: &str) {
        let Ok(lock) = self.op_lock(agent) else {
            return;
        };
        let Ok(_op) = lock.try_lock() else { return };
        let Ok(def) = self.def(agent).cloned() else {
            return;
        };
        let name = docker::container_name(self.hub_id(), agent);
        let Ok(Some(state)) = self
            .handles
            .containers
            .inspect(Place {
                endpoint: def.endpoint(),
                container: &name,
            })
            .await
        else {
            return;
        };
        let container_id = state.id.clone();
        if !state.running {
            self.update(agent, |rt| {
                rt.container_id = Some(container_id.clone());
                if matches!(rt.status, AgentStatus::Running | AgentStatus::Unreachable) {
                    rt.status = AgentStatus::Exited;
                    rt.exit_code = state.exit_code;
                }
            });
            self.take_back_ended_session(agent);
            return;
        }
        if self.attached(agent) {
            let back = self.update_and(agent, |rt| {
                let back = rt.status == AgentStatus::Unreachable;
                if back {
                    rt.status = AgentStatus::Running;
                }
                back
            });
            if back == Some(true) {
                if let Some(session) = self.session_of(agent) {
                    session.set_unreachable(None);
                }
                self.emit(
                    agent,
                    EventKind::AgentAttached,
                    "its engine answers again; its terminal stayed attached",
                );
            }
            return;
        }
        self.update(agent, |rt| {
            rt.container_id = Some(container_id.clone());
            rt.status = AgentStatus::Starting;
        });
        let image = self
            .handles
            .containers
            .image_info(def.endpoint(), def.image.get_ref())
            .await
            .ok()
            .flatten();
        if let Some(image) = &image {
            self.learn_home(&def, image);
        }
        let outdated = self.outdated(&def, &state, image.as_ref()).await;
        self.mark_outdated(agent, outdated);
        match self.attach(&def, &container_id, false).await {
            Ok(_) => {
                self.update(agent, |rt| {
                    rt.status = AgentStatus::Running;
                    rt.error = None;
                    if rt.started_at.is_none() {
                        rt.started_at = state.started_at;
                    }
                });
                self.emit(
                    agent,
                    EventKind::AgentAttached,
                    "re-attached to a running container",
                );
            }
            Err(e) => {
                self.update(agent, |rt| {
                    rt.status = AgentStatus::Failed;
                    rt.error = Some(e.to_string());
                });
                self.emit(agent, EventKind::AgentAttachFailed, &e.to_string());
            }
        }
    }

    /// Whether the running `container` of `def` is outdated (see [`recreate`]), and how,
    /// `image` being its image's as the engine has it now; `None` when it is not, or when the
    /// hub cannot tell (said in the log): the image's name names no image now, or the
    /// repository of its workspace cannot be read.
    async fn outdated(
        &self,
        def: &AgentDef,
        container: &ContainerState,
        image: Option<&ImageInfo>,
    ) -> Option<recreate::Change> {
        let Some(image) = image else {
            tracing::info!(
                agent = %def.id,
                "whether its container is outdated is not known: its image '{}' is not on {}",
                def.image.get_ref(),
                docker::endpoint_name(def.endpoint())
            );
            return None;
        };
        let definition = self.definition_now(def, image).await?;
        let wanted = recreate::Wanted {
            definition: &definition,
            image_id: image.id.as_deref(),
        };
        recreate::change(container, wanted)
    }
}
