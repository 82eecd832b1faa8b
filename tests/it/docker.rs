//! Container agents against a real Docker engine: lifecycle, terminal operations inside the
//! container, activity, outside changes, hub restarts, leaks, bad input, several endpoints.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::docker_support::{
    agent_toml, docker, docker_tcp, hub_with_agents, pane_pipe_processes, tmux_client_processes,
    tmux_clients, EngineProxy, PIPE_PROCESSES,
};
use crate::hub_process::{free_port, HubProcess};
use crate::require_docker;
use crate::stream::{connect, Tally};
use crate::support::{wait_until, TestHub, OWNER_FIELDS};

const T: Duration = Duration::from_secs(20);

pub async fn start(hub: &TestHub, id: &str) -> Value {
    let (status, v) = hub.post(&format!("/v1/agents/{id}/start"), json!({})).await;
    assert_eq!(status, 200, "start {id}: {v}");
    v["agent"].clone()
}

pub async fn agent(hub: &TestHub, id: &str) -> Value {
    let (status, v) = hub.get(&format!("/v1/agents/{id}")).await;
    assert_eq!(status, 200, "{v}");
    v["agent"].clone()
}

async fn wait_status(hub: &TestHub, id: &str, status: &str, within: Duration) -> Value {
    let ok = wait_until(within, || async {
        agent(hub, id).await["status"] == status
    })
    .await;
    let a = agent(hub, id).await;
    assert!(ok, "agent {id} not {status} within {within:?}: {a}");
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_lifecycle_with_terminal_operations_inside_the_container() {
    require_docker!();
    let (hub, _guard) = hub_with_agents(&agent_toml(
        "w1",
        "label = \"Worker One\"\nowner_role = \"worker\"\ncols = 100\nrows = 25",
    ))
    .await;
    assert_eq!(agent(&hub, "w1").await["status"], "stopped");

    let a = start(&hub, "w1").await;
    assert_eq!(a["status"], "running", "{a}");
    assert_eq!(a["pty_attached"], true);
    let sid = a["session_id"].as_str().unwrap().to_string();
    let container = a["container_id"].as_str().unwrap().to_string();
    let session = hub.session(&sid).await;
    assert_eq!(
        (session["source"].as_str(), session["backend"].as_str()),
        (Some("docker"), Some("docker"))
    );
    assert_eq!(
        (
            session["label"].as_str(),
            session["owner_role"].as_str(),
            session["agent_id"].as_str()
        ),
        (Some("Worker One"), Some("worker"), Some("w1"))
    );
    let labels = docker(&[
        "inspect",
        "-f",
        "{{json .Config.Labels}} {{.HostConfig.Init}}",
        &container,
    ]);
    assert!(
        labels.contains("\"agent-hub.managed\":\"true\"")
            && labels.contains("\"agent-hub.agent\":\"w1\"")
            && labels.contains("agent-hub.hub")
            && labels.trim_end().ends_with("true"),
        "{labels}"
    );

    // talk, send_line, keys and resize work exactly as on host sessions.
    let v = hub.talk(&sid, "echo in-$(id -un); (exit 4)").await;
    assert_eq!(
        (v["output"].as_str(), v["exit_code"].as_i64()),
        (Some("in-agent\n"), Some(4)),
        "{v}"
    );
    assert_eq!(hub.talk(&sid, "stty size").await["output"], "25 100\n");
    hub.post(
        &format!("/v1/pty/sessions/{sid}/resize"),
        json!({"cols": 81, "rows": 19}),
    )
    .await;
    assert_eq!(hub.talk(&sid, "stty size").await["output"], "19 81\n");
    hub.post(
        &format!("/v1/pty/sessions/{sid}/send_line"),
        json!({"data": "sleep 50"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    hub.post(
        &format!("/v1/pty/sessions/{sid}/keys"),
        json!({"keys": ["C-c"]}),
    )
    .await;
    assert_eq!(
        hub.talk(&sid, "echo after-ctrl-c").await["output"],
        "after-ctrl-c\n"
    );
    assert_eq!(
        tmux_clients(&container),
        1,
        "exactly one control client while running"
    );

    // Starting a running agent is a no-op that says so.
    let (_, v) = hub.post("/v1/agents/w1/start", json!({})).await;
    assert_eq!(
        (
            v["already_running"].as_bool(),
            v["agent"]["session_id"].as_str()
        ),
        (Some(true), Some(sid.as_str()))
    );

    // Stop: clean detach (no tmux client left), container stopped.
    let (status, v) = hub.post("/v1/agents/w1/stop", json!({})).await;
    assert_eq!(
        (status, v["agent"]["status"].as_str()),
        (200, Some("stopped")),
        "{v}"
    );
    assert_eq!(
        docker(&["inspect", "-f", "{{.State.Running}}", &container]).trim(),
        "false"
    );
    assert!(wait_until(T, || async { hub.session(&sid).await["alive"] == false }).await);

    // Restart from stopped reuses the container, with a fresh session.
    let a = start(&hub, "w1").await;
    assert_eq!(a["container_id"].as_str(), Some(container.as_str()));
    let sid2 = a["session_id"].as_str().unwrap().to_string();
    assert_ne!(sid2, sid);
    assert_eq!(hub.talk(&sid2, "echo again").await["output"], "again\n");
    let (status, v) = hub.post("/v1/agents/w1/restart", json!({})).await;
    assert_eq!(
        (status, v["agent"]["status"].as_str()),
        (200, Some("running")),
        "{v}"
    );
    let sid3 = v["agent"]["session_id"].as_str().unwrap().to_string();
    assert_eq!(
        hub.talk(&sid3, "echo restarted").await["output"],
        "restarted\n"
    );
    assert_eq!(tmux_clients(&container), 1);
    hub.post("/v1/agents/w1/stop", json!({})).await;
}

/// A container agent floods its pane (10 MB) with a fast and a slow WebSocket viewer attached:
/// the flood ends in time (no viewer throttles the pane), and each viewer gets to the end,
/// every byte received or reported dropped. A lost wake-up, a full channel or a stuck reader
/// anywhere on the container's output path would leave a viewer short (#12 item 9).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_flood_reaches_fast_and_slow_viewers_to_the_last_byte() {
    require_docker!();
    let (hub, _guard) = hub_with_agents(&agent_toml("flood", "")).await;
    let sid = start(&hub, "flood").await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let from = hub.session(&sid).await["output_offset"].as_u64().unwrap();
    let fast = Tally::follow(connect(&hub, &sid, Some(from)).await.0, Duration::ZERO);
    let slow = Tally::follow(
        connect(&hub, &sid, Some(from)).await.0,
        Duration::from_millis(20),
    );
    let total: u64 = 10_000_000;
    let began = Instant::now();
    let v = hub
        .talk(
            &sid,
            &format!("head -c {total} /dev/zero | tr '\\0' x; echo; echo FLOOD_DONE"),
        )
        .await;
    assert_eq!(v["exit_code"], 0, "{}", v["error_code"]);
    assert!(
        began.elapsed() < Duration::from_secs(90),
        "flood took {:?}",
        began.elapsed()
    );
    let end = hub.session(&sid).await["output_offset"].as_u64().unwrap();
    assert!(end - from > total, "{} bytes", end - from);
    fast.assert_accounts_for(end - from, Duration::from_secs(30))
        .await;
    slow.assert_accounts_for(end - from, Duration::from_secs(60))
        .await;
    let (_, slow_dropped) = slow.seen();
    println!(
        "container flood: {} bytes in {:?}; fast viewer {:?}, slow viewer dropped {slow_dropped}",
        end - from,
        began.elapsed(),
        fast.seen()
    );
    hub.post("/v1/agents/flood/stop", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_activity_moves_while_the_agent_prints_and_stays_while_it_waits() {
    require_docker!();
    let (hub, _guard) = hub_with_agents(&agent_toml("act", "")).await;
    let sid = start(&hub, "act").await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let activity = || async {
        hub.session(&sid).await["last_output_at"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    hub.post(
        &format!("/v1/pty/sessions/{sid}/send_line"),
        json!({"data": "for i in 1 2 3 4; do echo tick$i; sleep 0.4; done"}),
    )
    .await;
    let mut seen = std::collections::BTreeSet::new();
    let began = Instant::now();
    while began.elapsed() < Duration::from_millis(1600) {
        seen.insert(activity().await);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(
        seen.len() >= 3,
        "activity should move while printing: {seen:?}"
    );
    hub.wait_output(&sid, "tick4", T).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = activity().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        activity().await,
        idle,
        "no output while waiting at the prompt"
    );
    hub.post("/v1/agents/act/stop", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_made_outside_the_hub_are_seen_within_a_second() {
    require_docker!();
    let (hub, _guard) = hub_with_agents(&agent_toml("ext", "")).await;
    let container = start(&hub, "ext").await["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    docker(&["stop", "-t", "1", &container]);
    let stopped_at = Instant::now();
    let a = wait_status(&hub, "ext", "exited", Duration::from_secs(1)).await;
    assert!(stopped_at.elapsed() <= Duration::from_secs(1));
    assert_eq!(a["pty_attached"], false);
    // Started behind the hub's back: re-attached.
    docker(&["start", &container]);
    let a = wait_status(&hub, "ext", "running", T).await;
    assert_eq!(a["pty_attached"], true, "{a}");
    let sid = a["session_id"].as_str().unwrap().to_string();
    assert_eq!(
        hub.talk(&sid, "echo reattached").await["output"],
        "reattached\n"
    );
    docker(&["kill", &container]);
    wait_status(&hub, "ext", "exited", Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_stop_and_attach_cycles_leak_nothing() {
    require_docker!();
    let (hub, guard) = hub_with_agents(&agent_toml("cyc", "remove_on_stop = true")).await;
    let containers = || {
        docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=agent-hub.hub={}", guard.0),
        ])
        .lines()
        .count()
    };
    for i in 0..20 {
        let a = start(&hub, "cyc").await;
        let container = a["container_id"].as_str().unwrap().to_string();
        assert_eq!(tmux_client_processes(&container), 1, "cycle {i}");
        assert_eq!(
            pane_pipe_processes(&container),
            PIPE_PROCESSES,
            "cycle {i}: the pane pipe"
        );
        let (status, v) = hub.post("/v1/agents/cyc/stop", json!({})).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(containers(), 0, "cycle {i}: container left behind");
    }
    // 20 viewers attach and detach: still one tmux client and one exec in the container.
    let a = start(&hub, "cyc").await;
    let (sid, container) = (
        a["session_id"].as_str().unwrap().to_string(),
        a["container_id"].as_str().unwrap().to_string(),
    );
    for _ in 0..20 {
        let mut ws = hub
            .connect_ws(&format!("/v1/pty/sessions/{sid}/stream"))
            .await;
        use futures_util::StreamExt;
        let _ = ws.next().await;
        ws.close(None).await.unwrap();
    }
    assert_eq!(tmux_client_processes(&container), 1);
    assert_eq!(tmux_clients(&container), 1);
    assert_eq!(pane_pipe_processes(&container), PIPE_PROCESSES);
    hub.post("/v1/agents/cyc/stop", json!({})).await;
    assert_eq!(containers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_images_failing_containers_and_unreachable_engines_give_clear_errors() {
    require_docker!();
    let mut proxy = EngineProxy::start().await;
    let toml = [
        agent_toml("noimg", "").replace(
            &crate::docker_support::test_image(),
            "agent-hub/no-such-image:1",
        ),
        agent_toml("quits", "").replace("[\"bash\", \"--norc\", \"--noprofile\"]", "[\"false\"]"),
        agent_toml("plain", "start_tmux = \"image\"").replace(
            "command = [\"bash\", \"--norc\", \"--noprofile\"]",
            "command = []",
        ),
        agent_toml("far", "docker_host = \"tcp://127.0.0.1:1\""),
        agent_toml("proxied", &format!("docker_host = \"{}\"", proxy.url)),
        agent_toml("local", ""),
    ]
    .concat();
    let (hub, _guard) = hub_with_agents(&toml).await;

    let (status, v) = hub.post("/v1/agents/noimg/start", json!({})).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (500, Some("AGENT_START_FAILED")),
        "{v}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("agent-hub/no-such-image:1"),
        "{v}"
    );
    assert_eq!(agent(&hub, "noimg").await["status"], "failed");

    let (status, v) = hub.post("/v1/agents/quits/start", json!({})).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (500, Some("AGENT_START_FAILED")),
        "{v}"
    );
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("exited"), "{v}");

    let (status, v) = hub.post("/v1/agents/far/start", json!({})).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (503, Some("DOCKER_UNAVAILABLE")),
        "{v}"
    );
    assert_eq!(v["endpoint"], "tcp://127.0.0.1:1");

    let (status, v) = hub.post("/v1/agents/nobody/start", json!({})).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (404, Some("AGENT_NOT_FOUND")),
        "{v}"
    );

    // An engine that vanishes mid-stream: the agent behind it is affected, the others not.
    let proxied = start(&hub, "proxied").await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let local = start(&hub, "local").await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    proxy.cut();
    assert!(
        wait_until(T, || async {
            hub.session(&proxied).await["alive"] == false
        })
        .await,
        "the cut stream must end the session"
    );
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{proxied}/send_line"),
            json!({"data": "x"}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("PTY_PROCESS_EXITED")),
        "{v}"
    );
    let (status, v) = hub.post("/v1/agents/proxied/stop", json!({})).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (503, Some("DOCKER_UNAVAILABLE")),
        "{v}"
    );
    assert_eq!(
        hub.talk(&local, "echo unaffected").await["output"],
        "unaffected\n"
    );
    // Host sessions keep working too.
    let host = hub.create("pty").await;
    assert_eq!(hub.talk(&host, "echo host-ok").await["output"], "host-ok\n");
    hub.post("/v1/agents/local/stop", json!({})).await;
    // Clean up the proxied agent's container directly (its engine path is cut).
    docker(&["rm", "-f", &format!("agent-hub-{}-proxied", _guard.0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_on_several_endpoints_are_independent() {
    require_docker!();
    let Some(tcp) = docker_tcp() else { return };
    let toml = [
        agent_toml("on-unix", "docker_host = \"unix:///var/run/docker.sock\""),
        agent_toml("on-tcp", &format!("docker_host = \"{tcp}\"")),
    ]
    .concat();
    let (hub, _guard) = hub_with_agents(&toml).await;
    let a = start(&hub, "on-unix").await;
    let b = start(&hub, "on-tcp").await;
    assert_eq!(b["docker_host"], tcp.as_str());
    for x in [&a, &b] {
        let sid = x["session_id"].as_str().unwrap();
        assert_eq!(
            hub.talk(sid, "echo $AGENT_HUB_AGENT_ID").await["output"],
            format!("{}\n", x["id"].as_str().unwrap())
        );
    }
    // An outside stop on one endpoint is seen through that endpoint's event stream.
    docker(&["stop", "-t", "1", b["container_id"].as_str().unwrap()]);
    wait_status(&hub, "on-tcp", "exited", Duration::from_secs(1)).await;
    assert_eq!(agent(&hub, "on-unix").await["status"], "running");
    hub.post("/v1/agents/on-unix/stop", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_without_tmux_startup_gets_its_session_from_the_hub() {
    require_docker!();
    let (hub, _guard) = hub_with_agents(&agent_toml("byo", "start_tmux = \"hub\"")).await;
    let a = start(&hub, "byo").await;
    let sid = a["session_id"].as_str().unwrap();
    assert_eq!(
        hub.talk(sid, "echo byo-$(tmux show -gv history-limit)")
            .await["output"],
        "byo-50000\n"
    );
    let (status, v) = hub.post("/v1/agents/byo/stop", json!({})).await;
    assert_eq!(
        (status, v["agent"]["status"].as_str()),
        (200, Some("stopped")),
        "{v}"
    );
}

/// An ordinary image (tmux and bash, its own entrypoint, no agent-hub label) works with the
/// default `start_tmux = "auto"`: the hub sees no label and starts tmux itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_image_works_with_the_default_start_tmux() {
    require_docker!();
    let tag = format!("agent-hub/plain-image:t{}", std::process::id());
    let dockerfile = format!(
        "FROM {}\nLABEL io.agent-hub.starts-tmux=\"\"\nENTRYPOINT []\nCMD [\"bash\"]\n",
        crate::docker_support::test_image()
    );
    let mut build = std::process::Command::new("docker")
        .args(["build", "-q", "-t", &tag, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("docker build");
    use std::io::Write;
    build
        .stdin
        .take()
        .unwrap()
        .write_all(dockerfile.as_bytes())
        .unwrap();
    assert!(build.wait().unwrap().success(), "docker build of {tag}");
    let toml = agent_toml("ordinary", "")
        .replace(&crate::docker_support::test_image(), &tag)
        .replace("[\"bash\", \"--norc\", \"--noprofile\"]", "[\"bash\"]");
    let (hub, _guard) = hub_with_agents(&toml).await;
    let a = start(&hub, "ordinary").await;
    let sid = a["session_id"].as_str().unwrap();
    assert_eq!(
        hub.talk(sid, "echo ordinary-$((6*7))").await["output"],
        "ordinary-42\n"
    );
    let (status, v) = hub.post("/v1/agents/ordinary/stop", json!({})).await;
    assert_eq!(
        (status, v["agent"]["status"].as_str()),
        (200, Some("stopped")),
        "{v}"
    );
    drop(hub);
    let _ = std::process::Command::new("docker")
        .args(["rmi", "-f", &tag])
        .output();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_killed_with_sigkill_brings_back_5_agents_and_3_tmux_sessions_with_their_owners() {
    require_docker!();
    let dir = tempfile::tempdir().unwrap();
    let hub_id = crate::docker_support::unique_hub_id();
    let _guard = crate::docker_support::ContainerGuard(hub_id.clone());
    let socket = format!("ah-{hub_id}");
    let _tmux = crate::support::TmuxServerGuard(socket.clone());
    let port = free_port();
    let config = dir.path().join("hub.toml");
    let agents: Vec<String> = (1..=5).map(|n| format!("keep{n}")).collect();
    let mut toml = format!(
        "listen = \"127.0.0.1:{port}\"\ndata_dir = \"{}\"\nhub_id = \"{hub_id}\"\ntmux_socket = \"{socket}\"\n",
        dir.path().join("data").display(),
    );
    for id in &agents {
        toml.push_str(&agent_toml(id, ""));
    }
    std::fs::write(&config, toml).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let mut hub = HubProcess::spawn_config(&config, &base).await;
    let post = reqwest::Method::POST;
    // (session id, container id or none, marker)
    let mut terminals: Vec<(String, Option<String>, String)> = Vec::new();
    for id in &agents {
        let v = hub
            .call(post.clone(), &format!("/v1/agents/{id}/start"), json!({}))
            .await;
        assert_eq!(v["agent"]["status"], "running", "{v}");
        let sid = v["agent"]["session_id"].as_str().unwrap().to_string();
        let container = v["agent"]["container_id"].as_str().unwrap().to_string();
        terminals.push((sid, Some(container), format!("before-crash-{id}")));
    }
    for n in 1..=3 {
        let v = hub
            .call(
                post.clone(),
                "/v1/pty/sessions",
                json!({"backend": "tmux", "shell": "bash", "args": ["--norc"], "owner_agent_id": format!("host-{n}")}),
            )
            .await;
        let sid = v["session_id"].as_str().expect("tmux session").to_string();
        terminals.push((sid, None, format!("before-crash-host-{n}")));
    }
    // Owner identity set at run time, on every terminal, and some output.
    for (n, (sid, _, marker)) in terminals.iter().enumerate() {
        let v = hub
            .call(
                post.clone(),
                "/v1/pty/update-ownership",
                json!({"session_id": sid, "owner_session_id": "leader-1", "owner_role": "worker", "label": format!("Worker {n}")}),
            )
            .await;
        assert_eq!(v["ok"], true, "{v}");
        hub.call(
            post.clone(),
            &format!("/v1/pty/sessions/{sid}/send_line"),
            json!({"data": format!("echo {marker}")}),
        )
        .await;
    }
    let before = hub
        .call(reqwest::Method::GET, "/v1/pty/sessions", json!({}))
        .await["sessions"]
        .clone();
    let registry = dir.path().join("data").join("registry.json");
    let saved = wait_until(T, || async {
        std::fs::read_to_string(&registry).is_ok_and(|t| t.matches("leader-1").count() == 8)
    })
    .await;
    assert!(saved, "the registry did not record every owner");
    hub.kill9();
    // Output produced while the hub is down.
    for (sid, container, _) in &terminals {
        match container {
            Some(c) => {
                docker(&[
                    "exec",
                    c,
                    "tmux",
                    "send-keys",
                    "-t",
                    "agent",
                    "echo while-down",
                    "Enter",
                ]);
            }
            None => {
                let status = std::process::Command::new("tmux")
                    .args([
                        "-L",
                        &socket,
                        "send-keys",
                        "-t",
                        sid,
                        "echo while-down",
                        "Enter",
                    ])
                    .status()
                    .unwrap();
                assert!(status.success());
            }
        }
    }
    hub = HubProcess::spawn_config(&config, &base).await;
    let all_back = wait_until(T, || async {
        let v = hub
            .call(reqwest::Method::GET, "/v1/pty/sessions", json!({}))
            .await;
        v["sessions"].as_array().is_some_and(|list| {
            terminals.iter().all(|(sid, _, _)| {
                list.iter()
                    .any(|s| s["id"] == json!(sid) && s["alive"] == true)
            })
        })
    })
    .await;
    assert!(all_back, "not every terminal came back under its id");
    let after = hub
        .call(reqwest::Method::GET, "/v1/pty/sessions", json!({}))
        .await;
    assert_eq!(after["count"], 8, "nothing duplicated: {after}");
    for (sid, container, marker) in &terminals {
        let now = after["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == json!(sid))
            .unwrap();
        let old = before
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == json!(sid))
            .unwrap();
        for key in OWNER_FIELDS.iter().chain(&["agent_id"]) {
            assert_eq!(now[key], old[key], "{key} of {sid}");
        }
        let path = format!("/v1/pty/sessions/{sid}/read?since=0&max_bytes=1000000&timeout_ms=0");
        let seen = wait_until(T, || async {
            let out = hub.call(reqwest::Method::GET, &path, json!({})).await["output"]
                .as_str()
                .unwrap_or("")
                .to_string();
            out.contains(marker.as_str()) && out.contains("while-down")
        })
        .await;
        assert!(
            seen,
            "{sid}: {}",
            hub.call(reqwest::Method::GET, &path, json!({})).await
        );
        if let Some(c) = container {
            // Exactly one control client: the dead hub's client went with its connection.
            assert!(
                wait_until(T, || async { tmux_clients(c) == 1 }).await,
                "stale tmux clients in {c}"
            );
            // One pane pipe: the dead hub's went when the new one replaced it.
            assert!(
                wait_until(T, || async { pane_pipe_processes(c) == PIPE_PROCESSES }).await,
                "stale pane pipes in {c}: {}",
                docker(&["exec", c, "ps", "-eo", "args"])
            );
        }
    }
    // Steerable by the restored identity, and each agent still knows its terminal.
    let v = hub
        .call(
            post.clone(),
            "/v1/pty/send_line_to_agent",
            json!({"label": "Worker 2", "data": "echo routed"}),
        )
        .await;
    assert_eq!(v["resolved_session_id"], json!(terminals[2].0), "{v}");
    for (n, id) in agents.iter().enumerate() {
        let a = hub
            .call(reqwest::Method::GET, &format!("/v1/agents/{id}"), json!({}))
            .await;
        assert_eq!(a["agent"]["session_id"], json!(terminals[n].0), "{a}");
        let v = hub
            .call(
                post.clone(),
                &format!("/v1/pty/sessions/{}/talk", terminals[n].0),
                json!({"command": "echo alive-again"}),
            )
            .await;
        assert_eq!(v["output"], "alive-again\n", "{v}");
    }
    for id in &agents {
        hub.call(post.clone(), &format!("/v1/agents/{id}/stop"), json!({}))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_starts_stops_and_attaches_to_container_agents() {
    require_docker!();
    let (hub, _guard) = hub_with_agents(
        &[
            agent_toml("cli1", "label = \"Cli One\""),
            agent_toml("cli2", ""),
        ]
        .concat(),
    )
    .await;
    let base = hub.base.clone();
    let dir = hub.data_dir().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(crate::cli::BIN)
            .args(["start", "cli1", "cli2", "--hub", &base])
            .env("AGENT_HUB_DATA_DIR", &dir)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("ok   cli1") && text.contains("ok   cli2") && text.contains("running"),
        "{text}"
    );
    let a = agent(&hub, "cli1").await;
    let (sid, container) = (
        a["session_id"].as_str().unwrap().to_string(),
        a["container_id"].as_str().unwrap().to_string(),
    );
    hub.talk(&sid, "echo SHOWN_ON_ATTACH").await;

    // attach by label, through the hub's WebSocket, driven through a real PTY.
    let mut term = crate::cli::attach(&hub, "'Cli One'", "; echo \"ATTACH_EXIT=$?\"");
    assert!(
        wait_until(T, || async { term.text().contains("SHOWN_ON_ATTACH") }).await,
        "screen:\n{}",
        term.text()
    );
    term.type_bytes(b"echo typed-into-container\r");
    hub.wait_output(&sid, "\rtyped-into-container", T).await;
    assert!(wait_until(T, || async { term.text().contains("typed-into-container") }).await);
    assert!(
        wait_until(T, || async { hub.session(&sid).await["cols"] == 80 }).await,
        "follows the terminal size"
    );
    term.type_bytes(&[0x1d]);
    assert!(
        wait_until(T, || async { term.raw_text().contains("ATTACH_EXIT=0") }).await,
        "{}",
        term.raw_text()
    );
    assert_eq!(agent(&hub, "cli1").await["status"], "running");
    assert_eq!(
        tmux_clients(&container),
        1,
        "attach left no tmux client behind"
    );

    let base = hub.base.clone();
    let dir = hub.data_dir().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let stop = std::process::Command::new(crate::cli::BIN)
            .args(["stop", "cli1", "cli2", "--hub", &base])
            .env("AGENT_HUB_DATA_DIR", &dir)
            .output()
            .unwrap();
        let list = std::process::Command::new(crate::cli::BIN)
            .args(["agents", "--json", "--hub", &base])
            .env("AGENT_HUB_DATA_DIR", &dir)
            .output()
            .unwrap();
        (stop, list)
    })
    .await
    .unwrap();
    assert!(out.0.status.success());
    let list: Value = serde_json::from_slice(&out.1.stdout).unwrap();
    assert!(
        list["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["status"] == "stopped"),
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_stops_and_failures_are_published_as_events() {
    require_docker!();
    use futures_util::StreamExt;
    let toml = [
        agent_toml("loud", ""),
        agent_toml("broken", "").replace(
            &crate::docker_support::test_image(),
            "agent-hub/no-such-image:2",
        ),
    ]
    .concat();
    let (hub, _guard) = hub_with_agents(&toml).await;
    let mut events = hub.connect_ws("/v1/events").await;
    start(&hub, "loud").await;
    hub.post("/v1/agents/loud/stop", json!({})).await;
    let (status, _) = hub.post("/v1/agents/broken/start", json!({})).await;
    assert_eq!(status, 500);
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + T;
    while seen.len() < 6 {
        let Ok(Some(Ok(msg))) = tokio::time::timeout_at(deadline, events.next()).await else {
            break;
        };
        let v: Value = serde_json::from_str(msg.to_text().unwrap_or("{}")).unwrap_or_default();
        if let (Some(kind), Some(agent)) = (v["type"].as_str(), v["agentId"].as_str()) {
            if !kind.starts_with("agent_") {
                continue;
            }
            seen.push(format!("{agent}:{kind}"));
        }
    }
    for expected in [
        "loud:agent_starting",
        "loud:agent_started",
        "loud:agent_stopping",
        "loud:agent_stopped",
        "broken:agent_start_failed",
    ] {
        assert!(
            seen.iter().any(|s| s == expected),
            "missing {expected}: {seen:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_naming_a_missing_image_is_rejected_at_load() {
    require_docker!();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hub.toml");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n{}",
        dir.path().display(),
        agent_toml("ghost", "").replace(
            &crate::docker_support::test_image(),
            "agent-hub/never-built:9"
        )
    );
    std::fs::write(&config, toml).unwrap();
    let out = std::process::Command::new(crate::cli::BIN)
        .args(["serve", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    // `image = ...` is on line 6 of the file, after the value's opening quote at column 9.
    assert!(
        err.contains(&format!("{}:6:9: agent 'ghost': image", config.display()))
            && err.contains("agent-hub/never-built:9"),
        "{err}"
    );
}

/// An agent's `env` changed in `hub.toml` and the hub started again: the next start makes the
/// agent's container again with the new environment, says so, and the agent's home keeps what
/// it wrote; with `hub.toml` unchanged, the container is kept (#40).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_env_makes_the_container_again_and_the_home_stays() {
    require_docker!();
    let hub_files = crate::docker_support::ConfiguredHub::new();
    let write_config = |greeting: &str| {
        hub_files.write_config(&agent_toml(
            "cfg",
            &format!("env = {{ GREETING = \"{greeting}\" }}"),
        ));
    };
    let post = reqwest::Method::POST;
    let printenv = |container: &str| docker(&["exec", container, "printenv", "GREETING"]);

    write_config("one");
    let mut hub = hub_files.spawn().await;
    let v = hub
        .call(post.clone(), "/v1/agents/cfg/start", json!({}))
        .await;
    assert_eq!(
        (v["agent"]["status"].as_str(), v["recreated"].as_bool()),
        (Some("running"), Some(false)),
        "{v}"
    );
    let first = v["agent"]["container_id"].as_str().unwrap().to_string();
    assert_eq!(printenv(&first), "one\n");
    let recorded = docker(&[
        "inspect",
        "-f",
        "{{index .Config.Labels \"agent-hub.definition\"}}",
        &first,
    ]);
    assert!(recorded.starts_with("image="), "{recorded}");
    docker(&["exec", &first, "sh", "-c", "echo kept > \"$HOME/kept.txt\""]);
    hub.call(post.clone(), "/v1/agents/cfg/stop", json!({}))
        .await;

    // The same hub.toml: the stopped container is started again.
    hub.kill9();
    hub = hub_files.spawn().await;
    let v = hub
        .call(post.clone(), "/v1/agents/cfg/start", json!({}))
        .await;
    assert_eq!(
        (
            v["recreated"].as_bool(),
            v["agent"]["container_id"].as_str()
        ),
        (Some(false), Some(first.as_str())),
        "{v}"
    );
    hub.call(post.clone(), "/v1/agents/cfg/stop", json!({}))
        .await;

    // Another env: the container is made again.
    write_config("two");
    hub.kill9();
    hub = hub_files.spawn().await;
    let v = hub
        .call(post.clone(), "/v1/agents/cfg/start", json!({}))
        .await;
    assert_eq!(
        (
            v["agent"]["status"].as_str(),
            v["recreated"].as_bool(),
            v["changed"].clone()
        ),
        (Some("running"), Some(true), json!(["env"])),
        "{v}"
    );
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("container made again")),
        "{v}"
    );
    let second = v["agent"]["container_id"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    assert_eq!(printenv(&second), "two\n");
    let kept = docker(&["exec", &second, "sh", "-c", "cat \"$HOME/kept.txt\""]);
    assert_eq!(kept, "kept\n", "the home outlives the container");
    assert!(hub_files.data.join("agents/cfg/home/kept.txt").is_file());
    let gone = std::process::Command::new("docker")
        .args(["inspect", &first])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "the old container is removed");
    hub.log_line("making its container again").await;
    let sid = v["agent"]["session_id"].as_str().unwrap();
    assert_eq!(hub.talk(sid, "echo $GREETING").await["output"], "two\n");
    hub.call(post, "/v1/agents/cfg/stop", json!({})).await;
}

/// An engine that stops answering (as a `dockerd` stopped with SIGSTOP: connections held,
/// nothing passes) for 15 s while two agents run on it: see [`ride_out_an_outage`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_goes_quiet_makes_its_agents_unreachable_until_it_answers() {
    require_docker!();
    let proxy = EngineProxy::start().await;
    ride_out_an_outage(&proxy.url, || proxy.frozen()).await;
}

/// Two agents on `engine` and one on the local engine run; `freeze` makes `engine` go quiet
/// until what it returns is dropped, 15 s later. The two read `unreachable` within 10 s (not
/// `exited` or `stopping`) and the third is untouched; `engines` lists `engine` unreachable; a
/// line sent to one meanwhile either waits and arrives, or is refused at once with
/// `DOCKER_UNAVAILABLE` and never runs; they are neither stopped nor started meanwhile (a clear
/// code). When the engine answers again both are `running` with their terminals and a line
/// reaches each.
pub async fn ride_out_an_outage<G>(engine: &str, freeze: impl FnOnce() -> G) {
    let on = format!("docker_host = \"{engine}\"");
    let toml = [
        agent_toml("q1", &on),
        agent_toml("q2", &on),
        agent_toml("steady", ""),
    ]
    .concat();
    let (hub, _guard) = hub_with_agents(&toml).await;
    let mut sessions = Vec::new();
    for id in ["q1", "q2", "steady"] {
        let sid = start(&hub, id).await["session_id"]
            .as_str()
            .unwrap()
            .to_string();
        let out = hub.talk(&sid, &format!("echo before-{id}")).await;
        assert!(
            out["output"]
                .as_str()
                .unwrap_or("")
                .contains(&format!("before-{id}")),
            "{out}"
        );
        sessions.push(sid);
    }
    let mut events = hub.connect_ws("/v1/events").await;

    let frozen = freeze();
    let frozen_at = Instant::now();
    for id in ["q1", "q2"] {
        let a = wait_status(&hub, id, "unreachable", Duration::from_secs(10)).await;
        assert!(
            a["error"].as_str().unwrap_or("").contains("unreachable"),
            "{a}"
        );
    }
    let noticed = frozen_at.elapsed();
    assert!(noticed < Duration::from_secs(10), "{noticed:?}");
    println!("both agents read unreachable {noticed:?} after their engine went quiet");
    assert_eq!(agent(&hub, "steady").await["status"], "running");
    assert_eq!(
        hub.talk(&sessions[2], "echo steady-ok").await["output"]
            .as_str()
            .map(|o| o.contains("steady-ok")),
        Some(true)
    );
    // A line sent to an unreachable agent: refused at once with a code, nothing written (held
    // in the connection, it would run whenever the engine answers), or else delivered later.
    let asked = Instant::now();
    let (status, sent) = hub
        .post(
            &format!("/v1/pty/sessions/{}/send_line", sessions[0]),
            json!({"data": "echo sent-during-$((6*7))"}),
        )
        .await;
    let delivered = status == 200;
    if !delivered {
        assert_eq!(
            (status, sent["error_code"].as_str()),
            (503, Some("DOCKER_UNAVAILABLE")),
            "{sent}"
        );
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "{:?}",
            asked.elapsed()
        );
    }
    // Neither stopped nor started meanwhile (that would write it off): a clear code.
    for op in ["stop", "start", "restart"] {
        let (status, v) = hub.post(&format!("/v1/agents/q2/{op}"), json!({})).await;
        assert_eq!(
            (status, v["error_code"].as_str()),
            (503, Some("DOCKER_UNAVAILABLE")),
            "{op}: {v}"
        );
    }
    assert_eq!(agent(&hub, "q2").await["status"], "unreachable");
    let (_, v) = hub.get("/v1/engines").await;
    let quiet = v["engines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["engine"] == engine)
        .cloned()
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(quiet["reachable"], false, "{quiet}");
    let rest = Duration::from_secs(15).saturating_sub(frozen_at.elapsed());
    tokio::time::sleep(rest).await;

    drop(frozen);
    let thawed_at = Instant::now();
    for id in ["q1", "q2"] {
        let a = wait_status(&hub, id, "running", Duration::from_secs(30)).await;
        assert_eq!(a["pty_attached"], true, "{a}");
    }
    println!(
        "running again {:?} after it answered; the line sent meanwhile: HTTP {status} {}",
        thawed_at.elapsed(),
        sent["error_code"]
    );
    for (s, id) in sessions[..2].iter().zip(["q1", "q2"]) {
        let out = hub.talk(s, &format!("echo back-{id}")).await;
        assert!(
            out["output"]
                .as_str()
                .unwrap_or("")
                .contains(&format!("back-{id}")),
            "{out}"
        );
    }
    let (_, read) = hub
        .get(&format!(
            "/v1/pty/sessions/{}/read?since=0&timeout_ms=0",
            sessions[0]
        ))
        .await;
    let text = read["output"].as_str().unwrap_or_default();
    assert_eq!(
        text.contains("sent-during-42"),
        delivered,
        "the line sent during the outage (HTTP {status}) {} on the screen: {text}",
        if delivered { "is not" } else { "is" }
    );
    // Unreachable was never taken for an exit.
    let mut seen = Vec::new();
    while let Ok(Some(Ok(msg))) = tokio::time::timeout(
        Duration::from_millis(500),
        futures_util::StreamExt::next(&mut events),
    )
    .await
    {
        let v: Value = serde_json::from_str(msg.to_text().unwrap_or("{}")).unwrap_or_default();
        if v["type"].as_str().is_some_and(|t| t.starts_with("agent_")) {
            seen.push(format!("{}:{}", v["agentId"], v["type"]));
        }
    }
    assert!(!seen.iter().any(|e| e.contains("agent_exited")), "{seen:?}");
}
