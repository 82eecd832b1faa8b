//! The budget round of the policy loop (every [`super::runner::BUDGET_TICK`]): every budget in force is
//! judged against what the ledger counted in its period ([`super::budgets::Budgets::judge`]);
//! a level newly reached is sent as `budget_warned` / `budget_exhausted`, and while a `stop`
//! budget is exhausted its running agents are stopped.

use chrono::Utc;
use tokio_util::task::TaskTracker;

use super::budgets::Written;
use super::runner::PolicyRunner;
use crate::agents::AgentStatus;
use crate::error::HubResult;
use crate::protocol::{BudgetAction, BudgetEvent, BudgetLevel, BudgetScope, BudgetView, EventKind};
use crate::usage::budget::{standing, Window};

impl PolicyRunner {
    /// The budgets as written: each agent's policy's and each team's, plus those set only at
    /// run time.
    pub fn written_budgets(&self) -> Vec<Written> {
        let mut out = Vec::new();
        for def in self.agents.defs() {
            let policy = def.policy.as_deref().and_then(|p| self.engine.policy(p));
            let budget = policy.as_ref().and_then(|p| p.budget);
            let set = self.budgets.set_budget(BudgetScope::Agent, &def.id);
            if budget.is_none() && set.is_none() {
                continue;
            }
            out.push(Written {
                scope: BudgetScope::Agent,
                name: def.id.clone(),
                budget,
                source: policy
                    .as_ref()
                    .map_or("set".into(), |p| format!("policy:{}", p.name)),
                action: policy.map_or(BudgetAction::default(), |p| p.budget_action),
            });
        }
        let mut teams: Vec<String> = self.config.teams.keys().cloned().collect();
        teams.extend(self.budgets.set_names(BudgetScope::Team));
        teams.sort();
        teams.dedup();
        for team in teams {
            let written = self.config.teams.get(&team).map(|t| t.get_ref());
            out.push(Written {
                scope: BudgetScope::Team,
                name: team,
                budget: written.and_then(|t| t.budget()),
                source: "team".into(),
                action: written.map_or(BudgetAction::default(), |t| t.budget_action),
            });
        }
        out
    }

    /// Refuses a delivery to the agent of `session` (none for a session of no agent) while a
    /// budget of it is exhausted.
    pub fn check_delivery_budget(&self, session: &crate::session::Session) -> HubResult<()> {
        match session.spec().agent_id.as_deref() {
            Some(agent) => self.budgets.check_delivery(agent, &self.team_of(agent)),
            None => Ok(()),
        }
    }

    /// Refuses a start of `agent` while a `stop` budget of it is exhausted.
    pub fn check_start_budget(&self, agent: &str) -> HubResult<()> {
        self.budgets.check_start(agent, &self.team_of(agent))
    }

    pub(super) fn team_of(&self, agent: &str) -> String {
        self.agents
            .def(agent)
            .map(|d| d.team().to_string())
            .unwrap_or_default()
    }

    /// One budget round: judges every budget, reports new levels, stops what must stop.
    pub async fn check_budgets(&self, actions: &TaskTracker) {
        let now = Utc::now();
        let mut views = Vec::new();
        for written in self.written_budgets() {
            let Some(budget) = self.budgets.in_force(&written) else {
                continue;
            };
            let window = Window::of(budget.per, now);
            let spent = match written.scope {
                BudgetScope::Agent => self.ledger.of_agent(&written.name, window.period()),
                BudgetScope::Team => self
                    .ledger
                    .of_agents(|_, team| team == written.name, window.period()),
            };
            let (view, newly) =
                self.budgets
                    .judge(&written, budget, standing(&budget, &spent, window));
            for level in newly {
                self.report(&view, level);
            }
            if view.refusing && view.action == BudgetAction::Stop {
                self.stop_running(&view, actions);
            }
            views.push(view);
        }
        self.budgets.publish(views);
    }

    fn report(&self, view: &BudgetView, level: BudgetLevel) {
        let event = BudgetEvent::of(view);
        tracing::info!(
            budget = %view.name,
            used = view.standing.used,
            "budget {level:?}: {}",
            super::budgets::caps(&view.budget)
        );
        self.events.emit(match level {
            BudgetLevel::Exhausted => EventKind::BudgetExhausted(event),
            _ => EventKind::BudgetWarned(event),
        });
    }

    /// Stops the running agents an exhausted `stop` budget covers (beside the loop).
    fn stop_running(&self, view: &BudgetView, actions: &TaskTracker) {
        let ids: Vec<String> = self
            .agents
            .defs()
            .filter(|d| match view.scope {
                BudgetScope::Agent => d.id == view.name,
                BudgetScope::Team => d.team() == view.name,
            })
            .map(|d| d.id.clone())
            .collect();
        for id in ids {
            let running = self
                .agents
                .info(&id)
                .is_ok_and(|i| i.status == AgentStatus::Running);
            if !running || !self.budgets.begin_stop(&id) {
                continue;
            }
            let runner = self.clone();
            actions.spawn(async move {
                if let Err(e) = runner.agents.stop(&id).await {
                    tracing::warn!(agent = %id, "budget stop failed: {e}");
                }
                runner.budgets.end_stop(&id);
            });
        }
    }
}
