//! A typed client for the hub's REST and WebSocket API, used by the CLI (and usable by tests and
//! other programs). It knows *how* to talk to the hub, not what to print.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::external_sessions::RegisterRequest;
use crate::http_client::HttpClient;
use crate::owner_routing::RouteKeys;
use crate::protocol::{
    AgentListReply, AgentReply, AgentStartReply, AuditPageReply, BridgeListReply, CreateTask,
    PolicyCheckReply, PolicyListReply, PolicyReloadReply, RegisterReply, TaskCreatedReply,
    TaskListReply, TaskReply, TaskWaitReply, UnregisterReply,
};
use crate::protocol::{
    CreateSessionRequest, ErrorBody, HealthReply, KeysRequest, KillReply, ReadQuery, ReadReply,
    ResizeReply, ResizeRequest, ResolveReply, SendLineRequest, SendToAgentReply,
    SendToAgentRequest, SessionCreatedReply, SessionListReply, SessionReply, SignalReply,
    SignalRequest, TalkReply, TalkRequest, TermReadReply, WriteReply,
};

pub use crate::http_client::{encode, ClientError, WsIo, WsStream};

/// The hub's API, one typed method a route, on the one HTTP client ([`HttpClient`]), whose
/// own methods (`call`, `ws_connect`, `base`, ...) it has too.
#[derive(Clone)]
pub struct HubClient {
    http: HttpClient,
}

impl std::ops::Deref for HubClient {
    type Target = HttpClient;

    fn deref(&self) -> &HttpClient {
        &self.http
    }
}

impl HubClient {
    /// A client for the hub at `base`: `http://127.0.0.1:8100`, or `unix:///path/api.sock` for
    /// the hub's unix socket (what container agents get as `AGENT_HUB_URL`).
    pub fn new(base: &str) -> Self {
        HubClient {
            http: HttpClient::new(base, None),
        }
    }

    /// The same client, presenting `token` (if any); `source` says where it came from or where
    /// it was looked for, and is added to the hub's refusal.
    pub fn with_credential(self, token: Option<String>, source: String) -> Self {
        HubClient {
            http: self.http.with_credential(token, source),
        }
    }

    /// The same client, sending `token` as `Authorization: Bearer` (and as the WebSocket
    /// subprotocol `agent-hub.bearer.<token>`).
    pub fn with_token(self, token: Option<String>) -> Self {
        HubClient {
            http: self.http.with_token(token),
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.call(reqwest::Method::GET, path, None::<&Value>).await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<T, ClientError> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// `GET /v1/policies/check[?agent=ID]`: what each policy would do now.
    pub async fn policy_check(&self, agent: Option<&str>) -> Result<PolicyCheckReply, ClientError> {
        let query = agent
            .map(|a| format!("?agent={}", encode(a)))
            .unwrap_or_default();
        self.get(&format!("/v1/policies/check{query}")).await
    }

    /// `POST /v1/auth/rotate`: replace the owner's token.
    pub async fn rotate_owner_token(&self) -> Result<crate::protocol::RotateReply, ClientError> {
        self.post("/v1/auth/rotate", &serde_json::json!({})).await
    }

    /// `POST /v1/auth/signin-link`: a new one-time sign-in code for the dashboard.
    pub async fn signin_link(&self) -> Result<crate::protocol::SigninLinkReply, ClientError> {
        self.post("/v1/auth/signin-link", &serde_json::json!({}))
            .await
    }

    /// `GET /v1/policies`.
    pub async fn policies(&self) -> Result<PolicyListReply, ClientError> {
        self.get("/v1/policies").await
    }

    /// `POST /v1/policies/reload`.
    pub async fn policies_reload(&self) -> Result<PolicyReloadReply, ClientError> {
        self.post("/v1/policies/reload", &serde_json::json!({}))
            .await
    }

    fn session_path(id: &str, op: &str) -> String {
        format!("/v1/pty/sessions/{}{op}", encode(id))
    }

    pub async fn health(&self) -> Result<HealthReply, ClientError> {
        self.get("/health").await
    }

    pub async fn list(&self) -> Result<SessionListReply, ClientError> {
        self.get("/v1/pty/sessions").await
    }

    pub async fn create(
        &self,
        req: &CreateSessionRequest,
    ) -> Result<SessionCreatedReply, ClientError> {
        self.post("/v1/pty/sessions", req).await
    }

    pub async fn session(&self, id: &str) -> Result<SessionReply, ClientError> {
        self.get(&Self::session_path(id, "")).await
    }

    pub async fn kill(&self, id: &str) -> Result<KillReply, ClientError> {
        self.call(
            reqwest::Method::DELETE,
            &Self::session_path(id, ""),
            None::<&Value>,
        )
        .await
    }

    pub async fn send_line(&self, id: &str, data: &str) -> Result<WriteReply, ClientError> {
        let req = SendLineRequest {
            data: data.into(),
            submit: false,
            force: false,
        };
        self.post(&Self::session_path(id, "/send_line"), &req).await
    }

    /// `send_line` with `submit: true`: delivered as a prompt, answered with a receipt.
    pub async fn submit_line(
        &self,
        id: &str,
        data: &str,
        force: bool,
    ) -> Result<WriteReply, ClientError> {
        let req = SendLineRequest {
            data: data.into(),
            submit: true,
            force,
        };
        self.post(&Self::session_path(id, "/send_line"), &req).await
    }

    pub async fn keys(&self, id: &str, keys: &[String]) -> Result<WriteReply, ClientError> {
        let req = KeysRequest {
            keys: keys.to_vec(),
            receipt: false,
        };
        self.post(&Self::session_path(id, "/keys"), &req).await
    }

    pub async fn signal(&self, id: &str, signal: &str) -> Result<SignalReply, ClientError> {
        let req = SignalRequest {
            signal: signal.into(),
        };
        self.post(&Self::session_path(id, "/signal"), &req).await
    }

    pub async fn resize(&self, id: &str, cols: u16, rows: u16) -> Result<ResizeReply, ClientError> {
        let req = ResizeRequest { cols, rows };
        self.post(&Self::session_path(id, "/resize"), &req).await
    }

    pub async fn talk(
        &self,
        id: &str,
        command: &str,
        timeout_ms: Option<u64>,
    ) -> Result<TalkReply, ClientError> {
        let req = TalkRequest {
            command: command.into(),
            sentinel: None,
            timeout_ms,
        };
        self.post(&Self::session_path(id, "/talk"), &req).await
    }

    pub async fn term_read(
        &self,
        id: &str,
        req: &crate::screen::TermReadRequest,
    ) -> Result<TermReadReply, ClientError> {
        self.post(&Self::session_path(id, "/term_read"), req).await
    }

    pub async fn read(&self, id: &str, q: &ReadQuery) -> Result<ReadReply, ClientError> {
        let mut params = Vec::new();
        if let Some(v) = q.max_bytes {
            params.push(format!("max_bytes={v}"));
        }
        if let Some(v) = q.since {
            params.push(format!("since={v}"));
        }
        if let Some(v) = q.timeout_ms {
            params.push(format!("timeout_ms={v}"));
        }
        if q.encoding == crate::protocol::Encoding::Base64 {
            params.push("encoding=base64".into());
        }
        if q.raw {
            params.push("raw=true".into());
        }
        let path = format!("{}?{}", Self::session_path(id, "/read"), params.join("&"));
        self.get(&path).await
    }

    pub async fn agents(&self) -> Result<AgentListReply, ClientError> {
        self.get("/v1/agents").await
    }

    pub async fn agent(&self, id: &str) -> Result<AgentReply, ClientError> {
        self.get(&format!("/v1/agents/{}", encode(id))).await
    }

    /// `op` is `start`, `stop` or `restart`; a `fresh` start begins a new conversation (only
    /// `start` sets `already_running`; `start` and `restart` set `recreated`).
    pub async fn agent_op(
        &self,
        id: &str,
        op: &str,
        fresh: bool,
    ) -> Result<AgentStartReply, ClientError> {
        let query = if fresh { "?fresh=true" } else { "" };
        self.post(
            &format!("/v1/agents/{}/{op}{query}", encode(id)),
            &serde_json::json!({}),
        )
        .await
    }

    /// What the agent changed in its workspace (with the full diffs when `full`).
    pub async fn agent_changes(
        &self,
        id: &str,
        full: bool,
    ) -> Result<crate::protocol::AgentChangesReply, ClientError> {
        self.get(&format!("/v1/agents/{}/changes?full={full}", encode(id)))
            .await
    }

    /// `POST /v1/agents/{id}/merge`: lands the agent's branch on its base (or, `dry_run`, says
    /// what would land).
    pub async fn merge_agent(
        &self,
        id: &str,
        req: &crate::protocol::MergeRequest,
    ) -> Result<crate::protocol::MergeReply, ClientError> {
        self.post(&format!("/v1/agents/{}/merge", encode(id)), req)
            .await
    }

    /// `POST /v1/agents/{id}/update`: brings the base into the agent's branch.
    pub async fn update_agent_branch(
        &self,
        id: &str,
        req: &crate::protocol::UpdateRequest,
    ) -> Result<crate::protocol::UpdateReply, ClientError> {
        self.post(&format!("/v1/agents/{}/update", encode(id)), req)
            .await
    }

    /// `POST /v1/agents/{id}/push`: pushes the agent's branch to a remote of its repository.
    pub async fn push_agent_branch(
        &self,
        id: &str,
        req: &crate::protocol::PushRequest,
    ) -> Result<crate::protocol::PushReply, ClientError> {
        self.post(&format!("/v1/agents/{}/push", encode(id)), req)
            .await
    }

    /// What the agent spent in the period `q` names.
    pub async fn agent_usage(
        &self,
        id: &str,
        q: &crate::protocol::UsageQuery,
    ) -> Result<crate::protocol::AgentUsageReply, ClientError> {
        let query = usage_query(q, None);
        self.get(&format!("/v1/agents/{}/usage{query}", encode(id)))
            .await
    }

    /// What every agent the caller may see (of `q.team` alone, if given) spent in the period
    /// `q` names.
    pub async fn usage(
        &self,
        q: &crate::protocol::FleetUsageQuery,
    ) -> Result<crate::protocol::UsageReply, ClientError> {
        let query = usage_query(&q.period(), q.team.as_deref());
        self.get(&format!("/v1/usage{query}")).await
    }

    /// Every budget in force the caller may see.
    pub async fn budgets(&self) -> Result<crate::protocol::BudgetsReply, ClientError> {
        self.get("/v1/budgets").await
    }

    /// The engines the agents name, as Docker describes each.
    pub async fn engines(&self) -> Result<crate::protocol::EnginesReply, ClientError> {
        self.get("/v1/engines").await
    }

    /// The outgoing webhooks and what became of their messages.
    pub async fn notify_status(&self) -> Result<crate::protocol::NotifyReply, ClientError> {
        self.get("/v1/notify").await
    }

    /// Sends a test message to every webhook; each one's answer.
    pub async fn notify_test(&self) -> Result<crate::protocol::NotifyTestReply, ClientError> {
        self.post("/v1/notify/test", &serde_json::json!({})).await
    }

    /// Changes the budget of `whose` (`agents/ID` or `teams/NAME`): `set` one in place of the
    /// written one, `lift` it until it renews, or `reset` it to the written one.
    pub async fn change_budget(
        &self,
        whose: &str,
        change: BudgetChange,
    ) -> Result<crate::protocol::BudgetReply, ClientError> {
        let path = format!("/v1/{whose}/budget");
        match change {
            BudgetChange::Set(b) => self.call(reqwest::Method::PUT, &path, Some(&b)).await,
            BudgetChange::Lift => {
                self.post(&format!("{path}/lift"), &serde_json::json!({}))
                    .await
            }
            BudgetChange::Reset => {
                self.call(reqwest::Method::DELETE, &path, None::<&Value>)
                    .await
            }
        }
    }

    /// Deletes the agent's checkout (its branch stays).
    pub async fn remove_workspace(
        &self,
        id: &str,
        force: bool,
    ) -> Result<crate::protocol::WorkspaceRemoveReply, ClientError> {
        let path = format!("/v1/agents/{}/workspace?force={force}", encode(id));
        self.call(reqwest::Method::DELETE, &path, None::<&Value>)
            .await
    }

    /// Sends review notes to the agent as one prompt.
    pub async fn review_agent(
        &self,
        id: &str,
        req: &crate::protocol::ReviewRequest,
    ) -> Result<crate::protocol::ReviewReply, ClientError> {
        let path = format!("/v1/agents/{}/review", encode(id));
        self.call(reqwest::Method::POST, &path, Some(req)).await
    }

    /// Starts a task. A PTY task answers at once (`taskId`, `sessionId`); a piped one
    /// (`pty: false`) when it ends (`stdout`, `stderr`, `exitCode`).
    pub async fn create_task(&self, req: &CreateTask) -> Result<TaskCreatedReply, ClientError> {
        self.call(reqwest::Method::POST, "/v1/tasks", Some(req))
            .await
    }

    pub async fn tasks(&self) -> Result<TaskListReply, ClientError> {
        self.get("/v1/tasks").await
    }

    pub async fn task(&self, id: &str) -> Result<TaskReply, ClientError> {
        self.get(&format!("/v1/tasks/{}", encode(id))).await
    }

    /// Waits up to `timeout_ms` for a task to end: `{task, finished}`.
    pub async fn wait_task(&self, id: &str, timeout_ms: u64) -> Result<TaskWaitReply, ClientError> {
        self.post(
            &format!("/v1/tasks/{}/wait?timeout_ms={timeout_ms}", encode(id)),
            &serde_json::json!({}),
        )
        .await
    }

    /// Cancels a task (kills all its processes): `{task}`.
    pub async fn cancel_task(&self, id: &str) -> Result<TaskReply, ClientError> {
        self.call(
            reqwest::Method::DELETE,
            &format!("/v1/tasks/{}", encode(id)),
            None::<&Value>,
        )
        .await
    }

    /// A page of audit records (`GET /v1/pty-traffic/events`); `filters` are name/value pairs.
    pub async fn audit_events(
        &self,
        filters: &[(&str, String)],
    ) -> Result<AuditPageReply, ClientError> {
        let query: Vec<String> = filters
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        self.get(&format!("/v1/pty-traffic/events?{}", query.join("&")))
            .await
    }

    /// The WebSocket URL of the live audit stream.
    pub fn audit_stream_url(&self) -> String {
        format!("{}/v1/pty-traffic/stream", self.ws_base())
    }

    /// The WebSocket URL of the hub's event stream.
    pub fn events_url(&self) -> String {
        format!("{}/v1/events", self.ws_base())
    }

    /// The base URL with a WebSocket scheme.
    fn ws_base(&self) -> String {
        if let Some(rest) = self.base().strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = self.base().strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            self.base().to_string()
        }
    }

    /// The session a user means by `target`: a session id, a container agent's id (its
    /// current session), or else the one live session whose owner agent id or label is
    /// `target`, by the hub's resolve rules (`AMBIGUOUS` lists the matches; never more than
    /// one). Every CLI command that takes a session resolves it here.
    pub async fn resolve_target(&self, target: &str) -> Result<String, ClientError> {
        match self.session(target).await {
            Ok(_) => return Ok(target.to_string()),
            Err(e) if e.error_code != "PTY_SESSION_NOT_FOUND" => return Err(e),
            Err(_) => {}
        }
        if let Ok(AgentReply { agent, .. }) = self.agent(target).await {
            return match agent.session_id {
                Some(sid) if agent.pty_attached => Ok(sid),
                _ => Err(ClientError::new(
                    "AGENT_NOT_RUNNING",
                    format!(
                        "agent '{target}' is {}; start it with `agent-hub start {target}`",
                        agent.status
                    ),
                )),
            };
        }
        let keys = RouteKeys {
            agent_id: Some(target.into()),
            owner_session_id: None,
            label: Some(target.into()),
        };
        match self.resolve(&keys).await {
            Ok(reply) => Ok(reply.session_id),
            Err(e) if e.error_code == "AMBIGUOUS" => {
                let matches = e.body.matches();
                let mut body = ErrorBody::new(
                    "AMBIGUOUS",
                    format!(
                        "'{target}' matches {} sessions: {}; name one by its id",
                        matches.len(),
                        matches.join(", ")
                    ),
                );
                body.details = e.body.details;
                Err(body.into())
            }
            Err(e) if e.error_code == "NOT_FOUND" => Err(ClientError::new(
                "PTY_SESSION_NOT_FOUND",
                format!("no session, agent or label '{target}'"),
            )),
            Err(e) => Err(e),
        }
    }

    /// The bridge API's `GET /pty/list` (of the hub this client talks to).
    pub async fn bridge_list(&self) -> Result<BridgeListReply, ClientError> {
        self.get("/pty/list").await
    }

    /// `POST /v1/pty/register`
    pub async fn register(&self, req: &RegisterRequest) -> Result<RegisterReply, ClientError> {
        self.post("/v1/pty/register", req).await
    }

    /// `DELETE /v1/pty/unregister/{id}`
    pub async fn unregister(&self, id: &str, force: bool) -> Result<UnregisterReply, ClientError> {
        let query = if force { "?force=true" } else { "" };
        let path = format!("/v1/pty/unregister/{}{query}", encode(id));
        self.call(reqwest::Method::DELETE, &path, None::<&Value>)
            .await
    }

    /// `POST /v1/pty/resolve` with the given keys.
    pub async fn resolve(&self, keys: &RouteKeys) -> Result<ResolveReply, ClientError> {
        self.post("/v1/pty/resolve", keys).await
    }

    /// `POST /v1/pty/send_line_to_agent`.
    pub async fn send_line_to_agent(
        &self,
        keys: &RouteKeys,
        data: &str,
        force: bool,
    ) -> Result<SendToAgentReply, ClientError> {
        let req = SendToAgentRequest {
            data: data.into(),
            force,
            agent_id: keys.agent_id.clone(),
            owner_session_id: keys.owner_session_id.clone(),
            label: keys.label.clone(),
        };
        self.post("/v1/pty/send_line_to_agent", &req).await
    }

    /// The WebSocket URL of a session's stream.
    pub fn stream_url(&self, id: &str, since: Option<u64>) -> String {
        let since = since.map(|s| format!("?since={s}")).unwrap_or_default();
        format!(
            "{}{}{since}",
            self.ws_base(),
            Self::session_path(id, "/stream")
        )
    }
}

/// `?since=..&until=..&period=..&team=..` with the parameters given (nothing without).
/// A change to a budget (see [`HubClient::change_budget`]).
pub enum BudgetChange {
    Set(crate::protocol::Budget),
    Lift,
    Reset,
}

fn usage_query(q: &crate::protocol::UsageQuery, team: Option<&str>) -> String {
    let time = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339();
    let period = q.period.map(|p| match p {
        crate::protocol::NamedPeriod::Today => "today".to_string(),
        crate::protocol::NamedPeriod::Week => "week".to_string(),
    });
    let pairs = [
        ("since", q.since.map(time)),
        ("until", q.until.map(time)),
        ("period", period),
        ("team", team.map(String::from)),
    ];
    let set: Vec<String> = pairs
        .into_iter()
        .filter_map(|(k, v)| Some(format!("{k}={}", encode(&v?))))
        .collect();
    match set.is_empty() {
        true => String::new(),
        false => format!("?{}", set.join("&")),
    }
}
