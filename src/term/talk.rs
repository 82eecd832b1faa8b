//! What a talk (one shell command run to its end on a terminal) returns.

use serde::{Deserialize, Serialize};

/// The result of a talk.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TalkResult {
    pub output: String,
    pub exit_code: Option<i32>,
    pub sentinel: String,
    pub raw_output: String,
    pub duration_ms: u64,
    pub truncated: bool,
}
