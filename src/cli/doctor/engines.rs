//! Doctor checks of the Docker side of `hub.toml`: each engine reachable (and its API
//! version), each agent image present, with tmux and a shell, and what `start_tmux` will do,
//! and whether the image's user can write the agent's workspace.
//! The image is tried in a throwaway container (no network), removed afterwards.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{LogsOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;
use futures_util::StreamExt;

use super::{Finding, Status};
use crate::config::HubConfig;
use crate::config::{AgentDef, StartTmux};
use crate::docker::{endpoint_name, Endpoints};
use crate::workspace::{self, Access, AgentUser, WorkspaceError};

/// Prints the tmux version (or nothing) and proves a POSIX shell runs.
const PROBE: &str =
    "if command -v tmux >/dev/null 2>&1; then echo \"tmux=$(tmux -V)\"; else echo tmux=; fi";
/// How long the probe container may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Every engine and agent image of the config.
pub async fn check(config: &HubConfig) -> Vec<Finding> {
    let mut by_engine: BTreeMap<String, Vec<&AgentDef>> = BTreeMap::new();
    for def in config.agent_defs() {
        for endpoint in def.engines() {
            by_engine.entry(endpoint.to_string()).or_default().push(def);
        }
    }
    if by_engine.is_empty() {
        return vec![Finding::ok(
            "docker",
            "no container agents in the config: no engine needed",
            "only [[agents]] run in Docker",
        )];
    }
    let endpoints = Endpoints::default();
    let mut out = Vec::new();
    for (endpoint, defs) in by_engine {
        let name = endpoint_name(&endpoint);
        let check = format!("engine {name}");
        let agents: Vec<&str> = defs.iter().map(|d| d.id.as_str()).collect();
        let why = format!("agents {} run on this engine", agents.join(", "));
        let docker = match endpoints.client(&endpoint).await {
            Ok(d) => d,
            Err(e) => {
                out.push(Finding::problem(
                    Status::Fail,
                    check,
                    e.to_string(),
                    &why,
                    "start the engine (systemctl start docker), fix docker_host in hub.toml or DOCKER_HOST, and check that the hub's user may use it (member of the docker group)",
                ));
                continue;
            }
        };
        let version = docker.version().await.ok();
        out.push(Finding::ok(
            check,
            format!(
                "reachable: Docker {} (API {})",
                version
                    .as_ref()
                    .and_then(|v| v.version.clone())
                    .unwrap_or_default(),
                docker.client_version()
            ),
            &why,
        ));
        for def in defs {
            out.push(image(&docker, def).await);
            out.extend(workspace(&docker, def).await);
        }
    }
    out
}

/// What `start_tmux` will do with this image (`auto` is decided by the image's label).
fn start_tmux_plan(
    def: &AgentDef,
    entrypoint: &str,
    labels: Option<&HashMap<String, String>>,
) -> String {
    let auto = def.start_tmux == StartTmux::Auto;
    let label = crate::docker::LABEL_STARTS_TMUX;
    match crate::docker::resolve_start_tmux(def.start_tmux, labels) {
        StartTmux::Image if auto => format!("start_tmux = auto: the image is labelled {label}=true, so its entrypoint ({entrypoint}) starts the tmux session `agent`"),
        StartTmux::Hub if auto => format!("start_tmux = auto: the image has no {label}=true label, so the hub replaces its entrypoint ({entrypoint}) with a keep-alive script and starts tmux itself"),
        StartTmux::Image => format!("start_tmux = image: the entrypoint ({entrypoint}) must start the tmux session `agent` (the shipped agent image's does)"),
        _ => "start_tmux = hub: the hub replaces the entrypoint with a keep-alive script and starts tmux itself".into(),
    }
}

/// One agent's image: present, has tmux >= 3.2 and a shell.
async fn image(docker: &Docker, def: &AgentDef) -> Finding {
    let image = def.image.get_ref().clone();
    let check = format!("image {image} (agent {})", def.id);
    const WHY: &str = "the hub runs the agent's terminal in tmux inside the container and drives it through `docker exec` of tmux and sh";
    let inspected = match docker.inspect_image(&image).await {
        Ok(i) => i,
        Err(e) => {
            return Finding::problem(
                Status::Fail,
                check,
                format!("not usable on this engine: {e}"),
                WHY,
                format!("build or pull it: docker build -f docker/agent.Dockerfile -t {image} docker/ (offline: docker/build-offline.sh {image}), or docker pull {image}"),
            )
        }
    };
    let config = inspected.config.unwrap_or_default();
    let entrypoint = config
        .entrypoint
        .filter(|e| !e.is_empty())
        .map_or("none".to_string(), |e| e.join(" "));
    let plan = start_tmux_plan(def, &entrypoint, config.labels.as_ref());
    match probe(docker, &image).await {
        Err(e) => Finding::problem(
            Status::Fail,
            check,
            format!("`sh -c` does not run in it: {e}"),
            WHY,
            "use an image with a POSIX shell at /bin/sh (any Debian or Ubuntu base)",
        ),
        Ok(out) => {
            let tmux = out
                .lines()
                .find_map(|l| l.strip_prefix("tmux="))
                .unwrap_or("")
                .trim()
                .to_string();
            if tmux.is_empty() {
                return Finding::problem(
                    Status::Fail,
                    check,
                    format!("has a shell but no tmux; {plan}"),
                    WHY,
                    "install tmux (>= 3.2) in the image: build FROM it with docker/agent.Dockerfile (--build-arg BASE=<image>)",
                );
            }
            Finding::ok(check, format!("present, {tmux}, sh runs; {plan}"), WHY)
        }
    }
}

/// Whether the user the agent's image runs as can work in its workspace's repository (the
/// image itself is checked by [`image`]).
async fn workspace(docker: &Docker, def: &AgentDef) -> Option<Finding> {
    let ws = def.workspace.as_ref().filter(|_| !def.clones_workspace())?;
    let repo = ws.repo.get_ref().clone();
    let check = format!("workspace {repo} (agent {})", def.id);
    const WHY: &str = "the agent writes its checkout and commits into the repository as the user its image runs as";
    let inspected = docker.inspect_image(def.image.get_ref()).await.ok()?;
    let user = inspected.config.and_then(|c| c.user).unwrap_or_default();
    let agent = AgentUser::parse(&user);
    let image = def.image.get_ref().clone();
    let found = tokio::task::spawn_blocking(move || {
        workspace::access_to(std::path::Path::new(&repo), &agent, &image)
    })
    .await
    .ok()?;
    let user = AgentUser::parse(&user);
    Some(match found {
        Ok(Access::AsMade) => Finding::ok(
            check,
            format!("the image's user '{user}' can write it"),
            WHY,
        ),
        Ok(Access::Open(bits)) => Finding::ok(
            check,
            format!("the image's user '{user}' writes it as one of its group or anyone: its checkout is opened the same way (adds {bits:03o})"),
            WHY,
        ),
        Err(WorkspaceError::NotWritable { reason, fix, .. }) => {
            Finding::problem(Status::Fail, check, reason, WHY, fix)
        }
        Err(e) => Finding::problem(
            Status::Fail,
            check,
            e.to_string(),
            WHY,
            "point workspace.repo at a git repository the hub can read",
        ),
    })
}

/// Runs [`PROBE`] in a throwaway container of `image`; returns its output.
async fn probe(docker: &Docker, image: &str) -> Result<String, String> {
    let body = ContainerCreateBody {
        image: Some(image.into()),
        entrypoint: Some(vec!["/bin/sh".into(), "-c".into(), PROBE.into()]),
        cmd: Some(Vec::new()),
        labels: Some(HashMap::from([(
            "agent-hub.doctor".to_string(),
            "true".to_string(),
        )])),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let id = docker
        .create_container(None, body)
        .await
        .map_err(|e| e.to_string())?
        .id;
    let result = tokio::time::timeout(PROBE_TIMEOUT, run_probe(docker, &id))
        .await
        .unwrap_or_else(|_| Err("the probe did not finish within 30 s".into()));
    let remove = RemoveContainerOptionsBuilder::default().force(true).build();
    let _ = docker.remove_container(&id, Some(remove)).await;
    result
}

async fn run_probe(docker: &Docker, id: &str) -> Result<String, String> {
    docker
        .start_container(id, None)
        .await
        .map_err(|e| e.to_string())?;
    let mut wait = docker.wait_container(id, None);
    while let Some(r) = wait.next().await {
        // A non-zero exit is reported as an error; the output says what happened.
        if let Err(e) = r {
            if !matches!(e, bollard::errors::Error::DockerContainerWaitError { .. }) {
                return Err(e.to_string());
            }
        }
    }
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .build();
    let mut logs = docker.logs(id, Some(options));
    let mut out = String::new();
    while let Some(chunk) = logs.next().await {
        out.push_str(&chunk.map_err(|e| e.to_string())?.to_string());
    }
    Ok(out)
}
