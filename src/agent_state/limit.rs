//! Usage and rate limits on the screen (pure): the generic rule every profile reads besides
//! its own, and when a limit ends.
//!
//! The generic rule reads an error's words about a limit (`429`, `rate limit`, `usage limit`,
//! `quota`, `overloaded`, with `error`, `exceeded`, `reached`, `retrying`, `try again`, ...)
//! on the bottom [`GENERIC_ROWS`] rows of what the program drew, and only on rows that none of
//! the profile's own rules reads: a CLI's prompt with such words typed into it, or its spinner
//! naming a task about them, is what the profile says it is. A profile's own `limited` rules
//! (the shapes its CLI draws: a retry's countdown under the spinner, the message it stops
//! with) come first. How a limit ranks against the other readings is in
//! [`super::classify`]; against the agent's own signals in `watch::signals`.

use std::sync::LazyLock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use regex::Regex;

use super::profile::{Matcher, Rule, Source};
use super::State;

/// The generic rule's name, as `explain` shows it (`screen:rule generic-limit`).
pub const GENERIC_RULE: &str = "generic-limit";
/// How many of the bottom rows the generic rule reads: what the program drew last.
pub const GENERIC_ROWS: u16 = 3;

/// What a limit is called, as a word of its own (`quota` but not `quotas.rs`' `_quota`).
const LIMIT_WORDS: &str = r"\b(429|rate[ -]?limit(ed|s)?|usage limit|quotas?|overloaded)\b";
/// What an error about it says.
const ERROR_WORDS: &str = r"\b(error|errors|exceeded|reached|rejected|exhausted|too many requests|try again|retrying|hit your)\b";

static GENERIC: LazyLock<Rule> = LazyLock::new(|| Rule {
    name: GENERIC_RULE.into(),
    state: State::Limited,
    matcher: Matcher::Pattern(
        Regex::new(&format!(
            "(?i)({LIMIT_WORDS}.*{ERROR_WORDS}|{ERROR_WORDS}.*{LIMIT_WORDS})"
        ))
        .expect("the generic limit pattern compiles"),
    ),
    on: Source::Screen,
    priority: 25,
    rows: GENERIC_ROWS,
    above: None,
    stable: Duration::ZERO,
    changing: None,
});

/// The generic rule.
pub fn generic() -> &'static Rule {
    &GENERIC
}

/// When the limit the `evidence` lines show ends, first seen at `first_seen` and read at
/// `now` (their reset time or a retry's countdown, by [`super::reset_time`]); `None` when they
/// name no time.
pub fn until(
    evidence: &[String],
    first_seen: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    super::reset_time::reset_time(&evidence.join("\n"), first_seen, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(line: &str) -> bool {
        match &generic().matcher {
            Matcher::Pattern(r) => r.is_match(line),
            Matcher::Choices => false,
        }
    }

    #[test]
    fn the_generic_rule_reads_errors_about_limits() {
        for line in [
            "API Error: Request rejected (429) · Number of request tokens has exceeded",
            "API Error: 529 Overloaded. This is a server-side issue, usually temporary",
            "■ exceeded retry limit, last status: 429 Too Many Requests, request id: r",
            "Quota exceeded. Check your plan and billing details.",
            "The API provider has rate limited you. Try again later or check your quotas.",
            "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached",
            "Usage limit reached for gemini-2.5-flash.",
            "Error: 429 Too Many Requests",
            "You've hit your usage limit. Try again at 4:02 AM.",
        ] {
            assert!(matches(line), "{line}");
        }
    }

    #[test]
    fn the_generic_rule_leaves_other_words_alone() {
        for line in [
            "src/quota.rs  src/rate_limit.rs  src/error_quota.rs",
            "quota_error.log",
            "I wrote the rate limit section of the docs.",
            "429 files changed",
            "Overloaded operators are explained in chapter 3.",
            "error: expected `;`",
        ] {
            assert!(!matches(line), "{line}");
        }
    }

    #[test]
    fn until_reads_the_evidence() {
        let now: DateTime<Utc> = "2026-11-27T02:00:00Z".parse().unwrap();
        let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            until(
                &lines(&["✻ 429 slow down · retrying in 18s · attempt 1/10"]),
                now,
                now
            ),
            Some(now + chrono::Duration::seconds(18))
        );
        assert_eq!(
            until(
                &lines(&[
                    "│ Usage limit reached for m.",
                    "│ Access resets at 4:01 AM UTC."
                ]),
                now,
                now
            ),
            Some("2026-11-27T04:01:00Z".parse().unwrap())
        );
        assert_eq!(
            until(&lines(&["API Error: Request rejected (429)"]), now, now),
            None
        );
    }
}
