//! Secret redaction on every path output leaves the hub by, with the shared corpus of fake
//! secrets (`agent_hub::redact::corpus`, 30+ formats), plain and wrapped in colour codes:
//! read (UTF-8 and base64), talk (output and raw_output), term_read, the WebSocket stream
//! (replay and screen paint), piped task replies, task_log events, the audit log, and
//! `agent-hub attach` in a real terminal. Secrets split across two writes with a pause
//! between them are caught in the live stream. Only an admin's `raw=true` shows them, audited.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use agent_hub::redact::corpus::{samples, Sample};
use agent_hub::redact::{visible, MARKER};

use crate::support::{wait_until, TestHub, Ws};

/// Whether any 8-byte piece of `secret` is visible in `out` (escape sequences ignored).
fn leaked(out: &[u8], secret: &str) -> bool {
    let text = visible::project(out).text;
    let secret = secret.as_bytes();
    secret
        .windows(secret.len().min(8))
        .any(|w| text.windows(w.len()).any(|x| x == w))
}

fn assert_clean(path: &str, out: &[u8], corpus: &[Sample]) {
    for s in corpus {
        assert!(
            !leaked(out, &s.secret),
            "{path}: {} leaked ({}):\n{}",
            s.kind,
            s.secret,
            String::from_utf8_lossy(out)
        );
    }
    let markers = String::from_utf8_lossy(out).matches(MARKER).count();
    assert!(markers >= corpus.len(), "{path}: only {markers} markers");
}

/// The corpus written to a file: each sample plain, then wrapped in colour codes.
fn corpus_file(dir: &std::path::Path) -> (std::path::PathBuf, Vec<Sample>) {
    let corpus = samples();
    let mut text = String::new();
    for s in &corpus {
        text.push_str(&s.line);
        text.push('\n');
    }
    for s in &corpus {
        let mid = s.secret.len() / 2;
        let coloured = format!(
            "\x1b[31m{}\x1b[1;33m{}\x1b[0m",
            &s.secret[..mid],
            &s.secret[mid..]
        );
        text.push_str(&s.line.replacen(&s.secret, &coloured, 1));
        text.push('\n');
    }
    let path = dir.join("secrets.txt");
    std::fs::write(&path, text).unwrap();
    (path, corpus)
}

/// Binary bytes until `until` is seen.
async fn binary_until(ws: &mut Ws, until: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !bytes.windows(until.len()).any(|w| w == until.as_bytes()) {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => bytes.extend_from_slice(&b),
            Ok(Some(Ok(_))) => {}
            other => panic!(
                "stream ended before {until}: {other:?}\n{}",
                String::from_utf8_lossy(&bytes)
            ),
        }
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_corpus_is_redacted_on_every_output_path() {
    let dir = tempfile::tempdir().unwrap();
    let (file, corpus) = corpus_file(dir.path());
    assert!(corpus.len() >= 30);
    let hub = TestHub::start().await;
    let id = hub
        .create_with(json!({ "backend": "pty", "cols": 250, "rows": 50 }))
        .await;
    let mut events = hub.connect_ws("/v1/events").await;
    let mut live = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream?since=0"))
        .await;
    let file = file.display().to_string();

    // talk: output and raw_output.
    let v = hub
        .talk(&id, &format!("cat {file}; echo CORPUS_$((1+1))_END"))
        .await;
    assert_clean(
        "talk output",
        v["output"].as_str().unwrap().as_bytes(),
        &corpus,
    );
    assert_clean(
        "talk raw_output",
        v["raw_output"].as_str().unwrap().as_bytes(),
        &corpus,
    );
    // The live WebSocket stream.
    let bytes = binary_until(&mut live, "CORPUS_2_END").await;
    assert_clean("stream (live)", &bytes, &corpus);
    // read, UTF-8 and base64.
    let path = format!("/v1/pty/sessions/{id}/read?since=0&max_bytes=4194304&timeout_ms=0");
    let (_, v) = hub.get(&path).await;
    assert_clean("read", v["output"].as_str().unwrap().as_bytes(), &corpus);
    let (_, v) = hub.get(&format!("{path}&encoding=base64")).await;
    let decoded = crate::stream::decode_base64(v["output"].as_str().unwrap());
    assert_clean("read base64", &decoded, &corpus);
    // The WebSocket stream replayed from 0.
    let mut replay = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream?since=0"))
        .await;
    let bytes = binary_until(&mut replay, "CORPUS_2_END").await;
    assert_clean("stream (replay)", &bytes, &corpus);
    // term_read.
    let (_, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/term_read"),
            json!({ "mode": "tail", "max_lines": 1000 }),
        )
        .await;
    assert_clean("term_read", v["text"].as_str().unwrap().as_bytes(), &corpus);
    // The screen paint a new viewer gets (the last screenful: the coloured half).
    let mut screen = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream"))
        .await;
    let paint = binary_until(&mut screen, "CORPUS_2_END").await;
    let on_screen: Vec<Sample> = samples()
        .into_iter()
        .filter(|s| !s.kind.starts_with("pem"))
        .rev()
        .take(20)
        .collect();
    assert_clean("stream (screen paint)", &paint, &on_screen);

    // A piped task's reply, and a PTY task's task_log events.
    let (status, v) = hub
        .post(
            "/v1/tasks",
            json!({ "cmd": format!("cat {file}"), "pty": false }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_clean(
        "task stdout",
        v["stdout"].as_str().unwrap().as_bytes(),
        &corpus,
    );
    let (status, v) = hub
        .post("/v1/tasks", json!({ "cmd": format!("cat {file}") }))
        .await;
    assert_eq!(status, 200, "{v}");
    let task = v["taskId"]
        .as_str()
        .or(v["id"].as_str())
        .unwrap()
        .to_string();
    let mut logged = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let frame = tokio::time::timeout_at(deadline, events.next()).await;
        let Ok(Some(Ok(Message::Text(t)))) = frame else {
            panic!("events ended: {frame:?}")
        };
        let e: Value = serde_json::from_str(t.as_str()).unwrap();
        if e["taskId"] != task.as_str() {
            continue;
        }
        if e["type"] == "task_log" {
            logged.push_str(&e.to_string());
        }
        if e["type"] == "task_finished" {
            break;
        }
    }
    assert_clean("task_log events", logged.as_bytes(), &corpus);

    // The audit log holds the talk's reply, redacted.
    let (_, v) = hub.get("/v1/pty-traffic/events?action=talk").await;
    assert_eq!(v["total"], 1, "{v}");
    assert_clean(
        "audit response",
        v["events"][0]["response"].as_str().unwrap().as_bytes(),
        &corpus,
    );

    // raw=true (the open hub's caller is an admin) shows the secrets, and is audited.
    let (status, v) = hub.get(&format!("{path}&raw=true")).await;
    assert_eq!(status, 200, "{v}");
    let raw = v["output"].as_str().unwrap();
    assert!(corpus.iter().all(|s| raw.contains(&s.secret)));
    let (_, v) = hub.get("/v1/pty-traffic/events?action=read_raw").await;
    assert_eq!(v["total"], 1, "{v}");
}

/// Every cut of a secret into two writes 50 ms apart (longer than the stream's hold), and
/// a colour code cut in the middle: the live viewer and a polling reader never see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_split_across_writes_with_a_pause_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let chosen: Vec<Sample> = samples()
        .into_iter()
        .filter(|s| ["github-classic-pat", "export-token", "url-credentials"].contains(&s.kind))
        .collect();
    let mut script = String::new();
    let quote = |t: &str| format!("'{}'", t.replace('\'', "'\\''"));
    for s in &chosen {
        let start = s.line.find(&s.secret).unwrap();
        for cut in start + 1..start + s.secret.len() {
            let (a, b) = s.line.split_at(cut);
            script.push_str(&format!(
                "printf '%s' {}; sleep 0.05; printf '%s\\n' {}\n",
                quote(a),
                quote(b)
            ));
        }
    }
    // An escape sequence cut in two, inside a secret.
    let pat = &chosen[0].secret;
    script.push_str(&format!(
        "printf 'x {}\\033[3'; sleep 0.05; printf '1m{}\\033[0m\\n'\n",
        &pat[..10],
        &pat[10..]
    ));
    script.push_str("echo SPLIT_$((3+4))_END\n");
    let file = dir.path().join("split.sh");
    std::fs::write(&file, script).unwrap();

    let hub = TestHub::start().await;
    let id = hub.create("pty").await;
    let mut live = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream"))
        .await;
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": format!("bash {}", file.display()) }),
    )
    .await;
    let (streamed, polled) = tokio::join!(
        binary_until(&mut live, "SPLIT_7_END"),
        hub.wait_output(&id, "SPLIT_7_END", Duration::from_secs(30))
    );
    for (path, out) in [("stream", &streamed[..]), ("read", polled.as_bytes())] {
        for s in &chosen {
            // A format's public prefix (`ghp_`) may show when the pause flushed it; nothing
            // of the secret after it may.
            let core = s.secret.trim_start_matches("ghp_");
            assert!(
                !leaked(out, core),
                "{path}: {} leaked:\n{}",
                s.kind,
                String::from_utf8_lossy(out)
            );
        }
        assert!(
            String::from_utf8_lossy(out).matches(MARKER).count() > 40,
            "{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_shows_redacted_output() {
    let dir = tempfile::tempdir().unwrap();
    let (file, corpus) = corpus_file(dir.path());
    let hub = TestHub::start().await;
    let id = hub.create_with(json!({ "backend": "tmux" })).await;
    let mut term = crate::cli::attach(&hub, &id, "");
    assert!(
        crate::cli::attached(&hub, &id).await,
        "attach did not start"
    );
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": format!("cat {}; echo ATTACH_$((2+3))_DONE", file.display()) }),
    )
    .await;
    assert!(
        wait_until(Duration::from_secs(15), || async {
            term.raw_text().contains("ATTACH_5_DONE")
        })
        .await,
        "output not shown:\n{}",
        term.raw_text()
    );
    assert_clean("attach", term.raw_text().as_bytes(), &corpus);
    term.type_bytes(&[0x1d]);
}

/// A secret the terminal wraps onto a second row is whole in a default `term_read`, which
/// joins wrapped rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_secret_is_caught_in_term_read() {
    let hub = TestHub::start().await;
    let id = hub
        .create_with(json!({ "backend": "pty", "cols": 30, "rows": 20 }))
        .await;
    let sample = samples()
        .into_iter()
        .find(|s| s.kind == "github-classic-pat")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrapped.txt");
    std::fs::write(&file, format!("{}\n", sample.line)).unwrap();
    hub.talk(&id, &format!("cat {}", file.display())).await;
    let (_, v) = hub
        .post(&format!("/v1/pty/sessions/{id}/term_read"), json!({}))
        .await;
    let text = v["text"].as_str().unwrap();
    assert!(text.contains(MARKER), "{text}");
    assert!(!leaked(text.as_bytes(), &sample.secret), "{text}");
}

/// The CLI reads through the API: `agent-hub read` and `talk` print redacted output; only
/// `read --raw` (an admin's, audited) prints the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_redacted_output_unless_raw() {
    let hub = TestHub::start().await;
    let id = hub.create("pty").await;
    let sample = samples()
        .into_iter()
        .find(|s| s.kind == "anthropic-key")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k.txt");
    std::fs::write(&file, format!("{}\n", sample.line)).unwrap();
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(crate::cli::BIN)
            .args(args)
            .args(["--hub", &hub.base])
            .env("AGENT_HUB_DATA_DIR", hub.data_dir())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let talked = cli(&["talk", &id, &format!("cat {}", file.display())]);
    assert!(
        talked.contains(MARKER) && !leaked(talked.as_bytes(), &sample.secret),
        "{talked}"
    );
    let read = cli(&["read", &id, "--max-bytes", "100000"]);
    assert!(
        read.contains(MARKER) && !leaked(read.as_bytes(), &sample.secret),
        "{read}"
    );
    let raw = cli(&["read", &id, "--max-bytes", "100000", "--raw"]);
    assert!(raw.contains(&sample.secret), "{raw}");
}
