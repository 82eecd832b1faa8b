//! Named keys (`Enter`, `Up`, `C-c`, `M-x`, `F5`...) and the bytes a terminal receives for
//! them. Pure.

use std::fmt;

const ESC: u8 = 0x1b;

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

/// A regular expression (the same in ECMA-262, Python and the `regex` crate) matching exactly
/// the names [`key_bytes`] takes: modifiers, then a named key or one character; after a control
/// modifier (`C-`, `Ctrl-`, `Ctrl+`, or `^` right before a character), only a key with a
/// control byte.
pub fn key_name_pattern() -> String {
    let ctrl = alternatives(CTRL_PREFIXES);
    let meta = alternatives(META_PREFIXES);
    let any = format!("(?:{ctrl}|{meta})");
    let names: Vec<&str> = NAMED_KEYS
        .iter()
        .flat_map(|(n, _)| n.iter().copied())
        .collect();
    let named = alternatives(&names);
    let controllable = format!(r"(?:[A-Za-z@ \[\\\]^_?]|{})", any_case("Space"));
    let plain = format!(r"{meta}*(?:{named}|[\s\S])");
    let controlled = format!("{any}*{ctrl}{any}*{controllable}");
    let caret = format!(r"{any}*\^[A-Za-z@ \[\\\]^_?]");
    format!("^(?:{plain}|{controlled}|{caret})$")
}

/// `(?:a|b|...)` of `names`, each matched in any ASCII case.
fn alternatives(names: &[&str]) -> String {
    let names: Vec<String> = names.iter().map(|n| any_case(n)).collect();
    format!("(?:{})", names.join("|"))
}

/// `name` as a pattern matching it in any ASCII case (`Up`: `[Uu][Pp]`). Names hold letters,
/// digits, `-` and `+`.
fn any_case(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' => {
                format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
            }
            '+' => r"\+".to_string(),
            c => c.to_string(),
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

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
        ];
        for (names, want) in cases {
            for name in *names {
                assert_eq!(key_bytes(name).as_deref(), Ok(*want), "key {name:?}");
            }
        }
        // F1 to F12, in either case.
        let function_keys = [
            "\x1bOP", "\x1bOQ", "\x1bOR", "\x1bOS", "\x1b[15~", "\x1b[17~", "\x1b[18~", "\x1b[19~",
            "\x1b[20~", "\x1b[21~", "\x1b[23~", "\x1b[24~",
        ];
        for (n, want) in (1..).zip(function_keys) {
            for name in [format!("F{n}"), format!("f{n}")] {
                assert_eq!(
                    key_bytes(&name).as_deref(),
                    Ok(want.as_bytes()),
                    "key {name:?}"
                );
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
}
