//! The real Gemini CLI (pinned in tests/agent-clis/package.json) in host tmux sessions through
//! the hub, against the stand-in of the Gemini API ([`crate::model_standin`]), offline: every
//! state its profile (`policies/agents/gemini-cli.toml`) claims, how soon the hub reports a
//! change the screen shows, and an idle policy stopping it. Skips without the CLI, as
//! [`crate::real_cli`] does.
//!
//! `AGENT_HUB_RECORD_SCREENS=DIR` writes the screens the test passes through (and their window
//! titles) to `DIR/STATE-NAME.txt` and `.title`, the form of `tests/fixtures/screens/gemini-cli`
//! (re-record them when the pinned version changes).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::model_standin::{ModelStandIn, AFTER_TOOL, INSTANT};
use crate::real_cli::{
    cli, policy_hub_with_stuck_after, report_latency, session_request, Home, RealCli, T,
};
use crate::support::{wait_until, TestHub};

/// The size the fixtures are recorded at (Gemini CLI's footer and boxes are laid out for it).
const COLS: u16 = 120;
const ROWS: u16 = 30;
/// Its input line, at rest and while a reply streams above it.
const INPUT_LINE: &str = "Type your message";
/// Its header, drawn once it has initialized (it takes prompts from then on).
const HEADER: &str = "Gemini CLI v";
pub const QUESTION: &str = "Allow execution of [Shell]?";

/// Gemini CLI's settings in `home` (`~/.gemini/settings.json`): the API key (the stand-in's)
/// chosen, so no question about how to sign in; no folder-trust question; no usage statistics,
/// update check, telemetry or IDE connection (nothing but the stand-in is called); the model
/// pinned (the default "Auto" asks a router model before every turn); no tips and no warning
/// that tmux lacks true colour.
pub fn write_gemini_settings(home: &Path) {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = json!({
        "security": { "auth": { "selectedType": "gemini-api-key" },
                      "folderTrust": { "enabled": false } },
        "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
        "privacy": { "usageStatisticsEnabled": false },
        "telemetry": { "enabled": false },
        "ide": { "enabled": false },
        "model": { "name": "gemini-2.5-flash" },
        "ui": { "hideTips": true, "showCompatibilityWarnings": false },
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
}

/// Gemini CLI's environment: its home and the stand-in (any key will do).
pub fn gemini_env(standin: &ModelStandIn, home: &Path) -> Value {
    json!({
        "HOME": home,
        "GEMINI_API_KEY": "standin-key",
        "GOOGLE_GEMINI_BASE_URL": standin.base,
    })
}

/// Starts Gemini CLI (with `policy`, if any) in a new home at the fixtures' size; returns it
/// and its project directory.
///
/// It draws nothing and sets no title for seconds (node loading its bundle). Then its title
/// says `Ready` and its input line is up, a second or more (under load) before it has
/// initialized: a prompt sent then is queued (`Initializing... Prompts will be queued.`) and
/// joined to the next one. The sign that it is ready is its header, drawn once initialized.
///
/// `hooked`: with the hooks the hub writes for the profile (`[signals] install`), run with the
/// session's own hub access.
pub async fn start<'a>(
    hub: &'a TestHub,
    gemini: &Path,
    standin: &ModelStandIn,
    policy: Option<&str>,
    hooked: bool,
) -> (RealCli<'a>, PathBuf) {
    let home = Home::new();
    write_gemini_settings(home.path());
    let proj = PathBuf::from(home.proj());
    let mut request = session_request(gemini, "gemini", &home, gemini_env(standin, home.path()));
    if hooked {
        crate::real_cli_hooks::install_hooks(home.path(), "gemini");
        crate::real_cli_hooks::with_hub_access(&mut request, "gemini-hooked");
    }
    request["cols"] = json!(COLS);
    request["rows"] = json!(ROWS);
    (RealCli::launch(hub, home, request, policy).await, proj)
}

/// Waits until Gemini CLI takes prompts (see [`start`]).
pub async fn ready(run: &RealCli<'_>) {
    // A start on a loaded machine can take well over its usual few seconds.
    let shown = run.shows(INPUT_LINE, Duration::from_secs(90)).await
        && run.shows(HEADER, Duration::from_secs(90)).await;
    assert!(
        shown,
        "Gemini CLI not ready: {}\npane:\n{}",
        run.state().await,
        run.pane()
    );
}

#[tokio::test]
async fn gemini_cli_states_on_the_real_cli() {
    let Some(gemini) = cli("gemini") else { return };
    let standin = ModelStandIn::start().await;
    let hub = TestHub::start().await;
    let (run, proj) = start(&hub, &gemini, &standin, None, false).await;

    // Starting: working until it sets its first title (it draws nothing before).
    let starting = run.state().await;
    assert_eq!(
        (starting["state"].as_str(), starting["rule"].as_str()),
        (Some("working"), Some("starting")),
        "{starting}\npane:\n{}",
        run.pane()
    );
    ready(&run).await;

    // Idle at its input line, read by the Gemini CLI profile (cli_type "gemini").
    let idle = run.wait_state("idle").await;
    assert_eq!(idle["profile"], "gemini-cli", "{idle}");
    assert_eq!(idle["rule"], "prompt", "{idle}");
    assert!(
        idle["profile_checked_with"][0]
            .as_str()
            .unwrap()
            .starts_with("gemini-cli "),
        "{idle}"
    );
    run.record("idle-prompt", true);

    let mut samples = Vec::new();
    // Instant answers: idle again.
    for i in 0..3 {
        let prompt = format!("say something {i}");
        run.submit(&prompt).await;
        let asked = format!("> {prompt}");
        // This prompt with an answer below it (earlier turns may scroll out of the pane).
        let answered = |p: &str| p.rfind(&asked).is_some_and(|at| p[at..].contains(INSTANT));
        samples.push(run.latency(answered, "idle").await);
    }
    run.record("idle-after-instant-answer", true);
    // Each prompt went as a turn of its own (none queued and joined to the next).
    let sent = last_user_texts(&standin);
    for i in 0..3 {
        let prompt = format!("say something {i}");
        assert!(sent.contains(&prompt), "{prompt:?} not a turn: {sent:?}");
    }

    // A slow stream: working while the words arrive, a word a second; never idle meanwhile.
    run.submit("answer slowly").await;
    run.wait_state("working").await;
    assert!(run.shows("word2", T).await, "{}", run.pane());
    run.record("working-slow-stream", true);
    // Read from the title (its frame and its title come in either order at first).
    let working = run.state().await;
    assert_eq!(working["rule"], "title-working", "{working}");
    run.holds("working", Duration::from_secs(3)).await;
    samples.push(run.latency(|p| p.contains("word7"), "idle").await);
    run.record("idle-after-slow-answer", true);

    // A shell tool call asks for permission: blocked, on each highlighted choice; allowed once,
    // the tool runs (the file is made) and the agent is idle again.
    samples.push(ask_for_the_shell(&run).await);
    let blocked = run.state().await;
    run.record("blocked-shell-permission", true);
    for (key, choice) in [
        ("Down", "● 2. Allow for this session"),
        ("Up", "● 1. Allow once"),
    ] {
        run.keys(&[key]).await;
        assert!(run.shows(choice, T).await, "{choice}: {}", run.pane());
        assert_eq!(run.wait_state("blocked").await["state"], "blocked");
        if key == "Down" {
            run.record("blocked-shell-permission-2-highlighted", true);
        }
    }
    assert!(
        blocked["evidence"][0]
            .as_str()
            .is_some_and(|e| e.starts_with("title: ✋  Action Required")),
        "{blocked}"
    );
    let done = |p: &str| p.contains(AFTER_TOOL) && !p.contains(QUESTION);
    samples.push(run.answer("Enter", done).await);
    assert!(proj.join("made-by-tool.txt").exists(), "{}", run.pane());
    run.record("idle-after-allowing", true);

    // Asked again and denied (Esc): idle again, nothing run.
    std::fs::remove_file(proj.join("made-by-tool.txt")).unwrap();
    samples.push(ask_for_the_shell(&run).await);
    let denied = |p: &str| p.contains("Request cancelled") && !p.contains(QUESTION);
    samples.push(run.answer("Escape", denied).await);
    assert!(!proj.join("made-by-tool.txt").exists());
    run.record("idle-after-denying", true);

    // An API error: idle again, with the error on screen.
    run.submit("please fail").await;
    samples.push(run.latency(|p| p.contains("stand-in error"), "idle").await);
    run.record("idle-after-api-error", true);
    report_latency("gemini-cli", &mut samples);

    // Exited: Ctrl-C twice (the first asks for the second).
    run.keys(&["C-c"]).await;
    run.shows("again to exit", T).await;
    run.keys(&["C-c"]).await;
    run.wait_state("exited").await;
    let calls = standin.requests();
    assert!(
        calls
            .iter()
            .all(|c| c.starts_with("POST /v1beta/models/gemini-2.5-flash:")),
        "{calls:?}"
    );
}

/// An idle policy (3 s) on a real Gemini CLI: never stopped while a reply streams a word a
/// second, nor reported stuck with a stuck detector of 2 s; stopped on time once idle after a
/// tool call.
#[tokio::test]
async fn an_idle_policy_stops_real_gemini_cli_on_time_and_never_while_it_streams() {
    let Some(gemini) = cli("gemini") else { return };
    let standin = ModelStandIn::start().await;
    let shipped = include_str!("../../policies/agents/gemini-cli.toml");
    let (_dir, hub) = policy_hub_with_stuck_after("gemini-cli", shipped, 2).await;
    let mut events = hub.hub.subscribe_events();
    let (run, proj) = start(&hub, &gemini, &standin, Some("fast-idle"), false).await;
    // Starting for seconds with a still, empty screen: not idle, so not stopped.
    ready(&run).await;
    run.wait_state("idle").await;
    run.streams_unstopped(&mut events, |p| p.contains("word7"))
        .await;

    // A tool call, allowed (the tool ran); then idle, and stopped 3 s after its last activity.
    run.answered_then_stopped_on_time(QUESTION, &["Enter"], events)
        .await;
    assert!(proj.join("made-by-tool.txt").exists());
}

/// Asks for a shell tool call, which Gemini CLI asks permission for: `blocked` once the screen
/// shows the question, and by the title once it has come (the box and the title come in either
/// order). Returns the latency of the first report.
async fn ask_for_the_shell(run: &RealCli<'_>) -> Duration {
    run.submit("please run a tool").await;
    let took = run.latency(|p| p.contains(QUESTION), "blocked").await;
    let titled = wait_until(T, || async {
        run.state().await["rule"] == "title-action-required"
    })
    .await;
    assert!(titled, "{}", run.state().await);
    took
}

/// The last text of each Gemini request (the user's words of each turn).
fn last_user_texts(standin: &ModelStandIn) -> Vec<String> {
    standin
        .turns_with("contents")
        .iter()
        .filter_map(|body| {
            let body: Value = serde_json::from_str(body).ok()?;
            let last = body["contents"].as_array()?.last()?.clone();
            let text = last["parts"].as_array()?.last()?["text"]
                .as_str()?
                .to_string();
            Some(text)
        })
        .collect()
}
