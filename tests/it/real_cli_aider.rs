//! The real Aider (`aider-chat` from PyPI, pinned in tests/agent-clis/requirements.txt and
//! installed into tests/agent-clis/venv) in host tmux sessions through the hub, against the
//! stand-in's Chat Completions API ([`crate::model_standin`]), offline: no update check, no
//! analytics, the model's metadata from a file, litellm's price map from its package. Aider
//! works in a git repository holding one committed file, [`MENTIONED_FILE`]: a reply naming it
//! makes Aider ask `Add file to the chat?`, its only question that a reply without an edit
//! raises. Skipped without Aider, as the other real-CLI tests are.
//!
//! `AGENT_HUB_RECORD_SCREENS=DIR` writes the pane at each state the first test asserts to
//! `DIR/STATE-NAME.txt` (how tests/fixtures/screens/aider was recorded).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::model_standin::{ModelStandIn, AFTER_TOOL, INSTANT, MENTIONED_FILE};
use crate::real_cli::{
    cli, last_line, policy_hub_with_stuck_after, report_latency, session_request, Home, RealCli, T,
};
use crate::support::{wait_until, TestHub};

/// The question a reply naming [`MENTIONED_FILE`] raises.
pub const ADD_FILE: &str = "Add file to the chat?";

/// The pinned version (the one line of tests/agent-clis/requirements.txt that is not a comment).
fn pinned_version() -> String {
    include_str!("../agent-clis/requirements.txt")
        .lines()
        .find_map(|l| l.strip_prefix("aider-chat=="))
        .expect("aider-chat pinned in tests/agent-clis/requirements.txt")
        .trim()
        .to_string()
}

/// Aider's environment and files for `home`: its repository (`proj`, one committed file), a
/// git identity, the stand-in as an OpenAI-compatible API, the model's metadata (no lookup of the context window
/// on the network) and `~/.aider/installs.json` saying this version has run before (its first
/// run loads litellm before the prompt and takes 10 s or more instead of 3).
fn aider_env(home: &Home, standin: &ModelStandIn, aider: &Path) -> Value {
    let proj = PathBuf::from(home.proj());
    std::fs::write(proj.join(MENTIONED_FILE), "print(\"hello\")\n").unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", MENTIONED_FILE],
        &["commit", "-q", "-m", "A file for Aider to be pointed at"],
    ] {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(&proj)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
    let dir = home.dir.path();
    // Aider asks for a git identity at start when it has none.
    std::fs::write(
        dir.join(".gitconfig"),
        "[user]\n\tname = Test\n\temail = test@example.com\n",
    )
    .unwrap();
    write_model_metadata(dir, 0.0, 0.0);
    // Keyed by `str((version, sys.executable))`: the venv's interpreter, Aider's shebang.
    let script = std::fs::read_to_string(aider).unwrap();
    let python = script
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("#!")
        .trim();
    std::fs::create_dir_all(dir.join(".aider")).unwrap();
    std::fs::write(
        dir.join(".aider/installs.json"),
        json!({ format!("('{}', '{python}')", pinned_version()): true }).to_string(),
    )
    .unwrap();
    json!({
        "HOME": dir,
        "OPENAI_API_BASE": format!("{}/v1", standin.base),
        "OPENAI_API_KEY": "sk-standin",
        // litellm's price map from its package, not fetched when it is imported.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    })
}

/// The stand-in model's metadata for Aider in `home` (`model.metadata.json`, which
/// [`aider_args`] name), priced at `input` and `output` dollars a token (Aider shows no cost
/// for a model priced at 0).
pub fn write_model_metadata(home: &Path, input: f64, output: f64) {
    std::fs::write(
        home.join("model.metadata.json"),
        json!({"openai/standin": {"max_input_tokens": 32768, "max_output_tokens": 4096,
               "input_cost_per_token": input, "output_cost_per_token": output,
               "litellm_provider": "openai", "mode": "chat"}})
        .to_string(),
    )
    .unwrap();
}

/// Aider's arguments: the stand-in's model, and nothing that reaches beyond it or asks at start.
fn aider_args(home: &Home) -> Value {
    json!([
        "--model",
        "openai/standin",
        "--model-metadata-file",
        home.dir.path().join("model.metadata.json"),
        "--no-check-update",
        "--analytics-disable",
        "--no-show-model-warnings",
        "--no-gitignore",
        "--no-show-release-notes",
    ])
}

/// The request that starts Aider in `home` (its files written): 120x30, the hub's default
/// size, as the recorded screens.
pub fn aider_request(home: &Home, standin: &ModelStandIn, aider: &Path) -> Value {
    let env = aider_env(home, standin, aider);
    let mut request = session_request(aider, "aider", home, env);
    request["args"] = aider_args(home);
    request["cols"] = json!(120);
    request["rows"] = json!(30);
    request
}

/// Starts Aider in a tmux session of `hub` in a new home, under `policy` if given, and waits
/// for its prompt.
async fn start_aider<'a>(
    hub: &'a TestHub,
    aider: &Path,
    standin: &ModelStandIn,
    policy: Option<&str>,
) -> RealCli<'a> {
    let home = Home::new();
    let request = aider_request(&home, standin, aider);
    let run = RealCli::launch(hub, home, request, policy).await;
    prompt_up(&run).await;
    run
}

/// Waits for Aider's first prompt.
pub async fn prompt_up(run: &RealCli<'_>) {
    // About 3 s on an idle machine; the whole suite on two cores can take much longer.
    let up = wait_until(Duration::from_secs(90), || async { at_prompt(&run.pane()) }).await;
    assert!(up, "no Aider prompt; pane:\n{}", run.pane());
}

/// Whether the pane's last line is Aider's empty prompt `>`.
fn at_prompt(pane: &str) -> bool {
    last_line(pane) == ">"
}

/// Idle at its prompt; working from the submit to the end of a slow stream (no spinner while
/// the words arrive, and no prompt below them); blocked on `Add file to the chat?`; idle again
/// after the answer. Each read through the hub's state API, with the latency of each change.
#[tokio::test]
async fn aider_states_on_the_real_cli() {
    let Some(aider) = cli("aider") else { return };
    let standin = ModelStandIn::start().await;
    let hub = TestHub::start().await;
    let run = start_aider(&hub, &aider, &standin, None).await;

    run.idle_at_prompt("aider", &format!("aider {}", pinned_version()))
        .await;
    run.record("idle-prompt", false);

    let mut samples = Vec::new();
    // Instant answers: idle again. Before the first, Aider scans the repository for its map
    // (seconds, with a spinner and no other change): working.
    for i in 0..3 {
        let prompt = format!("say something {i}");
        run.submit(&prompt).await;
        if i == 0 {
            let mapped = |p: &str| p.contains("Updating repo map") || p.contains(INSTANT);
            run.working_until(T, mapped, |_| false).await;
            if run.pane().contains("Updating repo map") {
                run.record("working-updating-repo-map", false);
            }
        }
        // This prompt with an answer below it (earlier turns may scroll out of the pane).
        let answered =
            |p: &str| p.rfind(&prompt).is_some_and(|at| p[at..].contains(INSTANT)) && at_prompt(p);
        samples.push(run.latency(answered, "idle").await);
    }

    // A line typed at the prompt and not sent: the same screen as for the second after Enter
    // while the repository map is built, so `working`; erased (C-u), idle again.
    let typed: Vec<String> = "answer slowly".chars().map(String::from).collect();
    run.keys(&typed.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let shown = wait_until(T, || async { last_line(&run.pane()) == "> answer slowly" }).await;
    assert!(shown, "{}", run.pane());
    let typing = run.wait_state("working").await;
    assert_eq!(typing["rule"], "reply", "{typing}");
    run.record("working-typed-not-sent", false);
    run.keys(&["C-u"]).await;
    assert_eq!(run.wait_state("idle").await["rule"], "prompt");

    // A slow stream: working from the submit on (the repository map, `Waiting for` with a
    // spinner, then the words growing a second apart with nothing below them), never
    // anything else, until the prompt is back.
    run.submit("answer slowly").await;
    let waited = run
        .working_until(
            T,
            |p| p.contains("Waiting for") || p.contains("word0"),
            |_| false,
        )
        .await;
    if run.pane().contains("Waiting for") {
        run.record("working-waiting-for-model", false);
    }
    let streamed = run
        .working_until(T, |p| p.contains("word2"), |_| false)
        .await;
    run.record("working-streaming", false);
    let growing = |e: &str| e.starts_with("word0 word1 word2");
    run.works_by(Duration::from_secs(2), "reply", growing).await;
    let rest = run
        .working_until(T, |p| p.contains("word7"), |_| false)
        .await;
    println!("aider working rules: {waited:?} {streamed:?} {rest:?}");
    samples.push(run.latency(at_prompt, "idle").await);
    run.record("idle-after-slow-answer", false);

    // A reply naming a file of the repository: Aider asks to add it; blocked.
    run.submit("please run a tool").await;
    let asking = |p: &str| p.contains(ADD_FILE);
    samples.push(run.latency(asking, "blocked").await);
    let blocked = run.state().await;
    assert_eq!(blocked["rule"], "question", "{blocked}");
    assert!(
        blocked["evidence"].to_string().contains(ADD_FILE),
        "{blocked}"
    );
    run.record("blocked-add-file", false);

    // Yes: Aider adds the file and asks the model again by itself, which answers at once;
    // idle, with the file listed above the prompt.
    tokio::time::sleep(Duration::from_millis(300)).await;
    run.keys(&["y", "Enter"]).await;
    if last_line(&run.pane()).ends_with("[Yes]: y") {
        run.record("working-answered", false);
    }
    let done = |p: &str| p.contains(AFTER_TOOL) && at_prompt(p);
    samples.push(run.latency(done, "idle").await);
    let pane = run.pane();
    let lines: Vec<&str> = pane.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines[lines.len() - 2..], [MENTIONED_FILE, ">"], "{pane}");
    run.record("idle-after-answering", false);
    report_latency("aider", &mut samples);

    // Held still: a stable idle, however long nobody looks.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(run.state().await["state"], "idle");

    run.submit("/exit").await;
    run.wait_state("exited").await;
    let calls = standin.requests();
    assert!(
        calls.iter().all(|c| c == "POST /v1/chat/completions"),
        "{calls:?}"
    );
    assert_eq!(
        standin.turns_with("I added these files to the chat").len(),
        1,
        "{calls:?}"
    );
}

/// An idle policy (3 s) on a real Aider: never stopped while a reply streams a word a second,
/// nor reported stuck with a stuck detector of 3 s (the growing words are progress); stopped on
/// time once idle after its question was answered.
#[tokio::test]
async fn an_idle_policy_stops_real_aider_on_time_and_never_while_it_streams() {
    let Some(aider) = cli("aider") else { return };
    let standin = ModelStandIn::start().await;
    let shipped = include_str!("../../policies/agents/aider.toml");
    let (_dir, hub) = policy_hub_with_stuck_after("aider", shipped, 3).await;
    let mut events = hub.hub.subscribe_events();
    let run = start_aider(&hub, &aider, &standin, Some("fast-idle")).await;

    // A first message: Aider maps the repository first (seconds with nothing but a spinner,
    // which a stuck detector of 3 s would call stuck).
    run.submit("say something").await;
    assert!(run.shows(INSTANT, T).await, "{}", run.pane());
    let answered = wait_until(T, || async { at_prompt(&run.pane()) }).await;
    assert!(answered, "{}", run.pane());

    // A slow stream of 8 s, longer than the 3 s idle timeout: never stopped, never stuck.
    run.streams_unstopped(&mut events, |p| p.contains("word7") && at_prompt(p))
        .await;

    // The question, answered; then idle, and stopped 3 s after its last activity.
    run.answered_then_stopped_on_time(ADD_FILE, &["y", "Enter"], events)
        .await;
}
