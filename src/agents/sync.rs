//! Keeping agent status true to what the containers do, including behind the hub's back: at
//! start-up (and on every reconnect) a full reconcile re-attaches every running agent
//! container of this hub; between reconciles the Docker events stream (filtered by label)
//! reports starts and deaths as they happen. One loop per endpoint, so an engine that goes
//! away affects only its own agents.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use bollard::query_parameters::EventsOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;

use super::{attach, emit, AgentStatus};
use crate::docker::{self, LABEL_AGENT, LABEL_HUB, LABEL_MANAGED};
use crate::hub::Hub;
use crate::protocol::EventKind;

/// Wait before reconnecting to an engine that went away; doubles up to the maximum.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
const RECONNECT_DELAY_MAX: Duration = Duration::from_secs(30);

/// Starts one sync loop per endpoint used by a defined agent; they end when the hub closes.
pub fn spawn(hub: &Hub) {
    let endpoints: BTreeSet<String> = hub
        .agents()
        .defs()
        .map(|d| d.endpoint().to_string())
        .collect();
    for endpoint in endpoints {
        let hub = hub.clone();
        let closing = hub.closing();
        hub.clone().spawn(async move {
            tokio::select! {
                _ = closing.cancelled() => {}
                _ = run(hub, endpoint) => {}
            }
        });
    }
}

async fn run(hub: Hub, endpoint: String) {
    let mut since: Option<i64> = None;
    let mut delay = RECONNECT_DELAY;
    let mut reported_down = false;
    loop {
        let docker = match hub.agents().endpoints().client(&endpoint).await {
            Ok(d) => d,
            Err(e) => {
                hub.metrics().engine_reachable(&endpoint, false);
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
        hub.metrics().engine_reachable(&endpoint, true);
        // Subscribe first, then reconcile: nothing that happens in between is missed.
        let mut filters = HashMap::new();
        filters.insert("type", vec!["container".to_string()]);
        filters.insert(
            "label",
            vec![
                format!("{LABEL_MANAGED}=true"),
                format!("{LABEL_HUB}={}", hub.agents().hub_id()),
            ],
        );
        let mut options = EventsOptionsBuilder::default().filters(&filters);
        let since_text;
        if let Some(t) = since {
            since_text = t.to_string();
            options = options.since(&since_text);
        }
        let mut events = docker.events(Some(options.build()));
        reconcile(&hub, &docker, &endpoint).await;
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            since = event.time.or(since);
            let action = event.action.unwrap_or_default();
            let attrs = event.actor.and_then(|a| a.attributes).unwrap_or_default();
            let Some(agent) = attrs.get(LABEL_AGENT).cloned() else {
                continue;
            };
            if hub.agents().def(&agent).is_err() {
                continue;
            }
            match action.as_str() {
                "start" => reconcile_agent(&hub, &docker, &agent).await,
                "die" => {
                    let code = attrs.get("exitCode").and_then(|c| c.parse().ok());
                    container_died(&hub, &agent, code);
                }
                "destroy" => hub.agents().update(&agent, |rt| {
                    if rt.status != AgentStatus::Starting {
                        rt.container_id = None;
                    }
                }),
                _ => {}
            }
        }
        tracing::warn!(endpoint = %docker::endpoint_name(&endpoint), "Docker events stream ended; reconnecting");
        hub.agents().endpoints().forget(&endpoint).await;
        mark_unreachable(&hub, &endpoint);
        hub.metrics().engine_reachable(&endpoint, false);
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// A container of a running agent ended without the hub asking.
fn container_died(hub: &Hub, agent: &str, exit_code: Option<i64>) {
    let mut changed = false;
    hub.agents().update(agent, |rt| {
        if rt.status == AgentStatus::Running {
            rt.status = AgentStatus::Exited;
            rt.exit_code = exit_code;
            changed = true;
        }
    });
    if changed {
        emit(
            hub,
            agent,
            EventKind::AgentExited,
            &format!("container exited (exit code {exit_code:?})"),
        );
    }
}

/// The ids of the agents that live on `endpoint`.
fn endpoint_agents(hub: &Hub, endpoint: &str) -> Vec<String> {
    hub.agents()
        .defs()
        .filter(|d| d.endpoint() == endpoint)
        .map(|d| d.id.clone())
        .collect()
}

/// While an engine is unreachable its running agents cannot be seen: say so.
fn mark_unreachable(hub: &Hub, endpoint: &str) {
    let ids = endpoint_agents(hub, endpoint);
    for id in ids {
        hub.agents().update(&id, |rt| {
            if rt.status == AgentStatus::Running {
                rt.error = Some(format!(
                    "Docker engine {} unreachable; status may be stale",
                    docker::endpoint_name(endpoint)
                ));
            }
        });
    }
}

/// Brings every agent of this endpoint in line with its container.
async fn reconcile(hub: &Hub, docker: &Docker, endpoint: &str) {
    let containers = match docker::list_managed(docker, endpoint, hub.agents().hub_id()).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("reconcile: {e}");
            return;
        }
    };
    let ids = endpoint_agents(hub, endpoint);
    for id in ids {
        let has_container = containers.iter().any(|c| {
            c.labels
                .as_ref()
                .and_then(|l| l.get(LABEL_AGENT))
                .is_some_and(|a| *a == id)
        });
        hub.agents().update(&id, |rt| {
            if rt
                .error
                .as_deref()
                .is_some_and(|e| e.contains("unreachable"))
            {
                rt.error = None;
            }
        });
        if has_container {
            reconcile_agent(hub, docker, &id).await;
        } else {
            hub.agents().update(&id, |rt| {
                if matches!(rt.status, AgentStatus::Running) {
                    rt.status = AgentStatus::Stopped;
                }
                rt.container_id = None;
            });
        }
    }
}

/// Re-attaches a running agent container the hub is not attached to, or records that it is
/// not running. Skipped while the hub itself is starting or stopping the agent.
async fn reconcile_agent(hub: &Hub, docker: &Docker, agent: &str) {
    let Ok(lock) = hub.agents().op_lock(agent) else {
        return;
    };
    let Ok(_op) = lock.try_lock() else { return };
    let Ok(def) = hub.agents().def(agent).cloned() else {
        return;
    };
    let name = docker::container_name(hub.agents().hub_id(), agent);
    let Ok(container) = docker.inspect_container(&name, None).await else {
        return;
    };
    let state = container.state.unwrap_or_default();
    let container_id = container.id.unwrap_or(name);
    if state.running != Some(true) {
        hub.agents().update(agent, |rt| {
            rt.container_id = Some(container_id.clone());
            if rt.status == AgentStatus::Running {
                rt.status = AgentStatus::Exited;
                rt.exit_code = state.exit_code;
            }
        });
        return;
    }
    if super::attached(hub, agent) {
        return;
    }
    hub.agents().update(agent, |rt| {
        rt.container_id = Some(container_id.clone());
        rt.status = AgentStatus::Starting;
    });
    match attach(hub, &def, docker, &container_id, false).await {
        Ok(_) => {
            hub.agents().update(agent, |rt| {
                rt.status = AgentStatus::Running;
                rt.error = None;
                if rt.started_at.is_none() {
                    rt.started_at = state
                        .started_at
                        .as_deref()
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&chrono::Utc));
                }
            });
            emit(
                hub,
                agent,
                EventKind::AgentAttached,
                "re-attached to a running container",
            );
        }
        Err(e) => {
            hub.agents().update(agent, |rt| {
                rt.status = AgentStatus::Failed;
                rt.error = Some(e.to_string());
            });
            emit(hub, agent, EventKind::AgentAttachFailed, &e.to_string());
        }
    }
}
