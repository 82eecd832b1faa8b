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

/// Who made a request.
#[derive(Debug, Clone, Default)]
pub struct Actor {
    /// The token's name (`anonymous` when the hub has no tokens).
    pub token_name: String,
    /// The caller's `X-Agent-Id` header, if any.
    pub agent_id: Option<String>,
    /// The token's role (`admin` when the hub has no tokens: an open hub allows everything).
    pub role: Option<Role>,
}

impl Actor {
    /// The role, `observer` if unknown.
    pub fn role(&self) -> Role {
        self.role.unwrap_or(Role::Observer)
    }
}
