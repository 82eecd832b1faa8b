//! A webhook told of the real Claude Code in a container (the npm-installed CLI mounted into
//! the offline test image, against the model stand-in on the host's loopback): its permission
//! question arrives within 2 s of the state with its numbered choices and an answer link for
//! each, the link for "Yes" answers it, and the turn the answer finishes arrives with its last
//! lines.

use std::time::{Duration, Instant};

use agent_hub::agent_state::State;
use serde_json::json;

use crate::docker_support::{unique_hub_id, ContainerGuard};
use crate::model_standin::{ModelStandIn, AFTER_TOOL};
use crate::notify::{hook, hub_with, Receiver};
use crate::real_cli::{cli, write_claude_config};
use crate::real_cli_docker::{open_up, start_synced};
use crate::require_docker;
use crate::support::wait_until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_question_and_finished_turn_reach_a_webhook() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let rx = Receiver::start(&[], false).await;
    let standin = ModelStandIn::start().await;
    let files = tempfile::tempdir().unwrap();
    write_claude_config(&files.path().join("claude"), "/work", false);
    std::fs::create_dir_all(files.path().join("work")).unwrap();
    open_up(files.path());
    let hub_id = unique_hub_id();
    let _guard = ContainerGuard(hub_id.clone());
    let lines = "team = \"red\"\ncols = 100\nrows = 30\n";
    let agent = format!(
        "hub_id = \"{hub_id}\"\n{}",
        crate::usage::claude_agent("cc", lines, &standin, files.path())
    );
    let events = "events = [\"blocked\", \"turn_finished\"]\nmin_interval_s = 0\nteams = [\"red\"]";
    let (hub, _dir) = hub_with(&format!(
        "notify_actions = true\n{agent}{}",
        hook(&rx.url, "json", events)
    ))
    .await;
    let (sid, session) = start_synced(&hub, "cc").await;
    let t = Duration::from_secs(30);

    // A tool call: Claude Code asks permission; the question arrives with its choices.
    let (status, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": "cc", "data": "please run a tool"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let blocked = wait_until(t, || async {
        session.state_report().state == State::Blocked
    })
    .await;
    assert!(blocked, "{}", session.with_screen(|s| s.text()));
    let asked_at = Instant::now();
    let got = rx.wait_for(t, |g| g.json()["event"] == "blocked").await;
    let took = asked_at.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
    let m = got.json();
    assert_eq!(
        (m["agent"]["id"].as_str(), m["agent"]["team"].as_str()),
        (Some("cc"), Some("red")),
        "{m}"
    );
    assert!(
        m["question"]
            .as_str()
            .unwrap_or("")
            .starts_with("Do you want to proceed?"),
        "{m}"
    );
    assert_eq!(m["choices"].as_array().map(Vec::len), Some(4), "{m}");
    assert_eq!(m["choices"][3]["label"], "No", "{m}");
    assert_eq!(m["choices"][0]["keys"], json!(["1"]), "{m}");
    assert!(
        m["choices"][0]["label"]
            .as_str()
            .unwrap()
            .starts_with("Yes"),
        "{m}"
    );
    assert_eq!(
        m["link"],
        format!("http://hub.example:8100/#/grid/{sid}"),
        "{m}"
    );

    // The answer, through the message's answer link for "Yes" (a POST, no token: as ntfy's
    // button sends it), runs the tool; the turn's end arrives with its last lines.
    let answers = m["answers"].as_array().unwrap_or_else(|| panic!("{m}"));
    assert_eq!(answers.len(), 4, "{m}");
    assert_eq!(answers[0]["label"], m["choices"][0]["label"], "{m}");
    let url = answers[0]["url"]
        .as_str()
        .unwrap()
        .replace("http://hub.example:8100", &hub.base);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = reqwest::Client::new().post(&url).send().await.unwrap();
    let status = r.status().as_u16();
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["keys"], json!(["1"]), "{v}");
    assert_eq!(v["receipt"], "submitted", "{v}");
    let done = rx
        .wait_for(t, |g| {
            let m = g.json();
            m["event"] == "turn_finished" && m["lastLines"].to_string().contains(AFTER_TOOL)
        })
        .await;
    let m = done.json();
    assert!(
        m["what"].as_str().unwrap().starts_with("finished its turn"),
        "{m}"
    );
    println!("Claude Code's question reached the webhook {took:?} after the state");
    let (status, v) = hub.post("/v1/agents/cc/stop", json!({})).await;
    assert_eq!(status, 200, "{v}");
}
