//! Rendered reads: the hub's emulator against tmux's own rendering of the same pane over a
//! corpus of terminal behaviour, delta reads with markers, terminal queries answered by the
//! hub, the access switch, and `agent-hub screen`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{wait_until, TestHub};

const T: Duration = Duration::from_secs(10);

fn capture_pane(socket: &str, session: &str) -> String {
    let out = std::process::Command::new("tmux")
        .args([
            "-L",
            socket,
            "capture-pane",
            "-p",
            "-t",
            &format!("={session}:"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Lines with trailing blanks removed, trailing empty lines dropped: how both sides compare.
fn normalise(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

async fn viewport(hub: &TestHub, id: &str) -> Value {
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/term_read"),
            json!({"mode": "viewport", "max_lines": 200, "merge_wrapped": false}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

/// Waits until the hub's viewport equals tmux's capture of the pane.
async fn assert_same_as_tmux(hub: &TestHub, id: &str, tmux_name: &str, case: &str) {
    let deadline = std::time::Instant::now() + T;
    loop {
        let ours = normalise(viewport(hub, id).await["text"].as_str().unwrap());
        let theirs = normalise(&capture_pane(&hub.tmux_socket, tmux_name));
        if ours == theirs {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{case}: hub viewport differs from tmux capture-pane\nhub:\n{}\ntmux:\n{}",
            ours.join("\n"),
            theirs.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewport_matches_tmux_capture_pane_over_a_corpus() {
    let hub = TestHub::start().await;
    let id = hub
        .create_with(json!({"backend": "tmux", "cols": 60, "rows": 15}))
        .await;
    let name = hub.session(&id).await["tmux_session"]
        .as_str()
        .unwrap()
        .to_string();
    let send = |data: &str| {
        let (hub, id, data) = (&hub, id.clone(), data.to_string());
        async move {
            hub.post(
                &format!("/v1/pty/sessions/{id}/send_line"),
                json!({"data": data}),
            )
            .await
        }
    };
    let corpus: &[(&str, &str)] = &[
        ("colours", "printf '\\033[31mred\\033[0m \\033[1;32mbold green\\033[0m \\033[48;5;21mbg\\033[0m\\n'"),
        ("wide characters and emoji", "printf '中文字符 テスト ✓ 😀 end\\n'"),
        ("wrapped lines", "printf '%s' $(seq -s - 1 40); echo"),
        ("progress bar with CR", "printf 'progress 10%%\\rprogress 50%%\\rprogress 100%%\\n'"),
        ("cursor save/restore, DEC form", "printf 'A\\0337BBBB\\0338C\\n'"),
        ("cursor save/restore, SCO form", "printf 'X\\033[sYYYY\\033[uZ\\n'"),
        ("alternate screen switching", "printf '\\033[?1049hON THE ALT SCREEN\\033[?1049l'; echo back"),
        ("clear and cursor moves", "clear; printf '\\033[5;10Hplaced\\033[1;1Htop\\n'"),
    ];
    for (case, command) in corpus {
        send(command).await;
        assert_same_as_tmux(&hub, &id, &name, case).await;
    }
    // A full-screen program.
    send("seq 1 200 | less").await;
    assert!(
        wait_until(T, || async {
            capture_pane(&hub.tmux_socket, &name).contains("\n14\n")
        })
        .await,
        "{}",
        capture_pane(&hub.tmux_socket, &name)
    );
    assert_same_as_tmux(&hub, &id, &name, "less").await;
    assert_eq!(viewport(&hub, &id).await["buffer_type"], "alternate");
    hub.post(
        &format!("/v1/pty/sessions/{id}/keys"),
        json!({"keys": ["Space"]}),
    )
    .await;
    assert_same_as_tmux(&hub, &id, &name, "less, next page").await;
    hub.post(
        &format!("/v1/pty/sessions/{id}/keys"),
        json!({"keys": ["q"]}),
    )
    .await;
    assert!(
        wait_until(T, || async {
            viewport(&hub, &id).await["buffer_type"] == "normal"
        })
        .await
    );
    assert_same_as_tmux(&hub, &id, &name, "after less").await;
    // A resize.
    hub.post(
        &format!("/v1/pty/sessions/{id}/resize"),
        json!({"cols": 40, "rows": 10}),
    )
    .await;
    send("printf '%s' $(seq -s . 1 30); echo; echo resized").await;
    assert_same_as_tmux(&hub, &id, &name, "resize").await;
    let v = viewport(&hub, &id).await;
    assert_eq!(
        (v["cols"].as_u64(), v["rows"].as_u64()),
        (Some(40), Some(10))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_reads_follow_long_output_and_report_disposed_markers() {
    let hub = TestHub::start().await;
    let id = hub
        .create_with(json!({"backend": "pty", "cols": 80, "rows": 20}))
        .await;
    let read = |body: Value| {
        let (hub, id) = (&hub, id.clone());
        async move {
            let (status, v) = hub
                .post(&format!("/v1/pty/sessions/{id}/term_read"), body)
                .await;
            assert_eq!(status, 200, "{v}");
            v
        }
    };
    let first = read(json!({"mode": "delta"})).await;
    let mut marker = first["marker_id"].as_str().unwrap().to_string();
    let mut seen: Vec<String> = Vec::new();
    for batch in 0..5 {
        let from = batch * 100 + 1;
        hub.talk(&id, &format!("seq {from} {}", from + 99)).await;
        let v = read(json!({"mode": "delta", "marker_id": marker, "max_lines": 200})).await;
        assert_eq!(v["marker_disposed"], false, "{v}");
        seen.extend(
            v["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_string()),
        );
        marker = v["marker_id"].as_str().unwrap().to_string();
    }
    for k in [1, 250, 500] {
        assert!(
            seen.contains(&k.to_string()),
            "line {k} missing from the deltas"
        );
    }
    // Far more output than the emulator keeps: the old marker is disposed.
    hub.talk(&id, "seq 1 5000").await;
    let v = read(json!({"mode": "delta", "marker_id": first["marker_id"], "max_lines": 10})).await;
    assert_eq!(
        (v["marker_disposed"].as_bool(), v["truncated"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );
    let tail = read(json!({"mode": "tail", "max_lines": 5})).await;
    assert_eq!(tail["lines"].as_array().unwrap().len(), 5);
    let capped = read(json!({"mode": "tail", "max_lines": 100000, "max_chars": 100})).await;
    assert!(
        capped["text"].as_str().unwrap().chars().count() <= 100
            && capped["dropped_chars"].as_u64().unwrap() > 0,
        "{capped}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_answers_terminal_queries_when_no_client_is_attached() {
    let hub = TestHub::start().await;
    // A program that asks for the cursor position at start-up and waits for the answer (in
    // raw mode, as programs that ask do: a canonical-mode tty would hold the reply back).
    let script =
        "printf 'ab\\033[6n'; stty raw -echo; answer=$(dd bs=1 count=6 2>/dev/null); stty sane; \
                  printf '\\ngot:%s\\n' \"${answer#?}\"; sleep 1";
    let id = hub
        .create_with(json!({"backend": "pty", "shell": "bash", "args": ["--norc", "--noprofile", "-c", script]}))
        .await;
    let seen = hub.wait_output(&id, "got:", T).await;
    assert!(seen.contains("got:[1;3R"), "{seen}");
    // With an interactive viewer attached, its terminal answers instead of the hub.
    let id = hub
        .create_with(json!({"backend": "pty", "shell": "bash", "args": ["--norc", "--noprofile", "-c",
            "sleep 1; printf '\\033[6n'; stty raw -echo; answer=$(timeout 2 dd bs=1 count=6 2>/dev/null); stty sane; printf '\\ngot:[%s]\\n' \"${answer#?}\""]}))
        .await;
    let url = format!(
        "{}/v1/pty/sessions/{id}/stream",
        hub.base.replace("http://", "ws://")
    );
    let (_viewer, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let seen = hub.wait_output(&id, "got:", T).await;
    assert!(
        seen.contains("got:[]"),
        "the hub answered although a viewer was attached: {seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn term_read_errors_and_the_cli() {
    let hub = TestHub::start().await;
    let id = hub.create("pty").await;
    hub.talk(&id, "echo ON_SCREEN").await;
    let (status, v) = hub
        .post("/v1/pty/sessions/pty_00000000/term_read", json!({}))
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (404, Some("PTY_SESSION_NOT_FOUND"))
    );
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/term_read"),
            json!({"mode": "sideways"}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("BAD_REQUEST")),
        "{v}"
    );
    let out = std::process::Command::new(crate::cli::BIN)
        .args(["screen", &id, "--mode", "viewport", "--hub", &hub.base])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("ON_SCREEN"));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("marker: g"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_reads_can_be_switched_off() {
    let hub = TestHub::start_with(|c| c.term_buffer_access = false).await;
    let id = hub.create("pty").await;
    let (status, v) = hub
        .post(&format!("/v1/pty/sessions/{id}/term_read"), json!({}))
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (403, Some("TERM_BUFFER_ACCESS_DISABLED")),
        "{v}"
    );
    // Raw reads are a different switch and still work.
    let (status, _) = hub.get(&format!("/v1/pty/sessions/{id}/read")).await;
    assert_eq!(status, 200);
    // And the environment variable reaches the config through `serve`.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(crate::cli::BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--open-shell",
        ])
        .env("AGENT_HUB_TERM_BUFFER_ACCESS", "off")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let up = wait_until(T, || async {
        reqwest::get(format!("{base}/health"))
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    assert!(up);
    let list: Value = reqwest::get(format!("{base}/v1/pty/sessions"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sid = list["sessions"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(
        list["sessions"][0]["label"], "main",
        "--open-shell opens a session labelled main"
    );
    let resp = reqwest::Client::new()
        .post(format!("{base}/v1/pty/sessions/{sid}/term_read"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    // SIGTERM stops the hub gracefully, and the shell it opened goes with it.
    let pid = list["sessions"][0]["pid"].as_u64().unwrap() as u32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        !crate::support::process_alive(pid),
        "the hub's shell outlived it"
    );
}
