//! Who is acting: a caller's [`Role`] and the [`Actor`] (token name, agent id, role) that travels
//! with every request and every input written to a terminal. Core type: the guard checks input
//! against the actor's role, the audit trail names the actor, the API attaches it.

use serde::{Deserialize, Serialize};

/// What a caller may do, in increasing power.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Observer,
    Operator,
    Admin,
}

/// A container agent acting through its own credential: who it is, its team, whether it
/// leads the team. Its access is scoped (see [`crate::scope`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AgentIdentity {
    pub agent_id: String,
    pub team: String,
    /// `owner_role = "leader"` in its definition.
    pub leader: bool,
    /// A leader's `may_merge = true`: it may merge, update and push its team's branches.
    #[serde(default)]
    pub may_merge: bool,
}

/// Who made a request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The token's name (`owner` for the owner's token, a `[[tokens]]` name, `agent:<id>` for
    /// an agent credential, `anonymous` without a credential).
    pub token_name: String,
    /// The agent acting: its credential's agent, else the caller's `X-Agent-Id` header.
    pub agent_id: Option<String>,
    /// The token's role (`admin` for anonymous callers of a hub with `auth = "none"`).
    pub role: Option<Role>,
    /// Set when the caller presented an agent credential: its access is scoped to its team.
    pub agent: Option<AgentIdentity>,
}

impl Actor {
    /// The role, `observer` if unknown.
    pub fn role(&self) -> Role {
        self.role.unwrap_or(Role::Observer)
    }

    /// The actor of a request made with an agent credential: it acts as that agent (the
    /// `X-Agent-Id` header cannot change it), with an operator's role inside its scope.
    pub fn of_agent(identity: AgentIdentity) -> Self {
        Actor {
            token_name: format!("agent:{}", identity.agent_id),
            agent_id: Some(identity.agent_id.clone()),
            role: Some(Role::Operator),
            agent: Some(identity),
        }
    }
}
