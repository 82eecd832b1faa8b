//! A prompt queued while its agent is `limited` under `on_limit = "wait"` is kept: a hub killed
//! with SIGKILL and started again on the same data dir delivers it once the agent is at rest,
//! once. A real `agent-hub serve` process and a host tmux session, whose program shows a 429
//! (the generic limit rule) until the test lets it go on to a prompt that echoes what it reads.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::hub_process::{FreshHub, HubProcess};
use crate::policy_support::policies_dir;
use crate::support::wait_until;

const T: Duration = Duration::from_secs(20);

async fn state(hub: &HubProcess, id: &str) -> Value {
    let path = format!("/v1/pty/sessions/{id}/state");
    hub.call(Method::GET, &path, json!({})).await
}

async fn output(hub: &HubProcess, id: &str) -> String {
    let path = format!("/v1/pty/sessions/{id}/read?since=0&max_bytes=1000000&timeout_ms=0");
    let v = hub.call(Method::GET, &path, json!({})).await;
    v["output"].as_str().unwrap_or("").to_string()
}

#[tokio::test]
async fn a_prompt_queued_while_limited_survives_a_hub_sigkill() {
    let policies = policies_dir();
    let wait = "on_limit = \"wait\"\nlimit_retry_s = 600\n";
    std::fs::write(policies.path().join("wait.toml"), wait).unwrap();
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("hub.toml");
    let text = format!("policies_dir = '{}'\n", policies.path().display());
    std::fs::write(&config, text).unwrap();
    let config_arg = config.display().to_string();
    let mut fresh = FreshHub::start("limitq", &["--config", &config_arg], &[]).await;
    let gate = files.path().join("go-on");
    let script = format!(
        "echo 'API Error: 429 rate limit exceeded'; \
         while [ ! -e {gate} ]; do sleep 0.2; done; clear; \
         while true; do printf '$ '; read line; echo \"got: $line\"; done",
        gate = gate.display()
    );
    let created = fresh
        .hub
        .call(
            Method::POST,
            "/v1/pty/sessions",
            json!({"backend": "tmux", "shell": "/bin/sh", "args": ["-c", script],
                   "cli_type": "shell", "policy": "wait"}),
        )
        .await;
    let id = created["session_id"]
        .as_str()
        .expect("a session")
        .to_string();
    let limited = wait_until(T, || async {
        state(&fresh.hub, &id).await["state"] == "limited"
    });
    assert!(limited.await, "{}", state(&fresh.hub, &id).await);
    let line = "hello after the limit";
    let path = format!("/v1/pty/sessions/{id}/send_line");
    let sent = fresh
        .hub
        .call(Method::POST, &path, json!({"data": line, "submit": true}))
        .await;
    assert_eq!(sent["receipt"], "queued", "{sent}");

    fresh.hub.kill9();
    fresh.respawn().await;
    let back = wait_until(T, || async { state(&fresh.hub, &id).await["ok"] == true }).await;
    assert!(back, "{}", state(&fresh.hub, &id).await);
    std::fs::write(&gate, "").unwrap();
    let got = format!("got: {line}");
    let delivered = wait_until(T, || async { output(&fresh.hub, &id).await.contains(&got) });
    assert!(delivered.await, "{}", output(&fresh.hub, &id).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(output(&fresh.hub, &id).await.matches(&got).count(), 1);
}
