//! The body of a failed request.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// The body of every failed request: a stable `error_code`, a message for people, and for
/// some codes more fields (`matches` of `AMBIGUOUS`, `output` of a timed-out talk, ...).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Always `false`.
    pub ok: bool,
    pub error_code: String,
    pub message: String,
    /// The fields particular to the code.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub details: Map<String, Value>,
}

impl ErrorBody {
    pub fn new(error_code: impl Into<String>, message: impl Into<String>) -> Self {
        ErrorBody {
            ok: false,
            error_code: error_code.into(),
            message: message.into(),
            details: Map::new(),
        }
    }

    /// The session ids of an `AMBIGUOUS` error.
    pub fn matches(&self) -> Vec<String> {
        serde_json::from_value(self.details.get("matches").cloned().unwrap_or_default())
            .unwrap_or_default()
    }
}
