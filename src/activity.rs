//! Meaningful activity: whether the *rendered screen* changed, not whether bytes arrived.
//!
//! A fingerprint hashes the text of the screen's cells only, so cursor moves and blinks,
//! colour-only (SGR) redraws and terminal-title (OSC) changes leave it as it was. Before hashing,
//! the parts a profile marks volatile are masked: a tmux status row (a bottom row painted in
//! one background colour from edge to edge), clocks, spinner glyphs, elapsed-time counters.
//! A repaint that redraws the same text (a viewer attaching, tmux redrawing its client) gives
//! the same fingerprint. Repaints the hub causes itself (a resize) are absorbed by re-baselining
//! for a short grace period. Pure: the session feeds it screens and times.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use regex::Regex;
use tokio::time::Instant;

/// How long after a resize the hub asked for a changed screen is taken as its repaint.
pub const OWN_REPAINT_GRACE: Duration = Duration::from_millis(700);

/// What to leave out of a fingerprint.
#[derive(Debug, Clone, Default)]
pub struct Masks {
    /// Matches are blanked in every row before hashing (clocks, spinners, counters).
    pub volatile: Vec<Regex>,
    /// Leave out bottom rows that look like a status bar (one background colour, edge to edge).
    pub status_row: bool,
}

/// The visible rows of a screen as text.
pub fn screen_rows(screen: &vt100::Screen) -> Vec<String> {
    let (_, cols) = screen.size();
    screen.rows(0, cols.get()).collect()
}

/// Whether `row` is painted in one non-default background colour (or inverse video) across
/// the whole width: how tmux, screen and most TUIs draw a status bar.
pub fn is_status_row(screen: &vt100::Screen, row: u16) -> bool {
    let (_, cols) = screen.size();
    let style = |col: u16| {
        screen
            .cell(row, col)
            .map(|c| (c.bgcolor(), c.inverse()))
            .unwrap_or((vt100::Color::Default, false))
    };
    let first = style(0);
    if first == (vt100::Color::Default, false) {
        return false;
    }
    (1..cols.get()).all(|c| style(c) == first)
}

/// Rows to leave out: the status rows at the bottom of the screen (at most two).
fn status_rows(screen: &vt100::Screen) -> Vec<u16> {
    let (rows, _) = screen.size();
    let rows = rows.get();
    (rows.saturating_sub(2)..rows)
        .rev()
        .take_while(|&r| is_status_row(screen, r))
        .collect()
}

/// The screen's rows with status rows (when masked) emptied: what rules look at.
pub fn content_rows(screen: &vt100::Screen, masks: &Masks) -> Vec<String> {
    let skip = if masks.status_row {
        status_rows(screen)
    } else {
        Vec::new()
    };
    screen_rows(screen)
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            if skip.contains(&(i as u16)) {
                String::new()
            } else {
                row
            }
        })
        .collect()
}

/// [`content_rows`] with volatile matches blanked: what the fingerprint hashes.
pub fn masked_rows(screen: &vt100::Screen, masks: &Masks) -> Vec<String> {
    content_rows(screen, masks)
        .iter()
        .map(|row| mask_text(row, &masks.volatile))
        .collect()
}

/// `text` with every match of `volatile` replaced by one placeholder character.
pub fn mask_text(text: &str, volatile: &[Regex]) -> String {
    let mut out = text.to_string();
    for re in volatile {
        if re.is_match(&out) {
            out = re.replace_all(&out, "\u{2591}").into_owned();
        }
    }
    out.trim_end().to_string()
}

/// A hash of the screen's masked text.
pub fn fingerprint(screen: &vt100::Screen, masks: &Masks) -> u64 {
    fingerprint_rows(
        screen.alternate_screen(),
        &content_rows(screen, masks),
        masks,
    )
}

/// [`fingerprint`] of a screen's [`content_rows`] (taken once for both the fingerprint and the
/// rules): the rows as [`masked_rows`] gives them, hashed without copying a row that no
/// volatile pattern matches.
pub fn fingerprint_rows(alternate_screen: bool, rows: &[String], masks: &Masks) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    alternate_screen.hash(&mut h);
    rows.len().hash(&mut h);
    for row in rows {
        if masks.volatile.iter().any(|re| re.is_match(row)) {
            mask_text(row, &masks.volatile).hash(&mut h);
        } else {
            row.trim_end().hash(&mut h);
        }
    }
    h.finish()
}

/// Tracks when the screen last changed meaningfully.
#[derive(Debug, Clone, Default)]
pub struct ActivityClock {
    /// The last fingerprint and the screen size it was taken at.
    seen: Option<(u64, (u16, u16))>,
    last_change_at: Option<Instant>,
    /// Changes until then are the hub's own repaint and only re-baseline.
    own_repaint_until: Option<Instant>,
}

impl ActivityClock {
    /// Records a fingerprint; true when it is a meaningful change (counted as activity).
    /// The first fingerprint, a size change and changes during our own repaint re-baseline.
    pub fn observe(&mut self, fingerprint: u64, size: (u16, u16), now: Instant) -> bool {
        self.observe_at(fingerprint, size, now, now)
    }

    /// [`ActivityClock::observe`] of a change that `happened` before it was seen `now` (when
    /// the output that made it arrived): the change is dated then, so a screen that has been
    /// still since is not taken for a fresh change.
    pub fn observe_at(
        &mut self,
        fingerprint: u64,
        size: (u16, u16),
        now: Instant,
        happened: Instant,
    ) -> bool {
        let previous = self.seen.replace((fingerprint, size));
        let own = self.own_repaint_until.is_some_and(|t| now < t);
        let changed = match previous {
            None => true,
            Some((fp, sz)) => sz == size && fp != fingerprint && !own,
        };
        if changed {
            self.last_change_at = Some(happened.min(now));
        }
        changed
    }

    /// The hub itself is about to make the program repaint (a resize).
    pub fn note_own_repaint(&mut self, now: Instant) {
        self.own_repaint_until = Some(now + OWN_REPAINT_GRACE);
    }

    /// When the screen last changed meaningfully.
    pub fn last_change_at(&self) -> Option<Instant> {
        self.last_change_at
    }

    /// The current fingerprint.
    pub fn fingerprint(&self) -> Option<u64> {
        self.seen.map(|(fp, _)| fp)
    }
}

/// Converts a monotonic instant to wall-clock time (for the API), against one anchor taken
/// once, so the same instant always gives the same time.
pub fn wall_clock(at: Instant) -> chrono::DateTime<chrono::Utc> {
    static ANCHOR: std::sync::OnceLock<(Instant, chrono::DateTime<chrono::Utc>)> =
        std::sync::OnceLock::new();
    let (base, wall) = *ANCHOR.get_or_init(|| (Instant::now(), chrono::Utc::now()));
    let span = |d: Duration| chrono::Duration::from_std(d).unwrap_or_default();
    if at >= base {
        wall + span(at - base)
    } else {
        wall - span(base - at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u16) -> std::num::NonZeroU16 {
        std::num::NonZeroU16::new(n).unwrap()
    }

    fn screen(bytes: &[u8]) -> vt100::Parser {
        let mut p = vt100::Parser::new(nz(6), nz(20), 0);
        p.process(bytes);
        p
    }

    fn masks() -> Masks {
        Masks {
            volatile: vec![Regex::new(r"\d{1,2}:\d{2}:\d{2}").unwrap()],
            status_row: true,
        }
    }

    #[test]
    fn the_fingerprint_hashes_the_masked_rows() {
        for bytes in [&b"$ ls\r\nat 12:00:01 done   \r\n$ "[..], b"plain\r\n", b""] {
            let p = screen(bytes);
            let unmasked = Masks::default();
            let masked = masked_rows(p.screen(), &masks());
            assert_eq!(
                fingerprint(p.screen(), &masks()),
                fingerprint_rows(false, &masked, &unmasked),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn only_text_changes_change_the_fingerprint() {
        let base = b"$ ls\r\nfile\r\n$ ";
        let fp = |extra: &[u8]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            fingerprint(screen(&all).screen(), &masks())
        };
        let plain = fp(b"");
        let table: &[(&str, &[u8], bool)] = &[
            ("cursor move", b"\x1b[2;3H", false),
            ("cursor hide/show (blink)", b"\x1b[?25l\x1b[?25h", false),
            ("OSC title", b"\x1b]0;new title\x07", false),
            ("colour only", b"\x1b[31m\x1b[0m", false),
            ("clock in text", b"12:00:01", true),
            ("new text", b"echo hi", true),
            (
                "status row",
                b"\x1b[6;1H\x1b[42m[0] bash    12:00:01\x1b[0m",
                false,
            ),
        ];
        for (what, extra, changes) in table {
            assert_eq!(fp(extra) != plain, *changes, "{what}");
        }
        // A clock is masked wherever it is.
        assert_eq!(fp(b"12:00:01"), fp(b"12:00:02"));
        // A status row whose text changes is left out entirely.
        assert_eq!(
            fp(b"\x1b[6;1H\x1b[42m[0] bash   one      \x1b[0m"),
            fp(b"\x1b[6;1H\x1b[42m[0] zsh    two      \x1b[0m")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn clock_counts_changes_but_not_own_repaints_or_resizes() {
        let mut c = ActivityClock::default();
        let t0 = Instant::now();
        assert!(c.observe(1, (80, 24), t0), "the first screen counts");
        assert!(!c.observe(1, (80, 24), t0 + Duration::from_secs(1)));
        assert!(c.observe(2, (80, 24), t0 + Duration::from_secs(2)));
        assert!(
            !c.observe(3, (100, 24), t0 + Duration::from_secs(3)),
            "resize"
        );
        c.note_own_repaint(t0 + Duration::from_secs(4));
        assert!(!c.observe(4, (100, 24), t0 + Duration::from_millis(4100)));
        assert!(c.observe(5, (100, 24), t0 + Duration::from_secs(6)));
        assert_eq!(c.last_change_at(), Some(t0 + Duration::from_secs(6)));
    }
}
