//! Reviewing an agent's work from the dashboard, in headless Chromium: a container agent (the
//! fake agent TUI) with a workspace whose branch has a commit; in its changes panel a click on
//! a diff line opens a note box for that file and line, notes collect in a list (one is
//! removed), "Send 2 notes" sends them as one review, the page shows the receipt, and the
//! agent's pane shows the prompt with both notes. No CSP violation on the way.

use serde_json::json;

use crate::browser;
use crate::dashboard::{open_fleet, T};
use crate::docker_support::{unique_hub_id, ContainerGuard};
use crate::policy_support::{hub_with_policies, policies_dir};
use crate::real_cli_docker::start_synced;
use crate::require_docker;
use crate::review::{commit_in_checkout, fake_agent_toml, output};
use crate::support::wait_until;
use crate::workspace::user_repo;

/// The line `line` of `file` in the agent panel's diff.
fn diff_line(file: &str, line: u32) -> String {
    format!(".term-info .diff .dl[data-file=\"{file}\"][data-line=\"{line}\"]")
}

/// Clicks a diff line, writes `note` in its box and adds it.
async fn note_on(b: &crate::browser_support::Browser, file: &str, line: u32, note: &str) {
    b.click(&diff_line(file, line)).await;
    b.wait_js(
        "the note box",
        &format!(
            "return document.querySelector('.note-box')?.textContent.includes('{file}:{line}')"
        ),
        T,
    )
    .await;
    b.type_into(".note-box textarea", note).await;
    b.click(".note-box button.add").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_on_a_diff_line_is_sent_from_the_page_and_the_agent_gets_it() {
    require_docker!();
    let b = browser!();
    let repo = user_repo();
    let hub_id = unique_hub_id();
    let _guard = ContainerGuard(hub_id.clone());
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, &fake_agent_toml(&hub_id, "rw", repo.path())).await;
    let (sid, _session) = start_synced(&hub, "rw").await;
    commit_in_checkout(&hub, "rw", "app.txt", "one\ntwo\nthree\n").await;

    b.sign_in(&hub.base, &hub.owner_token).await;
    open_fleet(&b, &hub).await;
    b.js(
        "window.cspViolations = []; document.addEventListener('securitypolicyviolation', e => window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`)); return 1",
        json!([]),
    )
    .await;
    b.click("tr[data-unit=\"rw\"] td.name").await;
    b.wait_js(
        "the committed file in the agent's panel",
        "return document.querySelector('.term-info .changes [data-file=\"app.txt\"]')",
        T,
    )
    .await;
    b.click(".term-info .changes button.diff-button").await;
    let lines = format!(
        "return document.querySelector('{}')",
        diff_line("app.txt", 3)
    );
    b.wait_js("the diff's lines", &lines, T).await;

    // Three notes, one removed again: two go.
    note_on(&b, "app.txt", 2, "two should be deux").await;
    note_on(&b, "app.txt", 1, "not this one").await;
    note_on(&b, "app.txt", 3, "three is fine").await;
    let listed = b
        .js(
            "return [...document.querySelectorAll('ul.review-notes li')].map(l => l.textContent)",
            json!([]),
        )
        .await;
    assert_eq!(
        listed,
        json!([
            "app.txt:2 two should be deux ×",
            "app.txt:1 not this one ×",
            "app.txt:3 three is fine ×"
        ])
    );
    b.click("ul.review-notes li[data-note=\"1\"] button.remove")
        .await;
    let send = b
        .wait_js(
            "the send button for two notes",
            "const s = document.querySelector('.review-send'); return !s.hidden && s.textContent",
            T,
        )
        .await;
    assert_eq!(send, json!("Send 2 notes"));
    b.screenshot("review-notes").await;
    b.click(".review-send").await;
    let receipt = b
        .wait_js(
            "the review's receipt",
            "const r = document.querySelector('.review-receipt'); return r.dataset.receipt && r.textContent",
            T,
        )
        .await;
    assert_eq!(receipt, json!("2 notes sent to rw: submitted"));
    let cleared = b
        .js(
            "return [document.querySelectorAll('ul.review-notes li').length, document.querySelector('.review-send').hidden]",
            json!([]),
        )
        .await;
    assert_eq!(cleared, json!([0, true]));

    // The agent got one prompt with both notes, each with its line's hunk.
    let echoed = "echo: Review notes on your branch agent/rw (against main), 2 notes.";
    let got = wait_until(T, || async {
        let out = output(&hub, &sid).await;
        out.find(echoed)
            .is_some_and(|at| out[at..].contains("Note: three is fine"))
    });
    assert!(got.await, "{}", output(&hub, &sid).await);
    let out = output(&hub, &sid).await;
    let out = &out[out.find(echoed).unwrap()..];
    for words in [
        "1. File app.txt, line 2, in this hunk of your committed changes:",
        "Note: two should be deux",
        "2. File app.txt, line 3,",
        "Note: three is fine",
    ] {
        assert!(out.contains(words), "{words}: {out}");
    }
    assert!(!out.contains("not this one"), "{out}");
    let (_, audit) = hub.get("/v1/pty-traffic/events?action=agent_review").await;
    assert_eq!(audit["total"], 1, "{audit}");
    let violations = b.js("return window.cspViolations", json!([])).await;
    assert_eq!(violations, json!([]));
}
