//! Attaching an agent's terminal: wait for the container's tmux session (starting it when the
//! image does not), attach a tmux client to it and register it as a hub session.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use super::containers::Place;
use super::{Agents, AGENT_TMUX_SESSION, EXIT_SETTLE, IMAGE_TMUX_GRACE, POLL_INTERVAL};
use crate::backend::{SpawnSpec, TermSize};
use crate::config::{AgentDef, StartTmux};
use crate::error::{HubError, HubResult};
use crate::output::Output;
use crate::registry::{NewSession, Origin};
use crate::session::{Owner, SessionSpec, StatusFiles};

/// The longest one look for the container's tmux session waits (see [`look_for`]).
const LOOK_AT_MOST: Duration = Duration::from_secs(2);

impl Agents {
    /// Waits for the container's tmux session (starting it when the image does not and
    /// `may_create`) and attaches the agent's terminal as a hub session. Returns the session id.
    pub(super) async fn attach(
        &self,
        def: &AgentDef,
        container_id: &str,
        may_create: bool,
    ) -> HubResult<String> {
        let id = def.id.as_str();
        let endpoint = def.endpoint();
        let containers = &self.handles.containers;
        let failed = |reason: String| HubError::AgentStartFailed {
            id: id.into(),
            reason,
            screen: None,
        };
        let place = Place {
            endpoint,
            container: container_id,
        };
        let started = tokio::time::Instant::now();
        let deadline = started + def.ready_timeout();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let within = look_for(def.start_tmux, may_create, started.elapsed(), left);
            if containers.wait_tmux_session(place, within).await {
                break;
            }
            let running = containers
                .inspect(Place {
                    endpoint,
                    container: container_id,
                })
                .await?
                .is_some_and(|c| c.running);
            let exited = if running {
                None
            } else {
                self.exited_reason(endpoint, container_id).await
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
        let output = Arc::new(Output::new(self.scrollback_bytes));
        let attached = containers.attach_tmux(place, &spec, output.clone()).await;
        let backend = match attached {
            Ok(b) => b,
            // The container may have died under the attach: say that, not the exec error.
            Err(e) => {
                let exited = self.exited_reason(endpoint, container_id).await;
                return Err(failed(exited.unwrap_or_else(|| e.to_string())));
            }
        };
        let sessions = &self.handles.sessions;
        // After a restart, the session keeps its id and owner (see `persist`).
        let restored = sessions.take_container_session(container_id);
        let (session_id, owner, origin) = match restored {
            Some((id, owner)) => (id, owner, Origin::Restored),
            None => (
                sessions.new_id("docker"),
                default_owner(def),
                Origin::Created,
            ),
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
        let session = sessions.add(
            NewSession {
                spec,
                size,
                owner,
                output,
                backend,
            },
            origin,
        );
        // Replace the previous (ended) session of this agent.
        let previous = self
            .lock()
            .get_mut(id)
            .and_then(|rt| rt.session_id.replace(session_id.clone()));
        if let Some(prev) = previous.filter(|p| *p != session_id) {
            sessions.remove(&prev);
        }
        // And the one from before a restart, when the agent had not taken it back yet.
        if let Some(ended) = sessions.take_ended_agent_session(id) {
            sessions.remove(&ended);
        }
        let remote = super::engine_files::through_engine(def);
        if let Some(dir) = self.status_dir(def) {
            if remote {
                let every = super::engine_files::STATUS_EVERY;
                self.mirror(def, container_id, &dir, every, session.closed());
            }
            session.follow_status_file(StatusFiles::Container(dir));
        }
        if let Some(following) = self.usage_following(def) {
            let until = match remote {
                true => {
                    let every = super::engine_files::USAGE_EVERY;
                    self.mirror(def, container_id, &following.dir, every, session.closed())
                }
                false => session.closed(),
            };
            if let Err(why) = self.handles.ledger.follow(following, until) {
                tracing::warn!(agent = %id, "its usage is not read: {why}");
            }
        }
        // The pane already has the session's size (`attach_tmux` made it so).
        Ok(session_id)
    }

    /// "the container exited at once (exit code N)" when the container is not running, or stops
    /// within [`EXIT_SETTLE`] (a failure under the attach is usually a container on its way out).
    async fn exited_reason(&self, endpoint: &str, container_id: &str) -> Option<String> {
        let deadline = tokio::time::Instant::now() + EXIT_SETTLE;
        loop {
            let state = self
                .handles
                .containers
                .inspect(Place {
                    endpoint,
                    container: container_id,
                })
                .await
                .ok()??;
            if !state.running {
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
}

/// How long one look for the container's tmux session may wait for it (one exec in the
/// container, however long): until the hub would start it itself, or until the start's
/// deadline, but at most [`LOOK_AT_MOST`], so a container that hangs rather than exits is
/// still looked at. The hub starts it at once with `start_tmux = "hub"`, after
/// [`IMAGE_TMUX_GRACE`] with `"auto"`, never with `"image"` or when it may not create it.
fn look_for(
    start_tmux: StartTmux,
    may_create: bool,
    elapsed: Duration,
    left: Duration,
) -> Duration {
    let until_hub_starts = match (start_tmux, may_create) {
        (StartTmux::Hub, true) => Duration::ZERO,
        (StartTmux::Auto, true) => IMAGE_TMUX_GRACE.saturating_sub(elapsed),
        _ => left,
    };
    until_hub_starts.min(left).min(LOOK_AT_MOST)
}

/// The owner of a new agent session: the agent's own identity from its definition.
fn default_owner(def: &AgentDef) -> Owner {
    Owner {
        owner_agent_id: def.owner_agent_id.clone().or_else(|| Some(def.id.clone())),
        owner_session_id: None,
        owner_role: def.owner_role.clone(),
        label: def.label.clone(),
        cli_type: def.cli_type.clone(),
        conversation_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_waits_until_the_hub_would_start_tmux_or_the_deadline_but_not_long() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        assert_eq!(look_for(StartTmux::Hub, true, s(0), s(20)), s(0));
        assert_eq!(look_for(StartTmux::Auto, true, ms(2500), s(20)), ms(500));
        assert_eq!(look_for(StartTmux::Auto, true, s(4), s(20)), s(0));
        assert_eq!(look_for(StartTmux::Image, true, s(0), s(20)), LOOK_AT_MOST);
        assert_eq!(look_for(StartTmux::Hub, false, s(0), ms(300)), ms(300));
        assert_eq!(look_for(StartTmux::Image, true, s(30), s(0)), s(0));
    }
}
