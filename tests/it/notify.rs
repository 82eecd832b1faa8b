//! Outgoing webhooks (`[[notify]]`) against real HTTP receivers started here: a fake agent
//! TUI's question and finished turn reach a receiver of each format with their contents (a
//! secret on its screen redacted); retries deliver once; a receiver that never answers delays
//! no other webhook and no API call; `min_interval_s` holds for a flapping agent; `doctor`
//! and `notify test` show a failing webhook; a bad url is refused at load with its place.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_hub::protocol::{AgentEvent, EventKind};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use crate::cli::BIN;
use futures_util::StreamExt;

use crate::policy_support::{fake_agent, policies_dir, submit, wait_state, FAKE_PROFILE};
use crate::support::{wait_until, TestHub};

const SECRET: &str = "s3cr3t-hunter2-on-screen";

/// One request a receiver got.
#[derive(Debug, Clone)]
pub struct Got {
    headers: HeaderMap,
    body: String,
    /// The status it was answered with.
    status: u16,
}

impl Got {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

#[derive(Default)]
struct ReceiverState {
    got: Vec<Got>,
    /// The statuses to answer with, in order; 200 once they are used up.
    script: VecDeque<u16>,
    /// Never answer.
    hang: bool,
}

/// An HTTP receiver on 127.0.0.1:0 recording every request (stopped when dropped).
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<ReceiverState>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Receiver {
    pub async fn start(script: &[u16], hang: bool) -> Self {
        let state = Arc::new(Mutex::new(ReceiverState {
            script: script.iter().copied().collect(),
            hang,
            ..ReceiverState::default()
        }));
        let shared = state.clone();
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let state = shared.clone();
            async move {
                let (status, hang) = {
                    let mut s = state.lock().unwrap();
                    let status = s.script.pop_front().unwrap_or(200);
                    let hang = s.hang;
                    s.got.push(Got {
                        headers,
                        body: String::from_utf8_lossy(&body).into_owned(),
                        status,
                    });
                    (status, hang)
                };
                if hang {
                    std::future::pending::<()>().await;
                }
                StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook-endpoint", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { url, state, server }
    }

    pub fn got(&self) -> Vec<Got> {
        self.state.lock().unwrap().got.clone()
    }

    /// Waits until a request satisfies `pred`; returns it.
    pub async fn wait_for(&self, within: Duration, pred: impl Fn(&Got) -> bool) -> Got {
        let found = wait_until(within, || async { self.got().iter().any(&pred) }).await;
        let got = self.got();
        assert!(found, "no such request within {within:?}; got: {got:#?}");
        got.into_iter().find(|g| pred(g)).unwrap()
    }
}

/// A hub with the fake agent's profile, `[[notify]]` tables (and agents) from `notify_toml`,
/// and a secret to redact.
pub async fn hub_with(notify_toml: &str) -> (TestHub, tempfile::TempDir) {
    let dir = policies_dir();
    // The fake agent's profile with a short dwell, so a state held 250 ms is adopted.
    let flappy = format!("dwell_ms = 50\n{FAKE_PROFILE}");
    std::fs::write(dir.path().join("agents/flappy.toml"), flappy).unwrap();
    let text = format!(
        "policies_dir = '{}'\npublic_url = \"http://hub.example:8100/\"\nredact = {{ secrets = [\"{SECRET}\"] }}\n{notify_toml}",
        dir.path().display()
    );
    let parsed = agent_hub::config::HubConfig::parse(&text, "hub.toml").expect("config parses");
    let hub = TestHub::start_with(|c| {
        c.policies_dir = parsed.policies_dir.clone();
        c.redact = parsed.redact.clone();
        c.notify = parsed.notify.clone();
        c.public_url = parsed.public_url.clone();
        c.notify_actions = parsed.notify_actions;
        c.agents = parsed.agents.clone();
        c.hub_id = parsed.hub_id.clone();
    })
    .await;
    (hub, dir)
}

pub fn hook(url: &str, format: &str, extra: &str) -> String {
    format!("[[notify]]\nurl = \"{url}\"\nformat = \"{format}\"\n{extra}\n")
}

async fn fake_session(hub: &TestHub) -> String {
    let id = hub
        .create_with(json!({
            "backend": "pty", "shell": "bash", "args": [fake_agent()], "cli_type": "fake",
            "label": "builder",
        }))
        .await;
    wait_state(hub, &id, "idle", Duration::from_secs(10)).await;
    id
}

fn blocked(g: &Got) -> bool {
    g.body.contains("blocked") || g.header("Tags").contains("question")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_and_a_finished_turn_reach_each_format_with_their_contents() {
    let json_rx = Receiver::start(&[], false).await;
    let ntfy_rx = Receiver::start(&[], false).await;
    let slack_rx = Receiver::start(&[], false).await;
    let quiet = "min_interval_s = 0\nheaders = { Authorization = \"Bearer hook-token-1234567\" }";
    let (hub, _dir) = hub_with(&format!(
        "{}{}{}",
        hook(&json_rx.url, "json", quiet),
        hook(&ntfy_rx.url, "ntfy", "min_interval_s = 0"),
        hook(&slack_rx.url, "slack", "min_interval_s = 0"),
    ))
    .await;
    let id = fake_session(&hub).await;
    let t = Duration::from_secs(10);

    // A question: within 2 s of the state, with its text and choices, in each format.
    let (status, v) = submit(&hub, &id, "ask", false).await;
    assert_eq!(status, 200, "{v}");
    wait_state(&hub, &id, "blocked", t).await;
    let asked_at = Instant::now();
    let j = json_rx
        .wait_for(t, |g| g.json()["event"] == "blocked")
        .await;
    let within = asked_at.elapsed();
    assert!(within < Duration::from_secs(2), "{within:?}");
    let m = j.json();
    assert_eq!(m["agent"]["id"], id.as_str(), "{m}");
    assert_eq!(m["agent"]["label"], "builder", "{m}");
    assert_eq!(m["agent"]["sessionId"], id.as_str(), "{m}");
    assert_eq!(m["question"], "Allow write to main.rs? [y/n]", "{m}");
    assert_eq!(m["choices"][0]["label"], "yes", "{m}");
    assert_eq!(m["choices"][1]["label"], "no", "{m}");
    assert_eq!(
        m["link"],
        format!("http://hub.example:8100/#/grid/{id}"),
        "{m}"
    );
    assert!(
        m["what"].as_str().unwrap().starts_with("asks a question"),
        "{m}"
    );
    assert_eq!(j.header("Authorization"), "Bearer hook-token-1234567");
    assert_eq!(j.header("content-type"), "application/json");

    let n = ntfy_rx.wait_for(t, blocked).await;
    assert!(
        n.header("Title").starts_with("builder: asks a question"),
        "{n:?}"
    );
    assert_eq!(n.header("Tags"), "agent-hub,question");
    assert_eq!(
        n.header("Click"),
        format!("http://hub.example:8100/#/grid/{id}")
    );
    assert!(n.body.contains("Allow write to main.rs? [y/n]") && n.body.contains("[yes] [no]"));

    let s = slack_rx
        .wait_for(t, |g| g.body.contains("asks a question"))
        .await;
    let v = s.json();
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("*builder* asks a question"),
        "{v}"
    );
    let blocks = v["blocks"].to_string();
    assert!(
        blocks.contains("Allow write to main.rs? [y/n]") && blocks.contains("`yes`"),
        "{v}"
    );

    // The answer, a secret printed, then a turn of work: its end arrives with the last lines,
    // the secret redacted.
    submit(&hub, &id, "y", true).await;
    hub.wait_output(&id, "answered: y", t).await;
    submit(&hub, &id, &format!("the key is {SECRET}"), false).await;
    submit(&hub, &id, "work 1", false).await;
    hub.wait_output(&id, "done: 1", t).await;
    let done = |g: &Got| {
        let m = g.json();
        m["event"] == "turn_finished" && m["lastLines"].to_string().contains("done: 1")
    };
    let f = json_rx.wait_for(t, done).await.json();
    let lines = f["lastLines"].to_string();
    assert!(lines.contains("echo: the key is [REDACTED]"), "{f}");
    assert!(
        f["what"].as_str().unwrap().starts_with("finished its turn"),
        "{f}"
    );
    assert!(f["lastLines"].as_array().unwrap().len() <= 10, "{f}");
    for rx in [&json_rx, &ntfy_rx, &slack_rx] {
        for g in rx.got() {
            assert!(!g.body.contains(SECRET), "{g:?}");
        }
    }
    ntfy_rx
        .wait_for(t, |g| g.header("Tags").contains("white_check_mark"))
        .await;
    slack_rx
        .wait_for(t, |g| g.body.contains("finished its turn"))
        .await;

    // The settings as the hub shows them: names, never the header's value.
    let (_, status) = hub.get("/v1/notify").await;
    let shown = status.to_string();
    assert!(!shown.contains("hook-token-1234567"), "{shown}");
    assert_eq!(
        status["webhooks"][0]["header_names"],
        json!(["Authorization"])
    );
    assert!(
        status["webhooks"][0]["sent"].as_u64().unwrap() >= 2,
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_failures_then_success_deliver_the_message_once() {
    let rx = Receiver::start(&[500, 500, 500], false).await;
    let (hub, _dir) = hub_with(&hook(&rx.url, "json", "retry_initial_ms = 50")).await;
    hub.hub.emit(EventKind::AgentStartFailed(AgentEvent {
        agent_id: "a1".into(),
        detail: "image missing".into(),
    }));
    rx.wait_for(Duration::from_secs(5), |g| g.status == 200)
        .await;
    // No further try after the one that was taken.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = rx.got();
    let statuses: Vec<u16> = got.iter().map(|g| g.status).collect();
    assert_eq!(statuses, [500, 500, 500, 200]);
    let m = got[3].json();
    assert_eq!(
        (m["event"].as_str(), m["agent"]["id"].as_str()),
        (Some("start_failed"), Some("a1")),
        "{m}"
    );
    assert_eq!(m["detail"], "image missing");
    assert_eq!(m["link"], "http://hub.example:8100/#/agent/a1");
    let (_, v) = hub.get("/v1/notify").await;
    let w = &v["webhooks"][0];
    assert_eq!(
        (w["sent"].as_u64(), w["failed"].as_u64(), w["dead"].as_u64()),
        (Some(1), Some(3), Some(0)),
        "{v}"
    );
    let metrics = hub
        .http
        .get(format!("{}/metrics", hub.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = |outcome: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("agent_hub_notify_messages_total")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap_or("").to_string())
    };
    assert_eq!(line("failed").as_deref(), Some("3"), "{metrics}");
    assert_eq!(line("sent").as_deref(), Some("1"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_delays_no_other_webhook_nor_the_api() {
    let stuck = Receiver::start(&[], true).await;
    let fine = Receiver::start(&[], false).await;
    let (hub, _dir) = hub_with(&format!(
        "{}{}",
        hook(&stuck.url, "json", ""),
        hook(&fine.url, "json", "")
    ))
    .await;
    let started = Instant::now();
    for n in 0..3 {
        hub.hub.emit(EventKind::AgentExited(AgentEvent {
            agent_id: format!("a{n}"),
            detail: "exit 137".into(),
        }));
    }
    stuck.wait_for(Duration::from_secs(5), |_| true).await;
    for n in 0..3 {
        let id = format!("a{n}");
        fine.wait_for(Duration::from_secs(2), |g| {
            g.json()["agent"]["id"] == id.as_str()
        })
        .await;
    }
    let all_in = started.elapsed();
    assert!(all_in < Duration::from_secs(2), "{all_in:?}");
    // The API answers at once while the stuck receiver holds its webhook.
    for path in ["/v1/notify", "/v1/pty/sessions", "/health"] {
        let t = Instant::now();
        let (status, v) = hub.get(path).await;
        assert_eq!(status, 200, "{v}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{path}: {:?}",
            t.elapsed()
        );
    }
    let (_, v) = hub.get("/v1/notify").await;
    assert_eq!(v["webhooks"][0]["queued"], 2, "{v}");
    assert_eq!(v["webhooks"][1]["sent"], 3, "{v}");
}

/// Flips between the fake agent's question and its prompt 10 times in 5 s on its own (each
/// state held 250 ms, above the `flappy` profile's 50 ms dwell), then stays at the prompt.
const FLAPPING_AGENT: &str = r#"
printf 'fake> '
sleep 0.5
for i in 1 2 3 4 5 6 7 8 9 10; do
    printf '\r\e[KAllow write to f%d.rs? [y/n] ' "$i"
    sleep 0.25
    printf '\r\e[Kfake> '
    sleep 0.25
done
sleep 60
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_interval_holds_for_an_agent_flipping_between_blocked_and_idle() {
    let limited = Receiver::start(&[], false).await;
    let every = Receiver::start(&[], false).await;
    let (hub, _dir) = hub_with(&format!(
        "{}{}",
        hook(
            &limited.url,
            "json",
            "events = [\"blocked\"]\nmin_interval_s = 60"
        ),
        hook(
            &every.url,
            "json",
            "events = [\"blocked\"]\nmin_interval_s = 0"
        ),
    ))
    .await;
    let mut events = hub.connect_ws("/v1/events").await;
    let id = hub
        .create_with(json!({
            "backend": "pty", "shell": "bash", "args": ["-c", FLAPPING_AGENT], "cli_type": "flappy",
        }))
        .await;
    // Every change to blocked the hub published, until the agent has stopped flipping.
    let mut flips = 0;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, events.next()).await {
        let Ok(text) = frame.into_text() else {
            continue;
        };
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if v["type"] == "session_state_changed"
            && v["sessionId"] == id.as_str()
            && v["state"] == "blocked"
        {
            flips += 1;
            if flips == 10 {
                break;
            }
        }
    }
    let flipping = started.elapsed();
    assert!(
        flips >= 6,
        "only {flips} flips to blocked were seen in {flipping:?}"
    );
    let all = wait_until(Duration::from_secs(5), || async {
        every.got().len() >= flips
    })
    .await;
    assert!(all, "{flips} flips, {} messages", every.got().len());
    // The agent at the prompt for good: nothing more comes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(limited.got().len(), 1, "{:#?}", limited.got());
    assert_eq!(every.got().len(), flips, "{:#?}", every.got());
    let questions: Vec<Value> = every
        .got()
        .iter()
        .map(|g| g.json()["question"].clone())
        .collect();
    assert_eq!(questions[0], "Allow write to f1.rs? [y/n]", "{questions:?}");
    println!(
        "{flips} flips to blocked in {flipping:?}: 1 message at min_interval_s = 60, {} at 0",
        every.got().len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_and_notify_test_show_the_failing_webhook() {
    let failing = Receiver::start(&[500; 64], false).await;
    let fine = Receiver::start(&[], false).await;
    let (hub, _dir) = hub_with(&format!(
        "{}{}",
        hook(
            &failing.url,
            "json",
            "name = \"pager\"\nretry_initial_ms = 20"
        ),
        hook(&fine.url, "slack", "name = \"chat\"")
    ))
    .await;
    hub.hub.emit(EventKind::AgentExited(AgentEvent {
        agent_id: "a1".into(),
        detail: "exit 1".into(),
    }));
    let given_up = wait_until(Duration::from_secs(5), || async {
        hub.get("/v1/notify").await.1["webhooks"][0]["dead"] == 1
    })
    .await;
    assert!(given_up, "{}", hub.get("/v1/notify").await.1);
    let (_, v) = hub.get("/v1/notify").await;
    let letter = &v["webhooks"][0]["dead_letters"][0];
    assert_eq!(
        (letter["event"].as_str(), letter["attempts"].as_u64()),
        (Some("exited"), Some(5)),
        "{v}"
    );
    assert_eq!(failing.got().len(), 5);

    // The audit log has it.
    let recorded = wait_until(Duration::from_secs(5), || async {
        hub.get("/v1/pty-traffic/events?action=notify_gave_up")
            .await
            .1
            .to_string()
            .contains("pager")
    })
    .await;
    assert!(recorded, "{}", hub.get("/v1/pty-traffic/events").await.1);

    let run = |args: &'static [&'static str]| {
        tokio::process::Command::new(BIN)
            .args(args)
            .env("AGENT_HUB_URL", &hub.base)
            .env("AGENT_HUB_TOKEN", &hub.owner_token)
            .env_remove("AGENT_HUB_CONFIG")
            .output()
    };
    let out = run(&["doctor", "--json"]).await.unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let finding = |check: &str| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == check)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let pager = finding("webhook pager");
    assert_eq!(pager["status"], "fail", "{report:#}");
    assert!(
        pager["detail"].as_str().unwrap().contains("HTTP 500"),
        "{pager}"
    );
    assert_eq!(finding("webhook chat")["status"], "ok", "{report:#}");

    let out = run(&["notify", "test", "--json"]).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["delivered"].as_bool()),
        (Some(true), Some(false)),
        "{v}"
    );
    assert_eq!(
        (
            v["webhooks"][0]["name"].as_str(),
            v["webhooks"][0]["status"].as_u64()
        ),
        (Some("pager"), Some(500)),
        "{v}"
    );
    assert_eq!(
        (
            v["webhooks"][1]["ok"].as_bool(),
            v["webhooks"][1]["status"].as_u64()
        ),
        (Some(true), Some(200)),
        "{v}"
    );
    let test_message = fine
        .wait_for(Duration::from_secs(2), |g| g.body.contains("test message"))
        .await;
    assert!(test_message.json()["blocks"].is_array());
    let out = run(&["notify", "test"]).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FAIL pager: HTTP 500") && text.contains("ok   chat: HTTP 200"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_shell_is_no_agent_to_tell_of() {
    let rx = Receiver::start(&[], false).await;
    let (hub, _dir) = hub_with(&hook(&rx.url, "json", "min_interval_s = 0")).await;
    let id = hub.create("pty").await;
    for n in 0..3 {
        hub.talk(&id, &format!("sleep 0.3; echo turn {n}")).await;
    }
    hub.wait_output(&id, "turn 2", Duration::from_secs(5)).await;
    // A marker after the shell's turns: once it is in, the shell's would be too.
    hub.hub.emit(EventKind::AgentStartFailed(AgentEvent {
        agent_id: "marker".into(),
        detail: "x".into(),
    }));
    rx.wait_for(Duration::from_secs(5), |g| {
        g.json()["agent"]["id"] == "marker"
    })
    .await;
    let about_shell: Vec<Got> = rx
        .got()
        .into_iter()
        .filter(|g| g.body.contains(&id))
        .collect();
    assert!(about_shell.is_empty(), "{about_shell:#?}");
}

#[tokio::test]
async fn notify_test_without_webhooks_is_refused_with_a_code() {
    let hub = TestHub::start().await;
    let (status, v) = hub.post("/v1/notify/test", json!({})).await;
    assert_eq!(
        (status, v["ok"].as_bool(), v["error_code"].as_str()),
        (404, Some(false), Some("NO_WEBHOOKS")),
        "{v}"
    );
}

#[test]
fn a_bad_or_missing_url_is_refused_at_load_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.toml");
    for (text, at) in [
        ("cols = 100\n\n[[notify]]\nurl = \"mailto:me\"\n", ":4:7:"),
        ("[[notify]]\nformat = \"ntfy\"\n", ":1:1:"),
    ] {
        std::fs::write(&path, text).unwrap();
        let e = agent_hub::config::HubConfig::load(&path)
            .unwrap_err()
            .to_string();
        let want = format!("{}{at}", path.display());
        assert!(e.starts_with(&want) && e.contains("url"), "{e}");
    }
}
