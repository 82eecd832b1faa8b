//! The visible text of terminal output: the bytes left when escape sequences (CSI, OSC, DCS
//! and the short `ESC x` forms) are taken out, with a map back to raw byte positions. Secret
//! patterns run on the visible text, so a key printed with colour codes inside it is still seen.

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// Raw output projected to its visible bytes.
#[derive(Debug, Default)]
pub struct Visible {
    /// The visible bytes, in order.
    pub text: Vec<u8>,
    /// `raw_index[i]` is the raw position of `text[i]`.
    pub raw_index: Vec<usize>,
    /// Where an escape sequence cut off by the end of the input begins (raw position), if any.
    pub incomplete_from: Option<usize>,
}

/// Projects `raw` to its visible bytes.
pub fn project(raw: &[u8]) -> Visible {
    let mut v = Visible {
        text: Vec::with_capacity(raw.len()),
        raw_index: Vec::with_capacity(raw.len()),
        incomplete_from: None,
    };
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != ESC {
            v.text.push(raw[i]);
            v.raw_index.push(i);
            i += 1;
            continue;
        }
        match escape_len(&raw[i..]) {
            Some(n) => i += n,
            None => {
                v.incomplete_from = Some(i);
                break;
            }
        }
    }
    v
}

/// The length of the escape sequence at the start of `s` (which starts with ESC), or `None`
/// if `s` ends before the sequence does.
fn escape_len(s: &[u8]) -> Option<usize> {
    let kind = *s.get(1)?;
    match kind {
        // CSI: parameters and intermediates, then a final byte 0x40-0x7e.
        b'[' => s[2..]
            .iter()
            .position(|b| (0x40..=0x7e).contains(b))
            .map(|p| p + 3),
        // OSC, DCS, SOS, PM, APC: a string ended by BEL (OSC) or ST (ESC \).
        b']' | b'P' | b'X' | b'^' | b'_' => {
            let body = &s[2..];
            for (j, &b) in body.iter().enumerate() {
                if b == BEL && kind == b']' {
                    return Some(j + 3);
                }
                if b == ESC {
                    return body.get(j + 1).map(|_| j + 4);
                }
            }
            None
        }
        // ESC, intermediates 0x20-0x2f, then one final byte.
        _ => s[1..]
            .iter()
            .position(|b| !(0x20..=0x2f).contains(b))
            .map(|p| p + 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_removed_and_positions_kept() {
        let table: &[(&[u8], &str, Option<usize>)] = &[
            (b"plain", "plain", None),
            (b"a\x1b[31mb\x1b[0mc", "abc", None),
            (b"a\x1b]0;title\x07b", "ab", None),
            (b"a\x1b]0;title\x1b\\b", "ab", None),
            (b"a\x1b(Bb", "ab", None),
            (b"a\x1b=b", "ab", None),
            (b"ab\x1b[3", "ab", Some(2)),
            (b"ab\x1b", "ab", Some(2)),
            (b"ab\x1b]0;ti", "ab", Some(2)),
        ];
        for (raw, text, incomplete) in table {
            let v = project(raw);
            assert_eq!(v.text, text.as_bytes(), "{raw:?}");
            assert_eq!(v.incomplete_from, *incomplete, "{raw:?}");
            for (i, &r) in v.raw_index.iter().enumerate() {
                assert_eq!(raw[r], v.text[i]);
            }
        }
    }
}
