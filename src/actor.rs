//! Who acts on the hub: the roles a token grants. Core type: the guard, the hub and the API
//! all speak of roles, so it lives below them.

use serde::Deserialize;

/// What a token may do, in increasing power.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Observer,
    Operator,
    Admin,
}
