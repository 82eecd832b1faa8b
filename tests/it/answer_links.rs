//! Answer links (`notify_actions = true`): a question's webhook message carries a signed link
//! per choice; on a real hub with the fake agent TUI and a real HTTP receiver, a link answers
//! its question once (the agent gets the keys, the audit log the answer), and is refused when
//! used again, expired, tampered with, moved to another session, or when its question was
//! answered some other way. A GET answers nothing; a browser gets pages saying what happened.

use std::time::Duration;

use serde_json::{json, Value};

use crate::notify::{hook, hub_with, Receiver};
use crate::policy_support::{submit, wait_state};
use crate::support::{wait_until, TestHub};

const T: Duration = Duration::from_secs(10);

async fn fake_session(hub: &TestHub) -> String {
    let id = hub
        .create_with(json!({
            "backend": "pty", "shell": "bash", "args": [crate::policy_support::fake_agent()],
            "cli_type": "fake", "label": "builder",
        }))
        .await;
    wait_state_strict(hub, &id, "idle").await;
    id
}

async fn wait_state_strict(hub: &TestHub, id: &str, state: &str) {
    wait_state(hub, id, state, T).await;
}

/// Asks the fake agent its question; the message's answer links, by label, pointed at `hub`
/// (`public_url` names another host).
async fn ask(hub: &TestHub, rx: &Receiver, id: &str, nth: usize) -> Vec<(String, String)> {
    let (status, v) = submit(hub, id, "ask", false).await;
    assert_eq!(status, 200, "{v}");
    wait_state_strict(hub, id, "blocked").await;
    wait_until(T, || async {
        rx.got()
            .iter()
            .filter(|g| g.json()["event"] == "blocked")
            .count()
            > nth
    })
    .await;
    let got = rx.got();
    let m = got
        .iter()
        .filter(|g| g.json()["event"] == "blocked")
        .nth(nth)
        .expect("the question's message")
        .json();
    let answers = m["answers"].as_array().unwrap_or_else(|| panic!("{m}"));
    assert_eq!(answers.len(), m["choices"].as_array().unwrap().len(), "{m}");
    answers
        .iter()
        .map(|a| {
            let url = a["url"].as_str().unwrap();
            assert!(url.starts_with("http://hub.example:8100/answer/"), "{url}");
            let local = url.replace("http://hub.example:8100", &hub.base);
            (a["label"].as_str().unwrap().to_string(), local)
        })
        .collect()
}

fn link<'a>(links: &'a [(String, String)], label: &str) -> &'a str {
    &links.iter().find(|(l, _)| l == label).unwrap().1
}

/// A request with no token (the link is the credential), as JSON or as a browser.
async fn follow(method: reqwest::Method, url: &str, html: bool) -> (u16, String) {
    let accept = if html {
        "text/html"
    } else {
        "application/json"
    };
    let r = reqwest::Client::new()
        .request(method, url)
        .header("Accept", accept)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn post(url: &str) -> (u16, Value) {
    let (status, body) = follow(reqwest::Method::POST, url, false).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn refused(reply: &(u16, Value), status: u16, code: &str) {
    assert_eq!(reply.0, status, "{}", reply.1);
    assert_eq!(reply.1["ok"], false, "{}", reply.1);
    assert_eq!(reply.1["error_code"], code, "{}", reply.1);
    assert!(reply.1["message"].as_str().is_some_and(|m| !m.is_empty()));
}

async fn hub_and_receiver() -> (TestHub, tempfile::TempDir, Receiver) {
    let rx = Receiver::start(&[], false).await;
    let (hub, dir) = hub_with(&format!(
        "notify_actions = true\n{}",
        hook(&rx.url, "json", "min_interval_s = 0")
    ))
    .await;
    (hub, dir, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_link_answers_its_question_once() {
    let (hub, _dir, rx) = hub_and_receiver().await;
    let id = fake_session(&hub).await;
    let links = ask(&hub, &rx, &id, 0).await;
    let yes = link(&links, "yes");

    // A GET (a link preview, a mail scanner) answers nothing: a page with a button, or JSON.
    let (status, page) = follow(reqwest::Method::GET, yes, true).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Allow write to main.rs? [y/n]"), "{page}");
    assert!(
        page.contains("<form method=\"post\">") && page.contains("Answer: yes"),
        "{page}"
    );
    // The page keeps its token to itself: no referrer, no cache, the dashboard's CSP.
    let r = reqwest::Client::new()
        .get(yes)
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    let header = |n: &str| {
        r.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(header("referrer-policy"), "no-referrer");
    assert_eq!(header("cache-control"), "no-store");
    assert!(header("content-security-policy").contains("default-src 'none'"));
    let (status, view) = follow(reqwest::Method::GET, yes, false).await;
    assert_eq!(status, 200, "{view}");
    let view: Value = serde_json::from_str(&view).unwrap();
    assert_eq!(view["answer"], "yes", "{view}");
    assert_eq!(view["keys"], json!(["y", "Enter"]), "{view}");
    assert_eq!(view["session_id"], id.as_str(), "{view}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, st) = hub.get(&format!("/v1/pty/sessions/{id}/state")).await;
    assert_eq!(st["state"], "blocked", "a GET answered: {st}");

    // The POST answers: the agent gets the keys, the reply its receipt.
    let (status, v) = post(yes).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["answer"], "yes", "{v}");
    assert_eq!(v["receipt"], "submitted", "{v}");
    hub.wait_output(&id, "answered: y", T).await;
    // Audited as the link's answer, on the session.
    let (_, audit) = hub.get("/v1/pty-traffic/events?action=answer_link").await;
    assert_eq!(audit["total"], 1, "{audit}");
    assert_eq!(audit["events"][0]["session_id"], id.as_str(), "{audit}");
    assert_eq!(audit["events"][0]["success"], true, "{audit}");

    // Used: refused, and so is the other choice's link of the same question; the page says so.
    refused(&post(yes).await, 410, "ANSWER_LINK_USED");
    refused(&post(link(&links, "no")).await, 410, "ANSWER_LINK_USED");
    let (status, page) = follow(reqwest::Method::POST, yes, true).await;
    assert_eq!(status, 410, "{page}");
    assert!(
        page.contains("data-code=\"ANSWER_LINK_USED\"") && page.contains("answers once"),
        "{page}"
    );
    // Nothing more reached the agent.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, out) = hub
        .get(&format!("/v1/pty/sessions/{id}/read?since=0&timeout_ms=0"))
        .await;
    let text = out["output"].as_str().unwrap_or_default();
    assert_eq!(text.matches("answered:").count(), 1, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_tampered_misplaced_and_answered_elsewhere_links_are_refused() {
    let (hub, _dir, rx) = hub_and_receiver().await;
    let id = fake_session(&hub).await;
    let links = ask(&hub, &rx, &id, 0).await;
    let yes = link(&links, "yes").to_string();
    let (prefix, token) = yes.rsplit_once('/').unwrap();

    // Tampered: one character of its signature changed; its claim changed under the old
    // signature; moved to another session's path.
    let (payload, mac) = token.split_once('.').unwrap();
    let flipped = if mac.ends_with('A') { "B" } else { "A" };
    let bad_mac = format!("{prefix}/{payload}.{}{flipped}", &mac[..mac.len() - 1]);
    refused(&post(&bad_mac).await, 403, "ANSWER_LINK_INVALID");
    let no_payload = link(&links, "no")
        .rsplit_once('/')
        .unwrap()
        .1
        .split_once('.')
        .unwrap()
        .0;
    refused(
        &post(&format!("{prefix}/{no_payload}.{mac}")).await,
        403,
        "ANSWER_LINK_INVALID",
    );
    let other = format!("{}/answer/pty_elsewhere/{token}", hub.base);
    refused(&post(&other).await, 403, "ANSWER_LINK_INVALID");
    refused(
        &post(&format!("{prefix}/garbage")).await,
        403,
        "ANSWER_LINK_INVALID",
    );

    // Expired: the same claim 15 minutes on, signed by this hub's own key.
    let signer = hub.hub.notifier().answer_links().unwrap().clone();
    let mut claim = signer.verify(&id, token, chrono::Utc::now()).unwrap();
    claim.expires = chrono::Utc::now().timestamp() - 1;
    let expired = format!("{prefix}/{}", signer.sign(&claim));
    refused(&post(&expired).await, 410, "ANSWER_LINK_EXPIRED");
    let (status, page) = follow(reqwest::Method::GET, &expired, true).await;
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("expired"), "{page}");

    // None of those answered: still blocked. Someone answers on the dashboard (keys), then
    // the link is refused: its question is gone.
    let (_, st) = hub.get(&format!("/v1/pty/sessions/{id}/state")).await;
    assert_eq!(st["state"], "blocked", "{st}");
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/keys"),
            json!({ "keys": ["n", "Enter"] }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    hub.wait_output(&id, "answered: n", T).await;
    refused(&post(&yes).await, 409, "QUESTION_GONE");

    // Asked again: the new question's links answer it; the old ones never do (a question
    // asked again later is another question).
    wait_state_strict(&hub, &id, "idle").await;
    let again = ask(&hub, &rx, &id, 1).await;
    refused(&post(&yes).await, 409, "QUESTION_GONE");
    let (status, v) = post(link(&again, "yes")).await;
    assert_eq!(status, 200, "{v}");
    hub.wait_output(&id, "answered: y", T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_notify_actions_messages_carry_no_links_and_none_answers() {
    let rx = Receiver::start(&[], false).await;
    let (hub, _dir) = hub_with(&hook(&rx.url, "json", "min_interval_s = 0")).await;
    let id = fake_session(&hub).await;
    let (status, v) = submit(&hub, &id, "ask", false).await;
    assert_eq!(status, 200, "{v}");
    let got = rx.wait_for(T, |g| g.json()["event"] == "blocked").await;
    let m = got.json();
    assert_eq!(m["choices"][0]["label"], "yes", "{m}");
    assert!(m.get("answers").is_none(), "{m}");
    let url = format!("{}/answer/{id}/abc.def", hub.base);
    refused(&post(&url).await, 403, "ANSWER_LINK_INVALID");
}
