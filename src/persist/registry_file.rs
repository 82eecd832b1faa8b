//! The registry file (`registry.json` in the data dir): every session the hub knows, with its
//! owner identity, written atomically (temp file, fsync, rename). A file that is corrupt or
//! from a newer schema is set aside, never trusted and never fatal.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::PersistError;
use crate::session::{Owner, Session};

/// The schema this hub writes and reads.
pub const SCHEMA_VERSION: u32 = 1;
pub const FILE_NAME: &str = "registry.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegistryFile {
    pub schema_version: u32,
    pub hub_id: Option<String>,
    pub saved_at: DateTime<Utc>,
    pub sessions: Vec<SavedSession>,
}

/// One session as saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedSession {
    pub id: String,
    /// `pty`, `tmux`, `docker` or `external`, as the API names them.
    pub backend: crate::protocol::SessionBackend,
    pub source: String,
    pub shell: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub cwd: String,
    pub tmux_session: Option<String>,
    pub agent_id: Option<String>,
    /// The policy named at creation (see `policy`).
    #[serde(default)]
    pub policy: Option<String>,
    pub container_id: Option<String>,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub owner: Owner,
    pub cols: u16,
    pub rows: u16,
    pub pid: Option<u32>,
    /// None while the program runs.
    pub exit: Option<SavedExit>,
    pub external: Option<SavedLink>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedExit {
    pub exit_code: Option<i32>,
    pub reason: String,
    pub exited_at: DateTime<Utc>,
}

/// How to reach an external session again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedLink {
    pub bridge_url: String,
    pub remote_session_id: String,
    pub bridge_token: Option<String>,
}

impl SavedSession {
    pub fn of(session: &Session) -> Self {
        let info = session.info();
        let spec = info.spec;
        SavedSession {
            id: spec.id,
            backend: spec.backend,
            source: spec.source,
            shell: spec.shell,
            args: spec.args,
            cwd: spec.cwd,
            tmux_session: spec.tmux_session,
            agent_id: spec.agent_id,
            policy: spec.policy,
            container_id: spec.container_id,
            created_at: spec.created_at,
            owner: info.owner,
            cols: info.cols,
            rows: info.rows,
            pid: info.pid,
            exit: session.output().exit().map(|e| SavedExit {
                exit_code: e.exit_code,
                reason: e.reason,
                exited_at: e.exited_at,
            }),
            external: session.external().map(|link| SavedLink {
                bridge_url: link.client.url().to_string(),
                remote_session_id: link.remote_id.clone(),
                bridge_token: link.token.clone(),
            }),
        }
    }
}

/// What loading found.
#[derive(Debug)]
pub enum Loaded {
    /// No registry yet (a first start).
    Missing,
    Ok(RegistryFile),
    /// The file could not be used; it was moved to `set_aside` (if that worked) and `reason`
    /// says why.
    SetAside {
        reason: PersistError,
        set_aside: Option<PathBuf>,
    },
}

/// Why `text` is not a registry this hub can use, if it is not.
pub fn parse(text: &str) -> Result<RegistryFile, PersistError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(PersistError::NotJson)?;
    let version = value["schema_version"]
        .as_u64()
        .ok_or(PersistError::NoSchemaVersion)?;
    if version > u64::from(SCHEMA_VERSION) {
        return Err(PersistError::NewerSchema { version });
    }
    serde_json::from_value(value).map_err(PersistError::Content)
}

/// Loads `dir/registry.json`, setting aside a file that cannot be used.
pub fn load(dir: &Path) -> Loaded {
    let path = dir.join(FILE_NAME);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Loaded::Missing,
        Err(source) => {
            return Loaded::SetAside {
                reason: PersistError::Read { path, source },
                set_aside: None,
            }
        }
    };
    match parse(&text) {
        Ok(file) => Loaded::Ok(file),
        Err(reason) => {
            let stamp = Utc::now().format("%Y%m%dT%H%M%S");
            let aside = dir.join(format!("{FILE_NAME}.unusable-{stamp}"));
            let set_aside = std::fs::rename(&path, &aside).ok().map(|_| aside);
            Loaded::SetAside { reason, set_aside }
        }
    }
}

/// Writes `file` to `dir/registry.json` atomically; only the hub's user can read it (it may
/// hold bridge tokens).
pub fn save(dir: &Path, file: &RegistryFile) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
    write_atomic(&dir.join(FILE_NAME), &json)
}

/// Writes `bytes` to `path` through a temp file in the same directory, then renames it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    crate::platform::private_file(&mut options);
    let mut f = options.open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        if let Ok(d) = std::fs::File::open(parent) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(version: u32) -> String {
        format!(
            r#"{{"schema_version": {version}, "hub_id": "h", "saved_at": "2026-01-01T00:00:00Z", "sessions": []}}"#
        )
    }

    #[test]
    fn a_saved_backend_is_one_of_the_api_s_kinds() {
        let with = |backend: &str| {
            format!(
                r#"{{"schema_version": 1, "hub_id": "h", "saved_at": "2026-01-01T00:00:00Z", "sessions": [{{"id": "tmux_1", "backend": "{backend}", "source": "host", "shell": "bash", "created_at": "2026-01-01T00:00:00Z", "cols": 80, "rows": 24}}]}}"#
            )
        };
        let file = parse(&with("tmux")).unwrap();
        assert_eq!(
            file.sessions[0].backend,
            crate::protocol::SessionBackend::Tmux
        );
        // An unknown kind is a file this hub cannot read (set aside with the reason), not a
        // PTY by default.
        assert!(parse(&with("vnc")).is_err());
    }

    #[test]
    fn parse_accepts_this_schema_and_refuses_others_with_a_reason() {
        assert!(parse(&file(1)).is_ok());
        let cases = [
            ("{not json", "not valid JSON"),
            (r#"{"sessions": []}"#, "no schema_version"),
            (&file(2), "schema version 2 is newer"),
            (
                r#"{"schema_version": 1, "sessions": 5}"#,
                "unexpected content",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn load_sets_an_unusable_file_aside_and_save_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(load(dir.path()), Loaded::Missing));
        std::fs::write(dir.path().join(FILE_NAME), "{\"schema_version\": 1, \"sess").unwrap();
        match load(dir.path()) {
            Loaded::SetAside {
                reason,
                set_aside: Some(aside),
            } => {
                assert!(reason.to_string().contains("not valid JSON"), "{reason}");
                assert!(aside.exists());
                assert!(!dir.path().join(FILE_NAME).exists());
            }
            other => panic!("{other:?}"),
        }
        let saved = RegistryFile {
            schema_version: SCHEMA_VERSION,
            hub_id: Some("h".into()),
            saved_at: Utc::now(),
            sessions: Vec::new(),
        };
        save(dir.path(), &saved).unwrap();
        match load(dir.path()) {
            Loaded::Ok(f) => assert_eq!(f.hub_id.as_deref(), Some("h")),
            other => panic!("{other:?}"),
        }
        assert!(!dir.path().join("registry.tmp").exists());
    }
}
