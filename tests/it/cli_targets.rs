//! Every CLI command that takes a session takes a session id, an agent id or a label, through
//! the real binary against a real hub; an ambiguous label lists its matches and sends nothing.
//! Also: the OpenAPI document served at `/openapi.json`.

use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::cli::BIN;
use crate::support::TestHub;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_take_a_label_or_an_agent_id_and_refuse_an_ambiguous_one() {
    let hub = TestHub::start().await;
    let main = hub.create_with(json!({ "label": "main" })).await;
    let owned = hub
        .create_with(json!({ "owner_agent_id": "worker-7", "label": "twin" }))
        .await;
    let twin = hub.create_with(json!({ "label": "twin" })).await;
    let base = hub.base.clone();
    let dir = hub.data_dir().to_path_buf();
    let (main2, owned2, twin2) = (main.clone(), owned.clone(), twin.clone());
    tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| -> Output {
            Command::new(BIN)
                .args(args)
                .env("AGENT_HUB_URL", &base)
                .env("AGENT_HUB_DATA_DIR", &dir)
                .output()
                .unwrap()
        };
        // talk, send, keys, read, screen, resize, signal by label.
        let talk = run(&["talk", "main", "echo hi"]);
        assert_eq!(talk.status.code(), Some(0), "{talk:?}");
        assert_eq!(text(&talk.stdout), "hi\n");
        assert!(run(&["send", "main", "echo sent-to-main"]).status.success());
        assert!(
            run(&["keys", "main", "e", "c", "h", "o", "Space", "k", "Enter"])
                .status
                .success()
        );
        assert!(run(&["resize", "main", "91", "21"]).status.success());
        assert_eq!(text(&run(&["talk", "main", "stty size"]).stdout), "21 91\n");
        let read = run(&["read", "main", "--max-bytes", "100000"]);
        assert!(read.status.success(), "{read:?}");
        assert!(text(&read.stdout).contains("sent-to-main"), "{read:?}");
        let screen = run(&["screen", "main", "--mode", "viewport"]);
        assert!(screen.status.success(), "{screen:?}");
        assert!(text(&screen.stdout).contains("21 91"), "{screen:?}");
        let json = run(&["talk", "main", "true", "--json"]);
        let v: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(v["exit_code"], 0, "{v}");
        // An owner agent id names its session too.
        let by_agent = run(&["talk", "worker-7", "echo $AGENT_HUB_SESSION_ID"]);
        assert_eq!(by_agent.status.code(), Some(0), "{by_agent:?}");
        // An ambiguous label: exit 1, the matches listed, nothing typed anywhere.
        let ambiguous = run(&["send", "twin", "echo should-not-arrive"]);
        assert_eq!(ambiguous.status.code(), Some(1), "{ambiguous:?}");
        let err = text(&ambiguous.stderr);
        assert!(
            err.contains("AMBIGUOUS") && err.contains(&owned2) && err.contains(&twin2),
            "{err}"
        );
        let ambiguous_json = run(&["talk", "twin", "true", "--json"]);
        assert_eq!(ambiguous_json.status.code(), Some(1));
        let v: Value = serde_json::from_slice(&ambiguous_json.stdout).unwrap();
        assert_eq!(v["error_code"], "AMBIGUOUS");
        let mut matches: Vec<String> = serde_json::from_value(v["matches"].clone()).unwrap();
        matches.sort();
        let mut expected = vec![owned2.clone(), twin2.clone()];
        expected.sort();
        assert_eq!(matches, expected);
        // Nothing that matches: the session error, saying what was looked for.
        let none = run(&["read", "nobody-here"]);
        assert_eq!(none.status.code(), Some(1));
        let err = text(&none.stderr);
        assert!(
            err.contains("PTY_SESSION_NOT_FOUND") && err.contains("'nobody-here'"),
            "{err}"
        );
        // kill by label.
        let kill = run(&["kill", "main"]);
        assert!(kill.status.success(), "{kill:?}");
        assert!(text(&kill.stdout).contains(&main2), "{kill:?}");
    })
    .await
    .unwrap();
    for id in [&owned, &twin] {
        let v = hub.session(id).await;
        let out = hub
            .wait_output(id, "$ ", std::time::Duration::from_secs(5))
            .await;
        assert!(!out.contains("should-not-arrive"), "{id}: {out} {v}");
    }
    let (status, gone) = hub.get(&format!("/v1/pty/sessions/{main}")).await;
    assert!(status == 404 || gone["session"]["alive"] == false, "{gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_served_and_lists_every_route() {
    let hub = TestHub::start().await;
    let (status, doc) = hub.get("/openapi.json").await;
    assert_eq!(status, 200, "{doc}");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{doc}");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths["/v1/pty/sessions/{id}/talk"]["post"].is_object());
    assert!(paths["/v1/pty/sessions/{id}/stream"]["get"]["responses"]["101"].is_object());
    assert!(paths["/openapi.json"]["get"].is_object());
}
