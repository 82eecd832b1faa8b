//! The hub's container image (docker/hub.Dockerfile), built offline by docker/build-hub.sh from
//! the binary under test, started with the host's Docker socket mounted: it answers `/health`
//! and starts an agent container on the host's engine.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::cli::BIN;
use crate::docker_support::{agent_toml, docker, unique_hub_id, ContainerGuard};
use crate::hub_process::free_port;
use crate::support::wait_until;

/// Removes the hub's container (and its data volume), even when the test failed.
struct HubContainer(String);

impl Drop for HubContainer {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", "-v", &self.0])
            .output();
    }
}

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let resp = http.get(url).send().await.expect("GET");
    resp.json().await.expect("JSON reply")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_image_serves_and_starts_an_agent_through_the_host_socket() {
    crate::require_docker!();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/docker/build-hub.sh");
    let tag = crate::images::image("HUB_TEST_IMAGE");
    let built = Command::new("bash")
        .args([script, "--bin", BIN, &tag])
        .output()
        .expect("run build-hub.sh");
    assert!(
        built.status.success(),
        "build-hub.sh failed:\n{}\n{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );

    let hub_id = unique_hub_id();
    let _agents = ContainerGuard(hub_id.clone());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hub.toml");
    std::fs::write(
        &config,
        format!("hub_id = \"{hub_id}\"\n{}", agent_toml("boxed", "")),
    )
    .unwrap();
    let port = free_port();
    let name = format!("agent-hub-image-test-{hub_id}");
    let socket_gid = docker(&[
        "run",
        "--rm",
        "--entrypoint",
        "stat",
        "-v",
        "/var/run/docker.sock:/var/run/docker.sock",
        &tag,
        "-c",
        "%g",
        "/var/run/docker.sock",
    ]);
    let _hub = HubContainer(name.clone());
    docker(&[
        "run",
        "-d",
        "--name",
        &name,
        // Only the host and none networks exist on CI engines: the hub listens on loopback.
        "--network",
        "host",
        "-v",
        "/var/run/docker.sock:/var/run/docker.sock",
        "--group-add",
        socket_gid.trim(),
        "-v",
        &format!("{}:/etc/agent-hub/hub.toml:ro", config.display()),
        "-e",
        "AGENT_HUB_CONFIG=/etc/agent-hub/hub.toml",
        "-e",
        &format!("AGENT_HUB_LISTEN=127.0.0.1:{port}"),
        &tag,
    ]);
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let health = wait_until(Duration::from_secs(20), || async {
        http.get(format!("{base}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    assert!(
        health,
        "the hub in its container did not answer /health; its log:\n{}",
        docker(&["logs", &name])
    );
    // The owner's token, as its owner would get it: from the data dir in the container.
    let token = docker(&["exec", &name, "agent-hub", "token", "show"]);
    let token = token.trim();
    assert!(token.starts_with("aho_"), "token show printed {token:?}");
    let http = crate::support::authed_http(token);
    let v = get_json(&http, &format!("{base}/health")).await;
    assert_eq!(v["hub_id"], hub_id.as_str(), "{v}");
    assert_eq!(v["agents"], 1, "{v}");

    let resp = http
        .post(format!("{base}/v1/agents/boxed/start"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(status, 200, "{v}\n{}", docker(&["logs", &name]));
    assert_eq!(v["agent"]["status"], "running", "{v}");
    // The agent runs on the host's engine, labelled as this hub's.
    let ids = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=agent-hub.hub={hub_id}"),
    ]);
    assert_eq!(ids.split_whitespace().count(), 1, "agent containers: {ids}");
    // Its terminal is live through the hub in the container.
    let sessions = get_json(&http, &format!("{base}/v1/pty/sessions")).await;
    assert!(sessions.to_string().contains("\"boxed\""), "{sessions}");
    // Its log is JSON and says what it serves.
    let log = Command::new("docker")
        .args(["logs", &name])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stderr);
    assert!(
        log.lines().any(|l| l.contains("\"restored_sessions\"")),
        "{log}"
    );
}
