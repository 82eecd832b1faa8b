//! What an agent is doing: `working`, `idle` (at its prompt), `blocked` (asking a question),
//! `limited` (held by a usage or rate limit of its model), `exited` or `unknown`, decided from the rendered screen and the window title by data-driven
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
pub mod limit;
mod menu;
pub mod profile;
pub mod question;
pub mod reset_time;
pub mod status_file;
mod view;
pub mod wait;
mod watch;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use view::StateView;
pub use watch::Watch;

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
    /// Held by a usage or rate limit of its model (a 429 it retries, a limit it stopped at):
    /// waiting, not progress and not rest.
    Limited,
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
            State::Limited => "limited",
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
    /// `limited`: when the limit ends, as the screen states it (a reset time, a retry's
    /// countdown); `None` when it states none.
    pub until: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests;
