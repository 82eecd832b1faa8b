//! The real Claude Code on its own hooks (#29 items 1 and 4): with `agent-hub hook` in its
//! settings (a session given hub access runs it with its own credential), the end of a turn
//! is `idle` and the permission question `blocked` from the hook, ahead of the screen, which
//! agrees; the latency from tmux's pane showing the change to the hub reporting it is printed.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::BIN;
use crate::model_standin::{ModelStandIn, AFTER_TOOL, INSTANT};
use crate::real_cli::{
    cli, hub_without_status_file, report_latency, session_request, Home, RealCli,
};
use crate::support::{wait_until, TestHub};

/// Adds hooks that report to the hub to Claude Code's settings in `config`, keeping the rest.
fn write_hooks(config: &Path) {
    let path = config.join("settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let hook = |args: &str| json!([{"type": "command", "command": format!("{BIN} hook {args}")}]);
    settings["hooks"] = json!({
        "UserPromptSubmit": [{"hooks": hook("UserPromptSubmit")}],
        "PostToolUse": [{"matcher": "*", "hooks": hook("PostToolUse")}],
        "Stop": [{"hooks": hook("Stop")}],
        "Notification": [
            {"matcher": "permission_prompt", "hooks": hook("Notification permission_prompt")},
            {"matcher": "idle_prompt", "hooks": hook("Notification idle_prompt")},
        ],
    });
    std::fs::write(&path, settings.to_string()).unwrap();
}

/// Waits (15 s at most) until the hub reports `state` from `source`; returns that report.
async fn source_is(run: &RealCli<'_>, state: &str, source: &str) -> Value {
    let reached = wait_until(Duration::from_secs(15), || async {
        let s = run.state().await;
        s["state"] == state && s["source"] == source
    })
    .await;
    let now = run.state().await;
    assert!(reached, "not {state} from {source}: {now}");
    now
}

#[tokio::test]
async fn claude_code_states_come_from_its_own_hooks() {
    let Some(claude) = cli("claude") else { return };
    let standin = ModelStandIn::start().await;
    // The hooks alone, not the status file (see the next test).
    let (_policies, hub) = hub_without_status_file().await;
    let home = Home::new();
    let env = home.claude_env(&standin, false);
    write_hooks(&home.path().join("claude"));
    let mut request = session_request(&claude, "claude", &home, env);
    request["hub_access"] = json!(true);
    request["owner_agent_id"] = json!("claude-hooked");
    let (status, v) = hub.post("/v1/pty/sessions", request).await;
    assert_eq!(status, 200, "{v}");
    let run = RealCli::started(&hub, home, &v);
    run.claude_prompt().await;
    run.wait_state("idle").await;

    // Turns end `idle` by the Stop hook.
    let mut idle = Vec::new();
    for i in 0..4 {
        let prompt = format!("say something {i}");
        run.submit(&prompt).await;
        let asked = format!("❯ {prompt}");
        let answered = |p: &str| p.contains(&asked) && p.matches(INSTANT).count() > i;
        idle.push(run.latency(answered, "idle").await);
        source_is(&run, "idle", "hook:Stop").await;
    }

    // The permission question: `blocked` from the screen at once (a question on the screen
    // outranks the prompt's `working` signal), confirmed by the Notification hook, which
    // Claude Code 2.1.330 sends about 6 s later.
    let mut blocked = Vec::new();
    run.submit("please run a tool").await;
    blocked.push(
        run.latency(|p| p.contains("Do you want to proceed?"), "blocked")
            .await,
    );
    let s = run.state().await;
    assert!(
        s["source"]
            .as_str()
            .is_some_and(|x| x.starts_with("screen:rule question (over hook:UserPromptSubmit")),
        "{s}"
    );
    let s = source_is(&run, "blocked", "hook:Notification/permission_prompt").await;
    assert!(s["evidence"].to_string().contains("1. Yes"), "{s}");
    let done = |p: &str| p.contains(AFTER_TOOL) && !p.contains("Do you want to proceed?");
    idle.push(run.answer("1", done).await);
    source_is(&run, "idle", "hook:Stop").await;

    let mut all: Vec<Duration> = idle.iter().chain(&blocked).copied().collect();
    report_latency("claude-code (hooks: idle)", &mut idle);
    report_latency("claude-code (hooks: blocked)", &mut blocked);
    report_latency("claude-code (hooks)", &mut all);
}

/// The real Claude Code on its own status file (#29 items 1 and 4), with no hooks: the hub
/// follows `<config dir>/sessions/<pid>.json` of the session's own program (not another's in
/// the same config dir); the end of a turn is `idle` and the permission question `blocked`
/// from it, and the latency from tmux's pane showing the change to the hub reporting it is
/// printed.
#[tokio::test]
async fn claude_code_states_come_from_its_status_file() {
    let Some(claude) = cli("claude") else { return };
    let standin = ModelStandIn::start().await;
    let hub = TestHub::start().await;
    let home = Home::new();
    let env = home.claude_env(&standin, false);
    let sessions = home.path().join("claude/sessions");
    let request = session_request(&claude, "claude", &home, env);
    let (status, v) = hub.post("/v1/pty/sessions", request).await;
    assert_eq!(status, 200, "{v}");
    let run = RealCli::started(&hub, home, &v);
    run.claude_prompt().await;
    source_is(&run, "idle", "status-file:idle").await;

    // Another program's status file in the same config dir (pid 1: not of this terminal) says
    // nothing about this session.
    let other = sessions.join("1.json");
    let now_ms = chrono::Utc::now().timestamp_millis();
    let busy = json!({"pid": 1, "startedAt": now_ms, "status": "busy"});
    std::fs::write(&other, busy.to_string()).unwrap();
    run.holds("idle", Duration::from_secs(1)).await;
    std::fs::remove_file(&other).unwrap();

    let mut idle = Vec::new();
    for i in 0..4 {
        let prompt = format!("say something {i}");
        run.submit(&prompt).await;
        let asked = format!("❯ {prompt}");
        let answered = |p: &str| p.contains(&asked) && p.matches(INSTANT).count() > i;
        idle.push(run.latency(answered, "idle").await);
        source_is(&run, "idle", "status-file:idle").await;
    }

    // The question: `waiting` in the file as it is drawn.
    let mut blocked = Vec::new();
    run.submit("please run a tool").await;
    blocked.push(
        run.latency(|p| p.contains("Do you want to proceed?"), "blocked")
            .await,
    );
    source_is(&run, "blocked", "status-file:waiting").await;
    // Claude Code writes the file as it starts drawing: the question's lines follow.
    let choices = wait_until(Duration::from_secs(5), || async {
        let s = run.state().await;
        s["source"] == "status-file:waiting" && s["evidence"].to_string().contains("1. Yes")
    })
    .await;
    assert!(choices, "{}", run.state().await);
    let done = |p: &str| p.contains(AFTER_TOOL) && !p.contains("Do you want to proceed?");
    idle.push(run.answer("1", done).await);
    source_is(&run, "idle", "status-file:idle").await;

    let mut all: Vec<Duration> = idle.iter().chain(&blocked).copied().collect();
    report_latency("claude-code (status file: idle)", &mut idle);
    report_latency("claude-code (status file: blocked)", &mut blocked);
    report_latency("claude-code (status file)", &mut all);
}
