//! An agent's own hooks (#29 item 1): `agent-hub hook EVENT [DETAIL]`, run inside a session
//! given hub access, tells the hub the agent's state ahead of the screen; the screen stays the
//! cross-check, and when the hook path fails, the screen takes over within the profile's grace.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cli::BIN;
use crate::support::{wait_until, TestHub};

/// The shell profile's signal grace (`policies/agents/shell.toml`).
const GRACE: Duration = Duration::from_millis(5000);

async fn explained(hub: &TestHub, sid: &str) -> Value {
    let (status, v) = hub
        .get(&format!("/v1/pty/sessions/{sid}/state?explain=true"))
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

/// A bash session in tmux acting as agent `agent`, with the hub's address and credential.
async fn hooked_session(hub: &TestHub, agent: &str) -> String {
    let sid = hub
        .create_with(json!({"backend": "tmux", "owner_agent_id": agent, "hub_access": true}))
        .await;
    let idle = wait_until(Duration::from_secs(10), || async {
        explained(hub, &sid).await["state"] == "idle"
    })
    .await;
    assert!(idle, "{}", explained(hub, &sid).await);
    sid
}

/// Runs `command` in the session and returns its output.
async fn run(hub: &TestHub, sid: &str, command: &str) -> String {
    let v = hub.talk(sid, command).await;
    v["output"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_leads_the_state_and_the_screen_takes_over_when_the_hook_path_fails() {
    let hub = TestHub::start().await;
    let sid = hooked_session(&hub, "hooked").await;
    let v = explained(&hub, &sid).await;
    assert_eq!(v["source"], "screen:rule prompt", "{v}");

    // The agent's turn starts: its hook says so, and the hub reports it at once, named by its
    // source, although the screen shows the prompt.
    let out = run(&hub, &sid, &format!("{BIN} hook working; echo rc=$?")).await;
    assert!(out.contains("rc=0"), "{out}");
    let v = explained(&hub, &sid).await;
    assert_eq!(
        (&v["state"], &v["source"]),
        (&json!("working"), &json!("hook:working")),
        "{v}"
    );

    // Its end-of-turn hook fails (the hub cannot be reached): the hook exits 0, saying why on
    // stderr, and the CLI is not disturbed; --strict says so with its exit code.
    let dead = "AGENT_HUB_URL=http://127.0.0.1:9";
    let out = run(&hub, &sid, &format!("{dead} {BIN} hook idle; echo rc=$?")).await;
    assert!(
        out.contains("agent-hub hook idle:") && out.contains("rc=0"),
        "{out}"
    );
    let out = run(
        &hub,
        &sid,
        &format!("{dead} {BIN} hook idle --strict; echo rc=$?"),
    )
    .await;
    assert!(out.contains("rc=1"), "{out}");
    // From here the screen stays at the prompt, reading otherwise than the hook.
    let said = Instant::now();

    // The hook's `working` holds for the grace while the screen shows the prompt...
    tokio::time::sleep(GRACE / 2).await;
    let v = explained(&hub, &sid).await;
    assert_eq!(v["state"], "working", "within the grace: {v}");
    // ...then the screen wins, and says over which signal.
    let idle = wait_until(GRACE + Duration::from_secs(3), || async {
        explained(&hub, &sid).await["state"] == "idle"
    })
    .await;
    let took = said.elapsed();
    let v = explained(&hub, &sid).await;
    assert!(idle, "{v}");
    // (The prompt came back a moment before the command's exit code did.)
    assert!(
        took >= GRACE - Duration::from_millis(500),
        "the screen won after {took:?}, before the grace"
    );
    assert!(took <= GRACE + Duration::from_secs(2), "{took:?}");
    assert_eq!(
        v["source"], "screen:rule prompt (over hook:working: the screen read idle for 5000 ms)",
        "{v}"
    );

    // A question: the hook and the screen agree, and the report carries the question.
    let out = run(&hub, &sid, &format!("{BIN} hook blocked; echo rc=$?")).await;
    assert!(out.contains("rc=0"), "{out}");
    hub.post(
        &format!("/v1/pty/sessions/{sid}/send_line"),
        json!({"data": "read -p 'Overwrite it? (y/n) ' a"}),
    )
    .await;
    let asked = wait_until(Duration::from_secs(10), || async {
        let v = explained(&hub, &sid).await;
        v["state"] == "blocked" && v["question"].as_str().is_some_and(|q| q.contains("(y/n)"))
    })
    .await;
    let v = explained(&hub, &sid).await;
    assert!(asked, "{v}");
    assert_eq!(v["source"], "hook:blocked", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_reach_only_their_own_session_and_bad_events_are_refused() {
    let hub = TestHub::start().await;
    let mine = hooked_session(&hub, "one").await;
    let other = hooked_session(&hub, "two").await;
    // Another agent's credential cannot set this session's state: it does not see it.
    let out = run(
        &hub,
        &other,
        &format!("{BIN} hook blocked --session {mine} --strict --json; echo rc=$?"),
    )
    .await;
    assert!(
        out.contains("SESSION_NOT_FOUND") && out.contains("rc=1"),
        "{out}"
    );
    assert_eq!(explained(&hub, &mine).await["state"], "idle");

    // Names the hub refuses, with a stable code; an event the profile gives no state changes
    // nothing and says so.
    let path = format!("/v1/pty/sessions/{mine}/hook");
    for body in [
        json!({"event": "not an event"}),
        json!({"event": ""}),
        json!({"event": "Notification", "detail": "x/y"}),
        json!({"event": "Stop", "extra": 1}),
    ] {
        let (status, v) = hub.post(&path, body.clone()).await;
        assert_eq!(
            (status, &v["error_code"]),
            (400, &json!("BAD_REQUEST")),
            "{body}: {v}"
        );
    }
    let (status, v) = hub.post(&path, json!({"event": "SessionStart"})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["state"], &v["source"]),
        (&Value::Null, &Value::Null),
        "{v}"
    );
    assert_eq!(explained(&hub, &mine).await["state"], "idle");
    let (status, v) = hub
        .post("/v1/agents/nobody/hook", json!({"event": "Stop"}))
        .await;
    assert_eq!(
        (status, &v["error_code"]),
        (404, &json!("AGENT_NOT_FOUND")),
        "{v}"
    );
    // Outside any session, the command says what it lacks (and exits 0: a hook never fails
    // its CLI).
    let out = std::process::Command::new(BIN)
        .args(["hook", "Stop"])
        .env_remove("AGENT_HUB_SESSION_ID")
        .env_remove("AGENT_HUB_AGENT_ID")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no session or agent"),
        "{out:?}"
    );
}
