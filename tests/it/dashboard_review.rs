//! Reviewing an agent's work from the dashboard, in headless Chromium: a container agent (the
//! fake agent TUI) with a workspace whose branch has a commit; in its changes panel a click on
//! a diff line opens a note box for that file and line, notes collect in a list (one is
//! removed), "Send 2 notes" sends them as one review, the page shows the receipt, and the
//! agent's pane shows the prompt with both notes. No CSP violation on the way. And the merge
//! button: its confirmation lists what would land (Cancel lands nothing), a dirty base is
//! refused with the file named, and Confirm lands the agent's commit on `main` (git on the host).
//! On a phone (390 px, touch): a note tapped in and sent, its buttons 44 px tall, the page no
//! wider than the phone.

use serde_json::json;

use crate::browser;
use crate::dashboard::{open_fleet, T};
use crate::docker_support::{unique_hub_id, ContainerGuard};
use crate::policy_support::{hub_with_policies, policies_dir};
use crate::real_cli_docker::start_synced;
use crate::require_docker;
use crate::review::{commit_in_checkout, fake_agent_toml, output};
use crate::support::wait_until;
use crate::workspace::{git, user_repo};

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

/// A started container agent running the fake agent TUI on a workspace whose branch has
/// `app.txt` committed, and the page signed in, counting CSP violations, on its panel.
struct Agent {
    hub: crate::support::TestHub,
    sid: String,
    repo: tempfile::TempDir,
    _guard: ContainerGuard,
    _policies: tempfile::TempDir,
}

async fn agent_with_a_commit(b: &crate::browser_support::Browser, id: &str) -> Agent {
    let agent = agent_with_a_commit_signed_in(b, id).await;
    b.click(&format!("tr[data-unit=\"{id}\"] td.name")).await;
    agent
}

/// [`agent_with_a_commit`] before the click that opens its panel.
async fn agent_with_a_commit_signed_in(b: &crate::browser_support::Browser, id: &str) -> Agent {
    let repo = user_repo();
    let hub_id = unique_hub_id();
    let guard = ContainerGuard(hub_id.clone());
    let policies = policies_dir();
    let hub = hub_with_policies(&policies, &fake_agent_toml(&hub_id, id, repo.path())).await;
    let (sid, _) = start_synced(&hub, id).await;
    commit_in_checkout(&hub, id, "app.txt", "one\ntwo\nthree\n").await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    open_fleet(b, &hub).await;
    b.js(
        "window.cspViolations = []; document.addEventListener('securitypolicyviolation', e => window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`)); return 1",
        json!([]),
    )
    .await;
    Agent {
        hub,
        sid,
        repo,
        _guard: guard,
        _policies: policies,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_on_a_diff_line_is_sent_from_the_page_and_the_agent_gets_it() {
    require_docker!();
    let b = browser!();
    let Agent { hub, sid, .. } = &agent_with_a_commit(&b, "rw").await;
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
        let out = output(hub, sid).await;
        out.find(echoed)
            .is_some_and(|at| out[at..].contains("Note: three is fine"))
    });
    assert!(got.await, "{}", output(hub, sid).await);
    let out = output(hub, sid).await;
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

/// The text of the merge control's result once it has one (`data-outcome` set).
async fn merge_outcome(b: &crate::browser_support::Browser) -> serde_json::Value {
    b.wait_js(
        "the merge's outcome",
        "const r = document.querySelector('.term-info .merge-result'); return r.dataset.outcome && [r.dataset.outcome, r.textContent]",
        T,
    )
    .await
}

/// Asks for the merge in `mode` and waits for the confirmation; its title, commits and files.
async fn ask_merge(b: &crate::browser_support::Browser, mode: &str) -> serde_json::Value {
    b.js(
        &format!("document.querySelector('.term-info .merge-mode').value = '{mode}'; return 1"),
        json!([]),
    )
    .await;
    b.click(".term-info .merge-button").await;
    b.wait_js(
        "the merge's confirmation",
        "const c = document.querySelector('.term-info .merge-confirm'); return !c.hidden && [c.querySelector('.merge-title').textContent, [...c.querySelectorAll('.merge-commits li')].map(l => l.textContent), [...c.querySelectorAll('.merge-files li')].map(l => l.dataset.file)]",
        T,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merge_button_shows_what_lands_and_lands_it_after_confirming() {
    require_docker!();
    let b = browser!();
    let Agent { hub, repo, .. } = &agent_with_a_commit(&b, "rm").await;
    let main_before = git(repo.path(), &["rev-parse", "main"]);
    let button = b
        .wait_js(
            "the merge button",
            "return document.querySelector('.term-info .merge-button')?.textContent",
            T,
        )
        .await;
    assert_eq!(button, json!("Merge into main"));

    // The confirmation shows what would land; Cancel lands nothing.
    let plan = ask_merge(&b, "squash").await;
    assert_eq!(plan[0], json!("squash 1 commit of agent/rm into main?"));
    assert!(
        plan[1][0].as_str().unwrap().ends_with(" Add app.txt"),
        "{plan}"
    );
    assert_eq!(plan[2], json!(["app.txt"]));
    b.screenshot("merge-confirm").await;
    b.click(".term-info .merge-cancel").await;
    assert_eq!(git(repo.path(), &["rev-parse", "main"]), main_before);

    // A dirty base: refused with the file named, nothing changed.
    std::fs::write(repo.path().join("README.md"), "changed by hand\n").unwrap();
    ask_merge(&b, "squash").await;
    b.click(".term-info .merge-confirm-button").await;
    let refused = merge_outcome(&b).await;
    assert_eq!(refused[0], json!("error"), "{refused}");
    let text = refused[1].as_str().unwrap();
    assert!(
        text.starts_with("not merged: BASE_DIRTY: ") && text.ends_with("README.md"),
        "{text}"
    );
    assert_eq!(git(repo.path(), &["rev-parse", "main"]), main_before);

    // Clean again: Confirm lands the work on main, and the user's checkout has it.
    git(repo.path(), &["checkout", "--", "README.md"]);
    ask_merge(&b, "squash").await;
    b.click(".term-info .merge-confirm-button").await;
    let landed = b
        .wait_js(
            "the merge landed",
            "const r = document.querySelector('.term-info .merge-result'); return r.dataset.outcome === 'merged' && r.textContent",
            T,
        )
        .await;
    assert!(
        landed
            .as_str()
            .unwrap()
            .starts_with("squash: 1 commit of agent/rm landed on main ("),
        "{landed}"
    );
    b.screenshot("merge-landed").await;
    assert_ne!(git(repo.path(), &["rev-parse", "main"]), main_before);
    assert_eq!(
        git(repo.path(), &["show", "main:app.txt"]),
        "one\ntwo\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("app.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    let (_, audit) = hub.get("/v1/pty-traffic/events?action=agent_merge").await;
    assert!(audit["total"].as_u64() >= Some(3), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_phone_a_note_is_tapped_in_and_sent() {
    require_docker!();
    let b = browser!();
    crate::dashboard_phone::phone(&b).await;
    let Agent { hub, sid, .. } = &agent_with_a_commit_signed_in(&b, "rp").await;
    let tap = |css: String| {
        let b = &b;
        async move { crate::dashboard_phone::tap(b, &css).await }
    };
    tap(".card[data-unit=\"rp\"] .card-head .name".into()).await;
    b.wait_js(
        "the diff button on the phone",
        "return document.querySelector('.term-info .changes button.diff-button')",
        T,
    )
    .await;
    tap(".term-info .changes button.diff-button".into()).await;
    let line = diff_line("app.txt", 2);
    b.wait_js(
        "the diff's lines",
        &format!("return document.querySelector('{line}')"),
        T,
    )
    .await;
    tap(line).await;
    b.wait_js(
        "the note box",
        "return document.querySelector('.note-box textarea')",
        T,
    )
    .await;
    b.type_into(".note-box textarea", "tapped on a phone").await;
    tap(".note-box button.add".into()).await;
    // Big enough to tap, and nothing wider than the phone (the diff scrolls in its box).
    let sizes = b
        .js(
            "const h = (s) => document.querySelector(s).getBoundingClientRect().height;
             return [h('.review-send'), h('ul.review-notes .remove'), document.documentElement.scrollWidth]",
            json!([]),
        )
        .await;
    assert!(
        sizes[0].as_f64() >= Some(44.0) && sizes[1].as_f64() >= Some(44.0),
        "{sizes}"
    );
    assert!(sizes[2].as_f64() <= Some(390.0), "the page is {sizes} wide");
    b.screenshot("phone-review").await;
    tap(".review-send".into()).await;
    let receipt = b
        .wait_js(
            "the review's receipt",
            "const r = document.querySelector('.review-receipt'); return r.dataset.receipt && r.textContent",
            T,
        )
        .await;
    assert_eq!(receipt, json!("1 note sent to rp: submitted"));
    hub.wait_output(sid, "Note: tapped on a phone", T).await;
}
