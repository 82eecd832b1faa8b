//! Policies: named TOML files in the policies directory (`policies/*.toml`, or `policies_dir`
//! in hub.toml) that say when an agent is stopped, restarted, warned, interrupted or started.
//! Agents name theirs with `policy = "NAME"` in `[[agents]]`; host sessions with `policy` at
//! creation. The directory's `agents/` holds the state profiles ([`crate::agent_state`]).
//!
//! [`evaluate`] is the pure decision; [`runner`] is the one loop that applies it to every
//! session; [`Engine`] holds what was loaded (reloadable: SIGHUP, `POST /v1/policies/reload`)
//! and what each policy has already done.

pub mod budget_check;
pub mod budgets;
pub mod busy_queue;
pub mod evaluate;
pub mod limit_queue;
pub mod limits;
pub mod runner;
pub mod start_on_message;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use crate::agent_state::profile::{Profile, ProfileSet};
use crate::agent_state::{AgentStateError, State};
pub use crate::config::policy::{IdleAction, OnLimit, Policy, StuckAction, WarnTo};
use crate::config::HubConfig;
use crate::error::HubError;
pub use crate::toml_file::toml_files;
use crate::toml_file::TomlFileError;
pub use evaluate::{evaluate, Action, Memory, Snapshot, Verdict};

/// Policies that cannot be loaded (the files name their place), or a policy's action that
/// could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A policy file cannot be read, or has a problem at a place in it.
    #[error(transparent)]
    File(#[from] TomlFileError),
    /// A state profile (`agents/` in the policies directory) cannot be loaded.
    #[error(transparent)]
    Profile(#[from] AgentStateError),
    #[error("{}: policies directory not found", dir.display())]
    DirNotFound { dir: PathBuf },
    #[error("{}: policy '{name}' is defined twice", path.display())]
    Duplicate { path: PathBuf, name: String },
    /// An agent names a policy that is not loaded; `location` is its image's place in hub.toml.
    #[error(
        "{location}: agent '{agent}': policy: no policy named '{name}' in {}",
        dir.as_deref().map_or("(no policies directory)".into(), |d| d.display().to_string())
    )]
    UnknownPolicy {
        location: String,
        agent: String,
        name: String,
        dir: Option<PathBuf>,
    },
    /// A warning for the leader of a session whose leader session is gone.
    #[error("the leader session '{leader}' is gone")]
    LeaderGone { leader: String },
    #[error("the session has no owner_session_id (leader) to warn")]
    NoLeader,
    #[error("host sessions cannot be restarted; use idle_action = \"stop\"")]
    HostRestart,
    /// Delivering, stopping, restarting or interrupting failed.
    #[error(transparent)]
    Action(#[from] HubError),
}

/// Everything loaded from the policies directory.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub dir: Option<PathBuf>,
    pub policies: BTreeMap<String, Policy>,
    pub profiles: ProfileSet,
}

/// Parses and validates one policy file.
pub fn parse_policy(text: &str, origin: &str, stem: &str) -> Result<Policy, TomlFileError> {
    let at = |span: Option<std::ops::Range<usize>>, message: &str| {
        TomlFileError::invalid(text, origin, span, message)
    };
    let mut p: Policy = toml::from_str(text).map_err(|e| TomlFileError::syntax(text, origin, e))?;
    let field = |key: &str| {
        let whole = 0..text.len();
        Some(crate::config::field_span(text, whole, key))
    };
    if p.name.is_empty() {
        p.name = stem.to_string();
    }
    if !name_ok(&p.name) {
        return Err(at(
            field("name"),
            "name must be 1-64 characters of letters, digits, '_', '-', '.'",
        ));
    }
    if p.idle_timeout_s == Some(0) {
        return Err(at(
            field("idle_timeout_s"),
            "idle_timeout_s must be at least 1",
        ));
    }
    if p.idle_states.is_empty()
        || p.idle_states
            .iter()
            .any(|s| !matches!(s, State::Idle | State::Blocked))
    {
        return Err(at(
            field("idle_states"),
            "idle_states must be [\"idle\"] or [\"idle\", \"blocked\"]",
        ));
    }
    if let (Some(w), Some(t)) = (p.warn_before_s, p.idle_timeout_s) {
        if w >= t {
            return Err(at(
                field("warn_before_s"),
                "warn_before_s must be less than idle_timeout_s",
            ));
        }
    }
    if p.warn_before_s.is_some() && p.idle_timeout_s.is_none() {
        return Err(at(
            field("warn_before_s"),
            "warn_before_s needs idle_timeout_s",
        ));
    }
    if p.warn_line.is_some() && p.warn_before_s.is_none() {
        return Err(at(field("warn_line"), "warn_line needs warn_before_s"));
    }
    if let Some(bad) = p
        .exempt_roles
        .iter()
        .find(|r| !matches!(r.as_str(), "leader" | "worker"))
    {
        return Err(at(
            field("exempt_roles"),
            &format!("exempt_roles: unknown role '{bad}' (roles are leader and worker)"),
        ));
    }
    if let Some(bad) = p.budget.as_ref().and_then(|b| b.check().err()) {
        let budget = field("budget").unwrap_or(0..0);
        let at_field = match bad.field {
            "budget" => budget,
            key => crate::config::key_in(text, budget.start..text.len(), key).unwrap_or(budget),
        };
        return Err(at(Some(at_field), &format!("budget: {}", bad.message)));
    }
    if p.budget.is_none() && text_sets(text, "budget_action") {
        return Err(at(field("budget_action"), "budget_action needs budget"));
    }
    if p.limit_retry_s == Some(0) {
        return Err(at(
            field("limit_retry_s"),
            "limit_retry_s must be at least 1",
        ));
    }
    if p.limit_retry_s.is_some() && p.on_limit.is_none() {
        return Err(at(
            field("limit_retry_s"),
            "limit_retry_s needs on_limit = \"wait\"",
        ));
    }
    if p.max_lifetime_s == Some(0) {
        return Err(at(
            field("max_lifetime_s"),
            "max_lifetime_s must be at least 1",
        ));
    }
    Ok(p)
}

/// Whether `key` is set in a policy's text (a field whose default cannot be told apart).
fn text_sets(text: &str, key: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key(key))
}

fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
}

impl Loaded {
    /// Loads the policies directory of `config` (policies and profiles) and checks that every
    /// agent's policy exists.
    pub fn load(config: &HubConfig) -> Result<Self, PolicyError> {
        let dir = config.policies_dir.clone().or_else(|| {
            let d = PathBuf::from("policies");
            d.is_dir().then_some(d)
        });
        let mut loaded = Loaded {
            dir: dir.clone(),
            profiles: ProfileSet::load(dir.as_ref().map(|d| d.join("agents")).as_deref())?,
            policies: BTreeMap::new(),
        };
        if let Some(dir) = dir.as_deref() {
            if !dir.is_dir() {
                return Err(PolicyError::DirNotFound {
                    dir: dir.to_path_buf(),
                });
            }
            for path in toml_files(dir)? {
                let text = crate::toml_file::read(&path)?;
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                let p = parse_policy(&text, &path.display().to_string(), stem)?;
                if loaded.policies.contains_key(&p.name) {
                    return Err(PolicyError::Duplicate { path, name: p.name });
                }
                loaded.policies.insert(p.name.clone(), p);
            }
        }
        for def in config.agent_defs() {
            if let Some(name) = &def.policy {
                if !loaded.policies.contains_key(name) {
                    return Err(PolicyError::UnknownPolicy {
                        location: def.image_location.clone(),
                        agent: def.id.clone(),
                        name: name.clone(),
                        dir,
                    });
                }
            }
        }
        Ok(loaded)
    }
}

/// The hub's policies: what is loaded, and what each policy has done to each session.
pub struct Engine {
    loaded: RwLock<Arc<Loaded>>,
    memory: Mutex<HashMap<String, Memory>>,
    /// Prompts waiting for their agent's usage or rate limit to end.
    pub queues: limits::Queues,
}

impl Engine {
    /// Loads the policies of `config`; a load error is logged and leaves the shipped profiles
    /// and no policies (`serve` checks with [`Loaded::load`] first and refuses to start).
    pub fn new(config: &HubConfig) -> Self {
        let loaded = Loaded::load(config).unwrap_or_else(|e| {
            tracing::error!("policies not loaded: {e}");
            Loaded::default()
        });
        Engine {
            loaded: RwLock::new(Arc::new(loaded)),
            memory: Mutex::new(HashMap::new()),
            queues: limits::Queues::open(&config.data_dir),
        }
    }

    /// What is loaded now.
    pub fn loaded(&self) -> Arc<Loaded> {
        self.loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reloads from disk; on error the old set stays in force.
    pub fn reload(&self, config: &HubConfig) -> Result<Arc<Loaded>, PolicyError> {
        let fresh = Arc::new(Loaded::load(config)?);
        *self.loaded.write().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        Ok(fresh)
    }

    /// The profile for a `cli_type`.
    pub fn profile_for(&self, cli_type: Option<&str>) -> Arc<Profile> {
        self.loaded().profiles.for_cli_type(cli_type)
    }

    /// A policy by name.
    pub fn policy(&self, name: &str) -> Option<Policy> {
        self.loaded().policies.get(name).cloned()
    }

    fn memory(&self, unit: &str) -> Memory {
        self.lock_memory().get(unit).cloned().unwrap_or_default()
    }

    fn set_memory(&self, unit: &str, m: Memory) {
        self.lock_memory().insert(unit.to_string(), m);
    }

    /// Forgets what was done for units no longer under a policy.
    fn retain_memory(&self, keep: &std::collections::HashSet<String>) {
        self.lock_memory().retain(|k, _| keep.contains(k));
    }

    fn lock_memory(&self) -> std::sync::MutexGuard<'_, HashMap<String, Memory>> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_policies_name_file_line_and_key() {
        let table = [
            ("idle_timeout_s = \"x\"\n", "p.toml:1:", "idle_timeout_s"),
            ("\nidle_action = \"explode\"\n", "p.toml:2:", "idle_action"),
            ("idle_timeout_s = 0\n", "p.toml:1:", "idle_timeout_s"),
            (
                "idle_timeout_s = 5\nwarn_before_s = 9\n",
                "p.toml:2:",
                "warn_before_s",
            ),
            (
                "idle_timeout_s = 5\nidle_states = [\"working\"]\n",
                "p.toml:2:",
                "idle_states",
            ),
            ("warn_line = \"hi\"\n", "p.toml:1:", "warn_line"),
            ("on_stuck = \"panic\"\n", "p.toml:1:", "on_stuck"),
            ("idle_timout_s = 5\n", "p.toml:1:", "idle_timout_s"),
            ("name = \"bad name\"\n", "p.toml:1:", "name"),
            ("\nexempt_roles = [\"boss\"]\n", "p.toml:2:", "exempt_roles"),
            ("\nbudget = { usd = -1.0 }\n", "p.toml:2:12", "usd"),
            (
                "\nbudget = { tokens = -5, per = \"day\" }\n",
                "p.toml:2:12",
                "tokens",
            ),
            ("budget = { per = \"month\" }\n", "p.toml:1:", "month"),
            (
                "budget = { per = \"day\" }\n",
                "p.toml:1:1",
                "usd, tokens or both",
            ),
            (
                "budget_action = \"hold\"\n",
                "p.toml:1:1",
                "budget_action needs budget",
            ),
            ("budget_action = \"pause\"\n", "p.toml:1:", "pause"),
            ("on_limit = \"sleep\"\n", "p.toml:1:", "sleep"),
            ("limit_retry_s = 30\n", "p.toml:1:1", "needs on_limit"),
            (
                "on_limit = \"wait\"\nlimit_retry_s = 0\n",
                "p.toml:2:1",
                "at least 1",
            ),
        ];
        for (text, at, key) in table {
            let e = parse_policy(text, "p.toml", "p").unwrap_err().to_string();
            assert!(e.starts_with(at) && e.contains(key), "{text}: {e}");
        }
        let ok = parse_policy("idle_timeout_s = 60\nwarn_before_s = 10\n", "p.toml", "p").unwrap();
        assert_eq!(ok.name, "p");
        assert_eq!(ok.idle_action, IdleAction::Stop);
        assert_eq!(ok.idle_states, vec![State::Idle]);
    }

    #[test]
    fn an_agent_naming_an_unknown_policy_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("short.toml"), "idle_timeout_s = 5\n").unwrap();
        let text = format!(
            "policies_dir = '{}'\n[[agents]]\nid = \"a\"\nimage = \"i\"\npolicy = \"long\"\n",
            dir.path().display()
        );
        let config = HubConfig::parse(&text, "hub.toml").unwrap();
        let e = Loaded::load(&config).unwrap_err().to_string();
        assert!(e.starts_with("hub.toml:4:") && e.contains("'long'"), "{e}");
        let config = HubConfig::parse(&text.replace("long", "short"), "hub.toml").unwrap();
        assert!(Loaded::load(&config)
            .unwrap()
            .policies
            .contains_key("short"));
    }
}
