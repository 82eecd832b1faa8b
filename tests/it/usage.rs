//! What agents spend (#41), end to end: the real Claude Code as a container agent, against the
//! model stand-in reporting the usage this test chooses, counted by the hub from Claude Code's
//! own transcripts. The figures are exact (tokens by kind, dollars by the shipped price table
//! to the cent), the same through the API, the CLI, MCP and `/metrics`, and they survive a hub
//! SIGKILL, the removal of the agent's container and of the agent itself. Bad queries are
//! refused with the field named.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::docker_support::{docker, test_image, ConfiguredHub};
use crate::hub_process::HubProcess;
use crate::model_standin::{ModelStandIn, Usage};
use crate::real_cli::{claude_env, cli, write_claude_config};
use crate::real_cli_docker::{open_up, toml_table};
use crate::require_docker;
use crate::support::{wait_until, TestHub};

/// What the stand-in reports for each call: every kind different.
const USED: Usage = Usage {
    input: 1200,
    output: 34,
    cache_read: 560,
    cache_write: 78,
    reasoning: 0,
};

/// The agent `cc` (team `core`): Claude Code in the test image, its config dir mounted from
/// `files/claude`, talking to `standin` over the host's loopback.
fn agent_toml(standin: &ModelStandIn, files: &std::path::Path) -> String {
    claude_agent("cc", "team = \"core\"\n", standin, files)
}

/// The agent `id` (with the extra `lines` of its table): Claude Code in the test image, its
/// config dir mounted from `files/claude`, talking to `standin` over the host's loopback.
pub fn claude_agent(
    id: &str,
    lines: &str,
    standin: &ModelStandIn,
    files: &std::path::Path,
) -> String {
    let modules = format!(
        "{}/tests/agent-clis/node_modules",
        env!("CARGO_MANIFEST_DIR")
    );
    let env = toml_table(&claude_env(standin, "/cfg"));
    format!(
        "[[agents]]\nid = \"{id}\"\n{lines}image = \"{image}\"\n\
         command = [\"/clis/.bin/claude\"]\n\
         mounts = [\"{modules}:/clis:ro\", \"{files}/claude:/cfg\", \"{files}/work:/work\"]\n\
         workdir = \"/work\"\nnetwork = \"host\"\nenv = {{ {env} }}\ncli_type = \"claude\"\n\
         ready_pattern = '\\? for shortcuts'\nready_timeout = 60\nstop_grace = 2\n",
        image = test_image(),
        files = files.display(),
    )
}

/// `agent-hub ARGS` against `hub` as its owner; its standard output (it must succeed).
fn run_cli(hub: &HubProcess, args: &[&str]) -> String {
    crate::cli::run_ok(&hub.base, &hub.owner_token, args)
}

pub async fn usage_of(hub: &HubProcess, agent: &str) -> Value {
    let (status, v) = hub
        .call_status(
            Method::GET,
            &format!("/v1/agents/{agent}/usage"),
            Value::Null,
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

/// Waits until the hub has counted `calls` calls of `cc`; its usage then.
async fn counted(hub: &HubProcess, calls: u64) -> Value {
    let done = wait_until(Duration::from_secs(20), || async {
        usage_of(hub, "cc").await["usage"]["calls"] == calls
    })
    .await;
    let v = usage_of(hub, "cc").await;
    assert!(done, "not {calls} calls counted: {v}");
    v
}

/// A turn: `prompt` delivered to `cc`, sent to the model, answered, and the agent idle again.
async fn turn(hub: &HubProcess, standin: &ModelStandIn, prompt: &str) {
    turn_of(hub, "cc", standin, prompt).await
}

/// A turn of `agent`: `prompt` delivered, sent to the model, answered, and the agent idle
/// again.
pub async fn turn_of(hub: &HubProcess, agent: &str, standin: &ModelStandIn, prompt: &str) {
    let (status, v) = hub
        .call_status(
            Method::POST,
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": agent, "data": prompt}),
        )
        .await;
    assert_eq!(
        (status, v["receipt"].as_str()),
        (200, Some("submitted")),
        "{v}"
    );
    let asked = wait_until(Duration::from_secs(60), || async {
        !standin.turns_with(prompt).is_empty()
    })
    .await;
    assert!(asked, "{prompt:?} not sent: {:?}", standin.requests());
    let idle = wait_until(Duration::from_secs(60), || async {
        let s = hub
            .call(
                Method::GET,
                &format!("/v1/agents/{agent}/state"),
                Value::Null,
            )
            .await;
        s["state"] == "idle" && s["rule"] != "input:sent"
    })
    .await;
    assert!(idle, "{agent} not idle after {prompt:?}");
}

/// The cost of `calls` calls of [`USED`] by `model`, by the shipped price table, worked out
/// here.
fn expected_cost(model: &str, calls: u64) -> f64 {
    let table = agent_hub::usage::price::PriceTable::shipped();
    let (_, price) = table
        .price(model)
        .expect("the shipped table prices the model");
    let per_million = |n: u64, usd: Option<f64>| (calls * n) as f64 * usd.unwrap() / 1e6;
    per_million(USED.input, Some(price.input))
        + per_million(USED.output, Some(price.output))
        + per_million(USED.cache_read, price.cache_read)
        + per_million(USED.cache_write, price.cache_write)
}

fn assert_exact(usage: &Value, calls: u64) {
    let t = &usage["tokens"];
    let want = json!({
        "input": calls * USED.input, "output": calls * USED.output,
        "cache_read": calls * USED.cache_read, "cache_write": calls * USED.cache_write,
    });
    assert_eq!(*t, want, "{usage}");
    let model = usage["by_model"][0]["model"].as_str().unwrap();
    let cost = usage["cost_usd"].as_f64().unwrap();
    let want = expected_cost(model, calls);
    assert!((cost - want).abs() < 0.005, "{cost} != {want}: {usage}");
    assert_eq!(usage["cost_complete"], true, "{usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_agent_s_usage_is_counted_exactly_and_kept() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let standin = ModelStandIn::start_with_usage(USED).await;
    let files = tempfile::tempdir().unwrap();
    write_claude_config(&files.path().join("claude"), "/work", false);
    std::fs::create_dir_all(files.path().join("work")).unwrap();
    open_up(files.path());
    let setup = ConfiguredHub::new();
    let agent = agent_toml(&standin, files.path());
    setup.write_config(&agent);
    let mut hub = setup.spawn().await;
    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/cc/start", json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    let before = usage_of(&hub, "cc").await;
    assert_eq!(before["usage"]["calls"], 0, "{before}");
    assert_eq!(before["team"], "core", "{before}");

    turn(&hub, &standin, "hello one").await;
    turn(&hub, &standin, "hello two").await;
    // Each answered call is one call of Claude Code's transcript.
    let calls = standin.answered().len() as u64;
    assert!(calls >= 2, "{:?}", standin.requests());
    let v = counted(&hub, calls).await;
    assert_exact(&v["usage"], calls);

    // The same through the fleet's view, the CLI, MCP and /metrics.
    let fleet = hub
        .call(Method::GET, "/v1/usage?team=core", Value::Null)
        .await;
    assert_eq!(fleet["agents"][0]["usage"], v["usage"], "{fleet}");
    assert_eq!(fleet["total"], v["usage"], "{fleet}");
    assert_eq!(fleet["teams"][0]["team"], "core", "{fleet}");
    let cli_json: Value = serde_json::from_str(&run_cli(&hub, &["usage", "cc", "--json"])).unwrap();
    assert_eq!(cli_json["usage"], v["usage"], "{cli_json}");
    let table = run_cli(&hub, &["usage", "--period", "today"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("cc "))
        .unwrap_or_default();
    let input = (calls * USED.input).to_string();
    assert!(row.contains("core") && row.contains(&input), "{table}");
    let mcp = crate::mcp::http_client_at(&hub.base, &hub.owner_token).await;
    let m = crate::mcp::ok(&mcp, "k_agents", json!({"action": "usage", "team": "core"})).await;
    assert_eq!(m["total"], v["usage"], "{m}");
    let metrics = hub
        .http
        .get(format!("{}/metrics", hub.base))
        .send()
        .await
        .unwrap();
    let metrics = metrics.text().await.unwrap();
    let series = format!(
        "agent_hub_usage_tokens_total{{agent=\"cc\",team=\"core\",model=\"{}\",kind=\"cache_write\"}} {}",
        v["usage"]["by_model"][0]["model"].as_str().unwrap(),
        calls * USED.cache_write
    );
    assert!(metrics.contains(&series), "no {series} in:\n{metrics}");

    // A SIGKILL of the hub: the transcripts are read again, nothing counted twice.
    hub.kill9();
    let hub = setup.spawn().await;
    let attached = wait_until(Duration::from_secs(30), || async {
        let a = hub.call(Method::GET, "/v1/agents/cc", Value::Null).await;
        a["agent"]["pty_attached"] == true
    })
    .await;
    assert!(attached);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(usage_of(&hub, "cc").await["usage"], v["usage"]);

    // The container removed, then the agent: the figures are the agent's history.
    let (status, stopped) = hub
        .call_status(Method::POST, "/v1/agents/cc/stop", json!({}))
        .await;
    assert_eq!(status, 200, "{stopped}");
    let label = format!("label=agent-hub.hub={}", setup.hub_id());
    let ids = docker(&["ps", "-aq", "--filter", &label]);
    assert!(!ids.trim().is_empty(), "no container of the hub");
    for id in ids.split_whitespace() {
        docker(&["rm", "-f", id]);
    }
    assert_eq!(usage_of(&hub, "cc").await["usage"], v["usage"]);
    drop(hub);
    setup.write_config("");
    let hub = setup.spawn().await;
    let kept = usage_of(&hub, "cc").await;
    assert_eq!(
        (&kept["usage"], &kept["team"]),
        (&v["usage"], &json!("core")),
        "{kept}"
    );
    let fleet = hub.call(Method::GET, "/v1/usage", Value::Null).await;
    assert_eq!(fleet["total"], v["usage"], "{fleet}");
}

/// Bad queries: 400 naming the field; an unknown agent: 404; an agent whose CLI's records the
/// hub cannot find: `usage: null` with the reason.
#[tokio::test]
async fn bad_usage_queries_are_refused_and_an_unreadable_cli_says_why() {
    let hub = TestHub::start_with(|c| {
        let text = "[[agents]]\nid = \"ai\"\nimage = \"img\"\ncli_type = \"aider\"\n";
        let parsed = agent_hub::config::HubConfig::parse(text, "test").unwrap();
        c.agents = parsed.agents;
    })
    .await;
    let refused = [
        ("/v1/agents/ai/usage?since=yesterday", "since"),
        ("/v1/agents/ai/usage?period=month", "period"),
        ("/v1/agents/ai/usage?team=core", "team"),
        ("/v1/usage?cost=1", "cost"),
    ];
    for (path, field) in refused {
        let (status, v) = hub.get(path).await;
        assert_eq!(
            (status, v["error_code"].as_str()),
            (400, Some("BAD_REQUEST")),
            "{path}: {v}"
        );
        assert!(
            v["message"].as_str().unwrap().contains(field),
            "{path}: {v}"
        );
    }
    let (status, v) = hub.get("/v1/agents/nobody/usage").await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (404, Some("AGENT_NOT_FOUND")),
        "{v}"
    );
    let (status, v) = hub.get("/v1/agents/ai/usage?period=week").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["usage"], Value::Null, "{v}");
    // Aider's history is in its repository: an agent naming no workdir has none the hub sees.
    assert!(
        v["reason"].as_str().unwrap().contains("names no workdir"),
        "{v}"
    );
    assert!(v["since"].as_str().unwrap().ends_with("T00:00:00Z"), "{v}");
    // A period that ends before it starts is empty, not an error.
    let (status, v) = hub
        .get("/v1/usage?since=2026-11-27T00:00:00Z&until=2026-11-26T00:00:00Z")
        .await;
    assert_eq!((status, &v["total"]["calls"]), (200, &json!(0)), "{v}");
}

/// A host session counts what its CLI writes to the records its environment names; a second
/// live session whose records are the same directory is not counted (the hub could not tell
/// their calls apart), and says so; a session whose profile names no records says that.
#[tokio::test]
async fn host_sessions_sharing_their_records_are_not_counted_and_say_why() {
    let hub = TestHub::start().await;
    let config = tempfile::tempdir().unwrap();
    let claude_like = json!({
        "backend": "pty", "shell": "/bin/sh", "args": ["-c", "sleep 60"],
        "cli_type": "claude",
        "env": {"CLAUDE_CONFIG_DIR": config.path()},
    });
    let (_, first) = hub.post("/v1/pty/sessions", claude_like.clone()).await;
    let (_, second) = hub.post("/v1/pty/sessions", claude_like).await;
    let (_, shell) = hub
        .post(
            "/v1/pty/sessions",
            json!({"backend": "pty", "shell": "/bin/sh", "args": ["-c", "sleep 60"]}),
        )
        .await;
    let usage = |v: &Value| format!("/v1/agents/{}/usage", v["session_id"].as_str().unwrap());
    let (status, v) = hub.get(&usage(&first)).await;
    assert_eq!((status, &v["usage"]["calls"]), (200, &json!(0)), "{v}");
    let (_, v) = hub.get(&usage(&second)).await;
    assert_eq!(v["usage"], Value::Null, "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains(&first["session_id"].as_str().unwrap().to_string()),
        "{v}"
    );
    assert!(
        reason.contains("cannot tell which session wrote them"),
        "{v}"
    );
    let (_, v) = hub.get(&usage(&shell)).await;
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("names no usage records"),
        "{v}"
    );
}
