//! A container agent running the real Claude Code (the npm-installed CLI, mounted into the
//! offline test image; the shipped `docker/agent.Dockerfile` installs it with
//! `--build-arg CLAUDE_CODE_VERSION=...`), against the model stand-in on the host's loopback
//! (`network = "host"`): it answers a prompt, goes idle, and its idle policy stops the
//! container on time.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;

use crate::docker_support::{test_image, unique_hub_id, ContainerGuard};
use crate::model_standin::{ModelStandIn, INSTANT};
use crate::policy_support::{assert_stopped_on_time, hub_with_policies, policies_dir};
use crate::real_cli::{claude_env, cli, write_claude_config};
use crate::require_docker;
use crate::support::wait_until;

/// Starts the hub's Docker sync loop, then the agent `id`; its session id and session.
pub async fn start_synced(
    hub: &crate::support::TestHub,
    id: &str,
) -> (String, std::sync::Arc<agent_hub::session::Session>) {
    hub.hub
        .agent_sync()
        .start(hub.hub.tracker(), hub.hub.closing());
    let (status, v) = hub.post(&format!("/v1/agents/{id}/start"), json!({})).await;
    assert_eq!(status, 200, "{v}");
    let sid = v["agent"]["session_id"].as_str().unwrap().to_string();
    let session = hub.hub.get(&sid).unwrap();
    (sid, session)
}

/// Makes `dir` and everything in it writable by the container's user.
pub fn open_up(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.path().is_dir() {
            open_up(&entry.path());
        }
        let mode = if entry.path().is_dir() { 0o777 } else { 0o666 };
        std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
}

/// A JSON object of strings as the inside of a TOML inline table (`K = "v", ...`).
pub fn toml_table(env: &serde_json::Value) -> String {
    let pairs: Vec<String> = env
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    pairs.join(", ")
}

/// An `[[agents]]` entry `cc` of the hub `hub_id` running the mounted Claude Code against
/// `standin` on the host's network, its config dir `files/claude` at `/cfg`; `more_mounts`
/// (`, "a:b"`) and `extra` lines added.
pub fn claude_agent(
    hub_id: &str,
    files: &std::path::Path,
    standin: &ModelStandIn,
    more_mounts: &str,
    extra: &str,
) -> String {
    let modules = format!(
        "{}/tests/agent-clis/node_modules",
        env!("CARGO_MANIFEST_DIR")
    );
    let env = toml_table(&claude_env(standin, "/cfg"));
    format!(
        "hub_id = \"{hub_id}\"\n[[agents]]\nid = \"cc\"\nimage = \"{image}\"\n\
         command = [\"/clis/.bin/claude\"]\n\
         mounts = [\"{modules}:/clis:ro\", \"{files}/claude:/cfg\"{more_mounts}]\n\
         network = \"host\"\nenv = {{ {env} }}\ncli_type = \"claude\"\n\
         ready_pattern = '\\? for shortcuts'\nready_timeout = 60\nstop_grace = 2\ncols = 100\nrows = 30\n{extra}",
        image = test_image(),
        files = files.display(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_in_a_container_answers_goes_idle_and_its_policy_stops_it() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let standin = ModelStandIn::start().await;
    let files = tempfile::tempdir().unwrap();
    write_claude_config(&files.path().join("claude"), "/work", false);
    std::fs::create_dir_all(files.path().join("work")).unwrap();
    open_up(files.path());
    let hub_id = unique_hub_id();
    let _guard = ContainerGuard(hub_id.clone());
    let work = format!(", \"{}/work:/work\"", files.path().display());
    let extra = "workdir = \"/work\"\npolicy = \"fast-idle\"\n";
    let agent = claude_agent(&hub_id, files.path(), &standin, &work, extra);
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, &agent).await;
    let (_, session) = start_synced(&hub, "cc").await;
    let events = hub.hub.subscribe_events();

    // A prompt, answered through the stand-in; then idle at the prompt.
    let (status, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": "cc", "data": "hello from the hub"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let answered = wait_until(Duration::from_secs(30), || async {
        session.with_screen(|s| s.text()).contains(INSTANT)
    })
    .await;
    assert!(answered, "{}", session.with_screen(|s| s.text()));
    let idle = wait_until(Duration::from_secs(10), || async {
        session.state_report().state == agent_hub::agent_state::State::Idle
    })
    .await;
    assert!(idle, "{:?}", session.state_report());

    // The idle policy stops the container 3 s after the last activity.
    assert_stopped_on_time(&hub, session, events).await;
    let stopped = wait_until(Duration::from_secs(15), || async {
        hub.get("/v1/agents/cc").await.1["agent"]["status"] == "stopped"
    })
    .await;
    assert!(stopped, "{}", hub.get("/v1/agents/cc").await.1);
}
