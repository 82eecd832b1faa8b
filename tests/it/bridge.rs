//! External sessions and the bridge API: one hub registers the sessions of another hub (a
//! real `agent-hub serve` process on loopback) and lists, resolves and steers them as its own;
//! the remote hub killed mid-call gives a clean error and the local hub stays responsive.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::hub_process::{free_port, HubProcess};
use crate::support::{json_reply, wait_until, TestHub, TmuxServerGuard};

const T: Duration = Duration::from_secs(10);

/// A remote hub process with a PTY session ("worker-a") and a tmux session ("worker-b").
pub async fn remote_hub(dir: &std::path::Path) -> (HubProcess, TmuxServerGuard, [String; 2]) {
    let port = free_port();
    let socket = format!("ah-bridge-{}-{port}", std::process::id());
    let guard = TmuxServerGuard(socket.clone());
    let listen = format!("127.0.0.1:{port}");
    let data = dir.join("remote-data");
    let hub = HubProcess::spawn(
        &[
            "--listen",
            &listen,
            "--data-dir",
            data.to_str().unwrap(),
            "--tmux-socket",
            &socket,
        ],
        &format!("http://{listen}"),
        &[],
    )
    .await;
    let mut ids = Vec::new();
    for (backend, agent, label) in [
        ("pty", "worker-a", "Worker A"),
        ("tmux", "worker-b", "Worker B"),
    ] {
        let v = hub
            .call(
                reqwest::Method::POST,
                "/v1/pty/sessions",
                json!({
                    "backend": backend, "shell": "bash", "args": ["--norc", "--noprofile"],
                    "env": {"PS1": "$ "}, "owner_agent_id": agent, "label": label,
                }),
            )
            .await;
        ids.push(
            v["session_id"]
                .as_str()
                .expect("remote session")
                .to_string(),
        );
    }
    (hub, guard, [ids[0].clone(), ids[1].clone()])
}

/// Registers every session the bridge lists, with the owner identity it reports.
async fn register_all(local: &TestHub, remote: &HubProcess) -> Vec<Value> {
    let bridge = &remote.base;
    let list = json_reply(remote.http.get(format!("{bridge}/pty/list"))).await;
    let mut replies = Vec::new();
    for s in list["sessions"].as_array().unwrap() {
        let (status, v) = local
            .post(
                "/v1/pty/register",
                json!({
                    "session_id": s["session_id"], "source": "remote-hub", "bridge_url": bridge,
                    "bridge_token": remote.owner_token,
                    "owner_agent_id": s["owner_agent_id"], "label": s["label"],
                    "cols": s["cols"], "rows": s["rows"], "pid": s["pid"],
                }),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        replies.push(v);
    }
    replies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hub_lists_resolves_and_steers_another_hubs_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let (remote, _tmux, [worker_a, worker_b]) = remote_hub(dir.path()).await;
    let local = TestHub::start().await;
    let replies = register_all(&local, &remote).await;
    assert!(replies.iter().all(|v| v["created"] == true), "{replies:?}");

    // Listed as the local hub's own, marked external with a healthy bridge.
    let (_, list) = local.get("/v1/pty/sessions").await;
    assert_eq!(list["count"], 2, "{list}");
    for s in list["sessions"].as_array().unwrap() {
        assert_eq!(s["backend"], "external", "{s}");
        assert_eq!(s["source"], "remote-hub", "{s}");
        assert_eq!(s["external"]["bridge_url"], json!(remote.base), "{s}");
        assert_eq!(s["external"]["healthy"], true, "{s}");
        assert_eq!(
            s["capabilities"],
            json!({"resize": false, "kill": false, "owned": false}),
            "an external terminal says what the hub cannot do to it: {s}"
        );
    }
    // The remote hub's own sessions can do everything.
    let own = remote
        .call(reqwest::Method::GET, "/v1/pty/sessions", json!({}))
        .await;
    assert_eq!(
        own["sessions"][0]["capabilities"],
        json!({"resize": true, "kill": true, "owned": true}),
        "{own}"
    );

    // Resolve by each key; send_line_to_agent reaches the right remote terminal only.
    let (status, v) = local
        .post("/v1/pty/resolve", json!({"agent_id": "worker-b"}))
        .await;
    assert_eq!(
        (status, v["session_id"].as_str()),
        (200, Some(worker_b.as_str())),
        "{v}"
    );
    let (status, v) = local
        .post("/v1/pty/resolve", json!({"label": "Worker A"}))
        .await;
    assert_eq!(
        (status, v["session_id"].as_str()),
        (200, Some(worker_a.as_str())),
        "{v}"
    );
    let (status, v) = local
        .post(
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": "worker-a", "data": "echo via-local-$((6*7))"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["resolved_session_id"], json!(worker_a));
    // Seen on the remote hub itself, and through the local hub's copy of the stream.
    let seen_remotely = wait_until(T, || async {
        let r = remote
            .call(
                reqwest::Method::GET,
                &format!("/v1/pty/sessions/{worker_a}/read?since=0&max_bytes=100000&timeout_ms=0"),
                json!({}),
            )
            .await;
        r["output"].as_str().unwrap_or("").contains("via-local-42")
    })
    .await;
    assert!(seen_remotely, "the line did not reach the remote terminal");
    local.wait_output(&worker_a, "via-local-42", T).await;
    let b_out = remote
        .call(
            reqwest::Method::GET,
            &format!("/v1/pty/sessions/{worker_b}/read?since=0&max_bytes=100000&timeout_ms=0"),
            json!({}),
        )
        .await;
    assert!(
        !b_out["output"].as_str().unwrap().contains("via-local"),
        "{b_out}"
    );

    // Secrets never cross the bridge: the remote hub redacts what it lends.
    let secret = format!("ghp_{}", "aB3".repeat(12));
    local
        .post(
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": "worker-a", "data": format!("echo {}''{}", &secret[..8], &secret[8..])}),
        )
        .await;
    let seen = local.wait_output(&worker_a, "[REDACTED]", T).await;
    assert!(!seen.contains(&secret), "{seen}");

    // talk and term_read go through; resize and kill are refused with their codes.
    let v = local.talk(&worker_b, "echo talk-$((2+3)); (exit 3)").await;
    assert_eq!(
        (v["output"].as_str(), v["exit_code"].as_i64()),
        (Some("talk-5\n"), Some(3)),
        "{v}"
    );
    let (status, v) = local
        .post(
            &format!("/v1/pty/sessions/{worker_a}/term_read"),
            json!({"mode": "tail"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(v["text"].as_str().unwrap().contains("via-local-42"), "{v}");
    let (status, v) = local
        .post(
            &format!("/v1/pty/sessions/{worker_a}/resize"),
            json!({"cols": 90, "rows": 20}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("RESIZE_UNSUPPORTED")),
        "{v}"
    );
    let (status, v) = local.delete(&format!("/v1/pty/sessions/{worker_a}")).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("KILL_UNSUPPORTED")),
        "{v}"
    );

    // Registering again updates in place; another bridge cannot take the id; a bridge that
    // is down is named in the error.
    let again = register_all(&local, &remote).await;
    assert!(again.iter().all(|v| v["created"] == false), "{again:?}");
    // A size out of range is refused for a registration made again too.
    let (status, v) = local
        .post(
            "/v1/pty/register",
            json!({"session_id": worker_a, "bridge_url": remote.base,
                   "bridge_token": remote.owner_token, "cols": 0}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("BAD_REQUEST")),
        "{v}"
    );
    let dead = format!("http://127.0.0.1:{}", free_port());
    let (status, v) = local
        .post(
            "/v1/pty/register",
            json!({"session_id": worker_a, "bridge_url": dead}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("SESSION_EXISTS")),
        "{v}"
    );
    let (status, v) = local
        .post(
            "/v1/pty/register",
            json!({"session_id": "ext-1", "bridge_url": dead}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (502, Some("BRIDGE_UNAVAILABLE")),
        "{v}"
    );
    assert_eq!(v["bridge_url"], json!(dead), "{v}");

    // A bridge that needs a credential refuses a registration without it, or with a wrong
    // one, at once: a registered session whose every call fails is no use.
    for (body, given) in [
        (
            json!({"session_id": "ext-cred", "remote_session_id": worker_a, "bridge_url": remote.base}),
            "without a bridge_token",
        ),
        (
            json!({"session_id": "ext-cred", "remote_session_id": worker_a,
                   "bridge_url": remote.base, "bridge_token": "not-the-token"}),
            "the bridge_token given",
        ),
    ] {
        let (status, v) = local.post("/v1/pty/register", body).await;
        assert_eq!(
            (status, v["error_code"].as_str()),
            (400, Some("BRIDGE_UNAUTHORIZED")),
            "{v}"
        );
        assert_eq!(v["remote_status"], 401, "{v}");
        assert!(v["message"].as_str().unwrap().contains(given), "{v}");
        assert_eq!(local.get("/v1/pty/sessions/ext-cred").await.0, 404);
    }

    // A bridge token is a secret: not in the session info, nor in the audit log.
    let bridge_token = remote.owner_token.as_str();
    let (status, v) = local
        .post(
            "/v1/pty/register",
            json!({"session_id": worker_a, "bridge_url": remote.base, "bridge_token": bridge_token}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (_, audit) = local.get("/v1/pty-traffic/events?action=register").await;
    assert!(audit["total"].as_u64().unwrap() >= 3, "{audit}");
    assert!(!audit.to_string().contains(bridge_token), "{audit}");
    assert!(!local
        .session(&worker_a)
        .await
        .to_string()
        .contains(bridge_token));

    // Heartbeats, one and many.
    let (status, v) = local
        .post(&format!("/v1/pty/heartbeat/{worker_a}"), json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(v["last_heartbeat_at"].is_string(), "{v}");
    let (status, v) = local
        .post(
            "/v1/pty/heartbeat",
            json!({"session_ids": [worker_b, "nope"]}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["acknowledged"].clone(), v["unknown"].clone()),
        (json!([worker_b]), json!(["nope"]))
    );

    // A leader's session is unregistered only with force.
    local
        .post(
            "/v1/pty/update-ownership",
            json!({"session_id": worker_b, "owner_role": "leader"}),
        )
        .await;
    let (status, v) = local
        .delete(&format!("/v1/pty/unregister/{worker_b}"))
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("LEADER_SESSION")),
        "{v}"
    );
    let (status, v) = local
        .delete(&format!("/v1/pty/unregister/{worker_b}?force=true"))
        .await;
    assert_eq!(status, 200, "{v}");
    let (_, list) = local.get("/v1/pty/sessions").await;
    assert_eq!(list["count"], 1, "{list}");
    // The remote session itself was not touched.
    let v = remote
        .call(
            reqwest::Method::GET,
            &format!("/v1/pty/sessions/{worker_b}"),
            json!({}),
        )
        .await;
    assert_eq!(v["session"]["alive"], true, "{v}");

    // Reset clears the registry of external sessions; local sessions stay.
    let own = local.create("pty").await;
    let (status, v) = local.delete("/v1/pty/reset").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["unregistered"], json!([worker_a]), "{v}");
    let (_, list) = local.get("/v1/pty/sessions").await;
    assert_eq!(list["count"], 1, "{list}");
    assert_eq!(list["sessions"][0]["id"], json!(own), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_hub_killed_mid_call_gives_a_clean_error_and_the_hub_stays_responsive() {
    let dir = tempfile::tempdir().unwrap();
    let (mut remote, _tmux, [worker_a, _]) = remote_hub(dir.path()).await;
    let local = TestHub::start().await;
    register_all(&local, &remote).await;
    local.wait_output(&worker_a, "$ ", T).await;

    let (base, http) = (local.base.clone(), local.http.clone());
    let path = format!("{base}/v1/pty/sessions/{worker_a}/talk");
    let call = tokio::spawn(async move {
        let started = Instant::now();
        let resp = http
            .post(path)
            .json(&json!({"command": "sleep 30", "timeout_ms": 60000}))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (
            status,
            resp.json::<Value>().await.unwrap(),
            started.elapsed(),
        )
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    remote.kill9();
    let (status, v, took) = call.await.unwrap();
    assert_eq!(
        (status, v["error_code"].as_str()),
        (502, Some("BRIDGE_UNAVAILABLE")),
        "{v}"
    );
    assert!(v["message"].as_str().unwrap().contains(&remote.base), "{v}");
    assert!(took < Duration::from_secs(5), "the error took {took:?}");

    // The hub answers at once, and the session says its bridge is down.
    let started = Instant::now();
    let (status, _) = local.get("/v1/pty/sessions").await;
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    let (status, v) = local
        .post(
            &format!("/v1/pty/sessions/{worker_a}/send_line"),
            json!({"data": "echo x"}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (502, Some("BRIDGE_UNAVAILABLE")),
        "{v}"
    );
    let unhealthy = wait_until(T, || async {
        local.session(&worker_a).await["external"]["healthy"] == false
    })
    .await;
    assert!(unhealthy, "{}", local.session(&worker_a).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_registers_every_session_of_another_hub_and_unregisters_one() {
    let dir = tempfile::tempdir().unwrap();
    let (remote, _tmux, [worker_a, worker_b]) = remote_hub(dir.path()).await;
    let local = TestHub::start().await;
    let local_dir = local.data_dir().to_path_buf();
    let cli = |args: Vec<String>| {
        let local_dir = local_dir.clone();
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new(crate::cli::BIN)
                .args(&args)
                .env("AGENT_HUB_DATA_DIR", local_dir)
                .output()
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        })
    };
    let args = |a: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        v.extend(["--hub".to_string(), local.base.clone()]);
        v
    };
    let (code, out) = cli(args(&[
        "register",
        "--bridge",
        &remote.base,
        "--bridge-token",
        &remote.owner_token,
        "--all",
        "--json",
    ]))
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 2, "{v}");
    let (_, list) = local.get("/v1/pty/sessions").await;
    let labels: Vec<_> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].clone())
        .collect();
    assert!(
        labels.contains(&json!("Worker A")) && labels.contains(&json!("Worker B")),
        "{list}"
    );
    let (code, out) = cli(args(&["unregister", &worker_b])).await.unwrap();
    assert_eq!(
        (code, out.trim()),
        (Some(0), format!("unregistered {worker_b}").as_str())
    );
    let (code, _) = cli(args(&[
        "register",
        "--bridge",
        &remote.base,
        "--bridge-token",
        &remote.owner_token,
        "nope",
    ]))
    .await
    .unwrap();
    assert_eq!(code, Some(1));
    let (_, list) = local.get("/v1/pty/sessions").await;
    assert_eq!(list["count"], 1, "{list}");
    assert_eq!(list["sessions"][0]["id"], json!(worker_a));
}
