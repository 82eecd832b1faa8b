//! API auth: every route times every role, plus no token and a wrong token; the WebSocket with
//! and without a token and from a foreign Origin; the CLI with a token; `auth = "none"`
//! answers loopback host names only. (A hub with nothing configured: `secure_default`.)

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::support::TestHub;

pub(crate) const ADMIN: &str = "admin-token-0123456789abcdef";
pub(crate) const OPERATOR: &str = "operator-token-0123456789abcdef";
pub(crate) const OBSERVER: &str = "observer-token-0123456789abcdef";

pub(crate) async fn hub_with_tokens() -> TestHub {
    let toml = format!(
        "[[tokens]]\nname = \"boss\"\ntoken = \"{ADMIN}\"\nrole = \"admin\"\n\
         [[tokens]]\nname = \"ops\"\ntoken = \"{OPERATOR}\"\nrole = \"operator\"\n\
         [[tokens]]\nname = \"eyes\"\ntoken = \"{OBSERVER}\"\nrole = \"observer\"\n"
    );
    let parsed = agent_hub::config::HubConfig::parse(&toml, "test.toml").unwrap();
    TestHub::start_with(|c| c.tokens = parsed.tokens.clone()).await
}

async fn call(
    hub: &TestHub,
    method: &str,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> (u16, Value) {
    call_as(hub, method, path, body, token, None).await
}

/// A request with a token and an `X-Agent-Id`, if given (and no credential otherwise).
pub(crate) async fn call_as(
    hub: &TestHub,
    method: &str,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
    agent: Option<&str>,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = reqwest::Client::new().request(method, format!("{}{path}", hub.base));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(a) = agent {
        req = req.header("X-Agent-Id", a);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A bash session created by the operator; its id.
async fn operator_session(hub: &TestHub) -> String {
    let (status, v) = call(
        hub,
        "POST",
        "/v1/pty/sessions",
        Some(json!({"shell": "bash", "args": ["--norc"]})),
        Some(OPERATOR),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    v["session_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_times_every_role() {
    let hub = hub_with_tokens().await;
    // A session to aim at, created by the operator.
    let id = operator_session(&hub).await;
    let s = |op: &str| format!("/v1/pty/sessions/{id}{op}");
    // (method, path, body, needed role: 0 open, 1 observer, 2 operator, 3 admin)
    let routes: Vec<(&str, String, Option<Value>, u8)> = vec![
        ("GET", "/health".into(), None, 0),
        ("GET", "/v1/pty/sessions".into(), None, 1),
        ("GET", s(""), None, 1),
        ("GET", s("/read?max_bytes=10"), None, 1),
        ("POST", s("/term_read"), Some(json!({})), 1),
        ("GET", "/v1/agents".into(), None, 1),
        ("GET", "/v1/agents/none".into(), None, 1),
        (
            "POST",
            "/v1/pty/sessions".into(),
            Some(json!({"cols": 0})),
            2,
        ),
        ("POST", s("/send_line"), Some(json!({"data": "true"})), 2),
        ("POST", s("/keys"), Some(json!({"keys": ["Enter"]})), 2),
        ("POST", s("/signal"), Some(json!({"signal": "SIGFOO"})), 2),
        ("POST", s("/talk"), Some(json!({"command": "true"})), 2),
        (
            "POST",
            s("/resize"),
            Some(json!({"cols": 90, "rows": 20})),
            2,
        ),
        ("POST", "/v1/agents/none/start".into(), Some(json!({})), 2),
        ("POST", "/v1/agents/none/stop".into(), Some(json!({})), 2),
        ("POST", "/v1/agents/none/restart".into(), Some(json!({})), 2),
        ("DELETE", "/v1/pty/sessions/pty_00000000".into(), None, 2),
        ("GET", "/v1/tasks".into(), None, 1),
        ("GET", "/v1/tasks/task_00000000".into(), None, 1),
        (
            "POST",
            "/v1/tasks/task_00000000/wait".into(),
            Some(json!({})),
            1,
        ),
        ("DELETE", "/v1/tasks/task_00000000".into(), None, 2),
        ("POST", "/v1/tasks".into(), Some(json!({"cmd": ""})), 2),
        ("GET", "/v1/events".into(), None, 1),
        ("GET", "/v1/previews".into(), None, 1),
        ("GET", s("/stream"), None, 1),
        (
            "POST",
            "/v1/pty/resolve".into(),
            Some(json!({"label": "nobody"})),
            1,
        ),
        (
            "POST",
            "/v1/pty/send_line_to_agent".into(),
            Some(json!({"label": "nobody", "data": "true"})),
            2,
        ),
        ("POST", "/v1/pty/heartbeat/pty_00000000".into(), None, 2),
        (
            "POST",
            "/v1/pty/heartbeat".into(),
            Some(json!({"session_ids": []})),
            2,
        ),
        (
            "POST",
            "/v1/pty/update-ownership".into(),
            Some(json!({"session_id": "pty_00000000"})),
            3,
        ),
        (
            "POST",
            "/v1/pty/register".into(),
            Some(json!({"session_id": "x", "bridge_url": "nope"})),
            3,
        ),
        ("DELETE", "/v1/pty/unregister/none".into(), None, 3),
        ("DELETE", "/v1/pty/reset".into(), None, 3),
        (
            "POST",
            "/pty/read".into(),
            Some(json!({"session_id": id, "timeout_ms": 0})),
            1,
        ),
        (
            "POST",
            "/pty/buffer".into(),
            Some(json!({"session_id": id})),
            1,
        ),
        ("GET", "/pty/list".into(), None, 1),
        (
            "POST",
            "/pty/write".into(),
            Some(json!({"session_id": "none", "data": ""})),
            2,
        ),
        (
            "POST",
            "/pty/talk".into(),
            Some(json!({"session_id": "none", "command": "true"})),
            2,
        ),
        ("GET", s("/state?explain=true"), None, 1),
        ("GET", "/v1/agents/none/state".into(), None, 1),
        ("GET", "/v1/policies".into(), None, 1),
        ("GET", "/v1/policies/check".into(), None, 1),
        ("POST", "/v1/policies/reload".into(), Some(json!({})), 3),
        ("GET", "/v1/pty-traffic/events".into(), None, 2),
        ("GET", "/v1/pty-traffic/events/1".into(), None, 2),
        ("GET", "/v1/pty-traffic/sessions".into(), None, 2),
        ("GET", "/v1/pty-traffic/stats".into(), None, 2),
        ("GET", "/v1/pty-traffic/blocked".into(), None, 2),
        ("GET", "/v1/pty-traffic/health".into(), None, 2),
        ("POST", "/v1/pty-traffic/storage/cleanup".into(), None, 3),
        // Unredacted output: admins only.
        ("GET", s("/read?max_bytes=10&raw=true"), None, 3),
    ];
    let roles: [(&str, Option<&str>, u8); 5] = [
        ("none", None, 0),
        ("wrong", Some("wrong-token-0123456789abcdef"), 0),
        ("observer", Some(OBSERVER), 1),
        ("operator", Some(OPERATOR), 2),
        ("admin", Some(ADMIN), 3),
    ];
    for (method, path, body, needed) in &routes {
        for (role_name, token, level) in &roles {
            let (status, v) = call(&hub, method, path, body.clone(), *token).await;
            let case = format!("{role_name} {method} {path}: {status} {v}");
            if *needed == 0 {
                assert_eq!(status, 200, "{case}");
            } else if token.is_none() || *role_name == "wrong" {
                assert_eq!(
                    (status, v["error_code"].as_str()),
                    (401, Some("UNAUTHORIZED")),
                    "{case}"
                );
            } else if level < needed {
                assert_eq!(
                    (status, v["error_code"].as_str()),
                    (403, Some("FORBIDDEN")),
                    "{case}"
                );
            } else {
                assert!(status != 401 && status != 403, "{case}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_needs_a_token_in_its_subprotocol_and_a_local_origin() {
    let hub = hub_with_tokens().await;
    let id = operator_session(&hub).await;
    let id = id.as_str();
    let url = format!(
        "{}/v1/pty/sessions/{id}/stream",
        hub.base.replace("http://", "ws://")
    );
    // No token.
    let err = tokio_tungstenite::connect_async(url.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");
    // A token in the query string is not accepted.
    let err = tokio_tungstenite::connect_async(format!("{url}?token={OBSERVER}"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("400") || err.to_string().contains("401"),
        "{err}"
    );
    // The observer token as subprotocol: hello arrives, and the token is not echoed back.
    let client = agent_hub::client::HubClient::new(&hub.base).with_token(Some(OBSERVER.into()));
    let (mut ws, resp) = tokio_tungstenite::connect_async(client.ws_request(&url).unwrap())
        .await
        .unwrap();
    assert_eq!(
        resp.headers().get("sec-websocket-protocol").unwrap(),
        "agent-hub"
    );
    let hello = ws.next().await.unwrap().unwrap();
    assert!(hello.to_text().unwrap().contains("\"hello\""));
    // An observer's viewer is read-only: input and resize frames are refused, nothing typed.
    use futures_util::SinkExt;
    for frame in [
        json!({"type": "input", "data": "echo OBSERVER_$((6*7))\r"}),
        json!({"type": "resize", "cols": 50, "rows": 10}),
    ] {
        ws.send(tokio_tungstenite::tungstenite::Message::Text(
            frame.to_string().into(),
        ))
        .await
        .unwrap();
        let refused = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            loop {
                let msg = ws.next().await.unwrap().unwrap();
                if let Ok(text) = msg.to_text() {
                    if text.contains("\"error\"") {
                        return text.to_string();
                    }
                }
            }
        })
        .await
        .expect("an error frame for the observer's frame");
        assert!(refused.contains("FORBIDDEN"), "{refused}");
    }
    ws.send(tokio_tungstenite::tungstenite::Message::Binary(
        b"echo OBSERVER_$((6*7))\r".to_vec().into(),
    ))
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (_, read) = call(
        &hub,
        "GET",
        &format!("/v1/pty/sessions/{id}/read?since=0&max_bytes=100000&timeout_ms=0"),
        None,
        Some(OBSERVER),
    )
    .await;
    assert!(
        !read["output"].as_str().unwrap().contains("OBSERVER_42"),
        "{read}"
    );
    let (_, info) = call(
        &hub,
        "GET",
        &format!("/v1/pty/sessions/{id}"),
        None,
        Some(OBSERVER),
    )
    .await;
    assert_eq!(info["session"]["cols"], 120, "{info}");
    // The audit log's live stream takes the token the same way (it answers the subprotocol).
    let audit_url = format!(
        "{}/v1/pty-traffic/stream",
        hub.base.replace("http://", "ws://")
    );
    let operator = agent_hub::client::HubClient::new(&hub.base).with_token(Some(OPERATOR.into()));
    let (_, resp) = tokio_tungstenite::connect_async(operator.ws_request(&audit_url).unwrap())
        .await
        .unwrap();
    assert_eq!(
        resp.headers().get("sec-websocket-protocol").unwrap(),
        "agent-hub"
    );
    // A foreign Origin is refused even with a valid token.
    let mut req = client.ws_request(&url).unwrap();
    req.headers_mut()
        .insert("origin", "http://evil.example".parse().unwrap());
    let err = tokio_tungstenite::connect_async(req).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_sends_its_token() {
    let hub = hub_with_tokens().await;
    let nowhere = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(crate::cli::BIN);
        cmd.args(["ls", "--hub", &hub.base])
            .args(extra)
            .env_remove("AGENT_HUB_TOKEN")
            .env_remove("AGENT_HUB_TOKEN_FILE")
            .env("AGENT_HUB_DATA_DIR", nowhere.path());
        cmd.output().unwrap()
    };
    let denied = run(&[]);
    assert_eq!(denied.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&denied.stderr).contains("UNAUTHORIZED"));
    let ok = run(&["--token", OBSERVER]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_with_auth_none_answers_loopback_host_names_only() {
    let hub = TestHub::start_with(|c| c.auth = agent_hub::config::AuthMode::None).await;
    let anonymous = reqwest::Client::new();
    for (host, ok) in [
        ("127.0.0.1:8100", true),
        ("localhost", true),
        ("[::1]:8100", true),
        ("evil.example", false),
        ("evil.example:8100", false),
        ("10.0.0.5:8100", false),
    ] {
        let resp = anonymous
            .get(format!("{}/v1/pty/sessions", hub.base))
            .header("host", host)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if ok {
            assert_eq!(status, 200, "{host}: {v}");
        } else {
            assert_eq!(
                (status, v["error_code"].as_str()),
                (403, Some("FORBIDDEN")),
                "{host}: {v}"
            );
        }
    }
}
