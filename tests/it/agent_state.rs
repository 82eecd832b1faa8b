//! Agent state and activity through real terminals: the scripted fake agent TUI classified in
//! each state with `explain`, delivery receipts (submitted, stalled, refused when blocked), and
//! `last_activity_at` against status-line clocks, cursor and title changes, resizes and viewers.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::both_backends;
use crate::policy_support::*;
use crate::support::{wait_until, TestHub};

async fn fake_agent_is_classified_and_delivery_gives_receipts(backend: &str) {
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    let id = hub
        .create_with(json!({
            "backend": backend, "shell": "bash", "args": [fake_agent()], "cli_type": "fake",
        }))
        .await;
    let t = Duration::from_secs(10);

    let idle = wait_state(&hub, &id, "idle", t).await;
    assert_eq!(idle["rule"], "prompt", "{idle}");
    assert_eq!(idle["evidence"], json!(["fake>"]), "{idle}");
    assert_eq!(idle["profile"], "fake");
    let (_, plain) = hub.get(&format!("/v1/pty/sessions/{id}/state")).await;
    assert_eq!(plain["state"], "idle");
    assert!(
        plain.get("rule").is_none() && plain.get("evidence").is_none(),
        "{plain}"
    );

    // A prompt is pasted (the fake enabled bracketed paste), submitted, and the agent works.
    let (status, v) = submit(&hub, &id, "work 2", false).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["receipt"], "submitted", "{v}");
    assert_eq!(v["delivery"]["bracketed_paste"], true, "{v}");
    let working = wait_state(&hub, &id, "working", t).await;
    assert_eq!(working["rule"], "spinner", "{working}");
    assert!(
        working["evidence"][0]
            .as_str()
            .unwrap()
            .contains("Working… (esc to interrupt)"),
        "{working}"
    );
    wait_state(&hub, &id, "idle", t).await;
    hub.wait_output(&id, "done: 2", t).await;

    // Multi-line text arrives as one paste: one prompt, not two.
    let (_, v) = submit(&hub, &id, "first line\nsecond line", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    hub.wait_output(&id, "echo: first line second line", t)
        .await;

    // A permission question: blocked, with the question as evidence; a prompt is refused.
    let (_, v) = submit(&hub, &id, "ask", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    let blocked = wait_state(&hub, &id, "blocked", t).await;
    assert_eq!(blocked["rule"], "permission", "{blocked}");
    assert!(blocked["evidence"][0]
        .as_str()
        .unwrap()
        .contains("Allow write to main.rs? [y/n]"));
    let (status, v) = submit(&hub, &id, "do something else", false).await;
    assert_eq!(
        (status, v["error_code"].as_str(), v["receipt"].as_str()),
        (409, Some("AGENT_BLOCKED"), Some("blocked")),
        "{v}"
    );
    assert!(v["evidence"][0].as_str().unwrap().contains("Allow write"));
    // Forced, it answers the question.
    let (status, v) = submit(&hub, &id, "y", true).await;
    assert_eq!(
        (status, v["receipt"].as_str()),
        (200, Some("submitted")),
        "{v}"
    );
    hub.wait_output(&id, "answered: y", t).await;
    wait_state(&hub, &id, "idle", t).await;

    // A program that takes the first Enter as a newline (Gemini CLI, an Enter read too soon
    // after a paste): the new empty line is not taken for a submit, and Enter is pressed again.
    let (_, v) = submit(&hub, &id, "rushed", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    let (_, v) = submit(&hub, &id, "after a newline", false).await;
    assert_eq!(
        (v["receipt"].as_str(), v["delivery"]["enters"].as_u64()),
        (Some("submitted"), Some(2)),
        "{v}"
    );
    hub.wait_output(&id, "echo: after a newline", t).await;

    // A program that ignores Enter: two Enters, then `stalled`.
    let (_, v) = submit(&hub, &id, "deaf", false).await;
    assert_eq!(v["receipt"], "submitted", "{v}");
    let started = Instant::now();
    let (status, v) = submit(&hub, &id, "are you there", false).await;
    assert_eq!(
        (status, v["receipt"].as_str()),
        (200, Some("stalled")),
        "{v}"
    );
    assert_eq!(v["delivery"]["enters"], 2);
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "waited for both Enters"
    );
}
both_backends!(fake_agent_is_classified_and_delivery_gives_receipts);

/// `last_activity_at` stays put through status-line clock redraws, cursor moves and blinks,
/// title changes, colour-only redraws, our own resize and a viewer attaching and leaving, while
/// `last_output_at` moves; it moves for input and for new text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_activity_ignores_redraws_resizes_and_viewers_but_not_input_or_output() {
    let hub = TestHub::start().await;
    let inner = format!("{}-inner", hub.tmux_socket);
    let _kill = crate::support::TmuxServerGuard(inner.clone());
    let nested = nested_clock_session(&hub, &inner, None).await;
    assert_clock_moves(&hub, &nested).await;
    // A program that, after its first line, only moves the cursor, blinks it, sets the title
    // and changes colours.
    let blinker = hub
        .create_with(json!({
            "shell": "bash",
            "args": ["-c", "echo ready; while :; do printf '\\e]0;t%s\\a\\e[5;5H\\e[?25l\\e[31m' $RANDOM; sleep 0.2; printf '\\e[?25h\\e[1;1H\\e[0m'; sleep 0.2; done"],
        }))
        .await;
    hub.wait_output(&blinker, "ready", Duration::from_secs(5))
        .await;
    // Let both settle, then take the baseline.
    let settled = |id: String| {
        let hub = &hub;
        async move {
            wait_until(Duration::from_secs(10), || async {
                hub.hub.get(&id).unwrap().state_report().idle_for_ms >= 1500
            })
            .await
        }
    };
    assert!(
        settled(nested.clone()).await,
        "{}",
        hub.session(&nested).await
    );
    assert!(
        settled(blinker.clone()).await,
        "{}",
        hub.session(&blinker).await
    );
    let before_nested = hub.session(&nested).await;
    let before_blinker = hub.session(&blinker).await;

    // A viewer attaches and leaves; we resize the nested session (tmux repaints it all) and back.
    let ws = hub
        .connect_ws(&format!("/v1/pty/sessions/{nested}/stream"))
        .await;
    drop(ws);
    for (cols, rows) in [(100, 30), (80, 24)] {
        let (status, v) = hub
            .post(
                &format!("/v1/pty/sessions/{nested}/resize"),
                json!({ "cols": cols, "rows": rows }),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Two more clock redraws.
    let offset = hub.hub.get(&nested).unwrap().output().end_offset();
    let redrawn = wait_until(Duration::from_secs(5), || async {
        hub.hub.get(&nested).unwrap().output().end_offset() > offset + 20
    })
    .await;
    assert!(redrawn);
    tokio::time::sleep(Duration::from_millis(1200)).await;

    for (id, before) in [(&nested, &before_nested), (&blinker, &before_blinker)] {
        let after = hub.session(id).await;
        assert_eq!(
            after["last_activity_at"], before["last_activity_at"],
            "{id}: {after}"
        );
        assert!(
            after["last_output_at"].as_str() > before["last_output_at"].as_str(),
            "{id}: bytes did arrive: {after}"
        );
    }

    // Input counts (recorded separately), and so does new text on the screen.
    let (status, _) = hub
        .post(
            &format!("/v1/pty/sessions/{nested}/send_line"),
            json!({ "data": "echo $((6*7))xyz" }),
        )
        .await;
    assert_eq!(status, 200);
    hub.wait_output(&nested, "42xyz", Duration::from_secs(5))
        .await;
    let moved = wait_until(Duration::from_secs(3), || async {
        let s = hub.session(&nested).await;
        s["last_screen_change_at"].as_str() > before_nested["last_activity_at"].as_str()
    })
    .await;
    let after = hub.session(&nested).await;
    assert!(moved, "{after}");
    assert!(after["last_input_at"].as_str() > before_nested["last_activity_at"].as_str());
    assert!(after["last_activity_at"].as_str() > before_nested["last_activity_at"].as_str());
}
