//! The rendered screen of a session: a vt100 emulator fed from the session's output, plus the
//! absolute offset it has been fed up to. Pure: the session decides when to feed it, so the
//! emulator stays off the ingest hot path.

use std::num::NonZeroU16;

use crate::backend::TermSize;

/// Rows of emulator scrollback kept for rendered reads.
pub const SCREEN_SCROLLBACK_ROWS: usize = 1000;

/// A terminal emulator in sync with a session's output up to [`Screen::fed_to`].
pub struct Screen {
    parser: vt100::Parser,
    fed_to: u64,
}

fn nz(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

impl Screen {
    /// An empty screen of `size`.
    pub fn new(size: TermSize) -> Self {
        Screen {
            parser: vt100::Parser::new(nz(size.rows), nz(size.cols), SCREEN_SCROLLBACK_ROWS),
            fed_to: 0,
        }
    }

    /// Absolute output offset the emulator has processed up to.
    pub fn fed_to(&self) -> u64 {
        self.fed_to
    }

    /// Feeds output that starts at absolute offset `start`. When `start` is past `fed_to`
    /// (bytes were evicted before the emulator saw them) the screen restarts from `start`:
    /// what follows repaints it, which beats rendering a stream with a hole in it.
    pub fn feed(&mut self, start: u64, bytes: &[u8]) {
        if start > self.fed_to {
            let (rows, cols) = self.parser.screen().size();
            self.parser = vt100::Parser::new(rows, cols, SCREEN_SCROLLBACK_ROWS);
        }
        let end = start + bytes.len() as u64;
        if end <= self.fed_to {
            return;
        }
        let skip = self.fed_to.saturating_sub(start) as usize;
        self.parser.process(&bytes[skip..]);
        self.fed_to = end;
    }

    /// Follows a resize of the terminal.
    pub fn resize(&mut self, size: TermSize) {
        self.parser.set_size(nz(size.rows), nz(size.cols));
    }

    /// Escape sequences that paint this screen (contents, cursor, input modes) on a fresh
    /// terminal, so a newly attached viewer sees the real screen at once.
    pub fn repaint(&self) -> Vec<u8> {
        let screen = self.parser.screen();
        let mut out = Vec::new();
        if screen.alternate_screen() {
            out.extend_from_slice(b"\x1b[?1049h");
        }
        out.extend_from_slice(b"\x1b[H\x1b[2J");
        out.extend_from_slice(screen.state_formatted().as_bytes());
        out
    }

    /// The visible screen as plain text, one line per row, trailing blanks trimmed.
    pub fn text(&self) -> String {
        self.parser.screen().contents()
    }

    /// The underlying emulator, for rendered reads.
    pub fn vt(&self) -> &vt100::Screen {
        self.parser.screen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size() -> TermSize {
        TermSize { cols: 20, rows: 4 }
    }

    #[test]
    fn feeding_overlapping_ranges_processes_each_byte_once() {
        let mut s = Screen::new(size());
        s.feed(0, b"abc");
        s.feed(1, b"bcdef");
        assert_eq!(s.text(), "abcdef");
        assert_eq!(s.fed_to(), 6);
        s.feed(2, b"cd");
        assert_eq!(s.text(), "abcdef");
    }

    #[test]
    fn a_gap_restarts_the_emulator() {
        let mut s = Screen::new(size());
        s.feed(0, b"old");
        s.feed(10, b"new");
        assert_eq!(s.text(), "new");
        assert_eq!(s.fed_to(), 13);
    }

    #[test]
    fn repaint_reproduces_the_screen_on_a_fresh_emulator() {
        let mut s = Screen::new(size());
        s.feed(0, b"\x1b[31mred\x1b[0m\r\nline two\x1b[2;3H");
        let mut fresh = vt100::Parser::new(nz(4), nz(20), 0);
        fresh.process(&s.repaint());
        assert_eq!(fresh.screen().contents(), s.text());
        assert_eq!(fresh.screen().cursor_position(), s.vt().cursor_position());
    }
}
