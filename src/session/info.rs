//! Who a session is and what a client sees of it: the owner identity (the routing keys),
//! the fixed facts set at start, and the snapshot `GET /v1/pty/sessions/{id}` returns.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Session;

/// What kind of terminal a session is, as the wire spells it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SessionBackend {
    /// A host PTY the hub spawned.
    Pty,
    /// A tmux session on the host, driven through tmux control mode.
    Tmux,
    /// A container agent's tmux session.
    Docker,
    /// A terminal owned by another process, reached through its bridge API.
    External,
}

impl SessionBackend {
    /// The wire spelling (also the session id prefix for host sessions).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionBackend::Pty => "pty",
            SessionBackend::Tmux => "tmux",
            SessionBackend::Docker => "docker",
            SessionBackend::External => "external",
        }
    }
}

impl std::fmt::Display for SessionBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a session belongs to: the routing keys leaders use instead of session ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Owner {
    pub owner_agent_id: Option<String>,
    pub owner_session_id: Option<String>,
    pub owner_role: Option<String>,
    pub label: Option<String>,
    pub cli_type: Option<String>,
    /// The agent conversation this terminal belongs to (for example a Claude Code session id).
    #[serde(default)]
    pub conversation_id: Option<String>,
}

/// The fixed facts about a session, set when it starts.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionSpec {
    pub id: String,
    pub backend: SessionBackend,
    /// Where the terminal lives: `host` (host PTYs and tmux), `docker`, or for external
    /// sessions what their registration said (`remote-hub`, `ide`, ...).
    pub source: String,
    pub shell: String,
    pub args: Vec<String>,
    pub cwd: String,
    /// The tmux session name, for tmux-backed sessions.
    pub tmux_session: Option<String>,
    /// The container agent this terminal belongs to.
    pub agent_id: Option<String>,
    /// The policy that applies to this session (a name the `policy` module knows).
    pub policy: Option<String>,
    /// The container, for docker sessions.
    pub container_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Everything a client sees about a session (`GET /v1/pty/sessions/{id}`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionInfo {
    #[serde(flatten)]
    pub spec: SessionSpec,
    #[serde(flatten)]
    pub owner: Owner,
    pub cols: u16,
    pub rows: u16,
    pub pid: Option<u32>,
    pub alive: bool,
    pub exit_code: Option<i32>,
    pub exit_reason: Option<String>,
    /// Last *meaningful* activity: a change of the rendered screen's text (volatile parts such
    /// as a tmux status line, clocks and spinners masked) or input; never raw bytes alone.
    pub last_activity_at: DateTime<Utc>,
    /// Last meaningful change of the rendered screen.
    pub last_screen_change_at: Option<DateTime<Utc>>,
    /// Last output byte of any kind (a status-line redraw counts here, not above).
    pub last_output_at: Option<DateTime<Utc>>,
    pub last_input_at: Option<DateTime<Utc>>,
    /// When the session's owner last said it is alive (`POST /v1/pty/heartbeat`).
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    /// Absolute offset just past the newest output byte.
    pub output_offset: u64,
    /// For external sessions: the bridge and its health.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<crate::backend::external::ExternalInfo>,
    /// What the terminal supports besides input and output (`resize`, `kill`, `owned`).
    #[serde(default)]
    pub capabilities: crate::backend::Capabilities,
    /// The agent state, in the session list (what `GET .../state` says), so a fleet view needs
    /// one request, not one per session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_state: Option<crate::agent_state::StateView>,
}

impl Session {
    /// A snapshot of everything a client sees about the session.
    pub fn info(&self) -> SessionInfo {
        let m = self.lock();
        let exit = self.output.exit();
        let last_output_at = self.output.last_output_at();
        let (last_activity_at, last_screen_change_at) = {
            let w = self.lock_watch();
            (
                crate::activity::wall_clock(w.last_activity_at()),
                w.last_screen_change_at().map(crate::activity::wall_clock),
            )
        };
        SessionInfo {
            spec: self.spec.clone(),
            owner: m.owner.clone(),
            cols: m.size.cols,
            rows: m.size.rows,
            pid: self.backend.pid(),
            alive: exit.is_none(),
            exit_code: exit.as_ref().and_then(|e| e.exit_code),
            exit_reason: exit.map(|e| e.reason),
            last_activity_at,
            last_screen_change_at,
            last_output_at,
            last_input_at: m.last_input_at,
            last_heartbeat_at: m.last_heartbeat_at,
            output_offset: self.output.end_offset(),
            external: self.backend.external().map(|link| link.info()),
            capabilities: self.backend.capabilities(),
            agent_state: None,
        }
    }

    /// Notes that the session's owner is alive.
    pub fn heartbeat(&self) {
        self.lock().last_heartbeat_at = Some(Utc::now());
    }

    /// The owner identity.
    pub fn owner(&self) -> Owner {
        self.lock().owner.clone()
    }

    /// Changes the owner fields that are given, in place.
    pub fn update_owner(&self, update: Owner) {
        let mut m = self.lock();
        let o = &mut m.owner;
        for (field, value) in [
            (&mut o.owner_agent_id, update.owner_agent_id),
            (&mut o.owner_session_id, update.owner_session_id),
            (&mut o.owner_role, update.owner_role),
            (&mut o.label, update.label),
            (&mut o.cli_type, update.cli_type),
            (&mut o.conversation_id, update.conversation_id),
        ] {
            if value.is_some() {
                *field = value;
            }
        }
    }
}
