//! Support for tests against a real Docker engine: gating (skip on a laptop without an
//! engine, fail in CI where `AGENT_HUB_DOCKER_TESTS=required`), hubs with container agents
//! and their own hub id, cleanup of every container by label even when a test fails (on the
//! test rig's remote engine too), a proxy to the engine that a test can cut to make the engine
//! vanish mid-stream, and the rig's remote engine (`tests/rig/remote-engine.sh`), which a test
//! can freeze.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use agent_hub::config::HubConfig;
use agent_hub::daemon::Components;

use crate::support::TestHub;

/// The image the agent tests run (built by `docker/build-offline.sh`): `AGENT_HUB_TEST_IMAGE`,
/// else `AGENT_TEST_IMAGE` of `docker/images.env`.
pub fn test_image() -> String {
    std::env::var("AGENT_HUB_TEST_IMAGE")
        .unwrap_or_else(|_| crate::images::image("AGENT_TEST_IMAGE"))
}

/// Whether Docker tests are required (`AGENT_HUB_DOCKER_TESTS=required`, CI): what cannot run
/// fails instead of skipping.
pub fn docker_required() -> bool {
    std::env::var("AGENT_HUB_DOCKER_TESTS").is_ok_and(|v| v == "required")
}

/// Whether Docker tests can run. Panics when they are required and cannot.
pub fn docker_ready() -> bool {
    let required = docker_required();
    let engine = Command::new("docker")
        .arg("info")
        .output()
        .is_ok_and(|o| o.status.success());
    let image = engine
        && Command::new("docker")
            .args(["image", "inspect", &test_image()])
            .output()
            .is_ok_and(|o| o.status.success());
    if engine && image {
        return true;
    }
    let why = if !engine {
        "no Docker engine answers `docker info`"
    } else {
        "the test image is missing (run docker/build-offline.sh)"
    };
    if required {
        panic!("Docker tests are required (AGENT_HUB_DOCKER_TESTS=required) but {why}");
    }
    eprintln!("SKIPPED: Docker test skipped: {why}");
    false
}

/// Skips the test (returns) when Docker tests cannot run here.
#[macro_export]
macro_rules! require_docker {
    () => {
        if !$crate::docker_support::docker_ready() {
            return;
        }
    };
}

/// The local engine's loopback TCP endpoint (`AGENT_HUB_DOCKER_TCP`), a second name for it;
/// `None` (the test skips, saying so) when unset. Panics instead when Docker tests are
/// required.
pub fn docker_tcp() -> Option<String> {
    let tcp = std::env::var("AGENT_HUB_DOCKER_TCP").ok();
    if tcp.is_none() {
        if docker_required() {
            panic!("AGENT_HUB_DOCKER_TCP must name the engine's loopback TCP endpoint in CI");
        }
        eprintln!(
            "SKIPPED: set AGENT_HUB_DOCKER_TCP=tcp://127.0.0.1:2375 to test a second endpoint"
        );
    }
    tcp
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A unique hub id for one test, so parallel tests never see each other's containers.
pub fn unique_hub_id() -> String {
    format!(
        "t{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// An `[[agents]]` entry running bash in the test image.
pub fn agent_toml(id: &str, extra: &str) -> String {
    format!(
        "[[agents]]\nid = \"{id}\"\nimage = \"{}\"\ncommand = [\"bash\", \"--norc\", \"--noprofile\"]\nnetwork = \"none\"\nready_pattern = '[$#] *$'\nready_timeout = 20\nstop_grace = 2\n{extra}\n",
        test_image()
    )
}

/// Removes every container of a hub id, then its volumes (the agents' homes), even when the
/// test failed: on the local engine and on the rig's remote engine (when there is one).
pub struct ContainerGuard(pub String);

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        // The rig too, unless a test has frozen it (that test thaws it before its hub's guard
        // runs, and no other test has containers there meanwhile).
        let rig = std::env::var("AGENT_HUB_REMOTE_ENGINE")
            .ok()
            .filter(|_| !rig_frozen());
        for host in std::iter::once(None).chain(rig.as_deref().map(Some)) {
            remove_hub_objects(&self.0, host);
        }
    }
}

/// [`ContainerGuard`] on another engine (`docker -H ENGINE`).
pub struct EngineGuard {
    pub hub_id: String,
    pub engine: String,
}

impl Drop for EngineGuard {
    fn drop(&mut self) {
        remove_hub_objects(&self.hub_id, Some(&self.engine));
    }
}

/// Removes every container of a hub id, then its volumes, on the local engine or `host`.
fn remove_hub_objects(hub_id: &str, host: Option<&str>) {
    let label = format!("label=agent-hub.hub={hub_id}");
    let steps: [(&[&str], &[&str]); 2] = [
        (&["ps", "-aq", "--filter"], &["rm", "-f"]),
        (&["volume", "ls", "-q", "--filter"], &["volume", "rm", "-f"]),
    ];
    for (list, remove) in steps {
        let Ok(out) = docker_on(host).args(list).arg(&label).output() else {
            continue;
        };
        let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect();
        if !ids.is_empty() {
            let _ = docker_on(host).args(remove).args(&ids).output();
        }
    }
}

/// The docker CLI against `host` (`None`: the local engine). A remote engine gets 30 s: a frozen
/// one would hold the CLI for ever.
fn docker_on(host: Option<&str>) -> Command {
    match host {
        None => Command::new("docker"),
        Some(host) => {
            let mut c = Command::new("timeout");
            c.args(["30", "docker"]).env("DOCKER_HOST", host);
            c
        }
    }
}

/// A hub with container agents (`agents_toml` is `[[agents]]` text) and its sync loop running.
pub async fn hub_with_agents(agents_toml: &str) -> (TestHub, ContainerGuard) {
    hub_with_agents_and(agents_toml, |_| {}).await
}

/// A hub like [`hub_with_agents`] with `adjust` applied to its config.
pub async fn hub_with_agents_and(
    agents_toml: &str,
    adjust: impl FnOnce(&mut HubConfig),
) -> (TestHub, ContainerGuard) {
    let components = Components {
        audit: true,
        agent_sync: true,
        ..Default::default()
    };
    start_hub(agents_toml, components, adjust).await
}

/// A hub like [`hub_with_agents`] whose agents can call it from their containers (its unix
/// socket served, the `agent-hub` binary mounted), with `adjust` applied to its config and
/// the agents `start` started (each start must succeed).
pub async fn hub_with_started_agents(
    agents_toml: &str,
    start: &[&str],
    adjust: impl FnOnce(&mut HubConfig),
) -> (TestHub, ContainerGuard) {
    let components = Components {
        audit: true,
        agent_sync: true,
        unix_socket: true,
        ..Default::default()
    };
    let (hub, guard) = start_hub(agents_toml, components, |c| {
        c.hub_binary = Some(crate::cli::BIN.into());
        adjust(c);
    })
    .await;
    for id in start {
        let (status, v) = hub
            .post(&format!("/v1/agents/{id}/start"), serde_json::json!({}))
            .await;
        assert_eq!(status, 200, "{id}: {v}");
    }
    (hub, guard)
}

/// A hub like [`hub_with_agents`] serving on `listener`, whose agents are on `engine` (removed
/// from there when the guard drops).
pub async fn hub_with_agents_on(
    listener: tokio::net::TcpListener,
    engine: &str,
    agents_toml: &str,
) -> (TestHub, EngineGuard) {
    let hub_id = unique_hub_id();
    let guard = EngineGuard {
        hub_id: hub_id.clone(),
        engine: engine.to_string(),
    };
    let parsed = HubConfig::parse(
        &format!("hub_id = \"{hub_id}\"\n{agents_toml}"),
        "test.toml",
    )
    .expect("test config parses");
    let components = Components {
        audit: true,
        agent_sync: true,
        ..Default::default()
    };
    let hub = TestHub::start_components_on(listener, components, |c| {
        c.hub_id = parsed.hub_id.clone();
        c.agents = parsed.agents.clone();
    })
    .await;
    (hub, guard)
}

/// A hub of its own hub id with these components and the agents of `agents_toml`.
async fn start_hub(
    agents_toml: &str,
    components: Components,
    adjust: impl FnOnce(&mut HubConfig),
) -> (TestHub, ContainerGuard) {
    let hub_id = unique_hub_id();
    let guard = ContainerGuard(hub_id.clone());
    let parsed = HubConfig::parse(
        &format!("hub_id = \"{hub_id}\"\n{agents_toml}"),
        "test.toml",
    )
    .expect("test config parses");
    let hub = TestHub::start_components(components, |c| {
        c.hub_id = parsed.hub_id.clone();
        c.agents = parsed.agents.clone();
        adjust(c);
    })
    .await;
    (hub, guard)
}

/// Runs `docker ARGS` and returns stdout (panics on failure).
pub fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("docker CLI");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// tmux clients attached to the agent session in a container.
pub fn tmux_clients(container: &str) -> usize {
    let out = Command::new("docker")
        .args(["exec", container, "tmux", "list-clients", "-t", "agent"])
        .output()
        .expect("docker exec");
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// The `cat`s of the pane pipe in a container (#17): the writer tmux's `pipe-pane` runs and the
/// reader the hub streams from; two while the hub is attached, none left after it detaches.
/// The processes one attached agent's pane pipe has in its container: the `cat` that
/// `pipe-pane` runs, writing into the FIFO the hub reads through the mounted pipe directory
/// (a relayed pipe, on a remote engine, has a second `cat` reading the FIFO).
pub const PIPE_PROCESSES: usize = 1;

pub fn pane_pipe_processes(container: &str) -> usize {
    let out = docker(&["exec", container, "ps", "-eo", "args"]);
    out.lines()
        .filter(|l| *l == "cat" || l.starts_with("cat /tmp/agent-hub-pipe."))
        .count()
}

/// Processes in a container whose command starts with `tmux` and that are clients, not the
/// server (the server runs as `tmux start-server ...`).
pub fn tmux_client_processes(container: &str) -> usize {
    let out = docker(&["exec", container, "ps", "-eo", "args"]);
    out.lines()
        .filter(|l| l.starts_with("tmux") && (l.contains(" attach") || l.contains("-C")))
        .count()
}

/// A TCP proxy to the local engine's unix socket; `cut()` makes the engine vanish for every
/// client that goes through it, mid-stream included; `freeze(true)` makes it go quiet as a
/// stopped `dockerd` does (connections are accepted, nothing passes either way) until
/// `freeze(false)` lets everything held through.
pub struct EngineProxy {
    pub url: String,
    tasks: tokio::task::JoinSet<()>,
    conns: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
    frozen: tokio::sync::watch::Sender<bool>,
}

/// Copies `from` to `to`, holding what it read while the proxy is frozen.
async fn pass<R, W>(mut from: R, mut to: W, mut frozen: tokio::sync::watch::Receiver<bool>)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if frozen.wait_for(|f| !*f).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

impl EngineProxy {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("tcp://{}", listener.local_addr().unwrap());
        let conns: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>> =
            Default::default();
        let (frozen, _) = tokio::sync::watch::channel(false);
        let c2 = conns.clone();
        let f2 = frozen.clone();
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut gate = f2.subscribe();
                let handle = tokio::spawn(async move {
                    if gate.wait_for(|f| !*f).await.is_err() {
                        return;
                    }
                    let Ok(engine) = tokio::net::UnixStream::connect("/var/run/docker.sock").await
                    else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (er, ew) = engine.into_split();
                    tokio::join!(pass(cr, ew, gate.clone()), pass(er, cw, gate));
                });
                c2.lock().unwrap().push(handle.abort_handle());
            }
        });
        EngineProxy {
            url,
            tasks,
            conns,
            frozen,
        }
    }

    /// Holds (`true`) or lets through (`false`) everything on every connection.
    pub fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }

    /// Holds everything until the guard is dropped.
    pub fn frozen(&self) -> ProxyFrozen<'_> {
        self.freeze(true);
        ProxyFrozen(self)
    }

    /// Stops accepting and drops every open connection.
    pub fn cut(&mut self) {
        self.tasks.abort_all();
        for c in self.conns.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

/// A frozen [`EngineProxy`]: lets everything through when dropped.
pub struct ProxyFrozen<'a>(&'a EngineProxy);

impl Drop for ProxyFrozen<'_> {
    fn drop(&mut self) {
        self.0.freeze(false);
    }
}

impl Drop for EngineProxy {
    fn drop(&mut self) {
        self.cut();
    }
}

/// A hub run as a process of its own from a `hub.toml` of its own, which its restarts read
/// again (`spawn`): its containers, volumes and tmux server are removed when it is dropped.
pub struct ConfiguredHub {
    pub base: String,
    pub data: std::path::PathBuf,
    pub config: std::path::PathBuf,
    /// The settings every write of the file starts with: address, data dir, hub id, socket.
    settings: String,
    _tmux: crate::support::TmuxServerGuard,
    _containers: ContainerGuard,
    _dir: tempfile::TempDir,
}

impl ConfiguredHub {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let hub_id = unique_hub_id();
        let socket = format!("ah-{hub_id}");
        let port = crate::hub_process::free_port();
        let data = dir.path().join("data");
        ConfiguredHub {
            base: format!("http://127.0.0.1:{port}"),
            config: dir.path().join("hub.toml"),
            settings: format!(
                "listen = \"127.0.0.1:{port}\"\ndata_dir = \"{}\"\nhub_id = \"{hub_id}\"\ntmux_socket = \"{socket}\"\n",
                data.display()
            ),
            data,
            _tmux: crate::support::TmuxServerGuard(socket),
            _containers: ContainerGuard(hub_id),
            _dir: dir,
        }
    }

    /// Writes its `hub.toml`: the hub's own settings, then `rest` (more settings, `[[agents]]`).
    pub fn write_config(&self, rest: &str) {
        std::fs::write(&self.config, format!("{}{rest}", self.settings)).unwrap();
    }

    /// The hub id its containers carry (`agent-hub.hub`).
    pub fn hub_id(&self) -> &str {
        &self._containers.0
    }

    /// Starts the hub on its `hub.toml` as it is now.
    pub async fn spawn(&self) -> crate::hub_process::HubProcess {
        crate::hub_process::HubProcess::spawn_config(&self.config, &self.base).await
    }
}

/// The test rig's remote engine (`tests/rig/remote-engine.sh`, docs/testing.md): a `dockerd` on
/// this machine that the hub reaches only over TCP and whose files the hub cannot see (nor it
/// the hub's). Tests that use it hold a shared lock on it, across test processes too; the one
/// that freezes it holds it alone ([`remote_engine_to_freeze`]), so nobody else's agents go
/// quiet.
pub struct RemoteEngine {
    /// `AGENT_HUB_REMOTE_ENGINE` (`tcp://127.0.0.1:2376`).
    pub endpoint: String,
    /// `AGENT_HUB_REMOTE_DATA_ROOT`: the engine's data root, which this process cannot see into.
    pub data_root: std::path::PathBuf,
    /// Its dockerd's pidfile (`AGENT_HUB_REMOTE_PIDFILE`, default `/run/agent-hub-rig.pid`).
    pidfile: std::path::PathBuf,
    alone: bool,
    _lock: std::fs::File,
}

/// The rig's remote engine, shared with other tests; `None` (the test skips, saying so) when
/// `AGENT_HUB_REMOTE_ENGINE` is unset or it does not answer. Panics instead when Docker tests
/// are required.
pub fn remote_engine() -> Option<RemoteEngine> {
    open_remote_engine(false)
}

/// The rig's remote engine, for this test alone (it may [`RemoteEngine::freeze`] it): waits
/// until no other test uses it.
pub fn remote_engine_to_freeze() -> Option<RemoteEngine> {
    open_remote_engine(true)
}

/// The rig's dockerd's pidfile: `AGENT_HUB_REMOTE_PIDFILE`, default `/run/agent-hub-rig.pid`.
fn rig_pidfile() -> std::path::PathBuf {
    std::env::var("AGENT_HUB_REMOTE_PIDFILE")
        .unwrap_or_else(|_| "/run/agent-hub-rig.pid".into())
        .into()
}

/// Whether the rig's dockerd is stopped (SIGSTOP: a test froze it).
fn rig_frozen() -> bool {
    let pid = std::fs::read_to_string(rig_pidfile()).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    // `PID (COMM) STATE ...`: the state follows the command's closing parenthesis.
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| rest.starts_with('T'))
}

fn open_remote_engine(alone: bool) -> Option<RemoteEngine> {
    let skip = |why: String| {
        if docker_required() {
            panic!("Docker tests are required (AGENT_HUB_DOCKER_TESTS=required) but {why}");
        }
        eprintln!("SKIPPED: remote-engine test skipped: {why}");
        None
    };
    let Ok(endpoint) = std::env::var("AGENT_HUB_REMOTE_ENGINE") else {
        return skip(
            "AGENT_HUB_REMOTE_ENGINE is unset (start the rig: bash tests/rig/remote-engine.sh \
             start; then AGENT_HUB_REMOTE_ENGINE=tcp://127.0.0.1:2376 \
             AGENT_HUB_REMOTE_DATA_ROOT=/var/lib/agent-hub-rig)"
                .into(),
        );
    };
    let lock_path = std::env::temp_dir().join("agent-hub-rig.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap_or_else(|e| panic!("{}: {e}", lock_path.display()));
    if alone {
        lock.lock()
    } else {
        lock.lock_shared()
    }
    .unwrap_or_else(|e| panic!("lock {}: {e}", lock_path.display()));
    let rig = RemoteEngine {
        endpoint,
        data_root: std::env::var("AGENT_HUB_REMOTE_DATA_ROOT")
            .unwrap_or_else(|_| "/var/lib/agent-hub-rig".into())
            .into(),
        pidfile: rig_pidfile(),
        alone,
        _lock: lock,
    };
    if !rig.answers() {
        return skip(format!(
            "the remote engine {} does not answer (bash tests/rig/remote-engine.sh start)",
            rig.endpoint
        ));
    }
    if !rig.has_image(&test_image()) {
        // It has what it is given (the rig's script gives it the test image at its start).
        rig.load_image(&test_image());
    }
    Some(rig)
}

impl RemoteEngine {
    /// The docker CLI against this engine (30 s at most).
    pub fn cli(&self) -> Command {
        docker_on(Some(&self.endpoint))
    }

    /// Runs `docker ARGS` on this engine and returns stdout (panics on failure).
    pub fn docker(&self, args: &[&str]) -> String {
        let out = self.cli().args(args).output().expect("docker CLI");
        assert!(
            out.status.success(),
            "docker {args:?} on {}: {}",
            self.endpoint,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Whether it answers `docker info` within 5 s.
    pub fn answers(&self) -> bool {
        Command::new("timeout")
            .args(["5", "docker", "info"])
            .env("DOCKER_HOST", &self.endpoint)
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Whether it holds `image`.
    pub fn has_image(&self, image: &str) -> bool {
        self.cli()
            .args(["image", "inspect", image])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The images it holds, as `REPOSITORY:TAG`.
    pub fn images(&self) -> Vec<String> {
        self.docker(&["image", "ls", "--format", "{{.Repository}}:{{.Tag}}"])
            .lines()
            .map(String::from)
            .collect()
    }

    /// Gives it `image` from the local engine (`docker save | docker load`), as the rig's
    /// script does: it has nothing it is not given.
    pub fn load_image(&self, image: &str) {
        let mut save = Command::new("docker")
            .args(["save", image])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("docker save");
        let load = self
            .cli()
            .args(["load", "-q"])
            .stdin(save.stdout.take().expect("save's stdout"))
            .output()
            .expect("docker load");
        assert!(
            save.wait().is_ok_and(|s| s.success()),
            "docker save {image}"
        );
        assert!(
            load.status.success(),
            "docker load of {image} on {}: {}",
            self.endpoint,
            String::from_utf8_lossy(&load.stderr)
        );
    }

    /// Its dockerd, from the pidfile.
    pub fn pid(&self) -> nix::unistd::Pid {
        let text = std::fs::read_to_string(&self.pidfile)
            .unwrap_or_else(|e| panic!("{}: {e}", self.pidfile.display()));
        let pid: i32 = text
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", self.pidfile.display()));
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert_eq!(
            comm.trim(),
            "dockerd",
            "pid {pid} of {}",
            self.pidfile.display()
        );
        nix::unistd::Pid::from_raw(pid)
    }

    /// Stops its dockerd (SIGSTOP): its API goes quiet (connections are taken, nothing is
    /// answered) while its containers run on; thawed when the guard is dropped, so a failing
    /// test never leaves it frozen. Only for a test that holds the engine alone.
    pub fn freeze(&self) -> Frozen<'_> {
        assert!(
            self.alone,
            "freeze needs the engine alone (remote_engine_to_freeze)"
        );
        nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGSTOP)
            .expect("SIGSTOP the rig's dockerd");
        Frozen(self)
    }

    /// Lets its dockerd run again (SIGCONT).
    pub fn thaw(&self) {
        let _ = nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGCONT);
    }
}

impl Drop for RemoteEngine {
    fn drop(&mut self) {
        if self.alone {
            self.thaw();
        }
    }
}

/// A frozen remote engine: thawed when dropped.
pub struct Frozen<'a>(&'a RemoteEngine);

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        self.0.thaw();
    }
}
