//! The rendered screen of a session: a vt100 emulator fed from the session's output, the
//! absolute offset it has been fed up to, and rendered reads (`term_read`). Pure: the session
//! decides when to feed it, so emulation stays off the ingest hot path.
//!
//! Lines have absolute numbers: rows that leave the emulator's scrollback are counted, so line
//! `n` keeps its number while it scrolls, and a marker (`delta` mode) can tell when the lines it
//! points at have been discarded.

use std::num::NonZeroU16;

use serde::{Deserialize, Serialize};

mod skip;

use crate::escape::{self, Kind};
use crate::term::TermSize;

/// Rows kept above the screen for rendered reads: as many as one read returns at most
/// ([`READ_MAX_LINES`]). They are kept as plain text (a row's text and whether it wraps), not
/// as emulator rows: an emulator row costs 32 bytes a column (~0.75 MB for 200 rows at 120
/// columns, which made a busy agent cost 7.7 MB at 2,000 rows, #12 item 7), a text row about
/// what it says. The byte ring keeps the output itself.
pub const SCREEN_SCROLLBACK_ROWS: usize = READ_MAX_LINES;
/// Default and largest `max_lines` of a rendered read.
pub const READ_DEFAULT_LINES: usize = 40;
pub const READ_MAX_LINES: usize = 200;
/// Default and largest `max_chars` of a rendered read.
pub const READ_DEFAULT_CHARS: usize = 12_000;
pub const READ_MAX_CHARS: usize = 50_000;

/// What the emulator reports besides the screen itself.
#[derive(Default)]
struct Events {
    /// Rows that scrolled off the top of the normal screen, oldest first, as (text, wrapped):
    /// the scrollback rendered reads return (at most [`SCREEN_SCROLLBACK_ROWS`]).
    history: std::collections::VecDeque<(String, bool)>,
    /// Rows discarded from the top of `history`.
    discarded_rows: u64,
    /// Answers to terminal queries (cursor position, device attributes) seen in the output.
    replies: Vec<Vec<u8>>,
    /// The window title last set (OSC 0 or 2): some CLIs show their activity only there.
    title: String,
}

impl vt100::Callbacks for Events {
    fn set_window_title(&mut self, _screen: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    fn on_scroll(&mut self, row: vt100::capture::RowContents<'_>, alternate_screen: bool) {
        if alternate_screen {
            return;
        }
        // The row as (plain text, wrapped), as [`vt100::Screen::rows`] and
        // [`vt100::Screen::row_wrapped`] give a row still on it; the discarded row's buffer is
        // reused (a busy fleet scrolls ~100,000 rows a second).
        let mut text = String::new();
        if self.history.len() >= SCREEN_SCROLLBACK_ROWS {
            if let Some((old, _)) = self.history.pop_front() {
                text = old;
                text.clear();
            }
            self.discarded_rows += 1;
        }
        row.write_plain(&mut text);
        self.history.push_back((text, row.wrapped()));
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, c, first) {
            // DSR: cursor position report.
            (None, 'n', 6) => {
                let (row, col) = screen.cursor_position();
                self.replies
                    .push(format!("\x1b[{};{}R", row + 1, col + 1).into_bytes());
            }
            // DSR: status report ("OK").
            (None, 'n', 5) => self.replies.push(b"\x1b[0n".to_vec()),
            // DA1: a VT220-class terminal with ANSI colour.
            (None, 'c', 0) => self.replies.push(b"\x1b[?62;22c".to_vec()),
            // DA2.
            (Some(b'>'), 'c', 0) => self.replies.push(b"\x1b[>1;10;0c".to_vec()),
            _ => {}
        }
    }
}

/// A terminal emulator in sync with a session's output up to [`Screen::fed_to`].
pub struct Screen {
    parser: vt100::Parser<Events>,
    fed_to: u64,
    /// Bumped when the emulator restarts after a gap: older markers no longer apply.
    generation: u64,
    /// Bytes held back because they may start a `CSI s` / `CSI u` split across chunks.
    held: Vec<u8>,
    /// Where the output fed so far ends, for skipping (see [`skip`]).
    end: End,
    /// Lines skipped so far (never rendered because they could not stay).
    skipped_lines: u64,
}

/// Where the output fed so far ends: an escape sequence it leaves cut off (empty when none),
/// and whether it ends on an ASCII byte (not inside a character). `cut` is `None` once a cut
/// sequence grew past [`MAX_CUT`]: the end is not followed any more, and nothing is skipped.
#[derive(Clone)]
struct End {
    cut: Option<Vec<u8>>,
    ascii: bool,
}

/// The longest cut-off sequence followed (a title, a colour: short).
const MAX_CUT: usize = 4096;

impl Default for End {
    fn default() -> Self {
        End {
            cut: Some(Vec::new()),
            ascii: true,
        }
    }
}

impl End {
    /// Follows `bytes`, fed after the output so far.
    fn follow(&mut self, bytes: &[u8]) {
        let Some(last) = bytes.last() else { return };
        self.ascii = last.is_ascii();
        let Some(cut) = &mut self.cut else { return };
        if cut.is_empty() && !bytes.contains(&0x1b) {
            return;
        }
        cut.extend_from_slice(bytes);
        let tail = match escape::pieces(cut).last() {
            Some(p) if p.kind == Kind::Cut => Some(p.bytes.to_vec()),
            _ => None,
        };
        self.cut = match tail {
            Some(t) if t.len() > MAX_CUT => None,
            Some(t) => Some(t),
            None => Some(Vec::new()),
        };
    }

    /// Between sequences and characters.
    fn clean(&self) -> bool {
        self.ascii && self.cut.as_ref().is_some_and(Vec::is_empty)
    }
}

/// The modes of a rendered read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadMode {
    /// The last lines of scrollback and screen.
    #[default]
    Tail,
    /// Exactly what is on screen now.
    Viewport,
    /// The lines added since `marker_id`, plus a new marker.
    Delta,
}

/// A rendered read request (`term_read`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TermReadRequest {
    #[serde(default)]
    pub mode: ReadMode,
    /// Default 200; more than the hub keeps reads what it keeps.
    #[serde(default, deserialize_with = "crate::json::whole::opt")]
    #[schema(maximum = 18446744073709551615_u64)]
    pub max_lines: Option<usize>,
    #[serde(default, deserialize_with = "crate::json::whole::opt")]
    #[schema(maximum = 18446744073709551615_u64)]
    pub max_chars: Option<usize>,
    pub merge_wrapped: Option<bool>,
    pub marker_id: Option<String>,
}

/// A rendered read.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TermRead {
    pub text: String,
    pub lines: Vec<String>,
    /// Lines or characters were left out (the oldest ones).
    pub truncated: bool,
    pub dropped_chars: usize,
    /// The cursor's row on the screen (0-based).
    pub cursor_line: u16,
    /// Absolute line number of the screen's top row.
    pub viewport_y: u64,
    pub rows: u16,
    pub cols: u16,
    /// `normal` or `alternate`.
    pub buffer_type: String,
    /// A marker for the next `delta` read.
    pub marker_id: String,
    /// Absolute line number the new marker points at.
    pub marker_line: u64,
    /// The requested marker's lines were discarded (or the screen restarted): the read starts
    /// at the oldest line kept instead.
    pub marker_disposed: bool,
}

fn nz(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

/// Rewrites `ESC [ s` / `ESC [ u` (save / restore cursor, SCO form, which vt100 lacks) to
/// `ESC 7` / `ESC 8`. Returns the bytes to process and keeps in `held` a tail that may be the
/// start of such a sequence (`ESC` or `ESC [`); any other cut-off sequence goes on to the
/// emulator, which keeps its own state across chunks. Output without escape sequences (most
/// of a busy agent's) passes as it is.
fn translate_sco<'a>(held: &mut Vec<u8>, bytes: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
    if held.is_empty() && !bytes.contains(&0x1b) {
        return std::borrow::Cow::Borrowed(bytes);
    }
    let mut input = std::mem::take(held);
    input.extend_from_slice(bytes);
    let mut out = Vec::with_capacity(input.len());
    for piece in escape::pieces(&input) {
        match (piece.kind, piece.bytes) {
            (Kind::Sequence, b"\x1b[s") => out.extend_from_slice(b"\x1b7"),
            (Kind::Sequence, b"\x1b[u") => out.extend_from_slice(b"\x1b8"),
            (Kind::Cut, b"\x1b" | b"\x1b[") => held.extend_from_slice(piece.bytes),
            (_, bytes) => out.extend_from_slice(bytes),
        }
    }
    std::borrow::Cow::Owned(out)
}

impl Screen {
    /// An empty screen of `size`.
    pub fn new(size: TermSize) -> Self {
        Screen {
            parser: Self::parser(nz(size.rows), nz(size.cols), Events::default()),
            fed_to: 0,
            generation: 0,
            held: Vec::new(),
            end: End::default(),
            skipped_lines: 0,
        }
    }

    /// An emulator of `rows` x `cols` reporting into `events`. No emulator scrollback: rows
    /// that leave the screen are kept as text (`Events`).
    fn parser(rows: NonZeroU16, cols: NonZeroU16, events: Events) -> vt100::Parser<Events> {
        vt100::Parser::new_with_callbacks(rows, cols, 0, events)
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
            self.parser = Self::parser(rows, cols, Events::default());
            self.generation += 1;
            self.held.clear();
            self.end = End::default();
        }
        let end = start + bytes.len() as u64;
        if end <= self.fed_to {
            return;
        }
        let skip = self.fed_to.saturating_sub(start) as usize;
        let translated = translate_sco(&mut self.held, &bytes[skip..]);
        let rest = self.skip_plain(&translated);
        self.parser.process(rest);
        self.end.follow(&translated);
        self.fed_to = end;
    }

    /// Skips the plain lines at the start of `bytes` whose rows cannot stay (see [`skip`]),
    /// counting them as scrolled away; returns the bytes still to process.
    fn skip_plain<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let whole_region = screen.scroll_region() == (0, rows.get() - 1);
        if !self.end.clean() || screen.alternate_screen() || !whole_region {
            return bytes;
        }
        let keep = 2 * u64::from(rows.get()) + SCREEN_SCROLLBACK_ROWS as u64;
        let col = screen.cursor_position().1;
        let Some(s) = skip::plain_skip(bytes, col, cols.get(), keep) else {
            return bytes;
        };
        // The skipped part ends at column 0; what follows scrolls every row there was away.
        self.parser.process(b"\r");
        self.parser.callbacks_mut().discarded_rows += s.lines;
        self.skipped_lines += s.lines;
        &bytes[s.len..]
    }

    /// Lines skipped so far: printed and scrolled away between two feeds, never rendered.
    pub fn skipped_lines(&self) -> u64 {
        self.skipped_lines
    }

    /// Answers to terminal queries seen since the last call.
    pub fn take_replies(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.parser.callbacks_mut().replies)
    }

    /// Replaces what the screen shows with `paint` (bytes that paint a blank screen of this
    /// size, from the terminal's own authority), as of output offset `at` (output before it is
    /// taken as already painted). The text history, the title and line numbers carry on.
    pub fn repaint_from(&mut self, paint: &[u8], at: u64) {
        let (rows, cols) = self.parser.screen().size();
        // The program's input modes (bracketed paste, application keys, mouse) and whether
        // the cursor is hidden are not on the screen: carry them over.
        let modes = self.parser.screen().input_mode_formatted();
        let hidden = self.parser.screen().hide_cursor();
        let events = std::mem::take(self.parser.callbacks_mut());
        self.parser = Self::parser(rows, cols, events);
        self.parser.process(paint);
        self.parser.process(modes.as_bytes());
        if hidden {
            self.parser.process(b"\x1b[?25l");
        }
        self.held.clear();
        self.end = End::default();
        self.fed_to = at;
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

    /// The window title the program last set (OSC 0 or 2), empty when it set none.
    pub fn title(&self) -> &str {
        &self.parser.callbacks().title
    }

    /// The underlying emulator.
    pub fn vt(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    /// Every row kept (scrollback, then screen), oldest first, as (text, wrapped).
    fn all_rows(&self) -> Vec<(String, bool)> {
        let screen = self.parser.screen();
        let cols = screen.size().1.get();
        let mut out = Vec::new();
        if !screen.alternate_screen() {
            out.extend(self.parser.callbacks().history.iter().cloned());
        }
        for (i, text) in screen.rows(0, cols).enumerate() {
            out.push((text, screen.row_wrapped(i as u16)));
        }
        out
    }

    /// A rendered read (see [`ReadMode`]).
    pub fn read(&mut self, req: &TermReadRequest) -> TermRead {
        let max_lines = req
            .max_lines
            .unwrap_or(READ_DEFAULT_LINES)
            .clamp(1, READ_MAX_LINES);
        let max_chars = req
            .max_chars
            .unwrap_or(READ_DEFAULT_CHARS)
            .clamp(1, READ_MAX_CHARS);
        let merge = req.merge_wrapped.unwrap_or(true);
        let alternate = self.parser.screen().alternate_screen();
        let (rows, cols) = self.parser.screen().size();
        let (cursor_row, _) = self.parser.screen().cursor_position();
        let all = self.all_rows();
        let discarded = self.parser.callbacks().discarded_rows;
        let screen_top = all.len().saturating_sub(rows.get() as usize);
        // Absolute number of row index 0 of `all`, and of the screen's top row.
        let first_abs = if alternate { 0 } else { discarded };
        let viewport_y = first_abs + screen_top as u64;
        let cursor_abs = viewport_y + cursor_row as u64;
        // Rows after the cursor that are blank are not content yet.
        let last_content = all
            .iter()
            .rposition(|(t, _)| !t.trim_end().is_empty())
            .unwrap_or(0)
            .max(screen_top + cursor_row as usize);
        let (from, marker_disposed) = match req.mode {
            ReadMode::Viewport => (screen_top, false),
            ReadMode::Tail => (0, false),
            ReadMode::Delta => match req.marker_id.as_deref().and_then(parse_marker) {
                Some((generation, line)) if generation == self.generation && !alternate => {
                    if line < first_abs {
                        (0, true)
                    } else {
                        (((line - first_abs) as usize).min(last_content + 1), false)
                    }
                }
                Some(_) => (0, true),
                None => (0, req.marker_id.is_some()),
            },
        };
        let upto = if req.mode == ReadMode::Viewport {
            all.len()
        } else {
            last_content + 1
        };
        // A wrapped row continues on the next one: with merge_wrapped they form one line.
        let mut lines: Vec<String> = Vec::new();
        let mut continuing = false;
        for (text, wrapped) in all.get(from..upto).unwrap_or_default() {
            let joined = merge && *wrapped;
            let piece = if joined {
                text.as_str()
            } else {
                text.trim_end()
            };
            match lines.last_mut() {
                Some(last) if continuing => last.push_str(piece),
                _ => lines.push(piece.to_string()),
            }
            continuing = joined;
        }
        let mut truncated = lines.len() > max_lines;
        let mut lines = lines[lines.len().saturating_sub(max_lines)..].to_vec();
        let mut text = lines.join("\n");
        let mut dropped_chars = 0;
        if text.chars().count() > max_chars {
            let chars: Vec<char> = text.chars().collect();
            dropped_chars = chars.len() - max_chars;
            text = chars[dropped_chars..].iter().collect();
            lines = text.split('\n').map(String::from).collect();
            truncated = true;
        }
        let marker_line = cursor_abs;
        TermRead {
            text,
            lines,
            truncated,
            dropped_chars,
            cursor_line: cursor_row,
            viewport_y,
            rows: rows.get(),
            cols: cols.get(),
            buffer_type: if alternate { "alternate" } else { "normal" }.into(),
            marker_id: format!("g{}l{}", self.generation, marker_line),
            marker_line,
            marker_disposed,
        }
    }
}

/// `g<generation>l<line>`.
fn parse_marker(id: &str) -> Option<(u64, u64)> {
    let rest = id.strip_prefix('g')?;
    let (generation, line) = rest.split_once('l')?;
    Some((generation.parse().ok()?, line.parse().ok()?))
}

#[cfg(test)]
mod tests;
