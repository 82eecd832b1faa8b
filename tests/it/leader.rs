//! The leader workflow end to end, with a real engine: a leader and two workers in team `a`, a
//! worker in team `b`, all container agents running the scripted fake agent TUI, started from
//! the hub's config. Everything below the "inside" comments runs in a container through
//! `docker exec`, with nothing but what the hub gave it (`AGENT_HUB_URL` to its unix socket,
//! `AGENT_HUB_TOKEN_FILE`, `AGENT_HUB_AGENT_ID`, the mounted `agent-hub`), with
//! `network = "none"`: a real MCP client over `agent-hub mcp` (stdio), and the CLI.

use std::process::Command;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::docker_support::{hub_with_started_agents, test_image, ContainerGuard};
use crate::policy_support::policies_dir;
use crate::require_docker;
use crate::support::{wait_until, TestHub};

const T: Duration = Duration::from_secs(30);

fn agent(id: &str, team: &str, role: &str) -> String {
    format!(
        "[[agents]]\nid = \"{id}\"\nimage = \"{}\"\ncommand = [\"bash\", \"/fixtures/fake-agent.sh\"]\nmounts = [\"{}/tests/fixtures:/fixtures:ro\"]\nnetwork = \"none\"\nteam = \"{team}\"\nowner_role = \"{role}\"\ncli_type = \"fake\"\nready_pattern = 'fake> '\nready_timeout = 30\nstop_grace = 1\n",
        test_image(),
        env!("CARGO_MANIFEST_DIR")
    )
}

async fn fleet() -> (TestHub, ContainerGuard, tempfile::TempDir) {
    let dir = policies_dir();
    let agents = [
        agent("lead", "a", "leader"),
        agent("w1", "a", "worker"),
        agent("w2", "a", "worker"),
        agent("wb", "b", "worker"),
    ]
    .concat();
    let policies = dir.path().to_path_buf();
    let (hub, guard) = hub_with_started_agents(&agents, &["lead", "w1", "w2", "wb"], |c| {
        c.policies_dir = Some(policies);
    })
    .await;
    (hub, guard, dir)
}

async fn container(hub: &TestHub, id: &str) -> String {
    let (_, v) = hub.get(&format!("/v1/agents/{id}")).await;
    v["agent"]["container_id"].as_str().unwrap().to_string()
}

/// `agent-hub ARGS` inside `container`: (exit code, stdout, stderr).
fn inside(container: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("docker")
        .args(["exec", container, "agent-hub"])
        .args(args)
        .output()
        .expect("docker exec");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub type Client = RunningService<RoleClient, ()>;

async fn mcp_inside(container: &str) -> Client {
    mcp_inside_on(None, container).await
}

/// A real MCP client over `agent-hub mcp` in `container` on the engine `engine` (`None`: the
/// local one).
pub async fn mcp_inside_on(engine: Option<&str>, container: &str) -> Client {
    let mut cmd = tokio::process::Command::new("docker");
    if let Some(engine) = engine {
        cmd.args(["-H", engine]);
    }
    cmd.args(["exec", "-i", container, "agent-hub", "mcp"]);
    let transport = TokioChildProcess::new(cmd).expect("docker exec -i agent-hub mcp");
    ().serve(transport)
        .await
        .expect("initialize over stdio in the container")
}

pub async fn call(client: &Client, tool: &'static str, args: Value) -> (bool, Value) {
    let params = CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
    let result = client.call_tool(params).await.expect("tools/call");
    let body = result
        .structured_content
        .clone()
        .expect("structured content");
    (result.is_error.unwrap_or(false), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_in_its_container_drives_its_team_and_nothing_else() {
    require_docker!();
    let (hub, _guard, _dir) = fleet().await;
    let lead = container(&hub, "lead").await;
    let w1 = container(&hub, "w1").await;

    // Inside the leader: the environment it was given.
    let out = Command::new("docker")
        .args([
            "exec",
            &lead,
            "sh",
            "-c",
            "echo $AGENT_HUB_URL $AGENT_HUB_AGENT_ID $AGENT_HUB_TOKEN_FILE",
        ])
        .output()
        .unwrap();
    let env = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        env.trim(),
        "unix:///run/agent-hub/api.sock lead /run/agent-hub-agent/token"
    );
    // The agent's own programs (in the tmux session the image started) get the credential
    // itself, the one the hub wrote for this start.
    let out = Command::new("docker")
        .args([
            "exec",
            &lead,
            "tmux",
            "show-environment",
            "-g",
            "AGENT_HUB_TOKEN",
        ])
        .output()
        .unwrap();
    let written =
        std::fs::read_to_string(hub.hub.config().data_dir.join("agents/lead/token")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("AGENT_HUB_TOKEN={}", written.trim())
    );

    // Inside the leader: a real MCP client over `agent-hub mcp`.
    let mcp = mcp_inside(&lead).await;
    let tools = mcp.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"k_pty") && names.contains(&"k_agents"),
        "{names:?}"
    );
    let (err, help) = call(&mcp, "k_pty", json!({"action": "help"})).await;
    assert!(!err, "{help}");
    let (err, list) = call(&mcp, "k_pty", json!({"action": "list"})).await;
    assert!(!err, "{list}");
    let mut seen: Vec<String> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["agent_id"].as_str().unwrap_or("").to_string())
        .collect();
    seen.sort();
    assert_eq!(seen, ["lead", "w1", "w2"], "its team only: {list}");
    let (err, agents) = call(&mcp, "k_agents", json!({"action": "list"})).await;
    assert!(!err, "{agents}");
    assert_eq!(agents["count"], 3, "{agents}");
    // A task for w2, waited for, and its result read.
    let (err, sent) = call(
        &mcp,
        "k_pty",
        json!({"action": "send_line_to_agent", "agent_id": "w2", "data": "work 1"}),
    )
    .await;
    assert!(!err, "{sent}");
    let w2_session = sent["resolved_session_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (err, waited) = call(&mcp, "k_pty", json!({"action": "wait_state", "session_id": w2_session, "states": ["idle"], "timeout_ms": 20000})).await;
    assert!(!err && waited["reached"] == true, "{waited}");
    let (err, screen) = call(
        &mcp,
        "k_pty",
        json!({"action": "term_read", "session_id": w2_session}),
    )
    .await;
    assert!(!err, "{screen}");
    assert!(
        screen["text"].as_str().unwrap().contains("done: 1"),
        "{screen}"
    );
    // The other team is not there.
    let (_, wb) = hub.get("/v1/agents/wb").await;
    let wb_session = wb["agent"]["session_id"].as_str().unwrap().to_string();
    for args in [
        json!({"action": "term_read", "session_id": wb_session}),
        json!({"action": "read", "session_id": wb_session}),
        json!({"action": "send_line", "session_id": wb_session, "data": "x"}),
        json!({"action": "send_line_to_agent", "agent_id": "wb", "data": "x"}),
        json!({"action": "resolve", "agent_id": "wb"}),
    ] {
        let (err, v) = call(&mcp, "k_pty", args.clone()).await;
        assert!(err, "{args}: {v}");
        assert!(
            ["PTY_SESSION_NOT_FOUND", "NOT_FOUND"]
                .contains(&v["error_code"].as_str().unwrap_or("")),
            "{args}: {v}"
        );
    }
    let (err, v) = call(
        &mcp,
        "k_agents",
        json!({"action": "stop", "agent_id": "wb"}),
    )
    .await;
    assert!(err && v["error_code"] == "AGENT_NOT_FOUND", "{v}");
    mcp.cancel().await.ok();

    // Inside the leader: the CLI.
    let (code, out, err) = inside(&lead, &["ls", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("w1") && !out.contains("\"wb\""), "{out}");
    let (code, _, err) = inside(&lead, &["send", "--to-agent", "w1", "work 1"]);
    assert_eq!(code, 0, "{err}");
    let w1_session = hub.get("/v1/agents/w1").await.1["agent"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = wait_until(T, || async {
        let (_, out, _) = inside(&lead, &["screen", &w1_session]);
        out.contains("done: 1")
    })
    .await;
    assert!(done, "the leader reads w1's result with agent-hub screen");
    let (code, _, err) = inside(&lead, &["screen", &wb_session]);
    assert_ne!(code, 0);
    assert!(
        err.contains("PTY_SESSION_NOT_FOUND") || err.contains("not found"),
        "{err}"
    );

    // Inside a worker: it reports to its leader, and cannot type into its sibling.
    let (code, _, err) = inside(&w1, &["send", "--to-agent", "lead", "report: w1 finished"]);
    assert_eq!(code, 0, "{err}");
    let lead_session = hub.get("/v1/agents/lead").await.1["agent"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let reported = wait_until(T, || async {
        hub.hub
            .get(&lead_session)
            .unwrap()
            .with_screen(|s| s.text())
            .contains("report: w1 finished")
    })
    .await;
    assert!(reported, "the report reached the leader's terminal");
    let (code, _, err) = inside(&w1, &["send", &w2_session, "rm -rf /tmp/x"]);
    assert_ne!(code, 0, "a worker cannot type into another worker: {err}");
    assert!(err.contains("PTY_SESSION_NOT_FOUND"), "{err}");
    let (code, _, err) = inside(&w1, &["send", "--to-agent", "w2", "hello"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("NOT_FOUND"), "{err}");
    // The same from the worker's own MCP client: its own terminal is read-only to it.
    let mcp = mcp_inside(&w1).await;
    let (err, v) = call(
        &mcp,
        "k_pty",
        json!({"action": "send_line", "session_id": w1_session, "data": "x"}),
    )
    .await;
    assert!(err && v["error_code"] == "FORBIDDEN", "{v}");
    let (err, v) = call(
        &mcp,
        "k_pty",
        json!({"action": "term_read", "session_id": w2_session}),
    )
    .await;
    // (an id no session has is then tried as an agent id or label: NOT_FOUND)
    assert!(err && v["error_code"] == "NOT_FOUND", "{v}");
    let (err, v) = call(
        &mcp,
        "k_agents",
        json!({"action": "restart", "agent_id": "w1"}),
    )
    .await;
    assert!(err && v["error_code"] == "FORBIDDEN", "{v}");
    mcp.cancel().await.ok();
    let (code, out, err) = inside(&w1, &["ls", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&w1_session) && !out.contains(&w2_session),
        "{out}"
    );

    // The leader runs its team's containers over MCP: restart w1 and wait until its agent is
    // idle again, read its state, stop w2.
    let mcp = mcp_inside(&lead).await;
    let (err, v) = call(
        &mcp,
        "k_agents",
        json!({"action": "restart", "agent_id": "w1"}),
    )
    .await;
    assert!(!err, "{v}");
    let (err, v) = call(
        &mcp,
        "k_agents",
        json!({"action": "wait_state", "agent_id": "w1", "states": ["idle"], "timeout_ms": 20000}),
    )
    .await;
    assert!(!err && v["reached"] == true && v["state"] == "idle", "{v}");
    let (err, v) = call(
        &mcp,
        "k_agents",
        json!({"action": "state", "agent_id": "w1"}),
    )
    .await;
    assert!(!err && v["state"] == "idle", "{v}");
    let (_, after) = hub.get("/v1/agents/w1").await;
    assert_ne!(
        after["agent"]["session_id"].as_str(),
        Some(w1_session.as_str()),
        "a restart gives a new session: {after}"
    );

    // A stopped agent's credential is refused.
    let token_file = hub.hub.config().data_dir.join("agents/w2/token");
    let old = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();
    let (err, v) = call(
        &mcp,
        "k_agents",
        json!({"action": "stop", "agent_id": "w2"}),
    )
    .await;
    assert!(!err, "{v}");
    let (err, v) = call(
        &mcp,
        "k_agents",
        json!({"action": "state", "agent_id": "w2"}),
    )
    .await;
    assert!(
        !err && v["state"] == "exited",
        "a stopped agent reads as exited: {v}"
    );
    mcp.cancel().await.ok();
    let refused = reqwest::Client::new()
        .get(format!("{}/v1/pty/sessions", hub.base))
        .bearer_auth(&old)
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status().as_u16(),
        401,
        "a stopped agent's credential is refused"
    );

    // The audit log names the agents as actors.
    let (_, audit) = hub
        .get("/v1/pty-traffic/events?action=send_line_to_agent")
        .await;
    let actors: Vec<(&str, &str)> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let id = e["actor_agent_id"].as_str().unwrap_or("");
            (e["actor"].as_str().unwrap_or(""), id)
        })
        .collect();
    assert!(actors.contains(&("agent:lead", "lead")), "{audit}");
    assert!(actors.contains(&("agent:w1", "w1")), "{audit}");
}
