//! The session registry: every live session by id, the ids ever handed out, and the ids and
//! owners container sessions had before a restart. It is the narrow handle components get
//! instead of the whole hub ([`SessionRegistry`]); the hub composes it with the rest.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use rand::Rng;

use crate::agent_state::profile::Resolved;
use crate::backend::{Backend, TermSize};
use crate::error::{HubError, HubResult};
use crate::event_bus::EventSink;
use crate::guard::Guard;
use crate::output::Output;
use crate::protocol::{EventKind, SessionAdded};
use crate::session::input::TermSignal;
use crate::session::{Owner, Session, SessionSpec};

/// How long a kill waits for the program's end to be recorded after its processes are gone.
pub const EXIT_RECORD_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// A session whose backend is started, ready to be registered.
pub struct NewSession {
    pub spec: SessionSpec,
    pub size: TermSize,
    pub owner: Owner,
    pub output: Arc<Output>,
    pub backend: Box<dyn Backend>,
}

impl NewSession {
    /// A started backend with what the registry records about it.
    pub fn new(
        spec: SessionSpec,
        size: TermSize,
        owner: Owner,
        output: Arc<Output>,
        backend: impl Backend + 'static,
    ) -> Self {
        NewSession {
            spec,
            size,
            owner,
            output,
            backend: Box::new(backend),
        }
    }
}

/// Whether a registered session is new or carried over from a previous run of the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Published as `session_created`.
    Created,
    /// Same id and owner as before the restart; published as `session_restored`.
    Restored,
}

/// What a component needs of the session registry. [`Registry`] is the real one; unit tests of
/// a component (the agents) bring a fake.
pub trait SessionRegistry: Send + Sync {
    /// The live session with this id.
    fn session(&self, id: &str) -> Option<Arc<Session>>;
    /// A new session id, never handed out before.
    fn new_id(&self, prefix: &str) -> String;
    /// The id and owner a container's session had before a restart, once.
    fn take_container_session(&self, container_id: &str) -> Option<(String, Owner)>;
    /// The id of the ended session a stopped agent had before a restart (registered again:
    /// its last screen), once.
    fn take_ended_agent_session(&self, agent_id: &str) -> Option<String>;
    /// Registers a session and publishes it.
    fn add(&self, new: NewSession, origin: Origin) -> Arc<Session>;
    /// Removes a session without touching its program.
    fn remove(&self, id: &str) -> Option<Arc<Session>>;
}

/// The live sessions of a hub.
pub struct Registry {
    sessions: RwLock<BTreeMap<String, Arc<Session>>>,
    /// Every id ever handed out, so none is reused.
    issued_ids: Mutex<HashSet<String>>,
    /// Container id -> (session id, owner) from before a restart (see `persist`).
    container_sessions: Mutex<HashMap<String, (String, Owner)>>,
    /// Agent id -> the id of its ended session from before a restart (see `persist`).
    ended_agent_sessions: Mutex<HashMap<String, String>>,
    events: EventSink,
    guard: Arc<Guard>,
    metrics: crate::metrics::Metrics,
    profiles: ProfileSource,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The agent profile for a session's `cli_type`, and why (the policy engine's current set).
pub type ProfileSource = Arc<dyn Fn(Option<&str>) -> Resolved + Send + Sync>;

impl Registry {
    /// An empty registry. New sessions get the guard, their agent profile from `profiles`, and
    /// their output counted in `metrics`.
    pub fn new(
        events: EventSink,
        guard: Arc<Guard>,
        metrics: crate::metrics::Metrics,
        profiles: ProfileSource,
    ) -> Self {
        Registry {
            sessions: RwLock::new(BTreeMap::new()),
            issued_ids: Mutex::new(HashSet::new()),
            container_sessions: Mutex::new(HashMap::new()),
            ended_agent_sessions: Mutex::new(HashMap::new()),
            events,
            guard,
            metrics,
            profiles,
        }
    }

    /// All sessions, ordered by id.
    pub fn list(&self) -> Vec<Arc<Session>> {
        self.sessions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Marks an id as taken (an id carried over from a previous run).
    pub fn reserve_id(&self, id: &str) {
        locked(&self.issued_ids).insert(id.to_string());
    }

    /// Remembers the id and owner a container's session had before a restart, for when the
    /// agent's terminal is attached again.
    pub fn remember_container_session(&self, container_id: &str, id: &str, owner: Owner) {
        self.reserve_id(id);
        locked(&self.container_sessions).insert(container_id.to_string(), (id.to_string(), owner));
    }

    /// Remembers the ended session `id` of the agent `agent_id` from before a restart,
    /// registered again, for the agent to show as its last screen.
    pub fn remember_ended_agent_session(&self, agent_id: &str, id: &str) {
        locked(&self.ended_agent_sessions).insert(agent_id.to_string(), id.to_string());
    }

    /// Takes a session out of the map (it stays open: the caller closes it).
    fn take(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }

    /// The session with this id, or `SessionNotFound`.
    pub fn get(&self, id: &str) -> HubResult<Arc<Session>> {
        self.session(id)
            .ok_or_else(|| HubError::SessionNotFound { id: id.to_string() })
    }

    /// Kills a session's processes (hang-up, then SIGKILL after a grace period), publishes
    /// `session_killed` and removes it. Returns the session and how the termination went.
    pub async fn kill(&self, id: &str) -> HubResult<(Arc<Session>, HubResult<()>)> {
        let session = self.get(id)?;
        if !session.capabilities().kill {
            return Err(HubError::KillUnsupported { id: id.into() });
        }
        let result = session.terminate(TermSignal::Hup).await;
        self.events.emit(EventKind::SessionKilled {
            session_id: id.to_string(),
        });
        self.take(id);
        session.close();
        Ok((session, result))
    }
}

impl SessionRegistry for Registry {
    fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    fn new_id(&self, prefix: &str) -> String {
        let mut issued = locked(&self.issued_ids);
        loop {
            let id = format!("{prefix}_{:08x}", rand::rng().random::<u32>());
            if issued.insert(id.clone()) {
                return id;
            }
        }
    }

    fn take_container_session(&self, container_id: &str) -> Option<(String, Owner)> {
        locked(&self.container_sessions).remove(container_id)
    }

    fn take_ended_agent_session(&self, agent_id: &str) -> Option<String> {
        locked(&self.ended_agent_sessions).remove(agent_id)
    }

    fn add(&self, new: NewSession, origin: Origin) -> Arc<Session> {
        let NewSession {
            spec,
            size,
            owner,
            output,
            backend,
        } = new;
        if origin == Origin::Restored {
            self.reserve_id(&spec.id);
        }
        let id = spec.id.clone();
        let resolved = (self.profiles)(owner.cli_type.as_deref());
        if resolved.unknown_cli_type.is_some() {
            tracing::warn!(session = %id, "{}", resolved.reason);
        }
        output.count_into(self.metrics.output_bytes(&spec.source));
        let session = Session::new(
            spec,
            size,
            owner,
            output,
            backend,
            resolved.profile,
            self.guard.clone(),
        );
        let events = self.events.clone();
        let agent_id = session.spec().agent_id.clone();
        let session_id = id.clone();
        session.set_on_state_change(move |c| {
            events.emit(EventKind::SessionStateChanged {
                session_id: session_id.clone(),
                agent_id: agent_id.clone(),
                state: c.state,
                previous: c.previous,
                since: c.since,
                rule: c.rule.clone(),
                until: c.until,
            });
        });
        self.sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), session.clone());
        let spec = session.spec();
        let added = SessionAdded {
            session_id: id,
            backend: spec.backend,
            source: spec.source.clone(),
            agent_id: spec.agent_id.clone(),
            owner: session.owner(),
        };
        self.events.emit(match origin {
            Origin::Created => EventKind::SessionCreated(added),
            Origin::Restored => EventKind::SessionRestored(added),
        });
        session
    }

    fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let removed = self.take(id);
        if let Some(s) = &removed {
            s.close();
        }
        removed
    }
}
