//! REST handlers of what agents spent: `GET /v1/agents/{id}/usage` (one agent) and
//! `GET /v1/usage` (every agent the caller may see, with team and fleet totals), for a period.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::Json;

use super::error::{ApiQuery, ApiResult};
use crate::actor::Actor;
use crate::config::DEFAULT_TEAM;
use crate::error::HubResult;
use crate::hub::Hub;
use crate::protocol::{
    AgentUsage, AgentUsageReply, FleetUsageQuery, NamedPeriod, TeamUsage, UsageQuery, UsageReply,
};
use crate::usage::tally::Period;

pub async fn agent_usage(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<UsageQuery>,
) -> ApiResult<Json<AgentUsageReply>> {
    let period = period(&q);
    let agent = agent_usage_of(&hub, &id, period)?;
    Ok(Json(AgentUsageReply {
        ok: true,
        since: period.since,
        until: period.until,
        agent,
    }))
}

pub async fn usage(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<Actor>,
    ApiQuery(q): ApiQuery<FleetUsageQuery>,
) -> ApiResult<Json<UsageReply>> {
    let period = period(&q.period());
    let mut ids: Vec<String> = hub.agents().defs().map(|d| d.id.clone()).collect();
    ids.extend(hub.ledger().agents());
    ids.sort();
    ids.dedup();
    let mut agents = Vec::new();
    for id in ids {
        if !super::scope::agent_visible(&hub, &actor, &id) {
            continue;
        }
        let agent = agent_usage_of(&hub, &id, period)?;
        if q.team.as_ref().is_none_or(|t| *t == agent.team) {
            agents.push(agent);
        }
    }
    let shown: Vec<&str> = agents.iter().map(|a| a.agent_id.as_str()).collect();
    let total = hub.ledger().of_agents(|id, _| shown.contains(&id), period);
    let mut teams: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for a in &agents {
        teams.entry(&a.team).or_default().push(&a.agent_id);
    }
    let teams = teams
        .into_iter()
        .map(|(team, ids)| TeamUsage {
            team: team.to_string(),
            usage: hub.ledger().of_agents(|id, _| ids.contains(&id), period),
        })
        .collect();
    Ok(Json(UsageReply {
        ok: true,
        since: period.since,
        until: period.until,
        total,
        teams,
        agents,
    }))
}

/// What agent `id` (or host session `id`) spent in `period`: `null` with the reason when the
/// hub cannot read its CLI's records and has counted nothing of it; a removed agent's figures
/// stay.
fn agent_usage_of(hub: &Hub, id: &str, period: Period) -> HubResult<AgentUsage> {
    let ledger = hub.ledger();
    let counted_team = ledger.team_of(id);
    let (team, unread) = match hub.agents().def(id) {
        Ok(def) => (def.team().to_string(), hub.agents().usage_unread(id)?),
        Err(_) if is_host_session(hub, id) => (
            counted_team.clone().unwrap_or_else(|| DEFAULT_TEAM.into()),
            ledger.unread(id),
        ),
        Err(e) => (counted_team.clone().ok_or(e)?, None),
    };
    let (usage, reason) = match unread {
        Some(why) if counted_team.is_none() => (None, Some(why)),
        _ => (Some(ledger.of_agent(id, period)), None),
    };
    Ok(AgentUsage {
        agent_id: id.to_string(),
        team,
        usage,
        reason,
    })
}

/// Whether `id` is a session the hub started on this machine.
fn is_host_session(hub: &Hub, id: &str) -> bool {
    hub.sessions()
        .get(id)
        .is_ok_and(|s| s.spec().source == "host")
}

/// The query's period: from `since` and from a named `period`'s start, whichever is later,
/// up to `until` (an `until` not after that is an empty period: nothing was spent in it).
fn period(q: &UsageQuery) -> Period {
    let now = chrono::Utc::now();
    let named = q.period.and_then(|p| match p {
        NamedPeriod::Today => Period::today(now).since,
        NamedPeriod::Week => Period::week(now).since,
    });
    Period {
        since: q.since.max(named),
        until: q.until,
    }
}
