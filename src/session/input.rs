//! Turning API input (lines, named keys) into the exact bytes a terminal receives. Pure.
//!
//! Everything here is a plain function of its input: no I/O, no global state, and no
//! panics on any input (checked by a randomized test at the bottom of this file).

use std::fmt;

const ESC: u8 = 0x1b;

// ---------------------------------------------------------------------------
// Escapes and lines
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------

/// A key name that [`key_bytes`] / [`keys_bytes`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// Zero-based position in the list of keys (always 0 for [`key_bytes`]).
    pub index: usize,
    /// The name exactly as given.
    pub name: String,
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown key '{}' at position {}; use names like Enter, Escape, Up, C-c, F5 or a single character",
            self.name.escape_debug(),
            self.index
        )
    }
}

impl std::error::Error for UnknownKey {}

/// Named keys (matched case-insensitively) and their xterm bytes, normal cursor mode.
const NAMED_KEYS: &[(&[&str], &[u8])] = &[
    (&["Enter", "Return", "CR"], b"\r"),
    (&["Tab"], b"\t"),
    (&["BTab", "S-Tab"], b"\x1b[Z"),
    (&["Escape", "Esc"], b"\x1b"),
    (&["Space"], b" "),
    (&["BSpace", "Backspace"], b"\x7f"),
    (&["Up"], b"\x1b[A"),
    (&["Down"], b"\x1b[B"),
    (&["Right"], b"\x1b[C"),
    (&["Left"], b"\x1b[D"),
    (&["Home"], b"\x1b[H"),
    (&["End"], b"\x1b[F"),
    (&["PageUp", "PgUp", "PPage"], b"\x1b[5~"),
    (&["PageDown", "PgDn", "NPage"], b"\x1b[6~"),
    (&["Insert", "IC"], b"\x1b[2~"),
    (&["Delete", "DC"], b"\x1b[3~"),
    (&["F1"], b"\x1bOP"),
    (&["F2"], b"\x1bOQ"),
    (&["F3"], b"\x1bOR"),
    (&["F4"], b"\x1bOS"),
    (&["F5"], b"\x1b[15~"),
    (&["F6"], b"\x1b[17~"),
    (&["F7"], b"\x1b[18~"),
    (&["F8"], b"\x1b[19~"),
    (&["F9"], b"\x1b[20~"),
    (&["F10"], b"\x1b[21~"),
    (&["F11"], b"\x1b[23~"),
    (&["F12"], b"\x1b[24~"),
];

const CTRL_PREFIXES: &[&str] = &["Ctrl-", "Ctrl+", "C-"];
const META_PREFIXES: &[&str] = &["Alt-", "Alt+", "Meta-", "M-"];

/// The bytes for a named key, in xterm encoding (normal cursor mode).
///
/// Accepts tmux's key names and common aliases, case-insensitively for the named keys (see
/// `NAMED_KEYS`); control keys `C-a`..`C-z`, `C-@ C-[ C-\ C-] C-^ C-_ C-?` and `C-Space`, also
/// spelled `^C`, `Ctrl-C` or `Ctrl+C` (letters case-insensitive); `M-<key>` / `Alt-<key>` (ESC
/// then the key's bytes; combinable, e.g. `M-C-a`); and any single Unicode character as its
/// UTF-8 bytes.
pub fn key_bytes(name: &str) -> Result<Vec<u8>, UnknownKey> {
    parse_key(name).ok_or_else(|| UnknownKey {
        index: 0,
        name: name.to_string(),
    })
}

/// Several keys concatenated; the error names the first unknown key and its index.
pub fn keys_bytes(names: &[String]) -> Result<Vec<u8>, UnknownKey> {
    let mut out = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let bytes = parse_key(name).ok_or_else(|| UnknownKey {
            index,
            name: name.clone(),
        })?;
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

fn parse_key(name: &str) -> Option<Vec<u8>> {
    let (mut ctrl, mut meta) = (false, false);
    let mut rest = name;
    // Peel modifier prefixes until a single character or a named key remains.
    while single_char(rest).is_none() && named_key(rest).is_none() {
        if let Some(r) = strip_prefix_ci(rest, CTRL_PREFIXES) {
            ctrl = true;
            rest = r;
        } else if let Some(r) = strip_prefix_ci(rest, META_PREFIXES) {
            meta = true;
            rest = r;
        } else if let Some(r) = rest.strip_prefix('^').filter(|r| single_char(r).is_some()) {
            ctrl = true;
            rest = r;
        } else {
            break;
        }
    }
    let mut out = if meta { vec![ESC] } else { Vec::new() };
    if ctrl {
        out.push(control_byte(rest)?);
    } else if let Some(c) = single_char(rest) {
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    } else {
        out.extend_from_slice(named_key(rest)?);
    }
    Some(out)
}

fn named_key(name: &str) -> Option<&'static [u8]> {
    NAMED_KEYS
        .iter()
        .find(|(names, _)| names.iter().any(|n| n.eq_ignore_ascii_case(name)))
        .map(|&(_, bytes)| bytes)
}

/// The control byte for `C-<key>`.
fn control_byte(key: &str) -> Option<u8> {
    if key.eq_ignore_ascii_case("Space") {
        return Some(0);
    }
    match single_char(key)?.to_ascii_lowercase() {
        c @ 'a'..='z' => Some(c as u8 - b'a' + 1),
        '@' | ' ' => Some(0),
        '[' => Some(0x1b),
        '\\' => Some(0x1c),
        ']' => Some(0x1d),
        '^' => Some(0x1e),
        '_' => Some(0x1f),
        '?' => Some(0x7f),
        _ => None,
    }
}

fn single_char(s: &str) -> Option<char> {
    let mut chars = s.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

fn strip_prefix_ci<'a>(s: &'a str, prefixes: &[&str]) -> Option<&'a str> {
    prefixes.iter().find_map(|p| {
        let head = s.get(..p.len())?;
        head.eq_ignore_ascii_case(p)
            .then(|| s.get(p.len()..))
            .flatten()
    })
}

// ---------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------

/// The signals the API accepts and what each does to a terminal session, following the ConPTY
/// design: SIGINT writes Ctrl-C (0x03), SIGQUIT writes Ctrl-\ (0x1c); SIGTERM, SIGKILL and
/// SIGHUP terminate the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalAction {
    /// Write these bytes to the terminal, as if typed.
    Write(&'static [u8]),
    /// Terminate the session's process with this signal.
    Terminate(TermSignal),
}

/// How to terminate a session's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermSignal {
    Term,
    Kill,
    Hup,
}

/// Accepts "SIGINT", "INT", "sigint" etc. (surrounding whitespace ignored); `Err` for anything
/// else, with a message listing the accepted names.
pub fn signal_action(name: &str) -> Result<SignalAction, String> {
    let upper = name.trim().to_ascii_uppercase();
    let short = upper.strip_prefix("SIG").unwrap_or(&upper);
    match short {
        "INT" => Ok(SignalAction::Write(b"\x03")),
        "QUIT" => Ok(SignalAction::Write(b"\x1c")),
        "TERM" => Ok(SignalAction::Terminate(TermSignal::Term)),
        "KILL" => Ok(SignalAction::Terminate(TermSignal::Kill)),
        "HUP" => Ok(SignalAction::Terminate(TermSignal::Hup)),
        _ => Err(format!(
            "unknown signal '{}'; accepted: SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGHUP",
            name.escape_debug()
        )),
    }
}

// ---------------------------------------------------------------------------
// Plain text
// ---------------------------------------------------------------------------

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

    // ----- decode_escapes ------------------------------------------------------------------

    #[test]
    fn decode_escapes_table() {
        let cases: &[(&str, &[u8])] = &[
            ("", b""),
            ("plain text", b"plain text"),
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
            (r"\U", b"\\U"),
            (r"\q", b"\\q"),
            (r"\E", b"\\E"),
            (r"\N", b"\\N"),
            (r"\X41", b"\\X41"),
            ("\\", b"\\"),
            ("end\\", b"end\\"),
            (r"\x4", b"\\x4"),
            (r"\x", b"\\x"),
            (r"\xZZ", b"\\xZZ"),
            (r"\x4g", b"\\x4g"),
            (r"\x414", b"A4"),
            // Mixed escapes in one string.
            (r"ls\t-la\r\n\e\x07\\done", b"ls\t-la\r\n\x1b\x07\\done"),
            // Whitespace is preserved exactly.
            ("  a \t b\n", b"  a \t b\n"),
            // Non-ASCII passes through.
            (r"grüß\n🚀", "grüß\n🚀".as_bytes()),
            (r"🚀\x21", "🚀!".as_bytes()),
        ];
        for (input, want) in cases {
            assert_eq!(decode_escapes(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn decode_escapes_windows_paths() {
        let cases: &[(&str, &[u8])] = &[
            (r"C:\Users\new\tmp", br"C:\Users\new\tmp"),
            (r"c:\temp\x41", br"c:\temp\x41"),
            (r"C:\Users\", br"C:\Users\"),
            (r"D:/dir\n", br"D:/dir\n"),
            (r"\\server\share\x41", br"\\server\share\x41"),
            (r"\\?\C:\new", br"\\?\C:\new"),
            (r#""C:\new\tmp""#, br#""C:\new\tmp""#),
            (r"'C:\new'", br"'C:\new'"),
            (r"cd C:\new\tmp", br"cd C:\new\tmp"),
            // A path token followed by a normal token: only the latter is decoded.
            (r"C:\x y\tz", b"C:\\x y\tz"),
            (
                r"type C:\a\b.txt\tx more\n",
                b"type C:\\a\\b.txt\\tx more\n",
            ),
            (r"a\tb D:\tmp c\e", b"a\tb D:\\tmp c\x1b"),
            // Not paths: no drive letter / drive without separator / not at token start.
            (r"1:\n", b"1:\n"),
            (r"C:\n", br"C:\n"),
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

    // ----- line_bytes ----------------------------------------------------------------------

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

    // ----- keys ----------------------------------------------------------------------------

    #[test]
    fn named_keys_and_aliases() {
        let cases: &[(&[&str], &[u8])] = &[
            (&["Enter", "Return", "CR", "enter", "ENTER", "cr"], b"\r"),
            (&["Tab", "tab", "TAB"], b"\t"),
            (&["BTab", "S-Tab", "btab", "s-tab"], b"\x1b[Z"),
            (&["Escape", "Esc", "ESC", "escape"], b"\x1b"),
            (&["Space", "space", " "], b" "),
            (&["BSpace", "Backspace", "bspace", "BACKSPACE"], b"\x7f"),
            (&["Up", "up", "UP"], b"\x1b[A"),
            (&["Down", "down"], b"\x1b[B"),
            (&["Right", "right"], b"\x1b[C"),
            (&["Left", "left"], b"\x1b[D"),
            (&["Home", "home"], b"\x1b[H"),
            (&["End", "end"], b"\x1b[F"),
            (&["PageUp", "PgUp", "PPage", "pageup", "pgup"], b"\x1b[5~"),
            (
                &["PageDown", "PgDn", "NPage", "pagedown", "npage"],
                b"\x1b[6~",
            ),
            (&["Insert", "IC", "ic", "insert"], b"\x1b[2~"),
            (&["Delete", "DC", "dc", "delete"], b"\x1b[3~"),
            (&["F1", "f1"], b"\x1bOP"),
            (&["F2"], b"\x1bOQ"),
            (&["F3"], b"\x1bOR"),
            (&["F4"], b"\x1bOS"),
            (&["F5", "f5"], b"\x1b[15~"),
            (&["F6"], b"\x1b[17~"),
            (&["F7"], b"\x1b[18~"),
            (&["F8"], b"\x1b[19~"),
            (&["F9"], b"\x1b[20~"),
            (&["F10"], b"\x1b[21~"),
            (&["F11"], b"\x1b[23~"),
            (&["F12", "f12"], b"\x1b[24~"),
        ];
        for (names, want) in cases {
            for name in *names {
                assert_eq!(key_bytes(name).as_deref(), Ok(*want), "key {name:?}");
            }
        }
    }

    #[test]
    fn control_keys() {
        for (i, c) in ('a'..='z').enumerate() {
            let want = vec![i as u8 + 1];
            let upper = c.to_ascii_uppercase();
            for name in [
                format!("C-{c}"),
                format!("C-{upper}"),
                format!("c-{c}"),
                format!("^{c}"),
                format!("^{upper}"),
                format!("Ctrl-{upper}"),
                format!("ctrl+{c}"),
                format!("CTRL+{upper}"),
            ] {
                assert_eq!(key_bytes(&name), Ok(want.clone()), "key {name:?}");
            }
        }
        let cases: &[(&str, u8)] = &[
            ("C-@", 0x00),
            ("C-Space", 0x00),
            ("C-space", 0x00),
            ("C- ", 0x00),
            ("C-[", 0x1b),
            (r"C-\", 0x1c),
            ("C-]", 0x1d),
            ("C-^", 0x1e),
            ("C-_", 0x1f),
            ("C-?", 0x7f),
            ("^@", 0x00),
            ("^[", 0x1b),
            (r"^\", 0x1c),
            ("^]", 0x1d),
            ("^^", 0x1e),
            ("^_", 0x1f),
            ("^?", 0x7f),
            ("Ctrl-[", 0x1b),
            (r"Ctrl+\", 0x1c),
        ];
        for (name, want) in cases {
            assert_eq!(key_bytes(name), Ok(vec![*want]), "key {name:?}");
        }
    }

    #[test]
    fn meta_keys_and_characters() {
        let cases: &[(&str, &[u8])] = &[
            ("M-a", b"\x1ba"),
            ("M-A", b"\x1bA"),
            ("m-x", b"\x1bx"),
            ("Alt-x", b"\x1bx"),
            ("alt+x", b"\x1bx"),
            ("Meta-x", b"\x1bx"),
            ("M-Enter", b"\x1b\r"),
            ("M-Up", b"\x1b\x1b[A"),
            ("Alt-F5", b"\x1b\x1b[15~"),
            ("M--", b"\x1b-"),
            ("M-C-a", b"\x1b\x01"),
            ("C-M-a", b"\x1b\x01"),
            ("Ctrl-Alt-c", b"\x1b\x03"),
            ("M-ä", "\x1bä".as_bytes()),
            ("y", b"y"),
            ("Y", b"Y"),
            ("C", b"C"),
            ("M", b"M"),
            ("^", b"^"),
            ("-", b"-"),
            ("\\", b"\\"),
            ("ä", "ä".as_bytes()),
            ("€", "€".as_bytes()),
            ("🚀", "🚀".as_bytes()),
            ("\u{7}", b"\x07"),
        ];
        for (name, want) in cases {
            assert_eq!(key_bytes(name).as_deref(), Ok(*want), "key {name:?}");
        }
    }

    #[test]
    fn unknown_keys() {
        let cases = [
            "", "Foo", "Enterr", "F13", "F0", "C-", "M-", "Ctrl-", "C-1", "C-ä", "C-Enter", "C-Up",
            "^ab", "^Up", "ab", "e\u{301}", "S-a", "X-a", "Up ", " Up",
        ];
        for name in cases {
            let err = key_bytes(name).expect_err(name);
            assert_eq!(
                err,
                UnknownKey {
                    index: 0,
                    name: name.to_string()
                }
            );
        }
    }

    #[test]
    fn keys_bytes_concatenates_and_reports_first_unknown() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(keys_bytes(&[]), Ok(vec![]));
        assert_eq!(
            keys_bytes(&names(&["C-c", "y", "Enter", "Up", "ä"])),
            Ok(b"\x03y\r\x1b[A\xc3\xa4".to_vec())
        );
        let err = keys_bytes(&names(&["Enter", "y", "Foo", "Bar"])).unwrap_err();
        assert_eq!(
            err,
            UnknownKey {
                index: 2,
                name: "Foo".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "unknown key 'Foo' at position 2; use names like Enter, Escape, Up, C-c, F5 or a single character"
        );
        let err = keys_bytes(&names(&[""])).unwrap_err();
        assert_eq!((err.index, err.name.as_str()), (0, ""));
        // Control characters in the name are escaped in the message.
        let err = key_bytes("a\nb").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("unknown key 'a\\nb' at position 0;"));
        let boxed: Box<dyn std::error::Error> = Box::new(err);
        assert!(boxed.to_string().contains("single character"));
    }

    // ----- signals -------------------------------------------------------------------------

    #[test]
    fn signals() {
        use SignalAction::{Terminate, Write};
        let cases: &[(&str, SignalAction)] = &[
            ("SIGINT", Write(b"\x03")),
            ("INT", Write(b"\x03")),
            ("sigint", Write(b"\x03")),
            ("int", Write(b"\x03")),
            ("SigInt", Write(b"\x03")),
            (" SIGINT\n", Write(b"\x03")),
            ("SIGQUIT", Write(b"\x1c")),
            ("quit", Write(b"\x1c")),
            ("SIGTERM", Terminate(TermSignal::Term)),
            ("term", Terminate(TermSignal::Term)),
            ("SIGKILL", Terminate(TermSignal::Kill)),
            ("Kill", Terminate(TermSignal::Kill)),
            ("SIGHUP", Terminate(TermSignal::Hup)),
            ("hup", Terminate(TermSignal::Hup)),
        ];
        for (name, want) in cases {
            assert_eq!(signal_action(name), Ok(*want), "signal {name:?}");
        }
        for bad in [
            "",
            "SIG",
            "SIGSTOP",
            "9",
            "SIGSIGINT",
            "INTX",
            "SIG INT",
            "ſigint",
        ] {
            let err = signal_action(bad).expect_err(bad);
            assert!(
                err.contains("SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGHUP"),
                "{err}"
            );
        }
        assert_eq!(
            signal_action("STOP"),
            Err(
                "unknown signal 'STOP'; accepted: SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGHUP".into()
            )
        );
    }

    // ----- plain_text ----------------------------------------------------------------------

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

    // ----- robustness ----------------------------------------------------------------------

    /// xorshift64*, so the test is deterministic and needs no dependencies.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn random_input_never_panics() {
        const ALPHABET: &[&str] = &[
            "\\", "\\", "\\", "x", "X", "0", "4", "f", "G", "n", "r", "t", "e", "C", "c", ":", "/",
            " ", "\t", "\n", "\r", "\x1b", "[", "]", "^", "-", "+", "?", "@", "M", "a", "ä", "🚀",
            "\"", "'", "S", "s", "$", ".", "\u{0}", "\u{7}", "Up", "Ctrl", "Alt", "F1",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let len = rng.below(12);
            let s: String = (0..len)
                .map(|_| ALPHABET[rng.below(ALPHABET.len())])
                .collect();

            let decoded = decode_escapes(&s);
            assert!(decoded.len() <= s.len(), "{s:?}");
            if !s.contains('\\') {
                assert_eq!(decoded, s.as_bytes());
            }

            let line = line_bytes(&s);
            assert_eq!(line.last(), Some(&b'\r'), "{s:?}");
            let body = &line[..line.len() - 1];
            assert!(!body.contains(&b'\r') && !body.contains(&b'\n'), "{s:?}");

            match key_bytes(&s) {
                Ok(bytes) => assert!(!bytes.is_empty(), "{s:?}"),
                Err(e) => assert_eq!((e.index, e.name.as_str()), (0, s.as_str())),
            }
            let _ = keys_bytes(&[s.clone(), s.clone()]);
            let _ = signal_action(&s);

            let plain = plain_text(s.as_bytes());
            assert!(!plain.contains('\x1b') && !plain.contains('\r'), "{s:?}");
        }
        // Arbitrary bytes, weighted towards the interesting ones.
        const BYTES: &[u8] = b"\x1b\x1b[]P\\\x07\r\n\t;0m?\x00\x7f\x80\xc3\xa4\xff a";
        for _ in 0..20_000 {
            let len = rng.below(24);
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.below(4) == 0 {
                        rng.next() as u8
                    } else {
                        BYTES[rng.below(BYTES.len())]
                    }
                })
                .collect();
            let plain = plain_text(&bytes);
            assert!(
                !plain
                    .chars()
                    .any(|c| c.is_ascii_control() && c != '\n' && c != '\t'),
                "{bytes:?} -> {plain:?}"
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
