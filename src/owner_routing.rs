//! Owner routing: which session a leader means when it names an agent, an owner session or a
//! label. A session matches when any given key equals its field; the result must be exactly
//! one session, so a message is never broadcast. [`resolve`] is the pure decision;
//! [`resolve_session`] applies it to live sessions.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{HubError, HubResult};
use crate::session::{Session, SessionInfo};

/// The keys a caller may route by (at least one).
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteKeys {
    pub agent_id: Option<String>,
    pub owner_session_id: Option<String>,
    pub label: Option<String>,
}

/// The outcome of routing.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// Exactly one live session matched.
    One(String),
    /// No live session matched.
    None,
    /// More than one matched: their ids, sorted.
    Ambiguous(Vec<String>),
}

impl RouteKeys {
    /// Whether no key is given.
    pub fn is_empty(&self) -> bool {
        self.agent_id.is_none() && self.owner_session_id.is_none() && self.label.is_none()
    }

    fn matches(&self, s: &SessionInfo) -> bool {
        let eq = |key: &Option<String>, field: &Option<String>| key.is_some() && key == field;
        eq(&self.agent_id, &s.owner.owner_agent_id)
            || eq(&self.owner_session_id, &s.owner.owner_session_id)
            || eq(&self.label, &s.owner.label)
    }
}

/// Resolves `keys` among the live `sessions` to exactly one, or the error that says why not.
pub fn resolve_session(sessions: &[Arc<Session>], keys: &RouteKeys) -> HubResult<Arc<Session>> {
    if keys.is_empty() {
        return Err(HubError::bad_request(
            "give at least one of agent_id, owner_session_id, label",
        ));
    }
    let describe = || serde_json::to_string(keys).unwrap_or_default();
    let infos: Vec<_> = sessions.iter().map(|s| s.info()).collect();
    match resolve(keys, &infos) {
        Resolution::One(id) => sessions
            .iter()
            .find(|s| s.id() == id)
            .cloned()
            .ok_or(HubError::SessionNotFound { id }),
        Resolution::None => Err(HubError::RouteNotMatched { keys: describe() }),
        Resolution::Ambiguous(matches) => Err(HubError::Ambiguous {
            keys: describe(),
            matches,
        }),
    }
}

/// Resolves `keys` among `sessions`. Sessions whose program has exited are not candidates:
/// nothing can be delivered to them.
pub fn resolve(keys: &RouteKeys, sessions: &[SessionInfo]) -> Resolution {
    let mut ids: Vec<String> = sessions
        .iter()
        .filter(|s| s.alive && keys.matches(s))
        .map(|s| s.spec.id.clone())
        .collect();
    ids.sort();
    match ids.len() {
        0 => Resolution::None,
        1 => Resolution::One(ids.remove(0)),
        _ => Resolution::Ambiguous(ids),
    }
}

/// Checks an owner role given by a client: `leader` or `worker`.
pub fn check_owner_role(role: Option<&str>) -> Result<(), crate::error::HubError> {
    match role {
        None | Some("leader") | Some("worker") => Ok(()),
        Some(_) => Err(crate::error::HubError::bad_request(
            "owner_role must be leader or worker",
        )),
    }
}

/// Whether `s` has the shape of an id the hub hands out (`pty_1a2b3c4d`: lowercase letters,
/// `_`, 8 hex digits). A label or agent id of that shape is possible but not one a person picks.
pub fn is_session_id_shaped(s: &str) -> bool {
    match s.split_once('_') {
        Some((kind, hex)) => {
            !kind.is_empty()
                && kind.bytes().all(|b| b.is_ascii_lowercase())
                && hex.len() == 8
                && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Owner, SessionSpec};

    fn session(
        id: &str,
        agent: Option<&str>,
        owner_session: Option<&str>,
        label: Option<&str>,
        alive: bool,
    ) -> SessionInfo {
        let now = chrono::Utc::now();
        SessionInfo {
            spec: SessionSpec {
                id: id.into(),
                backend: crate::protocol::SessionBackend::Pty,
                source: "host".into(),
                shell: "sh".into(),
                args: vec![],
                cwd: "/".into(),
                tmux_session: None,
                agent_id: None,
                policy: None,
                container_id: None,
                created_at: now,
            },
            owner: Owner {
                owner_agent_id: agent.map(String::from),
                owner_session_id: owner_session.map(String::from),
                owner_role: None,
                label: label.map(String::from),
                cli_type: None,
                conversation_id: None,
            },
            cols: 80,
            rows: 24,
            pid: None,
            alive,
            exit_code: None,
            exit_reason: None,
            last_activity_at: now,
            last_screen_change_at: None,
            last_output_at: None,
            last_input_at: None,
            last_heartbeat_at: None,
            external: None,
            capabilities: Default::default(),
            agent_state: None,
            output_offset: 0,
        }
    }

    fn keys(agent: Option<&str>, owner_session: Option<&str>, label: Option<&str>) -> RouteKeys {
        RouteKeys {
            agent_id: agent.map(String::from),
            owner_session_id: owner_session.map(String::from),
            label: label.map(String::from),
        }
    }

    #[test]
    fn resolution_table() {
        let sessions = vec![
            session("s1", Some("a1"), Some("o1"), Some("Worker A"), true),
            session("s2", Some("a2"), Some("o2"), Some("Worker B"), true),
            session("s3", Some("a3"), Some("o2"), Some("Worker B"), true),
            session("s4", Some("a4"), None, Some("Gone"), false),
        ];
        let one = |id: &str| Resolution::One(id.into());
        let amb = |ids: &[&str]| Resolution::Ambiguous(ids.iter().map(|s| s.to_string()).collect());
        let table = [
            (keys(Some("a1"), None, None), one("s1")),
            (keys(None, Some("o1"), None), one("s1")),
            (keys(None, None, Some("Worker A")), one("s1")),
            (keys(Some("a2"), None, None), one("s2")),
            (keys(Some("nobody"), None, None), Resolution::None),
            (keys(None, Some("nobody"), None), Resolution::None),
            (keys(None, None, Some("nobody")), Resolution::None),
            (keys(None, Some("o2"), None), amb(&["s2", "s3"])),
            (keys(None, None, Some("Worker B")), amb(&["s2", "s3"])),
            // Any key matching counts: two keys naming two sessions are ambiguous.
            (
                keys(Some("a1"), None, Some("Worker B")),
                amb(&["s1", "s2", "s3"]),
            ),
            (keys(Some("a1"), Some("o1"), Some("Worker A")), one("s1")),
            // Exited sessions are not candidates.
            (keys(Some("a4"), None, None), Resolution::None),
            (keys(None, None, Some("Gone")), Resolution::None),
        ];
        for (k, expected) in table {
            assert_eq!(resolve(&k, &sessions), expected, "{k:?}");
        }
        assert!(RouteKeys::default().is_empty());
    }

    #[test]
    fn session_id_shapes() {
        for (s, shaped) in [
            ("pty_1a2b3c4d", true),
            ("tmux_00000000", true),
            ("docker_deadbeef", true),
            ("pty_1a2b3c4", false),
            ("pty_1a2b3c4d5", false),
            ("pty_1A2B3C4D", false),
            ("_1a2b3c4d", false),
            ("Worker A", false),
            ("w1", false),
            ("my-label_1a2b3c4d", false),
        ] {
            assert_eq!(is_session_id_shaped(s), shaped, "{s}");
        }
    }
}
