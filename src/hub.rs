//! The hub: the composition root, and the API's one door to changes that must be durable
//! before the reply (create, kill, register, ownership). Sessions are started in four places:
//! host sessions in [`crate::host`] (the hub's, the daemon's first, PTY tasks'), container
//! agents in `agents::attach`, bridge sessions in [`crate::external_sessions`], and the previous
//! run's in `persist::restore`. All four enter through `SessionRegistry::add`
//! ([`crate::registry`]), the only `Session::new`, which publishes `session_created` or
//! `session_restored`. Cheap to clone; the API, the CLI's `serve` and tests all hold a `Hub`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::actor::Actor;
use crate::agents::Agents;
use crate::audit::Audit;
use crate::config::HubConfig;
use crate::error::HubResult;
use crate::event_bus::EventSink;
use crate::guard::{Guard, GuardConfig};
use crate::output::ExitInfo;
pub use crate::protocol::BackendKind;
use crate::protocol::{EventKind, HubEvent};
use crate::redact::Redactor;
use crate::registry::{Registry, SessionRegistry};
use crate::session::input::TermSignal;
use crate::session::{Owner, Session};
use crate::tasks::Tasks;

use crate::registry::EXIT_RECORD_WAIT;

pub use crate::host::CreateSession;
use crate::host::HostSessions;

/// The composition root: the session registry and the components built around it (agents,
/// tasks, policies, guard, redaction, audit, persistence). Cheap to clone. Components get the
/// narrow handles they need (the [`Registry`], the [`EventSink`], their own config), not this.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    config: Arc<HubConfig>,
    host: HostSessions,
    sessions: Arc<Registry>,
    /// Terminals other processes lend through the bridge API.
    externals: crate::external_sessions::Externals,
    /// The persistence task, when the hub runs with one (`serve`).
    persistence: std::sync::OnceLock<crate::persist::Persistence>,
    /// Cancelled when the hub begins to shut down; long-lived streams watch it. The daemon's
    /// root token (see [`crate::daemon`]).
    closing: CancellationToken,
    /// Every background task the hub's components start, so shutdown can wait for them.
    tracker: TaskTracker,
    agents: Arc<Agents>,
    /// The Docker engines the agents live on.
    endpoints: Arc<crate::docker::Endpoints>,
    tasks: Arc<Tasks>,
    policy: Arc<crate::policy::Engine>,
    /// Lifecycle events for `/v1/events`, the audit recorder and `wait_state`.
    events: EventSink,
    /// The command guard every command-capable input passes.
    guard: Arc<Guard>,
    /// Redaction for every output path.
    redactor: Arc<Redactor>,
    /// The durable audit log.
    audit: Audit,
    /// The live per-agent credentials.
    credentials: Arc<crate::credentials::Credentials>,
    /// People's credentials: the owner's token, `[[tokens]]`, sign-in codes.
    access: crate::access::Access,
    metrics: crate::metrics::Metrics,
    /// What each agent's model calls used.
    ledger: Arc<crate::ledger::Ledger>,
    budgets: Arc<crate::policy::budgets::Budgets>,
    /// The outgoing webhooks (`[[notify]]`).
    notifier: Arc<crate::notify::Notifier>,
}

impl Hub {
    /// A hub whose closing token and task tracker belong to its owner (the daemon).
    pub fn with_lifecycle(
        config: HubConfig,
        access: crate::access::Access,
        closing: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        let guard = Guard::new(&config.guard).unwrap_or_else(|e| {
            tracing::error!("{e}; using the default guard patterns");
            Guard::new(&GuardConfig::default()).unwrap_or_else(|e| panic!("default guard: {e}"))
        });
        let guard = Arc::new(guard);
        let redactor = Arc::new(Redactor::new());
        redactor.add_literals(config.redact.secrets.iter().map(String::as_str));
        // The hub's own API tokens, should one ever be typed or printed in a terminal.
        redactor.add_literals(config.tokens.iter().map(|t| t.token.as_str()));
        redactor.add_literals([access.owner_token().as_str()]);
        for def in config.agent_defs() {
            redactor.add_env_secrets(&def.env, &config.redact.secret_env);
        }
        // A webhook's headers and URL are credentials of their own.
        for hook in &config.notify {
            redactor.add_literals(hook.secrets().iter().map(String::as_str));
        }
        let audit = Audit::open(&config.audit, &config.data_dir);
        let metrics =
            crate::metrics::Metrics::new(redactor.counter(), guard.refusals(), audit.meters());
        let events = EventSink::new(redactor.clone());
        let policy = Arc::new(crate::policy::Engine::new(&config));
        let ledger = Arc::new(crate::ledger::Ledger::open(
            &config.data_dir,
            config.price_table.clone(),
        ));
        let budgets = Arc::new(crate::policy::budgets::Budgets::open(&config.data_dir));
        let profiles: crate::registry::ProfileSource = {
            let policy = policy.clone();
            Arc::new(move |cli_type| policy.loaded().profiles.resolve(cli_type))
        };
        let sessions = Arc::new(Registry::new(
            events.clone(),
            guard.clone(),
            metrics.clone(),
            profiles.clone(),
        ));
        let endpoints = Arc::new(crate::docker::Endpoints::default());
        let credentials = Arc::new(crate::credentials::Credentials::open(&config.data_dir));
        let agents = Arc::new(Agents::new(
            &config,
            crate::agents::Handles {
                sessions: sessions.clone(),
                events: events.clone(),
                metrics: metrics.clone(),
                containers: Arc::new(crate::agents::containers::DockerContainers::new(
                    endpoints.clone(),
                )),
                credentials: credentials.clone(),
                access: crate::agents::hub_access::HubAccess::new(
                    &config.data_dir,
                    config.hub_binary.clone(),
                ),
                profiles,
                ledger: ledger.clone(),
            },
        ));
        let notifier = Arc::new(crate::notify::Notifier::new(
            &config.notify,
            config.dashboard_url(),
            crate::notify::Handles {
                events: events.clone(),
                metrics: metrics.clone(),
                directory: Arc::new(crate::notify::directory::HubDirectory {
                    sessions: sessions.clone(),
                    agents: agents.clone(),
                    redactor: redactor.clone(),
                }),
                answer_links: config
                    .notify_actions
                    .then(|| Arc::new(crate::notify::answer_link::AnswerLinks::default())),
            },
        ));
        let config = Arc::new(config);
        let host = HostSessions {
            config: config.clone(),
            sessions: sessions.clone(),
            guard: guard.clone(),
            redactor: redactor.clone(),
            policy: policy.clone(),
            credentials: credentials.clone(),
            api_addr: Arc::default(),
            ledger: ledger.clone(),
        };
        let externals = crate::external_sessions::Externals {
            sessions: sessions.clone(),
            events: events.clone(),
            redactor: redactor.clone(),
            config: config.clone(),
        };
        let tasks = Arc::new(Tasks::new(crate::tasks::Handles {
            host: host.clone(),
            events: events.clone(),
            tracker: tracker.clone(),
            closing: closing.clone(),
        }));
        Hub {
            inner: Arc::new(Inner {
                host,
                metrics,
                guard,
                redactor,
                audit,
                credentials,
                access,
                sessions,
                externals,
                persistence: std::sync::OnceLock::new(),
                closing,
                tracker,
                agents,
                endpoints,
                policy,
                tasks,
                events,
                ledger,
                budgets,
                notifier,
                config,
            }),
        }
    }

    /// The tracker of the hub's background tasks.
    pub fn tracker(&self) -> &TaskTracker {
        &self.inner.tracker
    }

    /// What each agent's model calls used, kept.
    pub fn ledger(&self) -> &Arc<crate::ledger::Ledger> {
        &self.inner.ledger
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

    /// People's credentials: the owner's token, `[[tokens]]`, sign-in codes.
    pub fn access(&self) -> &crate::access::Access {
        &self.inner.access
    }

    /// Replaces the owner's token (the old one is refused from now on); the new one is
    /// redacted like the old.
    pub fn rotate_owner_token(&self) -> Result<String, crate::access::AccessError> {
        let new = self.inner.access.rotate_owner()?;
        self.inner.redactor.add_literals([new.as_str()]);
        Ok(new)
    }

    /// The live per-agent credentials.
    pub fn credentials(&self) -> &Arc<crate::credentials::Credentials> {
        &self.inner.credentials
    }

    /// The audit log.
    pub fn audit(&self) -> &Audit {
        &self.inner.audit
    }

    /// The session registry (the narrow handle components hold).
    pub fn sessions(&self) -> &Arc<Registry> {
        &self.inner.sessions
    }

    /// The event bus.
    pub fn events(&self) -> &EventSink {
        &self.inner.events
    }

    /// Publishes an event, stamped now (see [`EventSink::emit`]).
    pub fn emit(&self, kind: EventKind) {
        self.inner.events.emit(kind);
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
    pub fn config(&self) -> &Arc<HubConfig> {
        &self.inner.config
    }

    /// A new session id, never handed out before.
    pub fn new_id(&self, prefix: &str) -> String {
        self.inner.sessions.new_id(prefix)
    }

    /// Starts a session for `actor`: its program and arguments are a command too, so they
    /// pass the command guard first. Durable before it returns.
    pub async fn create_session_as(
        &self,
        actor: &Actor,
        req: CreateSession,
    ) -> HubResult<Arc<Session>> {
        let session = self.inner.host.create_as(actor, req).await?;
        self.persist_now().await;
        Ok(session)
    }

    /// Starts a host session and registers it (the hub's own sessions: not checked by the
    /// guard). Durable before it returns.
    pub async fn create_session(&self, req: CreateSession) -> HubResult<Arc<Session>> {
        let session = self.inner.host.create(req).await?;
        self.persist_now().await;
        Ok(session)
    }

    /// Records where the API listens (the daemon, once bound): host sessions given hub access
    /// get this address.
    pub fn set_api_addr(&self, addr: std::net::SocketAddr) {
        let _ = self.inner.host.api_addr.set(addr);
        if self.inner.config.public_url.is_none() {
            self.inner.notifier.set_dashboard(format!("http://{addr}"));
        }
    }

    /// The outgoing webhooks.
    pub fn notifier(&self) -> &Arc<crate::notify::Notifier> {
        &self.inner.notifier
    }

    /// Starting host sessions (the narrow handle tasks get).
    pub fn host(&self) -> &HostSessions {
        &self.inner.host
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

    /// Keeps the registry current from now on: the daemon sets the persistence it started
    /// (with [`Hub::persist_handles`]) once it has restored the previous run's sessions.
    pub fn set_persistence(&self, p: crate::persist::Persistence) {
        let _ = self.inner.persistence.set(p);
    }

    /// What persistence works with: the registry, the external sessions, the redactor, the
    /// events, the settings and the hub's lifecycle.
    pub fn persist_handles(&self) -> crate::persist::Handles {
        crate::persist::Handles {
            config: self.inner.config.clone(),
            sessions: self.inner.sessions.clone(),
            externals: self.inner.externals.clone(),
            redactor: self.inner.redactor.clone(),
            events: self.inner.events.clone(),
            closing: self.inner.closing.clone(),
            tracker: self.inner.tracker.clone(),
        }
    }

    /// Adds a terminal served by a bridge (see [`crate::external_sessions::Externals::register`]);
    /// durable before it returns.
    pub async fn register_external(
        &self,
        req: crate::external_sessions::RegisterRequest,
        check_bridge: bool,
    ) -> HubResult<(Arc<Session>, bool)> {
        let registered = self.inner.externals.register(req, check_bridge).await?;
        self.persist_now().await;
        Ok(registered)
    }

    /// Removes an external session from the registry (its program is not touched); durable
    /// before it returns. A leader's session needs `force`.
    pub async fn unregister(&self, id: &str, force: bool) -> HubResult<Arc<Session>> {
        let session = self.inner.externals.unregister(id, force).await?;
        self.persist_now().await;
        Ok(session)
    }

    /// Unregisters every external session and forgets every ended one; durable before it
    /// returns.
    pub async fn reset(&self) -> crate::external_sessions::ResetReport {
        let report = self.inner.externals.reset().await;
        self.persist_now().await;
        report
    }

    /// The container agents.
    pub fn agents(&self) -> &Arc<Agents> {
        &self.inner.agents
    }

    /// The policy runner component over this hub's sessions and agents (the daemon starts
    /// its loop; the API asks it for checks and reloads).
    pub fn policy_runner(&self) -> crate::policy::runner::PolicyRunner {
        crate::policy::runner::PolicyRunner {
            sessions: self.inner.sessions.clone(),
            agents: self.inner.agents.clone(),
            engine: self.inner.policy.clone(),
            events: self.inner.events.clone(),
            metrics: self.inner.metrics.clone(),
            guard: self.inner.guard.clone(),
            config: self.inner.config.clone(),
            budgets: self.inner.budgets.clone(),
            ledger: self.inner.ledger.clone(),
        }
    }

    /// The budgets in force and their run-time changes.
    pub fn budgets(&self) -> &Arc<crate::policy::budgets::Budgets> {
        &self.inner.budgets
    }

    /// The Docker sync component over this hub's agents (the daemon starts it).
    pub fn agent_sync(&self) -> crate::agents::sync::AgentSync {
        crate::agents::sync::AgentSync {
            agents: self.inner.agents.clone(),
            endpoints: self.inner.endpoints.clone(),
            metrics: self.inner.metrics.clone(),
        }
    }

    /// The Docker clients, one per engine.
    pub fn docker_endpoints(&self) -> &Arc<crate::docker::Endpoints> {
        &self.inner.endpoints
    }

    /// The policies and agent profiles (see [`crate::policy`]).
    pub fn policy(&self) -> &Arc<crate::policy::Engine> {
        &self.inner.policy
    }

    /// The task registry (see [`crate::tasks`]).
    pub fn tasks(&self) -> &Arc<Tasks> {
        &self.inner.tasks
    }

    /// The session with this id.
    pub fn get(&self, id: &str) -> HubResult<Arc<Session>> {
        self.inner.sessions.get(id)
    }

    /// All sessions, ordered by id.
    pub fn list(&self) -> Vec<Arc<Session>> {
        self.inner.sessions.list()
    }

    /// Kills a session's processes (hang-up, then SIGKILL after a grace period) and removes
    /// it; durable before it returns.
    pub async fn kill(&self, id: &str) -> HubResult<Option<ExitInfo>> {
        let (session, result) = self.inner.sessions.kill(id).await?;
        self.inner
            .credentials
            .revoke(&crate::credentials::session_holder(id));
        self.persist_now().await;
        result?;
        // Give the waiter a moment to record how the program ended.
        Ok(session.output().wait_exit(EXIT_RECORD_WAIT).await)
    }

    /// Kills running tasks, then stops every host PTY session (they cannot outlive the hub);
    /// tmux sessions and container agents keep running, and their tmux clients detach cleanly.
    /// Stopped PTY sessions stay listed as exited, so the registry saved here says how they
    /// ended; it is saved before the detach and sealed ([`crate::persist::Persistence::final_save`]).
    pub async fn shutdown(&self) {
        self.inner.closing.cancel();
        self.inner.tasks.shutdown().await;
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
        // The registry's last word comes before the detach: a detached client records its
        // session as closed although the tmux session lives on.
        if let Some(p) = self.persistence() {
            p.final_save().await;
        }
        for session in self.list() {
            if session.spec().backend != crate::protocol::SessionBackend::Pty {
                session.detach().await;
            }
        }
    }
}
