//! The real Claude Code, Codex and Gemini CLI on their own signals (#29 items 1 and 4): with
//! `agent-hub hook` in their settings (a session given hub access runs it with its own
//! credential), the end of a turn is `idle` from the CLI's signal, ahead of the screen, which
//! agrees; the permission question is `blocked` (from Claude Code's and Gemini CLI's hooks;
//! Codex notifies no question, so from its screen); the latency from tmux's pane showing the
//! change to the hub reporting it is printed. Codex's and Gemini CLI's settings are the ones
//! the hub writes into a container agent's home ([`agent_hub::agents::hooks::install`]).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::BIN;
use crate::model_standin::{ModelStandIn, AFTER_TOOL, INSTANT};
use crate::real_cli::{
    cli, hub_without_status_file, report_latency, session_request, Home, RealCli, T,
};
use crate::real_cli_gemini::{ready, QUESTION};
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

/// A session request given hub access as agent `agent` (its hooks report with it).
pub fn with_hub_access(request: &mut Value, agent: &str) {
    request["hub_access"] = json!(true);
    request["owner_agent_id"] = json!(agent);
}

/// Four instant turns, each typed at the prompt marked `glyph` (`❯`, `›`, `>`): each ends
/// `idle` from `source`. Returns how long after the pane showed each answer the hub said so.
async fn instant_turns_end_idle_by(run: &RealCli<'_>, glyph: &str, source: &str) -> Vec<Duration> {
    let mut idle = Vec::new();
    for i in 0..4 {
        let prompt = format!("say something {i}");
        run.submit(&prompt).await;
        let asked = format!("{glyph} {prompt}");
        // This prompt with an answer below it (the first turns scroll out of the pane).
        let answered = |p: &str| p.rfind(&asked).is_some_and(|at| p[at..].contains(INSTANT));
        idle.push(run.latency(answered, "idle").await);
        source_is(run, "idle", source).await;
    }
    idle
}

/// Whether the pane shows the answer after a tool call below the latest `prompt` (the answer of
/// an earlier call may still be on the screen).
fn tool_answered(pane: &str, prompt: &str) -> bool {
    pane.rsplit_once(prompt)
        .is_some_and(|(_, after)| after.contains(AFTER_TOOL))
}

/// Prints (and bounds) the latencies of `idle` and `blocked` reports, and of both together,
/// as `NAME: idle)`, `NAME: blocked)` and `NAME)`.
fn report_signal_latency(name: &str, idle: &mut [Duration], blocked: &mut [Duration]) {
    let mut all: Vec<Duration> = idle.iter().chain(blocked.iter()).copied().collect();
    report_latency(&format!("{name}: idle)"), idle);
    report_latency(&format!("{name}: blocked)"), blocked);
    report_latency(&format!("{name})"), &mut all);
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
    with_hub_access(&mut request, "claude-hooked");
    let (status, v) = hub.post("/v1/pty/sessions", request).await;
    assert_eq!(status, 200, "{v}");
    let run = RealCli::started(&hub, home, &v);
    run.claude_prompt().await;
    run.wait_state("idle").await;

    // Turns end `idle` by the Stop hook.
    let mut idle = instant_turns_end_idle_by(&run, "❯", "hook:Stop").await;

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

    report_signal_latency("claude-code (hooks", &mut idle, &mut blocked);
}

/// Writes what the hub writes at a container agent's start for the shipped profile of
/// `cli_type` into `home` (its `[signals] install`, in the CLI's default config dir), running
/// this build's `agent-hub`.
pub fn install_hooks(home: &Path, cli_type: &str) {
    let profile =
        agent_hub::agent_state::profile::ProfileSet::default().for_cli_type(Some(cli_type));
    let install = profile
        .signals
        .install
        .expect("the profile installs its hooks");
    let config = agent_hub::agents::config_dir::spec_of_install(install).under_home;
    let config = home.join(config);
    agent_hub::agents::hooks::install(install, &config, BIN, &profile.signals.hooks).unwrap();
}

/// Codex on its `notify` (the hub's `~/.codex/config.toml` entry): each turn's end is `idle`
/// from `hook:agent-turn-complete`; the approval question is `blocked` from the screen (Codex
/// 0.169 notifies nothing when it asks).
#[tokio::test]
async fn codex_turns_end_idle_by_its_notify_and_its_questions_block_from_the_screen() {
    let Some(codex) = cli("codex") else { return };
    let standin = ModelStandIn::start().await;
    let hub = TestHub::start().await;
    let home = Home::new();
    let env = home.codex_env_in(&standin, ".codex");
    install_hooks(home.path(), "codex");
    let config = std::fs::read_to_string(home.path().join(".codex/config.toml")).unwrap();
    assert!(config.starts_with(&format!("notify = [\"{BIN}\", \"hook\", \"--notify\"]\n")));
    let mut request = session_request(&codex, "codex", &home, env);
    with_hub_access(&mut request, "codex-notify");
    let (status, v) = hub.post("/v1/pty/sessions", request).await;
    assert_eq!(status, 200, "{v}");
    let run = RealCli::started(&hub, home, &v);
    run.wait_state("idle").await;

    let mut idle = instant_turns_end_idle_by(&run, "›", "hook:agent-turn-complete").await;

    let mut blocked = Vec::new();
    for i in 0..2 {
        let prompt = format!("please run a tool {i}");
        run.submit(&prompt).await;
        let question = "Would you like to run the following command?";
        blocked.push(run.latency(|p| p.contains(question), "blocked").await);
        let asked = run.state().await;
        assert_eq!(asked["source"], "screen:rule approval", "{asked}");
        let done = |p: &str| !p.contains(question) && tool_answered(p, &prompt);
        idle.push(run.answer("y", done).await);
        source_is(&run, "idle", "hook:agent-turn-complete").await;
    }
    // (`blocked` from the screen: Codex notifies no question.)
    report_signal_latency("codex (notify", &mut idle, &mut blocked);
}

/// Gemini CLI on its hooks (the hub's `~/.gemini/settings.json` entries): each turn's end is
/// `idle` from `hook:AfterAgent`, the permission question `blocked` from `hook:Notification`;
/// a denied question (which fires no hook) is read from the screen after the grace.
#[tokio::test]
async fn gemini_cli_states_come_from_its_own_hooks() {
    let Some(gemini) = cli("gemini") else { return };
    let standin = ModelStandIn::start().await;
    let hub = TestHub::start().await;
    let (run, proj) = crate::real_cli_gemini::start(&hub, &gemini, &standin, None, true).await;
    ready(&run).await;
    run.wait_state("idle").await;

    let mut idle = instant_turns_end_idle_by(&run, ">", "hook:AfterAgent").await;

    let mut blocked = Vec::new();
    for i in 0..2 {
        let prompt = format!("please run a tool {i}");
        run.submit(&prompt).await;
        blocked.push(run.latency(|p| p.contains(QUESTION), "blocked").await);
        source_is(&run, "blocked", "hook:Notification").await;
        // The screen agrees (the hook may come first): the report carries its reading (the
        // title `✋  Action Required`, which the profile reads first).
        let agrees = wait_until(T, || async {
            let s = run.state().await;
            s["source"] == "hook:Notification"
                && s["evidence"].to_string().contains("Action Required")
        })
        .await;
        assert!(agrees, "{}", run.state().await);
        let done = |p: &str| !p.contains(QUESTION) && tool_answered(p, &prompt);
        idle.push(run.answer("Enter", done).await);
        source_is(&run, "idle", "hook:AfterAgent").await;
        assert!(proj.join("made-by-tool.txt").exists(), "{}", run.pane());
        std::fs::remove_file(proj.join("made-by-tool.txt")).unwrap();
    }

    // Denied: no hook fires; the screen's prompt wins over the question's signal after the
    // grace (2 s).
    run.submit("please run a tool").await;
    assert!(run.shows(QUESTION, T).await, "{}", run.pane());
    source_is(&run, "blocked", "hook:Notification").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    run.keys(&["Escape"]).await;
    let s = source_is(
        &run,
        "idle",
        "screen:rule prompt (over hook:Notification: the screen read idle for 2000 ms)",
    )
    .await;
    assert!(!proj.join("made-by-tool.txt").exists(), "{s}");

    report_signal_latency("gemini-cli (hooks", &mut idle, &mut blocked);
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

    let mut idle = instant_turns_end_idle_by(&run, "❯", "status-file:idle").await;

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

    report_signal_latency("claude-code (status file", &mut idle, &mut blocked);
}
