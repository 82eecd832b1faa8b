//! The WebSocket stream: ordered, gap-free fan-out to several viewers; slow viewers resync
//! without slowing the session; input and resize frames; the screen paint on attach.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{wait_until, TestHub};

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn connect(hub: &TestHub, id: &str, since: Option<u64>) -> (Ws, Value) {
    let q = since.map(|s| format!("?since={s}")).unwrap_or_default();
    let mut ws = hub
        .connect_ws(&format!("/v1/pty/sessions/{id}/stream{q}"))
        .await;
    let hello = match ws.next().await {
        Some(Ok(Message::Text(t))) => serde_json::from_str(t.as_str()).expect("hello json"),
        other => panic!("expected hello, got {other:?}"),
    };
    (ws, hello)
}

/// Collects binary bytes until `until` appears in them (or the deadline passes); also returns
/// the text frames seen.
async fn collect_until(ws: &mut Ws, until: &[u8], within: Duration) -> (Vec<u8>, Vec<Value>) {
    let mut bytes = Vec::new();
    let mut texts = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    while !bytes.windows(until.len()).any(|w| w == until) {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => bytes.extend_from_slice(&b),
            Ok(Some(Ok(Message::Text(t)))) => texts.push(serde_json::from_str(t.as_str()).unwrap()),
            Ok(Some(Ok(_))) => {}
            other => panic!(
                "stream ended before {:?}: {other:?}; got {} bytes",
                String::from_utf8_lossy(until),
                bytes.len()
            ),
        }
    }
    (bytes, texts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subscribers_see_identical_bytes_with_no_gap() {
    let hub = TestHub::start().await;
    let id = hub.create("pty").await;
    hub.talk(&id, "echo before-subscribe").await;
    let (mut a, hello_a) = connect(&hub, &id, Some(0)).await;
    assert_eq!(
        (
            hello_a["type"].as_str(),
            hello_a["mode"].as_str(),
            hello_a["offset"].as_u64()
        ),
        (Some("hello"), Some("replay"), Some(0))
    );
    hub.post(
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": "seq 1 20000; echo STREAM_DONE" }),
    )
    .await;
    // B joins mid-stream, from offset 0 too: backlog then live, seamlessly.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let (mut b, _) = connect(&hub, &id, Some(0)).await;
    let (bytes_a, texts_a) = collect_until(&mut a, b"\nSTREAM_DONE", Duration::from_secs(20)).await;
    let (bytes_b, texts_b) = collect_until(&mut b, b"\nSTREAM_DONE", Duration::from_secs(20)).await;
    assert!(
        texts_a.is_empty() && texts_b.is_empty(),
        "no resync expected: {texts_a:?} {texts_b:?}"
    );
    let n = bytes_a.len().min(bytes_b.len());
    assert_eq!(bytes_a[..n], bytes_b[..n]);
    // And both equal the retained scrollback byte for byte.
    let (_, v) = hub
        .get(&format!(
            "/v1/pty/sessions/{id}/read?since=0&max_bytes=4194304&timeout_ms=0&encoding=base64"
        ))
        .await;
    assert_eq!(v["dropped_bytes"], 0);
    let ring = decode_base64(v["output"].as_str().unwrap());
    assert_eq!(ring[..n], bytes_a[..n]);
    let text = String::from_utf8_lossy(&bytes_a);
    assert!(text.contains("\r1\r\n2\r\n"), "missing the first lines");
    for k in [777, 19999, 20000] {
        assert!(text.contains(&format!("\r\n{k}\r\n")), "missing line {k}");
    }
}

/// What a viewer has seen of a stream: bytes received, and bytes the hub said it dropped.
#[derive(Clone, Default)]
pub struct Tally {
    got: std::sync::Arc<std::sync::atomic::AtomicU64>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Tally {
    /// Reads `ws` to its end in the background, pausing `pause` after each message (a slow
    /// viewer), and counts what it sees.
    pub fn follow(mut ws: Ws, pause: Duration) -> Tally {
        let tally = Tally::default();
        let t = tally.clone();
        tokio::spawn(async move {
            use std::sync::atomic::Ordering::SeqCst;
            while let Some(Ok(m)) = ws.next().await {
                match m {
                    Message::Binary(b) => t.got.fetch_add(b.len() as u64, SeqCst),
                    Message::Text(text) => {
                        let v: Value = serde_json::from_str(text.as_str()).unwrap();
                        t.dropped
                            .fetch_add(v["dropped_bytes"].as_u64().unwrap_or(0), SeqCst)
                    }
                    _ => 0,
                };
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
        });
        tally
    }

    /// (received, dropped) so far.
    pub fn seen(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::SeqCst;
        (self.got.load(SeqCst), self.dropped.load(SeqCst))
    }

    /// Fails unless, within `within`, every one of `total` bytes was received or reported
    /// dropped, exactly once.
    pub async fn assert_accounts_for(&self, total: u64, within: Duration) {
        let exact = wait_until(within, || async {
            let (got, dropped) = self.seen();
            got + dropped == total
        })
        .await;
        let (got, dropped) = self.seen();
        assert!(
            exact,
            "viewer: {got} received + {dropped} dropped != {total} within {within:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_stops_reading_does_not_slow_the_session() {
    let hub = TestHub::start().await;
    let id = hub.create("pty").await;
    let start = hub.session(&id).await["output_offset"].as_u64().unwrap();
    let (mut stalled, _) = connect(&hub, &id, Some(start)).await;
    let (reader, _) = connect(&hub, &id, Some(start)).await;
    let total: u64 = 40_000_000;
    let tally = Tally::follow(reader, Duration::ZERO);
    let began = std::time::Instant::now();
    let v = hub
        .talk(
            &id,
            &format!("head -c {total} /dev/zero | tr '\\0' x; echo; echo FLOOD_DONE"),
        )
        .await;
    assert_eq!(v["exit_code"], 0);
    let elapsed = began.elapsed();
    // 40 MB through a PTY takes a few seconds here; a session blocked by the stalled
    // viewer would never finish.
    assert!(elapsed < Duration::from_secs(30), "flood took {elapsed:?}");
    let end = hub.session(&id).await["output_offset"].as_u64().unwrap();
    assert!(end - start > total);
    // The reading viewer accounts for every byte exactly once: received or reported dropped.
    tally
        .assert_accounts_for(end - start, Duration::from_secs(30))
        .await;
    // The stalled viewer, once it reads, is told it missed output (resync), not left hanging.
    let resync = next_text_frame(&mut stalled, "resync").await;
    assert!(resync["dropped_bytes"].as_u64().unwrap() > 0, "{resync}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_and_resize_frames_reach_the_session_and_exit_is_reported() {
    let hub = TestHub::start().await;
    let id = hub.create("tmux").await;
    let (mut ws, _) = connect(&hub, &id, None).await;
    ws.send(Message::Text(
        json!({ "type": "resize", "cols": 66, "rows": 11 })
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            hub.session(&id).await["cols"] == 66
        })
        .await
    );
    ws.send(Message::Text(
        json!({ "type": "input", "data": "stty size\r" })
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    collect_until(&mut ws, b"11 66", Duration::from_secs(10)).await;
    ws.send(Message::Binary(b"echo raw-bytes-in\r".to_vec().into()))
        .await
        .unwrap();
    collect_until(&mut ws, b"\rraw-bytes-in\r\n", Duration::from_secs(10)).await;
    // A bad frame gets an error frame; the stream goes on.
    ws.send(Message::Text("{\"type\":\"bogus\"}".into()))
        .await
        .unwrap();
    let error = next_text_frame(&mut ws, "error").await;
    assert_eq!(error["error_code"], "BAD_REQUEST", "{error}");
    ws.send(Message::Binary(b"exit 3\r".to_vec().into()))
        .await
        .unwrap();
    let exit = next_text_frame(&mut ws, "exit").await;
    assert_eq!(exit["exit_code"], 3, "{exit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_viewer_is_painted_from_the_current_screen() {
    let hub = TestHub::start().await;
    let id = hub
        .create_with(json!({ "backend": "pty", "cols": 60, "rows": 10 }))
        .await;
    // Lots of history, then a cleared screen with one line: a replay would show the history.
    hub.talk(&id, "seq 1 3000").await;
    hub.talk(&id, "clear; echo ONLY_THIS_ON_SCREEN").await;
    let (mut ws, hello) = connect(&hub, &id, None).await;
    assert_eq!(hello["mode"], "screen");
    let (paint, _) = collect_until(&mut ws, b"ONLY_THIS_ON_SCREEN", Duration::from_secs(5)).await;
    let mut vt = vt100::Parser::new(10.try_into().unwrap(), 60.try_into().unwrap(), 0);
    vt.process(&paint);
    let screen = vt.screen().contents();
    assert!(screen.contains("ONLY_THIS_ON_SCREEN"), "{screen}");
    assert!(
        !screen.contains("2999"),
        "history replayed instead of the screen: {screen}"
    );
    assert!(
        paint.len() < 4096,
        "a paint, not a replay: {} bytes",
        paint.len()
    );
}

/// The next text frame of type `kind` (binary frames in between are skipped).
async fn next_text_frame(ws: &mut Ws, kind: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Ok(Some(Ok(m))) = tokio::time::timeout_at(deadline, ws.next()).await {
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["type"] == kind {
                return v;
            }
        }
    }
    panic!("no '{kind}' frame within 10 s");
}

pub(crate) fn decode_base64(text: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    } as u32;
    let mut out = Vec::new();
    for g in text.as_bytes().chunks(4) {
        let g: Vec<u8> = g.iter().copied().filter(|&c| c != b'=').collect();
        let n = g.iter().fold(0u32, |a, &c| a << 6 | val(c)) << (6 * (4 - g.len() as u32));
        for i in 0..g.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}
