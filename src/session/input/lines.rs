//! Lines as typed: literal escapes (`\r`, `\e`, `\xNN`...) decoded, Windows paths left alone,
//! and the bytes of a line sent with Enter. Pure.

use super::ESC;

/// Decodes literal escape sequences typed as text: `\r`, `\n`, `\t`, `\e` (ESC), `\xNN` (two
/// hex digits, any case) and `\\` (one backslash).
///
/// Windows paths are left alone: inside a whitespace-delimited token that looks like a Windows
/// path (starts with a drive `X:\` or `X:/`, or a UNC `\\server\share`, optionally after a
/// leading quote), no backslash is treated as an escape, so `C:\Users\new\tmp` stays
/// byte-for-byte. An unknown escape (`\U`, `\q`) and a trailing lone backslash stay literal.
/// `\x` not followed by two hex digits stays literal.
pub fn decode_escapes(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        // Whitespace run, copied as is.
        let ws_end = rest
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(rest.len());
        let (space, tail) = rest.split_at(ws_end);
        out.extend_from_slice(space.as_bytes());
        // One token up to the next whitespace.
        let tok_end = tail.find(char::is_whitespace).unwrap_or(tail.len());
        let (token, tail) = tail.split_at(tok_end);
        if looks_like_windows_path(token) {
            out.extend_from_slice(token.as_bytes());
        } else {
            decode_token(token.as_bytes(), &mut out);
        }
        rest = tail;
    }
    out
}

/// The bytes for one submitted line: [`decode_escapes`], then remove every CR and LF, then
/// append a single CR (Enter). One line per call, so an embedded newline can never smuggle in
/// a second command.
pub fn line_bytes(text: &str) -> Vec<u8> {
    let mut out = decode_escapes(text);
    out.retain(|&b| b != b'\r' && b != b'\n');
    out.push(b'\r');
    out
}

/// `X:\…`, `X:/…` or `\\server\share…`, possibly after an opening quote.
///
/// A UNC path needs a server name followed by a single backslash, so that `\\n` (an escaped
/// backslash followed by `n`) is still decoded as an escape.
fn looks_like_windows_path(token: &str) -> bool {
    let t = token.trim_start_matches(['"', '\'']).as_bytes();
    match t {
        [drive, b':', b'\\' | b'/', ..] => drive.is_ascii_alphabetic(),
        [b'\\', b'\\', rest @ ..] => {
            let name_len = rest
                .iter()
                .take_while(|&&b| b.is_ascii_alphanumeric() || b"-_.$?".contains(&b))
                .count();
            name_len > 0
                && rest.get(name_len) == Some(&b'\\')
                && rest.get(name_len + 1) != Some(&b'\\')
        }
        _ => false,
    }
}

fn decode_token(token: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while let Some(&b) = token.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let after = token.get(i + 1..).unwrap_or_default();
        match escape_at(after) {
            Some((byte, used)) => {
                out.push(byte);
                i += 1 + used;
            }
            None => {
                // Unknown escape or lone backslash: keep the backslash, go on with the next
                // character as ordinary text.
                out.push(b'\\');
                i += 1;
            }
        }
    }
}

/// The byte an escape stands for and how many bytes after the backslash it used.
fn escape_at(after: &[u8]) -> Option<(u8, usize)> {
    match after.first()? {
        b'r' => Some((b'\r', 1)),
        b'n' => Some((b'\n', 1)),
        b't' => Some((b'\t', 1)),
        b'e' => Some((ESC, 1)),
        b'\\' => Some((b'\\', 1)),
        b'x' => {
            let hi = hex_digit(*after.get(1)?)?;
            let lo = hex_digit(*after.get(2)?)?;
            Some(((hi << 4) | lo, 3))
        }
        _ => None,
    }
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails unless [`decode_escapes`] leaves each of `inputs` as typed, byte for byte.
    fn assert_left_alone(inputs: &[&str]) {
        for input in inputs {
            assert_eq!(
                decode_escapes(input),
                input.as_bytes(),
                "input {input:?} gave {:?}",
                String::from_utf8_lossy(&decode_escapes(input))
            );
        }
    }

    #[test]
    fn decode_escapes_table() {
        let cases: &[(&str, &[u8])] = &[
            (r"a\rb", b"a\rb"),
            (r"a\nb", b"a\nb"),
            (r"a\tb", b"a\tb"),
            (r"\e[1m", b"\x1b[1m"),
            (r"\x41\x62", b"Ab"),
            (r"\x1B\x1b\xfF", b"\x1b\x1b\xff"),
            (r"\x00", b"\x00"),
            (r"a\\b", b"a\\b"),
            (r"\\", b"\\"),
            (r"\\\\", b"\\\\"),
            (r"\\n", b"\\n"),
            (r"\\\n", b"\\\n"),
            (r"\x414", b"A4"),
            // Mixed escapes in one string.
            (r"ls\t-la\r\n\e\x07\\done", b"ls\t-la\r\n\x1b\x07\\done"),
            // Non-ASCII passes through.
            (r"grüß\n🚀", "grüß\n🚀".as_bytes()),
            (r"🚀\x21", "🚀!".as_bytes()),
        ];
        for (input, want) in cases {
            assert_eq!(decode_escapes(input), *want, "input {input:?}");
        }
        // Stay as typed: no escape at all (whitespace is preserved exactly), unknown escapes,
        // a trailing lone backslash, and `\x` without two hex digits.
        assert_left_alone(&[
            "",
            "plain text",
            "  a \t b\n",
            r"\U",
            r"\q",
            r"\E",
            r"\N",
            r"\X41",
            "\\",
            "end\\",
            r"\x4",
            r"\x",
            r"\xZZ",
            r"\x4g",
        ]);
    }

    #[test]
    fn decode_escapes_windows_paths() {
        // Path tokens stay as typed (`C:\n` is a drive and a separator: a path).
        assert_left_alone(&[
            r"C:\Users\new\tmp",
            r"c:\temp\x41",
            r"C:\Users\",
            r"D:/dir\n",
            r"\\server\share\x41",
            r"\\?\C:\new",
            r#""C:\new\tmp""#,
            r"'C:\new'",
            r"cd C:\new\tmp",
            r"C:\n",
        ]);
        let cases: &[(&str, &[u8])] = &[
            // A path token followed by a normal token: only the latter is decoded.
            (r"C:\x y\tz", b"C:\\x y\tz"),
            (
                r"type C:\a\b.txt\tx more\n",
                b"type C:\\a\\b.txt\\tx more\n",
            ),
            (r"a\tb D:\tmp c\e", b"a\tb D:\\tmp c\x1b"),
            // Not paths: no drive letter / drive without separator / not at token start.
            (r"1:\n", b"1:\n"),
            (r"C:foo\n", b"C:foo\n"),
            (r"xC:\n", b"xC:\n"),
            // `\\` followed by a non-server text is an escaped backslash.
            (r"\\n\\t", b"\\n\\t"),
            (r"\\\\x", b"\\\\x"),
            (r"\\server", b"\\server"),
        ];
        for (input, want) in cases {
            assert_eq!(
                decode_escapes(input),
                *want,
                "input {input:?} gave {:?}",
                String::from_utf8_lossy(&decode_escapes(input))
            );
        }
    }

    #[test]
    fn line_bytes_table() {
        let cases: &[(&str, &[u8])] = &[
            ("", b"\r"),
            ("ls -la", b"ls -la\r"),
            ("ls\r\n", b"ls\r"),
            (r"ls\r\n", b"ls\r"),
            ("a\nb\rc\r\n", b"abc\r"),
            (r"echo 1\necho 2", b"echo 1echo 2\r"),
            (r"\x0d\x0a", b"\r"),
            ("\r\n\r\n", b"\r"),
            (r"say\thi\e", b"say\thi\x1b\r"),
            (r"dir C:\new", b"dir C:\\new\r"),
            ("🚀", "🚀\r".as_bytes()),
        ];
        for (input, want) in cases {
            assert_eq!(line_bytes(input), *want, "input {input:?}");
        }
    }
}
