//! What the real CLIs record of their model calls (#41), read as the hub reads it: two turns
//! of each CLI (an instant answer; a tool call, allowed, and the answer after the tool) against
//! the stand-in reporting [`CHOSEN`] tokens for every call, then the CLI's own records read
//! with [`agent_hub::usage`]: one call for each model call of the conversation the stand-in
//! answered, each with the chosen tokens (in Anthropic's meaning) and the model asked for; and
//! the hub, following the records of its host session, counts exactly those calls and prices
//! them by its table to the cent (Aider's at the cost Aider states).
//! Skips without a CLI, as the other real-CLI tests do. What each CLI records, and where, is
//! in `docs/research/cli-usage-records.md`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_hub::usage::files::RecordFiles;
use agent_hub::usage::records::{Format, Reader};
use agent_hub::usage::{aider, Call, Tokens};
use serde_json::Value;
use tokio::time::Instant;

use crate::model_standin::{Answered, ModelStandIn, Usage, AFTER_TOOL, INSTANT};
use crate::real_cli::{cli, session_request, Home, RealCli, T};
use crate::support::{wait_until, TestHub};

/// The tokens of every call, each kind its own number. Aider rounds a count of 1,000 or more
/// to a hundred and shows as `sent` the input, the cache read and twice the cache write: 2,000
/// here, exact as `2.0k`.
const CHOSEN: Usage = Usage {
    input: 1284,
    output: 34,
    cache_read: 560,
    cache_write: 78,
    reasoning: 9,
};

/// Starts `program` as `cli_type` in a new home, with the environment `env` makes for it;
/// returns it and the home's path (the home lives as long as the CLI).
async fn start<'a>(
    hub: &'a TestHub,
    program: &Path,
    cli_type: &str,
    env: impl FnOnce(&Home) -> Value,
) -> (RealCli<'a>, PathBuf) {
    let home = Home::new();
    let path = home.path().to_path_buf();
    let request = session_request(program, cli_type, &home, env(&home));
    (RealCli::launch(hub, home, request, None).await, path)
}

/// Two turns: `say something`, answered at once; `please run a tool`, which the CLI asks
/// `question` about, allowed with `yes`, and the answer after the tool. Idle after each.
async fn two_turns(run: &RealCli<'_>, question: &str, yes: &[&str]) {
    two_turns_within(run, T, question, yes).await;
}

/// [`two_turns`], the first answered within `first` (a CLI that sets up its provider on its
/// first turn).
async fn two_turns_within(run: &RealCli<'_>, first: Duration, question: &str, yes: &[&str]) {
    run.submit("say something").await;
    assert!(run.shows(INSTANT, first).await, "{}", run.pane());
    run.wait_state("idle").await;
    run.submit("please run a tool").await;
    assert!(run.shows(question, T).await, "{}", run.pane());
    // A pause, so the TUI takes the answer as keys and not as a paste.
    tokio::time::sleep(Duration::from_millis(300)).await;
    run.keys(yes).await;
    assert!(run.shows(AFTER_TOOL, T).await, "{}", run.pane());
    run.wait_state("idle").await;
}

/// The `.jsonl` files under `dir`, at any depth.
fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() {
            files.extend(jsonl_files(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            files.push(path);
        }
    }
    files
}

/// The calls the record files of `format` under `dir` hold, each file read from its start.
fn recorded(dir: &Path, format: Format) -> Vec<Call> {
    let mut calls = Vec::new();
    for file in jsonl_files(dir) {
        let mut reader = Reader::new(format);
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        calls.extend(text.lines().filter_map(|line| reader.line(line)));
    }
    calls
}

/// The tokens of `calls` together.
fn sum(calls: impl IntoIterator<Item = Tokens>) -> Tokens {
    let mut sum = Tokens::default();
    for tokens in calls {
        sum += tokens;
    }
    sum
}

/// Waits (`T` at most) until `read` gives a call of `each` for each call `answered` in all (a
/// CLI may write a record a moment after the screen shows the reply), then asserts it call by
/// call, each naming the model asked for. `what` names the records in a failure.
async fn assert_recorded(
    what: &str,
    read: impl Fn() -> Vec<Call>,
    answered: &[Answered],
    each: Tokens,
) {
    let (n, model) = (answered.len(), model_of(answered));
    let all = sum(std::iter::repeat_n(each, n));
    let whole = wait_until(T, || async { sum(read().iter().map(|c| c.tokens)) == all }).await;
    let calls = read();
    let detail = format!("{what}: {calls:#?}");
    assert!(whole, "not {n} calls of {each:?}; {detail}");
    assert_eq!(calls.len(), n, "{detail}");
    for call in &calls {
        assert_eq!(call.tokens, each, "{detail}");
        assert_eq!(call.model.as_ref(), Some(&model), "{detail}");
    }
}

/// Prices for every model (the stand-in's included), over the shipped table.
const PRICES: &str =
    "[prices.\"*\"]\ninput = 3.0\noutput = 15.0\ncache_read = 0.3\ncache_write = 3.75\n";

/// The hub's config with [`PRICES`].
fn priced() -> agent_hub::config::HubConfig {
    agent_hub::config::HubConfig::parse(PRICES, "test.toml").unwrap()
}

/// A hub pricing every model ([`PRICES`]).
async fn priced_hub() -> TestHub {
    TestHub::start_with(|c| {
        let p = priced();
        (c.prices, c.price_table) = (p.prices, p.price_table);
    })
    .await
}

/// What `n` calls of `each` of `model` cost by the [`PRICES`] table, in dollars.
fn priced_cost(n: usize, each: Tokens, model: &str) -> f64 {
    let all = sum(std::iter::repeat_n(each, n));
    priced()
        .price_table
        .cost(Some(model), &all)
        .expect("priced")
}

/// Waits (`T` at most) until the hub has counted `n` calls of `each` for `run`'s session
/// (from the CLI's records written since the session started, as it counts an agent's), then
/// asserts them, all of `model`; its usage.
async fn counted(run: &RealCli<'_>, n: usize, each: Tokens, model: &str) -> Value {
    let path = format!("/v1/agents/{}/usage", run.id);
    let counted = wait_until(T, || async {
        run.hub.get(&path).await.1["usage"]["calls"] == n as u64
    })
    .await;
    let (_, v) = run.hub.get(&path).await;
    assert!(counted, "not {n} calls counted: {v}");
    let want = serde_json::to_value(sum(std::iter::repeat_n(each, n))).unwrap();
    assert_eq!(v["usage"]["tokens"], want, "{v}");
    assert_eq!(v["usage"]["by_model"][0]["model"], model, "{v}");
    assert_eq!(v["team"], "default", "{v}");
    v
}

/// [`counted`], and its dollars are the price table's, to the cent.
async fn assert_counted(run: &RealCli<'_>, n: usize, each: Tokens, model: &str) {
    let v = counted(run, n, each, model).await;
    let cost = v["usage"]["cost_usd"].as_f64().unwrap_or(-1.0);
    let want = priced_cost(n, each, model);
    assert!((cost - want).abs() < 0.005, "{cost} != {want}: {v}");
}

/// The one model the calls `answered` asked for.
fn model_of(answered: &[Answered]) -> String {
    let models: Vec<Option<String>> = answered.iter().map(Answered::model).collect();
    assert!(
        models.windows(2).all(|m| m[0] == m[1]),
        "more than one model: {models:?}"
    );
    models[0].clone().expect("a model named")
}

/// Prints what the stand-in answered (every call, side calls too) and how long a test took.
fn print_summary(name: &str, answered: &[Answered], counted: usize, started: Instant) {
    let paths: Vec<&str> = answered.iter().map(|a| a.path.as_str()).collect();
    println!(
        "real-cli usage {name}: {counted} calls recorded of {} answered {paths:?} in {:.1} s",
        answered.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Claude Code's transcript (`<config dir>/projects/<project>/<session>.jsonl`): every call
/// of its turns, with Anthropic's four counts as the stand-in said them.
#[tokio::test]
async fn claude_code_records_what_each_call_spent() {
    let Some(claude) = cli("claude") else { return };
    let started = Instant::now();
    let standin = ModelStandIn::start_with_usage(CHOSEN).await;
    let hub = priced_hub().await;
    let (run, home) = start(&hub, &claude, "claude", |h| h.claude_env(&standin, false)).await;
    let projects = home.join("claude/projects");
    run.claude_prompt().await;

    two_turns(&run, "Do you want to proceed?", &["1"]).await;

    // Every call is one of the turns' (2.1.330 makes no side call here).
    let all = standin.answered();
    let read = || recorded(&projects, Format::ClaudeTranscript);
    assert_recorded("transcripts", read, &all, CHOSEN.tokens()).await;
    assert_counted(&run, all.len(), CHOSEN.tokens(), &model_of(&all)).await;
    print_summary("claude-code", &all, all.len(), started);
}

/// Codex's rollout (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`): every response of its
/// turns, its input counting the cached tokens (taken out when read), the model named by the
/// turn's context.
#[tokio::test]
async fn codex_records_what_each_call_spent() {
    let Some(codex) = cli("codex") else { return };
    let started = Instant::now();
    let standin = ModelStandIn::start_with_usage(CHOSEN).await;
    let hub = priced_hub().await;
    let (run, home) = start(&hub, &codex, "codex", |h| h.codex_env(&standin)).await;
    let sessions = home.join("codex/sessions");
    run.wait_state("idle").await;

    two_turns(&run, "Would you like to run the following command?", &["y"]).await;

    // Codex asks for the thread's title in a side call of its own (JSON by a schema), which
    // it does not record.
    let all = standin.answered();
    let turns: Vec<Answered> = all
        .iter()
        .filter(|a| a.body["text"]["format"]["type"] != "json_schema")
        .cloned()
        .collect();
    let read = || recorded(&sessions, Format::CodexRollout);
    assert_recorded("rollouts", read, &turns, CHOSEN.tokens()).await;
    assert_counted(&run, turns.len(), CHOSEN.tokens(), &model_of(&turns)).await;
    print_summary("codex", &all, turns.len(), started);
}

/// Gemini CLI's chat log (`~/.gemini/tmp/<project>/chats/session-*.jsonl`): every streamed
/// call, from its last chunk's figures; the cached tokens taken out of its prompt count, the
/// thoughts put back into its output. Gemini has no cache write: the written tokens are input.
#[tokio::test]
async fn gemini_cli_records_what_each_call_spent() {
    let Some(gemini) = cli("gemini") else { return };
    let started = Instant::now();
    let standin = ModelStandIn::start_with_usage(CHOSEN).await;
    let hub = priced_hub().await;
    let (run, proj) = crate::real_cli_gemini::start(&hub, &gemini, &standin, None, false).await;
    let chats = proj.parent().unwrap().join(".gemini/tmp");
    crate::real_cli_gemini::ready(&run).await;
    run.wait_state("idle").await;

    two_turns(&run, crate::real_cli_gemini::QUESTION, &["Enter"]).await;

    // Every call is one of the turns' (streamed; with its model pinned, 0.61.0 makes no side
    // call here).
    let all = standin.answered();
    let each = Tokens {
        input: CHOSEN.input + CHOSEN.cache_write,
        cache_write: 0,
        ..CHOSEN.tokens()
    };
    let read = || recorded(&chats, Format::GeminiChat);
    assert_recorded("chat logs", read, &all, each).await;
    assert_counted(&run, all.len(), each, &model_of(&all)).await;
    print_summary("gemini-cli", &all, all.len(), started);
}

/// opencode's database (`$XDG_DATA_HOME/opencode/opencode.db`), read as the hub reads it: a
/// step-finish part for every call of its turns, its model the assistant message's. Its
/// OpenAI-compatible provider reads no cache write (the written tokens stay in its input) and
/// takes the reasoning out of the output (put back when read). The session's title is asked
/// for in a side call of its own (no tools), which it does not record.
#[tokio::test]
async fn opencode_records_what_each_call_spent() {
    let Some(opencode) = cli("opencode") else {
        return;
    };
    let started = Instant::now();
    let standin = ModelStandIn::start_with_usage(CHOSEN).await;
    let hub = priced_hub().await;
    let (run, proj) = crate::real_cli_opencode::start(&hub, &opencode, &standin, None).await;
    let data = proj.parent().unwrap().join(".local/share/opencode");

    let (first, question) = (
        crate::real_cli_opencode::FIRST_TURN,
        crate::real_cli_opencode::QUESTION,
    );
    two_turns_within(&run, first, question, &["Enter"]).await;

    let all = standin.answered();
    let turns: Vec<Answered> = all
        .iter()
        .filter(|a| a.body.get("tools").is_some())
        .cloned()
        .collect();
    let each = Tokens {
        input: CHOSEN.input + CHOSEN.cache_write,
        cache_write: 0,
        ..CHOSEN.tokens()
    };
    let read = || {
        let mut db = RecordFiles::new(data.clone(), Format::OpencodeDb, Default::default());
        db.poll().into_iter().map(|r| r.call).collect()
    };
    assert_recorded("opencode.db", read, &turns, each).await;
    assert_counted(&run, turns.len(), each, &model_of(&turns)).await;
    print_summary("opencode", &all, turns.len(), started);
}

/// Aider's report after each reply (`Tokens: … Cost: …`), read from the pane's whole history:
/// the server's figures only with `--no-stream` (a stream's are Aider's own estimate), a cost
/// only for a priced model. Each call of its turns (the reply naming a file, and the one after
/// the file was added) has a report.
#[tokio::test]
async fn aider_reports_what_each_call_spent() {
    let Some(aider) = cli("aider") else { return };
    let started = Instant::now();
    let standin = ModelStandIn::start_with_usage(CHOSEN).await;
    let hub = priced_hub().await;
    let home = Home::new();
    let mut request = crate::real_cli_aider::aider_request(&home, &standin, &aider);
    request["args"]
        .as_array_mut()
        .unwrap()
        .push("--no-stream".into());
    crate::real_cli_aider::write_model_metadata(home.path(), 3e-6, 15e-6);
    let run = RealCli::launch(&hub, home, request, None).await;
    crate::real_cli_aider::prompt_up(&run).await;

    two_turns(&run, crate::real_cli_aider::ADD_FILE, &["y", "Enter"]).await;

    let all = standin.answered();
    let text = scrollback(&run);
    let reports = aider::reports(&text);
    let detail = format!("{reports:#?}\n{text}");
    let each = CHOSEN.tokens();
    assert_eq!(
        sum(reports.iter().map(|r| r.tokens)),
        sum(std::iter::repeat_n(each, all.len())),
        "{detail}"
    );
    assert_eq!(reports.len(), all.len(), "{detail}");
    for report in &reports {
        assert_eq!(report.tokens, each, "{detail}");
        assert!(report.cost_usd.is_some_and(|c| c > 0.0), "{detail}");
    }
    // The hub reads the same reports from Aider's chat history, and takes its cost.
    let v = counted(&run, all.len(), each, &model_of(&all)).await;
    let stated: f64 = reports.iter().filter_map(|r| r.cost_usd).sum();
    let cost = v["usage"]["cost_usd"].as_f64().unwrap_or(-1.0);
    assert!((cost - stated).abs() < 1e-9, "{cost} != {stated}: {v}");
    print_summary("aider", &all, reports.len(), started);
}

/// Everything the pane has shown, its history included, wrapped lines joined.
fn scrollback(run: &RealCli<'_>) -> String {
    let out = std::process::Command::new("tmux")
        .args(["-L", &run.hub.tmux_socket, "capture-pane", "-p", "-J"])
        .args(["-S", "-", "-t", &run.target])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}
