//! What agents spent, call by call, and its sums for a period. Pure: the ledger above keeps
//! the entries on disk and feeds the calls it reads from the agents' records.
//!
//! An entry remembers where it was read (the record file and the byte just after its line), so
//! after a restart the files are read again only from there: what the hub counted before is
//! never counted twice.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::price::PriceTable;
use super::{Call, Tokens};

/// One model call an agent made, as the hub counted it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When the CLI recorded the call (else when the hub read it).
    pub at: DateTime<Utc>,
    /// The agent's team when it made the call.
    pub team: String,
    pub model: Option<String>,
    pub tokens: Tokens,
    /// The cost the CLI stated itself (Aider); else the price table decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stated_cost_usd: Option<f64>,
    /// The record file it was read from, relative to the records' directory.
    pub file: String,
    /// The byte of `file` just after the call's line.
    pub end: u64,
}

impl Entry {
    /// The entry for `call`, read from `file` up to `end`, by an agent of `team`; `now` when
    /// the record gives no time.
    pub fn of(call: Call, team: &str, file: &str, end: u64, now: DateTime<Utc>) -> Self {
        Entry {
            at: call.at.unwrap_or(now),
            team: team.to_string(),
            model: call.model,
            tokens: call.tokens,
            stated_cost_usd: call.stated_cost_usd,
            file: file.to_string(),
            end,
        }
    }

    /// Its cost: the one the CLI stated, else the price table's (none for a model it does not
    /// price).
    pub fn cost(&self, prices: &PriceTable) -> Option<f64> {
        self.stated_cost_usd
            .or_else(|| prices.cost(self.model.as_deref(), &self.tokens))
    }
}

/// The calls of every agent, by agent id.
#[derive(Debug, Default)]
pub struct Tally {
    entries: HashMap<String, Vec<Entry>>,
    /// How far each agent's record files were counted, by file.
    ends: HashMap<String, HashMap<String, u64>>,
}

impl Tally {
    /// Counts `entry` for `agent`, unless its file was counted past it already (two readers
    /// of the same file count it once). Whether it was counted.
    pub fn add(&mut self, agent: &str, entry: Entry) -> bool {
        let ends = self.ends.entry(agent.to_string()).or_default();
        let end = ends.entry(entry.file.clone()).or_insert(0);
        if entry.end <= *end {
            return false;
        }
        *end = entry.end;
        self.entries
            .entry(agent.to_string())
            .or_default()
            .push(entry);
        true
    }

    /// How far each of `agent`'s record files was counted, by file.
    pub fn read_up_to(&self, agent: &str) -> HashMap<String, u64> {
        self.ends.get(agent).cloned().unwrap_or_default()
    }

    /// The team of `agent`'s latest entry.
    pub fn team_of(&self, agent: &str) -> Option<String> {
        Some(self.entries.get(agent)?.last()?.team.clone())
    }

    /// All that was counted, by agent, team and model (all time).
    pub fn totals(&self, prices: &PriceTable) -> Vec<Total> {
        let mut totals: BTreeMap<(&str, &str, Option<&str>), Total> = BTreeMap::new();
        for (agent, es) in &self.entries {
            for e in es {
                let key = (agent.as_str(), e.team.as_str(), e.model.as_deref());
                let t = totals.entry(key).or_insert_with(|| Total {
                    agent: agent.clone(),
                    team: e.team.clone(),
                    model: e.model.clone(),
                    tokens: Tokens::default(),
                    cost_usd: 0.0,
                });
                t.tokens += e.tokens;
                t.cost_usd += e.cost(prices).unwrap_or(0.0);
            }
        }
        totals.into_values().collect()
    }

    /// The agents with entries.
    pub fn agents(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// What `agent` spent in `period`.
    pub fn of_agent(&self, agent: &str, period: Period, prices: &PriceTable) -> Summary {
        let entries = self.entries.get(agent).into_iter().flatten();
        Summary::of(entries.filter(|e| period.holds(e.at)), prices)
    }

    /// What the agents that `pick` picks (by agent id and team) spent in `period`.
    pub fn of_agents(
        &self,
        pick: impl Fn(&str, &str) -> bool,
        period: Period,
        prices: &PriceTable,
    ) -> Summary {
        let entries = self
            .entries
            .iter()
            .flat_map(|(agent, es)| es.iter().map(move |e| (agent, e)))
            .filter(|(agent, e)| pick(agent, &e.team) && period.holds(e.at))
            .map(|(_, e)| e);
        Summary::of(entries, prices)
    }
}

/// What one agent's calls answered by one model used, as one team's, all time.
#[derive(Debug, Clone, PartialEq)]
pub struct Total {
    pub agent: String,
    pub team: String,
    pub model: Option<String>,
    pub tokens: Tokens,
    /// The cost of the calls that have one.
    pub cost_usd: f64,
}

/// A period of time: from `since` (included) to `until` (excluded), either end open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Period {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

impl Period {
    /// From 00:00 UTC of `now`'s day on.
    pub fn today(now: DateTime<Utc>) -> Self {
        Period {
            since: now.date_naive().and_hms_opt(0, 0, 0).map(|t| t.and_utc()),
            until: None,
        }
    }

    /// From Monday 00:00 UTC of `now`'s week on.
    pub fn week(now: DateTime<Utc>) -> Self {
        let monday = now.date_naive().week(chrono::Weekday::Mon).first_day();
        Period {
            since: monday.and_hms_opt(0, 0, 0).map(|t| t.and_utc()),
            until: None,
        }
    }

    pub fn holds(&self, at: DateTime<Utc>) -> bool {
        self.since.is_none_or(|s| at >= s) && self.until.is_none_or(|u| at < u)
    }
}

/// What some calls used and cost, in all and by model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Summary {
    pub calls: u64,
    pub tokens: Tokens,
    /// The cost of the calls that have one (a model the price table names, or a CLI that
    /// states its cost).
    pub cost_usd: f64,
    /// Whether every call has a cost: when not, `cost_usd` leaves out the calls of
    /// `unpriced_models`.
    pub cost_complete: bool,
    pub by_model: Vec<ModelSummary>,
}

/// What the calls answered by one model used and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ModelSummary {
    /// The model, or `null` when the records do not name it.
    pub model: Option<String>,
    pub calls: u64,
    pub tokens: Tokens,
    /// `null` when the price table does not price the model (never a made-up cost).
    pub cost_usd: Option<f64>,
}

impl Summary {
    fn of<'a>(entries: impl Iterator<Item = &'a Entry>, prices: &PriceTable) -> Self {
        let mut by_model: BTreeMap<Option<String>, ModelSummary> = BTreeMap::new();
        for e in entries {
            let m = by_model
                .entry(e.model.clone())
                .or_insert_with(|| ModelSummary {
                    model: e.model.clone(),
                    cost_usd: Some(0.0),
                    ..ModelSummary::default()
                });
            m.calls += 1;
            m.tokens += e.tokens;
            m.cost_usd = m.cost_usd.zip(e.cost(prices)).map(|(a, b)| a + b);
        }
        let by_model: Vec<ModelSummary> = by_model.into_values().collect();
        let mut all = Summary {
            cost_complete: by_model.iter().all(|m| m.cost_usd.is_some()),
            ..Summary::default()
        };
        for m in &by_model {
            all.calls += m.calls;
            all.tokens += m.tokens;
            all.cost_usd += m.cost_usd.unwrap_or(0.0);
        }
        all.by_model = by_model;
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: u64, output: u64) -> Tokens {
        Tokens {
            input,
            output,
            ..Tokens::default()
        }
    }

    /// An entry of `team` at `hour` o'clock (one file, read up to `end`).
    fn entry(hour: u32, team: &str, model: Option<&str>, t: Tokens, end: u64) -> Entry {
        Entry {
            at: at(hour),
            team: team.into(),
            model: model.map(String::from),
            tokens: t,
            stated_cost_usd: None,
            file: "a.jsonl".into(),
            end,
        }
    }

    fn at(hour: u32) -> DateTime<Utc> {
        format!("2026-11-27T{hour:02}:00:00Z").parse().unwrap()
    }

    fn table() -> PriceTable {
        let entries = toml::from_str(
            r#"["m"]
input = 1.0
output = 10.0
cache_read = 0.1
cache_write = 1.25
"#,
        )
        .unwrap();
        PriceTable::with(&entries, "", "test").unwrap()
    }

    #[test]
    fn sums_by_model_with_null_for_an_unpriced_one() {
        let mut t = Tally::default();
        let million = tokens(1_000_000, 100_000);
        assert!(t.add("a", entry(1, "x", Some("m"), million, 10)));
        assert!(t.add("a", entry(2, "x", Some("m"), tokens(1_000_000, 0), 20)));
        assert!(t.add("a", entry(3, "x", Some("other"), tokens(5, 5), 30)));
        let s = t.of_agent("a", Period::default(), &table());
        assert_eq!((s.calls, s.tokens), (3, tokens(2_000_005, 100_005)));
        assert_eq!(s.by_model[0].model.as_deref(), Some("m"));
        assert_eq!(s.by_model[0].cost_usd, Some(3.0));
        assert_eq!(s.by_model[1].cost_usd, None);
        assert_eq!((s.cost_usd, s.cost_complete), (3.0, false));
        assert_eq!(t.read_up_to("a")["a.jsonl"], 30);
        // A line counted already (by another reader of the same file) is not counted again.
        assert!(!t.add("a", entry(3, "x", None, tokens(5, 5), 20)));
        assert_eq!(t.of_agent("a", Period::default(), &table()).calls, 3);
    }

    #[test]
    fn a_period_and_a_team_pick_their_calls() {
        let mut t = Tally::default();
        t.add("a", entry(1, "x", Some("m"), tokens(1, 0), 1));
        t.add("b", entry(2, "y", Some("m"), tokens(10, 0), 1));
        t.add("c", entry(3, "x", Some("m"), tokens(100, 0), 1));
        let since = Period {
            since: Some(at(2)),
            until: None,
        };
        let all = t.of_agents(|_, _| true, since, &table());
        assert_eq!(all.tokens.input, 110);
        let team_x = t.of_agents(|_, team| team == "x", Period::default(), &table());
        assert_eq!((team_x.calls, team_x.tokens.input), (2, 101));
        let until = Period {
            since: None,
            until: Some(at(2)),
        };
        assert_eq!(t.of_agent("b", until, &table()).calls, 0);
        let nobody = t.of_agent("nobody", Period::default(), &table());
        assert!(nobody.cost_complete && nobody.calls == 0);
    }

    #[test]
    fn today_and_this_week_start_at_midnight_utc() {
        let friday: DateTime<Utc> = "2026-11-27T13:14:15Z".parse().unwrap();
        let since = |p: Period| p.since.unwrap().to_rfc3339();
        assert_eq!(since(Period::today(friday)), "2026-11-27T00:00:00+00:00");
        assert_eq!(since(Period::week(friday)), "2026-11-23T00:00:00+00:00");
        let monday: DateTime<Utc> = "2026-11-23T00:00:00Z".parse().unwrap();
        assert_eq!(since(Period::week(monday)), "2026-11-23T00:00:00+00:00");
    }

    #[test]
    fn a_stated_cost_wins_over_the_table() {
        let mut e = entry(1, "x", Some("unpriced"), tokens(9, 9), 1);
        e.stated_cost_usd = Some(0.25);
        assert_eq!(e.cost(&table()), Some(0.25));
    }
}
