//! Docker engines: one client per endpoint (connected lazily, so one engine being down never
//! affects agents on another), and the container operations the agents module needs. Every
//! container the hub creates carries the labels below; the hub finds its containers by label,
//! never by name (the name filter is a prefix match).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
    StopContainerOptionsBuilder,
};
use bollard::Docker;
use tokio::sync::Mutex;

use crate::config::{AgentDef, StartTmux};
use crate::error::{HubError, HubResult};

pub mod archive;
mod definition;
pub mod engines;
pub mod exec;
pub mod hub_binary;
pub use definition::{Definition, LABEL_DEFINITION};

/// Set on every container the hub manages.
pub const LABEL_MANAGED: &str = "agent-hub.managed";
/// The agent id.
pub const LABEL_AGENT: &str = "agent-hub.agent";
/// The id of the hub that created the container.
pub const LABEL_HUB: &str = "agent-hub.hub";
/// Image label by which an image declares that its entrypoint starts the tmux session `agent`
/// (the shipped agent image sets it to `true`).
pub const LABEL_STARTS_TMUX: &str = "io.agent-hub.starts-tmux";
/// How long connecting to an engine may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Keeps a container alive when the hub starts tmux itself (`start_tmux = "hub"`).
const KEEPALIVE_SCRIPT: &str = "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done";

/// Docker clients by endpoint ("" = the local default engine).
#[derive(Default)]
pub struct Endpoints {
    clients: Mutex<HashMap<String, Docker>>,
}

/// A readable name for an endpoint key.
pub fn endpoint_name(endpoint: &str) -> String {
    if endpoint.is_empty() {
        crate::platform::local_engine()
    } else {
        endpoint.to_string()
    }
}

/// Maps a bollard error: the engine answered (a Docker error) or could not be reached.
pub fn docker_error(endpoint: &str, e: bollard::errors::Error) -> HubError {
    match e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => {
            HubError::Docker { message }
        }
        other => HubError::DockerUnavailable {
            endpoint: endpoint_name(endpoint),
            reason: other.to_string(),
        },
    }
}

impl Endpoints {
    /// A connected client for `endpoint`; `DOCKER_UNAVAILABLE` when it cannot be reached.
    pub async fn client(&self, endpoint: &str) -> HubResult<Docker> {
        if let Some(d) = self.clients.lock().await.get(endpoint) {
            return Ok(d.clone());
        }
        let unavailable = |reason: String| HubError::DockerUnavailable {
            endpoint: endpoint_name(endpoint),
            reason,
        };
        let docker = if endpoint.is_empty() {
            Docker::connect_with_defaults()
        } else {
            Docker::connect_with_host(endpoint)
        }
        .map_err(|e| unavailable(e.to_string()))?;
        let docker = tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version())
            .await
            .map_err(|_| unavailable("no answer within 5 s".into()))?
            .map_err(|e| unavailable(e.to_string()))?;
        self.clients
            .lock()
            .await
            .insert(endpoint.to_string(), docker.clone());
        Ok(docker)
    }

    /// Drops a client after a connection failure, so the next call reconnects.
    pub async fn forget(&self, endpoint: &str) {
        self.clients.lock().await.remove(endpoint);
    }
}

/// The container name of an agent (unique per hub).
pub fn container_name(hub_id: &str, agent_id: &str) -> String {
    format!("agent-hub-{hub_id}-{agent_id}")
}

/// What `docker create` gets for an agent: the config, labelled with its own [`Definition`].
pub fn container_body(
    def: &AgentDef,
    hub_id: &str,
    start_tmux_in_image: bool,
) -> ContainerCreateBody {
    let mut body = create_config(def, hub_id, start_tmux_in_image);
    let definition = Definition::of(&body).label();
    if let Some(labels) = body.labels.as_mut() {
        labels.insert(LABEL_DEFINITION.into(), definition);
    }
    body
}

/// The definition of the container the hub would make for `def` now (see [`Definition`]).
pub fn container_definition(def: &AgentDef, hub_id: &str) -> Definition {
    Definition::of(&create_config(def, hub_id, image_starts_tmux(def)))
}

/// The create config of an agent's container.
fn create_config(def: &AgentDef, hub_id: &str, start_tmux_in_image: bool) -> ContainerCreateBody {
    let mut labels = def.labels.clone().into_iter().collect::<HashMap<_, _>>();
    labels.insert(LABEL_MANAGED.into(), "true".into());
    labels.insert(LABEL_AGENT.into(), def.id.clone());
    labels.insert(LABEL_HUB.into(), hub_id.into());
    let mut env: Vec<String> = def.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    env.push("LANG=C.UTF-8".into());
    env.push("TERM=xterm-256color".into());
    env.push(format!("AGENT_HUB_AGENT_ID={}", def.id));
    env.push(format!("AGENT_HUB_COLS={}", def.cols.unwrap_or(120)));
    env.push(format!("AGENT_HUB_ROWS={}", def.rows.unwrap_or(30)));
    let (entrypoint, cmd) = if start_tmux_in_image {
        (None, (!def.command.is_empty()).then(|| def.command.clone()))
    } else {
        let script = vec!["sh".into(), "-c".into(), KEEPALIVE_SCRIPT.into()];
        (Some(script), Some(Vec::new()))
    };
    ContainerCreateBody {
        image: Some(def.image.get_ref().clone()),
        entrypoint,
        cmd,
        env: Some(env),
        working_dir: def.workdir.clone(),
        labels: Some(labels),
        tty: Some(false),
        host_config: Some(HostConfig {
            init: Some(true),
            binds: (!def.mounts.is_empty()).then(|| def.mounts.clone()),
            network_mode: def.network.clone(),
            memory: def.memory_bytes(),
            nano_cpus: def.cpus.map(|c| (c * 1e9) as i64),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Whether the image's entrypoint starts the tmux session (vs. the hub doing it).
pub fn image_starts_tmux(def: &AgentDef) -> bool {
    def.start_tmux != StartTmux::Hub
}

/// What `start_tmux = "auto"` means for an image, decided before its container is created: an
/// image labelled [`LABEL_STARTS_TMUX`]`=true` starts tmux itself; any other image (a
/// devcontainer, a vendor image) gets the hub-started tmux, so an image with tmux and a shell
/// always works with the default. `image` and `hub` are kept as configured.
pub fn resolve_start_tmux(
    configured: StartTmux,
    image_labels: Option<&HashMap<String, String>>,
) -> StartTmux {
    match configured {
        StartTmux::Auto => {
            let declared = image_labels
                .and_then(|l| l.get(LABEL_STARTS_TMUX))
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
            if declared {
                StartTmux::Image
            } else {
                StartTmux::Hub
            }
        }
        other => other,
    }
}

/// Creates the agent's container and returns its id.
pub async fn create_container(
    docker: &Docker,
    endpoint: &str,
    def: &AgentDef,
    hub_id: &str,
) -> HubResult<String> {
    let name = container_name(hub_id, &def.id);
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    let body = container_body(def, hub_id, image_starts_tmux(def));
    docker
        .create_container(Some(options), body)
        .await
        .map(|r| r.id)
        .map_err(|e| docker_error(endpoint, e))
}

/// A named volume the hub keeps for an agent.
#[derive(Debug, Clone, Copy)]
pub struct VolumeSpec<'a> {
    pub name: &'a str,
    /// A directory on the engine's machine the volume is bound to (`None`: Docker's own).
    pub device: Option<&'a std::path::Path>,
    pub agent_id: &'a str,
    pub hub_id: &'a str,
}

/// Makes sure a volume exists as `spec` says: one bound to another directory (the data dir
/// moved) is removed and made again.
pub async fn ensure_volume(docker: &Docker, endpoint: &str, spec: VolumeSpec<'_>) -> HubResult<()> {
    let device = spec.device.map(|d| d.display().to_string());
    match docker.inspect_volume(spec.name).await {
        Ok(v) if v.options.get("device") == device.as_ref() => return Ok(()),
        Ok(_) => {
            tracing::info!(
                volume = spec.name,
                "the volume is bound elsewhere; making it again"
            );
            docker
                .remove_volume(
                    spec.name,
                    None::<bollard::query_parameters::RemoveVolumeOptions>,
                )
                .await
                .map_err(|e| docker_error(endpoint, e))?;
        }
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        Err(e) => return Err(docker_error(endpoint, e)),
    }
    let driver_opts = device.map(|d| {
        HashMap::from([
            ("type".to_string(), "none".to_string()),
            ("o".to_string(), "bind".to_string()),
            ("device".to_string(), d),
        ])
    });
    let labels = HashMap::from([
        (LABEL_MANAGED.to_string(), "true".to_string()),
        (LABEL_AGENT.to_string(), spec.agent_id.to_string()),
        (LABEL_HUB.to_string(), spec.hub_id.to_string()),
    ]);
    docker
        .create_volume(bollard::models::VolumeCreateRequest {
            name: Some(spec.name.to_string()),
            driver: Some("local".into()),
            driver_opts,
            labels: Some(labels),
            ..Default::default()
        })
        .await
        .map(drop)
        .map_err(|e| docker_error(endpoint, e))
}

/// Where `local`, a path of this process, is on the machine of the local engine: for a hub in
/// a container of that engine, through the container's own mounts (a bind's source, a volume's
/// directory on the host), `None` when no mount holds it (the container's own layer, which the
/// engine cannot bind from); else (a hub on the engine's machine, or in a container the engine
/// does not know, such as one that runs the engine too) `local` itself.
pub async fn engine_path(docker: &Docker, local: &Path) -> Option<PathBuf> {
    let same = Some(local.to_path_buf());
    if !Path::new("/.dockerenv").exists() {
        return same;
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(id) = own_container_id(&mountinfo) else {
        return same;
    };
    let Ok(me) = docker.inspect_container(&id, None).await else {
        return same;
    };
    let mounts = me.mounts.unwrap_or_default();
    let mounts = mounts
        .iter()
        .filter_map(|m| Some((PathBuf::from(m.destination.as_ref()?), m.source.as_ref()?)));
    translate(local, mounts)
}

/// The container id in the mount of `/etc/hostname`, which Docker binds from
/// `/var/lib/docker/containers/<id>/hostname`.
fn own_container_id(mountinfo: &str) -> Option<String> {
    mountinfo.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.get(4) != Some(&"/etc/hostname") {
            return None;
        }
        let rest = fields.get(3)?.split("/containers/").nth(1)?;
        let id: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
        (id.len() == 64).then_some(id)
    })
}

/// `local` through the mount (destination, source) with the longest destination holding it.
fn translate<'a>(
    local: &Path,
    mounts: impl Iterator<Item = (PathBuf, &'a String)>,
) -> Option<PathBuf> {
    mounts
        .filter_map(|(dest, source)| {
            let rest = local.strip_prefix(&dest).ok()?;
            Some((dest.components().count(), Path::new(source).join(rest)))
        })
        .max_by_key(|(depth, _)| *depth)
        .map(|(_, path)| path)
}

/// Managed containers of this hub on an engine (running or not).
pub async fn list_managed(
    docker: &Docker,
    endpoint: &str,
    hub_id: &str,
) -> HubResult<Vec<bollard::models::ContainerSummary>> {
    let mut filters = HashMap::new();
    filters.insert(
        "label",
        vec![
            format!("{LABEL_MANAGED}=true"),
            format!("{LABEL_HUB}={hub_id}"),
        ],
    );
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .map_err(|e| docker_error(endpoint, e))
}

/// Stops a container (SIGTERM, then SIGKILL after `grace_s`); a container already gone or
/// stopped is fine.
pub async fn stop_container(
    docker: &Docker,
    endpoint: &str,
    id: &str,
    grace_s: u64,
) -> HubResult<()> {
    let options = StopContainerOptionsBuilder::default()
        .t(grace_s.min(i32::MAX as u64) as i32)
        .build();
    match docker.stop_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 304 | 404,
            ..
        }) => Ok(()),
        Err(e) => Err(docker_error(endpoint, e)),
    }
}

/// Removes a container; one already gone is fine.
pub async fn remove_container(docker: &Docker, endpoint: &str, id: &str) -> HubResult<()> {
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(e) => Err(docker_error(endpoint, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_in_a_container_is_found_through_its_mounts() {
        let info = "1 0 0:1 / / rw - overlay overlay rw\n\
            2 1 8:1 /var/lib/docker/containers/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef/hostname /etc/hostname rw - ext4 /dev/sda1 rw\n";
        assert_eq!(
            own_container_id(info).as_deref(),
            Some("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
        );
        assert_eq!(
            own_container_id("1 0 0:1 / / rw - overlay overlay rw\n"),
            None
        );
        let (data, vol) = (
            "/var/lib/docker/volumes/d/_data".to_string(),
            "/srv".to_string(),
        );
        let mounts = || {
            [
                (PathBuf::from("/var/lib/agent-hub"), &data),
                (PathBuf::from("/"), &vol),
            ]
            .into_iter()
        };
        assert_eq!(
            translate(Path::new("/var/lib/agent-hub/agents/a/home"), mounts()),
            Some(PathBuf::from(
                "/var/lib/docker/volumes/d/_data/agents/a/home"
            ))
        );
        assert_eq!(
            translate(Path::new("/tmp/x"), mounts()),
            Some(PathBuf::from("/srv/tmp/x"))
        );
        assert_eq!(translate(Path::new("/tmp/x"), mounts().take(1)), None);
    }

    #[test]
    fn auto_follows_the_image_label_and_explicit_modes_stay() {
        let labels = |v: &str| HashMap::from([(LABEL_STARTS_TMUX.to_string(), v.to_string())]);
        let table = [
            (StartTmux::Auto, Some(labels("true")), StartTmux::Image),
            (StartTmux::Auto, Some(labels("TRUE")), StartTmux::Image),
            (StartTmux::Auto, Some(labels("false")), StartTmux::Hub),
            (StartTmux::Auto, Some(HashMap::new()), StartTmux::Hub),
            (StartTmux::Auto, None, StartTmux::Hub),
            (StartTmux::Image, None, StartTmux::Image),
            (StartTmux::Hub, Some(labels("true")), StartTmux::Hub),
        ];
        for (configured, image, want) in table {
            assert_eq!(
                resolve_start_tmux(configured, image.as_ref()),
                want,
                "{configured:?} {image:?}"
            );
        }
    }
}
