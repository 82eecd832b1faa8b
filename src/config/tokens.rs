//! `[[tokens]]` in `hub.toml`: the API tokens and the role each grants.

use serde::Deserialize;

use crate::actor::Role;

/// An API token from the config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// Shown in logs and the audit trail (never the token itself).
    pub name: String,
    pub token: String,
    pub role: Role,
}
