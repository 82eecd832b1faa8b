//! Support for the agent state and policy tests: a policies directory with a profile for the
//! scripted fake agent TUI (tests/fixtures/fake-agent.sh), hubs running the policy loop, state
//! and delivery helpers, tmux servers whose status line shows a clock, and event waits.

use std::sync::Arc;
use std::time::Duration;

use agent_hub::protocol::HubEvent;
use agent_hub::session::Session;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::support::{wait_until, TestHub};

pub const FAKE_PROFILE: &str = r#"
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
pub const FAST_IDLE: &str = "idle_timeout_s = 3\nwarn_before_s = 1\non_stuck = \"notify\"\n";

pub fn fake_agent() -> String {
    format!(
        "{}/tests/fixtures/fake-agent.sh",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A policies directory with `fast-idle`, `wake` (start_on_message) and the `fake` profile.
pub fn policies_dir() -> tempfile::TempDir {
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

pub async fn hub_with_policies(dir: &tempfile::TempDir, extra_toml: &str) -> TestHub {
    let parsed = agent_hub::config::HubConfig::parse(
        &format!("policies_dir = '{}'\n{extra_toml}", dir.path().display()),
        "test.toml",
    )
    .expect("test config parses");
    let components = agent_hub::daemon::Components {
        audit: true,
        policy_runner: true,
        ..Default::default()
    };
    TestHub::start_components(components, |c| {
        c.policies_dir = parsed.policies_dir.clone();
        c.hub_id = parsed.hub_id.clone();
        c.agents = parsed.agents.clone();
    })
    .await
}

pub async fn state(hub: &TestHub, id: &str) -> Value {
    let (status, v) = hub
        .get(&format!("/v1/pty/sessions/{id}/state?explain=true"))
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

/// Waits for `want`, set by a screen rule (not by the hold after our own input).
pub async fn wait_state(hub: &TestHub, id: &str, want: &str, within: Duration) -> Value {
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

pub async fn submit(hub: &TestHub, id: &str, data: &str, force: bool) -> (u16, Value) {
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": data, "submit": true, "force": force }),
    )
    .await
}

/// tmux commands that turn on a status line whose clock redraws every second.
pub const STATUS_CLOCK: [&str; 14] = [
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
pub fn clock_tmux(socket: &str) -> Vec<String> {
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
pub async fn nested_clock_session(hub: &TestHub, inner: &str, policy: Option<&str>) -> String {
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
pub async fn assert_clock_moves(hub: &TestHub, id: &str) {
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

/// Asserts the idle session is stopped between 3 s and 4 s after its last meaningful
/// activity, although a clock redraws every second, and that its program ends. Returns the
/// instant of its last meaningful activity.
pub async fn assert_stopped_on_time(
    hub: &TestHub,
    session: Arc<Session>,
    mut events: tokio::sync::broadcast::Receiver<HubEvent>,
) -> Instant {
    let id = session.id();
    let e = wait_event(&mut events, "policy_stopped", id, Duration::from_secs(15)).await;
    let at = Instant::now();
    let idle_for = at.duration_since(session.last_activity_instant());
    let Some(e) = e else {
        panic!("{id} was never stopped: {}", hub.session(id).await);
    };
    let hub_idle_ms = e["idleForMs"].as_u64().unwrap_or(0);
    assert!((3000..=4000).contains(&hub_idle_ms), "{id}: {e}");
    assert!(
        idle_for >= Duration::from_secs(3) && idle_for <= Duration::from_millis(4000),
        "{id}: stopped {idle_for:?} after its last activity: {e}"
    );
    assert_eq!(e["trigger"], "idle_timeout", "{e}");
    assert_eq!(e["dryRun"], false);
    // Stopped: a host session is killed and removed, an agent's terminal ends.
    let gone = wait_until(Duration::from_secs(10), || async {
        hub.hub.get(id).map_or(true, |s| !s.info().alive)
    })
    .await;
    assert!(gone, "{id} still alive after policy_stopped");
    // And its program really ended.
    let ended = wait_until(Duration::from_secs(10), || async {
        match (&session.spec().tmux_session, session.spec().source.as_str()) {
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
    at - idle_for
}

/// A hub event as it goes on the wire.
pub fn event_value(e: &HubEvent) -> Value {
    serde_json::to_value(e).expect("events serialize")
}

/// The next event of `kind` about `session`, if one comes within `within`.
pub async fn wait_event(
    events: &mut tokio::sync::broadcast::Receiver<HubEvent>,
    kind: &str,
    session: &str,
    within: Duration,
) -> Option<Value> {
    tokio::time::timeout(within, async {
        loop {
            match events.recv().await {
                Ok(e) => {
                    let e = event_value(&e);
                    if e["type"] == kind && e["sessionId"] == session {
                        return e;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => std::future::pending().await,
            }
        }
    })
    .await
    .ok()
}

/// The next event of `kind` about `session`; panics when none comes within `within`.
pub async fn event_for(
    events: &mut tokio::sync::broadcast::Receiver<HubEvent>,
    kind: &str,
    session: &str,
    within: Duration,
) -> Value {
    wait_event(events, kind, session, within)
        .await
        .unwrap_or_else(|| panic!("no {kind} for {session} within {within:?}"))
}
