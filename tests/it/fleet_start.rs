//! Fleet start (#30) against a real Docker engine: concurrent starts of one engine take turns
//! in their Docker work (`agent_start_concurrency`), are ready as they come, and a start that
//! fails gives its turn back.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::docker_support::{agent_toml, hub_with_agents, hub_with_agents_and, test_image};
use crate::require_docker;
use crate::support::TestHub;

/// Longest a whole batch of starts may take on a loaded 2-core machine.
const BATCH: Duration = Duration::from_secs(120);

fn time(v: &Value) -> DateTime<Utc> {
    let text = v.as_str().unwrap_or_else(|| panic!("not a time: {v}"));
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .with_timezone(&Utc)
}

/// Starts every agent at once; each one's reply and when it came.
async fn start_all(hub: &TestHub, ids: &[String]) -> Vec<(u16, Value, DateTime<Utc>)> {
    let starts = ids.iter().map(|id| async move {
        let (status, v) = hub.post(&format!("/v1/agents/{id}/start"), json!({})).await;
        (status, v, Utc::now())
    });
    tokio::time::timeout(BATCH, futures_util::future::join_all(starts))
        .await
        .expect("every start answers (a start slot never given back would hold the rest)")
}

/// The most of `spans` that are open at one moment.
fn most_at_once(spans: &[(DateTime<Utc>, DateTime<Utc>)]) -> usize {
    spans
        .iter()
        .map(|(at, _)| spans.iter().filter(|(b, e)| b <= at && at < e).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn overlapping_spans_are_counted() {
    let t = |s: i64| DateTime::<Utc>::from_timestamp(s, 0).unwrap();
    assert_eq!(most_at_once(&[]), 0);
    assert_eq!(most_at_once(&[(t(0), t(2)), (t(2), t(4))]), 1);
    assert_eq!(most_at_once(&[(t(0), t(3)), (t(1), t(4)), (t(2), t(5))]), 3);
    assert_eq!(most_at_once(&[(t(0), t(9)), (t(1), t(2)), (t(3), t(4))]), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_starts_take_turns_in_their_docker_work_and_are_ready_as_they_come() {
    require_docker!();
    let ids: Vec<String> = (1..=6).map(|i| format!("f{i}")).collect();
    let toml: String = ids.iter().map(|id| agent_toml(id, "")).collect();
    let (hub, _guard) = hub_with_agents_and(&toml, |c| c.agent_start_concurrency = 2).await;
    let replies = start_all(&hub, &ids).await;
    let mut spans = Vec::new();
    for (id, (status, v, _)) in ids.iter().zip(&replies) {
        assert_eq!(
            (*status, &v["agent"]["status"]),
            (200, &json!("running")),
            "{id}: {v}"
        );
        // Inside its Docker work: from its container's start to its terminal's attach.
        let started = time(&v["agent"]["started_at"]);
        let sid = v["agent"]["session_id"].as_str().expect("a session");
        let (_, s) = hub.get(&format!("/v1/pty/sessions/{sid}")).await;
        spans.push((started, time(&s["session"]["created_at"])));
    }
    assert_eq!(most_at_once(&spans), 2, "two at a time: {spans:?}");
    let first_ready = replies.iter().map(|r| r.2).min().unwrap();
    let last_started = spans.iter().map(|s| s.0).max().unwrap();
    assert!(
        first_ready < last_started,
        "the first agent is ready ({first_ready}) before the last container starts \
         ({last_started}), not all at the end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_fails_gives_its_turn_back() {
    require_docker!();
    let missing = |id: &str, n: u32| {
        agent_toml(id, "").replace(&test_image(), &format!("agent-hub/no-such-image:{n}"))
    };
    let toml = [
        missing("gone1", 1),
        missing("gone2", 2),
        agent_toml("next", ""),
    ]
    .concat();
    let (hub, _guard) = hub_with_agents_and(&toml, |c| c.agent_start_concurrency = 1).await;
    let ids = ["gone1", "gone2", "next"].map(String::from);
    let replies = start_all(&hub, &ids).await;
    for (id, (status, v, _)) in ids.iter().zip(&replies).take(2) {
        assert_eq!(
            (*status, v["error_code"].as_str()),
            (500, Some("AGENT_START_FAILED")),
            "{id}: {v}"
        );
    }
    let (status, v, _) = &replies[2];
    assert_eq!(
        (*status, &v["agent"]["status"]),
        (200, &json!("running")),
        "{v}"
    );
    // And once more after the failures, alone.
    let (status, v) = hub.post("/v1/agents/gone1/start", json!({})).await;
    assert_eq!(status, 500, "{v}");
    hub.post("/v1/agents/next/stop", json!({})).await;
    let again = start_all(&hub, &["next".to_string()]).await;
    assert_eq!(again[0].0, 200, "{}", again[0].1);
}

/// Now, as `docker events` takes it (seconds since the epoch, with a fraction).
fn events_now() -> String {
    let now = Utc::now();
    format!("{}.{:09}", now.timestamp(), now.timestamp_subsec_nanos())
}

/// The commands of the execs the engine made in hub `hub_id`'s containers between two
/// [`events_now`]s, in order.
fn execs_between(hub_id: &str, since: &str, until: &str) -> Vec<String> {
    crate::docker_support::docker(&[
        "events",
        "--since",
        since,
        "--until",
        until,
        "--filter",
        "type=container",
        "--filter",
        "event=exec_create",
        "--filter",
        &format!("label=agent-hub.hub={hub_id}"),
        "--format",
        "{{.Action}}",
    ])
    .lines()
    .map(|l| l.trim_start_matches("exec_create: ").to_string())
    .collect()
}

/// Execs in a container agent's start (#30): each one is three engine calls and a process
/// in the container, and the fleet's start is bounded by them. The image's tmux session is
/// waited for in one exec, the pane and its pipe are looked at in one tmux call, and the
/// control client is the third; nothing after the attach execs again, nor does the stop.
const EXECS_PER_START: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_agent_start_makes_few_execs_and_its_stop_removes_it() {
    require_docker!();
    let (hub, guard) = hub_with_agents(&agent_toml("few", "remove_on_stop = true")).await;
    let since = events_now();
    let (status, v) = hub.post("/v1/agents/few/start", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let sid = v["agent"]["session_id"].as_str().expect("a session");
    // The agent works: its terminal answers (through the control client, no exec).
    assert_eq!(hub.talk(sid, "echo up").await["output"], "up\n");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let execs = execs_between(&guard.0, &since, &events_now());
    assert!(
        execs.len() <= EXECS_PER_START,
        "{} execs in one start: {execs:#?}",
        execs.len()
    );
    let since = events_now();
    let (status, v) = hub.post("/v1/agents/few/stop", json!({})).await;
    assert_eq!(
        (status, &v["agent"]["status"]),
        (200, &json!("stopped")),
        "{v}"
    );
    // The hub detached the control client itself: it does not exec into the container on its
    // way out to ask whether the pane died.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let execs = execs_between(&guard.0, &since, &events_now());
    assert!(execs.is_empty(), "execs in a stop: {execs:#?}");
    let left = crate::docker_support::docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label=agent-hub.hub={}", guard.0),
    ]);
    assert_eq!(left.trim(), "", "the stopped agent's container is removed");
}
