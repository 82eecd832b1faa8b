//! The daemon: the one place the hub, its components, the API listener and the signal handlers
//! are started and stopped. `serve`, the integration tests and the benches all start a hub
//! through [`Daemon::start`]; [`Daemon::shutdown`] cancels the root token and waits for every
//! task the components started (each runs on the hub's [`TaskTracker`]).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{AgentDef, HubConfig};
use crate::hub::Hub;
use crate::persist::Persistence;

/// Why the daemon did not start (or, for the unix socket, serves TCP only).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The policies directory cannot be loaded (preflight).
    #[error(transparent)]
    Policies(#[from] crate::policy::PolicyError),
    /// An agent's image is missing on its (reachable) engine; `location` is its place in
    /// hub.toml.
    #[error(
        "{location}: agent '{agent}': image: image '{image}' not found on {engine} (build or pull it first)"
    )]
    ImageMissing {
        location: String,
        agent: String,
        image: String,
        engine: String,
    },
    /// An agent's image runs as a user that cannot write its workspace's repository: its
    /// every start would be refused (`WORKSPACE_NOT_WRITABLE`).
    #[error("{location}: agent '{agent}': workspace: {message}")]
    WorkspaceNotWritable {
        location: String,
        agent: String,
        message: String,
    },
    #[error("cannot serve the API on {}: {source}", path.display())]
    UnixSocket {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How long shutdown waits for background tasks before it gives up on them (a task stuck in a
/// blocking call must not keep the process alive forever).
const TASKS_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Which components run besides the session registry and the API.
#[derive(Debug, Clone, Copy, Default)]
pub struct Components {
    /// The registry file, lifecycle log and snapshots; restores the previous run's sessions.
    pub persistence: bool,
    /// One Docker sync loop per endpoint of a defined agent.
    pub agent_sync: bool,
    /// The policy loop (idle timeouts and the other policies).
    pub policy_runner: bool,
    /// The audit recorder of hub events and the audit retention loop (when audit is enabled).
    pub audit: bool,
    /// SIGTERM/SIGINT shut the daemon down, SIGHUP reloads the policies.
    pub signals: bool,
    /// Refuse to start on a bad policies directory, an agent image missing from a reachable
    /// engine, or one whose user cannot write its agent's workspace.
    pub preflight: bool,
    /// The API on a unix socket in the data dir (`run/api.sock`), for container agents.
    pub unix_socket: bool,
}

impl Components {
    /// Everything: what `agent-hub serve` runs.
    pub fn all() -> Self {
        Components {
            persistence: true,
            agent_sync: true,
            policy_runner: true,
            audit: true,
            signals: true,
            preflight: true,
            unix_socket: true,
        }
    }
}

/// How to start a daemon.
#[derive(Debug, Default)]
pub struct DaemonOptions {
    /// An already bound listener (tests bind 127.0.0.1:0); `None` binds `config.listen`.
    pub listener: Option<TcpListener>,
    pub components: Components,
    /// Sessions opened before the API answers (`serve --open-shell`); one that cannot be
    /// opened is reported in the log and does not stop the daemon.
    pub open_sessions: Vec<crate::hub::CreateSession>,
}

/// A running hub with its API.
pub struct Daemon {
    hub: Hub,
    addr: SocketAddr,
    root: CancellationToken,
    tracker: TaskTracker,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    persistence: Option<Persistence>,
    restored: usize,
}

impl Daemon {
    /// Starts the hub, the chosen components and the API. Errors are for the operator
    /// (a port in use, a bad policies directory).
    pub async fn start(config: HubConfig, opts: DaemonOptions) -> Result<Daemon, DaemonError> {
        let listener = match opts.listener {
            Some(l) => l,
            None => {
                let addr = config.listen;
                TcpListener::bind(addr)
                    .await
                    .map_err(|source| DaemonError::Listen { addr, source })?
            }
        };
        let addr = listener.local_addr().map_or(config.listen, |a| a);
        let parts = opts.components;
        if parts.preflight {
            crate::policy::Loaded::load(&config)?;
        }
        let access =
            crate::access::Access::open(config.auth, config.tokens.clone(), &config.data_dir);
        let root = CancellationToken::new();
        let tracker = TaskTracker::new();
        let hub = Hub::with_lifecycle(config, access, root.clone(), tracker.clone());
        hub.set_api_addr(addr);
        if parts.preflight {
            check_images(&hub).await?;
        }
        if parts.audit && hub.audit().enabled() {
            hub.audit().spawn_retention(&tracker, root.clone());
            crate::audit::events::Recorder {
                events: hub.events().clone(),
                audit: hub.audit().clone(),
            }
            .start(&tracker, root.clone());
        }
        hub.notifier().start(&tracker, root.clone());
        // Before the Docker sync: container sessions get their ids and owners back.
        let persistence = match parts.persistence {
            true => {
                let p = crate::persist::start(hub.persist_handles()).await;
                hub.set_persistence(p.clone());
                Some(p)
            }
            false => None,
        };
        let restored = hub.list().len();
        if parts.agent_sync {
            hub.agent_sync().start(&tracker, root.clone());
            let agents = hub.agents().clone();
            crate::agents::work::start(agents.clone(), hub.events(), &tracker, root.clone());
            crate::agents::workspace_push::start(agents, hub.events(), &tracker, root.clone());
        }
        if parts.policy_runner {
            hub.policy_runner().start(&tracker, root.clone());
        }
        if parts.signals {
            tracker.spawn(shutdown_on_signal(root.clone()));
            tracker.spawn(reload_on_sighup(hub.clone()));
        }
        for req in opts.open_sessions {
            let label = req.owner.label.clone().unwrap_or_default();
            match hub.create_session(req).await {
                Ok(s) => eprintln!(
                    "agent-hub: opened shell session {} (label \"{label}\")",
                    s.id()
                ),
                Err(e) => eprintln!("agent-hub: could not open a shell session: {e}"),
            }
        }
        let server = tracker.spawn(crate::api::serve(listener, hub.clone(), root.clone()));
        #[cfg(unix)]
        if parts.unix_socket {
            match bind_unix_socket(&hub.agents().hub_access().socket_path()) {
                Ok(unix) => {
                    tracker.spawn(crate::api::serve_unix(unix, hub.clone(), root.clone()));
                }
                Err(e) => tracing::warn!("{e}; container agents cannot reach the hub"),
            }
        }
        Ok(Daemon {
            hub,
            addr,
            root,
            tracker,
            server,
            persistence,
            restored,
        })
    }

    /// The session registry and its components.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// Where the API listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many sessions persistence brought back from the previous run (before the Docker
    /// sync adopts running containers).
    pub fn restored_sessions(&self) -> usize {
        self.restored
    }

    /// The root token: cancelling it begins shutdown.
    pub fn root(&self) -> CancellationToken {
        self.root.clone()
    }

    /// Waits until something cancels the root token (a signal, a test), then shuts down.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.root.cancelled().await;
        self.shutdown().await
    }

    /// Stops the API, the tasks and the host PTY sessions (see [`Hub::shutdown`]), saves the
    /// registry, and waits for every background task. Returns the API server's result.
    pub async fn shutdown(self) -> std::io::Result<()> {
        self.root.cancel();
        let served = match self.server.await {
            Ok(result) => result,
            Err(e) => Err(std::io::Error::other(e)),
        };
        self.hub.shutdown().await;
        if let Some(p) = &self.persistence {
            p.flush().await;
        }
        self.tracker.close();
        if tokio::time::timeout(TASKS_DRAIN_TIMEOUT, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                running = self.tracker.len(),
                "shutdown: background tasks still running after {} s",
                TASKS_DRAIN_TIMEOUT.as_secs()
            );
        }
        served
    }
}

/// Binds the API's unix socket (replacing a stale one left by a previous run): the directory
/// is made traversable and the socket connectable by the agents' users (the API's own auth
/// decides what they may do).
#[cfg(unix)]
fn bind_unix_socket(path: &std::path::Path) -> Result<tokio::net::UnixListener, DaemonError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |source| DaemonError::UnixSocket {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    }
    let _ = std::fs::remove_file(path);
    let listener = tokio::net::UnixListener::bind(path).map_err(fail)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(fail)?;
    Ok(listener)
}

/// Rejects agent definitions whose image is missing on a reachable engine (on any an agent may
/// be placed on), or runs as a user that cannot write the agent's workspace. An engine that
/// cannot be reached is not an error here: host sessions keep working and the agent's start
/// says DOCKER_UNAVAILABLE.
async fn check_images(hub: &Hub) -> Result<(), DaemonError> {
    for def in hub.agents().defs() {
        for endpoint in def.engines() {
            check_image(hub, def, endpoint).await?;
        }
    }
    Ok(())
}

async fn check_image(hub: &Hub, def: &AgentDef, endpoint: &str) -> Result<(), DaemonError> {
    let docker = match hub.docker_endpoints().client(endpoint).await {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(agent = %def.id, "{e}");
            return Ok(());
        }
    };
    match docker.inspect_image(def.image.get_ref()).await {
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Err(DaemonError::ImageMissing {
            location: def.image_location.clone(),
            agent: def.id.clone(),
            image: def.image.get_ref().clone(),
            engine: crate::docker::endpoint_name(endpoint),
        }),
        Ok(image) => {
            let user = image.config.and_then(|c| c.user).unwrap_or_default();
            check_workspace(def, user).await
        }
        Err(_) => Ok(()),
    }
}

/// Refuses an agent whose image's user cannot write its workspace's repository (see
/// [`crate::workspace::agent_access`]); other workspace errors are the start's to report.
async fn check_workspace(def: &AgentDef, user: String) -> Result<(), DaemonError> {
    use crate::workspace::{access_to, AgentUser, WorkspaceError};
    let Some(ws) = &def.workspace else {
        return Ok(());
    };
    if def.clones_workspace() {
        // Its container writes a clone of its own; the hub writes the repository.
        return Ok(());
    }
    let repo = std::path::PathBuf::from(ws.repo.get_ref());
    let image = def.image.get_ref().clone();
    let checked =
        tokio::task::spawn_blocking(move || access_to(&repo, &AgentUser::parse(&user), &image))
            .await;
    match checked {
        Ok(Err(e @ WorkspaceError::NotWritable { .. })) => Err(DaemonError::WorkspaceNotWritable {
            location: def.image_location.clone(),
            agent: def.id.clone(),
            message: e.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Reloads policies and profiles on SIGHUP; a bad file is logged and the old set kept.
async fn reload_on_sighup(hub: Hub) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        let closing = hub.closing();
        loop {
            tokio::select! {
                _ = closing.cancelled() => return,
                got = hup.recv() => if got.is_none() { return },
            }
            match hub.policy_runner().reload() {
                Ok(l) => eprintln!(
                    "agent-hub: SIGHUP: reloaded {} policies, {} profiles",
                    l.policies.len(),
                    l.profiles.names().len()
                ),
                Err(e) => {
                    eprintln!("agent-hub: SIGHUP: reload failed, keeping the old policies: {e}")
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = hub;
}

/// Cancels `root` on SIGINT or SIGTERM (or when something else cancels it first).
async fn shutdown_on_signal(root: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            tokio::select! {
                _ = root.cancelled() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            root.cancel();
            return;
        };
        tokio::select! {
            _ = root.cancelled() => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::select! {
        _ = root.cancelled() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    root.cancel();
}
