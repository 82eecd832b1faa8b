//! The agents as the team rules ([`crate::scope`]) see them: which agent a session or an agent
//! id belongs to, its team, and whether it leads it.

use super::Agents;
use crate::actor::AgentIdentity;
use crate::scope::{self, AgentAccess, Target, Verdict};
use crate::session::Session;

/// An owned [`Target`].
#[derive(Debug, Clone, Default)]
pub struct TeamTarget {
    pub agent_id: Option<String>,
    pub team: Option<String>,
    pub leader: bool,
}

impl TeamTarget {
    pub fn target(&self) -> Target<'_> {
        Target {
            agent_id: self.agent_id.as_deref(),
            team: self.team.as_deref(),
            leader: self.leader,
        }
    }
}

impl Agents {
    /// The credential identity of a defined agent (its team and role from its definition).
    pub fn identity(&self, agent_id: &str) -> Option<AgentIdentity> {
        let def = self.def(agent_id).ok()?;
        Some(AgentIdentity {
            agent_id: def.id.clone(),
            team: def.team().to_string(),
            leader: def.is_leader(),
            may_merge: def.is_leader() && def.may_merge,
        })
    }

    /// An agent id as a target: a defined agent has a team; anything else has none.
    pub fn team_target(&self, agent_id: Option<&str>) -> TeamTarget {
        match agent_id.and_then(|a| self.identity(a)) {
            Some(who) => TeamTarget {
                agent_id: Some(who.agent_id),
                team: Some(who.team),
                leader: who.leader,
            },
            None => TeamTarget {
                agent_id: agent_id.map(String::from),
                ..TeamTarget::default()
            },
        }
    }

    /// A session as a target: the container agent it runs, else the agent that owns it.
    pub fn session_target(&self, session: &Session) -> TeamTarget {
        let agent = session
            .spec()
            .agent_id
            .clone()
            .or(session.owner().owner_agent_id);
        self.team_target(agent.as_deref())
    }

    /// What `who` may do to `session` through a route of kind `access`.
    pub fn decide_session(
        &self,
        who: &AgentIdentity,
        access: AgentAccess,
        session: &Session,
    ) -> Verdict {
        scope::decide(who, access, &self.session_target(session).target())
    }
}
