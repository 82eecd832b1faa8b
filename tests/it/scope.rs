//! Agent credentials over REST, every "no" of the scope table (docs/agents.md), without containers:
//! agents `lead` (leader), `w1`, `w2` of team `a` and `wb` of team `b` are defined (never
//! started); each owns a host session (`owner_agent_id`), and credentials are minted for `lead`
//! and `w1` as a start would. Also: the unix socket refuses anonymous callers even on an open
//! hub, a revoked or unknown agent credential is refused, and `X-Agent-Id` cannot change who
//! an agent is.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::TestHub;

pub(crate) struct Fleet {
    pub hub: TestHub,
    /// The credentials of `lead` and `w1`.
    pub lead: String,
    pub w1: String,
    /// Session ids by agent.
    pub sessions: std::collections::BTreeMap<&'static str, String>,
}

/// The hub of agents `lead`, `w1`, `w2` (team `a`) and `wb` (team `b`), each with a host
/// session, and the credentials of `lead` and `w1`.
pub(crate) async fn fleet() -> Fleet {
    let mut toml = String::new();
    for (id, team, role) in [
        ("lead", "a", "leader"),
        ("w1", "a", "worker"),
        ("w2", "a", "worker"),
        ("wb", "b", "worker"),
    ] {
        toml.push_str(&format!(
            "[[agents]]\nid = \"{id}\"\nimage = \"none\"\nteam = \"{team}\"\nowner_role = \"{role}\"\n"
        ));
    }
    let parsed = agent_hub::config::HubConfig::parse(&toml, "test.toml").unwrap();
    let components = agent_hub::daemon::Components {
        audit: true,
        unix_socket: true,
        ..Default::default()
    };
    let hub = TestHub::start_components(components, |c| c.agents = parsed.agents.clone()).await;
    let mut sessions = std::collections::BTreeMap::new();
    for id in ["lead", "w1", "w2", "wb"] {
        let (status, v) = hub
            .post(
                "/v1/pty/sessions",
                json!({"shell": "bash", "args": ["--norc"], "owner_agent_id": id}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        sessions.insert(id, v["session_id"].as_str().unwrap().to_string());
    }
    let mint = |id: &str| {
        let who = hub.hub.agents().identity(id).unwrap();
        hub.hub.credentials().mint(id, who)
    };
    let (lead, w1) = (mint("lead"), mint("w1"));
    Fleet {
        hub,
        lead,
        w1,
        sessions,
    }
}

impl Fleet {
    /// `route` is "METHOD /path" with `{agent}` standing for that agent's session id; `body`
    /// is JSON text ("" for none).
    pub(crate) async fn call(&self, token: &str, route: &str, body: &str) -> (u16, Value) {
        let (method, path) = route.split_once(' ').unwrap();
        let mut path = path.to_string();
        for (agent, sid) in &self.sessions {
            path = path.replace(&format!("{{{agent}}}"), sid);
        }
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let body = (!body.is_empty()).then(|| serde_json::from_str(body).unwrap());
        call(&self.hub, token, method, &path, body).await
    }
}

async fn call(
    hub: &TestHub,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = hub
        .http
        .request(method, format!("{}{path}", hub.base))
        .bearer_auth(token)
        .header("x-agent-id", "someone-else");
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn code(v: &Value) -> &str {
    v["error_code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_credentials_are_scoped_to_their_team() {
    let f = fleet().await;
    let hub = &f.hub;

    // Lists: a worker sees itself, a leader its team.
    for (token, want) in [(&f.w1, vec!["w1"]), (&f.lead, vec!["lead", "w1", "w2"])] {
        let (status, v) = call(hub, token, Method::GET, "/v1/pty/sessions", None).await;
        assert_eq!(status, 200, "{v}");
        let mut owners: Vec<&str> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["owner_agent_id"].as_str().unwrap())
            .collect();
        owners.sort();
        assert_eq!(owners, want);
        let (_, v) = call(hub, token, Method::GET, "/v1/agents", None).await;
        let mut ids: Vec<&str> = v["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap())
            .collect();
        ids.sort();
        assert_eq!(ids, want);
    }

    // Every "no" for a worker. Paths name sessions by their agent (`{w1}`).
    #[rustfmt::skip]
    let w1_no: &[(&str, &str, u16, &str)] = &[
        ("POST /v1/pty/sessions/{w1}/send_line", r#"{"data":"x"}"#, 403, "FORBIDDEN"),
        ("POST /v1/pty/sessions/{w1}/keys", r#"{"keys":["Enter"]}"#, 403, "FORBIDDEN"),
        ("POST /v1/pty/sessions/{w1}/talk", r#"{"command":"true"}"#, 403, "FORBIDDEN"),
        ("POST /v1/pty/sessions/{w1}/resize", r#"{"cols":80,"rows":24}"#, 403, "FORBIDDEN"),
        ("POST /v1/agents/w1/start", "", 403, "FORBIDDEN"),
        ("POST /v1/agents/w1/stop", "", 403, "FORBIDDEN"),
        ("GET /v1/pty/sessions/{w2}/read", "", 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/pty/sessions/{lead}/term_read", "{}", 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/pty/sessions/{w2}/send_line", r#"{"data":"x"}"#, 404, "PTY_SESSION_NOT_FOUND"),
        ("GET /v1/agents/w2", "", 404, "AGENT_NOT_FOUND"),
        ("POST /v1/agents/w2/restart", "", 404, "AGENT_NOT_FOUND"),
        ("POST /v1/pty/send_line_to_agent", r#"{"agent_id":"w2","data":"x"}"#, 404, "NOT_FOUND"),
        ("POST /v1/pty/send_line_to_agent", r#"{"agent_id":"w1","data":"x"}"#, 403, "FORBIDDEN"),
        ("POST /v1/pty/send_line_to_agent", r#"{"agent_id":"wb","data":"x"}"#, 404, "NOT_FOUND"),
        ("POST /v1/pty/resolve", r#"{"agent_id":"w2"}"#, 404, "NOT_FOUND"),
        ("GET /v1/pty/sessions/{w2}/stream", "", 404, "PTY_SESSION_NOT_FOUND"),
        ("GET /v1/pty/sessions/{w2}/state", "", 404, "PTY_SESSION_NOT_FOUND"),
        ("GET /v1/pty/sessions/{w2}/state?wait=idle&timeout_ms=100", "", 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/agents/w1/restart", "", 403, "FORBIDDEN"),
        ("POST /v1/agents/w1/merge", "{}", 403, "FORBIDDEN"),
        ("POST /v1/agents/w1/push", "{}", 403, "FORBIDDEN"),
        ("POST /v1/agents/w2/update", "{}", 404, "AGENT_NOT_FOUND"),
    ];
    for (route, body, status, want) in w1_no {
        let (got, v) = f.call(&f.w1, route, body).await;
        assert_eq!((got, code(&v)), (*status, *want), "w1 {route}: {v}");
    }
    // What a worker may do: look at itself, message its leader.
    for (route, body) in [
        ("POST /v1/pty/sessions/{w1}/term_read", "{}"),
        ("GET /v1/pty/sessions/{w1}/state", ""),
        (
            "POST /v1/pty/send_line_to_agent",
            r#"{"agent_id":"lead","data":"report"}"#,
        ),
    ] {
        let (status, v) = f.call(&f.w1, route, body).await;
        assert_eq!(status, 200, "{route}: {v}");
    }
    // Every "no" for a leader: the other team.
    #[rustfmt::skip]
    let lead_no: &[(&str, &str, u16, &str)] = &[
        ("GET /v1/pty/sessions/{wb}/read", "", 404, "PTY_SESSION_NOT_FOUND"),
        ("GET /v1/pty/sessions/{wb}/stream", "", 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/pty/sessions/{wb}/talk", r#"{"command":"true"}"#, 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/agents/wb/stop", "", 404, "AGENT_NOT_FOUND"),
        ("GET /v1/agents/wb/state", "", 404, "AGENT_NOT_FOUND"),
        ("POST /v1/pty/send_line_to_agent", r#"{"agent_id":"wb","data":"x"}"#, 404, "NOT_FOUND"),
        ("POST /v1/pty/resolve", r#"{"agent_id":"wb"}"#, 404, "NOT_FOUND"),
        ("POST /v1/pty/sessions/{wb}/term_read", "{}", 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/pty/sessions/{wb}/send_line", r#"{"data":"x"}"#, 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/pty/sessions/{wb}/keys", r#"{"keys":["Enter"]}"#, 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/pty/sessions/{wb}/resize", r#"{"cols":80,"rows":24}"#, 404, "PTY_SESSION_NOT_FOUND"),
        ("GET /v1/pty/sessions/{wb}/state?wait=idle&timeout_ms=100", "", 404, "PTY_SESSION_NOT_FOUND"),
        ("POST /v1/agents/wb/start", "", 404, "AGENT_NOT_FOUND"),
        ("POST /v1/agents/wb/restart", "", 404, "AGENT_NOT_FOUND"),
        ("POST /v1/agents/wb/merge", "{}", 404, "AGENT_NOT_FOUND"),
        // Its own team's work only with may_merge (tests/it/land.rs has a leader with it).
        ("POST /v1/agents/w1/merge", "{}", 403, "FORBIDDEN"),
        ("POST /v1/agents/w1/update", "{}", 403, "FORBIDDEN"),
        ("POST /v1/agents/w1/push", "{}", 403, "FORBIDDEN"),
    ];
    for (route, body, status, want) in lead_no {
        let (got, v) = f.call(&f.lead, route, body).await;
        assert_eq!((got, code(&v)), (*status, *want), "lead {route}: {v}");
    }
    // What no agent may do.
    #[rustfmt::skip]
    let never: &[(&str, &str)] = &[
        ("POST /v1/pty/sessions", "{}"),
        ("DELETE /v1/pty/sessions/{w1}", ""),
        ("POST /v1/pty/sessions/{w1}/signal", r#"{"signal":"SIGINT"}"#),
        ("POST /v1/pty/register", r#"{"session_id":"x","bridge_url":"http://127.0.0.1:9"}"#),
        ("DELETE /v1/pty/unregister/x", ""),
        ("DELETE /v1/pty/reset", ""),
        ("POST /v1/pty/update-ownership", r#"{"session_id":"x"}"#),
        ("POST /v1/pty/heartbeat", r#"{"owner_agent_id":"w1"}"#),
        ("POST /v1/policies/reload", ""),
        ("GET /v1/policies", ""),
        ("GET /v1/pty-traffic/events", ""),
        ("GET /v1/pty-traffic/stream", ""),
        ("GET /v1/events", ""),
        ("GET /v1/tasks", ""),
        ("POST /v1/tasks", r#"{"cmd":"true"}"#),
        ("GET /metrics", ""),
        ("POST /pty/write", r#"{"session_id":"x","data":"x"}"#),
    ];
    for token in [&f.lead, &f.w1] {
        for (route, body) in never {
            let (got, v) = f.call(token, route, body).await;
            assert_eq!((got, code(&v)), (403, "FORBIDDEN"), "{route}: {v}");
        }
    }
    // What a leader may do in its team.
    let talk = f.call(
        &f.lead,
        "POST /v1/pty/sessions/{w2}/talk",
        r#"{"command":"echo hi"}"#,
    );
    let (status, v) = talk.await;
    assert_eq!(status, 200, "{v}");

    // The audit log names the agent, whatever X-Agent-Id said.
    let (_, v) = hub.get("/v1/pty-traffic/events?action=talk").await;
    let e = &v["events"][0];
    assert_eq!(
        (e["actor"].as_str(), e["actor_agent_id"].as_str()),
        (Some("agent:lead"), Some("lead")),
        "{v}"
    );

    // A revoked credential, and one that never was.
    hub.hub.credentials().revoke("w1");
    for token in [f.w1.clone(), format!("ahk_{}", "0".repeat(64))] {
        let (status, v) = call(hub, &token, Method::GET, "/v1/pty/sessions", None).await;
        assert_eq!((status, code(&v)), (401, "UNAUTHORIZED"), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unix_socket_needs_a_credential_even_on_an_open_hub() {
    let f = fleet().await;
    let socket = f.hub.hub.agents().hub_access().socket_path();
    let over_socket = |token: Option<&str>| {
        let http = reqwest::Client::builder()
            .unix_socket(socket.clone())
            .build()
            .unwrap();
        let mut req = http.get("http://localhost/v1/pty/sessions");
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req
    };
    let anonymous = over_socket(None).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let made_up = over_socket(Some("anything")).send().await.unwrap();
    assert_eq!(made_up.status().as_u16(), 401);
    let lead = over_socket(Some(&f.lead)).send().await.unwrap();
    assert_eq!(lead.status().as_u16(), 200);
    let v: Value = lead.json().await.unwrap();
    assert_eq!(v["count"], 3, "{v}");
    // The owner's token works on both.
    assert_eq!(f.hub.get("/v1/pty/sessions").await.0, 200);
    let owner = over_socket(Some(&f.hub.owner_token)).send().await.unwrap();
    assert_eq!(owner.status().as_u16(), 200);
    // The client and the CLI speak unix:// URLs.
    let hub_url = format!("unix://{}", socket.display());
    let mut ls = std::process::Command::new(crate::cli::BIN);
    ls.args(["ls", "--json", "--hub", &hub_url]);
    let out = ls.env("AGENT_HUB_TOKEN", &f.w1).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["count"], 1, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_session_can_be_given_the_hub_as_its_owner_agent() {
    let f = fleet().await;
    let (status, v) = f
        .hub
        .post(
            "/v1/pty/sessions",
            json!({"shell": "bash", "args": ["--norc", "--noprofile"], "owner_agent_id": "w1", "hub_access": true}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let sid = v["session_id"].as_str().unwrap().to_string();
    // Inside the session: the hub's address and a credential that acts as w1.
    let bin = crate::cli::BIN;
    let (status, v) = f
        .hub
        .post(
            &format!("/v1/pty/sessions/{sid}/talk"),
            json!({"command": format!("echo id=$AGENT_HUB_AGENT_ID; {bin} ls --json | grep -o '\"count\":[0-9]*'"), "timeout_ms": 20000}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let out = v["output"].as_str().unwrap();
    assert!(out.contains("id=w1"), "{out}");
    // w1 sees its own sessions: the one from the fleet and this one.
    assert!(out.contains("\"count\":2"), "{out}");
    assert!(
        !out.contains("ahk_"),
        "the credential is redacted in the output: {out}"
    );
    // Without an owner agent there is nothing to act as.
    let (status, v) = f
        .hub
        .post("/v1/pty/sessions", json!({"hub_access": true}))
        .await;
    assert_eq!((status, code(&v)), (400, "BAD_REQUEST"), "{v}");
    // Killing the session revokes its credential (read here through a file: the terminal
    // never shows it, see below).
    let file = f.hub.hub.config().data_dir.join("token-seen-by-the-test");
    let (status, v) = f
        .hub
        .post(
            &format!("/v1/pty/sessions/{sid}/talk"),
            json!({"command": format!("printf %s \"$AGENT_HUB_TOKEN\" > {}", file.display())}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let token = std::fs::read_to_string(&file).unwrap();
    assert!(token.starts_with("ahk_"), "{token}");
    // Printed in the terminal, the credential is redacted on every output path.
    let (status, v) = f
        .hub
        .post(
            &format!("/v1/pty/sessions/{sid}/talk"),
            json!({"command": "echo tok=$AGENT_HUB_TOKEN"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let out = v["output"].as_str().unwrap();
    assert!(out.contains("tok=") && !out.contains(&token), "{out}");
    let (_, v) = f
        .hub
        .get(&format!("/v1/pty/sessions/{sid}/read?max_bytes=100000"))
        .await;
    assert!(!v["output"].as_str().unwrap().contains(&token), "{v}");
    assert_eq!(
        call(&f.hub, &token, Method::GET, "/v1/pty/sessions", None)
            .await
            .0,
        200
    );
    assert_eq!(
        f.hub.delete(&format!("/v1/pty/sessions/{sid}")).await.0,
        200
    );
    assert_eq!(
        call(&f.hub, &token, Method::GET, "/v1/pty/sessions", None)
            .await
            .0,
        401
    );
}
