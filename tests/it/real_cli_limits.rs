//! Usage and rate limits on the real CLIs (#41): the stand-in answers every model call with a
//! 429 and `retry-after` ([`ModelStandIn::limit`]) while a turn runs. Each CLI must read
//! `limited` by its profile's `limit` rule (its spinner or status file may say it works),
//! with an `until` where its screen states a reset time or a retry's countdown; an idle policy
//! of 5 s must not stop it meanwhile. Once the stand-in answers again, the CLI finishes the
//! turn by itself (Gemini CLI, whose limit is a dialog, once `Keep trying` is chosen), reads
//! `idle`, and the same policy stops it: the policy was in force all along. What each CLI
//! shows is in `docs/research/cli-usage-records.md`, section 2. The time from the first 429
//! to `limited` is printed (`-- --nocapture`).
//!
//! Short retry delays keep the tests short; Codex is given more retries than its 5
//! (`stream_max_retries`), so it does not give up while the test holds it limited.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::model_standin::{Limit, ModelStandIn, INSTANT};
use crate::policy_support::{hub_with_policies, policies_dir, wait_event};
use crate::real_cli::{cli, session_request, Home, RealCli, T};
use crate::support::{wait_until, TestHub};

/// The idle policy the agents run under.
const IDLE_5S: &str = "idle_timeout_s = 5\n";
/// How long a limited agent is held so (longer than the idle policy's 5 s).
const HOLD: Duration = Duration::from_secs(6);

/// When `until` is expected to be, from the moment the hub read `limited`.
enum Until {
    /// The screen states no time.
    None,
    /// At most this long after the reading (a retry's countdown).
    Within(Duration),
    /// About this long after it (a reset time, shown to the minute in the machine's time
    /// zone, which is UTC here as in agent containers).
    About(Duration),
}

/// What one CLI's limit looks like.
struct Expect {
    /// The profile, in the report and the recorded screen's name.
    cli: &'static str,
    /// Words in the pane that show the limit.
    shows: &'static str,
    /// The `retry-after` the stand-in sends.
    retry_after_s: u64,
    until: Until,
    /// The agent's own signal the screen overrules while limited, if any.
    overrules: Option<&'static str>,
    /// Keys that make the CLI try again once the API answers (none: it retries by itself).
    resume: &'static [&'static str],
}

impl Expect {
    /// A CLI that retries by itself, with no signal to overrule.
    fn new(cli: &'static str, shows: &'static str, retry_after_s: u64, until: Until) -> Self {
        Expect {
            cli,
            shows,
            retry_after_s,
            until,
            overrules: None,
            resume: &[],
        }
    }
}

/// A stand-in and a hub whose policies include `idle-5s` (the directory lives as long).
struct Limits {
    standin: ModelStandIn,
    hub: TestHub,
    _policies: tempfile::TempDir,
}

impl Limits {
    async fn start() -> Self {
        let dir = policies_dir();
        std::fs::write(dir.path().join("idle-5s.toml"), IDLE_5S).unwrap();
        Limits {
            standin: ModelStandIn::start().await,
            hub: hub_with_policies(&dir, "").await,
            _policies: dir,
        }
    }

    /// The limit, seen through: a prompt is submitted to the stand-in answering 429 from now
    /// on; the hub reads `limited` by the profile's `limit` rule (with the `until` expected)
    /// and holds it for [`HOLD`] with no policy acting; then the stand-in answers again, the
    /// CLI finishes the turn (the instant answer shows), reads `idle`, and the idle policy
    /// stops it. Prints how long after the screen showed the limit, and after the first 429,
    /// the hub read `limited`.
    async fn limited_then_recovers(&self, run: &RealCli<'_>, expect: Expect) {
        let mut events = self.hub.hub.subscribe_events();
        let standin = &self.standin;
        standin.limit(Limit {
            retry_after_s: expect.retry_after_s,
            calls: None,
            resets_at: None,
        });
        run.submit("say something").await;
        let refused = wait_until(T, || async { standin.refused() > 0 }).await;
        assert!(
            refused,
            "no model call: {}\n{}",
            run.state().await,
            run.pane()
        );
        let first_429 = Instant::now();
        let latency = run.latency(|p| p.contains(expect.shows), "limited").await;
        let took = first_429.elapsed();
        run.record(&format!("{}/limited-retrying", expect.cli), true);
        hold_limited(run, &expect).await;
        while let Ok(e) = events.try_recv() {
            let e = crate::policy_support::event_value(&e);
            assert!(
                !(e["type"] == "policy_stopped" && e["sessionId"] == run.id.as_str()),
                "stopped while limited: {e}"
            );
        }
        println!(
            "real-cli limit {}: limited {:.0} ms after the screen showed it, {:.1} s after the \
             first 429",
            expect.cli,
            latency.as_secs_f64() * 1000.0,
            took.as_secs_f64()
        );

        standin.unlimit();
        if !expect.resume.is_empty() {
            run.keys(expect.resume).await;
        }
        let answered = run.shows(INSTANT, Duration::from_secs(45)).await;
        assert!(answered, "{}", run.pane());
        let idle = run.wait_state("idle").await;
        assert_ne!(idle["rule"], "input:sent", "{idle}");
        let stopped = wait_event(&mut events, "policy_stopped", &run.id, T).await;
        assert!(
            stopped.is_some(),
            "not stopped once idle: {}",
            run.state().await
        );
    }
}

/// `limited` for [`HOLD`] (longer than the idle policy's 5 s), each reading by the `limit`
/// rule, its `source` naming the rule and when the limit ends (or that the screen does not
/// say); the time the screen states is read at least once (a countdown may skip a frame).
async fn hold_limited(run: &RealCli<'_>, expect: &Expect) {
    let mut as_expected = false;
    let until = Instant::now() + HOLD;
    while Instant::now() < until {
        let s = run.state().await;
        assert_eq!(s["state"], "limited", "{s}\npane:\n{}", run.pane());
        assert_eq!(s["rule"], "limit", "{s}");
        let reading = match expect.overrules {
            Some(signal) => format!("screen:rule limit (over {signal}: a limit on the screen)"),
            None => "screen:rule limit".into(),
        };
        let said = match s["until"].as_str() {
            Some(until) => format!("{reading}; until {until}"),
            None => format!("{reading}; no reset time on the screen"),
        };
        let source = s["source"].as_str().unwrap_or_default();
        assert_eq!(source.replace("+00:00", "Z"), said, "{s}");
        if let Until::None = expect.until {
            assert!(s["until"].is_null(), "{s}");
        }
        as_expected |= until_as_expected(&s, &expect.until);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        as_expected,
        "never an until as expected: {}",
        run.state().await
    );
}

/// Whether the `until` of the state `s` is as `expect`ed.
fn until_as_expected(s: &Value, expect: &Until) -> bool {
    let now = Utc::now();
    let until: Option<DateTime<Utc>> = s["until"].as_str().map(|u| u.parse().unwrap());
    let ahead = until.map(|u| (u - now).num_milliseconds());
    match (expect, ahead) {
        (Until::None, None) => true,
        (Until::Within(d), Some(ms)) => (-2_000..=d.as_millis() as i64).contains(&ms),
        (Until::About(d), Some(ms)) => (ms - d.as_millis() as i64).abs() <= 120_000,
        _ => false,
    }
}

/// Claude Code retries a 429 under its spinner (`✻ 429 <message> · retrying in 2s · attempt
/// 1/10`) while its status file says `busy`: the screen's limit overrules it at once.
#[tokio::test]
async fn claude_code_reads_limited_while_it_retries_a_429() {
    let Some(claude) = cli("claude") else { return };
    let t = Limits::start().await;
    let home = Home::new();
    let env = home.claude_env(&t.standin, false);
    let request = session_request(&claude, "claude", &home, env);
    let run = RealCli::launch(&t.hub, home, request, Some("idle-5s")).await;
    run.claude_prompt().await;
    let until = Until::Within(Duration::from_secs(40));
    let expect = Expect {
        overrules: Some("status-file:busy"),
        ..Expect::new("claude-code", "429 ", 1, until)
    };
    t.limited_then_recovers(&run, expect).await;
}

/// Codex retries a 429 that carries `retry-after` (`• Server is busy, reconnecting 1/20`),
/// its title's spinner turning: no time on the screen.
#[tokio::test]
async fn codex_reads_limited_while_it_retries_a_429() {
    let Some(codex) = cli("codex") else { return };
    let t = Limits::start().await;
    let home = Home::new();
    let env = home.codex_env(&t.standin);
    // More retries than its 5, so it does not give up while the test holds it.
    let config = home.path().join("codex/config.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "env_key = \"STANDIN_API_KEY\"\n",
        "env_key = \"STANDIN_API_KEY\"\nstream_max_retries = 20\n",
    );
    std::fs::write(&config, text).unwrap();
    let request = session_request(&codex, "codex", &home, env);
    let run = RealCli::launch(&t.hub, home, request, Some("idle-5s")).await;
    run.wait_state("idle").await;
    let expect = Expect::new("codex", "Server is busy", 1, Until::None);
    t.limited_then_recovers(&run, expect).await;
}

/// Gemini CLI takes a 429 whose retry delay is over 300 s for a quota it does not retry by
/// itself: a dialog, `Usage limit reached for gemini-2.5-flash.`, `Access resets at 4:01 AM
/// UTC.`, `● 1. Keep trying`, chosen once the API answers again. (A 429 it retries by itself
/// shows nothing but `Thinking...`.)
#[tokio::test]
async fn gemini_cli_reads_limited_at_its_usage_limit_dialog() {
    let Some(gemini) = cli("gemini") else { return };
    let t = Limits::start().await;
    let policy = Some("idle-5s");
    let (run, _) = crate::real_cli_gemini::start(&t.hub, &gemini, &t.standin, policy, false).await;
    crate::real_cli_gemini::ready(&run).await;
    run.wait_state("idle").await;
    let two_hours = Duration::from_secs(2 * 3600);
    let expect = Expect {
        resume: &["Enter"],
        ..Expect::new(
            "gemini-cli",
            "Usage limit reached",
            2 * 3600,
            Until::About(two_hours),
        )
    };
    t.limited_then_recovers(&run, expect).await;
}

/// opencode retries a 429 after its `retry-after` (5 times: 25 s before it gives up), counting
/// down on its footer (`[retrying in 5s attempt #1]`, wrapped to a row of its own in 80
/// columns).
#[tokio::test]
async fn opencode_reads_limited_while_it_retries_a_429() {
    let Some(opencode) = cli("opencode") else {
        return;
    };
    let t = Limits::start().await;
    let policy = Some("idle-5s");
    let (run, _) = crate::real_cli_opencode::start(&t.hub, &opencode, &t.standin, policy).await;
    let until = Until::Within(Duration::from_secs(6));
    t.limited_then_recovers(&run, Expect::new("opencode", "attempt #", 5, until))
        .await;
}

/// Aider prints litellm's `RateLimitError` and `Retrying in 0.2 seconds...`, doubling the
/// delay (after its HTTP client's own two retries, each after `retry-after`).
#[tokio::test]
async fn aider_reads_limited_while_it_retries_a_429() {
    let Some(aider) = cli("aider") else { return };
    let t = Limits::start().await;
    let home = Home::new();
    let request = crate::real_cli_aider::aider_request(&home, &t.standin, &aider);
    let run = RealCli::launch(&t.hub, home, request, Some("idle-5s")).await;
    crate::real_cli_aider::prompt_up(&run).await;
    let until = Until::Within(Duration::from_secs(40));
    t.limited_then_recovers(&run, Expect::new("aider", "RateLimitError", 1, until))
        .await;
}

/// The stand-in's 429s as each API sends them (no CLI needed).
#[tokio::test]
async fn the_stand_in_answers_429_with_retry_after_then_recovers() {
    let standin = ModelStandIn::start().await;
    standin.limit(Limit {
        retry_after_s: 7,
        calls: Some(2),
        resets_at: None,
    });
    let client = reqwest::Client::new();
    let call = |path: &'static str| {
        let client = client.clone();
        let url = format!("{}{path}", standin.base);
        async move {
            let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
            let r = client.post(url).json(&body).send().await.unwrap();
            let after = r
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            (r.status().as_u16(), after, r.json::<Value>().await.ok())
        }
    };
    let (status, after, body) = call("/v1/messages").await;
    assert_eq!((status, after.as_deref()), (429, Some("7")));
    assert_eq!(body.unwrap()["error"]["type"], "rate_limit_error");
    let (status, _, body) = call("/v1beta/models/m:streamGenerateContent").await;
    assert_eq!(status, 429);
    let body = body.unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(body["error"]["details"][0]["retryDelay"], "7s");
    // Two calls refused: the API answers again.
    assert_eq!(call("/v1/chat/completions").await.0, 200);
    assert_eq!(standin.refused(), 2);
    standin.limit(Limit {
        retry_after_s: 1,
        calls: None,
        resets_at: None,
    });
    for path in ["/v1/responses", "/v1/chat/completions"] {
        let (status, _, body) = call(path).await;
        assert_eq!(status, 429);
        assert_eq!(body.unwrap()["error"]["code"], "rate_limit_exceeded");
    }
    standin.unlimit();
    assert_eq!(call("/v1/messages").await.0, 200);
}

/// `on_limit = "wait"` on the real Codex: it retries a 429 once (as set) and gives up
/// (`Exceeded retry limit, last status: 429`), which stays `limited` with no reset time. A
/// prompt sent meanwhile is queued (receipt `queued`), not typed into the error screen.
/// `limit_retry_s` after the limit was seen the hub sends the profile's continue line
/// (`policy_continued`); the API answers again, Codex finishes the turn, and once it is idle the
/// queued prompt reaches it, once.
#[tokio::test]
async fn codex_waits_out_a_limit_then_continues_and_gets_the_queued_prompt() {
    let Some(codex) = cli("codex") else { return };
    let (_dir, standin, hub) = waiting_hub(4).await;
    let mut events = hub.hub.subscribe_events();
    let home = Home::new();
    let env = home.codex_env(&standin);
    // One retry instead of its 5 (with a backoff of up to a minute): it gives up at once.
    let config = home.path().join("codex/config.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "env_key = \"STANDIN_API_KEY\"\n",
        "env_key = \"STANDIN_API_KEY\"\nstream_max_retries = 1\n",
    );
    std::fs::write(&config, text).unwrap();
    let request = session_request(&codex, "codex", &home, env);
    let run = RealCli::launch(&hub, home, request, Some("wait")).await;
    run.wait_state("idle").await;

    standin.limit(Limit {
        retry_after_s: 1,
        calls: None,
        resets_at: None,
    });
    run.submit("say something").await;
    run.wait_state("limited").await;
    let later = "and then the milk";
    let v = send_queued(&hub, &run, later).await;
    assert_eq!(v["delivery"]["bytes_written"], 0, "{v}");
    let gave_up = run
        .shows("xceeded retry limit", Duration::from_secs(30))
        .await;
    assert!(gave_up, "{}", run.pane());
    assert!(
        !run.pane().contains(later),
        "typed into the error screen: {}",
        run.pane()
    );
    assert_eq!(run.state().await["state"], "limited");

    // No reset time on the screen: the continue line `limit_retry_s` after the limit was seen.
    let continued = wait_event(&mut events, "policy_continued", &run.id, T).await;
    let continued = match continued {
        Some(e) => e,
        None => panic!("no policy_continued: {}\n{}", run.state().await, run.pane()),
    };
    assert_eq!(continued["trigger"], "on_limit", "{continued}");
    let typed = run.shows("› continue", T).await;
    assert!(typed, "{}", run.pane());
    standin.unlimit();
    finishes_then_takes_the_queued_prompt(&run, &standin, later).await;
    assert!(run.pane().contains("continue"), "{}", run.pane());
}

/// `on_limit = "wait"` with a reset time on the screen: the real Codex meets a usage limit
/// (`usage_limit_reached`, which it does not retry) and shows `try again at H:MM AM`; the hub
/// reads `limited` with that `until`, queues a prompt sent meanwhile, and sends the continue
/// line only once `until` has passed (not after `limit_retry_s`, set far off), after which
/// Codex finishes the turn and the queued prompt reaches it, once.
#[tokio::test]
async fn codex_waits_until_its_stated_reset_then_continues() {
    let Some(codex) = cli("codex") else { return };
    let (_dir, standin, hub) = waiting_hub(600).await;
    let mut events = hub.hub.subscribe_events();
    let home = Home::new();
    let mut env = home.codex_env(&standin);
    // Codex states the time in its local time; the hub reads a clock time as UTC.
    env["TZ"] = json!("UTC");
    let request = session_request(&codex, "codex", &home, env);
    let run = RealCli::launch(&hub, home, request, Some("wait")).await;
    run.wait_state("idle").await;

    // A reset on a minute (Codex shows hours and minutes), 20 to 80 s away.
    let now = Utc::now().timestamp();
    let resets_at = (now + 20 + 59) / 60 * 60;
    let reset = DateTime::from_timestamp(resets_at, 0).unwrap();
    standin.limit(Limit {
        retry_after_s: 1,
        calls: None,
        resets_at: Some(resets_at),
    });
    run.submit("say something").await;
    run.wait_state("limited").await;
    let stated = wait_until(T, || async { run.state().await["until"].is_string() }).await;
    let state = run.state().await;
    assert!(stated, "no until: {state}\n{}", run.pane());
    let until: DateTime<Utc> = state["until"].as_str().unwrap().parse().unwrap();
    assert_eq!(until, reset, "{state}\n{}", run.pane());
    // The state's change on the event bus says it too.
    let limited = loop {
        let e = wait_event(&mut events, "session_state_changed", &run.id, T).await;
        let e = e.expect("no session_state_changed to limited");
        if e["state"] == "limited" {
            break e;
        }
    };
    let said: Option<DateTime<Utc>> = limited["until"].as_str().map(|u| u.parse().unwrap());
    assert_eq!(said, Some(reset), "{limited}");
    let later = "and then the milk";
    send_queued(&hub, &run, later).await;
    standin.unlimit();

    let wait = Duration::from_secs(90) + T;
    let continued = match wait_event(&mut events, "policy_continued", &run.id, wait).await {
        Some(e) => e,
        None => panic!("no policy_continued: {}\n{}", run.state().await, run.pane()),
    };
    assert!(Utc::now() >= reset, "continued before {reset}: {continued}");
    assert_eq!(continued["trigger"], "on_limit", "{continued}");
    finishes_then_takes_the_queued_prompt(&run, &standin, later).await;
}

/// After the continue line: Codex finishes the turn (the instant answer), and `later`, queued
/// while it was limited, reaches the model once.
async fn finishes_then_takes_the_queued_prompt(
    run: &RealCli<'_>,
    standin: &ModelStandIn,
    later: &str,
) {
    let answered = run.shows(INSTANT, Duration::from_secs(45)).await;
    assert!(answered, "{}", run.pane());
    let asked = wait_until(Duration::from_secs(45), || async {
        standin.turns_with(later).len() == 1
    })
    .await;
    assert!(
        asked,
        "the queued prompt never reached the model: {}",
        run.pane()
    );
    run.wait_state("idle").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(standin.turns_with(later).len(), 1, "delivered once");
}

/// A hub with the policy `wait` (`on_limit = "wait"`, `limit_retry_s`), and a stand-in; the
/// policies' directory lives as long as the hub.
async fn waiting_hub(limit_retry_s: u64) -> (tempfile::TempDir, ModelStandIn, TestHub) {
    let dir = policies_dir();
    let wait = format!("on_limit = \"wait\"\nlimit_retry_s = {limit_retry_s}\n");
    std::fs::write(dir.path().join("wait.toml"), wait).unwrap();
    let standin = ModelStandIn::start().await;
    let hub = hub_with_policies(&dir, "").await;
    (dir, standin, hub)
}

/// Sends `line` to `run` while it is limited: queued, receipt `queued`; the reply.
async fn send_queued(hub: &TestHub, run: &RealCli<'_>, line: &str) -> Value {
    let path = format!("/v1/pty/sessions/{}/send_line", run.id);
    let (status, v) = hub.post(&path, json!({"data": line, "submit": true})).await;
    assert_eq!(
        (status, v["receipt"].as_str()),
        (200, Some("queued")),
        "{v}"
    );
    v
}
