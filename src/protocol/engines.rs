//! Wire types of `GET /v1/engines`: each Docker engine the agents' definitions name, as Docker
//! describes it (`docker info`, its containers' stats), with this hub's agents on it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /v1/engines`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnginesReply {
    pub ok: bool,
    pub engines: Vec<EngineView>,
}

/// One engine. Without an answer (`reachable: false`) only `engine`, `error` and
/// `agents_defined` are known.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct EngineView {
    /// The endpoint (`unix:///var/run/docker.sock`, `tcp://host:2375`, `ssh://...`).
    pub engine: String,
    pub reachable: bool,
    /// Why it did not answer.
    pub error: Option<String>,
    /// The engine's host name, Docker version and operating system.
    pub name: Option<String>,
    pub server_version: Option<String>,
    pub os: Option<String>,
    pub cpus: Option<i64>,
    pub memory_total_bytes: Option<u64>,
    /// Its total less, for each running container, the larger of what it uses and what its
    /// memory limit reserves.
    pub memory_left_bytes: Option<u64>,
    /// Every running container on it, this hub's or not.
    pub containers_running: Option<i64>,
    /// The agents whose definitions name this engine.
    pub agents_defined: Vec<String>,
    /// This hub's containers on it.
    pub agents: Vec<EngineAgent>,
    /// The builds of the hub's executable it holds (`<version>-<digest>`), mounted into its
    /// agents' containers at `/usr/local/bin/agent-hub`.
    pub hub_binaries: Vec<String>,
    /// Whether it holds this hub's own build (`None`: this hub has no executable to give).
    pub holds_this_build: Option<bool>,
}

/// One of this hub's containers on an engine.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct EngineAgent {
    pub id: String,
    pub running: bool,
    pub memory_used_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    /// Over Docker's sampling second, in percent of one CPU.
    pub cpu_percent: Option<f64>,
}
