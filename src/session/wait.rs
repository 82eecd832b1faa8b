//! Waiting until a session's agent state is one of a set (`wait_state`), event-driven: the
//! waiter wakes when output arrives, when input is written, or at the one moment the state
//! could change with neither ([`crate::agent_state::Watch::next_due`]); never on a fixed tick.

use std::time::Duration;

use tokio::time::Instant;

use super::Session;
use crate::agent_state::wait::Wanted;
use crate::agent_state::StateReport;

impl Session {
    /// Waits at most `timeout` until the state is one of `wanted`; returns the last report
    /// and whether it was reached. Returns early, unreached, when the program has exited and
    /// `exited` is not wanted (nothing can change any more).
    pub async fn wait_state(&self, wanted: &Wanted, timeout: Duration) -> (StateReport, bool) {
        let deadline = Instant::now() + timeout;
        let mut progress = self.output.watch_progress();
        let mut inputs = self.inputs.subscribe();
        loop {
            // Marked seen before looking: a change after the look wakes the select below.
            progress.borrow_and_update();
            inputs.borrow_and_update();
            let report = self.state_report();
            let now = Instant::now();
            if wanted.settled(&report) || now >= deadline {
                let reached = wanted.reached(&report);
                return (report, reached);
            }
            let due = self
                .lock_watch()
                .next_due(now)
                .map_or(deadline, |due| due.min(deadline));
            tokio::select! {
                changed = progress.changed() => if changed.is_err() {
                    let report = self.state_report();
                    let reached = wanted.reached(&report);
                    return (report, reached);
                },
                _ = inputs.changed() => {}
                _ = tokio::time::sleep_until(due) => {}
            }
        }
    }
}
