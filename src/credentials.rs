//! Per-agent credentials. The hub mints one for a container agent at each start and revokes it
//! when the agent stops (a restart mints a new one). Only a SHA-256 of each is kept, in
//! `<data_dir>/agent-credentials.json` (mode 0600), so a running agent's credential still works
//! after the hub restarts and the file gives nothing away. The token itself reaches the agent
//! through a file of its own (see [`crate::agents::hub_access`]); it has a fixed shape
//! (`ahk_` and 64 hex digits) that the redactor recognises on every output path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::actor::AgentIdentity;

/// Every agent credential begins with this.
pub const TOKEN_PREFIX: &str = "ahk_";
/// The file in the data dir.
pub const FILE_NAME: &str = "agent-credentials.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    sha256: String,
    identity: AgentIdentity,
    minted_at: DateTime<Utc>,
}

/// The holder of a host session's credential (see [`Credentials::mint`]).
pub fn session_holder(session_id: &str) -> String {
    format!("session:{session_id}")
}

/// The holder of the credential the hub mints for one git command it runs in an agent's
/// container (a clone or a push of its workspace), revoked when the command ends.
pub fn git_holder(agent_id: &str) -> String {
    format!("git:{agent_id}")
}

/// The live agent credentials of a hub, by holder: a container agent's id,
/// `session:<id>` for a host session given hub access, or [`git_holder`].
pub struct Credentials {
    by_agent: Mutex<BTreeMap<String, Stored>>,
    /// Where they are kept; `None`: in memory only.
    file: Option<PathBuf>,
}

fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Equal-time comparison of two hashes.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0, |d, (x, y)| d | (x ^ y)) == 0
}

impl Credentials {
    /// Credentials kept in `dir` (loaded from a previous run when the file is there; an
    /// unreadable file is logged and starts empty: the agents get new ones at their next start).
    pub fn open(dir: &Path) -> Self {
        let file = dir.join(FILE_NAME);
        let mut by_agent: BTreeMap<String, Stored> = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!("{}: {e}; agent credentials start empty", file.display());
                BTreeMap::new()
            }),
            Err(_) => BTreeMap::new(),
        };
        // A host session's credential lasts until the session is killed or the hub stops; a
        // git command's, until it ends.
        by_agent.retain(|holder, _| !holder.starts_with("session:") && !holder.starts_with("git:"));
        Credentials {
            by_agent: Mutex::new(by_agent),
            file: Some(file),
        }
    }

    /// Credentials in memory only.
    pub fn in_memory() -> Self {
        Credentials {
            by_agent: Mutex::new(BTreeMap::new()),
            file: None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Stored>> {
        self.by_agent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new credential acting as `identity`, held by `holder` (a container agent's id, or
    /// [`session_holder`]); the holder's previous one stops working.
    pub fn mint(&self, holder: &str, identity: AgentIdentity) -> String {
        let bytes: [u8; 32] = rand::rng().random();
        let token: String = std::iter::once(TOKEN_PREFIX.to_string())
            .chain(bytes.iter().map(|b| format!("{b:02x}")))
            .collect();
        let stored = Stored {
            sha256: sha256_hex(&token),
            identity: identity.clone(),
            minted_at: Utc::now(),
        };
        let mut all = self.lock();
        all.insert(holder.to_string(), stored);
        self.save(&all);
        token
    }

    /// Revokes the holder's credential (the agent stopped, the session was killed).
    pub fn revoke(&self, holder: &str) {
        let mut all = self.lock();
        if all.remove(holder).is_some() {
            self.save(&all);
        }
    }

    /// The agent a presented token belongs to, if it is a live agent credential.
    pub fn identify(&self, token: &str) -> Option<AgentIdentity> {
        if !token.starts_with(TOKEN_PREFIX) {
            return None;
        }
        let hash = sha256_hex(token);
        let all = self.lock();
        // Every entry is compared, so the time taken does not say which one matched.
        let mut found = None;
        for stored in all.values() {
            if same(&stored.sha256, &hash) {
                found = Some(stored.identity.clone());
            }
        }
        found
    }

    fn save(&self, all: &BTreeMap<String, Stored>) {
        let Some(file) = &self.file else { return };
        let result = serde_json::to_vec_pretty(all)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::persist::registry_file::write_atomic(file, &bytes));
        if let Err(e) = result {
            tracing::error!("cannot write {}: {e}", file.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(id: &str) -> AgentIdentity {
        AgentIdentity {
            agent_id: id.into(),
            team: "t".into(),
            leader: false,
            may_merge: false,
        }
    }

    #[test]
    fn a_minted_credential_identifies_its_agent_until_revoked_or_replaced() {
        let c = Credentials::in_memory();
        let first = c.mint("w1", who("w1"));
        assert!(first.starts_with(TOKEN_PREFIX) && first.len() == TOKEN_PREFIX.len() + 64);
        assert_eq!(c.identify(&first), Some(who("w1")));
        let second = c.mint("w1", who("w1"));
        assert_ne!(first, second);
        assert_eq!(
            c.identify(&first),
            None,
            "a restart's new credential replaces the old"
        );
        assert_eq!(c.identify(&second), Some(who("w1")));
        c.revoke("w1");
        assert_eq!(
            c.identify(&second),
            None,
            "a stopped agent's credential is refused"
        );
        assert_eq!(c.identify("ahk_00"), None);
        assert_eq!(c.identify("not-an-agent-token"), None);
    }

    #[test]
    fn only_hashes_are_kept_and_they_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let token = Credentials::open(dir.path()).mint("lead", who("lead"));
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(!text.contains(&token), "the token itself is not stored");
        assert!(text.contains(&sha256_hex(&token)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(FILE_NAME))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let reopened = Credentials::open(dir.path());
        assert_eq!(reopened.identify(&token), Some(who("lead")));
    }
}
