//! The prompts delivered to agents while they were `limited` under `on_limit = "wait"`,
//! waiting for the limit to end ([`super::limits`] decides when each goes). Kept in
//! `<data dir>/limit-queue.json` at each change, so a hub restart (a crash included) loses
//! none: a prompt leaves the file when it is taken to be typed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::actor::Actor;

/// A prompt waiting, with who sent it and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Queued {
    pub text: String,
    pub actor: Actor,
    pub force: bool,
}

/// The prompts waiting for each agent's limit to end, by the policy loop's key (the agent id,
/// else the session id).
#[derive(Debug, Default)]
pub struct Queues {
    queues: Mutex<HashMap<String, VecDeque<Queued>>>,
    /// Keys whose queued prompt is being typed now: the next waits for it (an agent still
    /// reads idle while the text goes in).
    typing: Mutex<HashSet<String>>,
    /// Where they are kept (none: in memory only).
    path: Option<PathBuf>,
}

impl Queues {
    /// The queues kept in `data_dir` (what a run before left there).
    pub fn open(data_dir: &Path) -> Self {
        let path = data_dir.join("limit-queue.json");
        let queues = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::error!("{}: not read, queued prompts lost: {e}", path.display());
                HashMap::new()
            }),
            Err(_) => HashMap::new(),
        };
        Queues {
            queues: Mutex::new(queues),
            typing: Mutex::default(),
            path: Some(path),
        }
    }

    pub(super) fn push(&self, key: &str, queued: Queued) {
        let mut queues = self.lock();
        queues.entry(key.to_string()).or_default().push_back(queued);
        self.save(&queues);
    }

    /// The first prompt queued for `key`, unless one of its prompts is being typed: the caller
    /// types it and then calls [`Queues::typed`].
    pub(super) fn take(&self, key: &str) -> Option<Queued> {
        let mut typing = self.typing.lock().unwrap_or_else(|e| e.into_inner());
        if typing.contains(key) {
            return None;
        }
        let mut queues = self.lock();
        let first = queues.get_mut(key)?.pop_front();
        queues.retain(|_, q| !q.is_empty());
        if first.is_some() {
            typing.insert(key.to_string());
            self.save(&queues);
        }
        first
    }

    /// The prompt [`Queues::take`] gave for `key` is typed.
    pub(super) fn typed(&self, key: &str) {
        let mut typing = self.typing.lock().unwrap_or_else(|e| e.into_inner());
        typing.remove(key);
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.lock().get(key).is_some_and(|q| !q.is_empty())
    }

    fn save(&self, queues: &HashMap<String, VecDeque<Queued>>) {
        let Some(path) = &self.path else {
            return;
        };
        let written = serde_json::to_vec_pretty(queues)
            .map_err(std::io::Error::other)
            .and_then(|json| crate::persist::registry_file::write_atomic(path, &json));
        if let Err(e) = written {
            tracing::error!("{}: not written: {e}", path.display());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<Queued>>> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(text: &str) -> Queued {
        Queued {
            text: text.into(),
            actor: Actor {
                token_name: "owner".into(),
                ..Actor::default()
            },
            force: false,
        }
    }

    #[test]
    fn what_is_queued_is_there_after_a_restart_until_it_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let queues = Queues::open(dir.path());
        queues.push("a", queued("one"));
        queues.push("a", queued("two"));
        drop(queues);
        let again = Queues::open(dir.path());
        assert_eq!(again.take("a"), Some(queued("one")));
        again.typed("a");
        let after_take = Queues::open(dir.path());
        assert_eq!(after_take.take("a"), Some(queued("two")));
        assert!(!after_take.has("a"));
        assert!(!Queues::open(dir.path()).has("a"));
    }
}
