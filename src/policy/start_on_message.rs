//! Sending a prompt to an agent by its routing keys, with start-on-message: when no live
//! session matches and `agent_id` names a stopped container agent whose policy has
//! `start_on_message`, the agent is started (and waited for until idle) first. Called by the
//! API's `send_line_to_agent` (and any other client of the hub, such as an MCP server).

use std::sync::Arc;

use super::runner::PolicyRunner;
use crate::actor::Actor;
use crate::delivery::{By, DeliveryReport, Options};
use crate::error::{HubError, HubResult};
use crate::owner_routing::{resolve_session, RouteKeys};
use crate::protocol::EventKind;
use crate::scope::{AgentAccess, Verdict};
use crate::session::Session;

/// What a send to an agent did.
pub struct AgentDelivery {
    /// Whether the agent was started for this message.
    pub started: bool,
    /// The session the prompt went to.
    pub session: Arc<Session>,
    pub report: DeliveryReport,
}

/// Delivers `text` from `actor` to the one session `keys` name (see [`crate::delivery`]),
/// starting a stopped agent first when its policy says so. The line passes the command guard
/// before anything is started.
impl PolicyRunner {
    pub async fn send_to_agent(
        &self,
        actor: &Actor,
        keys: &RouteKeys,
        text: &str,
        opts: Options,
    ) -> HubResult<AgentDelivery> {
        crate::session::write::check_line(&self.guard, actor, text)?;
        let mut started = false;
        let session = match resolve_session(&self.candidates(actor), keys) {
            Err(HubError::RouteNotMatched { .. }) if self.starts_on_message(actor, keys) => {
                let id = keys.agent_id.clone().unwrap_or_default();
                // An agent whose budget is spent is not started for a message it may not have.
                self.budgets.check_delivery(&id, &self.team_of(&id))?;
                self.agents.start(&id, false).await?;
                // Reported once the start succeeded (a failed start has its own event).
                self.events.emit(EventKind::PolicyStarted {
                    agent_id: id.clone(),
                    policy: self.agents.def(&id).ok().and_then(|d| d.policy.clone()),
                    reason: "start_on_message: a line was sent to the stopped agent".into(),
                    dry_run: false,
                });
                started = true;
                let session = resolve_session(&self.candidates(actor), keys)?;
                let within = self.agents.def(&id).map(|d| d.ready_timeout())?;
                wait_until_idle(&session, within).await;
                session
            }
            other => other?,
        };
        if let Some(who) = &actor.agent {
            let verdict = self
                .agents
                .decide_session(who, AgentAccess::SendToAgent, &session);
            if verdict != Verdict::Allowed {
                return Err(HubError::Forbidden {
                    message: format!(
                        "agent '{}' may not send to session {}: a worker may only message its team's leader",
                        who.agent_id,
                        session.id()
                    ),
                });
            }
        }
        self.check_delivery_budget(&session)?;
        let queued = self.queue_if_limited(&session, actor, text, opts);
        if let Some(report) = queued.or_else(|| self.queue_if_working(&session, actor, text, opts))
        {
            return Ok(AgentDelivery {
                started,
                session,
                report,
            });
        }
        let report = crate::delivery::submit(&session, By::Caller(actor), text, opts).await?;
        Ok(AgentDelivery {
            started,
            session,
            report,
        })
    }

    /// The sessions `actor` may aim at: all for people; for an agent credential, those it may
    /// see or send to (other teams' sessions are not candidates, so an ambiguity or a match
    /// says nothing about them).
    fn candidates(&self, actor: &Actor) -> Vec<Arc<Session>> {
        let mut all = self.sessions.list();
        if let Some(who) = &actor.agent {
            all.retain(|s| {
                self.agents.decide_session(who, AgentAccess::SendToAgent, s) != Verdict::Hidden
            });
        }
        all
    }

    /// Whether `keys` name (by agent id) a container agent whose policy starts it on a message
    /// (and, for an agent credential, one it may send to).
    fn starts_on_message(&self, actor: &Actor, keys: &RouteKeys) -> bool {
        let Some(def) = keys
            .agent_id
            .as_deref()
            .and_then(|a| self.agents.def(a).ok())
        else {
            return false;
        };
        if let Some(who) = &actor.agent {
            let target = self.agents.team_target(Some(&def.id));
            if crate::scope::decide(who, AgentAccess::SendToAgent, &target.target())
                != Verdict::Allowed
            {
                return false;
            }
        }
        def.policy
            .as_deref()
            .and_then(|p| self.engine.policy(p))
            .is_some_and(|p| p.start_on_message && !p.dry_run)
    }
}

/// Waits (at most `within`) until the agent's profile reads it as idle at its prompt, so a
/// freshly started agent is not sent a prompt while it is still starting up.
async fn wait_until_idle(session: &Session, within: std::time::Duration) {
    let deadline = tokio::time::Instant::now() + within;
    let mut progress = session.output().watch_progress();
    while session.state_report().state != crate::agent_state::State::Idle
        && session.output().exit().is_none()
    {
        let step = tokio::time::Instant::now() + std::time::Duration::from_millis(100);
        if tokio::time::Instant::now() >= deadline {
            return;
        }
        let _ = tokio::time::timeout_at(deadline.min(step), progress.changed()).await;
    }
}
