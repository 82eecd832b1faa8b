//! An agent's state as the API reports it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::State;

/// An agent's state as `GET .../state` reports it. `profile`, `last_activity_at` and
/// `idle_for_ms` are absent for an agent that is not running; `rule`, `evidence` and the
/// profile's reason and versions come with `explain=true`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StateView {
    #[schema(value_type = String, example = "idle")]
    pub state: State,
    pub since: Option<DateTime<Utc>>,
    pub stuck: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_for_ms: Option<u64>,
    /// `limited`: when the limit ends, as the screen states it (a reset time, a retry's
    /// countdown); absent when it states none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Vec<String>>,
    /// Where the reading comes from: `hook:EVENT[/DETAIL]` (the agent's own hook),
    /// `screen:rule NAME` (saying so when it overruled a hook), `fallback:stable`,
    /// `input:sent`, `process:exited`, `agent:not_running`; a `limited` reading adds
    /// `; until TIME` or `; no reset time on the screen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Which profile and why (from the session's `cli_type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_reason: Option<String>,
    /// The CLI versions the profile was checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_checked_with: Option<Vec<String>>,
    /// With `wait`: whether one of the wanted states was reached before the timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached: Option<bool>,
    /// A blocked agent's question, as it reads on the screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// A blocked agent's answers, each with the keys that choose it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<super::question::Choice>>,
}
