//! Gauges filled in when `/metrics` is scraped (sessions, agents, agent states, engines), from
//! the sessions and agent statuses the caller hands over, and the text of a scrape.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::EndpointLabels;
use crate::session::Session;

/// Every agent status, so each is reported (as 0 when no agent has it).
const AGENT_STATUSES: [&str; 7] = [
    "stopped",
    "starting",
    "running",
    "unreachable",
    "stopping",
    "exited",
    "failed",
];
/// Every session state; `stuck` is `working` with no meaningful change for too long.
const SESSION_STATES: [&str; 7] = [
    "working", "idle", "blocked", "limited", "stuck", "exited", "unknown",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    source: String,
    alive: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentStateLabels {
    agent: String,
    session: String,
    state: String,
}

pub(super) struct StateGauges {
    /// One scrape at a time: each clears and refills the families below.
    lock: Mutex<()>,
    sessions: Family<SessionLabels, Gauge>,
    agents: Family<StatusLabels, Gauge>,
    session_states: Family<StateLabels, Gauge>,
    agent_state_seconds: Family<AgentStateLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    engine_up: Family<EndpointLabels, Gauge>,
}

impl StateGauges {
    pub(super) fn register(r: &mut Registry) -> Self {
        let g = StateGauges {
            lock: Mutex::new(()),
            sessions: Family::default(),
            agents: Family::default(),
            session_states: Family::default(),
            agent_state_seconds: Family::default(),
            engine_up: Family::default(),
        };
        super::register!(r,
            "sessions" => g.sessions, "Sessions by source (host, docker, external ones' own) and whether their program runs";
            "agents" => g.agents, "Configured container agents by status";
            "sessions_by_state" => g.session_states, "Sessions by agent state (working, idle, blocked, limited, stuck, exited, unknown)";
            "agent_state_seconds" => g.agent_state_seconds, "How long each agent's session has been in its current state (one series per agent, its current state)";
            "docker_engine_up" => g.engine_up, "Whether the hub is connected to each Docker engine of hub.toml (1) or not (0)";
        );
        g
    }

    pub(super) fn engine_reachable(&self, endpoint: &str, up: bool) {
        self.engine_up
            .get_or_create(&EndpointLabels {
                endpoint: crate::docker::endpoint_name(endpoint),
            })
            .set(i64::from(up));
    }

    /// Refills the gauges from the sessions and the agents' statuses now.
    fn refresh(&self, sessions: &[std::sync::Arc<Session>], agent_statuses: &[String]) {
        let now = chrono::Utc::now();
        let mut counts: BTreeMap<(String, bool), i64> = BTreeMap::new();
        let mut states: BTreeMap<&'static str, i64> =
            SESSION_STATES.iter().map(|s| (*s, 0)).collect();
        self.agent_state_seconds.clear();
        for session in sessions {
            let spec = session.spec();
            let alive = session.output().exit().is_none();
            *counts.entry((spec.source.clone(), alive)).or_default() += 1;
            let report = session.state_report();
            let state = if report.stuck {
                "stuck"
            } else {
                report.state.as_str()
            };
            *states.entry(state).or_default() += 1;
            let agent = spec
                .agent_id
                .clone()
                .or_else(|| session.owner().owner_agent_id);
            if let Some(agent) = agent {
                let secs = (now - report.since).num_milliseconds().max(0) as f64 / 1000.0;
                self.agent_state_seconds
                    .get_or_create(&AgentStateLabels {
                        agent,
                        session: spec.id.clone(),
                        state: state.into(),
                    })
                    .set(secs);
            }
        }
        self.sessions.clear();
        for ((source, alive), n) in counts {
            self.sessions
                .get_or_create(&SessionLabels {
                    source,
                    alive: alive.to_string(),
                })
                .set(n);
        }
        for (state, n) in states {
            self.session_states
                .get_or_create(&StateLabels {
                    state: state.into(),
                })
                .set(n);
        }
        let mut agents: BTreeMap<String, i64> =
            AGENT_STATUSES.iter().map(|s| (s.to_string(), 0)).collect();
        for status in agent_statuses {
            *agents.entry(status.clone()).or_default() += 1;
        }
        for (status, n) in agents {
            self.agents.get_or_create(&StatusLabels { status }).set(n);
        }
    }
}

impl super::Metrics {
    /// The text of one scrape (OpenMetrics, which Prometheus reads), with the gauges read
    /// from `sessions` and the agents' statuses, and the usage counters caught up with
    /// `usage`.
    pub fn render(
        &self,
        sessions: &[std::sync::Arc<Session>],
        agent_statuses: &[String],
        usage: &[crate::usage::tally::Total],
    ) -> String {
        let gauges = &self.inner.scraped;
        let _one = gauges.lock.lock().unwrap_or_else(|e| e.into_inner());
        gauges.refresh(sessions, agent_statuses);
        self.inner.usage.catch_up(usage);
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.inner.registry) {
            tracing::error!("encoding metrics: {e}");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_status_is_reported() {
        use crate::protocol::AgentStatus as S;
        let all = [
            S::Stopped,
            S::Starting,
            S::Running,
            S::Unreachable,
            S::Stopping,
            S::Exited,
            S::Failed,
        ];
        for status in all {
            // A status added to the enum fails to compile here until it is listed above.
            match status {
                S::Stopped
                | S::Starting
                | S::Running
                | S::Unreachable
                | S::Stopping
                | S::Exited
                | S::Failed => {}
            }
            let name = serde_json::to_value(status).unwrap();
            assert!(AGENT_STATUSES.contains(&name.as_str().unwrap()), "{name}");
        }
    }
}
