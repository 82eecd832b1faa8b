//! The MCP tools through real MCP clients (rmcp's): `agent-hub mcp` run as a child process over
//! stdio, and `/mcp` over streamable HTTP, both against a real hub with tokens, real PTYs and
//! the scripted fake agent TUI. One scenario runs on both transports: the tools and their
//! schemas, help, list, create, send_line, read, talk (exit code), term_read, resolve by label
//! (and AMBIGUOUS, NOT_FOUND), send_line_to_agent, wait_state, write -> DEPRECATED, a blocked
//! command, tasks; then a wrong token is refused. Also the REST long-poll and the CLI
//! `wait-state`.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::auth::OPERATOR;
use crate::cli::BIN;
use crate::policy_support::{fake_agent, policies_dir};
use crate::support::{json_reply, TestHub};

type Client = RunningService<RoleClient, ()>;

/// A hub with tokens and the `fake` profile (for the fake agent TUI's states).
async fn hub() -> (TestHub, tempfile::TempDir) {
    let dir = policies_dir();
    let toml = format!("[[tokens]]\nname = \"ops\"\ntoken = \"{OPERATOR}\"\nrole = \"operator\"\n");
    let tokens = agent_hub::config::HubConfig::parse(&toml, "test.toml")
        .unwrap()
        .tokens;
    let policies = dir.path().to_path_buf();
    let hub = TestHub::start_with(|c| {
        c.tokens = tokens;
        c.policies_dir = Some(policies);
    })
    .await;
    hub.hub
        .policy_runner()
        .start(hub.hub.tracker(), hub.hub.closing());
    (hub, dir)
}

async fn stdio_client(hub: &TestHub, token: &str) -> Client {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("mcp")
        .env("AGENT_HUB_URL", &hub.base)
        .env("AGENT_HUB_TOKEN", token);
    let transport = TokioChildProcess::new(cmd).expect("spawn agent-hub mcp");
    ().serve(transport).await.expect("initialize over stdio")
}

fn http_transport(base: &str, token: &str) -> StreamableHttpClientTransport<reqwest::Client> {
    StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(token),
    )
}

pub async fn http_client(hub: &TestHub, token: &str) -> Client {
    http_client_at(&hub.base, token).await
}

/// An MCP client of the hub at `base` over `/mcp`.
pub async fn http_client_at(base: &str, token: &str) -> Client {
    ().serve(http_transport(base, token))
        .await
        .expect("initialize over /mcp")
}

/// Calls `tool` with `args`; returns whether it was a tool error, and its JSON.
async fn call(client: &Client, tool: &'static str, args: Value) -> (bool, Value) {
    let params = CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
    let result: CallToolResult = client.call_tool(params).await.expect("tools/call");
    let body = result
        .structured_content
        .clone()
        .expect("structured content");
    // The text content carries the same JSON, for clients that show only text.
    let text = result.content[0]
        .as_text()
        .expect("text content")
        .text
        .clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), body);
    (result.is_error == Some(true), body)
}

pub async fn ok(client: &Client, tool: &'static str, args: Value) -> Value {
    let (is_error, body) = call(client, tool, args.clone()).await;
    assert!(!is_error && body["ok"] == true, "{tool} {args}: {body}");
    body
}

pub async fn refused(client: &Client, tool: &'static str, args: Value, code: &str) -> Value {
    let (is_error, body) = call(client, tool, args.clone()).await;
    assert!(is_error, "{tool} {args} should fail: {body}");
    assert_eq!(
        (body["ok"].as_bool(), body["error_code"].as_str()),
        (Some(false), Some(code)),
        "{body}"
    );
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    body
}

fn bash(label: &str) -> Value {
    json!({"action": "create", "shell": "bash", "args": ["--norc", "--noprofile"],
           "env": {"PS1": "$ "}, "label": label})
}

async fn scenario(client: &Client, transport: &str) {
    // The tools, self-described.
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["k_pty", "k_agents"]);
    let schema = &tools[0].input_schema;
    let actions = schema["properties"]["action"]["enum"].as_array().unwrap();
    for a in [
        "help",
        "list",
        "create",
        "send_line",
        "read",
        "talk",
        "term_read",
        "resolve",
        "send_line_to_agent",
        "resize",
        "keys",
        "signal",
        "kill",
        "state",
        "wait_state",
        "write",
    ] {
        assert!(actions.contains(&json!(a)), "k_pty {a}");
    }
    assert!(schema["properties"]["session_id"]["description"]
        .as_str()
        .unwrap()
        .contains("label"));

    let help = ok(client, "k_pty", json!({"action": "help"})).await;
    assert_eq!(help["capabilities"]["transport"], transport);
    assert_eq!(
        help["capabilities"]["hub_version"],
        env!("CARGO_PKG_VERSION")
    );
    let talk_help = help["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "talk")
        .unwrap();
    assert_eq!(talk_help["rest"], "POST /v1/pty/sessions/{session_id}/talk");
    assert!(talk_help["params"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "command" && p["required"] == true));
    let agents_help = ok(client, "k_agents", json!({"action": "help"})).await;
    assert!(agents_help["actions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["action"] == "wait_state"));

    // Sessions, addressed by label.
    let label = format!("Worker {transport}");
    let id = ok(client, "k_pty", bash(&label)).await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let listed = ok(client, "k_pty", json!({"action": "list"})).await;
    assert!(
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == id.as_str() && s["label"] == label.as_str()),
        "{listed}"
    );
    ok(
        client,
        "k_pty",
        json!({"action": "send_line", "session_id": label, "data": "echo mcp-$((6*7))"}),
    )
    .await;
    let talk = ok(client, "k_pty", json!({"action": "talk", "session_id": label, "command": "echo talked; (exit 3)", "timeout_ms": 15000})).await;
    assert_eq!(
        (talk["exit_code"].as_i64(), talk["output"].as_str()),
        (Some(3), Some("talked\n")),
        "{talk}"
    );
    let read = ok(
        client,
        "k_pty",
        json!({"action": "read", "session_id": id, "max_bytes": 65536}),
    )
    .await;
    assert!(
        read["output"].as_str().unwrap().contains("mcp-42"),
        "{read}"
    );
    let screen = ok(
        client,
        "k_pty",
        json!({"action": "term_read", "session_id": label, "max_lines": 20}),
    )
    .await;
    assert!(
        screen["text"].as_str().unwrap().contains("mcp-42"),
        "{screen}"
    );
    assert_eq!(screen["session_id"], id.as_str());

    // resize, keys and signal, each seen to take effect in the terminal.
    ok(
        client,
        "k_pty",
        json!({"action": "resize", "session_id": label, "cols": 101, "rows": 31}),
    )
    .await;
    let size = ok(
        client,
        "k_pty",
        json!({"action": "talk", "session_id": label, "command": "stty size", "timeout_ms": 15000}),
    )
    .await;
    assert_eq!(size["output"], "31 101\n", "{size}");
    for (interrupt, args) in [
        (
            "keys",
            json!({"action": "keys", "session_id": label, "keys": ["C-c"]}),
        ),
        (
            "signal",
            json!({"action": "signal", "session_id": label, "signal": "SIGINT"}),
        ),
    ] {
        ok(
            client,
            "k_pty",
            json!({"action": "send_line", "session_id": label, "data": "sleep 60"}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        ok(client, "k_pty", args).await;
        // The shell answers again only once the sleep was interrupted.
        let started = Instant::now();
        let back = ok(client, "k_pty", json!({"action": "talk", "session_id": label, "command": format!("echo back-from-{interrupt}"), "timeout_ms": 15000})).await;
        assert_eq!(back["output"], format!("back-from-{interrupt}\n"), "{back}");
        assert!(started.elapsed() < Duration::from_secs(10), "{interrupt}");
    }

    // resolve: by label, AMBIGUOUS with the matches, NOT_FOUND; a session argument alike.
    let resolved = ok(
        client,
        "k_pty",
        json!({"action": "resolve", "label": label}),
    )
    .await;
    assert_eq!(resolved["session_id"], id.as_str());
    let twin = format!("Twin {transport}");
    let t1 = ok(client, "k_pty", bash(&twin)).await["session_id"].clone();
    let t2 = ok(client, "k_pty", bash(&twin)).await["session_id"].clone();
    let amb = refused(
        client,
        "k_pty",
        json!({"action": "resolve", "label": twin}),
        "AMBIGUOUS",
    )
    .await;
    let mut matches = amb["matches"].as_array().unwrap().clone();
    matches.sort_by_key(|m| m.as_str().unwrap().to_string());
    let mut want = vec![t1.clone(), t2.clone()];
    want.sort_by_key(|m| m.as_str().unwrap().to_string());
    assert_eq!(matches, want);
    refused(
        client,
        "k_pty",
        json!({"action": "send_line", "session_id": twin, "data": "echo x"}),
        "AMBIGUOUS",
    )
    .await;
    refused(
        client,
        "k_pty",
        json!({"action": "resolve", "label": "nobody"}),
        "NOT_FOUND",
    )
    .await;
    refused(
        client,
        "k_pty",
        json!({"action": "read", "session_id": "nobody"}),
        "NOT_FOUND",
    )
    .await;
    ok(client, "k_pty", json!({"action": "kill", "session_id": t1})).await;
    ok(client, "k_pty", json!({"action": "kill", "session_id": t2})).await;

    // A worker agent TUI: send it work by agent id, wait until it is idle again, read it.
    let agent = format!("w-{transport}");
    let fake = ok(
        client,
        "k_pty",
        json!({"action": "create", "shell": "bash", "args": [fake_agent()],
        "cli_type": "fake", "owner_agent_id": agent, "owner_role": "worker"}),
    )
    .await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let idle = ok(client, "k_pty", json!({"action": "wait_state", "session_id": agent, "states": ["idle"], "timeout_ms": 10000})).await;
    assert_eq!(
        (idle["reached"].as_bool(), idle["state"].as_str()),
        (Some(true), Some("idle")),
        "{idle}"
    );
    let sent = ok(
        client,
        "k_pty",
        json!({"action": "send_line_to_agent", "agent_id": agent, "data": "work 2"}),
    )
    .await;
    assert_eq!(
        (
            sent["resolved_session_id"].as_str(),
            sent["receipt"].as_str()
        ),
        (Some(fake.as_str()), Some("submitted")),
        "{sent}"
    );
    let started = Instant::now();
    let done = ok(client, "k_pty", json!({"action": "wait_state", "session_id": agent, "states": ["idle", "blocked"], "timeout_ms": 20000, "explain": true})).await;
    assert_eq!(
        (
            done["reached"].as_bool(),
            done["state"].as_str(),
            done["rule"].as_str()
        ),
        (Some(true), Some("idle"), Some("prompt")),
        "{done}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "it waited for the work: {:?}",
        started.elapsed()
    );
    let screen = ok(
        client,
        "k_pty",
        json!({"action": "term_read", "session_id": agent, "max_lines": 5}),
    )
    .await;
    assert!(
        screen["text"].as_str().unwrap().contains("done: 2"),
        "idle after the work, not before: {screen}"
    );
    let not_yet = ok(client, "k_pty", json!({"action": "wait_state", "session_id": fake, "states": ["blocked"], "timeout_ms": 300})).await;
    assert_eq!(
        (not_yet["reached"].as_bool(), not_yet["state"].as_str()),
        (Some(false), Some("idle")),
        "{not_yet}"
    );
    let state = ok(
        client,
        "k_pty",
        json!({"action": "state", "session_id": agent}),
    )
    .await;
    assert_eq!(state["state"], "idle");

    // Refusals are tool errors with the REST codes, never transport failures.
    let dep = refused(
        client,
        "k_pty",
        json!({"action": "write", "session_id": id, "data": "x"}),
        "BAD_REQUEST",
    )
    .await;
    assert!(
        dep["message"]
            .as_str()
            .unwrap()
            .contains("write takes no parameters"),
        "{dep}"
    );
    let dep = refused(client, "k_pty", json!({"action": "write"}), "DEPRECATED").await;
    assert!(
        dep["message"].as_str().unwrap().contains("send_line"),
        "{dep}"
    );
    let blocked = refused(
        client,
        "k_pty",
        json!({"action": "talk", "session_id": label, "command": "rm -rf /"}),
        "PTY_COMMAND_BLOCKED",
    )
    .await;
    assert!(blocked["pattern"].is_string(), "{blocked}");
    refused(
        client,
        "k_pty",
        json!({"action": "send_line", "session_id": id}),
        "BAD_REQUEST",
    )
    .await;
    refused(client, "k_pty", json!({"action": "fly"}), "BAD_REQUEST").await;
    refused(
        client,
        "k_pty",
        json!({"action": "resize", "session_id": id, "cols": 0, "rows": 10}),
        "BAD_REQUEST",
    )
    .await;
    refused(
        client,
        "k_agents",
        json!({"action": "start", "agent_id": "nobody"}),
        "AGENT_NOT_FOUND",
    )
    .await;

    // Tasks, as /v1/tasks runs them.
    let agents = ok(client, "k_agents", json!({"action": "list"})).await;
    assert_eq!(agents["count"], 0);
    let run = ok(
        client,
        "k_agents",
        json!({"action": "run", "cmd": "echo task-out", "pty": false}),
    )
    .await;
    assert_eq!(
        (run["exitCode"].as_i64(), run["stdout"].as_str()),
        (Some(0), Some("task-out\n")),
        "{run}"
    );
    let pty_task = ok(
        client,
        "k_agents",
        json!({"action": "run", "cmd": "sleep 30"}),
    )
    .await;
    let task_id = pty_task["taskId"].as_str().unwrap();
    let cancelled = ok(
        client,
        "k_agents",
        json!({"action": "cancel", "task_id": task_id}),
    )
    .await;
    assert_eq!(cancelled["task"]["state"], "cancelled", "{cancelled}");
    let waited = ok(
        client,
        "k_agents",
        json!({"action": "wait", "task_id": task_id, "timeout_ms": 5000}),
    )
    .await;
    assert_eq!(waited["finished"], true);

    ok(
        client,
        "k_pty",
        json!({"action": "kill", "session_id": label}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_stdio_from_agent_hub_mcp() {
    let (hub, _dir) = hub().await;
    let client = stdio_client(&hub, OPERATOR).await;
    scenario(&client, "stdio").await;
    client.cancel().await.unwrap();

    // A wrong token: the server starts, and every call is refused as a tool error.
    let client = stdio_client(&hub, "wrong-token-0123456789abcdef").await;
    refused(&client, "k_pty", json!({"action": "list"}), "UNAUTHORIZED").await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_streamable_http_at_slash_mcp() {
    let (hub, _dir) = hub().await;
    let client = http_client(&hub, OPERATOR).await;
    scenario(&client, "streamable-http").await;
    client.cancel().await.unwrap();

    // A wrong token cannot even open a session.
    let refused = ().serve(http_transport(&hub.base, "wrong-token-0123456789abcdef")).await;
    assert!(refused.is_err(), "a wrong token must be refused");
    let (status, body) = {
        let resp = reqwest::Client::new()
            .post(format!("{}/mcp", hub.base))
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
    };
    assert_eq!(
        (status, body["error_code"].as_str()),
        (401, Some("UNAUTHORIZED")),
        "{body}"
    );
}

/// The REST long-poll: answers when the state is reached (not before), at the timeout with
/// `reached: false`, at once for an exited session, and refuses unknown states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_route_long_polls_until_the_state_is_reached() {
    let dir = policies_dir();
    let hub = crate::policy_support::hub_with_policies(&dir, "").await;
    let id = hub
        .create_with(json!({"backend": "pty", "shell": "bash", "args": [fake_agent()], "cli_type": "fake", "label": "waiter"}))
        .await;
    let wait = |q: &str| format!("/v1/pty/sessions/{id}/state?{q}");
    let (status, v) = hub.get(&wait("wait=idle&timeout_ms=10000")).await;
    assert_eq!(
        (status, v["reached"].as_bool(), v["state"].as_str()),
        (200, Some(true), Some("idle")),
        "{v}"
    );

    let (_, v) = crate::policy_support::submit(&hub, &id, "work 2", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    let started = Instant::now();
    let (_, v) = hub
        .get(&wait("wait=idle,blocked&timeout_ms=20000&explain=true"))
        .await;
    let waited = started.elapsed();
    assert_eq!(
        (
            v["reached"].as_bool(),
            v["state"].as_str(),
            v["rule"].as_str()
        ),
        (Some(true), Some("idle"), Some("prompt")),
        "{v}"
    );
    assert!(
        waited >= Duration::from_millis(1500),
        "answered before the work ended: {waited:?}"
    );
    let (_, screen) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/term_read"),
            json!({"max_lines": 5}),
        )
        .await;
    assert!(
        screen["text"].as_str().unwrap().contains("done: 2"),
        "{screen}"
    );

    let started = Instant::now();
    let (_, v) = hub.get(&wait("wait=blocked&timeout_ms=400")).await;
    assert_eq!(
        (v["reached"].as_bool(), v["state"].as_str()),
        (Some(false), Some("idle")),
        "{v}"
    );
    assert!(started.elapsed() >= Duration::from_millis(400));

    let (status, v) = hub.get(&wait("wait=idle,sleepy")).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("BAD_REQUEST")),
        "{v}"
    );
    assert!(v["message"].as_str().unwrap().contains("sleepy"), "{v}");
    let (status, _) = hub.get(&wait("timeout_ms=5")).await;
    assert_eq!(status, 400);

    // The CLI: by label, exit 0 when reached, 124 at the timeout.
    let run = |args: Vec<String>| {
        let base = hub.base.clone();
        let dir = hub.data_dir().to_path_buf();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(args)
                .env("AGENT_HUB_URL", base)
                .env("AGENT_HUB_DATA_DIR", dir)
                .output()
                .unwrap()
        })
    };
    let out = run(vec![
        "wait-state".into(),
        "waiter".into(),
        "idle".into(),
        "blocked".into(),
        "--timeout".into(),
        "10".into(),
    ])
    .await
    .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim()
        ),
        (Some(0), "idle"),
        "{out:?}"
    );
    let out = run(vec![
        "wait-state".into(),
        "waiter".into(),
        "working".into(),
        "--timeout".into(),
        "0.3".into(),
    ])
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(124), "{out:?}");

    // An exited session never changes: the wait answers at once.
    hub.post(
        &format!("/v1/pty/sessions/{id}/signal"),
        json!({"signal": "SIGKILL"}),
    )
    .await;
    hub.wait_exited(&id, Duration::from_secs(10)).await;
    let started = Instant::now();
    let (_, v) = hub.get(&wait("wait=idle&timeout_ms=10000")).await;
    assert_eq!(
        (v["reached"].as_bool(), v["state"].as_str()),
        (Some(false), Some("exited")),
        "{v}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let (_, v) = hub.get(&wait("wait=exited&timeout_ms=10000")).await;
    assert_eq!(v["reached"], true, "{v}");
}

/// The agent variant of the long-poll, on a real container agent: a stopped agent is `exited`
/// at once, and a wait for `idle` started while it is stopped answers once it has started and
/// reached its prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_state_route_waits_through_a_start() {
    crate::require_docker!();
    use crate::docker_support::{agent_toml, hub_with_agents};
    let (hub, _guard) = hub_with_agents(&agent_toml("wst", "cli_type = \"shell\"")).await;
    let (_, v) = hub
        .get("/v1/agents/wst/state?wait=exited&timeout_ms=5000")
        .await;
    assert_eq!(
        (v["reached"].as_bool(), v["state"].as_str()),
        (Some(true), Some("exited")),
        "{v}"
    );

    let base = hub.base.clone();
    let http = hub.http.clone();
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let v = json_reply(http.get(format!(
            "{base}/v1/agents/wst/state?wait=idle&timeout_ms=60000"
        )))
        .await;
        (v, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "a stopped agent is not idle");
    let (status, v) = hub.post("/v1/agents/wst/start", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let (v, waited) = waiter.await.unwrap();
    assert_eq!(
        (
            v["reached"].as_bool(),
            v["state"].as_str(),
            v["status"].as_str()
        ),
        (Some(true), Some("idle"), Some("running")),
        "{v}"
    );
    assert!(
        v["session_id"].is_string() && waited >= Duration::from_millis(300),
        "{v}"
    );
    hub.post("/v1/agents/wst/stop", json!({})).await;
}
