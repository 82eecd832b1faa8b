//! `auth` and `[[tokens]]` in `hub.toml`: whether callers need a credential, and the API
//! tokens with the role each grants.

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

/// `auth` in `hub.toml`: whether a caller must present a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Every request names a token (the owner's, one of `[[tokens]]`, or an agent's).
    #[default]
    Token,
    /// Anonymous callers are admins (loopback listen addresses only). Any local process,
    /// agents included, can then control every agent.
    None,
}
