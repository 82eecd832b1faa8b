//! The pure classifier: a profile's rules over the bottom rows of a rendered screen, with screen
//! stability as the fallback. It sees one moment; `agent_state::Watch` adds time (hysteresis).

use std::time::Duration;

use super::profile::Profile;
use super::State;

/// What the screen says, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub state: State,
    /// The rule's name, or `fallback:stable` / `fallback:changing`.
    pub rule: String,
    /// The screen lines the rule matched (empty for a fallback).
    pub evidence: Vec<String>,
}

/// Classifies `rows` (the screen's rows, top to bottom). `stable_for` is how long the screen
/// has not changed meaningfully.
pub fn classify(profile: &Profile, rows: &[String], stable_for: Duration) -> Classification {
    // The bottom of the content: trailing empty rows are not part of it.
    let used = rows
        .iter()
        .rposition(|r| !r.trim().is_empty())
        .map_or(0, |i| i + 1);
    let content = &rows[..used];
    for rule in profile.rules.iter().filter(|r| stable_for >= r.stable) {
        let from = content.len().saturating_sub(rule.rows as usize);
        let evidence: Vec<String> = content[from..]
            .iter()
            .filter(|line| rule.regex.is_match(line))
            .map(|line| line.trim_end().to_string())
            .collect();
        if !evidence.is_empty() {
            return Classification {
                state: rule.state,
                rule: rule.name.clone(),
                evidence,
            };
        }
    }
    if stable_for >= profile.stable_after {
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
