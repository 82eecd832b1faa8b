//! The agent's own word on its state (hooks, notify, a status file), adopted ahead of the
//! screen, and the screen's cross-check that overrules a signal it keeps contradicting.

use tokio::time::Instant;

use super::{Signal, Watch};
use crate::agent_state::classify::Classification;
use crate::agent_state::State;

impl Watch {
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

    /// The agent's own signal while the screen agrees with it, or has read otherwise for less
    /// than the profile's signal grace (with the screen's lines, which carry a question's
    /// choices); after that the screen's reading, and the signal is dropped as overruled (a
    /// CLI upgrade that breaks a hook degrades to the screen, never freezes a state).
    pub(super) fn cross_check(
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
        // A limit on the screen outranks any signal but a question at once too: no CLI says
        // it is limited, and one retrying a 429 says it is busy (Claude Code's status file
        // stays `busy` through all its retries), one that stopped at it that its turn ended.
        let limited = seen.state == State::Limited && signal.state != State::Blocked;
        let from = *self.disagree_from.get_or_insert(signal.at.max(seen_since));
        let grace = self.profile.signals.grace;
        if now.duration_since(from) < grace && !asking && !limited {
            return (from_signal(Vec::new()), signal.at);
        }
        self.overruled = Some(if asking {
            format!("over {}: a question on the screen", signal.source)
        } else if limited {
            format!("over {}: a limit on the screen", signal.source)
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
}
