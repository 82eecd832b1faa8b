//! The hub: the registry of sessions and the one place they are created and removed.
//! Cheap to clone; the API, the CLI's `serve` and tests all hold a `Hub`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use chrono::Utc;
use rand::Rng;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::actor::Actor;
use crate::agents::Agents;
use crate::audit::Audit;
use crate::backend::pty::PtyBackend;
use crate::backend::tmux::{TmuxBackend, TmuxPlace};
use crate::backend::{Backend, SpawnSpec, TermSize};
use crate::config::{check_size, HubConfig};
use crate::error::{HubError, HubResult};
use crate::guard::{Guard, GuardConfig};
use crate::output::{ExitInfo, Output};
pub use crate::protocol::BackendKind;
use crate::protocol::{EventKind, HubEvent, SessionAdded};
use crate::redact::Redactor;
use crate::session::input::TermSignal;
use crate::session::{Owner, Session, SessionSpec};
use crate::tasks::Tasks;

/// How long a kill waits for the program's end to be recorded after its processes are gone.
const EXIT_RECORD_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// How many lifecycle events a slow `/v1/events` subscriber may fall behind.
const EVENTS_CHANNEL_CAPACITY: usize = 4096;

/// What a new session should run.
#[derive(Debug, Clone, Default)]
pub struct CreateSession {
    pub backend: BackendKind,
    pub shell: Option<String>,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub cols: Option<u16>,
    pub rows: Option<u16>,
    pub env: BTreeMap<String, String>,
    pub tmux_session: Option<String>,
    pub owner: Owner,
    /// The policy that applies (must be loaded).
    pub policy: Option<String>,
}

/// The session registry.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    config: HubConfig,
    sessions: RwLock<BTreeMap<String, Arc<Session>>>,
    /// Every id ever handed out, so none is reused.
    issued_ids: Mutex<HashSet<String>>,
    /// Container id -> (session id, owner) from before a restart (see `persist`).
    container_sessions: Mutex<std::collections::HashMap<String, (String, Owner)>>,
    /// The persistence task, when the hub runs with one (`serve`).
    persistence: std::sync::OnceLock<crate::persist::Persistence>,
    /// Cancelled when the hub begins to shut down; long-lived streams watch it. The daemon's
    /// root token (see [`crate::daemon`]).
    closing: CancellationToken,
    /// Every background task the hub's components start, so shutdown can wait for them.
    tasks_running: TaskTracker,
    agents: Agents,
    tasks: Tasks,
    policy: crate::policy::Engine,
    /// Lifecycle events for `/v1/events` (task, agent and session events), as JSON objects
    /// with a `type` field.
    events: tokio::sync::broadcast::Sender<HubEvent>,
    /// The command guard every command-capable input passes.
    guard: Arc<Guard>,
    /// Redaction for every output path.
    redactor: Arc<Redactor>,
    /// The durable audit log.
    audit: Audit,
    metrics: crate::metrics::Metrics,
}

impl Hub {
    /// A hub with no sessions and no background work (the daemon starts that; see
    /// [`crate::daemon::Daemon`]).
    pub fn new(config: HubConfig) -> Self {
        Self::with_lifecycle(config, CancellationToken::new(), TaskTracker::new())
    }

    /// A hub whose closing token and task tracker belong to its owner (the daemon).
    pub fn with_lifecycle(
        config: HubConfig,
        closing: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        let guard = Guard::new(&config.guard).unwrap_or_else(|e| {
            tracing::error!("{e}; using the default guard patterns");
            Guard::new(&GuardConfig::default()).unwrap_or_else(|e| panic!("default guard: {e}"))
        });
        let redactor = Arc::new(Redactor::new());
        redactor.add_literals(config.redact.secrets.iter().map(String::as_str));
        // The hub's own API tokens, should one ever be typed or printed in a terminal.
        redactor.add_literals(config.tokens.iter().map(|t| t.token.as_str()));
        for def in config.agent_defs() {
            redactor.add_env_secrets(&def.env, &config.redact.secret_env);
        }
        let audit = Audit::open(&config.audit, &config.data_dir);
        let metrics =
            crate::metrics::Metrics::new(redactor.counter(), guard.refusals(), audit.meters());
        Hub {
            inner: Arc::new(Inner {
                metrics,
                guard: Arc::new(guard),
                redactor,
                audit,
                sessions: RwLock::new(BTreeMap::new()),
                issued_ids: Mutex::new(HashSet::new()),
                container_sessions: Mutex::new(std::collections::HashMap::new()),
                persistence: std::sync::OnceLock::new(),
                closing,
                tasks_running: tracker,
                agents: Agents::new(&config),
                policy: crate::policy::Engine::new(&config),
                tasks: Tasks::default(),
                events: tokio::sync::broadcast::channel(EVENTS_CHANNEL_CAPACITY).0,
                config,
            }),
        }
    }

    /// Runs a background task of the hub, tracked so shutdown waits for it. Tasks watch
    /// [`Hub::closing`] to end.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.tasks_running.spawn(task)
    }

    /// The tracker of the hub's background tasks.
    pub fn tracker(&self) -> &TaskTracker {
        &self.inner.tasks_running
    }

    /// The hub's metrics.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.metrics
    }

    /// The command guard (the sessions enforce it on every caller's input).
    pub fn guard(&self) -> &Arc<Guard> {
        &self.inner.guard
    }

    /// Redaction shared by every output path (see [`crate::redact`]); call
    /// `redactor().redact_bytes(..)` for anything that leaves the hub, snapshots included.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.inner.redactor
    }

    /// The audit log.
    pub fn audit(&self) -> &Audit {
        &self.inner.audit
    }

    /// Publishes an event, stamped now. Never blocks: a subscriber that falls behind misses
    /// events and is told so.
    pub fn emit(&self, kind: EventKind) {
        let _ = self.inner.events.send(self.redacted(HubEvent::now(kind)));
    }

    /// Events leave the hub (`/v1/events`, the audit log): every text in them (task output,
    /// reasons, labels) is redacted.
    fn redacted(&self, event: HubEvent) -> HubEvent {
        let Ok(mut value) = serde_json::to_value(&event) else {
            return event;
        };
        self.inner.redactor.redact_json(&mut value);
        serde_json::from_value(value).unwrap_or(event)
    }

    /// Subscribes to the hub's events.
    pub fn subscribe_events(&self) -> tokio::sync::broadcast::Receiver<HubEvent> {
        self.inner.events.subscribe()
    }

    /// Cancelled when the hub begins to shut down.
    pub fn closing(&self) -> CancellationToken {
        self.inner.closing.clone()
    }

    /// The hub's settings.
    pub fn config(&self) -> &HubConfig {
        &self.inner.config
    }

    /// A new session id, never handed out before.
    pub fn new_id(&self, prefix: &str) -> String {
        let mut issued = self
            .inner
            .issued_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        loop {
            let id = format!("{prefix}_{:08x}", rand::rng().random::<u32>());
            if issued.insert(id.clone()) {
                return id;
            }
        }
    }

    /// The environment a session's program gets: the configured pass-through variables of the
    /// hub's own environment, terminal defaults, then the request's variables.
    pub(crate) fn child_env(
        &self,
        id: &str,
        extra: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for key in &self.inner.config.env_passthrough {
            if let Ok(value) = std::env::var(key) {
                env.insert(key.clone(), value);
            }
        }
        env.insert("TERM".into(), "xterm-256color".into());
        env.entry("LANG".into()).or_insert_with(|| "C.UTF-8".into());
        env.insert("AGENT_HUB_SESSION_ID".into(), id.into());
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    }

    fn default_shell(&self) -> String {
        self.inner
            .config
            .default_shell
            .clone()
            .or_else(|| std::env::var("SHELL").ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| "/bin/bash".into())
    }

    /// Starts a session for `actor`: its program and arguments are a command too
    /// (`sh -c 'rm -rf /'`), so they pass the command guard first.
    pub async fn create_session_as(
        &self,
        actor: &Actor,
        req: CreateSession,
    ) -> HubResult<Arc<Session>> {
        if let Some(shell) = &req.shell {
            let command = std::iter::once(shell.as_str())
                .chain(req.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            self.inner.guard.check_input(&command, actor.role())?;
        }
        self.create_session(req).await
    }

    /// Starts a session and registers it (the hub's own sessions: not checked by the guard).
    pub async fn create_session(&self, req: CreateSession) -> HubResult<Arc<Session>> {
        let cfg = &self.inner.config;
        let size = TermSize {
            cols: req.cols.unwrap_or(cfg.cols),
            rows: req.rows.unwrap_or(cfg.rows),
        };
        check_size(size.cols, size.rows).map_err(HubError::bad_request)?;
        if let Some(bad) = req
            .env
            .keys()
            .find(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return Err(HubError::bad_request(format!(
                "invalid environment variable name '{bad}'"
            )));
        }
        if let Some(name) = &req.tmux_session {
            let ok = crate::backend::tmux_control::is_safe_name(name)
                && !name.starts_with(['%', '$', '@', '=']);
            if !ok {
                return Err(HubError::bad_request(format!(
                    "tmux session name '{name}' is not allowed: use 1-64 characters of letters, digits, '_', '-' and '.'"
                )));
            }
        }
        self.inner
            .redactor
            .add_env_secrets(&req.env, &cfg.redact.secret_env);
        if let Some(name) = &req.policy {
            if self.policy().policy(name).is_none() {
                return Err(HubError::PolicyNotFound { name: name.clone() });
            }
        }
        let kind = match req.backend {
            BackendKind::Pty => crate::protocol::SessionBackend::Pty,
            BackendKind::Tmux => crate::protocol::SessionBackend::Tmux,
        };
        let id = self.new_id(kind.as_str());
        let cwd = match req.cwd {
            Some(cwd) => cwd,
            None => std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/")),
        };
        let spawn = SpawnSpec {
            program: req.shell.unwrap_or_else(|| self.default_shell()),
            args: req.args,
            env: self.child_env(&id, &req.env),
            cwd,
            size,
        };
        let output = Arc::new(Output::new(cfg.scrollback_bytes));
        let (backend, tmux_session): (Box<dyn Backend>, _) = match req.backend {
            BackendKind::Pty => {
                let b = PtyBackend::spawn(&spawn, output.clone())
                    .map_err(|reason| HubError::SpawnFailed { reason })?;
                (Box::new(b), None)
            }
            BackendKind::Tmux => {
                let name = req.tmux_session.unwrap_or_else(|| id.clone());
                let server = TmuxPlace::Host {
                    socket_name: cfg.tmux_socket_name(),
                };
                let (b, _adopted) = TmuxBackend::start(server, &name, &spawn, output.clone())
                    .await
                    .map_err(|reason| HubError::SpawnFailed { reason })?;
                (Box::new(b), Some(name))
            }
        };
        let spec = SessionSpec {
            id: id.clone(),
            backend: kind,
            source: "host".into(),
            shell: spawn.program,
            args: spawn.args,
            cwd: spawn.cwd.display().to_string(),
            tmux_session,
            agent_id: None,
            policy: req.policy,
            container_id: None,
            created_at: Utc::now(),
        };
        let session = self.insert_session(spec, size, req.owner, output, backend);
        self.persist_now().await;
        Ok(session)
    }

    /// Registers a session whose backend was started elsewhere (container agents, external
    /// sessions) and publishes `session_created`.
    pub fn insert_session(
        &self,
        spec: SessionSpec,
        size: TermSize,
        owner: Owner,
        output: Arc<Output>,
        backend: Box<dyn Backend>,
    ) -> Arc<Session> {
        self.insert(
            spec,
            size,
            owner,
            output,
            backend,
            EventKind::SessionCreated,
        )
    }

    /// Registers a session carried over from a previous run of the hub (same id, same owner)
    /// and publishes `session_restored`.
    pub fn insert_restored(
        &self,
        spec: SessionSpec,
        size: TermSize,
        owner: Owner,
        output: Arc<Output>,
        backend: Box<dyn Backend>,
    ) -> Arc<Session> {
        self.reserve_id(&spec.id);
        self.insert(
            spec,
            size,
            owner,
            output,
            backend,
            EventKind::SessionRestored,
        )
    }

    fn insert(
        &self,
        spec: SessionSpec,
        size: TermSize,
        owner: Owner,
        output: Arc<Output>,
        backend: Box<dyn Backend>,
        event: fn(SessionAdded) -> EventKind,
    ) -> Arc<Session> {
        let id = spec.id.clone();
        let resolved = self
            .policy()
            .loaded()
            .profiles
            .resolve(owner.cli_type.as_deref());
        if resolved.unknown_cli_type.is_some() {
            tracing::warn!(session = %id, "{}", resolved.reason);
        }
        let profile = resolved.profile;
        let ingested = self.metrics().output_bytes(&spec.source);
        output.count_into(ingested);
        let session = Session::new(
            spec,
            size,
            owner,
            output,
            backend,
            profile,
            self.inner.guard.clone(),
        );
        let events = self.inner.events.clone();
        let agent_id = session.spec().agent_id.clone();
        let session_id = id.clone();
        session.set_on_state_change(move |c| {
            // No terminal text in it (state and rule names only): nothing to redact.
            let _ = events.send(HubEvent::now(EventKind::SessionStateChanged {
                session_id: session_id.clone(),
                agent_id: agent_id.clone(),
                state: c.state,
                previous: c.previous,
                since: c.since,
                rule: c.rule.clone(),
            }));
        });
        self.inner
            .sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), session.clone());
        let spec = session.spec();
        self.emit(event(SessionAdded {
            session_id: id,
            backend: spec.backend,
            source: spec.source.clone(),
            agent_id: spec.agent_id.clone(),
            owner: session.owner(),
        }));
        session
    }

    /// Marks an id as taken (an id carried over from a previous run).
    pub fn reserve_id(&self, id: &str) {
        self.inner
            .issued_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string());
    }

    /// Remembers the id and owner a container's session had before a restart, for when the
    /// agent's terminal is attached again.
    pub fn remember_container_session(&self, container_id: &str, id: &str, owner: Owner) {
        self.reserve_id(id);
        self.inner
            .container_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(container_id.to_string(), (id.to_string(), owner));
    }

    /// The id and owner a container's session had before a restart, once.
    pub fn take_container_session(&self, container_id: &str) -> Option<(String, Owner)> {
        self.inner
            .container_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(container_id)
    }

    /// Removes a session from the registry without touching its program.
    pub fn remove_session(&self, id: &str) -> Option<Arc<Session>> {
        let removed = self
            .inner
            .sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        if let Some(s) = &removed {
            s.close();
        }
        removed
    }

    /// The persistence task, if one was started.
    pub fn persistence(&self) -> Option<&crate::persist::Persistence> {
        self.inner.persistence.get()
    }

    /// Writes the registry now (atomically and synced) when the hub runs with persistence, so
    /// a change is durable before the API acknowledges it: a crash right after the reply
    /// loses nothing.
    pub async fn persist_now(&self) {
        if let Some(p) = self.persistence() {
            p.save().await;
        }
    }

    /// Changes a session's owner identity (`update-ownership`); durable before it returns.
    pub async fn update_ownership(&self, id: &str, owner: Owner) -> HubResult<Arc<Session>> {
        let session = self.get(id)?;
        session.update_owner(owner);
        self.emit(EventKind::OwnershipChanged {
            session_id: id.to_string(),
            owner: session.owner(),
        });
        self.persist_now().await;
        Ok(session)
    }

    pub(crate) fn set_persistence(&self, p: crate::persist::Persistence) {
        let _ = self.inner.persistence.set(p);
    }

    /// The container agents.
    pub fn agents(&self) -> &Agents {
        &self.inner.agents
    }

    /// The policies and agent profiles (see [`crate::policy`]).
    pub fn policy(&self) -> &crate::policy::Engine {
        &self.inner.policy
    }

    /// The task registry (see [`crate::tasks`]).
    pub fn tasks(&self) -> &Tasks {
        &self.inner.tasks
    }

    /// The session with this id.
    pub fn get(&self, id: &str) -> HubResult<Arc<Session>> {
        self.inner
            .sessions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| HubError::SessionNotFound { id: id.to_string() })
    }

    /// All sessions, ordered by id.
    pub fn list(&self) -> Vec<Arc<Session>> {
        self.inner
            .sessions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Kills a session's processes (hang-up, then SIGKILL after a grace period) and removes it.
    pub async fn kill(&self, id: &str) -> HubResult<Option<ExitInfo>> {
        let session = self.get(id)?;
        if !session.capabilities().kill {
            return Err(HubError::KillUnsupported { id: id.into() });
        }
        let result = session.terminate(TermSignal::Hup).await;
        self.emit(EventKind::SessionKilled {
            session_id: id.to_string(),
        });
        self.inner
            .sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        session.close();
        self.persist_now().await;
        result?;
        // Give the waiter a moment to record how the program ended.
        Ok(session.output().wait_exit(EXIT_RECORD_WAIT).await)
    }

    /// Kills running tasks, then stops every host PTY session (they cannot outlive the hub);
    /// tmux sessions and container agents keep running, and their tmux clients detach cleanly.
    /// Stopped PTY sessions stay listed as exited, so the registry saved after this says how
    /// they ended.
    pub async fn shutdown(&self) {
        self.inner.closing.cancel();
        crate::tasks::shutdown(self).await;
        let running_ptys: Vec<Arc<Session>> = self
            .list()
            .into_iter()
            .filter(|s| {
                s.spec().backend == crate::protocol::SessionBackend::Pty
                    && s.output().exit().is_none()
            })
            .collect();
        for session in &running_ptys {
            let _ = session.terminate(TermSignal::Hup).await;
        }
        for session in &running_ptys {
            session.output().wait_exit(EXIT_RECORD_WAIT).await;
        }
        for session in self.list() {
            if session.spec().backend != crate::protocol::SessionBackend::Pty {
                session.detach().await;
            }
        }
    }
}
