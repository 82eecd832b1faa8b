//! The budgets in force and where each stands: each agent's (its policy's `budget`) and each
//! team's (`[teams.NAME]` in hub.toml), with what people changed at run time (a budget set in
//! place of the written one, a lift until it renews), kept in `<data dir>/budgets.json` so a
//! restart keeps them, and the highest level already reported in each period, so `budget_warned`
//! and `budget_exhausted` are sent once per period, across restarts too.
//!
//! [`Budgets::judge`] is the decision for one budget (pure but for what it remembers); the
//! policy loop ([`super::runner`]) feeds it the spending and acts on what it returns; deliveries
//! and starts ask [`Budgets::refusal`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, RwLock};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::HubError;
use crate::protocol::{Budget, BudgetAction, BudgetLevel, BudgetScope, BudgetView, Standing};

/// A budget as written (by a policy or hub.toml), before run-time changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub scope: BudgetScope,
    /// The agent's id, or the team's name.
    pub name: String,
    /// None when only a run-time budget applies.
    pub budget: Option<Budget>,
    /// `policy:NAME` or `team`.
    pub source: String,
    pub action: BudgetAction,
}

/// What one agent's or team's budget has been through at run time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Change {
    /// A budget a person set in place of the written one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    set: Option<Budget>,
    /// Lifted for the period that began then (a `total` budget's period has no start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lifted: Option<Period>,
    /// The highest level reported in a period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reported: Option<Reported>,
}

/// A period, by its start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Period {
    since: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Reported {
    since: Option<DateTime<Utc>>,
    level: BudgetLevel,
}

/// `budgets.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    #[serde(default)]
    agents: BTreeMap<String, Change>,
    #[serde(default)]
    teams: BTreeMap<String, Change>,
}

impl Saved {
    fn of(&mut self, scope: BudgetScope) -> &mut BTreeMap<String, Change> {
        match scope {
            BudgetScope::Agent => &mut self.agents,
            BudgetScope::Team => &mut self.teams,
        }
    }
}

/// A run-time change by a person.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Adjust {
    /// This budget in place of the written one (until reset).
    Set(Budget),
    /// Nothing refused until the budget renews (for a `total` budget: until reset).
    Lift,
    /// Back to the written budget, not lifted.
    Reset,
}

/// The budgets component: run-time changes and each budget's last judgement.
pub struct Budgets {
    path: PathBuf,
    saved: Mutex<Saved>,
    views: RwLock<Vec<BudgetView>>,
    /// Agents a budget is stopping now.
    stopping: Mutex<std::collections::HashSet<String>>,
}

impl Budgets {
    /// Loads `<data_dir>/budgets.json` (none yet: nothing changed).
    pub fn open(data_dir: &std::path::Path) -> Self {
        let path = data_dir.join("budgets.json");
        let saved = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::error!(
                    "{}: not read, run-time budget changes lost: {e}",
                    path.display()
                );
                Saved::default()
            }),
            Err(_) => Saved::default(),
        };
        Budgets {
            path,
            saved: Mutex::new(saved),
            views: RwLock::new(Vec::new()),
            stopping: Mutex::default(),
        }
    }

    /// The budget in force for `written` (a set one wins) and its period's per.
    pub fn in_force(&self, written: &Written) -> Option<Budget> {
        self.set_budget(written.scope, &written.name)
            .or(written.budget)
    }

    /// Judges `written`, whose budget in force is `budget`, with `standing` (the spending of
    /// its period): its view, and the levels newly reached in this period, to report (at most
    /// `warned` then `exhausted`).
    pub fn judge(
        &self,
        written: &Written,
        budget: Budget,
        standing: Standing,
    ) -> (BudgetView, Vec<BudgetLevel>) {
        let mut saved = self.lock();
        let change = saved
            .of(written.scope)
            .entry(written.name.clone())
            .or_default();
        let since = standing.since;
        let lifted = change.lifted.is_some_and(|p| p.since == since);
        let before = change
            .reported
            .filter(|r| r.since == since)
            .map_or(BudgetLevel::Under, |r| r.level);
        let newly: Vec<BudgetLevel> = [BudgetLevel::Warned, BudgetLevel::Exhausted]
            .into_iter()
            .filter(|l| *l > before && *l <= standing.level)
            .collect();
        if !newly.is_empty() {
            change.reported = Some(Reported {
                since,
                level: standing.level,
            });
        }
        let view = BudgetView {
            scope: written.scope,
            name: written.name.clone(),
            source: match change.set {
                Some(_) => "set".into(),
                None => written.source.clone(),
            },
            budget,
            action: written.action,
            refusing: standing.level == BudgetLevel::Exhausted
                && written.action.refuses()
                && !lifted,
            lifted,
            standing,
        };
        let empty = *change == Change::default();
        if empty {
            saved.of(written.scope).remove(&written.name);
        }
        if !newly.is_empty() {
            self.save(&saved);
        }
        (view, newly)
    }

    /// Makes `views` the budgets in force (after a round of judging).
    pub fn publish(&self, views: Vec<BudgetView>) {
        *self.views.write().unwrap_or_else(|e| e.into_inner()) = views;
    }

    /// The budgets in force, as last judged.
    pub fn views(&self) -> Vec<BudgetView> {
        self.views.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The last judgement of one budget.
    pub fn view(&self, scope: BudgetScope, name: &str) -> Option<BudgetView> {
        self.views()
            .into_iter()
            .find(|v| v.scope == scope && v.name == name)
    }

    /// Why a delivery to agent `agent` of `team` is refused now (its own budget first, then its
    /// team's), if it is.
    pub fn refusal(&self, agent: &str, team: &str) -> Option<BudgetView> {
        let views = self.views();
        let own = |scope, name: &str| {
            views
                .iter()
                .find(|v| v.scope == scope && v.name == name && v.refusing)
                .cloned()
        };
        own(BudgetScope::Agent, agent).or_else(|| own(BudgetScope::Team, team))
    }

    /// Refuses a delivery to `agent` of `team` while a budget of it is exhausted.
    pub fn check_delivery(&self, agent: &str, team: &str) -> Result<(), HubError> {
        match self.refusal(agent, team) {
            Some(view) => Err(exhausted(agent, &view, "nothing was sent")),
            None => Ok(()),
        }
    }

    /// Refuses a start of `agent` of `team` while a `stop` budget of it is exhausted.
    pub fn check_start(&self, agent: &str, team: &str) -> Result<(), HubError> {
        match self.refusal(agent, team) {
            Some(view) if view.action == BudgetAction::Stop => {
                Err(exhausted(agent, &view, "the agent was not started"))
            }
            _ => Ok(()),
        }
    }

    /// A person's change to `name`'s budget, kept; `period_since` is the start of the budget's
    /// current period (what a lift lasts for).
    pub fn adjust(
        &self,
        scope: BudgetScope,
        name: &str,
        adjust: Adjust,
        period_since: Option<DateTime<Utc>>,
    ) {
        let mut saved = self.lock();
        let change = saved.of(scope).entry(name.to_string()).or_default();
        match adjust {
            Adjust::Set(budget) => {
                change.set = Some(budget);
                change.lifted = None;
                // A new budget: its thresholds are reported afresh.
                change.reported = None;
            }
            Adjust::Lift => {
                change.lifted = Some(Period {
                    since: period_since,
                })
            }
            Adjust::Reset => *change = Change::default(),
        }
        if *change == Change::default() {
            saved.of(scope).remove(name);
        }
        self.save(&saved);
    }

    /// The budget a person set at run time for `name`, if any.
    pub fn set_budget(&self, scope: BudgetScope, name: &str) -> Option<Budget> {
        self.lock().of(scope).get(name).and_then(|c| c.set)
    }

    /// The names with a budget set at run time.
    pub fn set_names(&self, scope: BudgetScope) -> Vec<String> {
        let mut saved = self.lock();
        let of = saved.of(scope);
        of.iter()
            .filter(|(_, c)| c.set.is_some())
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Marks `agent` as being stopped by a budget; false when it already is.
    pub fn begin_stop(&self, agent: &str) -> bool {
        let mut stopping = self.stopping.lock().unwrap_or_else(|e| e.into_inner());
        stopping.insert(agent.to_string())
    }

    /// `agent`'s stop is over.
    pub fn end_stop(&self, agent: &str) {
        let mut stopping = self.stopping.lock().unwrap_or_else(|e| e.into_inner());
        stopping.remove(agent);
    }

    fn save(&self, saved: &Saved) {
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = self.path.with_extension("json.tmp");
            std::fs::write(&tmp, serde_json::to_vec_pretty(saved)?)?;
            std::fs::rename(&tmp, &self.path)
        };
        if let Err(e) = write() {
            tracing::error!("{}: not written: {e}", self.path.display());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Saved> {
        self.saved.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `BUDGET_EXHAUSTED` for `agent`, naming the budget and when it renews.
fn exhausted(agent: &str, view: &BudgetView, what: &str) -> HubError {
    let whose = match view.scope {
        BudgetScope::Agent => format!("agent '{agent}' has spent its budget"),
        BudgetScope::Team => format!(
            "team '{}' of agent '{agent}' has spent its budget",
            view.name
        ),
    };
    let renews = match view.standing.renews_at {
        Some(at) => format!("it renews at {}", at.format("%Y-%m-%dT%H:%M:%SZ")),
        None => "it never renews (per = \"total\")".into(),
    };
    let message = format!(
        "{whose} ({}, {}: {}); {renews}; {what}. A person can raise or lift it: agent-hub budget set|lift {}",
        caps(&view.budget),
        view.source,
        spent(&view.standing),
        match view.scope {
            BudgetScope::Agent => agent.to_string(),
            BudgetScope::Team => format!("--team {}", view.name),
        }
    );
    HubError::BudgetExhausted {
        message,
        budget: Box::new(serde_json::to_value(view).unwrap_or_default()),
    }
}

/// `$5.00 and 2000000 tokens per day`.
pub fn caps(b: &Budget) -> String {
    let caps: Vec<String> = [
        b.usd.map(|u| format!("${u:.2}")),
        b.tokens.map(|t| format!("{t} tokens")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let per = serde_json::to_value(b.per).unwrap_or_default();
    format!("{} per {}", caps.join(" and "), per.as_str().unwrap_or("?"))
}

/// `spent $5.12 and 2103000 tokens (102 %)`.
fn spent(s: &Standing) -> String {
    format!(
        "spent ${:.2} and {} tokens ({:.0} %)",
        s.spent_usd,
        s.spent_tokens,
        s.used * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::budget::{standing, Per, Window};
    use crate::usage::tally::Summary;

    fn written(action: BudgetAction) -> Written {
        Written {
            scope: BudgetScope::Agent,
            name: "a".into(),
            budget: Some(tokens(1000)),
            source: "policy:capped".into(),
            action,
        }
    }

    fn tokens(n: i64) -> Budget {
        Budget {
            usd: None,
            tokens: Some(n),
            per: Per::Day,
        }
    }

    fn at_tokens(budget: &Budget, n: u64, now: &str) -> Standing {
        let mut spent = Summary::default();
        spent.tokens.input = n;
        standing(budget, &spent, Window::of(budget.per, now.parse().unwrap()))
    }

    #[test]
    fn each_level_is_reported_once_per_period_and_again_in_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let budgets = Budgets::open(dir.path());
        let w = written(BudgetAction::Hold);
        let b = w.budget.unwrap();
        let day1 = "2026-11-26T10:00:00Z";
        let (v, newly) = budgets.judge(&w, b, at_tokens(&b, 500, day1));
        assert!(newly.is_empty() && !v.refusing);
        let (_, newly) = budgets.judge(&w, b, at_tokens(&b, 850, day1));
        assert_eq!(newly, [BudgetLevel::Warned]);
        let (_, newly) = budgets.judge(&w, b, at_tokens(&b, 900, day1));
        assert!(newly.is_empty());
        let (v, newly) = budgets.judge(&w, b, at_tokens(&b, 1200, day1));
        assert_eq!(newly, [BudgetLevel::Exhausted]);
        assert!(v.refusing);
        // Kept across a restart: not reported again.
        let budgets = Budgets::open(dir.path());
        let (_, newly) = budgets.judge(&w, b, at_tokens(&b, 1300, day1));
        assert!(newly.is_empty());
        // The next day: both at once when one turn crosses both.
        let (_, newly) = budgets.judge(&w, b, at_tokens(&b, 2000, "2026-11-27T01:00:00Z"));
        assert_eq!(newly, [BudgetLevel::Warned, BudgetLevel::Exhausted]);
    }

    #[test]
    fn notify_never_refuses_and_a_lift_lasts_until_the_budget_renews() {
        let dir = tempfile::tempdir().unwrap();
        let budgets = Budgets::open(dir.path());
        let notify = written(BudgetAction::Notify);
        let b = notify.budget.unwrap();
        let day1 = "2026-11-26T10:00:00Z";
        let (v, _) = budgets.judge(&notify, b, at_tokens(&b, 5000, day1));
        assert!(!v.refusing);

        let hold = written(BudgetAction::Hold);
        let (v, _) = budgets.judge(&hold, b, at_tokens(&b, 5000, day1));
        budgets.publish(vec![v.clone()]);
        let e = budgets.check_delivery("a", "t").unwrap_err();
        assert_eq!(e.code(), "BUDGET_EXHAUSTED");
        assert!(e.to_string().contains("1000 tokens per day"), "{e}");
        assert!(e.to_string().contains("2026-11-27T00:00:00Z"), "{e}");
        assert!(
            budgets.check_start("a", "t").is_ok(),
            "hold lets a start by"
        );

        budgets.adjust(BudgetScope::Agent, "a", Adjust::Lift, v.standing.since);
        let (v, _) = budgets.judge(&hold, b, at_tokens(&b, 5000, day1));
        assert!(v.lifted && !v.refusing);
        let (v, _) = budgets.judge(&hold, b, at_tokens(&b, 5000, "2026-11-27T10:00:00Z"));
        assert!(
            !v.lifted && v.refusing,
            "the lift ends when the budget renews"
        );
    }

    #[test]
    fn a_set_budget_replaces_the_written_one_until_reset_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let budgets = Budgets::open(dir.path());
        let w = written(BudgetAction::Stop);
        assert_eq!(budgets.in_force(&w), Some(tokens(1000)));
        budgets.adjust(BudgetScope::Agent, "a", Adjust::Set(tokens(9000)), None);
        let budgets = Budgets::open(dir.path());
        assert_eq!(budgets.in_force(&w), Some(tokens(9000)));
        let b = budgets.in_force(&w).unwrap();
        let (v, _) = budgets.judge(&w, b, at_tokens(&b, 5000, "2026-11-26T10:00:00Z"));
        assert_eq!((v.source.as_str(), v.refusing), ("set", false));
        budgets.adjust(BudgetScope::Agent, "a", Adjust::Reset, None);
        assert_eq!(budgets.in_force(&w), Some(tokens(1000)));
    }

    #[test]
    fn a_team_budget_refuses_its_agents_and_stop_refuses_starts() {
        let dir = tempfile::tempdir().unwrap();
        let budgets = Budgets::open(dir.path());
        let team = Written {
            scope: BudgetScope::Team,
            name: "red".into(),
            budget: Some(tokens(10)),
            source: "team".into(),
            action: BudgetAction::Stop,
        };
        let b = team.budget.unwrap();
        let (v, _) = budgets.judge(&team, b, at_tokens(&b, 10, "2026-11-26T10:00:00Z"));
        budgets.publish(vec![v]);
        let e = budgets.check_start("a", "red").unwrap_err().to_string();
        assert!(e.contains("team 'red'") && e.contains("--team red"), "{e}");
        assert!(budgets.check_delivery("b", "blue").is_ok());
    }
}
