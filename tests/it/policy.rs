//! Agent state, policies and delivery through real terminals: a scripted fake agent TUI
//! (tests/fixtures/fake-agent.sh) in a host PTY and in tmux, idle timeouts measured against a
//! tmux status line that redraws a clock every second (host tmux, a nested `tmux attach`
//! inside a PTY whose bytes carry the status line, and a container agent), stuck spinners,
//! and `start_on_message` starting a stopped container agent.

use std::time::Duration;

use std::sync::Arc;

use agent_hub::session::Session;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::docker_support::{agent_toml, docker, unique_hub_id, ContainerGuard};
use crate::support::{wait_until, TestHub};
use crate::{both_backends, require_docker};

const FAKE_PROFILE: &str = r#"
bottom_rows = 3
stable_after_ms = 1000
stable_state = "unknown"
interrupt_key = "C-c"
stuck_after_s = 2
volatile = ['[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]', '\d+s\b']

[[rules]]
name = "permission"
state = "blocked"
pattern = 'Allow .*\? \[y/n\]\s*$'
priority = 30
rows = 1

[[rules]]
name = "spinner"
state = "working"
pattern = 'Working… \(esc to interrupt\)'
priority = 20

[[rules]]
name = "prompt"
state = "idle"
pattern = '^fake> ?$'
priority = 10
rows = 1
"#;

/// Policies used here: a 3 s idle timeout with a warning 1 s before, and stuck notification.
const FAST_IDLE: &str = "idle_timeout_s = 3\nwarn_before_s = 1\non_stuck = \"notify\"\n";

fn fake_agent() -> String {
    format!(
        "{}/tests/fixtures/fake-agent.sh",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A policies directory with `fast-idle`, `wake` (start_on_message) and the `fake` profile.
fn policies_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    std::fs::write(dir.path().join("agents/fake.toml"), FAKE_PROFILE).unwrap();
    std::fs::write(dir.path().join("fast-idle.toml"), FAST_IDLE).unwrap();
    std::fs::write(
        dir.path().join("wake.toml"),
        "idle_timeout_s = 600\nstart_on_message = true\n",
    )
    .unwrap();
    dir
}

async fn hub_with_policies(dir: &tempfile::TempDir, extra_toml: &str) -> TestHub {
    let parsed = agent_hub::config::HubConfig::parse(
        &format!("policies_dir = '{}'\n{extra_toml}", dir.path().display()),
        "test.toml",
    )
    .expect("test config parses");
    let hub = TestHub::start_with(|c| {
        c.policies_dir = parsed.policies_dir.clone();
        c.hub_id = parsed.hub_id.clone();
        c.agents = parsed.agents.clone();
    })
    .await;
    agent_hub::policy::runner::spawn(&hub.hub);
    hub
}

async fn state(hub: &TestHub, id: &str) -> Value {
    let (status, v) = hub
        .get(&format!("/v1/pty/sessions/{id}/state?explain=true"))
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

/// Waits for `want`, set by a screen rule (not by the hold after our own input).
async fn wait_state(hub: &TestHub, id: &str, want: &str, within: Duration) -> Value {
    let ok = wait_until(within, || async {
        let s = state(hub, id).await;
        s["state"] == want && s["rule"] != "input:sent"
    })
    .await;
    let v = state(hub, id).await;
    if !ok {
        let (_, screen) = hub
            .post(&format!("/v1/pty/sessions/{id}/term_read"), json!({}))
            .await;
        panic!(
            "{id} not {want} within {within:?}: {v}\nscreen:\n{}",
            screen["text"]
        );
    }
    v
}

async fn submit(hub: &TestHub, id: &str, data: &str, force: bool) -> (u16, Value) {
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": data, "submit": true, "force": force }),
    )
    .await
}

async fn fake_agent_is_classified_and_delivery_gives_receipts(backend: &str) {
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    let id = hub
        .create_with(json!({
            "backend": backend, "shell": "bash", "args": [fake_agent()], "cli_type": "fake",
        }))
        .await;
    let t = Duration::from_secs(10);

    let idle = wait_state(&hub, &id, "idle", t).await;
    assert_eq!(idle["rule"], "prompt", "{idle}");
    assert_eq!(idle["evidence"], json!(["fake>"]), "{idle}");
    assert_eq!(idle["profile"], "fake");

    // A prompt is pasted (the fake enabled bracketed paste), submitted, and the agent works.
    let (status, v) = submit(&hub, &id, "work 2", false).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["receipt"], "submitted", "{v}");
    assert_eq!(v["delivery"]["bracketed_paste"], true, "{v}");
    let working = wait_state(&hub, &id, "working", t).await;
    assert_eq!(working["rule"], "spinner", "{working}");
    assert!(
        working["evidence"][0]
            .as_str()
            .unwrap()
            .contains("Working… (esc to interrupt)"),
        "{working}"
    );
    wait_state(&hub, &id, "idle", t).await;
    hub.wait_output(&id, "done: 2", t).await;

    // Multi-line text arrives as one paste: one prompt, not two.
    let (_, v) = submit(&hub, &id, "first line\nsecond line", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    hub.wait_output(&id, "echo: first line second line", t)
        .await;

    // A permission question: blocked, with the question as evidence; a prompt is refused.
    let (_, v) = submit(&hub, &id, "ask", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    let blocked = wait_state(&hub, &id, "blocked", t).await;
    assert_eq!(blocked["rule"], "permission", "{blocked}");
    assert!(blocked["evidence"][0]
        .as_str()
        .unwrap()
        .contains("Allow write to main.rs? [y/n]"));
    let (status, v) = submit(&hub, &id, "do something else", false).await;
    assert_eq!(
        (status, v["error_code"].as_str(), v["receipt"].as_str()),
        (409, Some("AGENT_BLOCKED"), Some("blocked")),
        "{v}"
    );
    assert!(v["evidence"][0].as_str().unwrap().contains("Allow write"));
    // Forced, it answers the question.
    let (status, v) = submit(&hub, &id, "y", true).await;
    assert_eq!(
        (status, v["receipt"].as_str()),
        (200, Some("submitted")),
        "{v}"
    );
    hub.wait_output(&id, "answered: y", t).await;
    wait_state(&hub, &id, "idle", t).await;

    // A program that ignores Enter: two Enters, then `stalled`.
    let (_, v) = submit(&hub, &id, "deaf", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    let started = Instant::now();
    let (status, v) = submit(&hub, &id, "are you there", false).await;
    assert_eq!(
        (status, v["receipt"].as_str()),
        (200, Some("stalled")),
        "{v}"
    );
    assert_eq!(v["delivery"]["enters"], 2);
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "waited for both Enters"
    );
}
both_backends!(fake_agent_is_classified_and_delivery_gives_receipts);

/// tmux commands that turn on a status line whose clock redraws every second.
const STATUS_CLOCK: [&str; 14] = [
    "set",
    "-g",
    "status",
    "on",
    ";",
    "set",
    "-g",
    "status-interval",
    "1",
    ";",
    "set",
    "-g",
    "status-right",
    "%H:%M:%S",
];

/// A tmux server of its own, running bash, with the status clock.
fn clock_tmux(socket: &str) -> Vec<String> {
    let new = [
        "-L",
        socket,
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-x",
        "80",
        "-y",
        "24",
        "-s",
        "inner",
        "bash --norc --noprofile",
        ";",
    ];
    new.iter()
        .chain(STATUS_CLOCK.iter())
        .map(|s| s.to_string())
        .collect()
}

/// A host PTY session running `tmux attach` to a server of its own whose status line shows
/// a clock: the status line and its redraws flow through this session's bytes.
async fn nested_clock_session(hub: &TestHub, inner: &str, policy: Option<&str>) -> String {
    assert!(std::process::Command::new("tmux")
        .args(clock_tmux(inner))
        .status()
        .unwrap()
        .success());
    let id = hub
        .create_with(json!({
            "shell": "tmux", "args": ["-L", inner, "attach", "-t", "inner"],
            "policy": policy, "cols": 80, "rows": 24,
        }))
        .await;
    id
}

/// Asserts the nested session's status row shows a clock that moves, rendered from its bytes.
async fn assert_clock_moves(hub: &TestHub, id: &str) {
    hub.wait_output(id, "inner", Duration::from_secs(10)).await;
    // The status row's clock, as rendered from this session's bytes, moves.
    let clock = regex::Regex::new(r"\d{2}:\d{2}:\d{2}").unwrap();
    let shown = || async {
        let (_, v) = hub
            .post(
                &format!("/v1/pty/sessions/{id}/term_read"),
                json!({ "mode": "viewport" }),
            )
            .await;
        let last = v["lines"].as_array().and_then(|l| l.last()).cloned();
        let last = last
            .and_then(|l| l.as_str().map(String::from))
            .unwrap_or_default();
        clock.find(&last).map(|m| m.as_str().to_string())
    };
    let first = std::sync::Mutex::new(None);
    assert!(
        wait_until(Duration::from_secs(5), || async {
            let now = shown().await;
            let found = now.is_some();
            *first.lock().unwrap() = now;
            found
        })
        .await,
        "no clock on the nested session's status row"
    );
    let first = first.into_inner().unwrap();
    let offset = hub.hub.get(id).unwrap().output().end_offset();
    let moved = wait_until(Duration::from_secs(5), || async {
        shown().await.is_some_and(|now| Some(now) != first)
    })
    .await;
    assert!(
        moved,
        "the status clock did not redraw in the nested session's bytes"
    );
    assert!(hub.hub.get(id).unwrap().output().end_offset() > offset);
}

struct KillTmux(String);
impl Drop for KillTmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .output();
    }
}

/// Waits for `policy_stopped` for `session`; returns when it came.
async fn stopped_event(
    events: &mut tokio::sync::broadcast::Receiver<Value>,
    session: &str,
    within: Duration,
) -> Option<Value> {
    tokio::time::timeout(within, async {
        loop {
            match events.recv().await {
                Ok(e) if e["type"] == "policy_stopped" && e["session_id"] == session => return e,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => std::future::pending().await,
            }
        }
    })
    .await
    .ok()
}

/// Asserts the idle session is stopped between 3 s and 4 s after its last meaningful
/// activity, although a clock redraws every second, and that it was warned first.
async fn assert_stopped_on_time(
    hub: &TestHub,
    session: Arc<Session>,
    mut events: tokio::sync::broadcast::Receiver<Value>,
) {
    let id = session.id();
    let e = stopped_event(&mut events, id, Duration::from_secs(15)).await;
    let at = Instant::now();
    let idle_for = at.duration_since(session.last_activity_instant());
    let Some(e) = e else {
        panic!("{id} was never stopped: {}", hub.session(id).await);
    };
    let hub_idle_ms = e["idle_for_ms"].as_u64().unwrap_or(0);
    assert!((3000..=4000).contains(&hub_idle_ms), "{id}: {e}");
    assert!(
        idle_for >= Duration::from_secs(3) && idle_for <= Duration::from_millis(4000),
        "{id}: stopped {idle_for:?} after its last activity: {e}"
    );
    assert_eq!(e["trigger"], "idle_timeout", "{e}");
    assert_eq!(e["dry_run"], false);
    // Stopped: a host session is killed and removed, an agent's terminal ends.
    let gone = wait_until(Duration::from_secs(10), || async {
        hub.hub.get(id).map_or(true, |s| !s.info().alive)
    })
    .await;
    assert!(gone, "{id} still alive after policy_stopped");
    // And its program really ended.
    let ended = wait_until(Duration::from_secs(10), || async {
        match (&session.spec().tmux_session, session.spec().source) {
            (Some(name), "host") => !std::process::Command::new("tmux")
                .args(["-L", &hub.tmux_socket, "has-session", "-t", name])
                .output()
                .is_ok_and(|o| o.status.success()),
            _ => session
                .info()
                .pid
                .is_none_or(|pid| !crate::support::process_alive(pid)),
        }
    })
    .await;
    assert!(ended, "{id}: its program still runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_are_stopped_on_time_and_a_printing_one_never_is() {
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    let inner = format!("{}-inner", hub.tmux_socket);
    let _kill = KillTmux(inner.clone());
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
            if let Ok(e) = events.recv().await {
                if e["type"] == "policy_notified" && e["session_id"] == id {
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
    agent_hub::agents::sync::spawn(&hub.hub);
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
    assert_stopped_on_time(&hub, hub.hub.get(&sid).unwrap(), events).await;
    let ok = wait_until(Duration::from_secs(10), || async {
        hub.get("/v1/agents/idler").await.1["agent"]["status"] == "stopped"
    })
    .await;
    assert!(ok, "{}", hub.get("/v1/agents/idler").await.1);
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
        .any(|e| e["type"] == "policy_started" && e["agent_id"] == "sleeper");
    assert!(started, "a policy_started event");
    // Sent again, it is already running: not started twice.
    let (_, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({ "agent_id": "sleeper", "data": "true" }),
        )
        .await;
    assert_eq!(v["started"], false, "{v}");
}

/// `last_activity_at` stays put through status-line clock redraws, cursor moves and blinks,
/// title changes, colour-only redraws, our own resize and a viewer attaching and leaving, while
/// `last_output_at` moves; it moves for input and for new text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_activity_ignores_redraws_resizes_and_viewers_but_not_input_or_output() {
    let hub = TestHub::start().await;
    let inner = format!("{}-inner", hub.tmux_socket);
    let _kill = KillTmux(inner.clone());
    let nested = nested_clock_session(&hub, &inner, None).await;
    assert_clock_moves(&hub, &nested).await;
    // A program that, after its first line, only moves the cursor, blinks it, sets the title
    // and changes colours.
    let blinker = hub
        .create_with(json!({
            "shell": "bash",
            "args": ["-c", "echo ready; while :; do printf '\\e]0;t%s\\a\\e[5;5H\\e[?25l\\e[31m' $RANDOM; sleep 0.2; printf '\\e[?25h\\e[1;1H\\e[0m'; sleep 0.2; done"],
        }))
        .await;
    hub.wait_output(&blinker, "ready", Duration::from_secs(5))
        .await;
    // Let both settle, then take the baseline.
    let settled = |id: String| {
        let hub = &hub;
        async move {
            wait_until(Duration::from_secs(10), || async {
                hub.hub.get(&id).unwrap().state_report().idle_for_ms >= 1500
            })
            .await
        }
    };
    assert!(
        settled(nested.clone()).await,
        "{}",
        hub.session(&nested).await
    );
    assert!(
        settled(blinker.clone()).await,
        "{}",
        hub.session(&blinker).await
    );
    let before_nested = hub.session(&nested).await;
    let before_blinker = hub.session(&blinker).await;

    // A viewer attaches and leaves; we resize the nested session (tmux repaints it all) and back.
    let url = format!(
        "{}/v1/pty/sessions/{nested}/stream",
        hub.base.replace("http://", "ws://")
    );
    let (ws, _) = tokio_tungstenite::connect_async(url).await.expect("ws");
    drop(ws);
    for (cols, rows) in [(100, 30), (80, 24)] {
        let (status, v) = hub
            .post(
                &format!("/v1/pty/sessions/{nested}/resize"),
                json!({ "cols": cols, "rows": rows }),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Two more clock redraws.
    let offset = hub.hub.get(&nested).unwrap().output().end_offset();
    let redrawn = wait_until(Duration::from_secs(5), || async {
        hub.hub.get(&nested).unwrap().output().end_offset() > offset + 20
    })
    .await;
    assert!(redrawn);
    tokio::time::sleep(Duration::from_millis(1200)).await;

    for (id, before) in [(&nested, &before_nested), (&blinker, &before_blinker)] {
        let after = hub.session(id).await;
        assert_eq!(
            after["last_activity_at"], before["last_activity_at"],
            "{id}: {after}"
        );
        assert!(
            after["last_output_at"].as_str() > before["last_output_at"].as_str(),
            "{id}: bytes did arrive: {after}"
        );
    }

    // Input counts (recorded separately), and so does new text on the screen.
    let (status, _) = hub
        .post(
            &format!("/v1/pty/sessions/{nested}/send_line"),
            json!({ "data": "echo $((6*7))xyz" }),
        )
        .await;
    assert_eq!(status, 200);
    hub.wait_output(&nested, "42xyz", Duration::from_secs(5))
        .await;
    let moved = wait_until(Duration::from_secs(3), || async {
        let s = hub.session(&nested).await;
        s["last_screen_change_at"].as_str() > before_nested["last_activity_at"].as_str()
    })
    .await;
    let after = hub.session(&nested).await;
    assert!(moved, "{after}");
    assert!(after["last_input_at"].as_str() > before_nested["last_activity_at"].as_str());
    assert!(after["last_activity_at"].as_str() > before_nested["last_activity_at"].as_str());
}

/// Waits for an event of `kind` about `session`.
async fn event_for(
    events: &mut tokio::sync::broadcast::Receiver<Value>,
    kind: &str,
    session: &str,
    within: Duration,
) -> Value {
    tokio::time::timeout(within, async {
        loop {
            match events.recv().await {
                Ok(e) if e["type"] == kind && e["session_id"] == session => return e,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => std::future::pending().await,
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind} for {session} within {within:?}"))
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
    assert_eq!(e["dry_run"], true, "{e}");
    // Warning: 2 s into idleness, the line is delivered to the leader's terminal.
    let e = event_for(&mut warned, "policy_warned", &worker, t).await;
    assert_eq!(e["dry_run"], false, "{e}");
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
        .filter(|e| e["type"] == "policy_stopped" && e["session_id"] == dry)
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
    let config = data.path().join("hub.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\ndata_dir = '{}'\npolicies_dir = '{}'\n",
            data.path().display(),
            dir.path().display()
        ),
    )
    .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let cli = |args: &[&str]| {
        std::process::Command::new(crate::cli::BIN)
            .args(args)
            .env("AGENT_HUB_URL", &base)
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

    let hub = crate::docker::HubProcess::spawn(&config, &base).await;
    let v = hub
        .call(
            reqwest::Method::POST,
            "/v1/pty/sessions",
            json!({ "shell": "bash", "args": ["--norc"], "policy": "fast-idle" }),
        )
        .await;
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
    let text = tokio::task::block_in_place(|| cli(&["policy", "check"]));
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains(&sid) && text.contains("fast-idle"), "{text}");
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
