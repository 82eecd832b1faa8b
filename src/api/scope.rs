//! The team rules ([`crate::scope`]) applied to requests made with an agent credential: the
//! route's declared [`AgentAccess`] and the session or agent its path names decide before the
//! handler runs; lists and resolves are filtered by [`visible`]. Outside the caller's sight is
//! answered like a missing id; in sight but not allowed is `FORBIDDEN`.

use crate::actor::{Actor, AgentIdentity};
use crate::error::HubError;
use crate::hub::Hub;
use crate::scope::{self, AgentAccess, Verdict};
use crate::session::Session;

/// Checks a request of an agent credential against what its route lets agents do (`None`:
/// no route matched), before the handler.
pub fn check_route(
    hub: &Hub,
    who: &AgentIdentity,
    access: Option<AgentAccess>,
    path: &str,
) -> Result<(), HubError> {
    let forbidden = || HubError::Forbidden {
        message: format!(
            "agent credentials (agent '{}') may not call {path}",
            who.agent_id
        ),
    };
    let Some(access) = access else {
        return Err(forbidden());
    };
    match access {
        AgentAccess::Never => return Err(forbidden()),
        AgentAccess::Filtered | AgentAccess::SendToAgent | AgentAccess::OwnInHandler => {
            return Ok(())
        }
        _ => {}
    }
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (verdict, hidden) = match segments.as_slice() {
        ["v1", "pty", "sessions", id, ..] => {
            let session = hub.get(id)?;
            let verdict = hub.agents().decide_session(who, access, &session);
            (verdict, HubError::SessionNotFound { id: id.to_string() })
        }
        ["v1", "agents", id, ..] => {
            let target = hub.agents().team_target(Some(id));
            let verdict = scope::decide(who, access, &target.target());
            (verdict, HubError::AgentNotFound { id: id.to_string() })
        }
        _ => return Err(forbidden()),
    };
    match verdict {
        Verdict::Allowed => Ok(()),
        Verdict::Hidden => Err(hidden),
        Verdict::Forbidden => Err(HubError::Forbidden {
            message: format!(
                "agent '{}' may not do this to {path}: {}",
                who.agent_id,
                if who.leader && access == AgentAccess::Merge {
                    "a leader lands its team's work only with may_merge = true in its definition"
                } else if who.leader {
                    "not allowed for agent credentials"
                } else {
                    "a worker may only look at its own session and message its leader"
                }
            ),
        }),
    }
}

/// Whether the actor may see the session: people always (within their role), agents within
/// their team.
pub fn visible(hub: &Hub, actor: &Actor, session: &Session) -> bool {
    match &actor.agent {
        None => true,
        Some(who) => scope::may_see(who, &hub.agents().session_target(session).target()),
    }
}

/// Whether the actor may see the agent.
pub fn agent_visible(hub: &Hub, actor: &Actor, agent_id: &str) -> bool {
    match &actor.agent {
        None => true,
        Some(who) => scope::may_see(who, &hub.agents().team_target(Some(agent_id)).target()),
    }
}
