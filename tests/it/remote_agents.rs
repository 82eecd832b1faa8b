//! Agents on an engine whose files the hub cannot see (the test rig's second engine,
//! `AGENT_HUB_REMOTE_ENGINE`, see docs/testing.md): everything the hub
//! gives the container goes through the engine (its credential, the arguments of a start, the
//! hub's executable from a volume of the hub's build), and works there as on the local engine.

use serde_json::json;

use crate::docker_support::{agent_toml, hub_with_agents_and, remote_engine};
use crate::require_docker;

/// The size and digest of the credential file, as the container's shell says them.
const DIGEST: &str =
    "echo bytes=$(wc -c < \"$AGENT_HUB_TOKEN_FILE\") $(sha256sum \"$AGENT_HUB_TOKEN_FILE\" | cut -c1-12)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_on_a_remote_engine_gets_its_credential_and_the_hubs_executable() {
    require_docker!();
    let Some(rig) = remote_engine() else {
        return;
    };
    let endpoint = &rig.endpoint;
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
    the_dashboard_shows_the_engine(&hub, endpoint).await;

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

/// The dashboard's engines panel shows the remote engine: healthy, its capacity, the agent on
/// it and that it holds this hub's build (headless Chromium).
async fn the_dashboard_shows_the_engine(hub: &crate::support::TestHub, endpoint: &str) {
    let Some(b) = crate::browser_support::Browser::start().await else {
        return;
    };
    b.sign_in(&hub.base, &hub.owner_token).await;
    crate::dashboard::open_fleet(&b, hub).await;
    let row = format!("document.querySelector('tr[data-engine=\"{endpoint}\"]')");
    let text = b
        .wait_js(
            "the remote engine's row with its agent and this hub's build",
            &format!(
                "const r = {row}; const t = r?.textContent || ''; \
                 return r?.querySelector('span.engine-agent[data-agent=\"far\"]') \
                 && t.includes('ok · docker') && t.includes('CPUs') && t.includes(' ✓') && t"
            ),
            crate::dashboard::T,
        )
        .await;
    assert!(text.as_str().unwrap().contains("GiB"), "{text}");
}
