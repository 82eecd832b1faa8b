//! What an agent's container is made of, against a real Docker engine (#40): an image rebuilt
//! under the same tag makes a stopped container again, and a running container made otherwise
//! than its definition makes it now is listed as outdated until a restart. (A changed `env`
//! making a stopped container again: `docker::a_changed_env_makes_the_container_again_...`.)

use std::process::Command;

use reqwest::Method;
use serde_json::{json, Value};

use crate::cli::BIN;
use crate::docker_support::{
    agent_toml, docker, hub_with_agents, test_image, unique_hub_id, ConfiguredHub,
};
use crate::hub_process::HubProcess;
use crate::require_docker;
use crate::support::{wait_until, TestHub};

/// An image name of the test's own (`agent-hub-test/<name>:latest`), naming the test image at
/// first; dropped, it removes the name and every image built under it, even when the test
/// failed. Declare it before the hub (its containers' guard): the containers go first.
struct OwnImage {
    name: String,
    built: Vec<String>,
}

impl OwnImage {
    fn new() -> Self {
        let name = format!("agent-hub-test/{}:latest", unique_hub_id());
        docker(&["tag", &test_image(), &name]);
        OwnImage {
            name,
            built: Vec::new(),
        }
    }

    /// Builds an image under the name again: the test image with one more label (offline:
    /// `FROM` an image the engine has). Returns its ID.
    fn rebuild(&mut self, label: &str) -> String {
        let dockerfile = format!(
            "FROM {}\nLABEL agent-hub-test.rebuilt=\"{label}\"\n",
            test_image()
        );
        let mut build = Command::new("docker")
            .args(["build", "-q", "-t", &self.name, "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("docker build");
        use std::io::Write;
        build
            .stdin
            .take()
            .unwrap()
            .write_all(dockerfile.as_bytes())
            .unwrap();
        let out = build.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "docker build: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = self.id();
        self.built.push(id.clone());
        id
    }

    /// The ID of the image the name names now.
    fn id(&self) -> String {
        docker(&["image", "inspect", "-f", "{{.Id}}", &self.name])
            .trim()
            .to_string()
    }
}

impl Drop for OwnImage {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rmi", "-f", &self.name])
            .output();
        for id in &self.built {
            let _ = Command::new("docker").args(["rmi", "-f", id]).output();
        }
    }
}

/// The ID of the image the container `id` was made from.
fn image_of(container: &str) -> String {
    docker(&["inspect", "-f", "{{.Image}}", container])
        .trim()
        .to_string()
}

/// Runs `script` in the container `id` with sh; returns its output.
fn sh(container: &str, script: &str) -> String {
    docker(&["exec", container, "sh", "-c", script])
}

async fn post(hub: &TestHub, path: &str) -> Value {
    let (status, v) = hub.post(path, json!({})).await;
    assert_eq!(status, 200, "{path}: {v}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_rebuilt_under_the_same_tag_makes_the_stopped_container_again() {
    require_docker!();
    let mut image = OwnImage::new();
    let repo = crate::workspace::user_repo();
    let ws = format!(
        "workspace = {{ repo = \"{}\", base = \"main\" }}",
        repo.path().display()
    );
    let toml = agent_toml("rb", &ws).replace(&test_image(), &image.name);
    let (hub, _guard) = hub_with_agents(&toml).await;

    let v = post(&hub, "/v1/agents/rb/start").await;
    assert_eq!(v["recreated"], false, "{v}");
    let first = v["agent"]["container_id"].as_str().unwrap().to_string();
    assert_eq!(image_of(&first), image.id());
    sh(
        &first,
        "echo home > \"$HOME/kept.txt\" && echo work > /workspace/work.txt",
    );
    post(&hub, "/v1/agents/rb/stop").await;

    // The same tag, another image: the start makes the container again from it.
    let rebuilt = image.rebuild("1");
    let v = post(&hub, "/v1/agents/rb/start").await;
    assert_eq!(
        (
            v["agent"]["status"].as_str(),
            v["recreated"].as_bool(),
            v["changed"].clone()
        ),
        (Some("running"), Some(true), json!(["image (rebuilt)"])),
        "{v}"
    );
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("container made again: its image was rebuilt"),
        "{message}"
    );
    let second = v["agent"]["container_id"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    assert_eq!(image_of(&second), rebuilt, "made from the rebuilt image");
    let label = docker(&[
        "inspect",
        "-f",
        "{{index .Config.Labels \"agent-hub-test.rebuilt\"}}",
        &second,
    ]);
    assert_eq!(label.trim(), "1");
    let kept = sh(&second, "cat \"$HOME/kept.txt\" /workspace/work.txt");
    assert_eq!(kept, "home\nwork\n", "the home and the workspace are kept");

    // Unchanged since: the next start keeps it.
    post(&hub, "/v1/agents/rb/stop").await;
    let v = post(&hub, "/v1/agents/rb/start").await;
    assert_eq!(
        (
            v["recreated"].as_bool(),
            v["agent"]["container_id"].as_str()
        ),
        (Some(false), Some(second.as_str())),
        "{v}"
    );
    post(&hub, "/v1/agents/rb/stop").await;
}

/// The agent `id` as `GET /v1/agents` lists it.
async fn listed(hub: &HubProcess, id: &str) -> Value {
    let v = hub.call(Method::GET, "/v1/agents", json!({})).await;
    let agents = v["agents"].as_array().cloned().unwrap_or_default();
    let found = agents.into_iter().find(|a| a["id"] == id);
    found.unwrap_or_else(|| panic!("{id} is not listed: {v}"))
}

/// `agent-hub agents [--json]` against `hub`: its output.
fn cli_agents(hub: &HubProcess, json: bool) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args(["agents", "--hub", &hub.base, "--token", &hub.owner_token]);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `hub.toml` changed and the hub restarted: its running agent is re-attached as it is, and
/// `GET /v1/agents` (and `/v1/agents/{id}`, and `agent-hub agents`) say that it is outdated,
/// what changed, until a restart applies the definition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_agent_of_a_changed_definition_is_listed_outdated_until_a_restart() {
    require_docker!();
    let hub_files = ConfiguredHub::new();
    let write_config = |greeting: &str| {
        hub_files.write_config(&agent_toml(
            "od",
            &format!("env = {{ GREETING = \"{greeting}\" }}"),
        ));
    };

    write_config("one");
    let mut hub = hub_files.spawn().await;
    let v = hub
        .call(Method::POST, "/v1/agents/od/start", json!({}))
        .await;
    assert_eq!(v["agent"]["status"], "running", "{v}");
    assert_eq!(
        (&v["agent"]["outdated"], &v["agent"]["changed"]),
        (&json!(false), &json!([]))
    );
    let first = v["agent"]["container_id"].as_str().unwrap().to_string();

    // The same hub.toml: re-attached, not outdated.
    hub.kill9();
    hub = hub_files.spawn().await;
    wait_running(&hub, "od").await;
    let a = listed(&hub, "od").await;
    assert_eq!(
        (&a["outdated"], &a["changed"]),
        (&json!(false), &json!([])),
        "{a}"
    );

    // Another env: the running container is kept, and listed as outdated.
    write_config("two");
    hub.kill9();
    hub = hub_files.spawn().await;
    wait_running(&hub, "od").await;
    let a = listed(&hub, "od").await;
    assert_eq!(a["container_id"], first.as_str(), "kept: {a}");
    assert_eq!(
        (&a["outdated"], &a["changed"]),
        (&json!(true), &json!(["env"])),
        "{a}"
    );
    let v = hub.call(Method::GET, "/v1/agents/od", json!({})).await;
    assert_eq!(
        (&v["agent"]["outdated"], &v["agent"]["changed"]),
        (&json!(true), &json!(["env"])),
        "{v}"
    );
    hub.log_line("its running container is kept, but its definition changed (env)")
        .await;
    let text = cli_agents(&hub, false);
    assert!(
        text.contains("  outdated: env changed; `agent-hub restart` applies its definition"),
        "{text}"
    );
    let listing: Value = serde_json::from_str(&cli_agents(&hub, true)).unwrap();
    assert_eq!(listing["agents"][0]["outdated"], true, "{listing}");
    assert_eq!(listing["agents"][0]["changed"], json!(["env"]), "{listing}");

    // A restart applies it.
    let v = hub
        .call(Method::POST, "/v1/agents/od/restart", json!({}))
        .await;
    assert_eq!(
        (v["recreated"].as_bool(), v["changed"].clone()),
        (Some(true), json!(["env"])),
        "{v}"
    );
    let a = listed(&hub, "od").await;
    assert_eq!(
        (&a["outdated"], &a["changed"]),
        (&json!(false), &json!([])),
        "{a}"
    );
    let second = a["container_id"].as_str().unwrap();
    assert_eq!(docker(&["exec", second, "printenv", "GREETING"]), "two\n");
    hub.call(Method::POST, "/v1/agents/od/stop", json!({}))
        .await;
}

/// Waits until the restarted hub has re-attached the agent `id`.
async fn wait_running(hub: &HubProcess, id: &str) {
    let up = wait_until(std::time::Duration::from_secs(30), || async {
        listed(hub, id).await["status"] == "running"
    })
    .await;
    assert!(up, "{id} was not re-attached: {}", listed(hub, id).await);
}
