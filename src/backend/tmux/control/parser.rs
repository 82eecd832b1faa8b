//! The streaming parser of a control client's stdout (see the protocol facts in
//! [`super`]).

/// One complete message from a control-mode client's stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlMessage {
    /// `%output %<pane> <escaped data>` and `%extended-output %<pane> <age> ... : <data>`:
    /// decoded raw pane bytes.
    Output { pane_id: String, data: Vec<u8> },
    /// A `%begin <time> <number> <flags>` ... `%end`/`%error` block: the reply to one
    /// command. `from_stdin` is tmux's flags field: true for a command this client
    /// wrote on stdin, false for the attach command's own block and hook commands.
    /// `lines` are raw bytes, unescaped, without the `\n`.
    Reply {
        number: u64,
        from_stdin: bool,
        success: bool,
        lines: Vec<Vec<u8>>,
    },
    /// `%exit [reason]`: the client is detaching / the session ended.
    Exit { reason: Option<String> },
    /// `%pause %<pane>` (flow control, tmux >= 3.2).
    Pause { pane_id: String },
    /// `%subscription-changed <name> $<session> @<window> <index> %<pane> : <value>`
    /// (from `refresh-client -B`). The name may contain spaces but never `:`.
    SubscriptionChanged { name: String, value: String },
    /// Any other line outside a reply block, kept whole (e.g. `%window-add @1`,
    /// `%session-changed $0 name`, or a line not starting with `%`).
    Notification { line: String },
}

/// Streaming parser for a control-mode client's stdout. Feed it bytes in any
/// chunking; it never panics and its output does not depend on the chunking.
#[derive(Debug, Default)]
pub struct ControlParser {
    /// Bytes of the current, not yet terminated line.
    partial: Vec<u8>,
    /// The `%begin` block being collected, if any.
    block: Option<OpenBlock>,
}

#[derive(Debug)]
struct OpenBlock {
    /// `<time> <number> <flags>` exactly as on the `%begin` line; the closing
    /// `%end`/`%error` repeats them, so a reply line that merely looks like `%end`
    /// does not close the block.
    guard: Vec<u8>,
    number: u64,
    from_stdin: bool,
    lines: Vec<Vec<u8>>,
}

impl ControlParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed raw bytes (any chunking, lines may be split anywhere, including inside an
    /// octal escape or a UTF-8 char); returns the complete messages.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<ControlMessage> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let (line, tail) = rest.split_at(pos);
            self.partial.extend_from_slice(line);
            rest = tail.get(1..).unwrap_or_default();
            let line = std::mem::take(&mut self.partial);
            self.handle_line(&line, &mut out);
            self.partial = line;
            self.partial.clear();
        }
        self.partial.extend_from_slice(rest);
        out
    }

    fn handle_line(&mut self, line: &[u8], out: &mut Vec<ControlMessage>) {
        if let Some(block) = &mut self.block {
            match closes(line, &block.guard) {
                Some(success) => {
                    if let Some(block) = self.block.take() {
                        out.push(ControlMessage::Reply {
                            number: block.number,
                            from_stdin: block.from_stdin,
                            success,
                            lines: block.lines,
                        });
                    }
                }
                None => block.lines.push(line.to_vec()),
            }
            return;
        }
        let (keyword, rest) = split_word(line);
        let rest = rest.unwrap_or_default();
        let parsed = match keyword {
            b"%output" => parse_output(rest),
            b"%extended-output" => parse_extended_output(rest),
            b"%begin" => {
                if let Some(block) = parse_begin(rest) {
                    self.block = Some(block);
                    return;
                }
                None
            }
            b"%exit" => Some(ControlMessage::Exit {
                reason: (!rest.is_empty()).then(|| lossy(rest)),
            }),
            b"%pause" => {
                parse_pane_id(split_word(rest).0).map(|pane_id| ControlMessage::Pause { pane_id })
            }
            b"%subscription-changed" => parse_subscription(rest),
            _ => None,
        };
        out.push(parsed.unwrap_or_else(|| ControlMessage::Notification { line: lossy(line) }));
    }
}

/// `Some(success)` if `line` is the `%end`/`%error` matching a `%begin` with `guard`.
fn closes(line: &[u8], guard: &[u8]) -> Option<bool> {
    if line.strip_prefix(b"%end ") == Some(guard) {
        Some(true)
    } else if line.strip_prefix(b"%error ") == Some(guard) {
        Some(false)
    } else {
        None
    }
}

/// Splits at the first space: the word before it and, if there was a space, the rest.
fn split_word(s: &[u8]) -> (&[u8], Option<&[u8]>) {
    match s.iter().position(|&b| b == b' ') {
        Some(i) => (&s[..i], s.get(i + 1..)),
        None => (s, None),
    }
}

fn lossy(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}

/// A pane id is `%` followed by digits.
fn parse_pane_id(word: &[u8]) -> Option<String> {
    let digits = word.strip_prefix(b"%")?;
    (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then(|| lossy(word))
}

/// `%<pane> <data>`
fn parse_output(rest: &[u8]) -> Option<ControlMessage> {
    let (pane, data) = split_word(rest);
    Some(ControlMessage::Output {
        pane_id: parse_pane_id(pane)?,
        data: unescape(data.unwrap_or_default()),
    })
}

/// `%<pane> <age> [future args...] : <data>`
fn parse_extended_output(rest: &[u8]) -> Option<ControlMessage> {
    let (pane, mut args) = split_word(rest);
    let pane_id = parse_pane_id(pane)?;
    loop {
        let (word, tail) = split_word(args?);
        if word == b":" {
            return Some(ControlMessage::Output {
                pane_id,
                data: unescape(tail.unwrap_or_default()),
            });
        }
        args = tail;
    }
}

/// `<time> <number> <flags>`
fn parse_begin(rest: &[u8]) -> Option<OpenBlock> {
    let text = std::str::from_utf8(rest).ok()?;
    let mut fields = text.split(' ');
    let (_time, number, flags) = (fields.next()?, fields.next()?, fields.next()?);
    let number = number.parse().ok()?;
    let flags: u32 = flags.parse().ok()?;
    Some(OpenBlock {
        guard: rest.to_vec(),
        number,
        from_stdin: flags & 1 != 0,
        lines: Vec::new(),
    })
}

/// `<name> $<session> @<window> <index> %<pane> : <value>`; tmux writes `-` for the
/// fields that do not apply. The name cannot contain `:`, so the first ` : ` ends the
/// head; the value may contain anything.
fn parse_subscription(rest: &[u8]) -> Option<ControlMessage> {
    let sep = rest.windows(3).position(|w| w == b" : ")?;
    let (head, value) = (&rest[..sep], rest.get(sep + 3..).unwrap_or_default());
    let mut fields = head.rsplitn(5, |&b| b == b' ');
    let ids_present = fields.by_ref().take(4).count() == 4;
    let name = fields
        .next()
        .filter(|name| ids_present && !name.is_empty())?;
    Some(ControlMessage::SubscriptionChanged {
        name: lossy(name),
        value: lossy(value),
    })
}

/// Decodes `%output` data: `\ooo` → one byte, everything else as is. A backslash not
/// followed by three octal digits of value <= 0o377 (which tmux never sends) is kept
/// literally.
fn unescape(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while let Some(&b) = data.get(i) {
        if b == b'\\' {
            if let Some(byte) = data.get(i + 1..i + 4).and_then(octal_byte) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    out
}

fn octal_byte(digits: &[u8]) -> Option<u8> {
    let mut value: u16 = 0;
    for &d in digits {
        if !(b'0'..=b'7').contains(&d) {
            return None;
        }
        value = value * 8 + u16::from(d - b'0');
    }
    u8::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ControlMessage::*;

    /// tmux's encoder (control.c, `control_append_data`).
    fn tmux_escape(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for &b in data {
            if b < b' ' || b == b'\\' {
                out.extend_from_slice(format!("\\{b:03o}").as_bytes());
            } else {
                out.push(b);
            }
        }
        out
    }

    fn output_line(pane: &str, data: &[u8]) -> Vec<u8> {
        let mut line = format!("%output {pane} ").into_bytes();
        line.extend(tmux_escape(data));
        line.push(b'\n');
        line
    }

    fn parse_all(bytes: &[u8]) -> Vec<ControlMessage> {
        ControlParser::new().feed(bytes)
    }

    fn reply(number: u64, success: bool, lines: &[&str]) -> ControlMessage {
        Reply {
            number,
            from_stdin: true,
            success,
            lines: lines.iter().map(|l| l.as_bytes().to_vec()).collect(),
        }
    }

    fn note(line: &str) -> ControlMessage {
        Notification { line: line.into() }
    }

    #[test]
    fn every_byte_round_trips_through_tmux_escaping() {
        for b in 0..=255u8 {
            let msgs = parse_all(&output_line("%3", &[b]));
            assert_eq!(
                msgs,
                vec![Output {
                    pane_id: "%3".into(),
                    data: vec![b]
                }],
                "byte {b:#04x}"
            );
        }
        let all: Vec<u8> = (0..=255).chain((0..=255).rev()).collect();
        let msgs = parse_all(&output_line("%0", &all));
        assert_eq!(
            msgs,
            vec![Output {
                pane_id: "%0".into(),
                data: all
            }]
        );
    }

    #[test]
    fn escaping_matches_tmux_and_passes_high_bytes_raw() {
        assert_eq!(
            tmux_escape(b"a\\b\x1b\n\x7f\xff"),
            b"a\\134b\\033\\012\x7f\xff"
        );
        // Real line captured from tmux 3.3a.
        let msgs = parse_all(b"%output %0 \\033[1mbold\\033[0m \xc3\xa9\\015\\012# \n");
        assert_eq!(
            msgs,
            vec![Output {
                pane_id: "%0".into(),
                data: b"\x1b[1mbold\x1b[0m \xc3\xa9\r\n# ".to_vec()
            }]
        );
    }

    #[test]
    fn malformed_escapes_are_kept_literally() {
        assert_eq!(unescape(b"\\"), b"\\");
        assert_eq!(unescape(b"\\01"), b"\\01");
        assert_eq!(unescape(b"\\018"), b"\\018");
        assert_eq!(unescape(b"\\400x"), b"\\400x");
        assert_eq!(unescape(b"\\377\\000"), b"\xff\x00");
    }

    #[test]
    fn output_edge_cases() {
        assert_eq!(
            parse_all(b"%output %0 \n"),
            vec![Output {
                pane_id: "%0".into(),
                data: vec![]
            }]
        );
        assert_eq!(
            parse_all(b"%output %0\n"),
            vec![Output {
                pane_id: "%0".into(),
                data: vec![]
            }]
        );
        // Spaces in data are data.
        assert_eq!(
            parse_all(b"%output %12  a  \n"),
            vec![Output {
                pane_id: "%12".into(),
                data: b" a  ".to_vec()
            }]
        );
        // Malformed pane ids become notifications instead of being dropped.
        assert_eq!(parse_all(b"%output x y\n"), vec![note("%output x y")]);
        assert_eq!(parse_all(b"%output\n"), vec![note("%output")]);
    }

    #[test]
    fn extended_output() {
        assert_eq!(
            parse_all(b"%extended-output %0 0 : hi\\015\\012\n"),
            vec![Output {
                pane_id: "%0".into(),
                data: b"hi\r\n".to_vec()
            }]
        );
        // Future arguments before ':' are ignored; ' : ' in data is data.
        assert_eq!(
            parse_all(b"%extended-output %7 1234 future x : a : b\n"),
            vec![Output {
                pane_id: "%7".into(),
                data: b"a : b".to_vec()
            }]
        );
        assert_eq!(
            parse_all(b"%extended-output %1 5 : \n"),
            vec![Output {
                pane_id: "%1".into(),
                data: vec![]
            }]
        );
        assert_eq!(
            parse_all(b"%extended-output %1 5 x\n"),
            vec![note("%extended-output %1 5 x")]
        );
    }

    #[test]
    fn reply_block_keeps_percent_lines_and_needs_matching_end() {
        let stream = b"%begin 1795316507 273 1\n%0\n%output %0 abc\n%end 1795316507 273 0\n%end 1 273 1\n\n%exit\n%end 1795316507 273 1\n%window-add @1\n";
        assert_eq!(
            parse_all(stream),
            vec![
                reply(
                    273,
                    true,
                    &[
                        "%0",
                        "%output %0 abc",
                        "%end 1795316507 273 0",
                        "%end 1 273 1",
                        "",
                        "%exit"
                    ]
                ),
                note("%window-add @1"),
            ]
        );
    }

    #[test]
    fn error_block_and_attach_block() {
        let stream = b"%begin 1795319463 266 0\n%end 1795319463 266 0\n%session-changed $0 t1\n%begin 1795319463 276 1\nparse error: unknown command: bogus\n%error 1795319463 276 1\n";
        assert_eq!(
            parse_all(stream),
            vec![
                Reply {
                    number: 266,
                    from_stdin: false,
                    success: true,
                    lines: vec![]
                },
                note("%session-changed $0 t1"),
                reply(276, false, &["parse error: unknown command: bogus"]),
            ]
        );
    }

    #[test]
    fn reply_lines_are_raw_bytes() {
        let msgs = parse_all(b"%begin 1 2 1\n\xff\xfe \\033\r\n%end 1 2 1\n");
        assert_eq!(
            msgs,
            vec![Reply {
                number: 2,
                from_stdin: true,
                success: true,
                lines: vec![b"\xff\xfe \\033\r".to_vec()]
            }]
        );
    }

    #[test]
    fn exit_pause_subscription_and_other_lines() {
        assert_eq!(parse_all(b"%exit\n"), vec![Exit { reason: None }]);
        assert_eq!(
            parse_all(b"%exit detached (from session t1)\n"),
            vec![Exit {
                reason: Some("detached (from session t1)".into())
            }]
        );
        assert_eq!(parse_all(b"%exited\n"), vec![note("%exited")]);
        assert_eq!(
            parse_all(b"%pause %4\n"),
            vec![Pause {
                pane_id: "%4".into()
            }]
        );
        assert_eq!(parse_all(b"%pause\n"), vec![note("%pause")]);
        // Captured from tmux 3.3a: name with a space, value containing " : ".
        assert_eq!(
            parse_all(b"%subscription-changed my sub $0 @0 0 %0 : %0 : x\n"),
            vec![SubscriptionChanged {
                name: "my sub".into(),
                value: "%0 : x".into()
            }]
        );
        assert_eq!(
            parse_all(b"%subscription-changed s1 $2 - - - : \n"),
            vec![SubscriptionChanged {
                name: "s1".into(),
                value: String::new()
            }]
        );
        assert_eq!(
            parse_all(b"%subscription-changed $0 @0 0 %0 : v\n"),
            vec![note("%subscription-changed $0 @0 0 %0 : v")]
        );
        assert_eq!(
            parse_all(b"%subscription-changed x\n"),
            vec![note("%subscription-changed x")]
        );
        for line in [
            "%window-add @1",
            "%session-changed $0 name",
            "%continue %0",
            "%end 1 2 1",
            "%begin x y z",
            "hello",
            "",
            "\r",
        ] {
            assert_eq!(parse_all(format!("{line}\n").as_bytes()), vec![note(line)]);
        }
        assert_eq!(parse_all(b"\xff%x\n"), vec![note("\u{fffd}%x")]);
    }

    #[test]
    fn incomplete_line_waits_for_newline() {
        let mut p = ControlParser::new();
        assert_eq!(p.feed(b"%output %0 a\\03"), vec![]);
        assert_eq!(p.feed(b"3"), vec![]);
        assert_eq!(
            p.feed(b"\n%ex"),
            vec![Output {
                pane_id: "%0".into(),
                data: b"a\x1b".to_vec()
            }]
        );
        assert_eq!(p.feed(b"it\n"), vec![Exit { reason: None }]);
    }

    fn sample_stream() -> Vec<u8> {
        let mut s =
            b"%begin 1795319441 264 0\n%end 1795319441 264 0\n%session-changed $0 t1\n".to_vec();
        s.extend(output_line(
            "%0",
            "héllo \u{1F600}\x1b[0m\\\r\n\x00".as_bytes(),
        ));
        s.extend(output_line("%0", b"\xff\xfe\x80"));
        s.extend(b"%begin 1795319442 272 1\n%pause %0\n%output %0 x\n%end 1795319442 272 1\n");
        s.extend(b"%extended-output %1 12 : \\134\xe2\x82\xac\\012\n");
        s.extend(b"%begin 1795319443 276 1\nparse error: syntax error\n%error 1795319443 276 1\n");
        s.extend(b"%subscription-changed sub $0 @0 0 %0 : 80x24\n");
        s.extend(b"%pause %1\n%exit server exited\n");
        s
    }

    #[test]
    fn every_split_point_gives_the_same_messages() {
        let stream = sample_stream();
        let whole = parse_all(&stream);
        assert_eq!(whole.len(), 10);
        for i in 0..=stream.len() {
            let mut p = ControlParser::new();
            let mut msgs = p.feed(&stream[..i]);
            msgs.extend(p.feed(&stream[i..]));
            assert_eq!(msgs, whole, "split at {i}");
        }
        let mut p = ControlParser::new();
        let bytewise: Vec<_> = stream.iter().flat_map(|b| p.feed(&[*b])).collect();
        assert_eq!(bytewise, whole);
    }

    /// xorshift64: deterministic randomness without dependencies.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn random_input_never_panics_and_chunking_does_not_matter() {
        const PIECES: &[&[u8]] = &[
            b"%begin 1 2 1\n",
            b"%end 1 2 1\n",
            b"%error 1 2 1\n",
            b"%begin 9 99 0\n",
            b"%end 9 99 0\n",
            b"%output %0 ",
            b"%extended-output %1 3 : ",
            b"%exit",
            b"%pause %",
            b"%subscription-changed a ",
            b" : ",
            b"\\",
            b"\\0",
            b"\\377",
            b"\\777",
            b"\n",
            b"\r\n",
            b"%",
            b" ",
            b"\xff\xc3",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..500 {
            let mut stream = Vec::new();
            for _ in 0..rng.below(60) {
                if rng.below(3) == 0 {
                    stream.push(rng.next() as u8);
                } else {
                    stream.extend_from_slice(PIECES[rng.below(PIECES.len())]);
                }
            }
            let whole = parse_all(&stream);
            for _ in 0..4 {
                let mut p = ControlParser::new();
                let mut msgs = Vec::new();
                let mut rest = stream.as_slice();
                while !rest.is_empty() {
                    let (chunk, tail) = rest.split_at(1 + rng.below(rest.len().min(16)));
                    msgs.extend(p.feed(chunk));
                    rest = tail;
                }
                assert_eq!(msgs, whole, "stream {:?}", String::from_utf8_lossy(&stream));
            }
        }
    }
}
