//! Placement (#43): an agent whose definition names several engines (`docker_hosts`) starts on
//! the one with the most memory left, as Docker says it (its total less what its running
//! containers use or reserve), and stays there while it keeps its home there. Run on two real
//! engines of one machine, the local one (by its TCP endpoint) and the rig's remote one: both
//! report the same total, so the memory limits of running agents decide.

use serde_json::{json, Value};

use crate::cli::BIN;
use crate::docker::{agent, start};
use crate::docker_support::{agent_toml, docker, docker_tcp, hub_with_agents, remote_engine};
use crate::require_docker;
use crate::support::TestHub;

async fn stop(hub: &TestHub, id: &str) {
    let (status, v) = hub.post(&format!("/v1/agents/{id}/stop"), json!({})).await;
    assert_eq!(status, 200, "stop {id}: {v}");
}

/// What each engine has left, as `GET /v1/engines` says.
async fn memory_left(hub: &TestHub) -> Vec<(String, u64)> {
    let (_, v) = hub.get("/v1/engines").await;
    v["engines"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|e| {
            let left = e["memory_left_bytes"].as_u64();
            let left = left.unwrap_or_else(|| panic!("{e}"));
            (e["engine"].as_str().unwrap().to_string(), left)
        })
        .collect()
}

/// Starts `id` and checks the engine it runs on, in its info and by its container there.
async fn starts_on(hub: &TestHub, id: &str, engine: &str) -> Value {
    let a = start(hub, id).await;
    assert_eq!(a["docker_host"], engine, "{id}: {a}");
    let name = format!(
        "agent-hub-{}-{id}",
        hub.hub.config().hub_id.as_deref().unwrap()
    );
    let inspect = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}", &name])
        .env("DOCKER_HOST", engine)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&inspect.stdout).trim(),
        "true",
        "{id}'s container on {engine}: {inspect:?}"
    );
    a
}

/// Two agents whose memory limits together reserve more than the machine has run on one
/// engine (it has nothing left); the next agent naming both engines, that one first, starts on
/// the other. Then the two move to the other engine: an agent that keeps its home stays where
/// it was placed, one that keeps nothing there (no home, container removed at its stop) and a
/// new one go to the engine that now has more left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_agent_naming_both_engines_starts_on_the_one_with_more_memory_left() {
    require_docker!();
    let Some(local) = docker_tcp() else { return };
    let Some(rig) = remote_engine() else { return };
    let remote = rig.endpoint.as_str();
    let total: u64 = docker(&["info", "--format", "{{.MemTotal}}"])
        .trim()
        .parse()
        .unwrap();
    let reserve = format!("memory = \"{}m\"", (total >> 20) / 2 + 512);
    let on = |engine: &str| format!("docker_host = \"{engine}\"\n{reserve}");
    let both = |first: &str, second: &str| format!("docker_hosts = [\"{first}\", \"{second}\"]");
    let toml = [
        agent_toml("big-remote-1", &on(remote)),
        agent_toml("big-remote-2", &on(remote)),
        agent_toml("big-local-1", &on(&local)),
        agent_toml("big-local-2", &on(&local)),
        agent_toml("keeper", &both(remote, &local)),
        agent_toml(
            "roamer",
            &format!(
                "{}\nkeep_home = false\nremove_on_stop = true",
                both(&local, remote)
            ),
        ),
        agent_toml("newcomer", &both(&local, remote)),
    ]
    .concat();
    let (hub, _guard) = hub_with_agents(&toml).await;
    let keeper = agent(&hub, "keeper").await;
    assert_eq!(keeper["docker_host"], "", "not placed yet: {keeper}");
    assert_eq!(keeper["docker_hosts"], json!([remote, local]), "{keeper}");

    // The remote engine full: both go to the local one, the keeper though it names the
    // remote one first.
    start(&hub, "big-remote-1").await;
    start(&hub, "big-remote-2").await;
    let left = memory_left(&hub).await;
    println!("memory left with the remote engine full: {left:?}");
    starts_on(&hub, "keeper", &local).await;
    starts_on(&hub, "roamer", &local).await;
    let recorded = hub.data_dir().join("agents/keeper/engine");
    assert_eq!(
        std::fs::read_to_string(&recorded).unwrap().trim(),
        local,
        "{}",
        recorded.display()
    );
    for id in ["big-remote-1", "big-remote-2", "keeper", "roamer"] {
        stop(&hub, id).await;
    }

    // Now the local engine full: the keeper stays with its home; the others go remote.
    start(&hub, "big-local-1").await;
    start(&hub, "big-local-2").await;
    let left = memory_left(&hub).await;
    println!("memory left with the local engine full: {left:?}");
    starts_on(&hub, "keeper", &local).await;
    starts_on(&hub, "roamer", remote).await;
    let newcomer = starts_on(&hub, "newcomer", remote).await;
    let sid = newcomer["session_id"].as_str().unwrap();
    let out = hub.talk(sid, "echo placed-$((6*7))").await;
    assert!(
        out["output"].as_str().unwrap_or("").contains("placed-42"),
        "{out}"
    );

    // `agent-hub agents` says where each is, of what.
    let out = tokio::process::Command::new(BIN)
        .args(["agents", "--hub", &hub.base])
        .env("AGENT_HUB_DATA_DIR", hub.data_dir())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("engine: {remote} (placed, of {local}, {remote})")),
        "{text}"
    );
    for id in ["big-local-1", "big-local-2", "keeper", "roamer", "newcomer"] {
        stop(&hub, id).await;
    }
}
