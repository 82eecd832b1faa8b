//! Fast-forward over plain output whose rows cannot stay: a busy agent prints thousands of
//! short lines between two looks at its screen, and only the last screenful and the kept text
//! history can still be read. Pure: the screen decides when it may skip (see
//! [`super::Screen::feed`]).
//!
//! Why skipping is exact. Plain text (printable ASCII, CR, LF) that never reaches a row's last
//! column only writes characters and moves the cursor right, to column 0 or down: it changes
//! no mode, attribute, title or tab stop, and never wraps. On the normal screen with the whole
//! screen as its scroll region, each LF moves the cursor down or scrolls one row into the
//! history. So once `keep` more such line feeds follow (twice the screen's rows plus the
//! history's: enough to reach the bottom from any row and then push every row there was
//! through the history), no row written before is still kept. The emulator then only needs
//! the cursor's column, which a skipped part ending in CR LF leaves at 0, and the count of rows
//! that scrolled away, which is the count of skipped line feeds.

/// A prefix of the output that can be skipped: `len` bytes holding `lines` line feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    pub len: usize,
    pub lines: u64,
}

/// The longest prefix of `bytes` that can be skipped, with the cursor at column `col` of a
/// `cols`-wide screen and `keep` line feeds needed after it: a prefix of the plain run at the
/// start of `bytes` that ends right after a CR LF, followed by at least `keep` line feeds of the
/// same run. `None` when there is none.
pub fn plain_skip(bytes: &[u8], col: u16, cols: u16, keep: u64) -> Option<Skip> {
    // Each line feed is a byte: a catch-up this short cannot hold a skip (most do not).
    if bytes.len() as u64 <= keep {
        return None;
    }
    let (run, lines) = plain_run(bytes, col, cols);
    let most = lines.checked_sub(keep)?;
    // The last CR LF with at most `most` line feeds up to it.
    let mut skip = None;
    let mut seen = 0u64;
    for (i, &b) in bytes[..run].iter().enumerate() {
        if b != b'\n' {
            continue;
        }
        seen += 1;
        if seen > most {
            break;
        }
        if i > 0 && bytes[i - 1] == b'\r' {
            skip = Some(Skip {
                len: i + 1,
                lines: seen,
            });
        }
    }
    skip
}

/// The length of the plain run at the start of `bytes` (see [`plain_skip`]) and the line
/// feeds in it.
fn plain_run(bytes: &[u8], col: u16, cols: u16) -> (usize, u64) {
    let mut col = u32::from(col);
    let cols = u32::from(cols);
    let mut lines = 0u64;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\r' => col = 0,
            b'\n' => lines += 1,
            // Written left of the last column: no wrap, now or pending.
            0x20..=0x7e if col + 2 <= cols => col += 1,
            _ => return (i, lines),
        }
    }
    (bytes.len(), lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("{i}\r\n").into_bytes())
            .collect()
    }

    #[test]
    fn skips_all_but_the_lines_that_may_stay() {
        let bytes = lines(100);
        let skip = plain_skip(&bytes, 0, 80, 30).expect("a skip");
        assert_eq!(skip.lines, 70);
        assert_eq!(&bytes[skip.len..], &lines(100)[lines(70).len()..]);
        // Exactly `keep` line feeds after it.
        assert_eq!(plain_skip(&bytes, 0, 80, 100), None);
        assert_eq!(plain_skip(&bytes, 0, 80, 99).map(|s| s.lines), Some(1));
    }

    #[test]
    fn the_run_ends_at_anything_but_plain_text() {
        for stop in [
            &b"\x1b[31m"[..],
            b"\t",
            b"\x08",
            "é".as_bytes(),
            b"\x07",
            b"\x7f",
        ] {
            let mut bytes = lines(10);
            bytes.extend_from_slice(stop);
            bytes.extend(lines(100));
            let skip = plain_skip(&bytes, 0, 80, 5).expect("a skip before the stop");
            assert_eq!(skip.lines, 5, "{stop:?}");
        }
        assert_eq!(plain_skip(b"\x1b[Hx\r\n", 0, 80, 0), None);
    }

    #[test]
    fn the_run_ends_before_a_character_in_the_last_column() {
        // 79 characters fit left of the last column of 80; the 80th would be written in it.
        let fits = [vec![b'x'; 79], b"\r\n".to_vec()].concat().repeat(5);
        assert_eq!(plain_skip(&fits, 0, 80, 1).map(|s| s.lines), Some(4));
        let reaches = [vec![b'x'; 80], b"\r\n".to_vec()].concat().repeat(5);
        assert_eq!(plain_skip(&reaches, 0, 80, 0), None);
        // The cursor's own column counts, until a CR.
        assert_eq!(plain_skip(b"ab\r\nc\r\n", 78, 80, 0), None);
        assert_eq!(
            plain_skip(b"\rab\r\nc\r\n", 79, 80, 0).map(|s| s.lines),
            Some(2)
        );
    }

    #[test]
    fn a_skip_ends_after_cr_lf_only() {
        // Bare LFs keep the column: no place to stop among them.
        let bytes = b"a\nb\nc\nd\r\ne\r\n".repeat(3);
        let skip = plain_skip(&bytes, 0, 80, 2).expect("a skip");
        assert_eq!(&bytes[skip.len - 2..skip.len], b"\r\n");
        assert_eq!(skip.lines, 10);
    }
}
