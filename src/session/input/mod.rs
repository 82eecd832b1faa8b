//! Turning API input (lines, named keys, signals) into the exact bytes a terminal receives,
//! and terminal output back into plain text. Pure.
//!
//! Everything here is a plain function of its input: no I/O, no global state, and no
//! panics on any input (checked by a randomized test at the bottom of this file).

mod lines;
mod text;

pub use crate::term::{
    key_bytes, keys_bytes, signal_action, signal_action_in, SignalAction, Signals, TermSignal,
    UnknownKey,
};
pub use lines::{decode_escapes, line_bytes};
pub use text::{complete_utf8_len, plain_text};

const ESC: u8 = 0x1b;

#[cfg(test)]
mod tests {
    use super::*;

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
}
