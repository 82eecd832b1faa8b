//! The escape-sequence grammar of terminal output (ECMA-48: CSI, OSC, DCS, SOS, PM, APC and the
//! short `ESC x` forms), as a split of a byte chunk into text runs and whole sequences. The one
//! place the hub decides where a sequence ends: the redactor's visible text skips them, the
//! screen rewrites the two it must translate. Pure.

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// What a [`Piece`] of output is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bytes outside any escape sequence (control characters such as CR and LF included).
    Text,
    /// One whole escape sequence, from its ESC to its final byte.
    Sequence,
    /// An escape sequence cut off by the end of the chunk: the rest of the chunk.
    Cut,
}

/// A run of a chunk: `bytes` starts at `start` in the chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    pub start: usize,
    pub bytes: &'a [u8],
    pub kind: Kind,
}

/// Splits `chunk` into text runs and escape sequences, in order; the last piece is
/// [`Kind::Cut`] when the chunk ends inside a sequence.
pub fn pieces(chunk: &[u8]) -> Pieces<'_> {
    Pieces { chunk, pos: 0 }
}

/// The iterator [`pieces`] returns.
pub struct Pieces<'a> {
    chunk: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        let start = self.pos;
        let rest = self.chunk.get(start..).filter(|r| !r.is_empty())?;
        let (len, kind) = if rest[0] != ESC {
            let text = rest.iter().position(|&b| b == ESC).unwrap_or(rest.len());
            (text, Kind::Text)
        } else {
            match sequence_len(rest) {
                Some(n) => (n, Kind::Sequence),
                None => (rest.len(), Kind::Cut),
            }
        };
        self.pos = start + len;
        Some(Piece {
            start,
            bytes: &rest[..len],
            kind,
        })
    }
}

/// The length of the escape sequence at the start of `s` (which starts with ESC), or `None`
/// if `s` ends before the sequence does.
fn sequence_len(s: &[u8]) -> Option<usize> {
    let kind = *s.get(1)?;
    match kind {
        // CSI: parameters and intermediates, then a final byte 0x40-0x7e.
        b'[' => s[2..]
            .iter()
            .position(|b| (0x40..=0x7e).contains(b))
            .map(|p| p + 3),
        // OSC, DCS, SOS, PM, APC: a string ended by BEL (OSC) or ST (ESC \\). Any other ESC
        // aborts the string and starts a sequence of its own, as terminals do.
        b']' | b'P' | b'X' | b'^' | b'_' => {
            let body = &s[2..];
            for (j, &b) in body.iter().enumerate() {
                if b == BEL && kind == b']' {
                    return Some(j + 3);
                }
                if b == ESC {
                    return match body.get(j + 1)? {
                        b'\\' => Some(j + 4),
                        _ => Some(j + 2),
                    };
                }
            }
            None
        }
        // ESC, intermediates 0x20-0x2f, then one final byte 0x30-0x7e. Any other byte (a
        // control, a UTF-8 character) ends the sequence before it and stays text.
        _ => s[1..]
            .iter()
            .position(|b| !(0x20..=0x2f).contains(b))
            .map(|p| match s[p + 1] {
                0x30..=0x7e => p + 2,
                _ => p + 1,
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk and the pieces it splits into.
    type Case<'a> = (&'a [u8], &'a [(&'a [u8], Kind)]);

    fn split(chunk: &[u8]) -> Vec<(&[u8], Kind)> {
        pieces(chunk).map(|p| (p.bytes, p.kind)).collect()
    }

    #[test]
    fn chunks_split_into_text_and_whole_sequences() {
        use Kind::*;
        let table: &[Case] = &[
            (b"", &[]),
            (b"plain\r\n", &[(b"plain\r\n", Text)]),
            (
                b"a\x1b[31mb",
                &[(b"a", Text), (b"\x1b[31m", Sequence), (b"b", Text)],
            ),
            (
                b"\x1b]0;title\x07x",
                &[(b"\x1b]0;title\x07", Sequence), (b"x", Text)],
            ),
            (b"\x1b]0;t\x1b\\", &[(b"\x1b]0;t\x1b\\", Sequence)]),
            (b"\x1bPq#0\x1b\\", &[(b"\x1bPq#0\x1b\\", Sequence)]),
            (
                b"\x1b(B\x1b=",
                &[(b"\x1b(B", Sequence), (b"\x1b=", Sequence)],
            ),
            (b"\x1b\xc3\xa4", &[(b"\x1b", Sequence), (b"\xc3\xa4", Text)]),
            (
                b"\x1b[s\x1b[u",
                &[(b"\x1b[s", Sequence), (b"\x1b[u", Sequence)],
            ),
            (b"ab\x1b", &[(b"ab", Text), (b"\x1b", Cut)]),
            (b"ab\x1b[3", &[(b"ab", Text), (b"\x1b[3", Cut)]),
            (b"\x1b]0;ti", &[(b"\x1b]0;ti", Cut)]),
            (b"\x1b]0;ti\x1b", &[(b"\x1b]0;ti\x1b", Cut)]),
            (b"\x1b(", &[(b"\x1b(", Cut)]),
            (
                b"\x1b]0;t\x1b[1mx",
                &[
                    (b"\x1b]0;t", Sequence),
                    (b"\x1b[1m", Sequence),
                    (b"x", Text),
                ],
            ),
        ];
        for (chunk, want) in table {
            assert_eq!(split(chunk), *want, "{chunk:?}");
        }
    }

    #[test]
    fn pieces_cover_the_chunk_in_order() {
        let chunk = b"x\x1b[1;2Hy\x1b]2;t\x07\x1b7z\x1b[";
        let mut at = 0;
        for p in pieces(chunk) {
            assert_eq!(p.start, at);
            assert_eq!(&chunk[p.start..p.start + p.bytes.len()], p.bytes);
            at += p.bytes.len();
        }
        assert_eq!(at, chunk.len());
    }
}
