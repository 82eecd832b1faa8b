//! Bad input gets a clear JSON error with a stable code, and the hub stays up.

use serde_json::{json, Value};

use crate::support::TestHub;

async fn raw(hub: &TestHub, method: reqwest::Method, path: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = hub
        .http
        .request(method, format!("{}{path}", hub.base))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("non-JSON reply {status}: {text}")),
    )
}

fn expect(case: &str, got: (u16, Value), status: u16, code: &str) -> Value {
    assert_eq!(got.0, status, "{case}: {}", got.1);
    assert_eq!(got.1["ok"], false, "{case}");
    assert_eq!(got.1["error_code"], code, "{case}: {}", got.1);
    assert!(
        !got.1["message"].as_str().unwrap_or("").is_empty(),
        "{case}: no message"
    );
    got.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors_and_the_hub_stays_up() {
    let hub = TestHub::start().await;
    let id = hub.create("pty").await;
    let s = |op: &str| format!("/v1/pty/sessions/{id}/{op}");
    use reqwest::Method as M;

    // Unknown ids, on every route.
    for (m, op) in [
        (M::GET, ""),
        (M::DELETE, ""),
        (M::POST, "/send_line"),
        (M::POST, "/keys"),
        (M::POST, "/talk"),
        (M::POST, "/resize"),
        (M::GET, "/read"),
        (M::POST, "/signal"),
    ] {
        let body = json!({ "data": "x", "keys": ["a"], "command": "true", "cols": 10, "rows": 10, "signal": "SIGINT" });
        let got = raw(
            &hub,
            m.clone(),
            &format!("/v1/pty/sessions/nope{op}"),
            body.to_string().into_bytes(),
        )
        .await;
        // Each route validates its own body; unknown fields are rejected before the lookup.
        assert!(matches!(got.0, 400 | 404), "{m} {op}: {}", got.1);
    }
    expect(
        "get unknown",
        hub.get("/v1/pty/sessions/pty_00000000").await,
        404,
        "PTY_SESSION_NOT_FOUND",
    );
    expect(
        "send unknown",
        hub.post(
            "/v1/pty/sessions/pty_00000000/send_line",
            json!({"data": "x"}),
        )
        .await,
        404,
        "PTY_SESSION_NOT_FOUND",
    );
    expect(
        "kill unknown",
        hub.delete("/v1/pty/sessions/pty_00000000").await,
        404,
        "PTY_SESSION_NOT_FOUND",
    );

    // Malformed JSON, missing and wrong fields, wrong content type.
    expect(
        "malformed",
        raw(&hub, M::POST, &s("send_line"), b"{\"data\": ".to_vec()).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "missing data",
        hub.post(&s("send_line"), json!({})).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "wrong type",
        hub.post(&s("send_line"), json!({"data": 5})).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "unknown field",
        hub.post(&s("talk"), json!({"command": "true", "bogus": 1}))
            .await,
        400,
        "BAD_REQUEST",
    );
    // The three requests that carry an owner identity (one shared struct, flattened) still
    // refuse a field they do not know, and say which.
    for (path, body) in [
        ("/v1/pty/sessions", json!({"lable": "w1"})),
        (
            "/v1/pty/update-ownership",
            json!({"session_id": "pty_00000000", "owner_rol": "leader"}),
        ),
        (
            "/v1/pty/register",
            json!({"session_id": "x1", "bridge_url": "http://127.0.0.1:9", "labl": "w"}),
        ),
    ] {
        let v = expect(path, hub.post(path, body).await, 400, "BAD_REQUEST");
        assert!(
            v["message"].as_str().unwrap().contains("unknown field"),
            "{path}: {v}"
        );
    }
    let no_type = hub
        .http
        .post(format!("{}{}", hub.base, s("send_line")))
        .body("{\"data\":\"x\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(no_type.status().as_u16(), 400);
    let v: Value = no_type.json().await.unwrap();
    assert_eq!(v["error_code"], "BAD_REQUEST");

    // Invalid UTF-8 inside the JSON string.
    let mut body = b"{\"data\": \"ab".to_vec();
    body.extend_from_slice(&[0xff, 0xfe]);
    body.extend_from_slice(b"\"}");
    expect(
        "invalid utf-8",
        raw(&hub, M::POST, &s("send_line"), body).await,
        400,
        "BAD_REQUEST",
    );

    // A huge body.
    let huge = json!({ "data": "x".repeat(3 << 20) })
        .to_string()
        .into_bytes();
    expect(
        "huge body",
        raw(&hub, M::POST, &s("send_line"), huge).await,
        413,
        "PAYLOAD_TOO_LARGE",
    );

    // The 413 closes its connection (the rest of the body is unread), saying so, so a pooled
    // client does not send its next request into it.
    let resp = hub
        .http
        .post(format!("{}{}", hub.base, s("send_line")))
        .header("content-type", "application/json")
        .body(json!({ "data": "x".repeat(3 << 20) }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    assert_eq!(
        resp.headers()["connection"],
        "close",
        "{:?}",
        resp.headers()
    );

    // Sizes.
    for (cols, rows) in [(0, 10), (10, 0), (5000, 10), (10, 5000)] {
        expect(
            "resize",
            hub.post(&s("resize"), json!({"cols": cols, "rows": rows}))
                .await,
            400,
            "BAD_REQUEST",
        );
        expect(
            "create size",
            hub.post("/v1/pty/sessions", json!({"cols": cols, "rows": rows}))
                .await,
            400,
            "BAD_REQUEST",
        );
    }
    expect(
        "resize overflow",
        hub.post(&s("resize"), json!({"cols": 70000, "rows": 10}))
            .await,
        400,
        "BAD_REQUEST",
    );

    // Keys, signals, talk and read arguments.
    let v = expect(
        "unknown key",
        hub.post(&s("keys"), json!({"keys": ["Enter", "Hyper-Q"]}))
            .await,
        400,
        "BAD_REQUEST",
    );
    assert!(v["message"].as_str().unwrap().contains("Hyper-Q"), "{v}");
    expect(
        "no keys",
        hub.post(&s("keys"), json!({"keys": []})).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "bad signal",
        hub.post(&s("signal"), json!({"signal": "SIGFOO"})).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "talk newline",
        hub.post(&s("talk"), json!({"command": "a\nb"})).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "talk empty",
        hub.post(&s("talk"), json!({"command": ""})).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "talk sentinel",
        hub.post(&s("talk"), json!({"command": "true", "sentinel": "a;b"}))
            .await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "talk timeout",
        hub.post(&s("talk"), json!({"command": "true", "timeout_ms": 0}))
            .await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "read max",
        hub.get(&s("read?max_bytes=0")).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "read since",
        hub.get(&s("read?since=abc")).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "read timeout",
        hub.get(&s("read?since=0&timeout_ms=99999999")).await,
        400,
        "BAD_REQUEST",
    );
    // Offsets are int64: one past the largest is refused, by each route that takes one.
    let v = expect(
        "read since above int64",
        hub.get(&s("read?since=9223372036854775808")).await,
        400,
        "BAD_REQUEST",
    );
    assert!(v["message"].as_str().unwrap().contains("since"), "{v}");
    let (status, v) = hub
        .get(&s("read?since=9223372036854775807&timeout_ms=0"))
        .await;
    assert_eq!(status, 200, "the largest offset is taken: {v}");
    expect(
        "bridge read offset above int64",
        hub.post(
            "/pty/read",
            json!({"session_id": id, "offset": 9223372036854775808u64}),
        )
        .await,
        400,
        "BAD_REQUEST",
    );
    let ws_url = format!(
        "{}{}",
        hub.base.replace("http://", "ws://"),
        s("stream?since=9223372036854775808")
    );
    match tokio_tungstenite::connect_async(hub.ws(&ws_url)).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status().as_u16(), 400, "stream since above int64")
        }
        Err(e) => panic!("stream since above int64: {e}"),
        Ok(_) => panic!("stream since above int64: the handshake was accepted"),
    }

    // Spawning (where and what: `a_bad_cwd_or_program_is_refused_and_nothing_starts`).
    expect(
        "bad tmux name",
        hub.post(
            "/v1/pty/sessions",
            json!({"backend": "tmux", "tmux_session": "a;b"}),
        )
        .await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "bad backend",
        hub.post("/v1/pty/sessions", json!({"backend": "vm"})).await,
        400,
        "BAD_REQUEST",
    );
    expect(
        "bad env",
        hub.post("/v1/pty/sessions", json!({"env": {"A=B": "c"}}))
            .await,
        400,
        "BAD_REQUEST",
    );

    // Routes and methods.
    expect("no route", hub.get("/v1/nothing").await, 404, "NOT_FOUND");
    expect(
        "bad method",
        hub.request(M::PUT, "/v1/pty/sessions", None).await,
        405,
        "METHOD_NOT_ALLOWED",
    );

    // Still serving, and the session still works.
    let (status, v) = hub.get("/health").await;
    assert_eq!((status, v["ok"].as_bool()), (200, Some(true)));
    assert_eq!(
        hub.talk(&id, "echo still-fine").await["output"],
        "still-fine\n"
    );
}

/// A working directory or program that cannot be used is the caller's mistake: 400 with its
/// own code and a sentence naming it, for sessions (both backends) and tasks (both kinds), and
/// nothing is started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_cwd_or_program_is_refused_and_nothing_starts() {
    let hub = TestHub::start().await;
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("notes");
    std::fs::write(&file, "text").unwrap();
    let file = file.display().to_string();
    let dir = scratch.path().display().to_string();
    let cwds = [
        ("", "cwd is empty"),
        ("/no/such/dir", "cwd '/no/such/dir' does not exist"),
        (file.as_str(), "is not a directory"),
    ];
    for (cwd, says) in cwds {
        for backend in ["pty", "tmux"] {
            let body = json!({"backend": backend, "shell": "sh", "cwd": cwd});
            let v = expect(
                &format!("{backend} cwd {cwd:?}"),
                hub.post("/v1/pty/sessions", body).await,
                400,
                "INVALID_CWD",
            );
            assert!(v["message"].as_str().unwrap().contains(says), "{v}");
        }
        for pty in [true, false] {
            let body = json!({"cmd": "true", "pty": pty, "cwd": cwd});
            let v = expect(
                &format!("task (pty {pty}) cwd {cwd:?}"),
                hub.post("/v1/tasks", body).await,
                400,
                "INVALID_CWD",
            );
            assert!(v["message"].as_str().unwrap().contains(says), "{v}");
        }
    }
    let programs = [
        ("/no/such/shell", "program '/no/such/shell' does not exist"),
        ("no-such-program-here", "is not found on the session's PATH"),
        (dir.as_str(), "is a directory"),
        (file.as_str(), "is not executable"),
        ("./notes", "is not executable"),
    ];
    for (shell, says) in programs {
        for backend in ["pty", "tmux"] {
            let body = json!({"backend": backend, "shell": shell, "cwd": dir});
            let v = expect(
                &format!("{backend} shell {shell:?}"),
                hub.post("/v1/pty/sessions", body).await,
                400,
                "INVALID_PROGRAM",
            );
            assert!(v["message"].as_str().unwrap().contains(says), "{v}");
        }
    }
    // A task runs `sh` from the PATH its environment gives.
    for pty in [true, false] {
        let body = json!({"cmd": "true", "pty": pty, "env": {"PATH": "/no/such/dir"}});
        let v = expect(
            &format!("task (pty {pty}) without sh on its PATH"),
            hub.post("/v1/tasks", body).await,
            400,
            "INVALID_PROGRAM",
        );
        assert!(v["message"].as_str().unwrap().contains("'sh'"), "{v}");
    }
    // Nothing was started.
    assert_eq!(hub.get("/v1/pty/sessions").await.1["count"], 0);
    assert_eq!(hub.get("/v1/tasks").await.1["count"], 0);
    // What is right still starts: a name on the PATH, a relative cwd.
    for backend in ["pty", "tmux"] {
        let body = json!({"backend": backend, "shell": "sh", "cwd": "."});
        let (status, v) = hub.post("/v1/pty/sessions", body).await;
        assert_eq!(status, 200, "{v}");
    }
}
