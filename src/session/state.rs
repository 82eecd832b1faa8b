//! The agent state of a session, kept current: the watch (meaningful activity and the state
//! the profile reads from the screen), who is told of changes, and the background follower
//! that looks at the screen when the output moves, input arrives, or the state can change.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Session;
use crate::agent_state::profile::Profile;
use crate::agent_state::{StateReport, Watch};

/// How often a delivery looks whether the MCP connection it waits for is up.
const MCP_POLL: Duration = Duration::from_millis(50);

/// The reported agent state changed (`session_state_changed` on the event bus).
#[derive(Debug, Clone)]
pub struct StateChange {
    pub state: crate::agent_state::State,
    pub previous: crate::agent_state::State,
    pub since: DateTime<Utc>,
    pub rule: String,
    /// When a limit ends, where known (`limited` only).
    pub until: Option<DateTime<Utc>>,
}

impl Session {
    pub(super) fn lock_watch(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.watch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Uses `profile` to read the screen from now on (after a reload or an owner change).
    pub fn set_profile(&self, profile: Arc<Profile>) {
        let mut w = self.lock_watch();
        if !Arc::ptr_eq(w.profile(), &profile) {
            w.set_profile(profile);
        }
    }

    /// The profile reading this session's screen.
    pub fn profile(&self) -> Arc<Profile> {
        self.lock_watch().profile().clone()
    }

    /// Sets who is told of state changes (once; later calls are ignored).
    pub fn set_on_state_change(&self, f: impl Fn(StateChange) + Send + Sync + 'static) {
        let _ = self.on_state_change.set(Box::new(f));
    }

    /// Runs `f` on the watch and reports a change of the state it made.
    pub(super) fn watch_changing(&self, f: impl FnOnce(&mut Watch)) {
        let change = {
            let mut w = self.lock_watch();
            let previous = w.state();
            f(&mut w);
            (w.state() != previous).then(|| {
                let r = w.report(tokio::time::Instant::now());
                StateChange {
                    state: r.state,
                    previous,
                    since: r.since,
                    rule: r.rule,
                    until: r.until,
                }
            })
        };
        if let (Some(change), Some(tell)) = (change, self.on_state_change.get()) {
            tell(change);
        }
    }

    /// Looks at the screen now: records meaningful change and updates the state.
    pub(super) fn observe_screen(&self) -> tokio::time::Instant {
        let now = tokio::time::Instant::now();
        let exited = self.output.exit().is_some();
        // The output's wall-clock time as an instant: when the screen last changed, at most.
        let output_at = self.output.last_output_at().map(|t| {
            let ago = (chrono::Utc::now() - t).to_std().unwrap_or_default();
            now.checked_sub(ago).unwrap_or(now)
        });
        self.with_screen(|s| {
            self.watch_changing(|w| w.observe_output(s.vt(), s.title(), exited, output_at, now))
        });
        now
    }

    /// Looks at the screen now and reports the state.
    pub fn state_report(&self) -> StateReport {
        let now = self.observe_screen();
        self.lock_watch().report(now)
    }

    /// An event from the agent's own hook: the state its profile gives `event` (or
    /// `event/detail`) is adopted at once, named `hook:KEY`; `None` when the profile gives it
    /// none. Wakes the screen follower and state waiters, as input does.
    pub fn note_hook(
        &self,
        event: &str,
        detail: Option<&str>,
    ) -> Option<(String, crate::agent_state::State)> {
        let (key, state) = self.profile().signals.hook(event, detail)?;
        let source = format!("hook:{key}");
        let now = tokio::time::Instant::now();
        self.watch_changing(|w| w.note_signal(state, source.clone(), now));
        self.inputs.send_modify(|n| *n += 1);
        Some((source, state))
    }

    /// The program will connect to the hub's MCP server, and is not ready until it has (for
    /// `within` at most; see [`crate::agent_state::Watch::expect_mcp`]).
    pub fn expect_mcp(&self, within: Duration) {
        let now = tokio::time::Instant::now();
        self.watch_changing(|w| w.expect_mcp(within, now));
        self.inputs.send_modify(|n| *n += 1);
    }

    /// The program's MCP server told the hub it is connected (`agent-hub mcp`, once its client
    /// listed the tools).
    pub fn note_mcp_ready(&self) {
        self.watch_changing(|w| w.note_mcp_ready());
        self.inputs.send_modify(|n| *n += 1);
    }

    /// Whether the program's MCP connection is awaited now.
    pub fn awaits_mcp(&self) -> bool {
        self.lock_watch().mcp_pending(tokio::time::Instant::now())
    }

    /// Waits while the program's MCP connection is awaited (as long as the watch awaits it);
    /// `false` when it was awaited and did not come.
    pub async fn mcp_ready(&self) -> bool {
        while self.awaits_mcp() {
            tokio::time::sleep(MCP_POLL).await;
        }
        !self.lock_watch().mcp_missing()
    }

    /// When the session's watch started (its program's start, as the hub saw it).
    pub fn started_at(&self) -> tokio::time::Instant {
        self.lock_watch().created()
    }

    /// The monotonic time input was last written by someone using the session.
    pub fn last_input_instant(&self) -> Option<tokio::time::Instant> {
        self.lock_watch().last_input_at()
    }

    /// The monotonic time of the last meaningful activity.
    pub fn last_activity_instant(&self) -> tokio::time::Instant {
        self.lock_watch().last_activity_at()
    }

    /// The activity fingerprint of the screen now (after catching up).
    pub fn screen_fingerprint(&self) -> u64 {
        let profile = self.profile();
        self.with_screen(|s| crate::activity::fingerprint(s.vt(), &profile.masks))
    }
}
