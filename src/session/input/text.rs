//! Terminal output as plain text (escapes stripped, progress-bar overwrites resolved), and
//! where a UTF-8 character is cut at the end of a chunk. Pure.

/// Strips terminal escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ESC \`, two-byte
/// ESC sequences, and other C0 controls except `\n` and `\t`) and turns `\r\n` into `\n`; a lone
/// `\r` (progress-bar overwrite) keeps only the text after the last `\r` on that line. If
/// nothing follows the last `\r` before the line ends, the text before it stays (that is what
/// the terminal still shows). DCS/SOS/PM/APC strings (`ESC P`, `ESC X`, `ESC ^`, `ESC _`) are
/// dropped like OSC. Input may be arbitrary bytes; invalid UTF-8 is replaced lossily. Pure.
pub fn plain_text(bytes: &[u8]) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut line_start = 0; // index in `out` where the current line begins
    let mut pending_cr = false; // a lone CR was seen; the next text overwrites the line
    let text = crate::escape::pieces(bytes).filter(|p| p.kind == crate::escape::Kind::Text);
    for piece in text {
        let mut i = 0;
        while let Some(&b) = piece.bytes.get(i) {
            i += 1;
            match b {
                b'\r' if piece.bytes.get(i) == Some(&b'\n') => {}
                b'\r' => pending_cr = true,
                b'\n' => {
                    out.push(b'\n');
                    line_start = out.len();
                    pending_cr = false;
                }
                b'\t' | 0x20..=0x7e | 0x80..=0xff => {
                    if pending_cr {
                        out.truncate(line_start);
                        pending_cr = false;
                    }
                    out.push(b);
                }
                _ => {} // other C0 controls and DEL
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Length of `bytes` without a trailing, incomplete UTF-8 sequence.
pub fn complete_utf8_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(3) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let needed = match b {
            // Never the start of a character: an invalid byte, complete as it is.
            0xF8.. => 1,
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if back < needed { n - back } else { n };
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_table() {
        let cases: &[(&[u8], &str)] = &[
            (b"", ""),
            (b"hello\n", "hello\n"),
            (b"a\tb", "a\tb"),
            // Colours and other CSI sequences.
            (b"\x1b[31mred\x1b[0m plain", "red plain"),
            (b"\x1b[1;38;5;208mbold\x1b[m", "bold"),
            (b"\x1b[?2004hprompt$ \x1b[?2004l", "prompt$ "),
            (b"\x1b[2J\x1b[H\x1b[Ktop", "top"),
            (b"\x1b[", ""),
            (b"\x1b[12", ""),
            // OSC title, terminated by BEL or ST; unterminated drops the rest.
            (b"\x1b]0;my title\x07text", "text"),
            (b"\x1b]2;title\x1b\\text", "text"),
            (b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
            (b"a\x1b]0;never ends", "a"),
            // DCS / APC strings.
            (b"\x1bPq#0;2;0;0;0\x1b\\after", "after"),
            (b"\x1b_Gf=24;AAAA\x1b\\after", "after"),
            // Two- and three-byte ESC sequences.
            (b"\x1b7saved\x1b8", "saved"),
            (b"\x1b=\x1b>x", "x"),
            (b"\x1b(Bascii", "ascii"),
            (b"\x1bMup", "up"),
            (b"end\x1b", "end"),
            // C0 controls are dropped, except \n and \t; DEL too.
            (b"a\x07b\x08c\x00d\x7fe", "abcde"),
            // CRLF becomes LF.
            (b"one\r\ntwo\r\n", "one\ntwo\n"),
            // Progress bar overwrites.
            (b"10%\r50%\r100%\n", "100%\n"),
            (b"first\nload 1\rload 2\rdone\nlast", "first\ndone\nlast"),
            (b"spin |\rspin /\r", "spin /"),
            (b"abc\r", "abc"),
            (b"abc\r\r\n", "abc\n"),
            (b"\r\x1b[Kfresh", "fresh"),
            (b"old\r\x1b[32mnew\x1b[0m\r\n", "new\n"),
            (
                b"\x1b[2K\r[====>   ] 50%\r[========] 100%\r\n",
                "[========] 100%\n",
            ),
            // UTF-8 kept, invalid bytes replaced.
            ("grüß 🚀\n".as_bytes(), "grüß 🚀\n"),
            (b"a\xffb", "a\u{FFFD}b"),
            (b"\x1b\xc3\xa4", "ä"),
            (b"\xe2\x82", "\u{FFFD}"),
        ];
        for (input, want) in cases {
            assert_eq!(
                plain_text(input),
                *want,
                "input {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn a_character_cut_at_the_end_waits() {
        let s = "aé€😀".as_bytes();
        assert_eq!(complete_utf8_len(s), s.len());
        for cut in 1..4 {
            assert_eq!(complete_utf8_len(&s[..s.len() - cut]), s.len() - 4);
        }
        assert_eq!(complete_utf8_len(&s[..2]), 1);
        assert_eq!(complete_utf8_len(b""), 0);
        assert_eq!(complete_utf8_len(b"\xff\xfe"), 2);
    }
}
