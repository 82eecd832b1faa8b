//! The hub under test, in this process: started by the library's daemon entry point (config
//! in, API served on 127.0.0.1:0, agent sync on) and shut down by it, plus the API calls on it
//! both benchmarks make.

use std::time::{Duration, Instant};

use agent_hub::agents::{AgentInfo, AgentStatus};
use agent_hub::client::HubClient;
use agent_hub::config::HubConfig;
use agent_hub::daemon::{Components, Daemon, DaemonOptions};
use agent_hub::hub::Hub;
use agent_hub::protocol::CreateSessionRequest;
use anyhow::Result;

use super::timed_out;

/// Longest one agent start or stop request may take.
pub const OP_TIMEOUT: Duration = Duration::from_secs(600);

pub struct HubUnderTest {
    pub hub: Hub,
    pub client: HubClient,
    daemon: Daemon,
}

impl HubUnderTest {
    /// Starts a daemon from `config` with the agent sync (no persistence, policies, audit
    /// recorder or signal handlers: they are not what is measured); the client talks to it over
    /// TCP.
    pub async fn start(config: HubConfig) -> Result<Self> {
        let opts = DaemonOptions {
            listener: Some(tokio::net::TcpListener::bind("127.0.0.1:0").await?),
            components: Components {
                agent_sync: true,
                ..Components::default()
            },
            ..DaemonOptions::default()
        };
        let data_dir = config.data_dir.clone();
        let daemon = Daemon::start(config, opts)
            .await
            .map_err(anyhow::Error::msg)?;
        // The owner's token, found as the CLI finds it: in the hub's data dir.
        let credential = agent_hub::cli::credential::find(None, Some(&data_dir));
        let client = HubClient::new(&format!("http://{}", daemon.addr()))
            .with_credential(credential.token, credential.source);
        Ok(HubUnderTest {
            hub: daemon.hub().clone(),
            client,
            daemon,
        })
    }

    /// Creates a session; returns its id.
    pub async fn create(&self, req: CreateSessionRequest) -> Result<String> {
        Ok(self.client.create(&req).await?.session_id)
    }

    /// The session's output end offset (REST).
    pub async fn output_offset(&self, sid: &str) -> Result<u64> {
        Ok(self.client.session(sid).await?.session.output_offset)
    }

    /// Stops every agent still running, deletes every session still registered, then shuts
    /// the hub and its server down.
    pub async fn stop(self) {
        let running: Vec<String> = self
            .client
            .agents()
            .await
            .map(|list| list.agents)
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.status != AgentStatus::Stopped)
            .map(|a| a.id)
            .collect();
        let _ = agent_ops(&self.client, &running, "stop").await;
        for session in self.hub.list() {
            let _ = self.client.kill(session.id()).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(15), self.daemon.shutdown()).await;
    }
}

/// One agent operation's outcome.
pub struct OpResult {
    pub id: String,
    pub took: Duration,
    pub outcome: Result<AgentInfo>,
}

/// `POST /v1/agents/{id}/{op}` for every id at once, from a client of its own (a clone of
/// `hub`'s, with its credential; dropped at the end, so its connections do not stay in this
/// process). Returns each outcome and the wall
/// time until the last reply.
pub async fn agent_ops(hub: &HubClient, ids: &[String], op: &str) -> (Vec<OpResult>, Duration) {
    let client = hub.clone();
    let start = Instant::now();
    let ops = ids.iter().map(|id| {
        let client = client.clone();
        async move {
            let t0 = Instant::now();
            let outcome = timed_out(
                async { Ok(client.agent_op(id, op, false).await?.agent) },
                OP_TIMEOUT,
                op,
            )
            .await;
            OpResult {
                id: id.clone(),
                took: t0.elapsed(),
                outcome,
            }
        }
    });
    let results = futures_util::future::join_all(ops).await;
    (results, start.elapsed())
}
