//! Agents keep their conversations: the real Claude Code in a container of the offline test
//! image, against the model stand-in, its home kept by the hub in its data dir. Every way the
//! hub starts an agent again resumes: after its idle policy stopped it and a message started
//! it, `restart`, a hub SIGKILLed and started again with the container gone, a container
//! removed at every stop; and `start --fresh` does not. Codex resumes the same way.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::docker_support::{docker, test_image, unique_hub_id, ContainerGuard};
use crate::hub_process::{FreshHub, HubProcess};
use crate::model_standin::ModelStandIn;
use crate::real_cli::{claude_env, cli, write_claude_config, write_codex_config};
use crate::real_cli_docker::{open_up, toml_table};
use crate::require_docker;
use crate::support::wait_until;

/// An agent running the mounted Claude Code with its config in its kept home.
fn claude_agent(id: &str, standin: &ModelStandIn, extra: &str) -> String {
    claude_agent_with(id, standin, "/home/agent/.claude", &[], extra)
}

/// An agent running the mounted Claude Code with its config dir at `config_dir` (in the
/// container) and `mounts` besides the CLI's.
fn claude_agent_with(
    id: &str,
    standin: &ModelStandIn,
    config_dir: &str,
    mounts: &[String],
    extra: &str,
) -> String {
    let modules = format!(
        "{}/tests/agent-clis/node_modules",
        env!("CARGO_MANIFEST_DIR")
    );
    let env = toml_table(&claude_env(standin, config_dir));
    let mounts: String = mounts.iter().map(|m| format!(", \"{m}\"")).collect();
    format!(
        "[[agents]]\nid = \"{id}\"\nimage = \"{image}\"\ncommand = [\"/clis/.bin/claude\"]\n\
         mounts = [\"{modules}:/clis:ro\"{mounts}]\nworkdir = \"/workspace\"\n\
         network = \"host\"\nenv = {{ {env} }}\ncli_type = \"claude\"\npolicy = \"nap\"\n\
         ready_pattern = '\\? for shortcuts'\nready_timeout = 60\nstop_grace = 2\n{extra}\n",
        image = test_image(),
    )
}

/// Claude Code's config (onboarding done, `/workspace` trusted) in the agent's home.
fn seed_home(data_dir: &str, id: &str) {
    let home = std::path::Path::new(data_dir)
        .join("agents")
        .join(id)
        .join("home");
    write_claude_config(&home.join(".claude"), "/workspace", false);
    open_up(&home);
}

/// A hub process whose agents are `agents` (`[[agents]]` text), with the policy `nap`: an idle
/// timeout of `idle_s` and start on message. Its containers and volumes go when it is dropped.
struct Setup {
    fresh: FreshHub,
    hub_id: String,
    _guard: ContainerGuard,
    _files: [tempfile::TempDir; 2],
}

impl Setup {
    async fn start(tag: &str, idle_s: u64, agents: &str) -> Self {
        let hub_id = unique_hub_id();
        let _guard = ContainerGuard(hub_id.clone());
        let policies = crate::policy_support::policies_dir();
        let nap = format!("idle_timeout_s = {idle_s}\nstart_on_message = true\n");
        std::fs::write(policies.path().join("nap.toml"), nap).unwrap();
        let config_dir = tempfile::tempdir().unwrap();
        let config = config_dir.path().join("hub.toml");
        let policies_dir = policies.path().display();
        let text = format!("hub_id = \"{hub_id}\"\npolicies_dir = '{policies_dir}'\n{agents}");
        std::fs::write(&config, text).unwrap();
        let config_arg = config.display().to_string();
        let fresh = FreshHub::start(tag, &["--config", &config_arg], &[]).await;
        Setup {
            fresh,
            hub_id,
            _guard,
            _files: [policies, config_dir],
        }
    }
}

pub async fn agent(hub: &HubProcess, id: &str) -> Value {
    hub.call(Method::GET, &format!("/v1/agents/{id}"), json!({}))
        .await["agent"]
        .clone()
}

/// Sends a prompt to the agent (starting it when stopped) and waits for the stand-in to get
/// it; returns the bodies that carried it.
pub async fn prompt(
    hub: &HubProcess,
    standin: &ModelStandIn,
    id: &str,
    words: &str,
) -> Vec<String> {
    let (status, v) = hub
        .call_status(
            Method::POST,
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": id, "data": words}),
        )
        .await;
    assert_eq!(status, 200, "{v}\n{}", what_the_cli_logged(hub, id));
    let got = wait_until(Duration::from_secs(40), || async {
        !standin.turns_with(words).is_empty()
    })
    .await;
    assert!(
        got,
        "the stand-in never got {words:?}; agent: {}",
        agent(hub, id).await
    );
    standin.turns_with(words)
}

/// The CLI's own logs in the agent's home (Codex: `.codex/log/`, Claude Code: `.claude/debug/`),
/// their last lines: why a CLI ended at once is there, not on a screen nobody saw.
pub fn what_the_cli_logged(hub: &HubProcess, id: &str) -> String {
    let home = hub.data_dir.join("agents").join(id).join("home");
    let mut out = String::new();
    for dir in [".codex/log", ".claude/debug"] {
        for entry in std::fs::read_dir(home.join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(30)..].join("\n");
            out += &format!("--- {}\n{tail}\n", entry.path().display());
        }
    }
    out
}

/// `agent-hub ARGS` against the hub process; its JSON output (it must succeed).
pub fn cli_json(hub: &HubProcess, args: &[&str]) -> Value {
    let out = std::process::Command::new(crate::cli::BIN)
        .args(args)
        .args(["--hub", &hub.base, "--token", &hub.owner_token])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

pub async fn wait_status(hub: &HubProcess, id: &str, want: &str, within: Duration) {
    let reached = wait_until(within, || async { agent(hub, id).await["status"] == want }).await;
    assert!(
        reached,
        "agent {id} is not {want}: {}",
        agent(hub, id).await
    );
}

/// Waits until the agent's answer is in its conversation file and it is idle again.
pub async fn settle(hub: &HubProcess, id: &str) {
    let idle = wait_until(Duration::from_secs(30), || async {
        let v = hub
            .call(Method::GET, &format!("/v1/agents/{id}/state"), json!({}))
            .await;
        v["state"] == "idle"
    })
    .await;
    assert!(idle, "agent {id} did not settle");
}

pub fn carries(turns: &[String], earlier: &str) -> bool {
    turns.iter().any(|t| t.contains(earlier))
}

/// The user's words in each request (for failure messages: the bodies are long).
pub fn users(turns: &[String]) -> Vec<Vec<String>> {
    turns
        .iter()
        .map(|t| {
            let v: Value = serde_json::from_str(t).unwrap_or_default();
            let messages = v["messages"].as_array().cloned().unwrap_or_default();
            messages
                .iter()
                .filter(|m| m["role"] == "user")
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .filter_map(|c| c["text"].as_str().map(String::from))
                .filter(|t| !t.starts_with('<'))
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_resumes_its_conversation_whenever_the_hub_starts_it_again() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let standin = ModelStandIn::start().await;
    let agents =
        claude_agent("cc", &standin, "") + &claude_agent("cr", &standin, "remove_on_stop = true");
    let mut setup = Setup::start("resume", 4, &agents).await;
    let hub_id = setup.hub_id.clone();
    let fresh = &mut setup.fresh;
    seed_home(&fresh.dir, "cc");
    seed_home(&fresh.dir, "cr");
    let hub = &fresh.hub;
    let info = agent(hub, "cc").await;
    assert_eq!(info["resumes"], false, "{info}");
    assert!(
        info["home"].as_str().unwrap().ends_with("/agents/cc/home"),
        "{info}"
    );

    // The first prompt starts it (start on message); the idle policy stops it.
    let first = prompt(hub, &standin, "cc", "remember the word PAPAYA").await;
    assert!(!first.is_empty());
    settle(hub, "cc").await;
    wait_status(hub, "cc", "stopped", Duration::from_secs(30)).await;
    let info = agent(hub, "cc").await;
    assert_eq!(info["resumes"], true, "{info}");
    assert!(
        info["resume_reason"].as_str().unwrap().contains(".jsonl"),
        "{info}"
    );

    // A message starts it again: the conversation goes on.
    let second = prompt(hub, &standin, "cc", "which word was it").await;
    assert!(
        carries(&second, "PAPAYA"),
        "no earlier turn after the policy stop: {:?}",
        users(&second)
    );
    settle(hub, "cc").await;

    // `restart` resumes.
    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/cc/restart", json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    let third = prompt(hub, &standin, "cc", "third turn now").await;
    assert!(
        carries(&third, "PAPAYA"),
        "no earlier turn after restart: {:?}",
        users(&third)
    );
    settle(hub, "cc").await;

    // The hub is SIGKILLed and its agent's container dies with the machine: the hub started
    // again starts the agent again at the next message, resumed.
    let container = agent(hub, "cc").await["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    fresh.hub.kill9();
    // (The idle policy may have stopped it already.)
    let _ = std::process::Command::new("docker")
        .args(["kill", &container])
        .output();
    fresh.respawn().await;
    let hub = &fresh.hub;
    let after = prompt(hub, &standin, "cc", "after the crash").await;
    assert!(
        carries(&after, "PAPAYA"),
        "no earlier turn after a hub crash: {:?}",
        users(&after)
    );
    settle(hub, "cc").await;

    // A fresh start on purpose has no earlier turn.
    let agents = cli_json(hub, &["agents", "--json"]);
    let cc = &agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "cc")
        .unwrap();
    assert_eq!(cc["resumes"], true, "{agents}");
    let restarted = cli_json(hub, &["restart", "--fresh", "cc", "--json"]);
    assert_eq!(restarted["agent"]["status"], "running", "{restarted}");
    let new = prompt(hub, &standin, "cc", "a fresh start here").await;
    assert!(
        !carries(&new, "PAPAYA"),
        "a fresh start carried an earlier turn: {:?}",
        users(&new)
    );
    settle(hub, "cc").await;

    // A container removed at every stop: the home outlives it.
    prompt(hub, &standin, "cr", "remember the word MANGO").await;
    settle(hub, "cr").await;
    wait_status(hub, "cr", "stopped", Duration::from_secs(30)).await;
    let gone = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("name=agent-hub-{hub_id}-cr"),
    ]);
    assert!(
        gone.trim().is_empty(),
        "the container was not removed: {gone}"
    );
    let again = prompt(hub, &standin, "cr", "which fruit was it").await;
    assert!(
        carries(&again, "MANGO"),
        "no earlier turn after a removed container: {:?}",
        users(&again)
    );
}

/// Claude Code with its config dir mounted from a directory of the user's own
/// (`CLAUDE_CONFIG_DIR=/cfg`, as people reuse a login; #40): the hub looks for its
/// conversation there, so every start after an idle stop resumes it, writes its hooks there
/// and reads its status file there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_with_its_config_dir_mounted_from_the_host_resumes_at_every_start() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let standin = ModelStandIn::start().await;
    let cfg = tempfile::tempdir().unwrap();
    write_claude_config(cfg.path(), "/workspace", false);
    open_up(cfg.path());
    let mount = format!("{}:/cfg", cfg.path().display());
    let agents = claude_agent_with("cg", &standin, "/cfg", &[mount], "");
    let setup = Setup::start("cfgdir", 4, &agents).await;
    let hub = &setup.fresh.hub;

    prompt(hub, &standin, "cg", "remember the word PAPAYA").await;
    // Its states come from the hooks the hub wrote into /cfg, or from its status file there.
    state_when(hub, "cg", |s| {
        s["state"] == "idle" && (s["source"] == "hook:Stop" || s["source"] == "status-file:idle")
    })
    .await;
    let settings = std::fs::read_to_string(cfg.path().join("settings.json")).unwrap();
    assert!(settings.contains("hook Stop"), "{settings}");
    for (i, words) in ["which word was it", "say it again", "once more"]
        .iter()
        .enumerate()
    {
        wait_status(hub, "cg", "stopped", Duration::from_secs(30)).await;
        let info = agent(hub, "cg").await;
        let reason = info["resume_reason"].as_str().unwrap_or_default();
        assert!(
            info["resumes"] == true && reason.starts_with("found /cfg/projects/-workspace/"),
            "{info}"
        );
        let turns = prompt(hub, &standin, "cg", words).await;
        assert!(
            carries(&turns, "PAPAYA"),
            "start {} after an idle stop did not resume: {:?}",
            i + 1,
            users(&turns)
        );
        settle(hub, "cg").await;
    }
}

/// An agent running the mounted Codex (its static binary) with its config in its kept home.
fn codex_agent(id: &str, extra: &str) -> String {
    let codex = format!(
        "{}/tests/agent-clis/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl",
        env!("CARGO_MANIFEST_DIR")
    );
    format!(
        "[[agents]]\nid = \"{id}\"\nimage = \"{image}\"\ncommand = [\"/codex/bin/codex\"]\n\
         mounts = [\"{codex}:/codex:ro\"]\nworkdir = \"/workspace\"\nnetwork = \"host\"\n\
         env = {{ CODEX_HOME = \"/home/agent/.codex\", STANDIN_API_KEY = \"sk-standin\" }}\n\
         cli_type = \"codex\"\npolicy = \"nap\"\nready_pattern = '\\? for shortcuts'\n\
         ready_timeout = 60\nstop_grace = 2\n{extra}\n",
        image = test_image(),
    )
}

/// Codex's config (the stand-in as its provider, `/workspace` trusted) in the agent's home.
fn seed_codex_home(data_dir: &str, id: &str, standin: &ModelStandIn) {
    let home = std::path::Path::new(data_dir)
        .join("agents")
        .join(id)
        .join("home");
    write_codex_config(&home.join(".codex"), standin, "/workspace");
    open_up(&home);
}

/// Starts the Codex agent; a failed start prints what the container logged (the entrypoint
/// prints the program's last screen). Such starts once ended at once under load: the hub's
/// attach crashed tmux 3.3a (see `sessions::attaching_to_a_pane_that_prints_...`).
async fn start_codex(hub: &HubProcess, hub_id: &str) {
    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/cx/start", json!({}))
        .await;
    if status != 200 {
        let logs = std::process::Command::new("docker")
            .args(["logs", "--tail", "40", &format!("agent-hub-{hub_id}-cx")])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .unwrap_or_default();
        panic!("{v}\n{logs}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_resumes_its_session_when_the_hub_starts_it_again() {
    require_docker!();
    let Some(_) = cli("codex") else { return };
    let standin = ModelStandIn::start().await;
    let setup = Setup::start("resume-codex", 600, &codex_agent("cx", "")).await;
    let fresh = &setup.fresh;
    seed_codex_home(&fresh.dir, "cx", &standin);
    let hub = &fresh.hub;

    start_codex(hub, &setup.hub_id).await;
    settle(hub, "cx").await;
    prompt(hub, &standin, "cx", "remember the word KIWI").await;
    settle(hub, "cx").await;
    // The hub wrote its `notify` over the seeded config (kept), and the turn's end came by it.
    let config = std::path::Path::new(&fresh.dir).join("agents/cx/home/.codex/config.toml");
    let config = std::fs::read_to_string(config).unwrap();
    let notify = format!(
        "notify = [\"{}\", \"hook\", \"--notify\"]\n",
        agent_hub::agents::hub_access::BINARY_IN_CONTAINER
    );
    assert!(
        config.starts_with(&notify) && config.contains("[model_providers.standin]"),
        "{config}"
    );
    state_when(hub, "cx", |s| s["source"] == "hook:agent-turn-complete").await;
    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/cx/stop", json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    let info = agent(hub, "cx").await;
    assert_eq!(info["resumes"], true, "{info}");
    assert!(
        info["resume_reason"].as_str().unwrap().contains("rollout-"),
        "{info}"
    );

    start_codex(hub, &setup.hub_id).await;
    settle(hub, "cx").await;
    let again = prompt(hub, &standin, "cx", "which word was it").await;
    assert!(
        carries(&again, "KIWI"),
        "no earlier turn after a stop and start: {} requests",
        again.len()
    );
}

/// The state of agent `id` (explained) once `ok` holds, within 30 s.
pub async fn state_when(hub: &HubProcess, id: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/v1/agents/{id}/state?explain=true");
    let held = wait_until(Duration::from_secs(40), || async {
        ok(&hub.call(Method::GET, &path, json!({})).await)
    })
    .await;
    let now = hub.call(Method::GET, &path, json!({})).await;
    assert!(held, "{now}");
    now
}

/// The hub writes Claude Code's hooks into the agent's kept home at its start, merged with the
/// settings there, and the agent's states then come from them and from its status file, read
/// through the kept home (#29 item 1): the end of a turn from `Stop` or the file, the
/// permission question from the file as it is drawn, then `Notification/permission_prompt`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_in_a_container_reports_its_states_through_the_hooks_the_hub_writes() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let standin = ModelStandIn::start().await;
    let setup = Setup::start("hooks", 600, &claude_agent("ch", &standin, "")).await;
    let fresh = &setup.fresh;
    seed_home(&fresh.dir, "ch");
    let hub = &fresh.hub;
    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/ch/start", json!({}))
        .await;
    assert_eq!(status, 200, "{v}\n{}", what_the_cli_logged(hub, "ch"));
    let file = hub.data_dir.join("agents/ch/home/.claude/settings.json");
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        settings["permissions"]["defaultMode"], "default",
        "{settings}"
    );
    let hooks = settings["hooks"].to_string();
    for command in [
        "/usr/local/bin/agent-hub hook Stop",
        "/usr/local/bin/agent-hub hook Notification permission_prompt",
    ] {
        assert!(hooks.contains(command), "{command}: {settings}");
    }

    prompt(hub, &standin, "ch", "say hello").await;
    // The end of the turn: the Stop hook and the status file say it at about the same moment.
    state_when(hub, "ch", |s| {
        s["state"] == "idle" && (s["source"] == "hook:Stop" || s["source"] == "status-file:idle")
    })
    .await;
    prompt(hub, &standin, "ch", "please run a tool").await;
    // Blocked as the question is drawn, from Claude Code's status file read through the kept
    // home, then confirmed by the Notification hook (about 6 s later, in 2.1.330).
    state_when(hub, "ch", |s| {
        s["state"] == "blocked" && s["source"] == "status-file:waiting"
    })
    .await;
    let s = state_when(hub, "ch", |s| {
        s["state"] == "blocked" && s["source"] == "hook:Notification/permission_prompt"
    })
    .await;
    assert!(s["evidence"].to_string().contains("1. Yes"), "{s}");
}

/// A Claude Code agent whose config runs the hub's MCP server is ready only once that server
/// is connected (#29 item 5). Claude Code draws its prompt, says `idle` and takes a prompt
/// before its MCP servers are up (here the hub's starts 4 s late) and answers it without their
/// tools. So the agent reads `working` (`mcp:connecting`) until `agent-hub mcp` tells the hub
/// its client listed the tools; its start returns then, and a prompt sent meanwhile waits and
/// goes out with the hub's tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_agent_is_ready_only_once_its_mcp_connection_to_the_hub_is_up() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let standin = ModelStandIn::start().await;
    let agent = claude_agent("cm", &standin, "hub_access = true");
    let setup = Setup::start("mcp", 600, &agent).await;
    let fresh = &setup.fresh;
    seed_home(&fresh.dir, "cm");
    let file = std::path::Path::new(&fresh.dir).join("agents/cm/home/.claude/.claude.json");
    let mut state: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    state["mcpServers"] = json!({"hub": {"type": "stdio", "command": "sh",
        "args": ["-c", "sleep 4; exec agent-hub mcp"]}});
    std::fs::write(&file, state.to_string()).unwrap();
    let hub = &fresh.hub;

    let began = std::time::Instant::now();
    let start = hub.call_status(Method::POST, "/v1/agents/cm/start", json!({}));
    let meanwhile = async {
        let s = state_when(hub, "cm", |s| s["source"] == "mcp:connecting").await;
        assert_eq!(s["state"], "working", "{s}");
        // Sent while the connection is awaited: it waits for it.
        prompt(hub, &standin, "cm", "say hi early").await
    };
    let ((status, v), turns) = tokio::join!(start, meanwhile);
    assert_eq!(status, 200, "{v}\n{}", what_the_cli_logged(hub, "cm"));
    assert!(
        began.elapsed() >= Duration::from_secs(4),
        "{:?}",
        began.elapsed()
    );
    assert!(
        turns[0].contains("k_pty"),
        "the first prompt went out without the hub's tools: {:?}",
        users(&turns)
    );
    let s = state_when(hub, "cm", |s| s["state"] == "idle").await;
    assert_ne!(s["source"], "mcp:connecting", "{s}");
}
