//! What an engine says of itself and of the containers on it, from Docker's own information:
//! `docker info` (its version, CPUs and memory) and each running container's stats and memory
//! limit (and the hub's own stopped ones). Nothing of our own is measured; [`memory_left`] is
//! the one figure derived.

use bollard::query_parameters::{ListContainersOptionsBuilder, StatsOptionsBuilder};
use bollard::Docker;
use futures_util::StreamExt;

use super::{LABEL_AGENT, LABEL_HUB};

/// One container on an engine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HubContainer {
    /// The agent it runs, for one of this hub's (`None`: anyone else's).
    pub agent: Option<String>,
    pub running: bool,
    /// Its memory in use (Docker's `usage`), while it runs.
    pub memory_used: Option<u64>,
    /// Its memory limit (`HostConfig.Memory`), when it has one.
    pub memory_limit: Option<u64>,
    /// Its CPU use over Docker's sampling second, in percent of one CPU, while it runs.
    pub cpu_percent: Option<f64>,
}

/// An engine as Docker describes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineFacts {
    pub name: Option<String>,
    pub server_version: Option<String>,
    pub os: Option<String>,
    pub cpus: Option<i64>,
    pub memory_total: Option<u64>,
    pub containers_running: Option<i64>,
    pub containers: Vec<HubContainer>,
    /// The hub builds whose executable it holds (see [`super::hub_binary`]).
    pub hub_binaries: Vec<String>,
}

/// `docker info`, every running container and hub `hub_id`'s stopped ones, with their stats.
pub async fn facts(docker: &Docker, hub_id: &str) -> Result<EngineFacts, bollard::errors::Error> {
    let info = docker.info().await?;
    let options = ListContainersOptionsBuilder::default().all(true).build();
    let listed = docker.list_containers(Some(options)).await?;
    let wanted = listed.into_iter().filter_map(|c| {
        let mut labels = c.labels.unwrap_or_default();
        let ours = labels.get(LABEL_HUB).is_some_and(|h| h == hub_id);
        let agent = ours.then(|| labels.remove(LABEL_AGENT)).flatten();
        let running = c.state.is_some_and(|s| s.to_string() == "running");
        (running || agent.is_some()).then(|| (c.id.unwrap_or_default(), agent, running))
    });
    let containers =
        futures_util::future::join_all(wanted.map(|(id, agent, running)| async move {
            let mut container = HubContainer {
                agent,
                running,
                memory_limit: memory_limit(docker, &id).await,
                ..HubContainer::default()
            };
            if running {
                (container.memory_used, container.cpu_percent) = usage(docker, &id).await;
            }
            container
        }))
        .await;
    let hub_binaries = hub_binaries(docker).await?;
    Ok(EngineFacts {
        hub_binaries,
        name: info.name,
        server_version: info.server_version,
        os: info.operating_system,
        cpus: info.ncpu,
        memory_total: info.mem_total.and_then(|m| u64::try_from(m).ok()),
        containers_running: info.containers_running,
        containers,
    })
}

/// The builds of the hub's executable volumes on the engine, sorted.
async fn hub_binaries(docker: &Docker) -> Result<Vec<String>, bollard::errors::Error> {
    let label = super::hub_binary::LABEL_BINARY;
    let filters = std::collections::HashMap::from([("label", vec![label])]);
    let options = bollard::query_parameters::ListVolumesOptionsBuilder::default()
        .filters(&filters)
        .build();
    let listed = docker.list_volumes(Some(options)).await?;
    let mut builds: Vec<String> = listed
        .volumes
        .into_iter()
        .flatten()
        .filter_map(|mut v| v.labels.remove(label))
        .collect();
    builds.sort();
    Ok(builds)
}

async fn memory_limit(docker: &Docker, id: &str) -> Option<u64> {
    let inspect = docker.inspect_container(id, None).await.ok()?;
    let limit = inspect.host_config?.memory?;
    u64::try_from(limit).ok().filter(|l| *l > 0)
}

/// Memory in use and CPU percent, from one stats sample (Docker takes it over a second, so the
/// previous reading is there to compute the CPU share from).
async fn usage(docker: &Docker, id: &str) -> (Option<u64>, Option<f64>) {
    let options = StatsOptionsBuilder::default().stream(false).build();
    let Some(Ok(stats)) = docker.stats(id, Some(options)).next().await else {
        return (None, None);
    };
    let memory = stats.memory_stats.as_ref().and_then(|m| m.usage);
    let cpu = (|| {
        let now = stats.cpu_stats.as_ref()?;
        let before = stats.precpu_stats.as_ref()?;
        let used = now.cpu_usage.as_ref()?.total_usage? as f64
            - before.cpu_usage.as_ref()?.total_usage? as f64;
        let system = now.system_cpu_usage? as f64 - before.system_cpu_usage? as f64;
        let cpus = f64::from(now.online_cpus.unwrap_or(1));
        (system > 0.0 && used >= 0.0).then(|| used / system * cpus * 100.0)
    })();
    (memory, cpu)
}

/// The memory an engine has left for another agent: its total minus, for each of the hub's
/// running containers, the larger of what it uses and what its limit reserves. `None` when the
/// engine does not say its total.
pub fn memory_left(facts: &EngineFacts) -> Option<u64> {
    let taken: u64 = facts
        .containers
        .iter()
        .filter(|c| c.running)
        .map(|c| c.memory_used.unwrap_or(0).max(c.memory_limit.unwrap_or(0)))
        .sum();
    facts.memory_total.map(|t| t.saturating_sub(taken))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_left_takes_the_larger_of_use_and_limit_of_running_containers() {
        let c = |running, used, limit| HubContainer {
            agent: Some("a".into()),
            running,
            memory_used: used,
            memory_limit: limit,
            cpu_percent: None,
        };
        let facts = EngineFacts {
            memory_total: Some(1000),
            containers: vec![
                c(true, Some(100), Some(300)),
                c(true, Some(200), None),
                c(false, None, Some(400)),
            ],
            ..EngineFacts::default()
        };
        assert_eq!(memory_left(&facts), Some(500));
        let full = EngineFacts {
            memory_total: Some(100),
            ..facts.clone()
        };
        assert_eq!(memory_left(&full), Some(0));
        let unknown = EngineFacts {
            memory_total: None,
            ..facts
        };
        assert_eq!(memory_left(&unknown), None);
    }
}
