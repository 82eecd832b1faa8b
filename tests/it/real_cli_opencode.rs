//! The real opencode (npm `opencode-ai`, pinned in tests/agent-clis/package.json) in host tmux
//! sessions through the hub, against the stand-in's Chat Completions API
//! ([`crate::model_standin`]) as a provider of its config, offline: every state its profile
//! (`policies/agents/opencode.toml`) claims, how soon the hub reports a change the screen
//! shows, and an idle policy stopping it. Skips without the CLI, as [`crate::real_cli`] does.
//!
//! `AGENT_HUB_RECORD_SCREENS=DIR` writes the pane at each state the first test asserts to
//! `DIR/STATE-NAME.txt` (how tests/fixtures/screens/opencode was recorded, at the hub's default
//! 80x24, the size the fixtures are read at).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::model_standin::{ModelStandIn, AFTER_TOOL, INSTANT};
use crate::real_cli::{
    cli, last_line, policy_hub_with_stuck_after, report_latency, session_request, Home, RealCli, T,
};
use crate::support::{wait_until, TestHub};

/// The empty input box of a new session; opencode takes prompts once it is drawn.
const INPUT_BOX: &str = "Ask anything";
/// Its permission question (the input box gives way to it).
pub const QUESTION: &str = "△ Permission required";
/// How long the first turn of a process may take: opencode sets up its provider first, 8 to
/// 15 s with the spinner turning on a loaded machine (the whole suite on two cores: longer).
pub const FIRST_TURN: Duration = Duration::from_secs(90);

/// The pinned version (`opencode-ai` in tests/agent-clis/package.json).
fn pinned_version() -> String {
    let manifest: Value = serde_json::from_str(include_str!("../agent-clis/package.json")).unwrap();
    manifest["dependencies"]["opencode-ai"]
        .as_str()
        .expect("opencode-ai pinned in tests/agent-clis/package.json")
        .to_string()
}

/// opencode's config and environment for `home`: the stand-in as an OpenAI-compatible provider
/// (its `@ai-sdk/openai-compatible` is built into the binary) and its only model, bash asking
/// before it runs (1.18.33 allows it by default), and nothing that reaches beyond the stand-in:
/// no fetch of the models.dev catalogue, no update check, no sharing. At start opencode also
/// installs `@opencode-ai/plugin` with npm into each config directory (no setting turns that
/// off); it skips that when the directory has a `node_modules` and a lock naming every
/// dependency, which is what is put there.
fn opencode_env(home: &Home, standin: &ModelStandIn) -> Value {
    let dir = home.path();
    let config = dir.join(".config/opencode");
    std::fs::create_dir_all(config.join("node_modules")).unwrap();
    let plugin = json!({ "@opencode-ai/plugin": pinned_version() });
    std::fs::write(
        config.join("package.json"),
        json!({ "dependencies": plugin }).to_string(),
    )
    .unwrap();
    std::fs::write(
        config.join("package-lock.json"),
        json!({ "lockfileVersion": 3, "packages": { "": { "dependencies": plugin } } }).to_string(),
    )
    .unwrap();
    let settings = json!({
        "autoupdate": false,
        "share": "disabled",
        "model": "standin/standin-model",
        "small_model": "standin/standin-model",
        "provider": { "standin": {
            "npm": "@ai-sdk/openai-compatible", "name": "Standin",
            "options": { "baseURL": format!("{}/v1", standin.base), "apiKey": "sk-standin" },
            "models": { "standin-model": { "name": "Standin Model" } },
        } },
        "permission": { "bash": "ask" },
    });
    std::fs::write(config.join("opencode.json"), settings.to_string()).unwrap();
    json!({
        "HOME": dir,
        "XDG_CONFIG_HOME": dir.join(".config"),
        "XDG_DATA_HOME": dir.join(".local/share"),
        "XDG_CACHE_HOME": dir.join(".cache"),
        "XDG_STATE_HOME": dir.join(".local/state"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    })
}

/// Starts opencode in a new home (under `policy`, if given) and waits until it takes prompts;
/// returns it and its project directory. It draws nothing for seconds (10 or more under load)
/// before its input box.
pub async fn start<'a>(
    hub: &'a TestHub,
    opencode: &Path,
    standin: &ModelStandIn,
    policy: Option<&str>,
) -> (RealCli<'a>, PathBuf) {
    let home = Home::new();
    let proj = PathBuf::from(home.proj());
    let request = session_request(opencode, "opencode", &home, opencode_env(&home, standin));
    let run = RealCli::launch(hub, home, request, policy).await;
    let shown = run.shows(INPUT_BOX, Duration::from_secs(90)).await;
    assert!(
        shown,
        "opencode not ready: {}\npane:\n{}",
        run.state().await,
        run.pane()
    );
    (run, proj)
}

/// Whether opencode is at rest: its footer, the last row, ends `ctrl+p commands` without
/// `esc interrupt` (the same row while it works).
fn at_rest(pane: &str) -> bool {
    let footer = last_line(pane);
    footer.ends_with("ctrl+p commands") && !footer.contains("interrupt")
}

/// Asks for a tool call, which opencode asks permission for: `blocked` once the screen shows
/// the question. Returns the latency of that report.
async fn ask_for_the_shell(run: &RealCli<'_>) -> Duration {
    run.submit("please run a tool").await;
    let took = run.latency(|p| p.contains(QUESTION), "blocked").await;
    let blocked = run.state().await;
    assert_eq!(blocked["rule"], "permission", "{blocked}");
    assert!(
        blocked["evidence"].to_string().contains(QUESTION),
        "{blocked}"
    );
    took
}

/// Idle at its input box; working while a reply streams; blocked on its permission question;
/// idle again after the answer (the tool ran, or was rejected). Each read through the hub's
/// state API, with the latency of each change.
#[tokio::test]
async fn opencode_states_on_the_real_cli() {
    let Some(opencode) = cli("opencode") else {
        return;
    };
    let standin = ModelStandIn::start().await;
    let hub = TestHub::start().await;
    let (run, proj) = start(&hub, &opencode, &standin, None).await;

    run.idle_at_prompt("opencode", &format!("opencode {}", pinned_version()))
        .await;
    run.record("idle-prompt", false);

    let mut samples = Vec::new();
    // Instant answers: idle again. The first turn (see [`FIRST_TURN`]) is working throughout
    // (the prompt left in the input box for a second or two, blank screens, the session's view
    // without the spinner for a second or more, then the spinner until the answer), but for
    // one moment: between the prompt and the blank screens opencode draws its empty start
    // screen again (for 0.1 s; under load for over the 0.3 s a state must last to be
    // reported), which no rule can tell from the start screen: idle. It is waited for longer
    // than a latency sample may take.
    for i in 0..3 {
        let prompt = format!("say something {i}");
        run.submit(&prompt).await;
        // This prompt with an answer below it (earlier turns scroll out of the pane).
        let answered =
            |p: &str| p.rfind(&prompt).is_some_and(|at| p[at..].contains(INSTANT)) && at_rest(p);
        if i > 0 {
            samples.push(run.latency(answered, "idle").await);
            continue;
        }
        let start_screen =
            |s: &Value| s["rule"] == "prompt" && s["evidence"].to_string().contains(INPUT_BOX);
        let spinner = |p: &str| p.contains("esc interrupt");
        let before_spinner = run.working_until(T, spinner, start_screen).await;
        run.record("working-first-turn", false);
        let spinning = run.working_until(FIRST_TURN, answered, |_| false).await;
        println!("opencode first turn working rules: {before_spinner:?} {spinning:?}");
        run.wait_state("idle").await;
    }
    run.record("idle-after-instant-answer", false);

    // A slow stream: working while the words arrive, a word a second; never idle meanwhile.
    run.submit("answer slowly").await;
    assert!(run.shows("word2", T).await, "{}", run.pane());
    run.record("working-slow-stream", false);
    let spinning = |e: &str| e.contains("esc interrupt");
    run.works_by(Duration::from_secs(3), "esc-interrupt", spinning)
        .await;
    samples.push(
        run.latency(|p| p.contains("word7") && at_rest(p), "idle")
            .await,
    );
    run.record("idle-after-slow-answer", false);

    // bash asks for permission: blocked, whichever choice is highlighted (by colour only);
    // allowed once, the tool runs (the file is made) and the agent is idle again.
    samples.push(ask_for_the_shell(&run).await);
    run.record("blocked-bash-permission", false);
    for key in ["Right", "Left"] {
        tokio::time::sleep(Duration::from_millis(300)).await;
        run.keys(&[key]).await;
        run.holds("blocked", Duration::from_millis(500)).await;
    }
    let done = |p: &str| p.contains(AFTER_TOOL) && !p.contains(QUESTION) && at_rest(p);
    samples.push(run.answer("Enter", done).await);
    assert!(proj.join("made-by-tool.txt").exists(), "{}", run.pane());
    run.record("idle-after-allowing", false);

    // Asked again and rejected (the third choice): idle again, nothing run, no further turn.
    std::fs::remove_file(proj.join("made-by-tool.txt")).unwrap();
    samples.push(ask_for_the_shell(&run).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    run.keys(&["Right"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    run.keys(&["Right"]).await;
    let rejected = |p: &str| !p.contains(QUESTION) && at_rest(p);
    samples.push(run.answer("Enter", rejected).await);
    assert!(!proj.join("made-by-tool.txt").exists(), "{}", run.pane());
    run.record("idle-after-rejecting", false);
    report_latency("opencode", &mut samples);

    // Held still: a stable idle, however long nobody looks.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(run.state().await["state"], "idle");

    // Exited: Ctrl-C at an empty input box.
    run.keys(&["C-c"]).await;
    run.wait_state("exited").await;
    // Nothing but the stand-in's Chat Completions API, one title asked for the one session.
    let calls = standin.requests();
    assert!(
        calls.iter().all(|c| c == "POST /v1/chat/completions"),
        "{calls:?}"
    );
    assert_eq!(standin.turns_with("title generator").len(), 1, "{calls:?}");
    // The rejection ended the turn: the model was not told of it.
    assert_eq!(standin.turns_with("rejected permission").len(), 0);
}

/// An idle policy (3 s) on a real opencode: not stopped while it starts (seconds of a blank
/// screen); never stopped while a reply streams a word a second, nor reported stuck with a
/// stuck detector of 3 s (the growing words are progress); stopped on time once idle after its
/// question was answered.
#[tokio::test]
async fn an_idle_policy_stops_real_opencode_on_time_and_never_while_it_streams() {
    let Some(opencode) = cli("opencode") else {
        return;
    };
    let standin = ModelStandIn::start().await;
    let shipped = include_str!("../../policies/agents/opencode.toml");
    let (_dir, hub) = policy_hub_with_stuck_after("opencode", shipped, 3).await;
    let mut events = hub.hub.subscribe_events();
    let (run, proj) = start(&hub, &opencode, &standin, Some("fast-idle")).await;

    // A first message: opencode sets up its provider first (seconds with nothing but the
    // spinner, which a stuck detector of 3 s calls stuck).
    run.submit("say something").await;
    let answered = wait_until(FIRST_TURN, || async {
        let p = run.pane();
        p.contains(INSTANT) && at_rest(&p)
    })
    .await;
    assert!(answered, "{}", run.pane());

    run.streams_unstopped(&mut events, |p| p.contains("word7") && at_rest(p))
        .await;

    // A tool call, allowed (the tool ran); then idle, and stopped 3 s after its last activity.
    run.answered_then_stopped_on_time(QUESTION, &["Enter"], events)
        .await;
    assert!(proj.join("made-by-tool.txt").exists());
}
