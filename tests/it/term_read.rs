//! Rendered reads: the hub's emulator against tmux's own rendering of the same pane over a
//! corpus of terminal behaviour, delta reads with markers, terminal queries answered by the
//! hub, the access switch, and `agent-hub screen`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::policy_support::wait_state;
use crate::support::{json_reply, wait_until, TestHub};

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

/// A 60x15 tmux session: its id and its tmux session name.
async fn tmux_session(hub: &TestHub) -> (String, String) {
    let id = hub
        .create_with(json!({"backend": "tmux", "cols": 60, "rows": 15}))
        .await;
    let name = hub.session(&id).await["tmux_session"]
        .as_str()
        .unwrap()
        .to_string();
    (id, name)
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
    let (id, name) = tmux_session(&hub).await;
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
        ("scroll region, writing from above it", "clear; printf '\\033[5;10r\\033[2;1H'; seq 1 15; printf '\\033[r\\033[14;1H'"),
        ("scroll region, reverse index at its top", "clear; seq 1 12; printf '\\033[3;8r\\033[3;1H\\033M\\033MRI\\033[r\\033[14;1H'"),
        ("insert and delete lines", "clear; seq 1 8; printf '\\033[2;1H\\033[2L\\033[6;1H\\033[1M\\033[12;1H'"),
        ("insert, delete and erase characters", "clear; printf 'abcdefghij\\033[6D\\033[2@XY\\033[2P\\033[2X\\n'"),
        ("scroll region at the bottom, writing from the top", "clear; printf '\\033[8;15r\\033[1;1H'; seq 1 25; printf '\\033[r'"),
        ("scroll region, lines below it", "clear; printf '\\033[2;6r\\033[10;1H'; seq 1 8; printf '\\033[r'"),
        ("scroll region, origin mode", "clear; printf '\\033[4;9r\\033[?6h\\033[1;1H'; seq 1 9; printf '\\033[?6l\\033[r\\033[14;1H'"),
        ("scroll region, scroll up and down", "clear; seq 1 14; printf '\\033[3;10r\\033[2S\\033[1T\\033[r\\033[14;1H'"),
        // Setting a region moves the cursor to the top left, even in origin mode, and what is
        // printed next starts there (#29 item 6: the typed command wraps onto a second row).
        ("scroll region set, then printing without placing the cursor", "printf '\\033[3;10r'; for i in $(seq 1 20); do echo region$i; done; printf '\\033[r'"),
        ("scroll region set in origin mode, then printing", "clear; printf '\\033[?6h\\033[3;10r'; for i in $(seq 1 14); do echo origin$i; done; printf '\\033[?6l\\033[r\\033[14;1H'"),
        ("scroll region set from inside another region", "clear; printf '\\033[2;12r\\033[6;1H'; seq 1 3; printf '\\033[4;8r'; seq 101 112; printf '\\033[r\\033[14;1H'"),
        ("a one-row scroll region changes nothing", "clear; printf '\\033[2;6r\\033[4;1H\\033[5;5r'; seq 1 9; printf '\\033[r\\033[14;1H'"),
        ("a top-like redraw in place", "clear; for i in 1 2 3; do printf '\\033[H\\033[2Ktick %s\\n\\033[Kload %s%s\\n' $i $i $i; done; printf '\\033[6;1H'"),
    ];
    for (n, (case, command)) in corpus.iter().enumerate() {
        // Compared once tmux has drawn the whole case (its echo shows `case-%s-done`, only
        // its output `case-N-done`), so no case passes by comparing the screen before it.
        let done = format!("case-{n}-done");
        send(&format!("{command}; printf 'case-%s-done\\n' {n}")).await;
        let drawn = wait_until(T, || async {
            capture_pane(&hub.tmux_socket, &name).contains(&done)
        })
        .await;
        assert!(drawn, "{case}: tmux never showed {done}");
        assert_same_as_tmux(&hub, &id, &name, case).await;
    }
    let key = |k: &str| {
        let (hub, id, k) = (&hub, id.clone(), k.to_string());
        async move {
            hub.post(
                &format!("/v1/pty/sessions/{id}/keys"),
                json!({ "keys": [k] }),
            )
            .await
        }
    };
    let shows = |text: &str| {
        let (hub, name, text) = (&hub, name.clone(), text.to_string());
        async move {
            let drawn = wait_until(T, || async {
                capture_pane(&hub.tmux_socket, &name).contains(&text)
            })
            .await;
            assert!(drawn, "{}", capture_pane(&hub.tmux_socket, &name));
        }
    };
    let buffer_is = |kind: &str| {
        let (hub, id, kind) = (&hub, id.clone(), kind.to_string());
        async move {
            let switched = wait_until(T, || async {
                viewport(hub, &id).await["buffer_type"] == kind.as_str()
            })
            .await;
            assert!(switched, "the {kind} screen never came");
        }
    };
    // A full-screen program.
    send("seq 1 200 | less").await;
    shows("\n14\n").await;
    assert_same_as_tmux(&hub, &id, &name, "less").await;
    assert_eq!(viewport(&hub, &id).await["buffer_type"], "alternate");
    key("Space").await;
    assert_same_as_tmux(&hub, &id, &name, "less, next page").await;
    key("q").await;
    buffer_is("normal").await;
    assert_same_as_tmux(&hub, &id, &name, "after less").await;
    // An editor: vim draws with scroll regions, inserts and deletes lines.
    send("vim -u NONE -N -i NONE -n /tmp/ah-$$").await;
    buffer_is("alternate").await;
    send("ifirst line of the edit").await;
    send("second line").await;
    key("Escape").await;
    send("ggOinserted above").await;
    key("Escape").await;
    shows("inserted above").await;
    assert_same_as_tmux(&hub, &id, &name, "vim").await;
    send(":q!").await;
    buffer_is("normal").await;
    assert_same_as_tmux(&hub, &id, &name, "after vim").await;
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
    let _viewer = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream"))
        .await;
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
        .env("AGENT_HUB_DATA_DIR", hub.data_dir())
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
    let port = crate::hub_process::free_port();
    let dir = tempfile::tempdir().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    // A hub process that is killed if the test fails before its graceful stop.
    let mut hub_process = crate::hub_process::HubProcess::spawn(
        &[
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--open-shell",
        ],
        &base,
        &[("AGENT_HUB_TERM_BUFFER_ACCESS", "off")],
    )
    .await;
    let http = hub_process.http.clone();
    let child = &mut hub_process.child;
    let list = json_reply(http.get(format!("{base}/v1/pty/sessions"))).await;
    let sid = list["sessions"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(
        list["sessions"][0]["label"], "main",
        "--open-shell opens a session labelled main"
    );
    let resp = http
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

/// talk's markers are in the byte stream (talk finds its end there) but not on the screen of
/// anyone watching: neither in the hub's rendering nor in tmux's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn talk_markers_are_not_left_on_the_screen() {
    let hub = TestHub::start().await;
    let id = hub.create_with(json!({"backend": "tmux"})).await;
    let name = hub.session(&id).await["tmux_session"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/talk"),
            json!({"command": "echo visible-output; false", "sentinel": "vis1"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["output"], "visible-output\n", "{v}");
    assert_eq!(v["exit_code"], 1, "{v}");
    assert!(
        v["raw_output"].as_str().unwrap().contains("__AH_vis1_E1"),
        "the markers stay in the byte stream: {v}"
    );
    hub.talk(&id, "echo second").await;
    let shown = |text: &str| text.lines().any(|l| l.trim_end() == "visible-output");
    let marked = |text: &str| text.contains("__AH_vis1_B") || text.contains("__AH_vis1_E");
    let ok = wait_until(T, || async {
        shown(viewport(&hub, &id).await["text"].as_str().unwrap())
            && shown(&capture_pane(&hub.tmux_socket, &name))
    })
    .await;
    let ours = viewport(&hub, &id).await["text"]
        .as_str()
        .unwrap()
        .to_string();
    let theirs = capture_pane(&hub.tmux_socket, &name);
    assert!(ok, "output not on screen:\nhub:\n{ours}\ntmux:\n{theirs}");
    assert!(!marked(&ours), "markers on the hub's screen:\n{ours}");
    assert!(!marked(&theirs), "markers on tmux's screen:\n{theirs}");
    assert_same_as_tmux(&hub, &id, &name, "after talks").await;
}

/// tmux reflows wrapped lines when a pane shrinks; an emulator fed the same bytes cuts them.
/// After a resize the hub takes the screen from tmux (#12 item 6), so `viewport` shows what
/// `capture-pane` does, and output after the resize lands on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shrinking_pane_reflows_wrapped_lines_like_tmux() {
    let hub = TestHub::start().await;
    let (id, name) = tmux_session(&hub).await;
    hub.talk(&id, "printf '%s\\n' $(seq -s - 1 25)").await;
    assert_same_as_tmux(&hub, &id, &name, "before the resize").await;
    hub.post(
        &format!("/v1/pty/sessions/{id}/resize"),
        json!({"cols": 40, "rows": 10}),
    )
    .await;
    hub.talk(&id, "echo resized").await;
    assert_same_as_tmux(&hub, &id, &name, "after shrinking").await;
    hub.post(
        &format!("/v1/pty/sessions/{id}/resize"),
        json!({"cols": 100, "rows": 12}),
    )
    .await;
    hub.talk(&id, "echo grown").await;
    assert_same_as_tmux(&hub, &id, &name, "after growing").await;
}

/// A session that keeps printing (#30): the follower looks at it less often and the screen
/// skips the lines that scroll away between two feeds, yet every read is exact at once: the
/// viewport equals tmux's capture of the pane, the tail holds the last lines in order with
/// nothing missing, and the state turns idle when the output stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_session_reads_exactly_while_its_scrolled_lines_are_skipped() {
    let hub = TestHub::start().await;
    let (id, name) = tmux_session(&hub).await;
    // Three seconds of bursts of short lines (as a busy agent prints), then a last line.
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/send_line"),
            json!({"data": "for i in $(seq 1 30); do seq $((i*1000)) $((i*1000+999)); \
                            sleep 0.1; done; echo BUSY-$((1+1))"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    hub.wait_output(&id, "BUSY-2\r\n", Duration::from_secs(30))
        .await;
    // The read right after: the emulator catches up on it, skipped lines and all.
    let (status, tail) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/term_read"),
            json!({"mode": "tail", "max_lines": 200, "merge_wrapped": false}),
        )
        .await;
    assert_eq!(status, 200, "{tail}");
    let lines: Vec<&str> = tail["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let done = lines
        .iter()
        .position(|l| *l == "BUSY-2")
        .unwrap_or_else(|| panic!("BUSY-2 not in the tail: {lines:?}"));
    // The lines before it are the last numbers, consecutive: none lost, none out of order.
    let numbers: Vec<u64> = lines[..done]
        .iter()
        .rev()
        .map_while(|l| l.parse().ok())
        .collect();
    assert!(numbers.len() >= 150, "{lines:?}");
    assert_eq!(numbers[0], 30_999, "{lines:?}");
    assert!(
        numbers.windows(2).all(|w| w[0] == w[1] + 1),
        "not consecutive: {lines:?}"
    );
    // Line numbers count every line printed, skipped or not: the viewport starts far down.
    assert!(tail["viewport_y"].as_u64().unwrap() > 29_900, "{tail}");
    assert_same_as_tmux(&hub, &id, &name, "after a busy stretch").await;
    wait_state(&hub, &id, "idle", Duration::from_secs(5)).await;
}
