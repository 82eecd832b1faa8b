//! The visible text of terminal output: the bytes left when escape sequences (as
//! [`crate::escape`] splits them) are taken out, with a map back to raw byte positions. Secret
//! patterns run on the visible text, so a key printed with colour codes inside it is still seen.

use std::borrow::Cow;

use crate::escape::{self, Kind};

const ESC: u8 = 0x1b;

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
    for piece in escape::pieces(raw) {
        match piece.kind {
            Kind::Text => {
                text.extend_from_slice(piece.bytes);
                index.extend(piece.start..piece.start + piece.bytes.len());
            }
            Kind::Sequence => {}
            Kind::Cut => incomplete_from = Some(piece.start),
        }
    }
    Visible {
        text: Cow::Owned(text),
        raw_index: Some(index),
        incomplete_from,
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
