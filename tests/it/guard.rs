//! The command guard through every command-capable input: send_line, talk,
//! send_line_to_agent, keys that spell a line, and WebSocket input. Blocked input is never
//! written (each is `echo GUARD_LEAK_n # <dangerous>`, harmless if it ever ran, and its
//! marker must never show up), the reply names the pattern, and the attempt is audited.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::TestHub;

/// Keys that spell `text` and press Enter.
fn spelled(text: &str) -> Vec<String> {
    text.chars()
        .map(String::from)
        .chain(["Enter".to_string()])
        .collect()
}

/// Keys that type `text`, press Backspace `back` times, then Enter.
fn edited(text: &str, back: usize) -> Vec<String> {
    let mut keys: Vec<String> = text.chars().map(String::from).collect();
    keys.extend(std::iter::repeat_n("BSpace".to_string(), back));
    keys.push("Enter".into());
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_input_is_refused_on_every_path_and_never_written() {
    let hub = TestHub::start().await;
    let id = hub
        .create_with(json!({ "backend": "pty", "label": "guarded" }))
        .await;
    let s = |op: &str| format!("/v1/pty/sessions/{id}/{op}");
    // (path, body, pattern)
    let cases: Vec<(String, Value, &str)> = vec![
        (
            s("send_line"),
            json!({"data": "echo GUARD_LEAK_1 # rm -rf /"}),
            "rm-rf-root",
        ),
        (
            s("send_line"),
            json!({"data": "echo GUARD_LEAK_2 # RM   -RF   /"}),
            "rm-rf-root",
        ),
        (
            s("send_line"),
            json!({"data": "echo GUARD_LEAK_3 #;\tSHUTDOWN -h now"}),
            "shutdown",
        ),
        (
            s("talk"),
            json!({"command": "echo GUARD_LEAK_4 || mkfs.ext4 /dev/sdz"}),
            "mkfs",
        ),
        (
            s("talk"),
            json!({"command": "echo GUARD_LEAK_5 || cat ~/.ssh/id_rsa"}),
            "ssh-keys",
        ),
        (
            "/v1/pty/send_line_to_agent".into(),
            json!({"label": "guarded", "data": "echo GUARD_LEAK_6 # :(){ :|:& };:"}),
            "fork-bomb",
        ),
        (
            s("keys"),
            json!({"keys": spelled("echo GUARD_LEAK_7 # dd if=/dev/zero of=/dev/sdz")}),
            "dd-to-device",
        ),
        (
            s("send_line"),
            json!({"data": "echo GUARD_LEAK_8 # vssadmin delete shadows"}),
            "vssadmin-delete",
        ),
        (
            "/v1/tasks".into(),
            json!({"cmd": "echo GUARD_LEAK_10 # fdisk /dev/sdz", "pty": false}),
            "fdisk",
        ),
        // What is typed is checked, not what was sent: `\x72` is `r`, and backspaces edit.
        (
            s("send_line"),
            json!({"data": "echo GUARD_LEAK_11 # \\x72m -rf /"}),
            "rm-rf-root",
        ),
        (
            s("keys"),
            json!({"keys": edited("echo GUARD_LEAK_12 # rm -rf /tmpx", 4)}),
            "rm-rf-root",
        ),
        (
            "/v1/pty/sessions".into(),
            json!({"shell": "sh", "args": ["-c", "echo GUARD_LEAK_13; rm -rf /"]}),
            "rm-rf-root",
        ),
    ];
    for (path, body, pattern) in &cases {
        let (status, v) = hub.post(path, body.clone()).await;
        assert_eq!(
            (status, v["error_code"].as_str(), v["pattern"].as_str()),
            (403, Some("PTY_COMMAND_BLOCKED"), Some(*pattern)),
            "{path} {body}: {v}"
        );
        assert!(v["message"].as_str().unwrap().contains(pattern), "{v}");
    }
    // WebSocket input that ends a line passes the guard too; the stream goes on.
    let mut ws = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream"))
        .await;
    let _hello = ws.next().await;
    ws.send(Message::Text(
        json!({"type": "input", "data": "echo GUARD_LEAK_9 # bcdedit /set x\r"})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) if t.contains("PTY_COMMAND_BLOCKED") => {
                assert!(t.contains("bcdedit"), "{t}");
                break;
            }
            Ok(Some(Ok(_))) => {}
            other => panic!("no error frame: {other:?}"),
        }
    }
    // A command typed key by key over the WebSocket is checked as the whole line at Enter;
    // the refused line is killed (Ctrl-U) in the shell's line editor, so it never runs.
    for key in "echo $((6*7))XYZ # mimikatz".chars() {
        ws.send(Message::Binary(key.to_string().into_bytes().into()))
            .await
            .unwrap();
    }
    ws.send(Message::Binary(b"\r".to_vec().into()))
        .await
        .unwrap();
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) if t.contains("PTY_COMMAND_BLOCKED") => {
                assert!(t.contains("mimikatz"), "{t}");
                break;
            }
            Ok(Some(Ok(_))) => {}
            other => panic!("no error frame: {other:?}"),
        }
    }
    // Look-alikes go through; once their output is back, nothing blocked was ever typed.
    let v = hub.talk(&id, "echo rm -rf ./build; echo shutdown").await;
    assert_eq!(v["output"], "rm -rf ./build\nshutdown\n");
    let seen = hub
        .wait_output(&id, "shutdown", Duration::from_secs(5))
        .await;
    assert!(
        !seen.contains("GUARD_LEAK"),
        "blocked input reached the terminal:\n{seen}"
    );

    // An allowed line typed over the WebSocket is audited as ws_input.
    ws.send(Message::Binary(b"echo typed-$((1+1))ok\r".to_vec().into()))
        .await
        .unwrap();
    hub.wait_output(&id, "typed-2ok", Duration::from_secs(5))
        .await;
    let (_, v) = hub.get("/v1/pty-traffic/events?action=ws_input").await;
    let typed: Vec<(&str, &str)> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["session_id"], id.as_str(), "{e}");
            (
                e["command"].as_str().unwrap(),
                e["blocked_pattern"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        typed,
        [
            ("echo GUARD_LEAK_9 # bcdedit /set x", "bcdedit"),
            ("echo $((6*7))XYZ # mimikatz", "mimikatz"),
            ("echo typed-$((1+1))ok", "-"),
        ]
    );

    // Every refusal is in the audit log, blocked, with its pattern.
    let (status, v) = hub.get("/v1/pty-traffic/blocked?limit=100").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["total"], cases.len() + 2, "{v}");
    let events: Vec<&Value> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] != "ws_input")
        .collect();
    assert_eq!(events.len(), cases.len(), "{v}");
    for (event, (path, _, pattern)) in events.iter().zip(&cases) {
        assert_eq!(event["blocked"], true);
        assert_eq!(event["blocked_pattern"], *pattern, "{event}");
        assert_eq!(event["error_code"], "PTY_COMMAND_BLOCKED");
        if path != "/v1/tasks" && path != "/v1/pty/sessions" {
            assert_eq!(event["session_id"], id.as_str(), "{event}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_allows_a_pattern_for_a_role_and_adds_patterns() {
    let config = agent_hub::config::HubConfig::parse(
        "[guard]\npatterns = [{ name = \"drop-db\", regex = 'drop\\s+database' }]\n[guard.allow]\nadmin = [\"mkfs\"]\n",
        "test.toml",
    )
    .unwrap();
    // No tokens: the open hub's caller is an admin.
    let hub = TestHub::start_with(|c| c.guard = config.guard.clone()).await;
    let id = hub.create("pty").await;
    let v = hub.talk(&id, "echo ALLOWED || mkfs.ext4 /dev/sdz").await;
    assert_eq!(v["output"], "ALLOWED\n");
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/send_line"),
            json!({"data": "echo X # DROP  DATABASE prod"}),
        )
        .await;
    assert_eq!(
        (status, v["pattern"].as_str()),
        (403, Some("drop-db")),
        "{v}"
    );
    // A bad pattern in the file is reported with the file's name.
    let e = agent_hub::config::HubConfig::parse("[guard]\ndisable = [\"nope\"]\n", "hub.toml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("hub.toml:") && e.contains("nope"), "{e}");
}

/// The guard lives inside the session: every input operation of a real PTY session refuses a
/// blocked line from a caller without any API in between, nothing of it is written, and the
/// hub's own unchecked writes are not guarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_checks_every_callers_input_and_not_the_hubs_own() {
    use agent_hub::actor::{Actor, Role};
    use agent_hub::delivery::{submit, By, Options};
    use agent_hub::error::HubError;
    use agent_hub::hub::{BackendKind, CreateSession};
    use agent_hub::session::write::{Typed, TypedLine};

    let hub = TestHub::start().await;
    let session = hub
        .hub
        .create_session(CreateSession {
            backend: BackendKind::Pty,
            shell: Some("bash".into()),
            args: vec!["--norc".into(), "--noprofile".into()],
            ..CreateSession::default()
        })
        .await
        .expect("a PTY session");
    let operator = Actor {
        token_name: "ops".into(),
        agent_id: None,
        role: Some(Role::Operator),
        agent: None,
    };
    let blocked = |r: Result<(), HubError>, op: &str, pattern: &str| match r {
        Err(HubError::CommandBlocked { pattern: p }) => assert_eq!(p, pattern, "{op}"),
        other => panic!("{op}: expected PTY_COMMAND_BLOCKED, got {other:?}"),
    };
    let op = &operator;
    blocked(
        session
            .send_line(op, "echo SESSION_LEAK_1 # rm -rf /")
            .await
            .map(drop),
        "send_line",
        "rm-rf-root",
    );
    blocked(
        session
            .send_keys(op, &spelled("echo SESSION_LEAK_2 # mkfs.ext4 /dev/sdz"))
            .await
            .map(drop),
        "send_keys",
        "mkfs",
    );
    blocked(
        session
            .send_bytes(op, b"echo SESSION_LEAK_3 #; shutdown now\r".to_vec())
            .await,
        "send_bytes",
        "shutdown",
    );
    blocked(
        session
            .talk(
                op,
                "echo SESSION_LEAK_4 || fdisk /dev/sdz",
                None,
                Duration::from_secs(5),
            )
            .await
            .map(drop),
        "talk",
        "fdisk",
    );
    blocked(
        submit(
            &session,
            By::Caller(op),
            "echo SESSION_LEAK_5 #; halt",
            Options::default(),
        )
        .await
        .map(drop),
        "delivery",
        "halt",
    );
    // Keystrokes collected into a line: the keys go through, the line end is refused and the
    // line killed (Ctrl-U), so Enter afterwards runs nothing.
    let mut typed = TypedLine::default();
    let keys = session
        .type_input(
            op,
            &mut typed,
            b"echo SESSION_LEAK_6 # dd if=/dev/zero of=/dev/sdz".to_vec(),
        )
        .await
        .expect("keys without a line end are written");
    assert!(matches!(keys, Typed::Keys), "{keys:?}");
    match session.type_input(op, &mut typed, b"\r".to_vec()).await {
        Ok(Typed::Refused {
            line,
            error: HubError::CommandBlocked { pattern },
        }) => {
            assert_eq!(pattern, "dd-to-device");
            assert!(line.contains("SESSION_LEAK_6"), "{line:?}");
        }
        other => panic!("type_input: expected a refused line, got {other:?}"),
    }
    // The same guard per role: an admin allowed nothing more by default is refused too, and a
    // harmless line from an observer passes (roles gate routes, the guard gates commands).
    let admin = Actor {
        role: Some(Role::Admin),
        ..operator.clone()
    };
    blocked(
        session
            .send_line(&admin, "echo SESSION_LEAK_7 # rm -rf ~")
            .await
            .map(drop),
        "send_line as admin",
        "rm-rf-root",
    );
    session
        .send_line(&Actor::default(), "echo CALLER_$((6*7))")
        .await
        .expect("a harmless line passes");
    // The hub's own writes are not guarded: the same kind of line goes through unchecked.
    session
        .send_unchecked(b"echo UNCHECKED_$((2+3)) # rm -rf /\r".to_vec())
        .await
        .expect("the hub's own write");
    submit(
        &session,
        By::Hub,
        "echo OWN_$((3+4)) # halt",
        Options::default(),
    )
    .await
    .expect("the hub's own prompt");
    let out = hub
        .wait_output(session.id(), "OWN_7", Duration::from_secs(10))
        .await;
    assert!(out.contains("CALLER_42"), "{out}");
    assert!(out.contains("UNCHECKED_5"), "{out}");
    for n in 1..=7 {
        assert!(
            !out.contains(&format!("SESSION_LEAK_{n}\r\n"))
                && !out.contains(&format!("SESSION_LEAK_{n}\n")),
            "blocked input {n} ran:\n{out}"
        );
    }
}
