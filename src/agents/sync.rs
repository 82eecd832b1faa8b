//! Keeping agent status true to what the containers do, including behind the hub's back: at
//! start-up (and on every reconnect) a full reconcile re-attaches every running agent
//! container of this hub; between reconciles the Docker events stream (filtered by label)
//! reports starts and deaths as they happen, and a ping every [`PING_EVERY`] tells an engine
//! that went quiet (its agents read `unreachable` until it answers and they are re-attached).
//! One loop per endpoint, so an engine that goes away affects only its own agents.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bollard::query_parameters::EventsOptionsBuilder;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Agents;
use crate::docker::{self, Endpoints, LABEL_AGENT, LABEL_HUB, LABEL_MANAGED};

/// Wait before reconnecting to an engine that went away; doubles up to the maximum.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
const RECONNECT_DELAY_MAX: Duration = Duration::from_secs(8);
/// An engine is asked this often whether it answers: a frozen engine (a stopped `dockerd`, a
/// network that drops packets) ends no stream, it only goes quiet.
const PING_EVERY: Duration = Duration::from_secs(2);
/// How long a ping may take before the engine counts as gone (its agents `unreachable`).
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the engine answers a ping within [`PING_TIMEOUT`].
async fn answers(docker: &bollard::Docker) -> bool {
    matches!(
        tokio::time::timeout(PING_TIMEOUT, docker.ping()).await,
        Ok(Ok(_))
    )
}

/// The Docker sync component: one loop per endpoint a defined agent may use.
pub struct AgentSync {
    pub agents: Arc<Agents>,
    pub endpoints: Arc<Endpoints>,
    pub metrics: crate::metrics::Metrics,
}

impl AgentSync {
    /// Starts the loops on `tracker`, one for every engine a definition may use; they end when
    /// `closing` is cancelled.
    pub fn start(self, tracker: &TaskTracker, closing: CancellationToken) {
        let endpoints: BTreeSet<String> = self
            .agents
            .defs()
            .flat_map(|d| d.engines())
            .map(String::from)
            .collect();
        let this = Arc::new(self);
        for endpoint in endpoints {
            let this = this.clone();
            let closing = closing.clone();
            tracker.spawn(async move {
                tokio::select! {
                    _ = closing.cancelled() => {}
                    _ = this.run(endpoint) => {}
                }
            });
        }
    }

    async fn run(&self, endpoint: String) {
        let agents = &self.agents;
        let mut since: Option<i64> = None;
        let mut delay = RECONNECT_DELAY;
        let mut reported_down = false;
        loop {
            let docker = match self.endpoints.client(&endpoint).await {
                Ok(d) => d,
                Err(e) => {
                    self.metrics.engine_reachable(&endpoint, false);
                    if !reported_down {
                        tracing::warn!(endpoint = %docker::endpoint_name(&endpoint), "{e}; retrying with backoff");
                        reported_down = true;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(RECONNECT_DELAY_MAX);
                    continue;
                }
            };
            if reported_down {
                tracing::info!(endpoint = %docker::endpoint_name(&endpoint), "Docker engine reachable again");
                reported_down = false;
            }
            delay = RECONNECT_DELAY;
            self.metrics.engine_reachable(&endpoint, true);
            // Subscribe first, then reconcile: nothing that happens in between is missed.
            let mut filters = HashMap::new();
            filters.insert("type", vec!["container".to_string()]);
            filters.insert(
                "label",
                vec![
                    format!("{LABEL_MANAGED}=true"),
                    format!("{LABEL_HUB}={}", agents.hub_id()),
                ],
            );
            let mut options = EventsOptionsBuilder::default().filters(&filters);
            let since_text;
            if let Some(t) = since {
                since_text = t.to_string();
                options = options.since(&since_text);
            }
            let mut events = docker.events(Some(options.build()));
            agents.reconcile(&endpoint).await;
            let mut ping = tokio::time::interval(PING_EVERY);
            loop {
                let event = tokio::select! {
                    e = events.next() => e,
                    _ = ping.tick() => match answers(&docker).await {
                        true => continue,
                        false => {
                            tracing::warn!(endpoint = %docker::endpoint_name(&endpoint), "Docker engine does not answer within {}s", PING_TIMEOUT.as_secs());
                            break;
                        }
                    },
                };
                let Some(Ok(event)) = event else { break };
                since = event.time.or(since);
                let action = event.action.unwrap_or_default();
                let actor = event.actor.unwrap_or_default();
                let container_id = actor.id.unwrap_or_default();
                let attrs = actor.attributes.unwrap_or_default();
                let Some(agent) = attrs.get(LABEL_AGENT).cloned() else {
                    continue;
                };
                if agents.def(&agent).is_err() {
                    continue;
                }
                match action.as_str() {
                    "start" => agents.reconcile_agent(&agent).await,
                    "die" => {
                        let code = attrs.get("exitCode").and_then(|c| c.parse().ok());
                        agents.container_died(&agent, code);
                    }
                    "destroy" => agents.container_removed(&agent, &container_id),
                    _ => {}
                }
            }
            tracing::warn!(endpoint = %docker::endpoint_name(&endpoint), "Docker events stream ended or the engine went quiet; reconnecting");
            self.endpoints.forget(&endpoint).await;
            agents.mark_unreachable(&endpoint);
            self.metrics.engine_reachable(&endpoint, false);
            tokio::time::sleep(RECONNECT_DELAY).await;
        }
    }
}
