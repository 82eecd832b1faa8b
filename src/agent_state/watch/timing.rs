//! The watch's clocks: when the screen last changed, input came, the agent was last active,
//! whether it is stuck, and the next moment its state could change with no new output.

use tokio::time::Instant;

use super::Watch;
use crate::agent_state::profile::Source;
use crate::agent_state::State;

impl Watch {
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
}
