//! Owner routing over real sessions: resolve, send_line_to_agent to the right session only,
//! nothing sent when ambiguous, ownership updated in place, and the CLI.

use std::time::Duration;

use serde_json::json;

use crate::support::TestHub;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_and_send_line_to_agent_reach_exactly_one_session() {
    let hub = TestHub::start().await;
    let a = hub.create_with(json!({"backend": "pty", "owner_agent_id": "agent-a", "owner_session_id": "lead-1", "label": "Worker A", "owner_role": "worker"})).await;
    let b = hub.create_with(json!({"backend": "pty", "owner_agent_id": "agent-b", "owner_session_id": "lead-1", "label": "Worker B"})).await;
    let c = hub
        .create_with(json!({"backend": "tmux", "owner_agent_id": "agent-c", "label": "Worker B"}))
        .await;

    for (keys, expected) in [
        (json!({"agent_id": "agent-a"}), Ok(a.as_str())),
        (json!({"label": "Worker A"}), Ok(a.as_str())),
        (json!({"agent_id": "agent-c"}), Ok(c.as_str())),
        (json!({"agent_id": "nobody"}), Err((404, "NOT_FOUND"))),
        (
            json!({"owner_session_id": "lead-1"}),
            Err((409, "AMBIGUOUS")),
        ),
        (json!({"label": "Worker B"}), Err((409, "AMBIGUOUS"))),
        (json!({}), Err((400, "BAD_REQUEST"))),
    ] {
        let (status, v) = hub.post("/v1/pty/resolve", keys.clone()).await;
        match expected {
            Ok(id) => assert_eq!(
                (status, v["session_id"].as_str()),
                (200, Some(id)),
                "{keys}: {v}"
            ),
            Err((code_status, code)) => assert_eq!(
                (status, v["error_code"].as_str()),
                (code_status, Some(code)),
                "{keys}: {v}"
            ),
        }
    }
    let (_, v) = hub
        .post("/v1/pty/resolve", json!({"label": "Worker B"}))
        .await;
    let mut matches: Vec<String> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    let mut expected = vec![b.clone(), c.clone()];
    expected.sort();
    matches.sort();
    assert_eq!(matches, expected);

    // Delivered to the right session only.
    let (status, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": "agent-b", "data": "echo routed-$((40+2))"}),
        )
        .await;
    assert_eq!(
        (status, v["resolved_session_id"].as_str()),
        (200, Some(b.as_str())),
        "{v}"
    );
    assert_eq!(v["send_result"]["ok"], true);
    hub.wait_output(&b, "routed-42", Duration::from_secs(10))
        .await;
    // Ambiguous: nothing is sent anywhere.
    let (status, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({"label": "Worker B", "data": "echo SHOULD_NOT_RUN"}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("AMBIGUOUS")),
        "{v}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in [&a, &b, &c] {
        let (_, r) = hub
            .get(&format!(
                "/v1/pty/sessions/{id}/read?since=0&max_bytes=100000&timeout_ms=0"
            ))
            .await;
        assert!(
            !r["output"].as_str().unwrap().contains("SHOULD_NOT_RUN"),
            "{id} received a line meant for nobody"
        );
        if id != &b {
            assert!(
                !r["output"].as_str().unwrap().contains("routed-"),
                "{id} received b's line"
            );
        }
    }

    // Ownership changes in place, and routing follows.
    let (status, v) = hub
        .post(
            "/v1/pty/update-ownership",
            json!({"session_id": c, "label": "Worker C", "owner_role": "leader"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (
            v["session"]["label"].as_str(),
            v["session"]["owner_agent_id"].as_str(),
            v["session"]["owner_role"].as_str()
        ),
        (Some("Worker C"), Some("agent-c"), Some("leader"))
    );
    let (_, v) = hub
        .post("/v1/pty/resolve", json!({"label": "Worker B"}))
        .await;
    assert_eq!(v["session_id"].as_str(), Some(b.as_str()));
    let (status, v) = hub
        .post(
            "/v1/pty/update-ownership",
            json!({"session_id": c, "owner_role": "boss"}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("BAD_REQUEST"))
    );

    // An exited session is no longer a target.
    hub.post(
        &format!("/v1/pty/sessions/{a}/send_line"),
        json!({"data": "exit 0"}),
    )
    .await;
    hub.wait_exited(&a, Duration::from_secs(10)).await;
    let (status, _) = hub
        .post("/v1/pty/resolve", json!({"agent_id": "agent-a"}))
        .await;
    assert_eq!(status, 404);

    // The CLI.
    let base = hub.base.clone();
    let dir = hub.data_dir().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| {
            std::process::Command::new(crate::cli::BIN)
                .args(args)
                .args(["--hub", &base])
                .env("AGENT_HUB_DATA_DIR", &dir)
                .output()
                .unwrap()
        };
        (
            run(&["resolve", "--agent-id", "agent-b"]),
            run(&["send", "--to-agent", "agent-b", "echo via-cli"]),
            run(&["send", "--to-label", "nobody", "x"]),
        )
    })
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.0.stdout).trim(), b);
    assert!(out.1.status.success());
    hub.wait_output(&b, "\rvia-cli", Duration::from_secs(10))
        .await;
    assert_eq!(out.2.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.2.stderr).contains("NOT_FOUND"));
}
