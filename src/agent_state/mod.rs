//! What an agent is doing: `working`, `idle` (at its prompt), `blocked` (asking a question),
//! `exited` or `unknown`, decided from the rendered screen and the window title by data-driven
//! profiles
//! ([`profile`], [`classify`]) and held steady over time by a [`Watch`] per session:
//! - input we sent holds `working` until the screen changes (or `input_hold` passes);
//! - a new state must be seen for the profile's `dwell` before it is reported (no flapping
//!   during redraws);
//! - `stuck` is `working` with no meaningful change for the profile's `stuck_after`.
//!
//! Time, not the moment someone looks, decides: a screen change is dated when the output that
//! made it arrived, and a state counts as seen from when the screen has shown it (the last
//! change, or the last change plus `stable_after` for the stability fallback). So a screen
//! that stopped changing is `stable` after the profile's delay at the first look after it,
//! however rarely anyone looks.
//!
//! The watch also owns the session's meaningful-activity clock ([`crate::activity`]).

pub mod classify;
mod menu;
pub mod profile;
pub mod question;
pub mod status_file;
mod view;
pub mod wait;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::activity::{self, ActivityClock};
use classify::{classify, Classification, Look};
use profile::{Profile, Source};
pub use view::StateView;

/// A profile that cannot be loaded, or a list of states to wait for that names none or an
/// unknown one.
#[derive(Debug, thiserror::Error)]
pub enum AgentStateError {
    /// A profile file cannot be read, or has a problem at a place in it.
    #[error(transparent)]
    ProfileFile(#[from] crate::toml_file::TomlFileError),
    #[error("{origin}: bottom_rows must be at least 1")]
    BottomRows { origin: String },
    #[error("unknown state '{name}' in wait (one or more of {})", wait::WAITABLE.join(", "))]
    UnknownWaitState { name: String },
    #[error("wait needs at least one state ({})", wait::WAITABLE.join(", "))]
    NoWaitState,
}

/// An agent's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Working,
    Idle,
    Blocked,
    Exited,
    Unknown,
}

impl State {
    /// The name used in files and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Working => "working",
            State::Idle => "idle",
            State::Blocked => "blocked",
            State::Exited => "exited",
            State::Unknown => "unknown",
        }
    }
}

/// What `GET .../state` reports.
#[derive(Debug, Clone, Serialize)]
pub struct StateReport {
    pub state: State,
    pub since: DateTime<Utc>,
    /// `working` with no meaningful change for the profile's `stuck_after`.
    pub stuck: bool,
    pub rule: String,
    /// Where the reading comes from: `hook:EVENT[/DETAIL]`, `screen:rule NAME`,
    /// `fallback:stable`, `input:sent`, ...; a screen reading that overruled a signal says so.
    pub source: String,
    /// The screen lines the rule matched (`title: TITLE` for a title rule).
    pub evidence: Vec<String>,
    pub profile: String,
    /// The CLI versions the profile was checked against.
    pub profile_checked_with: Vec<String>,
    /// Last meaningful screen change or input.
    pub last_activity_at: DateTime<Utc>,
    /// Milliseconds since then.
    pub idle_for_ms: u64,
}

/// A session's state and activity, over time.
#[derive(Debug)]
pub struct Watch {
    profile: Arc<Profile>,
    clock: ActivityClock,
    created: Instant,
    current: Classification,
    since: Instant,
    candidate: Option<(State, Instant)>,
    /// Input that submits (Enter) not yet answered by a screen change.
    pending_input: Option<Instant>,
    last_input_at: Option<Instant>,
    /// When the screen was last looked at (a change seen later happened after it).
    last_observed: Option<Instant>,
    /// The window title last seen, and when it changed.
    title: String,
    title_changed_at: Instant,
    /// Each row text on the screen (by its hash), and since when it has been there (a working
    /// indicator counts only while its row changes).
    rows_since: std::collections::HashMap<u64, Instant>,
    /// The state the agent last reported itself (a hook), until the screen overrules it.
    signal: Option<Signal>,
    /// Since when the screen has read otherwise than the signal.
    disagree_from: Option<Instant>,
    /// The signal the screen last overruled, and how it read (for `explain`).
    overruled: Option<String>,
    /// Until when at most the agent's MCP connection to the hub is awaited: its program is
    /// not ready before (see [`Watch::expect_mcp`]).
    mcp_wait: Option<Instant>,
}

/// A state the agent reported itself, named by its source (`hook:Stop`), and when.
#[derive(Debug, Clone)]
struct Signal {
    state: State,
    source: String,
    at: Instant,
    /// What the agent says it is now (a status file), not an event (a hook): overruled by
    /// the screen, it is kept, and counts again once the screen agrees with it.
    level: bool,
    /// Set aside by input: the screen leads until it agrees with the signal again.
    set_aside: bool,
}

impl Watch {
    /// A watch that has seen nothing yet.
    pub fn new(profile: Arc<Profile>, now: Instant) -> Self {
        Watch {
            profile,
            clock: ActivityClock::default(),
            created: now,
            current: Classification {
                state: State::Unknown,
                rule: "start".into(),
                evidence: Vec::new(),
            },
            since: now,
            candidate: None,
            pending_input: None,
            last_input_at: None,
            last_observed: None,
            title: String::new(),
            title_changed_at: now,
            rows_since: std::collections::HashMap::new(),
            signal: None,
            disagree_from: None,
            overruled: None,
            mcp_wait: None,
        }
    }

    /// When the watch started.
    pub fn created(&self) -> Instant {
        self.created
    }

    /// The profile in use.
    pub fn profile(&self) -> &Arc<Profile> {
        &self.profile
    }

    /// Swaps the profile (after a reload), keeping the history.
    pub fn set_profile(&mut self, profile: Arc<Profile>) {
        self.profile = profile;
    }

    /// Input was written; `submits` when it carried Enter.
    pub fn note_input(&mut self, submits: bool, now: Instant) {
        self.last_input_at = Some(now);
        if submits {
            self.signal_after_input();
            self.pending_input = Some(now);
            if self.current.state != State::Exited {
                self.set(
                    Classification {
                        state: State::Working,
                        rule: "input:sent".into(),
                        evidence: Vec::new(),
                    },
                    now,
                );
            }
        }
    }

    /// Input that submits ends an `idle` hook signal: the agent was given work (a CLI that
    /// signals only a turn's end, as Codex's `notify` does, says nothing when the next one
    /// starts). A status is set aside until the screen agrees with it again: a CLI may not
    /// rewrite its file for a short turn (Claude Code 2.1.330 sometimes leaves `idle` as it
    /// is), so the status it had is what it says once the turn is over.
    fn signal_after_input(&mut self) {
        let Some(signal) = self.signal.as_mut() else {
            return;
        };
        if signal.level {
            signal.set_aside = true;
        } else if signal.state == State::Idle {
            self.signal = None;
        }
        self.disagree_from = None;
    }

    /// The agent reported its state itself (`source`: `hook:EVENT[/DETAIL]`): adopted at once,
    /// ahead of the screen, which stays the cross-check (see [`Watch::observe_output`]).
    pub fn note_signal(&mut self, state: State, source: String, now: Instant) {
        self.adopt_signal(state, source, false, now);
    }

    /// The agent's status file says `state` now (`source`: `status-file:STATUS`): adopted as a
    /// signal is, and, being what the agent says it is rather than an event, kept when the
    /// screen overrules it: it counts again once the screen agrees (a CLI that says `idle`
    /// while its start-up screen still changes is `idle` by its file once that screen settles).
    pub fn note_status(&mut self, state: State, source: String, now: Instant) {
        self.adopt_signal(state, source, true, now);
    }

    fn adopt_signal(&mut self, state: State, source: String, level: bool, now: Instant) {
        if self.current.state == State::Exited {
            return;
        }
        self.pending_input = None;
        self.overruled = None;
        self.disagree_from = None;
        self.signal = Some(Signal {
            state,
            source: source.clone(),
            at: now,
            level,
            set_aside: false,
        });
        // The screen's lines stay while it reads the same (a question's choices).
        let evidence = match self.current.state == state {
            true => std::mem::take(&mut self.current.evidence),
            false => Vec::new(),
        };
        self.set(
            Classification {
                state,
                rule: source,
                evidence,
            },
            now,
        );
    }

    /// The program will connect to the hub's MCP server (`agent-hub mcp`) and is not ready
    /// until it has (for `within` at most): its prompt reads `working` (`mcp:connecting`)
    /// meanwhile. A CLI may draw its prompt and take a prompt before its MCP servers are
    /// connected, and then answers it without their tools (Claude Code 2.1.330).
    pub fn expect_mcp(&mut self, within: Duration, now: Instant) {
        self.mcp_wait = Some(now + within);
    }

    /// The program's MCP connection to the hub is up (its server listed its tools).
    pub fn note_mcp_ready(&mut self) {
        self.mcp_wait = None;
    }

    /// Whether the program's MCP connection was awaited and has not come (awaited still, or
    /// given up on).
    pub fn mcp_missing(&self) -> bool {
        self.mcp_wait.is_some()
    }

    /// Whether the program's MCP connection is still awaited now.
    pub fn mcp_pending(&self, now: Instant) -> bool {
        self.mcp_wait.is_some_and(|until| now < until)
    }

    /// `idle` is `working` while the MCP connection is awaited.
    fn hold_for_mcp(&self, reading: Classification, now: Instant) -> Classification {
        if reading.state != State::Idle || !self.mcp_pending(now) {
            return reading;
        }
        Classification {
            state: State::Working,
            rule: "mcp:connecting".into(),
            evidence: vec!["waiting for the agent's MCP connection to the hub".into()],
        }
    }

    /// The hub is about to make the program repaint (resize).
    pub fn note_own_repaint(&mut self, now: Instant) {
        self.clock.note_own_repaint(now);
    }

    /// When the screen last changed meaningfully.
    pub fn last_screen_change_at(&self) -> Option<Instant> {
        self.clock.last_change_at()
    }

    /// When input was last written.
    pub fn last_input_at(&self) -> Option<Instant> {
        self.last_input_at
    }

    /// Last meaningful activity: a screen change or input (or the start).
    pub fn last_activity_at(&self) -> Instant {
        [
            Some(self.created),
            self.clock.last_change_at(),
            self.last_input_at,
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(self.created)
    }

    /// The current activity fingerprint.
    pub fn fingerprint(&self) -> Option<u64> {
        self.clock.fingerprint()
    }

    /// Looks at the screen (of a terminal with no title) now: records meaningful change and
    /// updates the state.
    pub fn observe(&mut self, screen: &vt100::Screen, exited: bool, now: Instant) {
        self.observe_output(screen, "", exited, None, now);
    }

    /// [`Watch::observe`] of a screen and its window `title`, knowing when the program last
    /// wrote (`output_at`): a change seen now happened then (but after the previous look), not
    /// now.
    pub fn observe_output(
        &mut self,
        screen: &vt100::Screen,
        title: &str,
        exited: bool,
        output_at: Option<Instant>,
        now: Instant,
    ) {
        let size = screen.size();
        let rows = activity::content_rows(screen, &self.profile.masks);
        let fp = activity::fingerprint_rows(screen.alternate_screen(), &rows, &self.profile.masks);
        let previous_look = self.last_observed.replace(now);
        let happened = match (output_at, previous_look) {
            (Some(out), Some(look)) => out.max(look),
            (Some(out), None) => out,
            (None, _) => now,
        };
        self.clock
            .observe_at(fp, (size.0.get(), size.1.get()), now, happened);
        if title != self.title {
            self.title = title.to_string();
            self.title_changed_at = happened;
        }
        if exited {
            if self.current.state != State::Exited {
                self.set(
                    Classification {
                        state: State::Exited,
                        rule: "process:exited".into(),
                        evidence: Vec::new(),
                    },
                    now,
                );
            }
            return;
        }
        let changed_at = self.clock.last_change_at().unwrap_or(self.created);
        if let Some(sent) = self.pending_input {
            if changed_at > sent || now.duration_since(sent) >= self.profile.input_hold {
                self.pending_input = None;
            } else {
                return;
            }
        }
        let row_still_for = self.note_rows(&rows, happened, now);
        let seen = classify(
            &self.profile,
            &Look {
                rows: &rows,
                row_still_for: &row_still_for,
                title: &self.title,
                screen_still_for: now.duration_since(changed_at),
                title_still_for: now.duration_since(self.title_changed_at),
            },
        );
        // The screen has read this way since it last changed (or, for the stability fallback,
        // since it had been still for `stable_after`), and not before the last input, nor
        // before the title last changed when the profile reads it.
        let mut seen_since = changed_at;
        if seen.rule == "fallback:stable" {
            seen_since += self.profile.stable_after;
        }
        if self.profile.reads_title() {
            seen_since = seen_since.max(self.title_changed_at);
        }
        if let Some(input) = self.last_input_at {
            seen_since = seen_since.max(input);
        }
        let (reading, since) = self.cross_check(seen, seen_since.min(now), now);
        let reading = self.hold_for_mcp(reading, now);
        self.settle(reading, since, now);
    }

    /// The agent's own signal while the screen agrees with it, or has read otherwise for less
    /// than the profile's signal grace (with the screen's lines, which carry a question's
    /// choices); after that the screen's reading, and the signal is dropped as overruled (a
    /// CLI upgrade that breaks a hook degrades to the screen, never freezes a state).
    fn cross_check(
        &mut self,
        seen: Classification,
        seen_since: Instant,
        now: Instant,
    ) -> (Classification, Instant) {
        let Some(signal) = self.signal.as_mut() else {
            return (seen, seen_since);
        };
        if signal.set_aside {
            if seen.state != signal.state {
                return (seen, seen_since);
            }
            signal.set_aside = false;
            signal.at = seen_since;
        }
        let signal = &*signal;
        let from_signal = |evidence| Classification {
            state: signal.state,
            rule: signal.source.clone(),
            evidence,
        };
        if seen.state == signal.state {
            self.disagree_from = None;
            return (from_signal(seen.evidence), signal.at);
        }
        // A question on the screen outranks any other signal at once: the CLI asks after
        // saying it works, and may say that it asks only much later (Claude Code 2.1.330 sends
        // its permission notification about 6 s after drawing the question), or not at all
        // (its status file stays `idle` under a start-up dialog).
        let asking = seen.state == State::Blocked;
        let from = *self.disagree_from.get_or_insert(signal.at.max(seen_since));
        let grace = self.profile.signals.grace;
        if now.duration_since(from) < grace && !asking {
            return (from_signal(Vec::new()), signal.at);
        }
        self.overruled = Some(if asking {
            format!("over {}: a question on the screen", signal.source)
        } else {
            format!(
                "over {}: the screen read {} for {} ms",
                signal.source,
                seen.state.as_str(),
                grace.as_millis()
            )
        });
        if !signal.level {
            self.signal = None;
            self.disagree_from = None;
        }
        (seen, seen_since)
    }

    /// Records since when each row's text has been on the screen; returns how long each has
    /// been there unchanged.
    /// Runs at every look, so rows are kept by hash, not copied.
    fn note_rows(&mut self, rows: &[String], happened: Instant, now: Instant) -> Vec<Duration> {
        let keys: Vec<Option<u64>> = rows
            .iter()
            .map(|r| (!r.trim().is_empty()).then(|| row_hash(r)))
            .collect();
        let mut since = std::collections::HashMap::with_capacity(rows.len());
        for key in keys.iter().flatten() {
            let at = self.rows_since.get(key).copied().unwrap_or(happened);
            since.insert(*key, at);
        }
        self.rows_since = since;
        keys.iter()
            .map(|key| match key.and_then(|k| self.rows_since.get(&k)) {
                Some(at) => now.saturating_duration_since(*at),
                None => Duration::MAX,
            })
            .collect()
    }

    /// Adopts `seen` once it has held for the profile's dwell (at once from `unknown`);
    /// `seen_since` is when the screen started to read this way.
    fn settle(&mut self, seen: Classification, seen_since: Instant, now: Instant) {
        if seen.state == self.current.state {
            self.current.rule = seen.rule;
            self.current.evidence = seen.evidence;
            self.candidate = None;
            return;
        }
        let held = match self.candidate {
            Some((state, from)) if state == seen.state => now.duration_since(from),
            _ => {
                self.candidate = Some((seen.state, seen_since));
                now.duration_since(seen_since)
            }
        };
        if self.current.state == State::Unknown || held >= self.profile.dwell {
            self.set(seen, now);
        }
    }

    fn set(&mut self, c: Classification, now: Instant) {
        if c.state != self.current.state {
            self.since = now;
        }
        self.current = c;
        self.candidate = None;
    }

    /// The state as reported.
    pub fn state(&self) -> State {
        self.current.state
    }

    /// Whether the agent is `working` with no meaningful change for `stuck_after`.
    pub fn stuck(&self, now: Instant) -> bool {
        self.current.state == State::Working
            && now.duration_since(self.last_activity_at()) >= self.profile.stuck_after
    }

    /// The next moment the state (or `stuck`) could change with no new output or input: a
    /// candidate's dwell ends, the `working` hold after input ends, the screen has been still
    /// for `stable_after`, a rule starts or stops applying (its `stable_ms` or `changing_ms`
    /// passes), or `working` turns stuck. `None` when only new output or input can change it.
    /// A waiter sleeps until then instead of polling.
    pub fn next_due(&self, now: Instant) -> Option<Instant> {
        let p = &self.profile;
        let changed_at = self.clock.last_change_at().unwrap_or(self.created);
        let working = self.current.state == State::Working;
        let live = self.current.state != State::Exited;
        let rule_edges = p.rules.iter().filter(|_| live).flat_map(|r| {
            let since = match r.on {
                Source::Screen => changed_at,
                Source::Title => self.title_changed_at,
            };
            [Some(since + r.stable), r.changing.map(|c| since + c)]
        });
        [
            self.candidate.map(|(_, from)| from + p.dwell),
            self.pending_input.map(|sent| sent + p.input_hold),
            live.then_some(changed_at + p.stable_after),
            working.then(|| self.last_activity_at() + p.stuck_after),
            self.disagree_from.map(|from| from + p.signals.grace),
            self.mcp_wait,
        ]
        .into_iter()
        .chain(rule_edges)
        .chain(
            self.rows_since
                .values()
                .filter(|_| live)
                .map(|at| Some(*at + p.grace)),
        )
        .flatten()
        .filter(|due| *due > now)
        .min()
    }

    /// Where the current reading comes from, for `explain`.
    fn source(&self) -> String {
        let rule = &self.current.rule;
        let own = [
            "hook:",
            "status-file:",
            "mcp:",
            "fallback:",
            "input:",
            "process:",
        ]
        .iter()
        .any(|p| rule.starts_with(p))
            || rule == "start";
        if own {
            return rule.clone();
        }
        match &self.overruled {
            Some(over) => format!("screen:rule {rule} ({over})"),
            None => format!("screen:rule {rule}"),
        }
    }

    /// The report for the API.
    pub fn report(&self, now: Instant) -> StateReport {
        let last = self.last_activity_at();
        StateReport {
            state: self.current.state,
            since: activity::wall_clock(self.since),
            stuck: self.stuck(now),
            rule: self.current.rule.clone(),
            source: self.source(),
            evidence: self.current.evidence.clone(),
            profile: self.profile.name.clone(),
            profile_checked_with: self.profile.checked_with.clone(),
            last_activity_at: activity::wall_clock(last),
            idle_for_ms: now.duration_since(last).as_millis() as u64,
        }
    }
}

/// A row's text as a key.
fn row_hash(row: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    row.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests;
