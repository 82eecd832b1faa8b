//! Command lines for a control client's stdin: input as `send-keys -H`, and the names that
//! may appear in a command line.

/// Bytes of payload per `send-keys -H` command. tmux 3.3a's command parser fails
/// with "yacc stack overflow" on a line of about 10 000 words (5 000 worked, 9 990
/// failed), so a payload must be split; 256 bytes make lines of at most ~850 bytes,
/// below `PIPE_BUF` (4096), so each line is written atomically, and cost one small
/// reply block per 256 bytes.
pub const SEND_CHUNK: usize = 256;

/// Longest name [`is_safe_name`] accepts.
pub const MAX_NAME_LEN: usize = 64;

/// `send-keys -t <target> -H <hex> <hex> ...` lines, chunked to [`SEND_CHUNK`] bytes
/// of payload per command, that deliver exactly `bytes` to the pane with no key-name
/// interpretation (tmux 3.3a injects each `-H` byte as a literal key, written to the
/// pane as that one byte; 0x00..=0xff all verified). Write each line followed by
/// `\n`; each yields one reply block. Returns no lines for empty `bytes`, and none
/// if `target` fails [`is_safe_name`] (so nothing can be injected into the command
/// line). tmux caveat: if the pane is in a mode (copy-mode, view-mode) the keys go
/// to the mode, not to the program.
pub fn send_bytes_commands(target: &str, bytes: &[u8]) -> Vec<String> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    if !is_safe_name(target) {
        return Vec::new();
    }
    bytes
        .chunks(SEND_CHUNK)
        .map(|chunk| {
            let mut line = String::with_capacity(20 + target.len() + 3 * chunk.len());
            line.push_str("send-keys -t ");
            line.push_str(target);
            line.push_str(" -H");
            for &b in chunk {
                line.push(' ');
                line.push(char::from(HEX[usize::from(b >> 4)]));
                line.push(char::from(HEX[usize::from(b & 0xf)]));
            }
            line
        })
        .collect()
}

/// Whether a tmux target/session name is safe to put on a control-mode command line
/// unquoted: 1..=64 chars of ASCII letters, digits, `_`, `-`, `.`, optionally after a
/// leading `=` (exact match); or an id: `%`, `$` or `@` followed by digits only.
/// The id rule is stricter than "any name after the sigil" on purpose: tmux's parser
/// treats a word starting with `%` as a `%if`-style directive unless it is all digits
/// (`%0:` is a syntax error), and expands `$name` as an environment variable
/// (`$1` stays literal).
pub fn is_safe_name(name: &str) -> bool {
    fn plain(b: &u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
    }
    if name.len() > MAX_NAME_LEN {
        return false;
    }
    match name.as_bytes().split_first() {
        Some((b'%' | b'$' | b'@', id)) => !id.is_empty() && id.iter().all(u8::is_ascii_digit),
        Some((b'=', rest)) => !rest.is_empty() && rest.iter().all(plain),
        Some(_) => name.as_bytes().iter().all(plain),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_bytes_commands_chunks_and_formats() {
        assert!(send_bytes_commands("%0", b"").is_empty());
        assert_eq!(
            send_bytes_commands("%0", b"\x00\x03\x1b\xff"),
            vec!["send-keys -t %0 -H 00 03 1b ff"]
        );
        let bytes: Vec<u8> = (0..=255).cycle().take(2 * SEND_CHUNK + 1).collect();
        let lines = send_bytes_commands("=agent-1", &bytes);
        assert_eq!(lines.len(), 3);
        let mut decoded = Vec::new();
        for line in &lines {
            assert!(line.len() <= 20 + MAX_NAME_LEN + 3 * SEND_CHUNK && !line.contains('\n'));
            let hex = line
                .strip_prefix("send-keys -t =agent-1 -H ")
                .expect("prefix");
            decoded.extend(
                hex.split(' ')
                    .map(|h| u8::from_str_radix(h, 16).expect("hex")),
            );
        }
        assert_eq!(decoded, bytes);
        assert!(send_bytes_commands("a;kill-server", b"x").is_empty());
        assert!(send_bytes_commands("", b"x").is_empty());
    }

    #[test]
    fn safe_names() {
        for ok in [
            "agent",
            "agent-1.x_Y",
            "%0",
            "%123",
            "$1",
            "@7",
            "=agent",
            "-x",
            &"a".repeat(64),
        ] {
            assert!(is_safe_name(ok), "{ok}");
        }
        for bad in [
            "",
            "%",
            "$",
            "@",
            "=",
            "%a",
            "%0:",
            "%0.1",
            "$HOME",
            "@x",
            "==a",
            "a:b",
            "a b",
            "a;b",
            "a\nb",
            "'a'",
            "\"a\"",
            "#{x}",
            "~a",
            "a$b",
            "é",
            &"a".repeat(65),
        ] {
            assert!(!is_safe_name(bad), "{bad:?}");
        }
    }
}
