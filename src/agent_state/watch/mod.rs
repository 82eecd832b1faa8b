//! [`Watch`]: a session's state and activity over time. Looking at the screen and settling
//! on a state is here; the agent's own signals and the screen's cross-check of them are in
//! [`signals`], the wait for its MCP connection in [`mcp`], and the activity times and when
//! the state could next change with no new output in [`timing`].

mod mcp;
mod signals;
mod timing;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::classify::{classify, Classification, Look};
use super::profile::Profile;
use super::{limit, State, StateReport};
use crate::activity::{self, ActivityClock};

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
pub(super) struct Signal {
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

    pub(super) fn set(&mut self, c: Classification, now: Instant) {
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

    /// When the limit the screen shows ends (read from the lines of the current reading: a
    /// clock time as of when the limit was first read, a countdown as of the last look at
    /// them); `None` unless `limited`.
    fn until(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        if self.current.state != State::Limited {
            return None;
        }
        let first_seen = activity::wall_clock(self.since);
        let looked = activity::wall_clock(self.last_observed.unwrap_or(self.since));
        limit::until(&self.current.evidence, first_seen, looked)
    }

    /// Where the current reading comes from, for `explain`; a limit's says when it ends.
    fn source(&self) -> String {
        let source = self.reading_source();
        if self.current.state != State::Limited {
            return source;
        }
        match self.until() {
            Some(until) => format!("{source}; until {}", until.to_rfc3339()),
            None => format!("{source}; no reset time on the screen"),
        }
    }

    fn reading_source(&self) -> String {
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
            until: self.until(),
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
