//! Session operations on both backends: send_line, read, talk, keys, signal, resize, kill, exit.

use std::time::Duration;

use serde_json::json;

use crate::both_backends;
use crate::support::{json_reply, process_alive, session_runs, wait_until, TestHub};

const T: Duration = Duration::from_secs(10);

async fn send_line_and_read(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub.create(backend).await;
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/send_line"),
            json!({ "data": "echo $((6*7))abc" }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let seen = hub.wait_output(&id, "42abc", T).await;
    assert!(
        seen.contains("echo $((6*7))abc"),
        "the typed line is echoed: {seen}"
    );
    // A read without `since` returns the most recent bytes, non-destructively.
    for _ in 0..2 {
        let (_, v) = hub
            .get(&format!("/v1/pty/sessions/{id}/read?max_bytes=200"))
            .await;
        assert!(v["output"].as_str().unwrap().contains("42abc"), "{v}");
        assert_eq!(v["dropped_bytes"], 0);
    }
    let info = hub.session(&id).await;
    assert_eq!(info["backend"], backend);
    assert!(
        info["last_input_at"].is_string() && info["last_output_at"].is_string(),
        "{info}"
    );
}
both_backends!(send_line_and_read);

async fn send_line_sends_exactly_one_line(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub.create(backend).await;
    // An embedded newline must not run a second command; escapes decode, paths survive.
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": "echo one\\r\\necho SMUGGLED" }),
    )
    .await;
    let seen = hub.wait_output(&id, "oneecho SMUGGLED", T).await;
    assert!(!seen.contains("\nSMUGGLED"), "{seen}");
    let v = hub.talk(&id, "printf '%s' 'C:\\Users\\x'").await;
    assert_eq!(v["output"], "C:\\Users\\x");
}
both_backends!(send_line_sends_exactly_one_line);

async fn talk_returns_output_and_exit_code(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub.create(backend).await;
    let v = hub.talk(&id, "echo hello").await;
    assert_eq!(
        (v["output"].as_str(), v["exit_code"].as_i64()),
        (Some("hello\n"), Some(0)),
        "{v}"
    );
    let v = hub.talk(&id, "echo failing; (exit 42)").await;
    assert_eq!(
        (v["output"].as_str(), v["exit_code"].as_i64()),
        (Some("failing\n"), Some(42)),
        "{v}"
    );
    let v = hub.talk(&id, "printf 'a\\nb\\n\\nc\\n'").await;
    assert_eq!(v["output"], "a\nb\n\nc\n");
    // Output that looks like sentinels (ours with another nonce, and the older design's).
    let v = hub
        .talk(
            &id,
            "echo __AH_0123456789abcdef_E0; echo __KR_DONE_ab12cd34__; echo end",
        )
        .await;
    assert_eq!(
        v["output"], "__AH_0123456789abcdef_E0\n__KR_DONE_ab12cd34__\nend\n",
        "{v}"
    );
    assert_eq!(v["exit_code"], 0);
    assert!(v["raw_output"].as_str().unwrap().contains("__AH_"), "{v}");
    // A caller-chosen sentinel is used and echoed back.
    let (_, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/talk"),
            json!({ "command": "echo s", "sentinel": "MY_MARK_1" }),
        )
        .await;
    assert_eq!(
        (v["sentinel"].as_str(), v["output"].as_str()),
        (Some("MY_MARK_1"), Some("s\n"))
    );
}
both_backends!(talk_returns_output_and_exit_code);

async fn concurrent_talks_queue_instead_of_interleaving(backend: &str) {
    let hub = std::sync::Arc::new(TestHub::start().await);
    let id = hub.create(backend).await;
    let mut tasks = Vec::new();
    for n in 0..6 {
        let (hub, id) = (hub.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            let v = hub.talk(&id, &format!("sleep 0.0{n}; echo talk-{n}")).await;
            assert_eq!(v["output"], format!("talk-{n}\n"), "{v}");
        }));
    }
    for t in tasks {
        t.await.expect("talk task");
    }
    // The shared buffer was not cleared: every talk's output is still readable.
    let (_, v) = hub
        .get(&format!(
            "/v1/pty/sessions/{id}/read?since=0&max_bytes=1048576&timeout_ms=0"
        ))
        .await;
    for n in 0..6 {
        assert!(v["output"].as_str().unwrap().contains(&format!("talk-{n}")));
    }
}
both_backends!(concurrent_talks_queue_instead_of_interleaving);

async fn talk_timeout_returns_partial_output(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub.create(backend).await;
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/talk"),
            json!({ "command": "echo partial-out; sleep 30", "timeout_ms": 700 }),
        )
        .await;
    assert_eq!(status, 504, "{v}");
    assert_eq!(v["error_code"], "PTY_TIMEOUT");
    assert_eq!(v["output"], "partial-out\n", "{v}");
    // Ctrl-C ends the sleep; the session is usable again.
    hub.post(
        &format!("/v1/pty/sessions/{id}/keys"),
        json!({ "keys": ["C-c"] }),
    )
    .await;
    let v = hub.talk(&id, "echo after").await;
    assert_eq!(v["output"], "after\n");
}
both_backends!(talk_timeout_returns_partial_output);

async fn ctrl_c_and_sigint_interrupt_a_running_command(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub.create(backend).await;
    let pid = hub.session(&id).await["pid"].as_u64().unwrap() as u32;
    let sleeping = || session_runs(pid, "sleep");
    for how in [json!({ "keys": ["C-c"] }), json!({ "signal": "SIGINT" })] {
        hub.post(
            &format!("/v1/pty/sessions/{id}/send_line"),
            json!({ "data": "sleep 100" }),
        )
        .await;
        assert!(
            wait_until(T, || async { sleeping() }).await,
            "sleep did not start"
        );
        let op = if how.get("keys").is_some() {
            "keys"
        } else {
            "signal"
        };
        let (status, v) = hub
            .post(&format!("/v1/pty/sessions/{id}/{op}"), how.clone())
            .await;
        assert_eq!(status, 200, "{v}");
        assert!(
            wait_until(T, || async { !sleeping() }).await,
            "{op} did not stop sleep 100"
        );
        let v = hub.talk(&id, "echo back").await;
        assert_eq!(v["output"], "back\n");
    }
}
both_backends!(ctrl_c_and_sigint_interrupt_a_running_command);

async fn resize_is_seen_by_the_program(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub
        .create_with(json!({ "backend": backend, "cols": 100, "rows": 25 }))
        .await;
    assert_eq!(hub.talk(&id, "stty size").await["output"], "25 100\n");
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/resize"),
            json!({ "cols": 91, "rows": 37 }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(hub.talk(&id, "stty size").await["output"], "37 91\n");
    let info = hub.session(&id).await;
    assert_eq!(
        (info["cols"].as_u64(), info["rows"].as_u64()),
        (Some(91), Some(37))
    );
}
both_backends!(resize_is_seen_by_the_program);

async fn kill_leaves_no_process_behind(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub.create(backend).await;
    let shell = hub.session(&id).await["pid"].as_u64().unwrap() as u32;
    // A background job (its own process group) and a foreground one that ignores SIGHUP.
    let out = hub.talk(&id, "sleep 1000 & echo $!").await;
    // The output is bash's job notice ("[1] PID") and then the pid.
    let bg: u32 = out["output"]
        .as_str()
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": "trap '' HUP; sleep 1001" }),
    )
    .await;
    assert!(
        wait_until(T, || async {
            agent_hub::process::session_processes(shell).len() >= 3
        })
        .await
    );
    let all = agent_hub::process::session_processes(shell);
    let (status, v) = hub.delete(&format!("/v1/pty/sessions/{id}")).await;
    assert_eq!(status, 200, "{v}");
    for pid in all.iter().chain([&bg, &shell]) {
        assert!(!process_alive(*pid), "process {pid} survived the kill");
    }
    let (status, v) = hub.get(&format!("/v1/pty/sessions/{id}")).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (404, Some("PTY_SESSION_NOT_FOUND"))
    );
    if backend == "tmux" {
        let out = std::process::Command::new("tmux")
            .args([
                "-L",
                &hub.tmux_socket,
                "has-session",
                "-t",
                &format!("={id}"),
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "tmux session still exists");
    }
}
both_backends!(kill_leaves_no_process_behind);

async fn a_dead_session_answers_process_exited(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub.create(backend).await;
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": "echo bye; exit 7" }),
    )
    .await;
    let info = hub.wait_exited(&id, T).await;
    assert_eq!(info["exit_code"], 7, "{info}");
    for (op, body) in [
        ("send_line", json!({ "data": "echo x" })),
        ("keys", json!({ "keys": ["Enter"] })),
        ("talk", json!({ "command": "true" })),
        ("resize", json!({ "cols": 80, "rows": 20 })),
    ] {
        let (status, v) = hub.post(&format!("/v1/pty/sessions/{id}/{op}"), body).await;
        assert_eq!(
            (status, v["error_code"].as_str()),
            (409, Some("PTY_PROCESS_EXITED")),
            "{op}: {v}"
        );
        assert_eq!(v["exit_code"], 7);
    }
    // Its output stays readable until it is removed.
    let (_, v) = hub
        .get(&format!("/v1/pty/sessions/{id}/read?max_bytes=4096"))
        .await;
    assert!(v["output"].as_str().unwrap().contains("bye"), "{v}");
    assert_eq!(v["alive"], false);
    let (status, _) = hub.delete(&format!("/v1/pty/sessions/{id}")).await;
    assert_eq!(status, 200);
}
both_backends!(a_dead_session_answers_process_exited);

async fn process_exit_during_talk_is_reported(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub.create(backend).await;
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/talk"),
            json!({ "command": "echo last words; exit 5", "timeout_ms": 10000 }),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("PTY_PROCESS_EXITED")),
        "{v}"
    );
    assert_eq!(v["exit_code"], 5, "{v}");
    assert!(v["output"].as_str().unwrap().contains("last words"), "{v}");
}
both_backends!(process_exit_during_talk_is_reported);

async fn the_child_gets_an_explicit_environment(backend: &str) {
    let hub = TestHub::start().await;
    // cargo sets CARGO_MANIFEST_DIR for this test process: the hub must not pass it on.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    let id = hub
        .create_with(json!({ "backend": backend, "env": { "GIVEN": "yes" } }))
        .await;
    let v = hub
        .talk(
            &id,
            "echo \"[$CARGO_MANIFEST_DIR][$GIVEN][$TERM][$AGENT_HUB_SESSION_ID]\"",
        )
        .await;
    // tmux describes its own terminal to the programs in its panes.
    let term = if backend == "tmux" {
        "tmux-256color"
    } else {
        "xterm-256color"
    };
    assert_eq!(v["output"], format!("[][yes][{term}][{id}]\n"));
}
both_backends!(the_child_gets_an_explicit_environment);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrollback_offsets_across_eviction_report_dropped_bytes_exactly() {
    let hub = TestHub::start_with(|c| c.scrollback_bytes = 4096).await;
    let id = hub.create("pty").await;
    hub.talk(&id, "head -c 20000 /dev/zero | tr '\\0' x; echo")
        .await;
    let (_, v) = hub
        .get(&format!(
            "/v1/pty/sessions/{id}/read?since=0&max_bytes=1048576&timeout_ms=0"
        ))
        .await;
    let start = v["start_offset"].as_u64().unwrap();
    let end = v["end_offset"].as_u64().unwrap();
    assert_eq!(end - start, 4096, "{v}");
    assert_eq!(
        v["dropped_bytes"].as_u64(),
        Some(start),
        "everything before the ring start is reported"
    );
    let (_, v) = hub
        .get(&format!(
            "/v1/pty/sessions/{id}/read?since={}&max_bytes=10&timeout_ms=0",
            start - 123
        ))
        .await;
    assert_eq!(
        (
            v["dropped_bytes"].as_u64(),
            v["start_offset"].as_u64(),
            v["end_offset"].as_u64()
        ),
        (Some(123), Some(start), Some(start + 10))
    );
    let (_, v) = hub
        .get(&format!(
            "/v1/pty/sessions/{id}/read?since={}&max_bytes=10&timeout_ms=0",
            start + 5
        ))
        .await;
    assert_eq!(
        (v["dropped_bytes"].as_u64(), v["start_offset"].as_u64()),
        (Some(0), Some(start + 5))
    );
    // A read from the end long-polls: it returns as soon as new output arrives.
    let h2 = hub.base.clone();
    let http = hub.http.clone();
    let (id2, end2) = (
        id.clone(),
        hub.session(&id).await["output_offset"].as_u64().unwrap(),
    );
    let poll = tokio::spawn(async move {
        json_reply(http.get(format!(
            "{h2}/v1/pty/sessions/{id2}/read?since={end2}&timeout_ms=8000"
        )))
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": "echo woke" }),
    )
    .await;
    let v = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("long poll returned")
        .unwrap();
    assert_eq!(v["start_offset"].as_u64(), Some(end2));
    assert!(!v["output"].as_str().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmux_sessions_are_adopted_by_name_with_their_history() {
    let hub = TestHub::start().await;
    let sock = hub.tmux_socket.clone();
    let st = std::process::Command::new("tmux")
        .args([
            "-L",
            &sock,
            "new-session",
            "-d",
            "-s",
            "preexisting",
            "-x",
            "80",
            "-y",
            "20",
            "bash --norc --noprofile",
        ])
        .env("LANG", "C.UTF-8")
        .status()
        .unwrap();
    assert!(st.success());
    std::process::Command::new("tmux")
        .args([
            "-L",
            &sock,
            "send-keys",
            "-t",
            "preexisting",
            "echo from-before-adoption",
            "Enter",
        ])
        .status()
        .unwrap();
    let pane_shows = || {
        let out = std::process::Command::new("tmux")
            .args(["-L", &sock, "capture-pane", "-p", "-t", "preexisting"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .matches("from-before-adoption")
            .count()
            >= 2
    };
    assert!(wait_until(T, || async { pane_shows() }).await);
    let id = hub
        .create_with(json!({ "backend": "tmux", "tmux_session": "preexisting" }))
        .await;
    let (_, v) = hub
        .get(&format!(
            "/v1/pty/sessions/{id}/read?since=0&max_bytes=100000&timeout_ms=0"
        ))
        .await;
    assert!(
        v["output"]
            .as_str()
            .unwrap()
            .contains("from-before-adoption"),
        "history seeded: {v}"
    );
    let v = hub.talk(&id, "echo adopted").await;
    assert_eq!(v["output"], "adopted\n");
    assert_eq!(hub.session(&id).await["tmux_session"], "preexisting");
}

/// `#{pane_pipe}` of a pane of the hub's tmux server: 1 while a pipe-pane runs.
fn pane_piped(hub: &TestHub, target: &str) -> bool {
    let out = std::process::Command::new("tmux")
        .args([
            "-L",
            &hub.tmux_socket,
            "display-message",
            "-p",
            "-t",
            target,
        ])
        .arg("#{pane_pipe}")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "1"
}

/// A tmux pane's bytes come through `pipe-pane` (raw, not tmux's `%output` text, #17), every
/// one in order: 100,000 numbered lines read back from the session's byte stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmux_output_comes_through_the_pane_pipe_losslessly() {
    // A ring that holds the whole run (~590 kB), so every byte can be read back.
    let hub = TestHub::start_with(|c| c.scrollback_bytes = 2 << 20).await;
    let id = hub.create("tmux").await;
    let target = hub.session(&id).await["tmux_session"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(pane_piped(&hub, &target), "no pipe-pane on {target}");
    let from = hub.session(&id).await["output_offset"].as_u64().unwrap();
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": "seq 1 100000; echo END''MARK" }),
    )
    .await;
    hub.wait_output(&id, "ENDMARK", Duration::from_secs(30))
        .await;
    let mut text = String::new();
    let mut at = from;
    while !text.contains("ENDMARK") {
        let (_, v) = hub
            .get(&format!(
                "/v1/pty/sessions/{id}/read?since={at}&max_bytes=65536&timeout_ms=0"
            ))
            .await;
        assert_eq!(v["dropped_bytes"], 0, "from {at}");
        text.push_str(v["output"].as_str().unwrap());
        at = v["end_offset"].as_u64().unwrap();
    }
    let numbers: Vec<&str> = text
        .split("\r\n")
        // bash turns bracketed paste off (`ESC [?2004l` CR) before the command's output.
        .map(|l| l.rsplit('\r').next().unwrap_or(l))
        .skip_while(|l| *l != "1")
        .take_while(|l| !l.contains("ENDMARK"))
        .collect();
    let expected: Vec<String> = (1..=100_000).map(|n| n.to_string()).collect();
    assert!(
        numbers == expected,
        "{} lines, not 1..=100000 in order",
        numbers.len()
    );
    // Killing the session ends the pipe with it.
    let (status, _) = hub.delete(&format!("/v1/pty/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert!(!pane_piped(&hub, &target));
}

/// Attaching to a tmux pane while it prints leaves its tmux server alive. The hub once turned
/// the pane's `%output` off after `pipe-pane` with `refresh-client -A '%N:off'`, which in tmux
/// 3.3a keeps the blocks already queued while freeing their bytes: the server died of SIGSEGV
/// about half the time (an agent's container then ended at once). Eight attaches in a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attaching_to_a_pane_that_prints_leaves_the_tmux_server_alive() {
    let hub = TestHub::start().await;
    let sock = hub.tmux_socket.clone();
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(["-L", &sock])
            .args(args)
            .env("LANG", "C.UTF-8")
            .status()
            .unwrap()
            .success()
    };
    for n in 0..8 {
        let name = format!("printing{n}");
        let loop_ = "sh -c 'while :; do echo printing; done'";
        assert!(tmux(&["new-session", "-d", "-s", &name, loop_]));
        let id = hub
            .create_with(json!({ "backend": "tmux", "tmux_session": name }))
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            tmux(&["has-session", "-t", &name]),
            "the tmux server died when the hub attached to a printing pane (attach {n})"
        );
        let (status, _) = hub.delete(&format!("/v1/pty/sessions/{id}")).await;
        assert_eq!(status, 200);
        tmux(&["kill-session", "-t", &name]);
    }
}
