//! The pure classifier: a profile's rules over the bottom rows of a rendered screen or over the
//! window title, and the generic limit rule ([`super::limit`]), with screen stability as the
//! fallback. It sees one moment; `agent_state::Watch` adds time (hysteresis).

use std::time::Duration;

use super::profile::{Matcher, Order, Profile, Rule, Source};
use super::State;
use super::{limit, menu};

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
    /// How long each row's text has been on the screen unchanged, aligned with `rows`; empty
    /// when not known (then every working indicator counts as alive).
    pub row_still_for: &'a [Duration],
    /// The window title the program last set (empty when none).
    pub title: &'a str,
    /// How long the screen has not changed meaningfully.
    pub screen_still_for: Duration,
    /// How long the title has not changed.
    pub title_still_for: Duration,
}

/// What one rule reads in a look: its lines and the rows they are on (none for the title).
struct Reading<'p> {
    rule: &'p Rule,
    evidence: Vec<String>,
    rows: Vec<usize>,
}

impl Reading<'_> {
    /// The lowest row it matched; `None` for a title rule.
    fn lowest(&self) -> Option<usize> {
        self.rows.iter().copied().max()
    }
}

/// Classifies one look at a terminal: of the rules that apply and match, the one the
/// profile's order picks (position: lowest on the screen; priority: highest), with a working
/// indicator counting only while alive; else the stability fallback.
pub fn classify(profile: &Profile, look: &Look) -> Classification {
    // The bottom of the content: trailing empty rows are not part of it.
    let used = look
        .rows
        .iter()
        .rposition(|r| !r.trim().is_empty())
        .map_or(0, |i| i + 1);
    let content = &look.rows[..used];
    let mut readings: Vec<Reading> = profile
        .rules
        .iter()
        .filter(|rule| applies(rule, look))
        .filter_map(|rule| read(rule, content, look.title))
        .collect();
    if let Some(generic) = read_generic_limit(content, &readings) {
        readings.push(generic);
    }
    if let Some(r) = pick(profile, look, &readings) {
        return Classification {
            state: r.rule.state,
            rule: r.rule.name.clone(),
            evidence: r.evidence.clone(),
        };
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

/// Whether a rule's timing conditions hold (`stable_ms`, `changing_ms`).
fn applies(rule: &Rule, look: &Look) -> bool {
    let still_for = match rule.on {
        Source::Screen => look.screen_still_for,
        Source::Title => look.title_still_for,
    };
    still_for >= rule.stable && rule.changing.is_none_or(|c| still_for < c)
}

/// What `rule` matches in the content rows (or the title); `None` when nothing.
fn read<'p>(rule: &'p Rule, content: &[String], title: &str) -> Option<Reading<'p>> {
    let (evidence, rows) = match (&rule.matcher, rule.on) {
        (Matcher::Pattern(regex), Source::Screen) => rows_read(rule, content)
            .filter(|&i| regex.is_match(&content[i]))
            .map(|i| (content[i].trim_end().to_string(), i))
            .unzip(),
        (Matcher::Pattern(regex), Source::Title) => {
            let matched = regex.is_match(title).then(|| format!("title: {title}"));
            (matched.into_iter().collect(), Vec::new())
        }
        (Matcher::Choices, _) => {
            let (lowest, lines) = menu::find(content, rule.rows as usize)?;
            (lines, vec![lowest])
        }
    };
    (!evidence.is_empty()).then_some(Reading {
        rule,
        evidence,
        rows,
    })
}

/// The rows a screen rule reads: the bottom `rows`; with `above`, the last block of text
/// (rows up to a blank one) above the lowest row `above` matches, none when no row does.
fn rows_read(rule: &Rule, content: &[String]) -> std::ops::Range<usize> {
    let Some(above) = &rule.above else {
        return content.len().saturating_sub(rule.rows as usize)..content.len();
    };
    let blank = |i: &usize| content[*i].trim().is_empty();
    let Some(at) = content.iter().rposition(|r| above.is_match(r)) else {
        return 0..0;
    };
    let Some(last) = (0..at).rev().find(|i| !blank(i)) else {
        return 0..0;
    };
    let first = (0..last).rev().find(blank).map_or(0, |i| i + 1);
    first..last + 1
}

/// The generic limit rule's reading of the rows none of the profile's `readings` read.
fn read_generic_limit<'p>(content: &[String], readings: &[Reading<'p>]) -> Option<Reading<'p>> {
    let claimed = |row: &usize| readings.iter().any(|r| r.rows.contains(row));
    let found = read(limit::generic(), content, "")?;
    let (evidence, rows) = found
        .evidence
        .into_iter()
        .zip(found.rows)
        .filter(|(_, row)| !claimed(row))
        .unzip();
    let reading = Reading {
        rule: found.rule,
        evidence,
        rows,
    };
    (!reading.rows.is_empty()).then_some(reading)
}

/// The reading that wins (`readings` are in priority order, the generic limit rule last).
fn pick<'a, 'p>(
    profile: &Profile,
    look: &Look,
    readings: &'a [Reading<'p>],
) -> Option<&'a Reading<'p>> {
    let first = readings.first()?;
    // A limit on the screen outranks work and rest wherever they are drawn: a CLI retrying
    // under its spinner, the prompt under the error it stopped with. Only a question of a
    // higher priority outranks it (a limit shown as a dialog is the profile's own rule, above
    // its question rule).
    let limited = readings.iter().find(|r| r.rule.state == State::Limited);
    if let Some(limit) = limited {
        let asking = readings.iter().find(|r| r.rule.state == State::Blocked);
        if asking.is_none_or(|q| q.rule.priority <= limit.rule.priority) {
            return Some(limit);
        }
    }
    let chosen = match (profile.order, first.lowest()) {
        // The lowest screen reading; among equals the first (highest priority).
        (Order::Position, Some(_)) => {
            readings
                .iter()
                .filter(|r| r.lowest().is_some())
                .fold(
                    first,
                    |best, r| if r.lowest() > best.lowest() { r } else { best },
                )
        }
        _ => first,
    };
    let Some(at) = chosen.lowest() else {
        return Some(chosen);
    };
    let alive = |r: &Reading| {
        look.row_still_for.is_empty()
            || r.rows
                .iter()
                .any(|&i| look.row_still_for.get(i).is_none_or(|s| *s < profile.grace))
    };
    let below = |r: &&Reading| r.lowest().is_some_and(|l| l > at);
    let above = |r: &&Reading| r.lowest().is_some_and(|l| l < at);
    match chosen.rule.state {
        // A working indicator left standing above a prompt drawn since is not work.
        State::Working if !alive(chosen) => readings
            .iter()
            .filter(below)
            .find(|r| r.rule.state == State::Idle)
            .or(Some(chosen)),
        // A prompt under a working indicator that is alive (Codex, Claude Code draw both).
        State::Idle => readings
            .iter()
            .filter(above)
            .find(|r| r.rule.state == State::Working && alive(r))
            .or(Some(chosen)),
        _ => Some(chosen),
    }
}
