//! The audit log: every audited action recorded exactly once with the right actor (token name
//! and `X-Agent-Id`); the query API's filters and pagination; the live stream; refusal with
//! `AUDIT_UNAVAILABLE` when the log cannot be written (and `fail_open`); and, after a SIGKILL of
//! a real `agent-hub serve`, no acknowledged operation missing from the SQLite file.

use std::collections::BTreeMap;
use std::time::Duration;

use agent_hub::protocol::{EventKind, PolicyAction, PolicyEvent};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{json_reply, wait_until, TestHub};

use crate::auth::{hub_with_tokens, ADMIN, OPERATOR};

async fn call(
    hub: &TestHub,
    method: &str,
    path: &str,
    body: Option<Value>,
    token: &str,
    agent: Option<&str>,
) -> (u16, Value) {
    crate::auth::call_as(hub, method, path, body, Some(token), agent).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_audited_action_is_recorded_once_with_its_actor() {
    let hub = hub_with_tokens().await;
    let op = |m: &'static str, p: String, b: Option<Value>| (m, p, b, OPERATOR, Some("leader-1"));
    let (status, v) = call(
        &hub,
        "POST",
        "/v1/pty/sessions",
        Some(json!({"shell": "bash", "args": ["--norc"], "label": "w1", "cli_type": "bash"})),
        OPERATOR,
        Some("leader-1"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let s = |o: &str| format!("/v1/pty/sessions/{id}/{o}");
    let calls = vec![
        op("POST", s("send_line"), Some(json!({"data": "echo one"}))),
        op(
            "POST",
            s("keys"),
            Some(json!({"keys": ["e", "c", "h", "o", "Enter"]})),
        ),
        op("POST", s("signal"), Some(json!({"signal": "SIGINT"}))),
        op("POST", s("talk"), Some(json!({"command": "echo two"}))),
        op(
            "POST",
            "/v1/pty/send_line_to_agent".into(),
            Some(json!({"label": "w1", "data": "echo three"})),
        ),
        op("POST", s("resize"), Some(json!({"cols": 100, "rows": 30}))),
        op(
            "POST",
            s("send_line"),
            Some(json!({"data": "echo x # rm -rf /"})),
        ),
        op("POST", "/v1/tasks".into(), Some(json!({"cmd": "sleep 30"}))),
        (
            "POST",
            "/v1/pty/update-ownership".into(),
            Some(json!({"session_id": id, "owner_session_id": "lead"})),
            ADMIN,
            None,
        ),
    ];
    for (method, path, body, token, agent) in &calls {
        let (status, v) = call(&hub, method, path, body.clone(), token, *agent).await;
        assert!(status == 200 || status == 403, "{path}: {status} {v}");
        if let Some(task) = v["taskId"].as_str().or(v["id"].as_str()) {
            let (status, v) = call(
                &hub,
                "DELETE",
                &format!("/v1/tasks/{task}"),
                None,
                OPERATOR,
                None,
            )
            .await;
            assert_eq!(status, 200, "{v}");
        }
    }
    let (status, v) = call(
        &hub,
        "DELETE",
        &format!("/v1/pty/sessions/{id}"),
        None,
        ADMIN,
        Some("human"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    // The hub's own tokens are redacted wherever they appear.
    assert_eq!(
        hub.hub.redactor().redact_str(&format!("t={OPERATOR}.")),
        "t=[REDACTED]."
    );
    // Agent operations are audited even when they fail.
    let (status, _) = call(&hub, "POST", "/v1/agents/none/start", None, OPERATOR, None).await;
    assert_eq!(status, 404);
    // Policy actions (published on the hub's bus by the policy engine) are recorded too.
    hub.hub.emit(EventKind::PolicyRestarted(PolicyEvent {
        agent_id: Some("a1".into()),
        session_id: "s1".into(),
        policy: "p".into(),
        action: PolicyAction::Restart,
        trigger: None,
        reason: "idle".into(),
        state: agent_hub::agent_state::State::Idle,
        idle_for_ms: 0,
        dry_run: false,
    }));
    assert!(
        wait_until(Duration::from_secs(5), || async {
            let (_, v) = call(
                &hub,
                "GET",
                "/v1/pty-traffic/events?action=policy_restarted",
                None,
                OPERATOR,
                None,
            )
            .await;
            v["total"] == 1
                && v["events"][0]["actor"] == "hub"
                && v["events"][0]["agent_id"] == "a1"
        })
        .await,
        "policy event not recorded"
    );
    // Reads are not audited.
    call(&hub, "GET", &s("read"), None, OPERATOR, None).await;
    call(
        &hub,
        "POST",
        &s("term_read"),
        Some(json!({})),
        OPERATOR,
        None,
    )
    .await;

    let (status, v) = call(
        &hub,
        "GET",
        "/v1/pty-traffic/events?limit=1000",
        None,
        OPERATOR,
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let mut by_action: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in v["events"].as_array().unwrap() {
        by_action
            .entry(e["action"].as_str().unwrap().into())
            .or_default()
            .push(e.clone());
    }
    let expected = [
        ("create", "ops", Some("leader-1"), true),
        ("keys", "ops", Some("leader-1"), true),
        ("signal", "ops", Some("leader-1"), true),
        ("talk", "ops", Some("leader-1"), true),
        ("send_line_to_agent", "ops", Some("leader-1"), true),
        ("resize", "ops", Some("leader-1"), true),
        ("task_create", "ops", Some("leader-1"), true),
        ("task_cancel", "ops", None, true),
        ("update_ownership", "boss", None, true),
        ("kill", "boss", Some("human"), true),
        ("agent_start", "ops", None, false),
        ("policy_restarted", "hub", None, true),
    ];
    for (action, actor, agent, success) in expected {
        let events = by_action
            .get(action)
            .unwrap_or_else(|| panic!("no {action}: {by_action:?}"));
        assert_eq!(events.len(), 1, "{action}: {events:?}");
        let e = &events[0];
        assert_eq!(e["actor"], actor, "{e}");
        assert_eq!(e["actor_agent_id"].as_str(), agent, "{e}");
        assert_eq!(e["success"], success, "{e}");
        assert!(actor == "hub" || e["duration_ms"].is_number(), "{e}");
    }
    // send_line: one success and one blocked attempt.
    let sends = &by_action["send_line"];
    assert_eq!(sends.len(), 2, "{sends:?}");
    assert_eq!(
        (sends[0]["success"].clone(), sends[0]["blocked"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(sends[1]["blocked"], true);
    assert_eq!(sends[1]["blocked_pattern"], "rm-rf-root");
    assert_eq!(sends[1]["error_code"], "PTY_COMMAND_BLOCKED");
    // Session fields are filled in; command and response are recorded.
    let talk = &by_action["talk"][0];
    assert_eq!(
        (
            talk["session_id"].as_str(),
            talk["label"].as_str(),
            talk["cli_type"].as_str()
        ),
        (Some(id.as_str()), Some("w1"), Some("bash"))
    );
    assert!(talk["command"].as_str().unwrap().contains("echo two"));
    assert!(
        talk["response"]
            .as_str()
            .unwrap()
            .contains("\"exit_code\":0"),
        "{talk}"
    );
    assert_eq!(
        by_action["send_line_to_agent"][0]["session_id"],
        id.as_str()
    );
    assert_eq!(by_action["kill"][0]["owner_session_id"], "lead");
    assert!(!by_action.contains_key("read") && !by_action.contains_key("term_read"));
    // Reading the log needs an operator; pruning it an admin.
    let (status, _) = call(
        &hub,
        "POST",
        "/v1/pty-traffic/storage/cleanup",
        None,
        OPERATOR,
        None,
    )
    .await;
    assert_eq!(status, 403);
    let (status, v) = call(
        &hub,
        "POST",
        "/v1/pty-traffic/storage/cleanup",
        None,
        ADMIN,
        None,
    )
    .await;
    assert_eq!((status, v["deleted"].as_u64()), (200, Some(0)), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_api_filters_pages_and_streams() {
    let hub = TestHub::start().await;
    let a = hub.create("pty").await;
    let b = hub.create("pty").await;
    let mut live = hub.connect_ws("/v1/pty-traffic/stream").await;
    for i in 0..12 {
        let id = if i % 2 == 0 { &a } else { &b };
        hub.post(
            &format!("/v1/pty/sessions/{id}/send_line"),
            json!({ "data": format!("echo n{i}") }),
        )
        .await;
    }
    let (status, _) = hub
        .post(
            &format!("/v1/pty/sessions/{a}/signal"),
            json!({"signal": "SIGNOPE"}),
        )
        .await;
    assert_eq!(status, 400);
    hub.post(
        &format!("/v1/pty/sessions/{b}/send_line"),
        json!({"data": "echo x; halt"}),
    )
    .await;

    // The live stream saw every record, in order.
    let mut streamed = Vec::new();
    while streamed.len() < 14 {
        let frame = tokio::time::timeout(Duration::from_secs(10), live.next()).await;
        let Ok(Some(Ok(Message::Text(t)))) = frame else {
            panic!("stream: {frame:?}")
        };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        assert_eq!(v["type"], "audit_event");
        streamed.push(v["event"].clone());
    }
    assert!(streamed[0]["command"].as_str().unwrap().contains("echo n0"));
    assert_eq!(streamed[12]["error_code"], "BAD_REQUEST");
    assert_eq!(streamed[13]["blocked_pattern"], "halt");

    let get = |q: String| {
        let hub = &hub;
        async move {
            let (status, v) = hub.get(&format!("/v1/pty-traffic/events?{q}")).await;
            assert_eq!(status, 200, "{q}: {v}");
            v
        }
    };
    assert_eq!(get(String::new()).await["total"], 16);
    assert_eq!(get(format!("session_id={a}")).await["total"], 8);
    assert_eq!(get("action=send_line".into()).await["total"], 13);
    assert_eq!(get("errors_only=true".into()).await["total"], 2);
    assert_eq!(get("blocked_only=true".into()).await["total"], 1);
    assert_eq!(get("search=echo%20n7".into()).await["total"], 1);
    let page = get("action=send_line&limit=5&offset=5".into()).await;
    let commands: Vec<String> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["command"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(page["count"], 5);
    assert!(
        commands[0].contains("echo n5") && commands[4].contains("echo n9"),
        "{commands:?}"
    );
    // Cursor paging: after the last id seen.
    let cursor = page["next_cursor"].as_i64().unwrap();
    let rest = get(format!("action=send_line&after_id={cursor}")).await;
    assert_eq!(rest["count"], 3);
    // Time window: everything is after a minute ago, nothing before.
    let minute_ago = (chrono::Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    let enc = minute_ago.replace('+', "%2B");
    assert_eq!(get(format!("since={enc}")).await["total"], 16);
    assert_eq!(get(format!("until={enc}")).await["total"], 0);
    // Bad input is a clear error.
    let (status, v) = hub.get("/v1/pty-traffic/events?since=yesterday").await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("BAD_REQUEST")),
        "{v}"
    );
    let (status, v) = hub.get("/v1/pty-traffic/events?limit=0").await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("BAD_REQUEST")),
        "{v}"
    );
    let (status, v) = hub.get("/v1/pty-traffic/events?colour=red").await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("BAD_REQUEST")),
        "{v}"
    );
    // One event; a missing one.
    let first = streamed[0]["id"].as_i64().unwrap();
    let (status, v) = hub.get(&format!("/v1/pty-traffic/events/{first}")).await;
    assert_eq!(
        (status, v["event"]["action"].as_str()),
        (200, Some("send_line")),
        "{v}"
    );
    let (status, v) = hub.get("/v1/pty-traffic/events/999999").await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (404, Some("NOT_FOUND")),
        "{v}"
    );
    // Per-session aggregates, stats, blocked, health.
    let (_, v) = hub.get("/v1/pty-traffic/sessions").await;
    assert_eq!(v["count"], 2, "{v}");
    let (_, v) = hub.get(&format!("/v1/pty-traffic/sessions/{b}")).await;
    assert_eq!(
        (
            v["session"]["events"].as_i64(),
            v["session"]["blocked"].as_i64()
        ),
        (Some(8), Some(1)),
        "{v}"
    );
    let (status, _) = hub.get("/v1/pty-traffic/sessions/pty_nothere").await;
    assert_eq!(status, 404);
    let (_, v) = hub.get("/v1/pty-traffic/stats").await;
    assert_eq!(
        (
            v["total"].as_i64(),
            v["blocked"].as_i64(),
            v["errors"].as_i64()
        ),
        (Some(16), Some(1), Some(2)),
        "{v}"
    );
    let (_, v) = hub.get("/v1/pty-traffic/blocked").await;
    assert_eq!(v["total"], 1);
    let (_, v) = hub.get("/v1/pty-traffic/health").await;
    assert_eq!(
        (v["writable"].as_bool(), v["enabled"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_log_refuses_operations_unless_fail_open() {
    let dir = tempfile::tempdir().unwrap();
    // A path under a regular file cannot be created, not even by root.
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let path = blocker.join("audit.db");
    let p = path.clone();
    let hub = TestHub::start_with(move |c| c.audit.path = Some(p)).await;
    let (status, v) = hub
        .post(
            "/v1/pty/sessions",
            json!({"shell": "bash", "args": ["--norc"]}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (503, Some("AUDIT_UNAVAILABLE")),
        "{v}"
    );
    assert!(hub.hub.list().is_empty(), "the refused create ran");
    let (_, v) = hub.get("/v1/pty-traffic/health").await;
    assert_eq!(v["writable"], false, "{v}");
    assert!(v["error"].as_str().unwrap().contains("not-a-dir"), "{v}");
    // Reads still work.
    let (status, _) = hub.get("/v1/pty/sessions").await;
    assert_eq!(status, 200);
    // A line typed over the WebSocket is refused too (the session is made in-process).
    let session = hub
        .hub
        .create_session(agent_hub::hub::CreateSession {
            shell: Some("bash".into()),
            args: vec!["--norc".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut ws = hub
        .connect_ws(&format!("/v1/pty/sessions/{}/stream", session.id()))
        .await;
    use futures_util::SinkExt;
    ws.send(Message::Binary(b"echo x\r".to_vec().into()))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) if t.contains("AUDIT_UNAVAILABLE") => break,
            Ok(Some(Ok(_))) => {}
            other => panic!("no AUDIT_UNAVAILABLE frame: {other:?}"),
        }
    }

    let p = path.clone();
    let open = TestHub::start_with(move |c| {
        c.audit.path = Some(p);
        c.audit.fail_open = true;
    })
    .await;
    let id = open.create("pty").await;
    assert_eq!(
        open.talk(&id, "echo went-through").await["output"],
        "went-through\n"
    );
    let (_, v) = open.get("/v1/pty-traffic/health").await;
    assert_eq!(v["unaudited_operations"], 2, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_operation_is_lost_when_the_hub_is_sigkilled() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let data = dir.path().join("data");
    let socket = format!("ah-audit-kill-{}", std::process::id());
    let mut child = std::process::Command::new(crate::cli::BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--tmux-socket",
            &socket,
        ])
        .arg("--data-dir")
        .arg(&data)
        .env_remove("AGENT_HUB_CONFIG")
        .env_remove("AGENT_HUB_TOKEN")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            http.get(format!("{base}/health")).send().await.is_ok()
        })
        .await,
        "hub did not start"
    );
    let token = std::fs::read_to_string(data.join("admin-token")).unwrap();
    let http = crate::support::authed_http(token.trim());
    let v = json_reply(
        http.post(format!("{base}/v1/pty/sessions"))
            .json(&json!({"shell": "bash", "args": ["--norc"]})),
    )
    .await;
    let id = v["session_id"].as_str().unwrap().to_string();
    // Four writers send lines as fast as they can; the hub is killed in the middle.
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (http, base, id, acked) = (http.clone(), base.clone(), id.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let marker = format!("ack-{w}-{i}");
                let reply = http
                    .post(format!("{base}/v1/pty/sessions/{id}/send_line"))
                    .json(&json!({ "data": format!("true {marker}") }))
                    .send()
                    .await;
                match reply {
                    Ok(r) if r.status().is_success() => acked.lock().unwrap().push(marker),
                    _ => return,
                }
            }
        }));
    }
    assert!(
        wait_until(Duration::from_secs(20), || async {
            acked.lock().unwrap().len() >= 40
        })
        .await,
        "too few operations acknowledged"
    );
    let mut child = Kill(child_take(&mut child));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = child.0.wait();
    for w in writers {
        let _ = w.await;
    }
    let _ = std::process::Command::new("tmux")
        .args(["-L", &socket, "kill-server"])
        .stderr(std::process::Stdio::null())
        .status();
    let acked = acked.lock().unwrap().clone();
    let conn = rusqlite::Connection::open(data.join("audit.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT command, success FROM events WHERE action = 'send_line'")
        .unwrap();
    let rows: Vec<(String, Option<bool>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for marker in &acked {
        let found = rows
            .iter()
            .find(|(c, _)| c.contains(&format!("{marker}\"")));
        assert_eq!(
            found.map(|(_, s)| *s),
            Some(Some(true)),
            "acknowledged {marker} is missing or has no outcome ({} acked, {} rows)",
            acked.len(),
            rows.len()
        );
    }
}

fn child_take(child: &mut std::process::Child) -> std::process::Child {
    // Moves the child out so the guard owns it (a placeholder `true` takes its place).
    std::mem::replace(child, std::process::Command::new("true").spawn().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_and_follows_the_log() {
    use std::io::BufRead;
    let hub = TestHub::start().await;
    let a = hub.create("pty").await;
    let b = hub.create("pty").await;
    for id in [&a, &b] {
        hub.post(
            &format!("/v1/pty/sessions/{id}/send_line"),
            json!({"data": "echo hi"}),
        )
        .await;
    }
    let out = std::process::Command::new(crate::cli::BIN)
        .args(["audit", "--hub", &hub.base, "--session", &a, "--json"])
        .env("AGENT_HUB_DATA_DIR", hub.data_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let actions: Vec<&str> = lines
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create", "send_line"], "{lines:?}");
    assert!(lines.iter().all(|e| e["session_id"] == a.as_str()));

    // --follow --blocked prints a refusal as it happens, and nothing else.
    let mut child = std::process::Command::new(crate::cli::BIN)
        .args(["audit", "--hub", &hub.base, "--follow", "--blocked"])
        .env("AGENT_HUB_DATA_DIR", hub.data_dir())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    // The follower may not be subscribed yet: send until it prints (each round is audited,
    // and only blocked records may be printed).
    let mut line = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while line.is_none() && std::time::Instant::now() < deadline {
        hub.post(
            &format!("/v1/pty/sessions/{b}/send_line"),
            json!({"data": "echo fine"}),
        )
        .await;
        hub.post(
            &format!("/v1/pty/sessions/{b}/send_line"),
            json!({"data": "echo x; init 0"}),
        )
        .await;
        line = rx.recv_timeout(Duration::from_millis(500)).ok();
    }
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("the follower printed nothing");
    assert!(
        line.contains("BLOCKED(init-0)") && line.contains(&b),
        "{line}"
    );
    assert!(!line.contains("echo fine"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewers_resize_is_recorded_like_a_resize() {
    use futures_util::SinkExt;
    let hub = TestHub::start().await;
    let id = hub.create("pty").await;
    let mut ws = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream"))
        .await;
    ws.send(Message::Text(
        json!({"type": "resize", "cols": 91, "rows": 21})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let recorded = wait_until(Duration::from_secs(10), || async {
        let (_, v) = hub.get("/v1/pty-traffic/events?action=ws_resize").await;
        v["total"] == 1
    })
    .await;
    let (_, v) = hub.get("/v1/pty-traffic/events?action=ws_resize").await;
    assert!(recorded, "{v}");
    let record = &v["events"][0];
    assert_eq!(record["session_id"], json!(id), "{record}");
    assert!(
        record["command"].as_str().unwrap().contains("91"),
        "{record}"
    );
    assert_eq!(hub.session(&id).await["cols"], 91);
}

/// The `talk` records in the log of the hub at `hub`.
async fn talks(hub: &crate::hub_process::HubProcess) -> Vec<Value> {
    let v = hub
        .call(
            reqwest::Method::GET,
            "/v1/pty-traffic/events?action=talk",
            Value::Null,
        )
        .await;
    v["events"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_operation_shows_while_it_runs_and_one_cut_by_sigkill_stays_on_record() {
    use crate::hub_process::{free_port, HubProcess};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let socket = format!("ah-audit-cut-{}", std::process::id());
    let data_arg = data.display().to_string();
    let args = [
        "--listen",
        &listen,
        "--tmux-socket",
        &socket,
        "--data-dir",
        &data_arg,
    ];
    let base = format!("http://{listen}");
    let mut hub = HubProcess::spawn(&args, &base, &[]).await;
    struct KillTmux(String);
    impl Drop for KillTmux {
        fn drop(&mut self) {
            let _ = std::process::Command::new("tmux")
                .args(["-L", &self.0, "kill-server"])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
    let _tmux = KillTmux(socket.clone());
    let v = hub
        .call(
            reqwest::Method::POST,
            "/v1/pty/sessions",
            json!({"shell": "bash", "args": ["--norc"]}),
        )
        .await;
    let id = v["session_id"].as_str().unwrap().to_string();
    let talk = |command: &'static str| {
        let (http, url) = (
            hub.http.clone(),
            format!("{base}/v1/pty/sessions/{id}/talk"),
        );
        tokio::spawn(async move {
            http.post(url)
                .json(&json!({ "command": command }))
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };

    // Still running after `SHOWN_AFTER`: in the queries, without an outcome yet.
    let running = talk("sleep 2; echo long-done");
    let shown = wait_until(Duration::from_secs(5), || async {
        talks(&hub)
            .await
            .iter()
            .any(|r| r["success"].is_null() && r["command"].to_string().contains("long-done"))
    })
    .await;
    assert!(
        shown,
        "a running talk is not in the log: {:?}",
        talks(&hub).await
    );
    assert_eq!(running.await.unwrap().unwrap(), 200);
    let records = talks(&hub).await;
    assert_eq!(
        records.len(),
        1,
        "the outcome did not replace its attempt: {records:?}"
    );
    assert_eq!(
        (
            records[0]["status"].as_i64(),
            records[0]["success"].as_bool()
        ),
        (Some(200), Some(true)),
        "{records:?}"
    );

    // Cut short by a SIGKILL before it was shown: the next start has its attempt.
    let cut = talk("sleep 30; echo never-done");
    tokio::time::sleep(Duration::from_millis(300)).await;
    hub.kill9();
    let _ = cut.await;
    let hub = HubProcess::spawn(&args, &base, &[]).await;
    let records = talks(&hub).await;
    let cut: Vec<&Value> = records
        .iter()
        .filter(|r| r["command"].to_string().contains("never-done"))
        .collect();
    assert_eq!(cut.len(), 1, "the cut talk is not on record: {records:?}");
    assert!(cut[0]["success"].is_null(), "{cut:?}");
    assert_eq!(cut[0]["session_id"], id, "{cut:?}");
    assert!(
        cut[0]["id"].as_i64() > records[0]["id"].as_i64(),
        "{records:?}"
    );
}
