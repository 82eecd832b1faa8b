//! The engines the agents' definitions name, each asked at once for what Docker says of it
//! (`GET /v1/engines`, `agent-hub engines`): one that does not answer is listed unreachable
//! with why, and holds up no other.

use std::collections::BTreeMap;

use super::Agents;
use crate::docker::endpoint_name;
use crate::docker::engines::{memory_left, EngineFacts};
use crate::protocol::{EngineAgent, EngineView};

impl Agents {
    /// Every engine the definitions name, in the order of their names.
    pub async fn engines(&self) -> Vec<EngineView> {
        let mut defined: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for def in self.defs() {
            defined
                .entry(def.endpoint())
                .or_default()
                .push(def.id.clone());
        }
        let build = self
            .handles
            .access
            .binary
            .as_deref()
            .and_then(|b| crate::docker::hub_binary::build_of(b).ok());
        let build = &build;
        let asked = defined.into_iter().map(|(endpoint, agents)| async move {
            let facts = self
                .handles
                .containers
                .engine_facts(endpoint, &self.hub_id)
                .await;
            let mut view = match facts {
                Ok(facts) => view_of(facts),
                Err(e) => EngineView {
                    error: Some(e.to_string()),
                    ..EngineView::default()
                },
            };
            view.engine = endpoint_name(endpoint);
            view.agents_defined = agents;
            if view.reachable {
                view.holds_this_build = build.as_ref().map(|b| view.hub_binaries.contains(b));
            }
            view
        });
        let mut views = futures_util::future::join_all(asked).await;
        views.sort_by(|a, b| a.engine.cmp(&b.engine));
        views
    }
}

fn view_of(facts: EngineFacts) -> EngineView {
    let memory_left_bytes = memory_left(&facts);
    let agents = facts
        .containers
        .into_iter()
        .filter_map(|c| {
            Some(EngineAgent {
                id: c.agent?,
                running: c.running,
                memory_used_bytes: c.memory_used,
                memory_limit_bytes: c.memory_limit,
                cpu_percent: c.cpu_percent.map(|p| (p * 10.0).round() / 10.0),
            })
        })
        .collect();
    EngineView {
        reachable: true,
        name: facts.name,
        server_version: facts.server_version,
        os: facts.os,
        cpus: facts.cpus,
        memory_total_bytes: facts.memory_total,
        memory_left_bytes,
        containers_running: facts.containers_running,
        hub_binaries: facts.hub_binaries,
        agents,
        ..EngineView::default()
    }
}
