//! Agents on an engine whose files the hub cannot see (the test rig's second engine,
//! `AGENT_HUB_REMOTE_ENGINE`, or the local engine over TCP on a laptop): everything the hub
//! gives the container goes through the engine (its credential, the arguments of a start, the
//! hub's executable from a volume of the hub's build), and works there as on the local engine.

use serde_json::json;

use crate::docker_support::{agent_toml, hub_with_agents_and};
use crate::require_docker;

/// The endpoint of an engine the hub reaches only over TCP: the rig's, else the local engine's
/// TCP endpoint (which proves the way, not the distance). `None` (skipped, or a panic when
/// Docker tests are required) when neither is named.
pub fn remote_endpoint() -> Option<String> {
    if let Ok(rig) = std::env::var("AGENT_HUB_REMOTE_ENGINE") {
        return Some(rig);
    }
    if let Ok(tcp) = std::env::var("AGENT_HUB_DOCKER_TCP") {
        return Some(tcp);
    }
    if std::env::var("AGENT_HUB_DOCKER_TESTS").is_ok_and(|v| v == "required") {
        panic!("AGENT_HUB_REMOTE_ENGINE (the rig, see docs/testing.md) must be set in CI");
    }
    eprintln!("SKIPPED: set AGENT_HUB_REMOTE_ENGINE (docs/testing.md) to test a remote engine");
    None
}

/// The size and digest of the credential file, as the container's shell says them.
const DIGEST: &str =
    "echo bytes=$(wc -c < \"$AGENT_HUB_TOKEN_FILE\") $(sha256sum \"$AGENT_HUB_TOKEN_FILE\" | cut -c1-12)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_on_a_remote_engine_gets_its_credential_and_the_hubs_executable() {
    require_docker!();
    let Some(endpoint) = remote_endpoint() else {
        return;
    };
    let toml = agent_toml(
        "far",
        &format!("docker_host = \"{endpoint}\"\nkeep_home = true\nremove_on_stop = true"),
    )
    .replace("network = \"none\"", "network = \"host\"");
    let (hub, _guard) = hub_with_agents_and(&toml, |c| {
        c.hub_binary = Some(crate::cli::BIN.into());
    })
    .await;
    let (status, v) = hub.post("/v1/agents/far/start", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let sid = v["agent"]["session_id"].as_str().unwrap().to_string();

    // The credential of this start, put through the engine where the environment says.
    // (Its digest: the hub redacts the credential itself from the screen.)
    let token = hub.talk(&sid, DIGEST).await;
    let token = token["output"].as_str().unwrap().trim().to_string();
    assert!(
        token.starts_with("bytes=") && !token.starts_with("bytes=0 "),
        "no credential: {token:?}"
    );
    assert_eq!(
        hub.talk(&sid, "cd /run/agent-hub-agent && stat -c '%n %U %a' *")
            .await["output"],
        "start-args root 644\nstart-args-when root 644\ntoken root 644\n",
    );
    // The hub's executable, from the volume of its build on that engine.
    let version = hub.talk(&sid, "agent-hub --version").await;
    assert!(
        version["output"]
            .as_str()
            .unwrap()
            .starts_with("agent-hub "),
        "{version}"
    );
    let (_, engines) = hub.get("/v1/engines").await;
    let engine = engines["engines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["agents_defined"] == json!(["far"]))
        .cloned()
        .unwrap();
    assert_eq!(engine["holds_this_build"], true, "{engine}");

    // A second start after a stop that removed the container: a new credential, put again.
    let (status, v) = hub.post("/v1/agents/far/stop", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = hub.post("/v1/agents/far/start", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let sid = v["agent"]["session_id"].as_str().unwrap().to_string();
    let again = hub.talk(&sid, DIGEST).await;
    let again = again["output"].as_str().unwrap().trim().to_string();
    assert!(
        again.starts_with("bytes=") && again != token,
        "{again:?} after {token:?}"
    );
    hub.post("/v1/agents/far/stop", json!({})).await;
}
