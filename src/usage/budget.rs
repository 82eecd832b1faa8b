//! Budgets (pure): how much an agent, or a team, may spend in an hour, a day, a week or in all,
//! and where a sum of spending stands against one. A budget caps dollars, tokens (all four
//! kinds together) or both; it is at 80 % (`warned`) when either reaches 80 % of its cap, and
//! `exhausted` when either reaches its cap. Hours, days (from 00:00) and weeks (from Monday
//! 00:00) are UTC, as the usage periods are; a `total` budget never renews.

use chrono::{DateTime, Duration, DurationRound, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::tally::{Period, Summary};

/// How much of a cap makes a budget `warned`.
pub const WARN_AT: f64 = 0.8;

/// The period a budget renews by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    Hour,
    #[default]
    Day,
    Week,
    /// Never renews.
    Total,
}

/// What happens to an agent whose budget is exhausted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BudgetAction {
    /// Stopped at once, and not started again (by a message or a person) until the budget
    /// renews, is raised or is lifted.
    Stop,
    /// Its current turn finishes; new deliveries are refused with `BUDGET_EXHAUSTED`.
    #[default]
    Hold,
    /// Only the events (`budget_warned`, `budget_exhausted`) are sent.
    Notify,
}

impl BudgetAction {
    /// Whether deliveries are refused while the budget is exhausted.
    pub fn refuses(self) -> bool {
        !matches!(self, BudgetAction::Notify)
    }
}

/// A budget as written: `budget = { usd = 5.0, tokens = 2_000_000, per = "day" }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Dollars per period, 0 or more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub usd: Option<f64>,
    /// Tokens per period (input, output, cache read and cache write together), 0 or more.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_tokens"
    )]
    #[schema(minimum = 0)]
    pub tokens: Option<i64>,
    /// `hour`, `day` (default), `week` or `total`.
    #[serde(default)]
    pub per: Per,
}

/// Tokens as an integer or a whole float (`2e6`, `80.0`: JSON Schema's integers); a negative
/// number is read, for [`Budget::check`] to refuse in its own words.
fn whole_tokens<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Int(i64),
        Float(f64),
    }
    match Option::<Number>::deserialize(d)? {
        None => Ok(None),
        Some(Number::Int(n)) => Ok(Some(n)),
        Some(Number::Float(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
        Some(Number::Float(f)) => Err(serde::de::Error::custom(format!(
            "tokens must be a whole number, not {f}"
        ))),
    }
}

/// A field of a budget that cannot be, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BadBudget {
    /// `usd`, `tokens` or `budget` (neither cap given).
    pub field: &'static str,
    pub message: String,
}

impl Budget {
    /// Checks what serde cannot: a cap is given, and none is negative.
    pub fn check(&self) -> Result<(), BadBudget> {
        if self.usd.is_none() && self.tokens.is_none() {
            return Err(BadBudget {
                field: "budget",
                message: "a budget needs usd, tokens or both".into(),
            });
        }
        if let Some(usd) = self.usd.filter(|u| !u.is_finite() || *u < 0.0) {
            return Err(BadBudget {
                field: "usd",
                message: format!("usd must be dollars, 0 or more, not {usd}"),
            });
        }
        if let Some(tokens) = self.tokens.filter(|t| *t < 0) {
            return Err(BadBudget {
                field: "tokens",
                message: format!("tokens must be 0 or more, not {tokens}"),
            });
        }
        Ok(())
    }
}

/// The stretch of time a budget counts, and when the next one begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Its start; none for a `total` budget.
    pub since: Option<DateTime<Utc>>,
    /// When the budget renews; none for a `total` budget.
    pub renews_at: Option<DateTime<Utc>>,
}

impl Window {
    /// The window of `per` that holds `now`.
    pub fn of(per: Per, now: DateTime<Utc>) -> Window {
        let since = match per {
            Per::Hour => now.duration_trunc(Duration::hours(1)).ok(),
            Per::Day => Period::today(now).since,
            Per::Week => Period::week(now).since,
            Per::Total => None,
        };
        let length = match per {
            Per::Hour => Some(Duration::hours(1)),
            Per::Day => Some(Duration::days(1)),
            Per::Week => Some(Duration::weeks(1)),
            Per::Total => None,
        };
        let renews_at = since.zip(length).map(|(s, l)| s + l);
        Window { since, renews_at }
    }

    /// The usage period it counts.
    pub fn period(&self) -> Period {
        Period {
            since: self.since,
            until: None,
        }
    }
}

/// Where spending stands against a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Under,
    /// 80 % of a cap reached.
    Warned,
    /// A cap reached.
    Exhausted,
}

/// A budget's standing: what was spent in its window, against its caps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Standing {
    pub level: Level,
    /// The larger of spent/cap for dollars and for tokens (1.0 is the whole budget).
    pub used: f64,
    pub spent_usd: f64,
    pub spent_tokens: u64,
    /// Whether every call counted has a cost (see the usage summary's `cost_complete`).
    pub cost_complete: bool,
    pub since: Option<DateTime<Utc>>,
    pub renews_at: Option<DateTime<Utc>>,
}

/// Where `spent` (the usage of `window`) stands against `budget`.
pub fn standing(budget: &Budget, spent: &Summary, window: Window) -> Standing {
    let tokens = spent.tokens.total();
    let share = |spent: f64, cap: f64| match cap > 0.0 {
        true => spent / cap,
        false => f64::INFINITY,
    };
    let shares = [
        budget.usd.map(|cap| share(spent.cost_usd, cap)),
        budget.tokens.map(|cap| share(tokens as f64, cap as f64)),
    ];
    let used = shares.into_iter().flatten().fold(0.0, f64::max);
    let level = match used {
        u if u >= 1.0 => Level::Exhausted,
        u if u >= WARN_AT => Level::Warned,
        _ => Level::Under,
    };
    Standing {
        level,
        used: if used.is_finite() { used } else { 1.0 },
        spent_usd: spent.cost_usd,
        spent_tokens: tokens,
        cost_complete: spent.cost_complete,
        since: window.since,
        renews_at: window.renews_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::Tokens;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn spent(usd: f64, tokens: u64) -> Summary {
        Summary {
            calls: 1,
            tokens: Tokens {
                input: tokens,
                ..Default::default()
            },
            cost_usd: usd,
            cost_complete: true,
            by_model: Vec::new(),
        }
    }

    #[test]
    fn windows_start_at_the_hour_the_day_and_monday_and_renew_after() {
        let now = at("2026-11-26T15:42:10Z"); // a Thursday
        let w = Window::of(Per::Hour, now);
        assert_eq!(w.since, Some(at("2026-11-26T15:00:00Z")));
        assert_eq!(w.renews_at, Some(at("2026-11-26T16:00:00Z")));
        let w = Window::of(Per::Day, now);
        assert_eq!(w.since, Some(at("2026-11-26T00:00:00Z")));
        assert_eq!(w.renews_at, Some(at("2026-11-27T00:00:00Z")));
        let w = Window::of(Per::Week, now);
        assert_eq!(w.since, Some(at("2026-11-23T00:00:00Z")));
        assert_eq!(w.renews_at, Some(at("2026-11-30T00:00:00Z")));
        let w = Window::of(Per::Total, now);
        assert_eq!((w.since, w.renews_at), (None, None));
    }

    #[test]
    fn the_larger_share_of_either_cap_decides() {
        let budget = Budget {
            usd: Some(5.0),
            tokens: Some(1000),
            per: Per::Day,
        };
        let w = Window::of(Per::Day, at("2026-11-26T15:00:00Z"));
        let table = [
            (0.0, 0, Level::Under, 0.0),
            (3.99, 100, Level::Under, 0.798),
            (4.0, 100, Level::Warned, 0.8),
            (1.0, 800, Level::Warned, 0.8),
            (1.0, 1000, Level::Exhausted, 1.0),
            (5.0, 0, Level::Exhausted, 1.0),
            (7.5, 0, Level::Exhausted, 1.5),
        ];
        for (usd, tokens, level, used) in table {
            let s = standing(&budget, &spent(usd, tokens), w);
            assert_eq!(s.level, level, "{usd} {tokens}");
            assert!((s.used - used).abs() < 1e-9, "{usd} {tokens}: {}", s.used);
            assert_eq!(s.renews_at, Some(at("2026-11-27T00:00:00Z")));
        }
    }

    #[test]
    fn a_zero_cap_is_exhausted_from_the_start() {
        let budget = Budget {
            usd: None,
            tokens: Some(0),
            per: Per::Total,
        };
        let s = standing(&budget, &spent(0.0, 0), Window::of(Per::Total, Utc::now()));
        assert_eq!((s.level, s.used), (Level::Exhausted, 1.0));
    }

    #[test]
    fn budgets_without_a_cap_or_with_a_negative_one_are_refused_naming_the_field() {
        let bad = [
            (None, None, "budget"),
            (Some(-1.0), None, "usd"),
            (Some(f64::NAN), None, "usd"),
            (None, Some(-5), "tokens"),
        ];
        for (usd, tokens, field) in bad {
            let b = Budget {
                usd,
                tokens,
                per: Per::Day,
            };
            assert_eq!(b.check().unwrap_err().field, field);
        }
        let fine = Budget {
            usd: Some(0.0),
            tokens: None,
            per: Per::Week,
        };
        assert!(fine.check().is_ok());
    }
}
