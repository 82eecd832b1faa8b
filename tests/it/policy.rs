//! Policies through real terminals: idle timeouts measured against a tmux status line that
//! redraws a clock every second (host tmux, a nested `tmux attach` inside a PTY whose bytes carry
//! the status line, and a container agent), stuck spinners, dry runs, warnings to the leader,
//! interrupts, `start_on_message` starting a stopped container agent, reloads (API and SIGHUP)
//! and the `policy` commands.

use std::time::Duration;

use serde_json::{json, Value};

use crate::docker_support::{agent_toml, docker, unique_hub_id, ContainerGuard};
use crate::policy_support::*;
use crate::require_docker;
use crate::support::{wait_until, TestHub};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_are_stopped_on_time_and_a_printing_one_never_is() {
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    let inner = format!("{}-inner", hub.tmux_socket);
    let _kill = crate::support::TmuxServerGuard(inner.clone());
    let (host_events, nested_events) = (hub.hub.subscribe_events(), hub.hub.subscribe_events());
    // Host tmux (control mode) with a clock in its status line.
    let host = hub
        .create_with(json!({ "backend": "tmux", "policy": "fast-idle" }))
        .await;
    let host = hub.hub.get(&host).unwrap();
    let set_clock = std::process::Command::new("tmux")
        .args(["-L", &hub.tmux_socket])
        .args(STATUS_CLOCK)
        .status()
        .unwrap();
    assert!(set_clock.success());
    // A nested `tmux attach` in a PTY: its status line and clock flow through the bytes.
    let nested = nested_clock_session(&hub, &inner, Some("fast-idle")).await;
    let nested_session = hub.hub.get(&nested).unwrap();
    // A shell that prints a line and its prompt every 2 s.
    let printer = hub
        .create_with(json!({
            "shell": "bash",
            "args": ["-c", "i=0; while :; do i=$((i+1)); printf 'tick %s\\n$ ' $i; sleep 2; done"],
            "policy": "fast-idle",
        }))
        .await;
    tokio::join!(
        assert_clock_moves(&hub, &nested),
        assert_stopped_on_time(&hub, host, host_events),
        assert_stopped_on_time(&hub, nested_session, nested_events)
    );
    // Watched for twice its idle timeout more: the printing session is never stopped.
    let stopped = wait_until(Duration::from_secs(6), || async {
        !hub.hub.get(&printer).is_ok_and(|s| s.info().alive)
    })
    .await;
    assert!(!stopped, "the printing session was stopped");
    let s = state(&hub, &printer).await;
    assert!(s["idle_for_ms"].as_u64().unwrap() < 2600, "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinner_only_agent_becomes_stuck_and_the_policy_notifies() {
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    let mut events = hub.hub.subscribe_events();
    let id = hub
        .create_with(json!({
            "backend": "tmux", "shell": "bash", "args": [fake_agent()],
            "cli_type": "fake", "policy": "fast-idle",
        }))
        .await;
    wait_state(&hub, &id, "idle", Duration::from_secs(10)).await;
    let (_, v) = submit(&hub, &id, "spin", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    let w = wait_state(&hub, &id, "working", Duration::from_secs(5)).await;
    assert_eq!(w["stuck"], false, "not stuck at once: {w}");
    // Bytes keep flowing (the spinner), but nothing meaningful changes.
    let ok = wait_until(Duration::from_secs(6), || async {
        state(&hub, &id).await["stuck"] == true
    })
    .await;
    let s = state(&hub, &id).await;
    assert!(ok, "never stuck: {s}");
    assert_eq!(s["state"], "working");
    let info = hub.session(&id).await;
    assert!(
        info["last_output_at"].as_str() > info["last_activity_at"].as_str(),
        "{info}"
    );
    let notified = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            if let Ok(e) = events.recv().await.as_ref().map(event_value) {
                if e["type"] == "policy_notified" && e["sessionId"] == id {
                    return e;
                }
            }
        }
    })
    .await
    .expect("policy_notified for the stuck agent");
    assert_eq!(notified["trigger"], "on_stuck", "{notified}");
    // A working agent is never stopped by the idle timeout.
    assert_eq!(hub.session(&id).await["alive"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_are_listed_checked_and_reloaded_with_errors_located() {
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    let id = hub.create_with(json!({ "policy": "fast-idle" })).await;
    let (status, v) = hub.get("/v1/policies").await;
    assert_eq!(status, 200, "{v}");
    let fast = v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "fast-idle")
        .unwrap()
        .clone();
    assert_eq!(fast["sessions"], json!([id]));
    assert!(v["profiles"].as_array().unwrap().contains(&json!("fake")));

    let (status, v) = hub.get(&format!("/v1/policies/check?agent={id}")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["checks"][0]["policy"], "fast-idle", "{v}");
    assert!(v["checks"][0]["reason"].as_str().unwrap().len() > 5, "{v}");

    let (status, v) = hub
        .post("/v1/pty/sessions", json!({ "policy": "no-such-policy" }))
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (404, Some("POLICY_NOT_FOUND")),
        "{v}"
    );

    // A broken file is rejected with file, line and key; the old set stays.
    std::fs::write(
        dir.path().join("broken.toml"),
        "idle_timeout_s = 5\nidle_action = \"explode\"\n",
    )
    .unwrap();
    let (status, v) = hub.post("/v1/policies/reload", json!({})).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("POLICY_INVALID")),
        "{v}"
    );
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("broken.toml:2:") && msg.contains("idle_action"),
        "{msg}"
    );
    std::fs::write(dir.path().join("broken.toml"), "idle_timeout_s = 5\n").unwrap();
    let (status, v) = hub.post("/v1/policies/reload", json!({})).await;
    assert_eq!(status, 200, "{v}");
    assert!(v["policies"].as_array().unwrap().contains(&json!("broken")));
}

/// A hub with container agents, a policies directory and the policy loop.
async fn docker_hub(dir: &tempfile::TempDir, agents: &str) -> (TestHub, ContainerGuard) {
    let hub_id = unique_hub_id();
    let guard = ContainerGuard(hub_id.clone());
    let hub = hub_with_policies(dir, &format!("hub_id = \"{hub_id}\"\n{agents}")).await;
    hub.hub
        .agent_sync()
        .start(hub.hub.tracker(), hub.hub.closing());
    (hub, guard)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_container_agent_is_stopped_on_time_despite_its_status_clock() {
    require_docker!();
    let dir = policies_dir();
    let (hub, _guard) = docker_hub(&dir, &agent_toml("idler", "policy = \"fast-idle\"")).await;
    let events = hub.hub.subscribe_events();
    let (status, v) = hub.post("/v1/agents/idler/start", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let container = v["agent"]["container_id"].as_str().unwrap().to_string();
    let sid = v["agent"]["session_id"].as_str().unwrap().to_string();
    let mut exec = vec!["exec", container.as_str(), "tmux"];
    exec.extend(STATUS_CLOCK);
    docker(&exec);
    let active = assert_stopped_on_time(&hub, hub.hub.get(&sid).unwrap(), events).await;
    let ok = wait_until(Duration::from_secs(10), || async {
        hub.get("/v1/agents/idler").await.1["agent"]["status"] == "stopped"
    })
    .await;
    assert!(ok, "{}", hub.get("/v1/agents/idler").await.1);
    // The container itself is stopped within 1 s of the 3 s deadline.
    let stopped_after = active.elapsed();
    assert!(stopped_after <= Duration::from_secs(4), "{stopped_after:?}");
    let (_, s) = hub.get("/v1/agents/idler/state?explain=true").await;
    assert_eq!(s["state"], "exited", "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_on_message_starts_a_stopped_container_agent_and_delivers() {
    require_docker!();
    let dir = policies_dir();
    let (hub, _guard) = docker_hub(&dir, &agent_toml("sleeper", "policy = \"wake\"")).await;
    let (_, a) = hub.get("/v1/agents/sleeper").await;
    assert_eq!(a["agent"]["status"], "stopped");
    let mut events = hub.hub.subscribe_events();
    let (status, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({ "agent_id": "sleeper", "data": "echo woke-$((6*7))" }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["started"], true, "{v}");
    assert_eq!(v["receipt"], "submitted", "{v}");
    let sid = v["resolved_session_id"].as_str().unwrap().to_string();
    hub.wait_output(&sid, "woke-42", Duration::from_secs(10))
        .await;
    let started = std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| event_value(&e))
        .any(|e| e["type"] == "policy_started" && e["agentId"] == "sleeper");
    assert!(started, "a policy_started event");
    // Sent again, it is already running: not started twice.
    let (_, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({ "agent_id": "sleeper", "data": "true" }),
        )
        .await;
    assert_eq!(v["started"], false, "{v}");
    // The agent's state, read from its container terminal: back at its prompt.
    let idle = wait_until(Duration::from_secs(10), || async {
        let (_, s) = hub.get("/v1/agents/sleeper/state?explain=true").await;
        s["state"] == "idle" && s["rule"] == "prompt"
    })
    .await;
    let (_, s) = hub.get("/v1/agents/sleeper/state?explain=true").await;
    assert!(idle, "{s}");
    assert_eq!(s["session_id"], sid.as_str(), "{s}");
    assert_eq!(s["status"], "running");
}

/// A dry run reports and does nothing; a warning line reaches the leader; a stuck agent is
/// interrupted with its profile's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_warnings_to_the_leader_and_interrupts_act_as_configured() {
    let dir = policies_dir();
    std::fs::write(
        dir.path().join("dry.toml"),
        "idle_timeout_s = 2\ndry_run = true\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("warn-leader.toml"),
        "idle_timeout_s = 60\nwarn_before_s = 58\nwarn_line = \"echo warned-$((40+2))\"\nwarn_to = \"leader\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("interrupt.toml"),
        "on_stuck = \"interrupt\"\n",
    )
    .unwrap();
    let hub = hub_with_policies(&dir, "").await;
    // One subscription per wait, so waiting for one event never drops another.
    let mut events = hub.hub.subscribe_events();
    let mut warned = hub.hub.subscribe_events();
    let mut interrupted = hub.hub.subscribe_events();
    let t = Duration::from_secs(10);

    let dry = hub.create_with(json!({ "policy": "dry" })).await;
    let leader = hub.create("pty").await;
    let worker = hub
        .create_with(json!({ "policy": "warn-leader", "owner_session_id": leader }))
        .await;
    let fake = hub
        .create_with(json!({
            "backend": "tmux", "shell": "bash", "args": [fake_agent()],
            "cli_type": "fake", "policy": "interrupt",
        }))
        .await;

    // Dry run: the stop is decided and reported once, and nothing is stopped.
    let e = event_for(&mut events, "policy_stopped", &dry, t).await;
    assert_eq!(e["dryRun"], true, "{e}");
    // Warning: 2 s into idleness, the line is delivered to the leader's terminal.
    let e = event_for(&mut warned, "policy_warned", &worker, t).await;
    assert_eq!(e["dryRun"], false, "{e}");
    hub.wait_output(&leader, "warned-42", t).await;
    // Interrupt: the spinner runs until the policy presses Ctrl-C.
    wait_state(&hub, &fake, "idle", t).await;
    let (_, v) = submit(&hub, &fake, "spin", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    let e = event_for(&mut interrupted, "policy_interrupted", &fake, t).await;
    assert_eq!(e["trigger"], "on_stuck", "{e}");
    hub.wait_output(&fake, "interrupted", t).await;
    wait_state(&hub, &fake, "idle", t).await;

    assert_eq!(
        hub.session(&dry).await["alive"],
        true,
        "a dry run stops nothing"
    );
    assert_eq!(hub.session(&worker).await["alive"], true);
    let dry_stops = std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| event_value(&e))
        .filter(|e| e["type"] == "policy_stopped" && e["sessionId"] == dry)
        .count();
    assert_eq!(dry_stops, 0, "reported once per idle period");
}

/// `serve` refuses a broken policies directory at start, reloads on SIGHUP (keeping the old
/// set when a file is broken), and `agent-hub policy check|list|reload` work against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reloads_on_sighup_and_the_policy_commands_work() {
    let dir = policies_dir();
    let data = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Named relative to hub.toml.
    std::os::unix::fs::symlink(dir.path(), data.path().join("pol")).unwrap();
    let config = data.path().join("hub.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\ndata_dir = '{}'\npolicies_dir = 'pol'\n",
            data.path().display(),
        ),
    )
    .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let cli = |args: &[&str]| {
        std::process::Command::new(crate::cli::BIN)
            .args(args)
            .env("AGENT_HUB_URL", &base)
            .env("AGENT_HUB_DATA_DIR", data.path())
            .output()
            .unwrap()
    };

    // A broken file stops serve at start, naming file, line and key.
    std::fs::write(dir.path().join("bad.toml"), "idle_timeout_s = 0\n").unwrap();
    let out = std::process::Command::new(crate::cli::BIN)
        .args(["serve", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.toml:1:") && err.contains("idle_timeout_s"),
        "{err}"
    );
    std::fs::remove_file(dir.path().join("bad.toml")).unwrap();

    let hub = crate::hub_process::HubProcess::spawn_config(&config, &base).await;
    let new = tokio::task::block_in_place(|| {
        cli(&[
            "new",
            "--policy",
            "fast-idle",
            "--cli-type",
            "shell",
            "--json",
            "--",
            "bash",
            "--norc",
        ])
    });
    assert!(new.status.success(), "{new:?}");
    let v: Value = serde_json::from_slice(&new.stdout).unwrap();
    let sid = v["session_id"].as_str().expect("session").to_string();

    let check =
        tokio::task::block_in_place(|| cli(&["policy", "check", "--agent", &sid, "--json"]));
    assert!(check.status.success(), "{check:?}");
    let v: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(v["checks"][0]["policy"], "fast-idle", "{v}");
    assert!(
        !v["checks"][0]["reason"].as_str().unwrap().is_empty(),
        "{v}"
    );
    // The judgement behind it, once the shell is at its prompt: which profile, which rule,
    // on what evidence.
    let at_prompt = wait_until(Duration::from_secs(10), || async {
        let check = tokio::task::block_in_place(|| cli(&["policy", "check", "--json"]));
        let v: Value = serde_json::from_slice(&check.stdout).unwrap_or_default();
        v["checks"][0]["rule"] == "prompt"
    })
    .await;
    let check = tokio::task::block_in_place(|| cli(&["policy", "check", "--json"]));
    let v: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert!(at_prompt, "{v}");
    let check = &v["checks"][0];
    assert_eq!(check["profile"], "shell", "{v}");
    assert!(
        check["evidence"].as_array().is_some_and(|e| !e.is_empty()),
        "{v}"
    );
    let text = tokio::task::block_in_place(|| cli(&["policy", "check"]));
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains(&sid) && text.contains("fast-idle"), "{text}");
    assert!(
        text.contains("profile shell (") && text.contains("rule prompt: "),
        "{text}"
    );
    let sent = tokio::task::block_in_place(|| cli(&["send", "--submit", &sid, "echo hi"]));
    let sent_text = String::from_utf8_lossy(&sent.stdout).into_owned();
    assert!(sent.status.success(), "{sent:?}");
    assert_eq!(sent_text.trim(), format!("submitted: {sid}"));
    let unknown = tokio::task::block_in_place(|| cli(&["policy", "check", "--agent", "nobody"]));
    assert_eq!(unknown.status.code(), Some(1));

    // SIGHUP picks up a new policy.
    std::fs::write(dir.path().join("later.toml"), "idle_timeout_s = 99\n").unwrap();
    let hup = |pid: u32| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap()
    };
    hup(hub.child.id());
    let listed = |name: &'static str| {
        let hub = &hub;
        async move {
            let v = hub
                .call(reqwest::Method::GET, "/v1/policies", json!(null))
                .await;
            v["policies"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["name"] == name))
        }
    };
    assert!(wait_until(Duration::from_secs(5), || listed("later")).await);
    // A broken file on SIGHUP: the hub keeps running with the old set.
    std::fs::write(dir.path().join("worse.toml"), "on_stuck = \"dance\"\n").unwrap();
    hup(hub.child.id());
    let reload = tokio::task::block_in_place(|| cli(&["policy", "reload"]));
    assert_eq!(reload.status.code(), Some(1));
    let err = String::from_utf8_lossy(&reload.stderr);
    assert!(
        err.contains("worse.toml:1:") && err.contains("on_stuck"),
        "{err}"
    );
    assert!(listed("later").await, "the old set stays in force");
    let list = tokio::task::block_in_place(|| cli(&["policy", "list"]));
    assert!(String::from_utf8_lossy(&list.stdout).contains("later"));
}
