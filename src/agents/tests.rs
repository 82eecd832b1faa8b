//! The agents' lifecycle above a fake session registry and a fake container runtime: no
//! Docker, no tmux. (The same paths against a real engine are in `tests/it/docker*.rs`.)

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use super::containers::{
    AttachError, Attaching, ContainerState, Containers, ImageInfo, Op, Place, VolumeSpec,
};
use super::*;
use crate::backend::{Backend, BackendError, SpawnSpec, TermSize};
use crate::docker::LABEL_DEFINITION;
use crate::guard::{Guard, GuardConfig};
use crate::output::Output;
use crate::protocol::HubEvent;
use crate::redact::Redactor;
use crate::registry::{NewSession, Origin, SessionRegistry};
use crate::session::input::TermSignal;
use crate::session::{Owner, Session};

#[cfg(unix)] // git in scratch repositories
mod work;

// ---- a fake session registry ----

#[derive(Default)]
struct FakeRegistry {
    sessions: Mutex<BTreeMap<String, Arc<Session>>>,
    next_id: Mutex<u32>,
    carried_over: Mutex<HashMap<String, (String, Owner)>>,
    /// Agent id -> its ended session from before a restart.
    ended: Mutex<HashMap<String, String>>,
    added: Mutex<Vec<(String, Origin)>>,
}

impl SessionRegistry for FakeRegistry {
    fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.lock().unwrap().get(id).cloned()
    }
    fn new_id(&self, prefix: &str) -> String {
        let mut n = self.next_id.lock().unwrap();
        *n += 1;
        format!("{prefix}_{n}")
    }
    fn take_container_session(&self, container_id: &str) -> Option<(String, Owner)> {
        self.carried_over.lock().unwrap().remove(container_id)
    }
    fn take_ended_agent_session(&self, agent_id: &str) -> Option<String> {
        self.ended.lock().unwrap().remove(agent_id)
    }
    fn add(&self, new: NewSession, origin: Origin) -> Arc<Session> {
        let id = new.spec.id.clone();
        let profile = crate::agent_state::profile::ProfileSet::default().for_cli_type(None);
        let guard = Arc::new(Guard::new(&GuardConfig::default()).unwrap());
        let session = Session::new(
            new.spec,
            new.size,
            new.owner,
            new.output,
            new.backend,
            profile,
            guard,
        );
        self.sessions
            .lock()
            .unwrap()
            .insert(id.clone(), session.clone());
        self.added.lock().unwrap().push((id, origin));
        session
    }
    fn remove(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.lock().unwrap().remove(id)
    }
}

// ---- a fake container runtime ----

/// A terminal that prints `screen` when attached and remembers whether it was detached.
struct FakeTerminal {
    detached: Arc<Mutex<bool>>,
}

impl Backend for FakeTerminal {
    fn write(&self, _bytes: Vec<u8>) -> BoxFuture<'_, HubResult<()>> {
        Box::pin(async { Ok(()) })
    }
    fn resize(&self, _size: TermSize) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
    fn terminate(&self, _first: TermSignal) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
    fn pid(&self) -> Option<u32> {
        None
    }
    fn detach(&self) -> BoxFuture<'_, ()> {
        *self.detached.lock().unwrap() = true;
        Box::pin(async {})
    }
}

#[derive(Debug, Clone, Default)]
struct FakeContainer {
    id: String,
    running: bool,
    exit_code: Option<i64>,
    tmux: bool,
    /// Its `agent-hub.definition` label.
    definition: Option<String>,
    /// The ID of the image it was made from.
    image_id: Option<String>,
}

#[derive(Default)]
struct World {
    /// Image -> labels; an image not here is missing.
    images: HashMap<String, HashMap<String, String>>,
    /// Image -> its ID (`sha256:<name>` when not here).
    image_ids: HashMap<String, String>,
    /// By container name.
    containers: BTreeMap<String, FakeContainer>,
    /// Every call, in order ("create NAME", "start ID", "stop NAME", ...).
    calls: Vec<String>,
    /// What an attached terminal shows.
    screen: String,
    /// The container exits as soon as it is started.
    dies_at_start: bool,
    /// The mounts of each container created.
    mounts: Vec<Vec<String>>,
    /// The environment of each container created.
    envs: Vec<BTreeMap<String, String>>,
    /// The program and arguments of each terminal attached.
    commands: Vec<Vec<String>>,
    /// The engine cannot see the hub's data dir (a hub in a container, its data dir in its layer).
    data_dir_hidden: bool,
    /// How many containers were created (their ids count them).
    created: usize,
    /// Each file put through the engine: `DIR/PATH` and whether its container ran then.
    put: Vec<(String, bool)>,
}

impl World {
    /// The ID of the image of this name now.
    fn image_id(&self, image: &str) -> String {
        let id = self.image_ids.get(image);
        id.cloned().unwrap_or_else(|| format!("sha256:{image}"))
    }
}

#[derive(Default, Clone)]
struct FakeContainers {
    world: Arc<Mutex<World>>,
    detached: Arc<Mutex<bool>>,
}

impl FakeContainers {
    fn with_image(image: &str) -> Self {
        let fake = FakeContainers::default();
        fake.world
            .lock()
            .unwrap()
            .images
            .insert(image.into(), HashMap::new());
        fake
    }
    fn calls(&self) -> Vec<String> {
        self.world.lock().unwrap().calls.clone()
    }
    fn count(&self, verb: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.split(' ').next() == Some(verb))
            .count()
    }
    fn find<'w>(world: &'w mut World, container: &str) -> Option<&'w mut FakeContainer> {
        world
            .containers
            .iter_mut()
            .find(|(name, c)| *name == container || c.id == container)
            .map(|(_, c)| c)
    }
}

fn ready<T: Send + 'static>(v: T) -> BoxFuture<'static, T> {
    Box::pin(async move { v })
}

impl Containers for FakeContainers {
    fn image_info<'a>(&'a self, _: &'a str, image: &'a str) -> Op<'a, Option<ImageInfo>> {
        let w = self.world.lock().unwrap();
        let labels = w.images.get(image).cloned();
        let id = w.image_id(image);
        ready(Ok(labels.map(|labels| ImageInfo {
            id: Some(id),
            labels,
            env: Vec::new(),
            user: "agent".into(),
        })))
    }
    fn engine_path<'a>(
        &'a self,
        _: &'a str,
        local: &'a std::path::Path,
    ) -> BoxFuture<'a, Option<std::path::PathBuf>> {
        let hidden = self.world.lock().unwrap().data_dir_hidden;
        ready((!hidden).then(|| local.to_path_buf()))
    }
    fn ensure_volume<'a>(&'a self, _: &'a str, spec: VolumeSpec<'a>) -> Op<'a, ()> {
        let device = spec.device.map(|d| d.display().to_string());
        let mut w = self.world.lock().unwrap();
        w.calls.push(format!(
            "volume {} {}",
            spec.name,
            device.unwrap_or_default()
        ));
        ready(Ok(()))
    }
    fn inspect<'a>(&'a self, at: Place<'a>) -> Op<'a, Option<ContainerState>> {
        let mut w = self.world.lock().unwrap();
        let state = Self::find(&mut w, at.container).map(|c| ContainerState {
            id: c.id.clone(),
            running: c.running,
            exit_code: c.exit_code,
            started_at: None,
            definition: c.definition.clone(),
            image_id: c.image_id.clone(),
        });
        ready(Ok(state))
    }
    fn create<'a>(&'a self, def: &'a AgentDef, hub_id: &'a str) -> Op<'a, String> {
        let mut w = self.world.lock().unwrap();
        let name = docker::container_name(hub_id, &def.id);
        w.created += 1;
        let id = format!("cid-{}", w.created);
        w.calls.push(format!("create {name}"));
        w.mounts.push(def.mounts.clone());
        w.envs.push(def.env.clone());
        // The label the engine would keep: the one of the config the hub sends.
        let body = docker::container_body(def, hub_id, docker::image_starts_tmux(def));
        let created = FakeContainer {
            id: id.clone(),
            definition: body.labels.unwrap_or_default().remove(LABEL_DEFINITION),
            image_id: Some(w.image_id(def.image.get_ref())),
            ..Default::default()
        };
        w.containers.insert(name, created);
        ready(Ok(id))
    }
    fn start<'a>(&'a self, at: Place<'a>) -> Op<'a, ()> {
        let mut w = self.world.lock().unwrap();
        w.calls.push(format!("start {}", at.container));
        let dies = w.dies_at_start;
        if let Some(c) = Self::find(&mut w, at.container) {
            c.running = !dies;
            c.exit_code = dies.then_some(3);
        }
        ready(Ok(()))
    }
    fn stop<'a>(&'a self, at: Place<'a>, _: u64) -> Op<'a, ()> {
        let mut w = self.world.lock().unwrap();
        w.calls.push(format!("stop {}", at.container));
        if let Some(c) = Self::find(&mut w, at.container) {
            c.running = false;
            c.tmux = false;
            c.exit_code = Some(0);
        }
        ready(Ok(()))
    }
    fn remove<'a>(&'a self, at: Place<'a>) -> Op<'a, ()> {
        let mut w = self.world.lock().unwrap();
        w.calls.push(format!("remove {}", at.container));
        w.containers
            .retain(|name, c| name != at.container && c.id != at.container);
        ready(Ok(()))
    }
    fn put_files<'a>(
        &'a self,
        at: Place<'a>,
        dir: &'a str,
        entries: &'a [crate::docker::archive::Entry],
    ) -> Op<'a, ()> {
        let mut w = self.world.lock().unwrap();
        let running = Self::find(&mut w, at.container).is_some_and(|c| c.running);
        for e in entries {
            w.put.push((format!("{dir}/{}", e.path), running));
        }
        ready(Ok(()))
    }
    fn read_files<'a>(
        &'a self,
        _: Place<'a>,
        _: &'a str,
        _: crate::docker::archive::Read,
    ) -> Op<'a, Option<crate::docker::archive::Files>> {
        ready(Ok(None))
    }
    fn agent_containers<'a>(&'a self, _: &'a str, hub_id: &'a str) -> Op<'a, Vec<String>> {
        let prefix = docker::container_name(hub_id, "");
        let w = self.world.lock().unwrap();
        let names = w.containers.keys();
        let ids = names.filter_map(|n| n.strip_prefix(&prefix).map(String::from));
        ready(Ok(ids.collect()))
    }
    fn wait_tmux_session<'a>(&'a self, at: Place<'a>, _: Duration) -> BoxFuture<'a, bool> {
        let mut w = self.world.lock().unwrap();
        ready(Self::find(&mut w, at.container).is_some_and(|c| c.running && c.tmux))
    }
    fn attach_tmux<'a>(
        &'a self,
        at: Place<'a>,
        spec: &'a SpawnSpec,
        o: Arc<Output>,
    ) -> Attaching<'a> {
        let mut w = self.world.lock().unwrap();
        w.calls.push(format!("attach {}", at.container));
        let command = std::iter::once(spec.program.clone()).chain(spec.args.iter().cloned());
        w.commands.push(command.collect());
        let screen = w.screen.clone();
        let result = match Self::find(&mut w, at.container) {
            Some(c) if c.running => {
                c.tmux = true;
                o.push(screen.as_bytes());
                Ok(Box::new(FakeTerminal {
                    detached: self.detached.clone(),
                }) as Box<dyn Backend>)
            }
            _ => Err(AttachError::Tmux(
                crate::backend::tmux::TmuxError::Command {
                    command: "exec".into(),
                    message: "exec failed: container not running".into(),
                },
            )),
        };
        ready(result)
    }
}

// ---- the component under test ----

struct Fixture {
    agents: Agents,
    registry: Arc<FakeRegistry>,
    containers: FakeContainers,
    events: tokio::sync::broadcast::Receiver<HubEvent>,
    #[cfg_attr(not(unix), allow(dead_code))] // read by a Unix-only test alone
    credentials: Arc<crate::credentials::Credentials>,
    data: tempfile::TempDir,
}

fn fixture(agent_toml: &str, containers: FakeContainers) -> Fixture {
    fixture_in(agent_toml, containers, tempfile::tempdir().unwrap())
}

/// A hub with the agent `a1` of `agent_toml` on the data dir `data` (a hub restarted on it).
fn fixture_in(agent_toml: &str, containers: FakeContainers, data: tempfile::TempDir) -> Fixture {
    let text = format!("hub_id = \"t\"\n[[agents]]\nid = \"a1\"\nimage = \"img\"\nstart_tmux = \"hub\"\nready_timeout = 2\n{agent_toml}");
    let config = HubConfig::parse(&text, "test").unwrap();
    let registry = Arc::new(FakeRegistry::default());
    let credentials = Arc::new(crate::credentials::Credentials::in_memory());
    let events = EventSink::new(Arc::new(Redactor::new()));
    let rx = events.subscribe();
    let guard = Guard::new(&GuardConfig::default()).unwrap();
    let metrics =
        crate::metrics::Metrics::new(&Default::default(), guard.refusals(), &Default::default());
    let agents = Agents::new(
        &config,
        Handles {
            sessions: registry.clone(),
            events,
            metrics,
            containers: Arc::new(containers.clone()),
            credentials: credentials.clone(),
            access: super::hub_access::HubAccess::new(data.path(), None),
            profiles: Arc::new(|c| crate::agent_state::profile::ProfileSet::default().resolve(c)),
            ledger: Arc::new(crate::ledger::Ledger::open(data.path(), Default::default())),
        },
    );
    Fixture {
        agents,
        registry,
        containers,
        events: rx,
        credentials,
        data,
    }
}

fn event_types(rx: &mut tokio::sync::broadcast::Receiver<HubEvent>) -> Vec<String> {
    std::iter::from_fn(|| rx.try_recv().ok())
        .map(|e| e.type_name().to_string())
        .collect()
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn a_start_creates_the_container_and_registers_its_terminal_as_a_session() {
    let mut f = fixture("label = \"worker-1\"\n", FakeContainers::with_image("img"));
    let started = f.agents.start("a1", false).await.unwrap();
    let (info, already) = (started.info, started.already_running);
    assert!(!already);
    assert!(started.recreated.is_none());
    assert_eq!(info.status, AgentStatus::Running);
    assert_eq!(info.container_id.as_deref(), Some("cid-1"));
    let home = f.data.path().join("agents/a1/home");
    assert_eq!(
        f.containers.calls(),
        [
            format!("volume agent-hub-t-a1-home {}", home.display()),
            "create agent-hub-t-a1".into(),
            "start cid-1".into(),
            "attach cid-1".into()
        ]
    );
    assert!(home.is_dir(), "the home is made on the hub's machine");
    assert!(
        f.containers.world.lock().unwrap().mounts[0]
            .contains(&"agent-hub-t-a1-home:/home/agent".to_string()),
        "the home volume is mounted as the image user's home"
    );
    assert_eq!(info.home, Some(home.display().to_string()));
    let sid = info.session_id.expect("a session id");
    let session = f.registry.session(&sid).expect("registered");
    assert_eq!(session.spec().agent_id.as_deref(), Some("a1"));
    assert_eq!(session.owner().label.as_deref(), Some("worker-1"));
    assert_eq!(session.owner().owner_agent_id.as_deref(), Some("a1"));
    assert_eq!(f.registry.added.lock().unwrap()[0].1, Origin::Created);
    assert_eq!(
        event_types(&mut f.events),
        ["agent_starting", "agent_started"]
    );
    // Starting it again does nothing, and says so.
    let started = f.agents.start("a1", false).await.unwrap();
    let (again, already) = (started.info, started.already_running);
    assert!(already);
    assert_eq!(again.session_id.as_deref(), Some(sid.as_str()));
    assert_eq!(f.containers.count("create"), 1);
}

#[tokio::test]
async fn concurrent_starts_of_one_agent_create_one_container() {
    let f = fixture("", FakeContainers::with_image("img"));
    let (a, b) = tokio::join!(f.agents.start("a1", false), f.agents.start("a1", false));
    let (a, b) = (a.unwrap().already_running, b.unwrap().already_running);
    assert!(a ^ b, "exactly one start did the work: {a:?} {b:?}");
    assert_eq!(f.containers.count("create"), 1);
    assert_eq!(f.containers.count("attach"), 1);
}

#[tokio::test]
async fn a_missing_image_fails_the_start_with_the_reason() {
    let mut f = fixture("", FakeContainers::default());
    let err = f.agents.start("a1", false).await.unwrap_err();
    assert_eq!(err.code(), "AGENT_START_FAILED");
    assert!(err.to_string().contains("image 'img' not found"), "{err}");
    let info = f.agents.info("a1").unwrap();
    assert_eq!(info.status, AgentStatus::Failed);
    assert!(info.error.unwrap().contains("not found"));
    assert_eq!(f.containers.count("create"), 0);
    assert_eq!(
        event_types(&mut f.events),
        ["agent_starting", "agent_start_failed"]
    );
}

#[tokio::test]
async fn a_container_that_exits_at_once_is_reported_with_its_exit_code() {
    let f = fixture("", FakeContainers::with_image("img"));
    f.containers.world.lock().unwrap().dies_at_start = true;
    let err = f.agents.start("a1", false).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("the container exited at once (exit code 3)"),
        "{err}"
    );
    assert_eq!(f.agents.info("a1").unwrap().status, AgentStatus::Failed);
    assert!(f.registry.sessions.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_ready_pattern_not_seen_fails_the_start_with_the_screen_and_stops_the_container() {
    let f = fixture(
        "ready_pattern = 'READY>'\n",
        FakeContainers::with_image("img"),
    );
    f.containers.world.lock().unwrap().screen = "still loading...".into();
    let err = f.agents.start("a1", false).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("ready_pattern 'READY>' not seen within 2 s"),
        "{err}"
    );
    match err {
        HubError::AgentStartFailed { screen, .. } => {
            assert!(screen.unwrap().contains("still loading..."))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.containers.count("stop"), 1);
    assert!(
        *f.containers.detached.lock().unwrap(),
        "the terminal was detached first"
    );
}

#[tokio::test]
async fn a_ready_pattern_on_screen_makes_the_agent_running() {
    let f = fixture(
        "ready_pattern = 'READY>'\n",
        FakeContainers::with_image("img"),
    );
    f.containers.world.lock().unwrap().screen = "welcome\r\nREADY> ".into();
    let info = f.agents.start("a1", false).await.unwrap().info;
    assert_eq!(info.status, AgentStatus::Running);
}

#[tokio::test]
async fn a_stop_detaches_stops_and_removes_when_configured() {
    let mut f = fixture("remove_on_stop = true\n", FakeContainers::with_image("img"));
    f.agents.start("a1", false).await.unwrap();
    event_types(&mut f.events);
    let info = f.agents.stop("a1").await.unwrap();
    assert_eq!(info.status, AgentStatus::Stopped);
    assert_eq!(info.exit_code, Some(0));
    assert_eq!(info.container_id, None);
    assert!(*f.containers.detached.lock().unwrap());
    let calls = f.containers.calls();
    assert_eq!(
        calls[calls.len() - 2..],
        ["stop agent-hub-t-a1", "remove agent-hub-t-a1"]
    );
    assert_eq!(
        event_types(&mut f.events),
        ["agent_stopping", "agent_stopped"]
    );
}

#[tokio::test]
async fn a_restart_replaces_the_old_session_with_a_new_one() {
    let f = fixture("", FakeContainers::with_image("img"));
    let first = f.agents.start("a1", false).await.unwrap().info;
    let again = f.agents.restart("a1", false).await.unwrap().info;
    assert_eq!(again.status, AgentStatus::Running);
    let (old, new) = (first.session_id.unwrap(), again.session_id.unwrap());
    assert_ne!(old, new);
    assert!(
        f.registry.session(&old).is_none(),
        "the ended session is removed"
    );
    assert!(f.registry.session(&new).is_some());
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn a_running_container_found_by_reconcile_is_reattached_with_its_old_session_id() {
    let mut f = fixture("", FakeContainers::with_image("img"));
    {
        let mut w = f.containers.world.lock().unwrap();
        w.containers.insert(
            "agent-hub-t-a1".into(),
            FakeContainer {
                id: "cid-9".into(),
                running: true,
                exit_code: None,
                tmux: true,
                ..Default::default()
            },
        );
    }
    let owner = Owner {
        label: Some("kept".into()),
        ..Default::default()
    };
    f.registry
        .carried_over
        .lock()
        .unwrap()
        .insert("cid-9".into(), ("docker_old".into(), owner));
    f.agents.reconcile("").await;
    let info = f.agents.info("a1").unwrap();
    assert_eq!(info.status, AgentStatus::Running);
    assert_eq!(info.session_id.as_deref(), Some("docker_old"));
    let session = f.registry.session("docker_old").unwrap();
    assert_eq!(session.owner().label.as_deref(), Some("kept"));
    assert_eq!(f.registry.added.lock().unwrap()[0].1, Origin::Restored);
    assert_eq!(event_types(&mut f.events), ["agent_attached"]);
    assert_eq!(f.containers.count("create"), 0, "no new container");
}

#[cfg(unix)] // used by the Unix-only tests alone
/// Registers the ended session `id` of agent `a1` with `screen` on it, as `persist` does for a
/// stopped agent's session from before a restart, and remembers it for the agent.
fn restored_ended_session(f: &Fixture, id: &str, screen: &str) {
    let output = Arc::new(Output::new(1 << 16));
    output.push(screen.as_bytes());
    output.finish(crate::output::ExitInfo {
        exit_code: Some(0),
        reason: "stopped".into(),
        exited_at: chrono::Utc::now(),
    });
    let spec = crate::session::SessionSpec {
        id: id.into(),
        backend: crate::protocol::SessionBackend::Docker,
        source: "docker".into(),
        shell: "bash".into(),
        args: Vec::new(),
        cwd: "/".into(),
        tmux_session: Some(AGENT_TMUX_SESSION.into()),
        agent_id: Some("a1".into()),
        policy: None,
        container_id: Some("cid-1".into()),
        created_at: chrono::Utc::now(),
    };
    let size = crate::backend::TermSize { cols: 80, rows: 24 };
    let backend = crate::backend::exited::ExitedBackend;
    let new = NewSession::new(spec, size, Owner::default(), output, backend);
    f.registry.add(new, Origin::Restored);
    f.registry
        .ended
        .lock()
        .unwrap()
        .insert("a1".into(), id.into());
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn a_stopped_agent_takes_back_its_ended_session_from_before_a_restart() {
    let containers = FakeContainers::with_image("img");
    let f = fixture("", containers.clone());
    f.agents.start("a1", false).await.unwrap();
    f.agents.stop("a1").await.unwrap();
    // The hub restarts on the same data dir; `persist` registered the ended session again.
    let f = fixture_in("", containers.clone(), f.data);
    restored_ended_session(&f, "docker_old", "last words");
    f.agents.reconcile("").await;
    let info = f.agents.info("a1").unwrap();
    assert_eq!(info.session_id.as_deref(), Some("docker_old"));
    assert_eq!(
        (info.status, info.pty_attached),
        (AgentStatus::Stopped, false)
    );
    let old = f.registry.session("docker_old").unwrap();
    assert!(old.output().exit().is_some(), "still ended");
    // Its next start makes a new session in its place.
    let started = f.agents.start("a1", false).await.unwrap();
    assert_ne!(started.info.session_id.as_deref(), Some("docker_old"));
    assert!(f.registry.session("docker_old").is_none());

    // Started before the Docker sync gave it back: the old one is dropped all the same.
    f.agents.stop("a1").await.unwrap();
    let f = fixture_in("", containers, f.data);
    restored_ended_session(&f, "docker_older", "older words");
    f.agents.start("a1", false).await.unwrap();
    assert!(f.registry.session("docker_older").is_none());
    f.agents.reconcile("").await;
    assert!(f.registry.ended.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_container_that_dies_behind_the_hubs_back_marks_the_agent_exited() {
    let mut f = fixture("", FakeContainers::with_image("img"));
    f.agents.start("a1", false).await.unwrap();
    event_types(&mut f.events);
    f.agents.container_died("a1", Some(137));
    let info = f.agents.info("a1").unwrap();
    assert_eq!(
        (info.status, info.exit_code),
        (AgentStatus::Exited, Some(137))
    );
    assert_eq!(event_types(&mut f.events), ["agent_exited"]);
    // A death while not running (a stop the hub asked for) is not news.
    f.agents.container_died("a1", Some(0));
    assert!(event_types(&mut f.events).is_empty());
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn reconcile_without_a_container_marks_a_running_agent_stopped() {
    let f = fixture("", FakeContainers::with_image("img"));
    f.agents.start("a1", false).await.unwrap();
    f.containers.world.lock().unwrap().containers.clear();
    f.agents.reconcile("").await;
    let info = f.agents.info("a1").unwrap();
    assert_eq!(info.status, AgentStatus::Stopped);
    assert_eq!(info.container_id, None);
}

#[tokio::test]
async fn an_unknown_agent_is_agent_not_found() {
    let f = fixture("", FakeContainers::with_image("img"));
    for err in [
        f.agents.start("nope", false).await.unwrap_err(),
        f.agents.stop("nope").await.unwrap_err(),
        f.agents.info("nope").unwrap_err(),
    ] {
        assert_eq!(err.code(), "AGENT_NOT_FOUND");
    }
}

#[cfg(unix)] // used by the Unix-only tests alone
fn first_def(toml: &str) -> AgentDef {
    let config = HubConfig::parse(toml, "test").unwrap();
    let def = config.agent_defs().next().unwrap().clone();
    def
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn each_start_mints_a_credential_the_container_can_read_and_a_stop_revokes_it() {
    let f = fixture(
        "owner_role = \"leader\"\nteam = \"red\"\n",
        FakeContainers::with_image("img"),
    );
    f.agents.start("a1", false).await.unwrap();
    let file = f.data.path().join("agents/a1/token");
    let first = std::fs::read_to_string(&file).unwrap().trim().to_string();
    let who = f
        .credentials
        .identify(&first)
        .expect("the written credential works");
    assert_eq!(
        (who.agent_id.as_str(), who.team.as_str(), who.leader),
        ("a1", "red", true)
    );
    f.agents.restart("a1", false).await.unwrap();
    let second = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert_ne!(first, second, "a restart mints a new credential");
    assert!(f.credentials.identify(&first).is_none());
    assert!(f.credentials.identify(&second).is_some());
    f.agents.stop("a1").await.unwrap();
    assert!(
        f.credentials.identify(&second).is_none(),
        "a stop revokes it"
    );
    assert!(!file.exists());
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn a_container_gets_the_hubs_address_its_credential_file_and_the_executable() {
    let text = "hub_id = \"t\"\n[[agents]]\nid = \"a1\"\nimage = \"img\"\n";
    let config = HubConfig::parse(text, "test").unwrap();
    let mut def = config.agent_defs().next().unwrap().clone();
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display();
    let access = super::hub_access::HubAccess::new(data.path(), Some("/opt/agent-hub".into()));
    access.add_to(&mut def);
    assert_eq!(def.env["AGENT_HUB_URL"], "unix:///run/agent-hub/api.sock");
    assert_eq!(
        def.env["AGENT_HUB_TOKEN_FILE"],
        "/run/agent-hub-agent/token"
    );
    assert_eq!(
        def.mounts,
        [
            format!("{d}/agents/a1:/run/agent-hub-agent:ro"),
            format!("{d}/run:/run/agent-hub"),
            "/opt/agent-hub:/usr/local/bin/agent-hub:ro".into()
        ]
    );
    assert!(data.path().join("agents/a1").is_dir());
    // Switched off: only the agent's own directory (the arguments of each start).
    let off = "hub_id = \"t\"\n[[agents]]\nid = \"a2\"\nimage = \"img\"\nhub_access = false\n";
    let mut def = first_def(off);
    access.add_to(&mut def);
    assert!(def.env.is_empty());
    assert_eq!(
        def.mounts,
        [format!("{d}/agents/a2:/run/agent-hub-agent:ro")]
    );
    // On a remote engine: no host paths to mount there.
    let remote = "hub_id = \"t\"\n[[agents]]\nid = \"a3\"\nimage = \"img\"\ndocker_host = \"tcp://10.0.0.2:2375\"\nhub_url = \"http://10.0.0.1:8100\"\n";
    let mut def = first_def(remote);
    access.add_to(&mut def);
    assert_eq!(def.env["AGENT_HUB_URL"], "http://10.0.0.1:8100");
    assert!(def.mounts.is_empty(), "{:?}", def.mounts);
}

#[cfg(unix)] // Unix mode bits
#[test]
fn a_local_container_gets_a_fresh_pipe_directory_and_a_remote_one_none() {
    let data = tempfile::tempdir().unwrap();
    let access = super::hub_access::HubAccess::new(data.path(), None);
    let stale = data.path().join("pipes/a1/agent-hub-pipe.old");
    std::fs::create_dir_all(&stale).unwrap();
    let mut def = first_def("hub_id = \"t\"\n[[agents]]\nid = \"a1\"\nimage = \"img\"\n");
    access.add_pipe_dir(&mut def).unwrap();
    let dir = data.path().join("pipes/a1");
    assert_eq!(
        def.mounts,
        [format!("{}:/run/agent-hub-pipe", dir.display())]
    );
    assert!(dir.is_dir() && !stale.exists(), "made afresh");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let remote = "hub_id = \"t\"\n[[agents]]\nid = \"a3\"\nimage = \"img\"\ndocker_host = \"tcp://10.0.0.2:2375\"\n";
    let mut def = first_def(remote);
    access.add_pipe_dir(&mut def).unwrap();
    assert!(def.mounts.is_empty(), "{:?}", def.mounts);
    assert!(!data.path().join("pipes/a3").exists());
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn a_start_resumes_the_conversation_its_home_holds_unless_fresh() {
    let f = fixture(
        "cli_type = \"claude\"\ncommand = [\"claude\", \"--model\", \"x\"]\n",
        FakeContainers::with_image("img"),
    );
    let commands = || f.containers.world.lock().unwrap().commands.clone();
    let info = f.agents.info("a1").unwrap();
    assert!(!info.resumes);
    assert!(
        info.resume_reason.contains("no conversation yet"),
        "{}",
        info.resume_reason
    );
    f.agents.start("a1", false).await.unwrap();
    assert_eq!(commands()[0], ["claude", "--model", "x"]);

    // Claude Code wrote its conversation into the home.
    let project = f
        .data
        .path()
        .join("agents/a1/home/.claude/projects/-workspace");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("c0ffee.jsonl"), "{}").unwrap();
    let info = f.agents.info("a1").unwrap();
    assert!(info.resumes, "{}", info.resume_reason);
    f.agents.restart("a1", false).await.unwrap();
    assert_eq!(commands()[1], ["claude", "--continue", "--model", "x"]);
    f.agents.stop("a1").await.unwrap();
    f.agents.start("a1", false).await.unwrap();
    assert_eq!(commands()[2], ["claude", "--continue", "--model", "x"]);

    // A fresh start on purpose.
    f.agents.restart("a1", true).await.unwrap();
    assert_eq!(commands()[3], ["claude", "--model", "x"]);
}

#[tokio::test]
async fn resume_false_and_a_cli_without_a_way_to_resume_start_new_conversations() {
    let f = fixture(
        "cli_type = \"claude\"\nresume = false\ncommand = [\"claude\"]\n",
        FakeContainers::with_image("img"),
    );
    let project = f.data.path().join("agents/a1/home/.claude/projects/p");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("c.jsonl"), "{}").unwrap();
    let info = f.agents.info("a1").unwrap();
    assert_eq!(
        (info.resumes, info.resume_reason.as_str()),
        (false, "resume = false")
    );
    f.agents.start("a1", false).await.unwrap();
    assert_eq!(f.containers.world.lock().unwrap().commands[0], ["claude"]);

    let g = fixture("command = [\"bash\"]\n", FakeContainers::with_image("img"));
    g.agents.start("a1", false).await.unwrap();
    g.agents.restart("a1", false).await.unwrap();
    assert_eq!(g.containers.world.lock().unwrap().commands[1], ["bash"]);
    assert!(!g.agents.info("a1").unwrap().resumes);
}

#[tokio::test]
async fn a_home_the_engine_cannot_bind_is_a_plain_volume() {
    let containers = FakeContainers::with_image("img");
    containers.world.lock().unwrap().data_dir_hidden = true;
    let f = fixture("", containers);
    f.agents.start("a1", false).await.unwrap();
    assert_eq!(f.containers.calls()[0], "volume agent-hub-t-a1-home ");
    assert!(f.containers.world.lock().unwrap().mounts[0]
        .contains(&"agent-hub-t-a1-home:/home/agent".to_string()));
}

#[cfg(unix)] // used by the Unix-only tests alone
/// The detail of the last `agent_started` event `rx` has.
fn last_started_detail(rx: &mut tokio::sync::broadcast::Receiver<HubEvent>) -> String {
    std::iter::from_fn(|| rx.try_recv().ok())
        .filter_map(|e| match e.kind {
            EventKind::AgentStarted(a) => Some(a.detail),
            _ => None,
        })
        .last()
        .unwrap_or_default()
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn a_start_after_the_definition_changed_makes_the_container_again_and_keeps_the_home() {
    let containers = FakeContainers::with_image("img");
    let f = fixture("env = { GREETING = \"one\" }\n", containers.clone());
    f.agents.start("a1", false).await.unwrap();
    let home = f.data.path().join("agents/a1/home");
    std::fs::write(home.join("notes.txt"), "kept").unwrap();
    f.agents.stop("a1").await.unwrap();
    // Unchanged, the stopped container is started again (a restart likewise).
    let again = f.agents.start("a1", false).await.unwrap();
    assert_eq!(again.recreated, None);
    assert_eq!(again.info.container_id.as_deref(), Some("cid-1"));
    let again = f.agents.restart("a1", false).await.unwrap();
    assert_eq!(again.recreated, None);
    f.agents.stop("a1").await.unwrap();
    assert_eq!(containers.count("create"), 1);

    // `hub.toml` gives the agent another env; the hub starts again on the same data dir.
    let mut f = fixture_in("env = { GREETING = \"two\" }\n", containers.clone(), f.data);
    let started = f.agents.start("a1", false).await.unwrap();
    assert_eq!(
        started.recreated,
        Some(recreate::Change::Parts(vec!["env"]))
    );
    assert_eq!(started.info.status, AgentStatus::Running);
    assert_eq!(started.info.container_id.as_deref(), Some("cid-2"));
    let calls = containers.calls();
    assert_eq!(
        calls[calls.len() - 5..],
        [
            "remove cid-1".to_string(),
            format!("volume agent-hub-t-a1-home {}", home.display()),
            "create agent-hub-t-a1".into(),
            "start cid-2".into(),
            "attach cid-2".into(),
        ]
    );
    {
        let world = containers.world.lock().unwrap();
        assert_eq!(world.containers.len(), 1, "the old container is gone");
        assert_eq!(world.envs.last().unwrap()["GREETING"], "two");
        let mounts = world.mounts.last().unwrap();
        assert!(mounts.contains(&"agent-hub-t-a1-home:/home/agent".to_string()));
    }
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "kept"
    );
    assert!(
        last_started_detail(&mut f.events)
            .ends_with("container made again: its definition changed (env)"),
        "the agent_started event says so"
    );
    // Made again once: the next start keeps the new container.
    f.agents.stop("a1").await.unwrap();
    let again = f.agents.start("a1", false).await.unwrap();
    assert_eq!(again.recreated, None);
    assert_eq!(again.info.container_id.as_deref(), Some("cid-2"));
}

#[tokio::test]
async fn a_container_without_a_recorded_definition_is_made_again_once_and_a_running_one_kept() {
    let containers = FakeContainers::with_image("img");
    let old = FakeContainer {
        id: "cid-old".into(),
        ..Default::default()
    };
    let name = "agent-hub-t-a1".to_string();
    containers
        .world
        .lock()
        .unwrap()
        .containers
        .insert(name.clone(), old.clone());
    let f = fixture("", containers.clone());
    let started = f.agents.start("a1", false).await.unwrap();
    assert_eq!(started.recreated, Some(recreate::Change::Unrecorded));
    assert_eq!(started.info.container_id.as_deref(), Some("cid-1"));
    assert_eq!(containers.count("remove"), 1);

    // A running container of an older definition is kept (a start never stops an agent).
    f.agents.stop("a1").await.unwrap();
    let running = FakeContainer {
        running: true,
        tmux: true,
        ..old
    };
    containers
        .world
        .lock()
        .unwrap()
        .containers
        .insert(name, running);
    let started = f.agents.start("a1", false).await.unwrap();
    assert_eq!(started.recreated, None);
    assert_eq!(started.info.container_id.as_deref(), Some("cid-old"));
    assert_eq!(containers.count("remove"), 1);
}

#[tokio::test]
async fn the_removal_of_a_container_made_again_does_not_take_the_new_ones_id() {
    let containers = FakeContainers::with_image("img");
    let f = fixture("env = { A = \"1\" }\n", containers.clone());
    f.agents.start("a1", false).await.unwrap();
    f.agents.stop("a1").await.unwrap();
    let f = fixture_in("env = { A = \"2\" }\n", containers, f.data);
    let started = f.agents.start("a1", false).await.unwrap();
    assert_eq!(started.info.container_id.as_deref(), Some("cid-2"));
    // The engine reports the old container's removal after the start.
    f.agents.container_removed("a1", "cid-1");
    assert_eq!(
        f.agents.info("a1").unwrap().container_id.as_deref(),
        Some("cid-2")
    );
    f.agents.stop("a1").await.unwrap();
    f.agents.container_removed("a1", "cid-2");
    assert_eq!(f.agents.info("a1").unwrap().container_id, None);
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn an_image_rebuilt_under_the_same_name_makes_a_stopped_container_again() {
    let containers = FakeContainers::with_image("img");
    let f = fixture("", containers.clone());
    f.agents.start("a1", false).await.unwrap();
    let home = f.data.path().join("agents/a1/home");
    std::fs::write(home.join("notes.txt"), "kept").unwrap();
    f.agents.stop("a1").await.unwrap();
    // `img` is built again: the name names another image.
    let rebuild = |id: &str| {
        let mut w = containers.world.lock().unwrap();
        w.image_ids.insert("img".into(), id.into());
    };
    rebuild("sha256:second");
    let started = f.agents.start("a1", false).await.unwrap();
    assert_eq!(
        started.recreated,
        Some(recreate::Change::Parts(vec![recreate::REBUILT]))
    );
    assert_eq!(started.info.container_id.as_deref(), Some("cid-2"));
    assert_eq!(containers.count("remove"), 1);
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "kept"
    );
    // Made from the image the name names now: the next start keeps it.
    f.agents.stop("a1").await.unwrap();
    let again = f.agents.start("a1", false).await.unwrap();
    assert_eq!(again.recreated, None);
    assert_eq!(again.info.container_id.as_deref(), Some("cid-2"));

    // The name names nothing any more (the tag was removed): the start says the image is not
    // found and leaves the container as it is.
    f.agents.stop("a1").await.unwrap();
    containers.world.lock().unwrap().images.clear();
    let err = f.agents.start("a1", false).await.unwrap_err();
    assert!(err.to_string().contains("image 'img' not found"), "{err}");
    assert_eq!(containers.count("remove"), 1);
    assert!(containers.world.lock().unwrap().containers.len() == 1);
}

#[cfg(unix)] // git in a scratch repository
/// A repository with one commit on `main`, owned by uid 1000 when the tests run as root (the
/// fake image's user, `agent`, is taken for the owner of a repository root does not own).
fn user_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(dir.path())
            .args(["-c", "user.name=U", "-c", "user.email=u@x"])
            .args(args)
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("README.md"), "app\n").unwrap();
    git(&["add", "README.md"]);
    git(&["commit", "-qm", "Start"]);
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata(dir.path()).unwrap().uid() == 0 {
        let ok = std::process::Command::new("chown")
            .args(["-R", "1000:1000"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(ok.success());
    }
    dir
}

#[cfg(unix)] // used by the git test below
/// A hub restarted on `f`'s data dir with the agent `a1` of `agent_toml`, its running
/// container re-attached (as the Docker sync does when the hub starts).
async fn restarted(f: Fixture, agent_toml: &str) -> Fixture {
    let again = fixture_in(agent_toml, f.containers.clone(), f.data);
    again.agents.reconcile("").await;
    let info = again.agents.info("a1").unwrap();
    assert_eq!(info.status, AgentStatus::Running, "re-attached: {info:?}");
    again
}

#[cfg(unix)] // git in a scratch repository
#[tokio::test]
async fn a_running_container_of_another_definition_is_said_to_be_outdated_until_a_restart() {
    let repo = user_repo();
    let toml = |greeting: &str| {
        format!(
            "env = {{ GREETING = \"{greeting}\" }}\nworkspace = {{ repo = \"{}\", base = \"main\" }}\n",
            repo.path().display()
        )
    };
    let containers = FakeContainers::with_image("img");
    let f = fixture(&toml("one"), containers.clone());
    let started = f.agents.start("a1", false).await.unwrap();
    assert!(!started.info.outdated && started.info.changed.is_empty());
    // The hub restarts with the same hub.toml: what it computes for the running container
    // (home, workspace, hub access, pipe directory) is what the start made it with.
    let f = restarted(f, &toml("one")).await;
    let info = f.agents.info("a1").unwrap();
    assert!(!info.outdated, "{info:?}");

    // Another env in hub.toml: the running container is kept, and said to be outdated.
    let f = restarted(f, &toml("two")).await;
    let info = f.agents.info("a1").unwrap();
    assert_eq!(
        (info.outdated, info.changed),
        (true, vec!["env".to_string()])
    );
    assert_eq!(containers.count("create"), 1);
    // Its image rebuilt under the same name too.
    containers
        .world
        .lock()
        .unwrap()
        .image_ids
        .insert("img".into(), "sha256:second".into());
    let f = restarted(f, &toml("two")).await;
    let info = f.agents.info("a1").unwrap();
    assert_eq!(info.changed, ["image (rebuilt)", "env"]);
    // A stopped agent is not outdated (its next start applies the definition)...
    f.agents.stop("a1").await.unwrap();
    let info = f.agents.info("a1").unwrap();
    assert!(!info.outdated && info.changed.is_empty(), "{info:?}");
    // ... and a restart applies it.
    let started = f.agents.restart("a1", false).await.unwrap();
    assert_eq!(
        started.recreated.map(|c| c.parts()),
        Some(vec!["image (rebuilt)".to_string(), "env".into()])
    );
    assert!(!started.info.outdated && started.info.changed.is_empty());
    let f = restarted(f, &toml("two")).await;
    assert!(!f.agents.info("a1").unwrap().outdated);
}

#[cfg(unix)] // used by the Unix-only tests alone
/// An agent running Claude Code with its config dir mounted from the user's own directory.
fn claude_with_config_at(cfg: &std::path::Path) -> String {
    format!(
        "cli_type = \"claude\"\ncommand = [\"claude\"]\nmounts = [\"{}:/cfg\"]\n\
         env = {{ CLAUDE_CONFIG_DIR = \"/cfg\" }}\n",
        cfg.display()
    )
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn a_config_dir_mounted_from_the_host_resumes_and_gets_the_hooks_and_status_files() {
    let cfg = tempfile::tempdir().unwrap();
    let f = fixture(
        &claude_with_config_at(cfg.path()),
        FakeContainers::with_image("img"),
    );
    let commands = || f.containers.world.lock().unwrap().commands.clone();
    f.agents.start("a1", false).await.unwrap();
    assert_eq!(commands()[0], ["claude"]);
    // The hooks went where Claude Code reads its settings, not into the home.
    let settings = std::fs::read_to_string(cfg.path().join("settings.json")).unwrap();
    assert!(settings.contains("hook Stop"), "{settings}");
    let home = f.data.path().join("agents/a1/home");
    assert!(!home.join(".claude/settings.json").exists());
    let def = f.agents.def("a1").unwrap();
    assert_eq!(f.agents.status_dir(def), Some(cfg.path().join("sessions")));

    // Claude Code wrote its conversation into the mounted config dir: every start after an
    // idle stop resumes it.
    let project = cfg.path().join("projects/-workspace");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("c0ffee.jsonl"), "{}").unwrap();
    let info = f.agents.info("a1").unwrap();
    assert_eq!(
        (info.resumes, info.resume_reason.as_str()),
        (true, "found /cfg/projects/-workspace/c0ffee.jsonl")
    );
    for run in 1..=3 {
        f.agents.stop("a1").await.unwrap();
        f.agents.start("a1", false).await.unwrap();
        assert_eq!(commands()[run], ["claude", "--continue"], "start {run}");
    }

    // A status file there is the user's: a start leaves it.
    let sessions = cfg.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(sessions.join("7.json"), "{}").unwrap();
    f.agents.restart("a1", false).await.unwrap();
    assert!(sessions.join("7.json").exists());
}

#[cfg(unix)] // the local engine's bind mounts (on Windows every engine is reached as a remote one)
#[tokio::test]
async fn a_config_dir_the_hub_cannot_see_is_said_and_starts_anew() {
    let f = fixture(
        "cli_type = \"claude\"\ncommand = [\"claude\"]\nenv = { CLAUDE_CONFIG_DIR = \"/cfg\" }\n",
        FakeContainers::with_image("img"),
    );
    let info = f.agents.info("a1").unwrap();
    assert!(!info.resumes);
    assert_eq!(
        info.resume_reason,
        "CLAUDE_CONFIG_DIR=/cfg is in none of its mounts nor in its kept home: the hub cannot \
         see it"
    );
    f.agents.start("a1", false).await.unwrap();
    // Once the image said where the home is, the reason names it.
    let info = f.agents.info("a1").unwrap();
    assert_eq!(
        (info.resumes, info.resume_reason.as_str()),
        (
            false,
            "CLAUDE_CONFIG_DIR=/cfg is in none of its mounts nor in its kept home \
             (/home/agent): the hub cannot see it"
        )
    );
    let home = f.data.path().join("agents/a1/home");
    assert!(
        !home.join(".claude/settings.json").exists(),
        "no hooks where Claude Code does not read them"
    );
    f.agents.restart("a1", false).await.unwrap();
    assert_eq!(f.containers.world.lock().unwrap().commands[1], ["claude"]);
}

#[tokio::test]
async fn an_agent_with_docker_hosts_keeps_the_engine_recorded_for_it_and_is_placed_when_none_is() {
    let hosts = "docker_hosts = [\"tcp://a:2375\", \"tcp://b:2375\"]\n";
    // Placed on b before the hub restarted: still on b, and its start keeps it there (its home
    // is there), asking no engine how much memory it has.
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("agents/a1")).unwrap();
    std::fs::write(data.path().join("agents/a1/engine"), "tcp://b:2375\n").unwrap();
    let f = fixture_in(hosts, FakeContainers::with_image("img"), data);
    let info = f.agents.info("a1").unwrap();
    assert_eq!(info.docker_host, "tcp://b:2375");
    assert_eq!(info.docker_hosts, ["tcp://a:2375", "tcp://b:2375"]);
    f.agents.start("a1", false).await.unwrap();
    assert_eq!(f.agents.info("a1").unwrap().docker_host, "tcp://b:2375");

    // Never placed (or on an engine its definition no longer names): no engine yet, and a
    // start with no engine answering fails with the engines it tried.
    for recorded in [None, Some("tcp://gone:2375\n")] {
        let data = tempfile::tempdir().unwrap();
        if let Some(r) = recorded {
            std::fs::create_dir_all(data.path().join("agents/a1")).unwrap();
            std::fs::write(data.path().join("agents/a1/engine"), r).unwrap();
        }
        let f = fixture_in(hosts, FakeContainers::with_image("img"), data);
        assert_eq!(f.agents.info("a1").unwrap().docker_host, "");
        let e = f.agents.start("a1", false).await.unwrap_err();
        assert_eq!(e.code(), "DOCKER_UNAVAILABLE", "{e}");
        assert!(e.to_string().contains("tcp://a:2375, tcp://b:2375"), "{e}");
        assert_eq!(f.containers.count("create"), 0);
    }
}

#[tokio::test]
async fn an_agent_on_a_remote_engine_gets_its_files_through_the_engine_before_it_starts() {
    let f = fixture(
        "docker_host = \"tcp://far:2375\"\nhub_access = true\n",
        FakeContainers::with_image("img"),
    );
    f.agents.start("a1", false).await.unwrap();
    let w = f.containers.world.lock().unwrap();
    let put: Vec<&str> = w.put.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        put,
        // (The hub starts this one's tmux session: its start arguments go there, not into a
        // file.)
        ["/run/agent-hub-agent", "/run/agent-hub-agent/token"]
    );
    assert!(w.put.iter().all(|(_, running)| !running), "{:?}", w.put);
    // Nothing of the hub's machine is mounted into it.
    let data = f.data.path().display().to_string();
    assert!(
        w.mounts[0].iter().all(|m| !m.contains(&data)),
        "{:?}",
        w.mounts[0]
    );
    assert_eq!(
        w.envs[0].get("AGENT_HUB_TOKEN_FILE").map(String::as_str),
        Some("/run/agent-hub-agent/token")
    );
}
