//! `GET /metrics`: scraped from a real hub over HTTP, the values move with the work done
//! (sessions, lines, guard refusals, redactions, WebSocket viewers, agents in real containers),
//! and it needs an observer token like the API.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;

use crate::docker_support::{agent_toml, hub_with_agents};
use crate::support::{wait_until, TestHub};

const SECRET: &str = "metric-literal-secret-0123456789";

/// `send_line` of `data` into session `id`: the reply's status and body.
async fn send_line(hub: &TestHub, id: &str, data: &str) -> (u16, serde_json::Value) {
    let path = format!("/v1/pty/sessions/{id}/send_line");
    hub.post(&path, json!({ "data": data })).await
}

/// One scrape's text.
async fn scrape(hub: &TestHub) -> String {
    let resp = hub
        .http
        .get(format!("{}/metrics", hub.base))
        .send()
        .await
        .expect("scrape");
    assert_eq!(resp.status().as_u16(), 200);
    let kind = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let text = resp.text().await.expect("body");
    assert!(
        text.ends_with("# EOF\n"),
        "not a complete exposition:\n{text}"
    );
    text
}

/// The value of the sample `name` whose labels include every pair of `labels` (summed over
/// the samples that match), 0 when there is none.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name
                && labels
                    .iter()
                    .all(|(k, val)| rest.contains(&format!("{k}=\"{val}\""))))
            .then(|| v.parse::<f64>().ok())?
        })
        .sum()
}

/// Live host sessions in a scrape.
fn host_sessions(text: &str) -> f64 {
    let labels = [("source", "host"), ("alive", "true")];
    value(text, "agent_hub_sessions", &labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_with_the_work_done() {
    let hub = TestHub::start_with(|c| c.redact.secrets.push(SECRET.into())).await;
    let before = scrape(&hub).await;
    assert_eq!(
        value(&before, "agent_hub_sessions", &[("source", "host")]),
        0.0
    );

    // A session created.
    let id = hub.create("pty").await;
    let m = scrape(&hub).await;
    assert_eq!(host_sessions(&m), 1.0, "{m}");
    assert_eq!(value(&m, "agent_hub_sessions_by_state", &[]), 1.0, "{m}");

    // A line sent: counted as an input operation, its output as ingested bytes.
    let (status, v) = send_line(&hub, &id, "echo METRIC_LINE_$((6*7))").await;
    assert_eq!(status, 200, "{v}");
    hub.wait_output(&id, "METRIC_LINE_42", Duration::from_secs(10))
        .await;
    let m = scrape(&hub).await;
    let ok_lines = [("kind", "send_line"), ("outcome", "ok")];
    assert_eq!(
        value(&m, "agent_hub_input_operations_total", &ok_lines),
        1.0
    );
    let ingested = value(&m, "agent_hub_output_bytes_total", &[("source", "host")]);
    assert!(ingested >= "METRIC_LINE_42".len() as f64, "{m}");
    let send_route = [
        ("method", "POST"),
        ("route", "/v1/pty/sessions/{id}/send_line"),
        ("status", "200"),
    ];
    assert_eq!(
        value(
            &m,
            "agent_hub_api_request_duration_seconds_count",
            &send_route
        ),
        1.0,
        "{m}"
    );
    assert!(value(&m, "agent_hub_audit_write_duration_seconds_count", &[]) >= 2.0);

    // A guard refusal.
    let (status, v) = send_line(&hub, &id, "rm -rf /").await;
    assert_eq!(status, 403, "{v}");
    let pattern = v["pattern"].as_str().expect("pattern").to_string();
    let m = scrape(&hub).await;
    assert_eq!(
        value(
            &m,
            "agent_hub_guard_refusals_total",
            &[("pattern", &pattern)]
        ),
        1.0,
        "{m}"
    );
    assert_eq!(
        value(
            &m,
            "agent_hub_input_operations_total",
            &[("kind", "send_line"), ("outcome", "PTY_COMMAND_BLOCKED")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &m,
            "agent_hub_api_errors_total",
            &[("code", "PTY_COMMAND_BLOCKED")]
        ),
        1.0
    );

    // A secret printed and read back: redacted, and counted.
    let redactions = value(&m, "agent_hub_redactions_total", &[]);
    let out = hub.talk(&id, &format!("echo {SECRET}")).await;
    assert!(!out.to_string().contains(SECRET), "{out}");
    let m = scrape(&hub).await;
    assert!(value(&m, "agent_hub_redactions_total", &[]) > redactions);

    // A WebSocket viewer: counted while connected, with the bytes it was sent.
    let mut ws = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream?since=0"))
        .await;
    let mut got = 0;
    while got < 2 {
        ws.next().await.expect("frame").expect("frame ok");
        got += 1;
    }
    let m = scrape(&hub).await;
    assert_eq!(value(&m, "agent_hub_stream_viewers", &[]), 1.0, "{m}");
    assert!(
        value(
            &m,
            "agent_hub_stream_sent_bytes_total",
            &[("source", "host")]
        ) > 0.0
    );
    drop(ws);
    let closed = wait_until(Duration::from_secs(5), || async {
        value(&scrape(&hub).await, "agent_hub_stream_viewers", &[]) == 0.0
    })
    .await;
    assert!(closed, "the viewer gauge did not come back to 0");

    // The session's end.
    let (status, _) = hub.delete(&format!("/v1/pty/sessions/{id}")).await;
    assert_eq!(status, 200);
    let m = scrape(&hub).await;
    assert_eq!(host_sessions(&m), 0.0, "{m}");
    // A counter: the removed session's bytes stay counted.
    assert!(value(&m, "agent_hub_output_bytes_total", &[("source", "host")]) >= ingested);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_an_observer_token() {
    let hub = crate::auth::hub_with_tokens().await;
    let url = format!("{}/metrics", hub.base);
    let none = reqwest::Client::new().get(&url).send().await.unwrap();
    assert_eq!(none.status().as_u16(), 401);
    let observer = hub
        .http
        .get(&url)
        .bearer_auth(crate::auth::OBSERVER)
        .send()
        .await
        .unwrap();
    assert_eq!(observer.status().as_u16(), 200);
    let text = observer.text().await.unwrap();
    assert!(
        value(
            &text,
            "agent_hub_api_request_duration_seconds_count",
            &[("route", "/metrics"), ("status", "401")]
        ) >= 1.0,
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_an_agent_in_a_real_container() {
    crate::require_docker!();
    let (hub, _containers) = hub_with_agents(&agent_toml("metered", "")).await;
    let (status, v) = hub.post("/v1/agents/metered/start", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let m = scrape(&hub).await;
    assert_eq!(
        value(&m, "agent_hub_agents", &[("status", "running")]),
        1.0,
        "{m}"
    );
    assert_eq!(
        value(
            &m,
            "agent_hub_agent_operation_duration_seconds_count",
            &[("op", "start"), ("outcome", "ok")]
        ),
        1.0
    );
    assert!(
        value(
            &m,
            "agent_hub_agent_operation_duration_seconds_sum",
            &[("op", "start")]
        ) > 0.0
    );
    assert_eq!(
        value(
            &m,
            "agent_hub_sessions",
            &[("source", "docker"), ("alive", "true")]
        ),
        1.0,
        "{m}"
    );
    assert_eq!(
        value(&m, "agent_hub_agent_state_seconds_count", &[]),
        0.0,
        "a gauge, not a histogram"
    );
    assert!(
        m.contains("agent_hub_agent_state_seconds{agent=\"metered\""),
        "{m}"
    );
    let engine_up = wait_until(Duration::from_secs(10), || async {
        value(&scrape(&hub).await, "agent_hub_docker_engine_up", &[]) >= 1.0
    })
    .await;
    assert!(engine_up, "the engine is not reported up");
    // Output from the container is ingested under its source.
    assert!(value(&m, "agent_hub_output_bytes_total", &[("source", "docker")]) > 0.0);

    let (status, v) = hub.post("/v1/agents/metered/stop", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let m = scrape(&hub).await;
    assert_eq!(
        value(
            &m,
            "agent_hub_agent_operation_duration_seconds_count",
            &[("op", "stop"), ("outcome", "ok")]
        ),
        1.0
    );
    assert_eq!(value(&m, "agent_hub_agents", &[("status", "running")]), 0.0);
}
