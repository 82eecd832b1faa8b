//! Agents on the test rig's remote engine (`tests/rig/remote-engine.sh`): a `dockerd` the hub
//! reaches only over TCP and whose files it cannot see, nor the engine the hub's. The hub never
//! touches the engine's files (its file system calls, traced); the engine sees none of the
//! hub's; and an outage of the real engine (its dockerd stopped with SIGSTOP) makes its agents
//! unreachable until it answers, losing nothing silently.

use reqwest::Method;
use serde_json::{json, Value};

use crate::docker::ride_out_an_outage;
use crate::docker_support::{
    agent_toml, docker_required, remote_engine, remote_engine_to_freeze, test_image, ConfiguredHub,
};
use crate::hub_process::HubProcess;
use crate::require_docker;

const STRACE: &str = "/usr/bin/strace";

/// The directories Docker makes in a data root: none may be seen from the hub's side.
const ENGINE_DIRS: [&str; 6] = [
    "containers",
    "volumes",
    "image",
    "overlay2",
    "containerd",
    "network",
];

async fn process_agent(hub: &HubProcess, id: &str) -> Value {
    hub.call(Method::GET, &format!("/v1/agents/{id}"), json!({}))
        .await["agent"]
        .clone()
}

/// Starts `id` on the hub process and checks a line's output comes back from its terminal.
async fn start_and_echo(hub: &HubProcess, id: &str, word: &str) {
    let (status, v) = hub
        .call_status(Method::POST, &format!("/v1/agents/{id}/start"), json!({}))
        .await;
    assert_eq!(status, 200, "start {id}: {v}");
    let sid = v["agent"]["session_id"].as_str().unwrap().to_string();
    let out = hub.talk(&sid, &format!("echo {word}-$((6*7))")).await;
    assert!(
        out["output"]
            .as_str()
            .is_some_and(|o| o.contains(&format!("{word}-42"))),
        "{out}"
    );
}

/// The hub runs under strace (every file system call of every thread and child) while a plain
/// shell agent on the remote engine is started, answers a line, is stopped and started again:
/// no call names a path under the engine's data root, while the hub's own data dir is there
/// (so the check can fail). From here the data root is an empty directory, and the engine,
/// given the hub's data dir as a bind mount, sees nothing in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_never_touches_the_remote_engines_files_nor_it_the_hubs() {
    require_docker!();
    let Some(rig) = remote_engine() else { return };
    if !std::path::Path::new(STRACE).exists() {
        assert!(
            !docker_required(),
            "{STRACE} is missing (apt-get install strace)"
        );
        eprintln!("SKIPPED: {STRACE} is missing");
        return;
    }
    assert!(rig.images().contains(&test_image()), "{:?}", rig.images());
    let files = ConfiguredHub::new();
    let port = files.base.rsplit(':').next().unwrap().to_string();
    files.write_config(&agent_toml(
        "far",
        &format!(
            "docker_host = \"{}\"\nhub_url = \"http://127.0.0.1:{port}\"\ncli_type = \"shell\"",
            rig.endpoint
        ),
    ));
    let trace = tempfile::NamedTempFile::new().unwrap();
    let trace_path = trace.path().to_str().unwrap().to_string();
    let config = files.config.to_str().unwrap().to_string();
    let mut hub = HubProcess::spawn_under(
        &[
            STRACE,
            "-f",
            "-qq",
            "--seccomp-bpf",
            "-e",
            "trace=%file",
            "-o",
            &trace_path,
        ],
        &["--config", &config],
        &files.base,
        &[],
    )
    .await;

    start_and_echo(&hub, "far", "first").await;
    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/far/stop", json!({}))
        .await;
    assert_eq!(status, 200, "stop: {v}");
    assert_ne!(process_agent(&hub, "far").await["status"], "running");
    start_and_echo(&hub, "far", "again").await;
    assert_eq!(
        process_agent(&hub, "far").await["docker_host"],
        rig.endpoint.as_str()
    );
    hub.terminate();

    let traced = std::fs::read_to_string(trace.path()).unwrap();
    let data_root = rig.data_root.to_str().unwrap();
    let touched: Vec<&str> = traced
        .lines()
        .filter(|l| l.contains(data_root))
        .take(10)
        .collect();
    assert!(
        touched.is_empty(),
        "the hub touched the engine's data root {data_root}:\n{}",
        touched.join("\n")
    );
    let own = files.data.to_str().unwrap();
    let calls = traced.lines().filter(|l| l.contains(own)).count();
    assert!(
        calls > 0,
        "the trace ({} lines) shows no call on the hub's own data dir {own}: it traced nothing",
        traced.lines().count()
    );
    println!(
        "{} file system calls traced, {calls} on the hub's data dir, none on {data_root}",
        traced.lines().count()
    );

    // From the hub's side the data root holds nothing of the engine's.
    let seen: Vec<String> = std::fs::read_dir(&rig.data_root)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !seen.iter().any(|e| ENGINE_DIRS.contains(&e.as_str())),
        "{data_root} shows the engine's files here: {seen:?}"
    );
    // And from the engine's side the hub's data dir holds nothing: mounted, it is empty.
    std::fs::write(files.data.join("visible-to-the-engine"), "no").unwrap();
    let mount = format!("{own}:/seen:ro");
    let listed = rig.docker(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "ls",
        "-v",
        &mount,
        &test_image(),
        "-A",
        "/seen",
    ]);
    assert_eq!(listed.trim(), "", "the engine sees the hub's data dir");
}

/// The remote engine stops answering for 15 s (its dockerd stopped with SIGSTOP: connections
/// are taken, nothing is answered, its containers run on) while two agents run on it: they
/// read `unreachable` within 10 s; a line sent meanwhile waits and arrives, or is refused with a
/// code and never runs; when it answers again they are re-attached (see
/// [`crate::docker::ride_out_an_outage`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_engine_that_goes_quiet_makes_its_agents_unreachable_until_it_answers() {
    require_docker!();
    let Some(rig) = remote_engine_to_freeze() else {
        return;
    };
    ride_out_an_outage(&rig.endpoint, || rig.freeze()).await;
}
