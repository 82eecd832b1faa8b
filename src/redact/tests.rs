use super::stream::StreamRedactor;
use super::*;

fn red() -> Arc<Redactor> {
    Arc::new(Redactor::new())
}

fn leaks(out: &[u8], secret: &str) -> bool {
    let text = String::from_utf8_lossy(out);
    // The secret, or any 8-byte piece of it (a partial leak), must not be visible.
    let visible = String::from_utf8_lossy(&visible::project(text.as_bytes()).text).into_owned();
    let secret = secret.as_bytes();
    secret
        .windows(secret.len().min(8))
        .any(|w| visible.as_bytes().windows(w.len()).any(|x| x == w))
}

/// Fails, naming `what` and showing `out`, when `out` leaks `secret` (see [`leaks`]).
fn assert_hidden(out: &[u8], secret: &str, what: &str) {
    assert!(
        !leaks(out, secret),
        "{what}: {:?}",
        String::from_utf8_lossy(out)
    );
}

/// `secret` in two halves, the first after the escape sequence `first`, the second after
/// `second`, then a reset (`\x1b[0m`).
fn coloured(secret: &str, first: &str, second: &str) -> String {
    let mid = secret.len() / 2;
    format!("{first}{}{second}{}\x1b[0m", &secret[..mid], &secret[mid..])
}

/// `line` as a shell shows it: after a prompt, with the next prompt after it.
fn at_prompt(line: &str) -> String {
    format!("$ {line}\r\n$ ")
}

/// `bytes` through a stream as two chunks cut at `cut`; with `flush_between`, the viewer went
/// idle between them (the first chunk's held tail was flushed on its own).
fn two_chunks(r: &Arc<Redactor>, bytes: &[u8], cut: usize, flush_between: bool) -> Vec<u8> {
    let mut st = StreamRedactor::new(r.clone(), b"");
    let mut out = st.push(&bytes[..cut]);
    if flush_between {
        out.extend(st.flush());
    }
    out.extend(st.push(&bytes[cut..]));
    out.extend(st.flush());
    out
}

#[test]
fn corpus_has_at_least_30_formats_and_each_is_redacted_whole() {
    let r = red();
    let samples = corpus::samples();
    assert!(samples.len() >= 30, "{}", samples.len());
    for s in &samples {
        let out = r.redact_str(&s.line);
        assert!(!leaks(out.as_bytes(), &s.secret), "{}: {out}", s.kind);
        assert!(out.contains(MARKER), "{}: {out}", s.kind);
    }
}

#[test]
fn ordinary_output_is_untouched() {
    let r = red();
    for text in [
        "ls -la\r\ntotal 0\r\n",
        "skip the sk- prefix talk",
        "echo $ANTHROPIC_API_KEY",
        "see https://example.com/path and the bearer of bad news:",
        "\x1b[1;32mgreen\x1b[0m and plain",
        "key-value store",
        "monkey: banana",
        "tcp://127.0.0.1:1",
    ] {
        assert_eq!(r.redact_str(text), text);
    }
}

#[test]
fn secrets_inside_colour_codes_are_caught_and_escapes_kept() {
    let r = red();
    for s in corpus::samples() {
        let secret = &s.secret;
        let coloured = s.line.replacen(
            secret.as_str(),
            &coloured(secret, "\x1b[31m", "\x1b[1;33m"),
            1,
        );
        let out = r.redact_bytes(coloured.as_bytes());
        assert_hidden(&out, secret, s.kind);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("\x1b[1;33m") && text.contains("\x1b[0m"),
            "{}",
            s.kind
        );
    }
}

#[test]
fn stream_catches_every_secret_split_at_every_byte() {
    let r = red();
    for s in corpus::samples() {
        let line = at_prompt(&s.line);
        let bytes = line.as_bytes();
        for cut in 0..=bytes.len() {
            let out = two_chunks(&r, bytes, cut, false);
            assert_hidden(&out, &s.secret, &format!("{} cut {cut}", s.kind));
        }
    }
}

#[test]
fn stream_catches_coloured_secrets_split_at_every_byte() {
    // Cuts fall inside the secret and inside its escape sequences.
    let r = red();
    for s in corpus::samples() {
        let coloured = coloured(&s.secret, "\x1b[1;31m", "\x1b[0;33m");
        let line = at_prompt(&s.line.replacen(&s.secret, &coloured, 1));
        let bytes = line.as_bytes();
        for cut in 0..=bytes.len() {
            let out = two_chunks(&r, bytes, cut, false);
            assert_hidden(&out, &s.secret, &format!("{} cut {cut}", s.kind));
            assert!(
                String::from_utf8_lossy(&out).contains("\x1b[0;33m"),
                "{} cut {cut}",
                s.kind
            );
        }
    }
}

#[test]
fn stream_split_with_a_flush_between_leaks_at_most_a_prefix() {
    // The viewer went idle between the halves, so the first half was flushed on its own.
    let r = red();
    for s in corpus::samples() {
        let line = at_prompt(&s.line);
        let bytes = line.as_bytes();
        let start = line.find(s.secret.as_str()).unwrap();
        for cut in start..start + s.secret.len() {
            let out = two_chunks(&r, bytes, cut, true);
            // A format's public prefix (`github_pat_`) may show; nothing after it may.
            let core = patterns::PATTERNS
                .iter()
                .flat_map(|p| p.prefixes.iter())
                .filter_map(|p| s.secret.strip_prefix(p))
                .min_by_key(|c| c.len())
                .unwrap_or(&s.secret);
            assert_hidden(&out, core, &format!("{} cut {cut}", s.kind));
        }
    }
}

#[test]
fn typing_is_not_held_back() {
    let r = red();
    let mut st = StreamRedactor::new(r, b"");
    for (chunk, sent) in [
        ("$ ", "$ "),
        ("l", "l"),
        ("s", "s"),
        (" -la", " -la"),
        ("\r\n", "\r\n"),
        ("echo hi", "echo hi"),
    ] {
        assert_eq!(st.push(chunk.as_bytes()), sent.as_bytes(), "{chunk:?}");
        assert!(st.flush_deadline().is_none());
    }
    // A possible prefix waits for the next byte or the flush.
    assert_eq!(st.push(b" gh"), b" ");
    assert!(st.flush_deadline().is_some());
    assert_eq!(st.push(b"x"), b"ghx");
    assert_eq!(st.push(b" sk"), b" ");
    assert_eq!(st.flush(), b"sk");
    // An answer after a `key:` prompt waits for the flush and is shown.
    assert_eq!(st.push(b"\r\nPress a key: "), b"\r\nPress a key: ");
    assert_eq!(st.push(b"y"), b"");
    assert_eq!(st.flush(), b"y");
    let mut st = StreamRedactor::new(red(), b"");
    assert_eq!(st.push(b"monkey: "), b"monkey: ");
    assert_eq!(st.push(b"banana"), b"banana");
}

#[test]
fn literal_secrets_are_redacted_split_or_not() {
    let r = red();
    let env: std::collections::BTreeMap<String, String> = [
        ("MY_TOKEN".to_string(), "plainvalue-42-zz".to_string()),
        ("HOME".to_string(), "/home/somebody".to_string()),
        ("SHORT_KEY".to_string(), "abc".to_string()),
    ]
    .into();
    r.add_env_secrets(&env, &[]);
    assert_eq!(r.redact_str("v=plainvalue-42-zz."), format!("v={MARKER}."));
    assert_eq!(r.redact_str("/home/somebody abc"), "/home/somebody abc");
    let text = b"value: plainvalue-42-zz\r\n";
    for cut in 0..text.len() {
        let out = two_chunks(&r, text, cut, true);
        assert_hidden(&out, "plainvalue-42-zz", &format!("cut {cut}"));
    }
}

#[test]
fn json_strings_are_redacted_in_place() {
    let r = red();
    let mut v = serde_json::json!({"a": ["Bearer abcdefgh12345678"], "n": 3, "b": {"c": "ok"}});
    r.redact_json(&mut v);
    assert_eq!(v["a"][0], format!("Bearer {MARKER}"));
    assert_eq!(v["b"]["c"], "ok");
    assert_eq!(v["n"], 3);
}

#[test]
fn secret_names_are_recognised() {
    for (name, secret) in [
        ("GITHUB_TOKEN", true),
        ("OPENAI_API_KEY", true),
        ("db_password", true),
        ("AWS_SECRET_ACCESS_KEY", true),
        ("PATH", false),
        ("HOME", false),
    ] {
        assert_eq!(is_secret_name(name), secret, "{name}");
    }
}

/// Throughput of the stream redactor on ordinary output (`cargo test --release --lib
/// redact_throughput -- --ignored --nocapture`).
#[test]
#[ignore]
fn redact_throughput() {
    let line: Vec<u8> = (b'!'..=b'~').cycle().take(99).chain([b'\n']).collect();
    let chunk: Vec<u8> = line.iter().copied().cycle().take(64 * 1024).collect();
    let mut st = StreamRedactor::new(red(), b"");
    let start = std::time::Instant::now();
    let mut n = 0;
    while start.elapsed() < std::time::Duration::from_secs(2) {
        n += st.push(&chunk).len();
    }
    let secs = start.elapsed().as_secs_f64();
    println!("stream redactor: {:.1} MB/s", n as f64 / secs / 1e6);
    // Build-log-like output: numbers and words, the common case with no secret in it.
    let lines: Vec<u8> = (1..=20_000u32)
        .flat_map(|i| format!("{i} compiling crate-{i} v0.{i}.0\r\n").into_bytes())
        .collect();
    let mut st = StreamRedactor::new(red(), b"");
    let start = std::time::Instant::now();
    let mut n = 0;
    while start.elapsed() < std::time::Duration::from_secs(2) {
        for chunk in lines.chunks(64 * 1024) {
            n += st.push(chunk).len();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "stream redactor, log lines: {:.1} MB/s",
        n as f64 / secs / 1e6
    );
}

#[test]
fn an_address_with_a_port_at_the_end_of_output_is_not_taken_for_a_cut_secret() {
    let r = red();
    for text in [
        "serving on http://127.0.0.1:8080",
        "open https://localhost:5173",
    ] {
        let out = r.redact_window(b"", text.as_bytes(), true);
        assert_eq!(String::from_utf8_lossy(&out), text);
    }
    // A credential cut before its `@` is still redacted when the stream goes idle.
    for cut in [
        "fetch https://deploy:s3cretPa",
        "fetch https://deploy:12345678",
    ] {
        let out = r.redact_window(b"", cut.as_bytes(), true);
        assert!(String::from_utf8_lossy(&out).contains(MARKER), "{cut}");
    }
}
