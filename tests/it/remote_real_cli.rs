//! The real CLIs on an engine whose files the hub cannot see (the rig's second engine, see
//! docs/testing.md), against the suite's model stand-ins: their conversations resume at every
//! start by a message after an idle stop (the hub looks for them through the engine, and the
//! arguments go in through it), and Claude Code's states come from the hooks the hub writes
//! through the engine, run by the hub's executable from the engine's own volume.

use std::io::Write;
use std::time::Duration;

use serde_json::{json, Value};

use crate::docker_support::{unique_hub_id, ContainerGuard};
use crate::hub_process::{free_port, FreshHub};
use crate::model_standin::ModelStandIn;
use crate::real_cli::{claude_env, cli, write_claude_config, write_codex_config};
use crate::real_cli_docker::toml_table;
use crate::remote_agents::remote_endpoint;
use crate::require_docker;
use crate::resume::{agent, carries, prompt, settle, state_when, users, wait_status};

/// The image with the pinned CLIs in it (`tests/rig/remote-engine.sh` loads it into the rig).
const CLIS_IMAGE: &str = "agent-hub/agent-clis:test";

/// A hub process whose agents (`agents`, `[[agents]]` text with `{HUB_URL}` for its address)
/// have the policy `nap`: idle for `idle_s`, started by a message.
struct Remote {
    fresh: FreshHub,
    hub_id: String,
    endpoint: String,
    _guard: ContainerGuard,
    _files: [tempfile::TempDir; 2],
}

impl Remote {
    async fn start(
        tag: &str,
        endpoint: &str,
        idle_s: u64,
        agents: &str,
        seed: &[Seed<'_>],
    ) -> Self {
        let hub_id = unique_hub_id();
        let _guard = ContainerGuard(hub_id.clone());
        for s in seed {
            seed_home(endpoint, &hub_id, s);
        }
        let policies = crate::policy_support::policies_dir();
        let nap = format!("idle_timeout_s = {idle_s}\nstart_on_message = true\n");
        std::fs::write(policies.path().join("nap.toml"), nap).unwrap();
        let config_dir = tempfile::tempdir().unwrap();
        let config = config_dir.path().join("hub.toml");
        let port = free_port();
        let agents = agents.replace("{HUB_URL}", &format!("http://127.0.0.1:{port}"));
        let text = format!(
            "hub_id = \"{hub_id}\"\npolicies_dir = '{}'\n{agents}",
            policies.path().display()
        );
        std::fs::write(&config, text).unwrap();
        let config_arg = config.display().to_string();
        let fresh = FreshHub::start_on(port, tag, &["--config", &config_arg], &[]).await;
        Remote {
            fresh,
            hub_id,
            endpoint: endpoint.to_string(),
            _guard,
            _files: [policies, config_dir],
        }
    }

    /// The container's last lines (why a CLI ended is there when nobody saw its screen).
    fn logs(&self, id: &str) -> String {
        let out = std::process::Command::new("docker")
            .args(["-H", &self.endpoint, "logs", "--tail", "30"])
            .arg(format!("agent-hub-{}-{id}", self.hub_id))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// Files put into an agent's home volume on the engine before the hub first starts it, as a
/// user seeds a login there.
struct Seed<'a> {
    agent: &'a str,
    /// Paths under the home, and their contents.
    files: Vec<(String, Vec<u8>)>,
}

/// Makes the agent's home volume on the engine (filled from the image, as its first mount
/// would) with the seed's files in it, owned by the image's user.
fn seed_home(endpoint: &str, hub_id: &str, seed: &Seed) {
    let volume = agent_hub::agents::home::volume_name(hub_id, seed.agent);
    let mut tar = tar::Builder::new(Vec::new());
    for (path, bytes) in &seed.files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        tar.append_data(&mut header, path, bytes.as_slice())
            .unwrap();
    }
    let tar = tar.into_inner().unwrap();
    let mut child = std::process::Command::new("docker")
        .args([
            "-H",
            endpoint,
            "run",
            "--rm",
            "-i",
            "-u",
            "root",
            "--network",
            "none",
        ])
        .args(["--label", &format!("agent-hub.hub={hub_id}")])
        .args(["--label", "agent-hub.managed=true"])
        .args(["-v", &format!("{volume}:/home/agent")])
        .args(["--entrypoint", "sh", CLIS_IMAGE, "-c"])
        .arg("tar x -C /home/agent && chown -R agent:agent /home/agent")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&tar).unwrap();
    assert!(child.wait().unwrap().success(), "seeding {volume}");
    let labelled = std::process::Command::new("docker")
        .args(["-H", endpoint, "volume", "inspect", &volume])
        .output()
        .unwrap();
    assert!(labelled.status.success(), "{volume} was not made");
}

/// The files of a config dir made by `write` in a temporary directory, as paths under `under`.
fn files_of(under: &str, write: impl FnOnce(&std::path::Path)) -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (format!("{under}/{name}"), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// An agent on the engine `endpoint` running the image's Claude Code with its config in its
/// kept home there.
fn claude_agent(id: &str, endpoint: &str, standin: &ModelStandIn, extra: &str) -> String {
    let env = toml_table(&claude_env(standin, "/home/agent/.claude"));
    format!(
        "[[agents]]\nid = \"{id}\"\nimage = \"{CLIS_IMAGE}\"\ncommand = [\"/clis/.bin/claude\"]\n\
         docker_host = \"{endpoint}\"\nhub_url = \"{{HUB_URL}}\"\nworkdir = \"/workspace\"\n\
         network = \"host\"\nenv = {{ {env} }}\ncli_type = \"claude\"\npolicy = \"nap\"\n\
         ready_pattern = '\\? for shortcuts'\nready_timeout = 60\nstop_grace = 2\n{extra}\n"
    )
}

/// Three times: the idle policy stops the agent, a message starts it again, and the model sees
/// the earlier turns; the agent says it resumes, and why (`reason` in its `resume_reason`).
async fn three_resumes(r: &Remote, standin: &ModelStandIn, id: &str, reason: &str) {
    let hub = &r.fresh.hub;
    for n in 1..=3 {
        wait_status(hub, id, "stopped", Duration::from_secs(40)).await;
        let info = agent(hub, id).await;
        assert_eq!(info["resumes"], true, "before start {n}: {info}");
        assert!(
            info["resume_reason"].as_str().unwrap().contains(reason),
            "before start {n}: {info}"
        );
        let words = format!("which words came before, turn {n}");
        let turns = prompt(hub, standin, id, &words).await;
        assert!(
            carries(&turns, "PAPAYA"),
            "start {n}: the model saw no earlier turn: {:?}\n{}",
            users(&turns),
            r.logs(id)
        );
        settle(hub, id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_on_a_remote_engine_resumes_and_reports_through_its_hooks() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let Some(endpoint) = remote_endpoint() else {
        return;
    };
    let standin = ModelStandIn::start().await;
    let agents = claude_agent("rc", &endpoint, &standin, "remove_on_stop = true");
    let seed = Seed {
        agent: "rc",
        files: files_of(".claude", |d| write_claude_config(d, "/workspace", false)),
    };
    let r = Remote::start("remote-claude", &endpoint, 4, &agents, &[seed]).await;
    let hub = &r.fresh.hub;
    let info = agent(hub, "rc").await;
    assert_eq!(info["resumes"], false, "{info}");

    // The first message starts it; the end of its turn comes from the Stop hook the hub wrote
    // into its settings through the engine, run by the hub's executable from the engine's
    // volume, over `hub_url`.
    prompt(hub, &standin, "rc", "remember the word PAPAYA").await;
    let s = state_when(hub, "rc", |s| s["source"] == "hook:Stop").await;
    assert_eq!(s["state"], "idle", "{s}\n{}", r.logs("rc"));
    three_resumes(&r, &standin, "rc", ".jsonl").await;

    // What its model calls used, from its transcripts read through the engine.
    let usage = crate::support::wait_until(Duration::from_secs(30), || async {
        agent_usage(hub, "rc").await["usage"]["calls"].as_u64() >= Some(4)
    })
    .await;
    assert!(usage, "{}", agent_usage(hub, "rc").await);

    // The permission question: blocked as it is drawn, from Claude Code's status file read
    // through the engine, then from its Notification hook.
    prompt(hub, &standin, "rc", "please run a tool").await;
    state_when(hub, "rc", |s| {
        s["state"] == "blocked" && s["source"] == "status-file:waiting"
    })
    .await;
    let s = state_when(hub, "rc", |s| {
        s["state"] == "blocked" && s["source"] == "hook:Notification/permission_prompt"
    })
    .await;
    assert!(s["evidence"].to_string().contains("1. Yes"), "{s}");
    let (_, v) = (
        (),
        hub.call(reqwest::Method::POST, "/v1/agents/rc/stop", json!({}))
            .await,
    );
    assert_eq!(v["agent"]["status"], "stopped", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_on_a_remote_engine_resumes_its_session_at_every_start() {
    require_docker!();
    let Some(_) = cli("codex") else { return };
    let Some(endpoint) = remote_endpoint() else {
        return;
    };
    let standin = ModelStandIn::start().await;
    let agents = format!(
        "[[agents]]\nid = \"rx\"\nimage = \"{CLIS_IMAGE}\"\ncommand = [\"/codex/bin/codex\"]\n\
         docker_host = \"{endpoint}\"\nhub_url = \"{{HUB_URL}}\"\nworkdir = \"/workspace\"\n\
         network = \"host\"\n\
         env = {{ CODEX_HOME = \"/home/agent/.codex\", STANDIN_API_KEY = \"sk-standin\" }}\n\
         cli_type = \"codex\"\npolicy = \"nap\"\nready_pattern = '\\? for shortcuts'\n\
         ready_timeout = 60\nstop_grace = 2\n"
    );
    let seed = Seed {
        agent: "rx",
        files: files_of(".codex", |d| write_codex_config(d, &standin, "/workspace")),
    };
    let r = Remote::start("remote-codex", &endpoint, 4, &agents, &[seed]).await;
    let hub = &r.fresh.hub;
    prompt(hub, &standin, "rx", "remember the word PAPAYA").await;
    // Its turn's end comes by the `notify` the hub wrote into its config through the engine.
    let s: Value = state_when(hub, "rx", |s| s["source"] == "hook:agent-turn-complete").await;
    assert_eq!(s["state"], "idle", "{s}\n{}", r.logs("rx"));
    three_resumes(&r, &standin, "rx", "rollout-").await;
}

async fn agent_usage(hub: &crate::hub_process::HubProcess, id: &str) -> Value {
    let path = format!("/v1/agents/{id}/usage");
    hub.call(reqwest::Method::GET, &path, json!({})).await
}

/// A bash agent on the engine `endpoint` in `team` as `role`.
fn shell_agent(id: &str, endpoint: &str, team: &str, role: &str) -> String {
    format!(
        "[[agents]]\nid = \"{id}\"\nimage = \"{CLIS_IMAGE}\"\n\
         command = [\"bash\", \"--norc\", \"--noprofile\"]\ndocker_host = \"{endpoint}\"\n\
         hub_url = \"{{HUB_URL}}\"\nnetwork = \"host\"\nteam = \"{team}\"\n\
         owner_role = \"{role}\"\nready_pattern = '[$#] *$'\nready_timeout = 30\nstop_grace = 1\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_on_a_remote_engine_drives_its_team_through_agent_hub_mcp() {
    require_docker!();
    let Some(endpoint) = remote_endpoint() else {
        return;
    };
    let agents = [
        shell_agent("lead", &endpoint, "a", "leader"),
        shell_agent("w1", &endpoint, "a", "worker"),
        shell_agent("wb", &endpoint, "b", "worker"),
    ]
    .concat();
    let r = Remote::start("remote-leader", &endpoint, 600, &agents, &[]).await;
    let hub = &r.fresh.hub;
    for id in ["lead", "w1", "wb"] {
        let (status, v) = hub
            .call_status(
                reqwest::Method::POST,
                &format!("/v1/agents/{id}/start"),
                json!({}),
            )
            .await;
        assert_eq!(status, 200, "{id}: {v}");
    }
    let lead = agent(hub, "lead").await["container_id"]
        .as_str()
        .unwrap()
        .to_string();

    // Inside the leader, on the remote engine: the hub's executable from the engine's volume,
    // reaching the hub at `hub_url` with the credential put through the engine.
    let mcp = crate::leader::mcp_inside_on(Some(&endpoint), &lead).await;
    let (err, team) = crate::leader::call(&mcp, "k_agents", json!({"action": "list"})).await;
    assert!(!err, "{team}");
    let mut ids: Vec<&str> = team["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["lead", "w1"], "its team only: {team}");
    let (err, sent) = crate::leader::call(
        &mcp,
        "k_pty",
        json!({"action": "send_line_to_agent", "agent_id": "w1", "data": "echo driven-$((6*7))"}),
    )
    .await;
    assert!(!err, "{sent}");
    let session = sent["resolved_session_id"].as_str().unwrap().to_string();
    let read = crate::support::wait_until(Duration::from_secs(20), || async {
        let (_, screen) = crate::leader::call(
            &mcp,
            "k_pty",
            json!({"action": "term_read", "session_id": session}),
        )
        .await;
        screen["text"].as_str().unwrap_or("").contains("driven-42")
    })
    .await;
    assert!(read, "the worker never ran the leader's line");
    let (err, v) = crate::leader::call(
        &mcp,
        "k_pty",
        json!({"action": "send_line_to_agent", "agent_id": "wb", "data": "x"}),
    )
    .await;
    assert!(err, "another team's agent: {v}");
    mcp.cancel().await.ok();
}
