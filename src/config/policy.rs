//! A policy file in `policies/`, as written: what a policy asks for (idle timeout, warnings,
//! lifetime, what to do when an agent is stuck). Parsed and checked by `policy`; evaluated by
//! `policy::evaluate`.

use serde::{Deserialize, Serialize};

use crate::agent_state::State;
pub use crate::usage::budget::{Budget, BudgetAction};

/// What to do when the idle timeout (or max lifetime) is reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdleAction {
    #[default]
    Stop,
    Notify,
    Restart,
}

/// What to do with a stuck agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StuckAction {
    Notify,
    Interrupt,
    Restart,
}

/// Where a warning line goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WarnTo {
    #[default]
    Agent,
    Leader,
}

/// What to do with a `limited` agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnLimit {
    /// Queue deliveries and send the continue line once the limit is over.
    Wait,
}

/// `limit_retry_s` when not set: how long a limit with no stated reset is waited out.
pub const DEFAULT_LIMIT_RETRY_S: u64 = 300;

/// One policy, as written in its file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Default: the file name without `.toml`.
    #[serde(default)]
    pub name: String,
    /// Seconds without meaningful activity, in one of `idle_states`, before `idle_action`.
    pub idle_timeout_s: Option<u64>,
    #[serde(default)]
    pub idle_action: IdleAction,
    /// States in which the idle timer runs: `["idle"]` (default) or `["idle", "blocked"]`.
    #[serde(default = "default_idle_states")]
    pub idle_states: Vec<State>,
    /// Seconds before the idle deadline to emit `policy_warned` (and send `warn_line`).
    pub warn_before_s: Option<u64>,
    /// A line sent with the warning, to the agent or its leader (`warn_to`).
    pub warn_line: Option<String>,
    #[serde(default)]
    pub warn_to: WarnTo,
    /// Seconds after start when `max_lifetime_action` is taken whatever the state.
    pub max_lifetime_s: Option<u64>,
    /// What `max_lifetime_s` does: `stop` (default), `notify` or `restart`.
    #[serde(default)]
    pub max_lifetime_action: IdleAction,
    /// Sessions whose label is one of these are never acted on.
    #[serde(default)]
    pub exempt_labels: Vec<String>,
    /// Sessions whose owner role is one of these are never acted on.
    #[serde(default)]
    pub exempt_roles: Vec<String>,
    /// Decide and report, but do nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// What to do when the agent is stuck (see the profile's `stuck_after_s`).
    pub on_stuck: Option<StuckAction>,
    /// A `send_line_to_agent` to this stopped agent starts it first.
    #[serde(default)]
    pub start_on_message: bool,
    /// `wait`: while the agent is `limited` (a usage or rate limit), deliveries are queued, and
    /// once the limit is over the profile's continue line is sent (`docs/policies.md#limits`).
    pub on_limit: Option<OnLimit>,
    /// With `on_limit = "wait"` and no reset time on the screen: seconds after the limit was
    /// seen to send the continue line (default [`DEFAULT_LIMIT_RETRY_S`]).
    pub limit_retry_s: Option<u64>,
    /// What each agent under the policy may spend (`docs/usage.md#budgets`).
    pub budget: Option<Budget>,
    /// What an exhausted budget does: `hold` (default), `stop` or `notify`.
    #[serde(default)]
    pub budget_action: BudgetAction,
}

fn default_idle_states() -> Vec<State> {
    vec![State::Idle]
}
