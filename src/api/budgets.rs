//! REST handlers of budgets: `GET /v1/budgets` (every budget the caller may see, where each
//! stands), and one agent's or team's budget: `GET`, `PUT` (a person sets one in place of the
//! written one), `POST .../lift` (nothing refused until it renews), `DELETE` (back to the
//! written one). Changes are the admin's, audited as requests.

use axum::extract::{Path, State};
use axum::Json;

use super::error::{ApiJson, ApiResult};
use crate::actor::Actor;
use crate::error::{HubError, HubResult};
use crate::hub::Hub;
use crate::policy::budgets::Adjust;
use crate::protocol::{Budget, BudgetReply, BudgetScope, BudgetView, BudgetsReply};
use crate::usage::budget::Window;

pub async fn budgets(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<Actor>,
) -> ApiResult<Json<BudgetsReply>> {
    let budgets = hub
        .budgets()
        .views()
        .into_iter()
        .filter(|v| may_see(&hub, &actor, v))
        .collect();
    Ok(Json(BudgetsReply { ok: true, budgets }))
}

/// People see every budget; an agent its own team's (its team's agents' and the team's).
fn may_see(hub: &Hub, actor: &Actor, view: &BudgetView) -> bool {
    match (&actor.agent, view.scope) {
        (None, _) => true,
        (Some(_), BudgetScope::Agent) => super::scope::agent_visible(hub, actor, &view.name),
        (Some(who), BudgetScope::Team) => who.team == view.name,
    }
}

pub async fn agent_budget(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<BudgetReply>> {
    hub.agents().def(&id)?;
    Ok(reply(&hub, BudgetScope::Agent, &id))
}

pub async fn set_agent_budget(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(budget): ApiJson<Budget>,
) -> ApiResult<Json<BudgetReply>> {
    hub.agents().def(&id)?;
    Ok(adjust(&hub, BudgetScope::Agent, &id, Adjust::Set(checked(budget)?)).await?)
}

pub async fn lift_agent_budget(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<BudgetReply>> {
    hub.agents().def(&id)?;
    Ok(adjust(&hub, BudgetScope::Agent, &id, Adjust::Lift).await?)
}

pub async fn reset_agent_budget(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<BudgetReply>> {
    hub.agents().def(&id)?;
    Ok(adjust(&hub, BudgetScope::Agent, &id, Adjust::Reset).await?)
}

pub async fn team_budget(
    State(hub): State<Hub>,
    Path(team): Path<String>,
) -> ApiResult<Json<BudgetReply>> {
    known_team(&hub, &team)?;
    Ok(reply(&hub, BudgetScope::Team, &team))
}

pub async fn set_team_budget(
    State(hub): State<Hub>,
    Path(team): Path<String>,
    ApiJson(budget): ApiJson<Budget>,
) -> ApiResult<Json<BudgetReply>> {
    known_team(&hub, &team)?;
    Ok(adjust(
        &hub,
        BudgetScope::Team,
        &team,
        Adjust::Set(checked(budget)?),
    )
    .await?)
}

pub async fn lift_team_budget(
    State(hub): State<Hub>,
    Path(team): Path<String>,
) -> ApiResult<Json<BudgetReply>> {
    known_team(&hub, &team)?;
    Ok(adjust(&hub, BudgetScope::Team, &team, Adjust::Lift).await?)
}

pub async fn reset_team_budget(
    State(hub): State<Hub>,
    Path(team): Path<String>,
) -> ApiResult<Json<BudgetReply>> {
    known_team(&hub, &team)?;
    Ok(adjust(&hub, BudgetScope::Team, &team, Adjust::Reset).await?)
}

/// A budget from a request, or a 400 naming the field that cannot be.
fn checked(budget: Budget) -> HubResult<Budget> {
    budget
        .check()
        .map_err(|bad| HubError::bad_request(bad.message))?;
    Ok(budget)
}

/// A team is known when hub.toml has a `[teams.NAME]` for it or an agent is in it.
fn known_team(hub: &Hub, team: &str) -> HubResult<()> {
    let known =
        hub.config().teams.contains_key(team) || hub.agents().defs().any(|d| d.team() == team);
    match known {
        true => Ok(()),
        false => Err(HubError::TeamNotFound {
            team: team.to_string(),
        }),
    }
}

/// Makes `adjust` to `name`'s budget and judges the budgets again, so the reply (and the next
/// delivery) sees it at once.
async fn adjust(
    hub: &Hub,
    scope: BudgetScope,
    name: &str,
    adjust: Adjust,
) -> HubResult<Json<BudgetReply>> {
    let runner = hub.policy_runner();
    if adjust == Adjust::Lift {
        let in_force = runner
            .written_budgets()
            .into_iter()
            .find(|w| w.scope == scope && w.name == name)
            .and_then(|w| hub.budgets().in_force(&w));
        let Some(budget) = in_force else {
            return Err(HubError::NoBudget {
                whose: format!("{scope:?} '{name}'").to_lowercase(),
            });
        };
        let since = Window::of(budget.per, chrono::Utc::now()).since;
        hub.budgets().adjust(scope, name, adjust, since);
    } else {
        hub.budgets().adjust(scope, name, adjust, None);
    }
    runner.check_budgets(hub.tracker()).await;
    Ok(reply(hub, scope, name))
}

fn reply(hub: &Hub, scope: BudgetScope, name: &str) -> Json<BudgetReply> {
    Json(BudgetReply {
        ok: true,
        budget: hub.budgets().view(scope, name),
    })
}
