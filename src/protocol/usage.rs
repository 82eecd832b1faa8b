//! Wire types of what agents spent: `GET /v1/agents/{id}/usage` and `GET /v1/usage`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use crate::usage::tally::{ModelSummary, Summary};
pub use crate::usage::Tokens;

/// A period named instead of `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NamedPeriod {
    /// Since 00:00 UTC today.
    Today,
    /// Since Monday 00:00 UTC of this week.
    Week,
}

/// `GET /v1/agents/{id}/usage` query: the period (all time by default).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// From this time on (RFC 3339), included.
    pub since: Option<DateTime<Utc>>,
    /// Up to this time (RFC 3339), excluded.
    pub until: Option<DateTime<Utc>>,
    /// `today` or `week` (from 00:00 UTC today, from Monday 00:00 UTC); with `since`, the
    /// later start.
    pub period: Option<NamedPeriod>,
}

/// `GET /v1/usage` query: the period, as [`UsageQuery`], and a team.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FleetUsageQuery {
    /// From this time on (RFC 3339), included.
    pub since: Option<DateTime<Utc>>,
    /// Up to this time (RFC 3339), excluded.
    pub until: Option<DateTime<Utc>>,
    /// `today` or `week`, as for one agent.
    pub period: Option<NamedPeriod>,
    /// This team's agents alone.
    pub team: Option<String>,
}

impl FleetUsageQuery {
    /// Its period alone.
    pub fn period(&self) -> UsageQuery {
        UsageQuery {
            since: self.since,
            until: self.until,
            period: self.period,
        }
    }
}

/// What one agent spent.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentUsage {
    pub agent_id: String,
    pub team: String,
    /// `null` when the hub cannot read what the agent's CLI used (see `reason`).
    pub usage: Option<Summary>,
    /// Why `usage` is `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What one team's agents spent together.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TeamUsage {
    pub team: String,
    pub usage: Summary,
}

/// `GET /v1/agents/{id}/usage`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentUsageReply {
    pub ok: bool,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    #[serde(flatten)]
    pub agent: AgentUsage,
}

/// `GET /v1/usage`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UsageReply {
    pub ok: bool,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// All the agents shown together.
    pub total: Summary,
    pub teams: Vec<TeamUsage>,
    pub agents: Vec<AgentUsage>,
}

pub use crate::usage::budget::{Budget, BudgetAction, Level as BudgetLevel, Per, Standing};

/// Whose budget: one agent's, or a team's (all its agents' spending together).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum BudgetScope {
    Agent,
    Team,
}

/// One budget in force and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BudgetView {
    pub scope: BudgetScope,
    /// The agent's id, or the team's name.
    pub name: String,
    /// The budget in force: the written one, or the one a person set at run time.
    pub budget: Budget,
    /// Where it comes from: `policy:NAME`, `team` (hub.toml's `[teams.NAME]`) or `set` (by a
    /// person at run time, in place of the written one).
    pub source: String,
    pub action: BudgetAction,
    pub standing: Standing,
    /// A person lifted it until it renews: nothing is refused meanwhile.
    pub lifted: bool,
    /// Whether deliveries (and, with `stop`, starts) are refused now.
    pub refusing: bool,
}

/// `GET /v1/budgets`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BudgetsReply {
    pub ok: bool,
    pub budgets: Vec<BudgetView>,
}

/// `GET|PUT|DELETE /v1/agents/{id}/budget`, `POST .../budget/lift` (and the same for teams):
/// the budget after the change, if one is in force.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BudgetReply {
    pub ok: bool,
    pub budget: Option<BudgetView>,
}
