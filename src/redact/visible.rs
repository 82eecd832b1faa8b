//! The visible text of terminal output: the bytes left when escape sequences (CSI, OSC, DCS
//! and the short `ESC x` forms) are taken out, with a map back to raw byte positions. Secret
//! patterns run on the visible text, so a key printed with colour codes inside it is still seen.

use std::borrow::Cow;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// Raw output projected to its visible bytes.
#[derive(Debug)]
pub struct Visible<'a> {
    /// The visible bytes, in order (the raw bytes themselves when there is no escape).
    pub text: Cow<'a, [u8]>,
    /// `raw_index[i]` is the raw position of `text[i]`; `None` when they are the same.
    raw_index: Option<Vec<usize>>,
    /// Where an escape sequence cut off by the end of the input begins (raw position), if any.
    pub incomplete_from: Option<usize>,
}

impl Visible<'_> {
    /// The raw position of visible byte `i`.
    pub fn raw_pos(&self, i: usize) -> usize {
        match &self.raw_index {
            Some(index) => index[i],
            None => i,
        }
    }
}

/// Projects `raw` to its visible bytes.
pub fn project(raw: &[u8]) -> Visible<'_> {
    // Most output has no escape at all: then it is its own projection (no copy, no index).
    if !raw.contains(&ESC) {
        return Visible {
            text: Cow::Borrowed(raw),
            raw_index: None,
            incomplete_from: None,
        };
    }
    let mut text = Vec::with_capacity(raw.len());
    let mut index = Vec::with_capacity(raw.len());
    let mut incomplete_from = None;
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != ESC {
            text.push(raw[i]);
            index.push(i);
            i += 1;
            continue;
        }
        match escape_len(&raw[i..]) {
            Some(n) => i += n,
            None => {
                incomplete_from = Some(i);
                break;
            }
        }
    }
    Visible {
        text: Cow::Owned(text),
        raw_index: Some(index),
        incomplete_from,
    }
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
            assert_eq!(&v.text[..], text.as_bytes(), "{raw:?}");
            assert_eq!(v.incomplete_from, *incomplete, "{raw:?}");
            for i in 0..v.text.len() {
                assert_eq!(raw[v.raw_pos(i)], v.text[i]);
            }
        }
    }
}
