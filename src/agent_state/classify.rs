//! The pure classifier: a profile's rules over the bottom rows of a rendered screen or over the
//! window title, with screen stability as the fallback. It sees one moment;
//! `agent_state::Watch` adds time (hysteresis).

use std::time::Duration;

use super::profile::{Profile, Source};
use super::State;

/// What the screen says, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub state: State,
    /// The rule's name, or `fallback:stable` / `fallback:changing`.
    pub rule: String,
    /// The screen lines the rule matched, or `title: TITLE` for a title rule (empty for a
    /// fallback).
    pub evidence: Vec<String>,
}

/// One moment of a terminal, as the classifier reads it.
#[derive(Debug, Clone, Copy)]
pub struct Look<'a> {
    /// The screen's rows, top to bottom.
    pub rows: &'a [String],
    /// The window title the program last set (empty when none).
    pub title: &'a str,
    /// How long the screen has not changed meaningfully.
    pub screen_still_for: Duration,
    /// How long the title has not changed.
    pub title_still_for: Duration,
}

/// Classifies one look at a terminal: the first rule (by priority) that applies and matches,
/// else the stability fallback.
pub fn classify(profile: &Profile, look: &Look) -> Classification {
    // The bottom of the content: trailing empty rows are not part of it.
    let used = look
        .rows
        .iter()
        .rposition(|r| !r.trim().is_empty())
        .map_or(0, |i| i + 1);
    let content = &look.rows[..used];
    for rule in &profile.rules {
        let still_for = match rule.on {
            Source::Screen => look.screen_still_for,
            Source::Title => look.title_still_for,
        };
        if still_for < rule.stable || rule.changing.is_some_and(|c| still_for >= c) {
            continue;
        }
        let evidence: Vec<String> = match rule.on {
            Source::Screen => content[content.len().saturating_sub(rule.rows as usize)..]
                .iter()
                .filter(|line| rule.regex.is_match(line))
                .map(|line| line.trim_end().to_string())
                .collect(),
            Source::Title => rule
                .regex
                .is_match(look.title)
                .then(|| format!("title: {}", look.title))
                .into_iter()
                .collect(),
        };
        if !evidence.is_empty() {
            return Classification {
                state: rule.state,
                rule: rule.name.clone(),
                evidence,
            };
        }
    }
    if look.screen_still_for >= profile.stable_after {
        Classification {
            state: profile.stable_state,
            rule: "fallback:stable".into(),
            evidence: Vec::new(),
        }
    } else {
        Classification {
            state: State::Working,
            rule: "fallback:changing".into(),
            evidence: Vec::new(),
        }
    }
}
