//! The container runtime the agents run on, as the agents see it: the few operations a start,
//! a stop and a reconcile need. [`DockerContainers`] is the real one (one lazily connected
//! client per endpoint); the agents' unit tests bring a fake.

use std::collections::HashMap;
use std::sync::Arc;

use bollard::Docker;
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

use crate::backend::tmux::{TmuxBackend, TmuxPlace};
use crate::backend::{Backend, SpawnSpec};
use crate::config::AgentDef;
use crate::docker::{self, docker_error, Endpoints, LABEL_AGENT};
use crate::error::{HubError, HubResult};
use crate::output::Output;

/// What the engine says about one container.
#[derive(Debug, Clone, Default)]
pub struct ContainerState {
    pub id: String,
    pub running: bool,
    pub exit_code: Option<i64>,
    pub started_at: Option<DateTime<Utc>>,
}

/// The container operations of the agents. `endpoint` is an agent's engine ("" = the local
/// default); `container` a container id or name.
pub trait Containers: Send + Sync {
    /// The labels of an image; `None` when the engine does not have it.
    fn image_labels<'a>(
        &'a self,
        endpoint: &'a str,
        image: &'a str,
    ) -> BoxFuture<'a, HubResult<Option<HashMap<String, String>>>>;
    /// A container's state; `None` when there is no such container.
    fn inspect<'a>(
        &'a self,
        endpoint: &'a str,
        container: &'a str,
    ) -> BoxFuture<'a, HubResult<Option<ContainerState>>>;
    /// Creates the agent's container; returns its id.
    fn create<'a>(&'a self, def: &'a AgentDef, hub_id: &'a str)
        -> BoxFuture<'a, HubResult<String>>;
    /// Starts a created container.
    fn start<'a>(&'a self, endpoint: &'a str, container: &'a str) -> BoxFuture<'a, HubResult<()>>;
    /// SIGTERM, then SIGKILL after `grace_s`; a container already stopped or gone is fine.
    fn stop<'a>(
        &'a self,
        endpoint: &'a str,
        container: &'a str,
        grace_s: u64,
    ) -> BoxFuture<'a, HubResult<()>>;
    /// Removes a container; one already gone is fine.
    fn remove<'a>(&'a self, endpoint: &'a str, container: &'a str) -> BoxFuture<'a, HubResult<()>>;
    /// The agent ids that have a container of this hub on `endpoint` (running or not).
    fn agents_with_containers<'a>(
        &'a self,
        endpoint: &'a str,
        hub_id: &'a str,
    ) -> BoxFuture<'a, HubResult<Vec<String>>>;
    /// Whether the container runs the tmux session `session`.
    fn has_tmux_session<'a>(
        &'a self,
        endpoint: &'a str,
        container: &'a str,
        session: &'a str,
    ) -> BoxFuture<'a, bool>;
    /// Attaches a terminal to the tmux session `session` in the container (creating it with
    /// `spec` when it does not exist), streaming into `output`.
    fn attach_tmux<'a>(
        &'a self,
        endpoint: &'a str,
        container: &'a str,
        session: &'a str,
        spec: &'a SpawnSpec,
        output: Arc<Output>,
    ) -> BoxFuture<'a, Result<Box<dyn Backend>, String>>;
}

/// Docker engines through bollard.
#[derive(Default)]
pub struct DockerContainers {
    endpoints: Arc<Endpoints>,
}

impl DockerContainers {
    /// Containers on the engines of `endpoints` (shared with the Docker sync loops).
    pub fn new(endpoints: Arc<Endpoints>) -> Self {
        DockerContainers { endpoints }
    }

    fn place(docker: Docker, container: &str) -> TmuxPlace {
        TmuxPlace::Container {
            docker,
            container_id: container.to_string(),
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
    fn image_labels<'a>(
        &'a self,
        endpoint: &'a str,
        image: &'a str,
    ) -> BoxFuture<'a, HubResult<Option<HashMap<String, String>>>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            let image = found(endpoint, docker.inspect_image(image).await)?;
            Ok(image.map(|i| i.config.and_then(|c| c.labels).unwrap_or_default()))
        })
    }

    fn inspect<'a>(
        &'a self,
        endpoint: &'a str,
        container: &'a str,
    ) -> BoxFuture<'a, HubResult<Option<ContainerState>>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            let found = found(endpoint, docker.inspect_container(container, None).await)?;
            Ok(found.map(|c| {
                let state = c.state.unwrap_or_default();
                ContainerState {
                    id: c.id.unwrap_or_else(|| container.to_string()),
                    running: state.running == Some(true),
                    exit_code: state.exit_code,
                    started_at: state
                        .started_at
                        .as_deref()
                        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&Utc)),
                }
            }))
        })
    }

    fn create<'a>(
        &'a self,
        def: &'a AgentDef,
        hub_id: &'a str,
    ) -> BoxFuture<'a, HubResult<String>> {
        Box::pin(async move {
            let docker = self.endpoints.client(def.endpoint()).await?;
            docker::create_container(&docker, def.endpoint(), def, hub_id).await
        })
    }

    fn start<'a>(&'a self, endpoint: &'a str, container: &'a str) -> BoxFuture<'a, HubResult<()>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            docker
                .start_container(container, None)
                .await
                .map_err(|e| docker_error(endpoint, e))
        })
    }

    fn stop<'a>(
        &'a self,
        endpoint: &'a str,
        container: &'a str,
        grace_s: u64,
    ) -> BoxFuture<'a, HubResult<()>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            docker::stop_container(&docker, endpoint, container, grace_s).await
        })
    }

    fn remove<'a>(&'a self, endpoint: &'a str, container: &'a str) -> BoxFuture<'a, HubResult<()>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            docker::remove_container(&docker, endpoint, container).await
        })
    }

    fn agents_with_containers<'a>(
        &'a self,
        endpoint: &'a str,
        hub_id: &'a str,
    ) -> BoxFuture<'a, HubResult<Vec<String>>> {
        Box::pin(async move {
            let docker = self.endpoints.client(endpoint).await?;
            let containers = docker::list_managed(&docker, endpoint, hub_id).await?;
            Ok(containers
                .into_iter()
                .filter_map(|c| c.labels?.remove(LABEL_AGENT))
                .collect())
        })
    }

    fn has_tmux_session<'a>(
        &'a self,
        endpoint: &'a str,
        container: &'a str,
        session: &'a str,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match self.endpoints.client(endpoint).await {
                Ok(docker) => Self::place(docker, container).has_session(session).await,
                Err(_) => false,
            }
        })
    }

    fn attach_tmux<'a>(
        &'a self,
        endpoint: &'a str,
        container: &'a str,
        session: &'a str,
        spec: &'a SpawnSpec,
        output: Arc<Output>,
    ) -> BoxFuture<'a, Result<Box<dyn Backend>, String>> {
        Box::pin(async move {
            let docker = self
                .endpoints
                .client(endpoint)
                .await
                .map_err(|e: HubError| e.to_string())?;
            let (backend, _adopted) =
                TmuxBackend::start(Self::place(docker, container), session, spec, output).await?;
            Ok(Box::new(backend) as Box<dyn Backend>)
        })
    }
}
