//! The hub's [`Directory`]: what the live sessions and the agents' definitions tell of an
//! event's agent. Screen lines pass the hub's redactor before they go anywhere.

use std::sync::Arc;

use super::decide::Facts;
use super::message::AgentRef;
use super::{last_lines, Directory, LAST_LINES};
use crate::agent_state::question;
use crate::agent_state::State;
use crate::agents::Agents;
use crate::redact::Redactor;
use crate::registry::{Registry, SessionRegistry};

/// Looks agents up in the registry and the agents' definitions.
pub struct HubDirectory {
    pub sessions: Arc<Registry>,
    pub agents: Arc<Agents>,
    pub redactor: Arc<Redactor>,
}

impl Directory for HubDirectory {
    fn facts(&self, session_id: Option<&str>, agent_id: Option<&str>) -> Facts {
        let session = session_id.and_then(|id| self.sessions.session(id));
        let owner = session.as_ref().map(|s| s.owner()).unwrap_or_default();
        let agent = agent_id.map(String::from).or(owner.owner_agent_id.clone());
        let team = agent
            .as_deref()
            .and_then(|a| self.agents.identity(a))
            .map(|who| who.team);
        let mut facts = Facts {
            agent: AgentRef {
                label: owner.label.clone(),
                team,
                ..AgentRef::default()
            },
            ..Facts::default()
        };
        let Some(session) = session else {
            return facts;
        };
        facts.agent_session = session.spec().agent_id.is_some()
            || session.profile().name != crate::agent_state::profile::DEFAULT_PROFILE;
        let report = session.state_report();
        let text = self.redactor.redact_str(&session.with_screen(|s| s.text()));
        if report.state == State::Blocked {
            facts.question =
                question::asked_on(&text, &report.evidence, |l| self.redactor.redact_str(l));
        }
        facts.last_lines = last_lines(&text, LAST_LINES);
        facts.last_input_at = session.info().last_input_at;
        facts
    }
}
