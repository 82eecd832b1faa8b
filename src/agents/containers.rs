//! The container runtime the agents run on, as the agents see it: the few operations a start,
//! a stop and a reconcile need. [`DockerContainers`] is the real one (one lazily connected
//! client per endpoint); the agents' unit tests bring a fake.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

use super::hub_access::PIPE_DIR_IN_CONTAINER;
use super::AGENT_TMUX_SESSION;
use crate::backend::tmux::place::PipeRoot;
use crate::backend::tmux::{TmuxBackend, TmuxPlace};
use crate::backend::{Backend, SpawnSpec};
use crate::config::AgentDef;
use crate::docker::archive::{self, Entry, Files, Read};
use crate::docker::engines::EngineFacts;
use crate::docker::exec::{ExecOutput, ExecRequest};
use crate::docker::{self, docker_error, Endpoints, LABEL_AGENT, LABEL_DEFINITION};
use crate::error::{HubError, HubResult};
use crate::output::Output;

/// What the engine says about one container.
#[derive(Debug, Clone, Default)]
pub struct ContainerState {
    pub id: String,
    pub running: bool,
    pub exit_code: Option<i64>,
    pub started_at: Option<DateTime<Utc>>,
    /// The definition it was made with (its `agent-hub.definition` label; `None` for a
    /// container of a hub that did not record it).
    pub definition: Option<String>,
    /// The ID of the image it was made from (its inspect's `Image`: what its image's name
    /// named then, whatever the name names now).
    pub image_id: Option<String>,
}

/// A container on an engine.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The engine ("" = the local default).
    pub endpoint: &'a str,
    /// A container id or name.
    pub container: &'a str,
}

/// An operation under way.
pub type Op<'a, T> = BoxFuture<'a, HubResult<T>>;
/// An attach under way: the terminal's backend, or why there is none.
pub type Attaching<'a> = BoxFuture<'a, Result<Box<dyn Backend>, AttachError>>;

/// Why an agent's terminal could not be attached.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The engine cannot be reached.
    #[error(transparent)]
    Engine(#[from] HubError),
    /// The tmux client could not attach (the exec failed).
    #[error(transparent)]
    Tmux(#[from] crate::backend::tmux::TmuxError),
}

/// Image labels by name.
pub type Labels = HashMap<String, String>;

/// What the hub reads of an image.
#[derive(Debug, Clone, Default)]
pub struct ImageInfo {
    /// Its ID (`sha256:...`): a rebuilt image has another under the same name.
    pub id: Option<String>,
    pub labels: Labels,
    /// `NAME=value` entries of its environment.
    pub env: Vec<String>,
    /// The user it runs as (`agent`, `1000:1000`, empty for root).
    pub user: String,
}

pub use crate::docker::VolumeSpec;

/// The container operations of the agents.
pub trait Containers: Send + Sync {
    /// What the hub reads of an image; `None` when the engine does not have it.
    fn image_info<'a>(&'a self, endpoint: &'a str, image: &'a str) -> Op<'a, Option<ImageInfo>>;
    /// Makes sure a volume exists as `spec` says (one bound elsewhere is made again).
    fn ensure_volume<'a>(&'a self, endpoint: &'a str, spec: VolumeSpec<'a>) -> Op<'a, ()>;
    /// Where a path of the hub is on the engine's machine (see [`docker::engine_path`]).
    fn engine_path<'a>(
        &'a self,
        endpoint: &'a str,
        local: &'a std::path::Path,
    ) -> BoxFuture<'a, Option<std::path::PathBuf>>;
    /// A container's state; `None` when there is no such container.
    fn inspect<'a>(&'a self, at: Place<'a>) -> Op<'a, Option<ContainerState>>;
    /// Creates the agent's container; returns its id.
    fn create<'a>(&'a self, def: &'a AgentDef, hub_id: &'a str) -> Op<'a, String>;
    /// Starts a created container.
    fn start<'a>(&'a self, at: Place<'a>) -> Op<'a, ()>;
    /// SIGTERM, then SIGKILL after `grace_s`; a container already stopped or gone is fine.
    fn stop<'a>(&'a self, at: Place<'a>, grace_s: u64) -> Op<'a, ()>;
    /// Removes a container; one already gone is fine.
    fn remove<'a>(&'a self, at: Place<'a>) -> Op<'a, ()>;
    /// The agent ids that have a container of hub `hub_id` on `endpoint` (running or not).
    fn agent_containers<'a>(&'a self, endpoint: &'a str, hub_id: &'a str) -> Op<'a, Vec<String>>;
    /// Whether the container runs the agent's tmux session ([`AGENT_TMUX_SESSION`]) or does
    /// within `within` (false at once if the container ends meanwhile).
    fn wait_tmux_session<'a>(&'a self, at: Place<'a>, within: Duration) -> BoxFuture<'a, bool>;
    /// Attaches a terminal to the agent's tmux session in the container (creating it with
    /// `spec` when it does not exist, else making it `spec`'s size), streaming into `out`.
    fn attach_tmux<'a>(
        &'a self,
        at: Place<'a>,
        spec: &'a SpawnSpec,
        out: Arc<Output>,
    ) -> Attaching<'a>;
    /// Puts `entries` under the directory `dir` of a container (made or running) through the
    /// engine's archive API.
    fn put_files<'a>(&'a self, at: Place<'a>, dir: &'a str, entries: &'a [Entry]) -> Op<'a, ()> {
        let _ = (dir, entries);
        Box::pin(async move { Err(no_files(at.endpoint)) })
    }
    /// What `path` in a container (made, running or stopped) holds, through the engine's
    /// archive API: `None` when there is no such path.
    fn read_files<'a>(&'a self, at: Place<'a>, path: &'a str, read: Read) -> Op<'a, Option<Files>> {
        let _ = (path, read);
        Box::pin(async move { Err(no_files(at.endpoint)) })
    }
    /// Runs a command in a running container and waits for it.
    fn exec<'a>(&'a self, at: Place<'a>, req: &'a ExecRequest) -> Op<'a, ExecOutput> {
        let _ = req;
        Box::pin(async move { Err(no_files(at.endpoint)) })
    }
    /// Makes sure the engine holds the hub's executable `binary` in a volume of its own, named
    /// for `build`, filled through a container of `image` made for it (the volume is shared by
    /// every hub of that build on the engine); returns the volume's name.
    fn hub_binary_volume<'a>(
        &'a self,
        endpoint: &'a str,
        binary: &'a std::path::Path,
        build: &'a str,
        image: &'a str,
    ) -> Op<'a, String> {
        let _ = (binary, build, image);
        Box::pin(async move { Err(no_files(endpoint)) })
    }
    /// What the engine says of itself and of the containers on it (hub `hub_id`'s by agent).
    fn engine_facts<'a>(&'a self, endpoint: &'a str, hub_id: &'a str) -> Op<'a, EngineFacts> {
        let _ = hub_id;
        Box::pin(async move {
            Err(HubError::DockerUnavailable {
                endpoint: docker::endpoint_name(endpoint),
                reason: "this engine does not describe itself".into(),
            })
        })
    }
}

/// The answer of an engine whose files these containers cannot reach (test fakes).
fn no_files(endpoint: &str) -> HubError {
    HubError::DockerUnavailable {
        endpoint: docker::endpoint_name(endpoint),
        reason: "these containers take no files".into(),
    }
}

/// How long an engine may take to describe itself (its containers' stats take a second).
const ENGINE_FACTS_TIMEOUT: Duration = Duration::from_secs(8);

/// Docker engines through bollard.
#[derive(Default)]
pub struct DockerContainers {
    endpoints: Arc<Endpoints>,
    /// One fill of a hub binary volume at a time (two starts would fill it twice).
    binary_lock: tokio::sync::Mutex<()>,
}

impl DockerContainers {
    /// Containers on the engines of `endpoints` (shared with the Docker sync loops).
    pub fn new(endpoints: Arc<Endpoints>) -> Self {
        DockerContainers {
            endpoints,
            binary_lock: Default::default(),
        }
    }

    /// The container's tmux, with the pipe directory the hub gave it when it has one.
    async fn place(docker: Docker, container: &str) -> TmuxPlace {
        let pipe_root = docker
            .inspect_container(container, None)
            .await
            .ok()
            .and_then(|c| c.mounts)
            .into_iter()
            .flatten()
            .find(|m| m.destination.as_deref() == Some(PIPE_DIR_IN_CONTAINER))
            .and_then(|m| m.source)
            .map(std::path::PathBuf::from)
            .filter(|local| local.is_dir())
            .map(|local| PipeRoot {
                local,
                for_tmux: PIPE_DIR_IN_CONTAINER.into(),
                other_user: true,
            });
        TmuxPlace::Container {
            docker,
            container_id: container.to_string(),
            pipe_root,
        }
    }
}

/// An inspect's answer: `None` when the engine has no such object.
fn found<T>(endpoint: &str, answer: Result<T, bollard::errors::Error>) -> HubResult<Option<T>> {
    match answer {
        Ok(v) => Ok(Some(v)),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(docker_error(endpoint, e)),
    }
}

impl Containers for DockerContainers {
    fn image_info<'a>(&'a self, endpoint: &'a str, image: &'a str) -> Op<'a, Option<ImageInfo>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            let image = found(endpoint, docker.inspect_image(image).await)?;
            Ok(image.map(|i| {
                let config = i.config.unwrap_or_default();
                ImageInfo {
                    id: i.id,
                    labels: config.labels.unwrap_or_default(),
                    env: config.env.unwrap_or_default(),
                    user: config.user.unwrap_or_default(),
                }
            }))
        })
    }

    fn ensure_volume<'a>(&'a self, endpoint: &'a str, spec: VolumeSpec<'a>) -> Op<'a, ()> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            docker::ensure_volume(&docker, endpoint, spec).await
        })
    }

    fn engine_path<'a>(
        &'a self,
        endpoint: &'a str,
        local: &'a std::path::Path,
    ) -> BoxFuture<'a, Option<std::path::PathBuf>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await.ok()?;
            docker::engine_path(&docker, local).await
        })
    }

    fn inspect<'a>(&'a self, at: Place<'a>) -> Op<'a, Option<ContainerState>> {
        Box::pin(async move {
            let docker = self.endpoints.client(at.endpoint).await?;
            let answer = docker.inspect_container(at.container, None).await;
            Ok(found(at.endpoint, answer)?.map(|c| {
                let state = c.state.unwrap_or_default();
                let image_id = c.image;
                let definition = c
                    .config
                    .and_then(|c| c.labels)
                    .and_then(|mut l| l.remove(LABEL_DEFINITION));
                ContainerState {
                    id: c.id.unwrap_or_else(|| at.container.to_string()),
                    running: state.running == Some(true),
                    exit_code: state.exit_code,
                    started_at: state
                        .started_at
                        .as_deref()
                        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&Utc)),
                    definition,
                    image_id,
                }
            }))
        })
    }

    fn create<'a>(&'a self, def: &'a AgentDef, hub_id: &'a str) -> Op<'a, String> {
        Box::pin(async move {
            let docker = self.endpoints.client(def.endpoint()).await?;
            docker::create_container(&docker, def.endpoint(), def, hub_id).await
        })
    }

    fn start<'a>(&'a self, at: Place<'a>) -> Op<'a, ()> {
        Box::pin(async move {
            let docker = self.endpoints.client(at.endpoint).await?;
            docker
                .start_container(at.container, None)
                .await
                .map_err(|e| docker_error(at.endpoint, e))
        })
    }

    fn stop<'a>(&'a self, at: Place<'a>, grace_s: u64) -> Op<'a, ()> {
        Box::pin(async move {
            let docker = self.endpoints.client(at.endpoint).await?;
            docker::stop_container(&docker, at.endpoint, at.container, grace_s).await
        })
    }

    fn remove<'a>(&'a self, at: Place<'a>) -> Op<'a, ()> {
        Box::pin(async move {
            let docker = self.endpoints.client(at.endpoint).await?;
            docker::remove_container(&docker, at.endpoint, at.container).await
        })
    }

    fn engine_facts<'a>(&'a self, endpoint: &'a str, hub_id: &'a str) -> Op<'a, EngineFacts> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            let asked = docker::engines::facts(&docker, hub_id);
            match tokio::time::timeout(ENGINE_FACTS_TIMEOUT, asked).await {
                Ok(facts) => facts.map_err(|e| docker_error(endpoint, e)),
                Err(_) => Err(HubError::DockerUnavailable {
                    endpoint: docker::endpoint_name(endpoint),
                    reason: format!("no answer within {}s", ENGINE_FACTS_TIMEOUT.as_secs()),
                }),
            }
        })
    }

    fn put_files<'a>(&'a self, at: Place<'a>, dir: &'a str, entries: &'a [Entry]) -> Op<'a, ()> {
        Box::pin(async move {
            let docker = self.endpoints.client(at.endpoint).await?;
            archive::put(&docker, at.container, dir, entries)
                .await
                .map_err(|e| docker_error(at.endpoint, e))
        })
    }

    fn read_files<'a>(&'a self, at: Place<'a>, path: &'a str, read: Read) -> Op<'a, Option<Files>> {
        Box::pin(async move {
            let docker = self.endpoints.client(at.endpoint).await?;
            archive::get(&docker, at.container, path, read)
                .await
                .map_err(|e| docker_error(at.endpoint, e))
        })
    }

    fn exec<'a>(&'a self, at: Place<'a>, req: &'a ExecRequest) -> Op<'a, ExecOutput> {
        Box::pin(async move {
            let docker = self.endpoints.client(at.endpoint).await?;
            docker::exec::run(&docker, at.container, req)
                .await
                .map_err(|e| docker_error(at.endpoint, e))
        })
    }

    fn hub_binary_volume<'a>(
        &'a self,
        endpoint: &'a str,
        binary: &'a std::path::Path,
        build: &'a str,
        image: &'a str,
    ) -> Op<'a, String> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            let _one_at_a_time = self.binary_lock.lock().await;
            docker::hub_binary::ensure(&docker, endpoint, binary, build, image).await
        })
    }

    fn agent_containers<'a>(&'a self, endpoint: &'a str, hub_id: &'a str) -> Op<'a, Vec<String>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            let containers = docker::list_managed(&docker, endpoint, hub_id).await?;
            Ok(containers
                .into_iter()
                .filter_map(|c| c.labels?.remove(LABEL_AGENT))
                .collect())
        })
    }

    fn wait_tmux_session<'a>(&'a self, at: Place<'a>, within: Duration) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match self.endpoints.client(at.endpoint).await {
                Ok(docker) => {
                    let place = TmuxPlace::Container {
                        docker,
                        container_id: at.container.to_string(),
                        pipe_root: None,
                    };
                    place.wait_for_session(AGENT_TMUX_SESSION, within).await
                }
                Err(_) => false,
            }
        })
    }

    fn attach_tmux<'a>(
        &'a self,
        at: Place<'a>,
        spec: &'a SpawnSpec,
        out: Arc<Output>,
    ) -> Attaching<'a> {
        Box::pin(async move {
            let docker = self.endpoints.client(at.endpoint).await?;
            let place = Self::place(docker, at.container).await;
            let (backend, _adopted) =
                TmuxBackend::start_sized(place, AGENT_TMUX_SESSION, spec, out)
                    .await
                    .map_err(AttachError::Tmux)?;
            Ok(Box::new(backend) as Box<dyn Backend>)
        })
    }
}
