//! What the hub watches about its pane: whether it is dead and with which exit status (from
//! tmux, or from the pane wrapper before the pane closes); and the pane's screen as tmux shows
//! it, to repaint the hub's emulator where tmux is the authority.

use chrono::Utc;

use super::{TmuxError, TmuxPlace};
use crate::output::ExitInfo;

/// Name of the subscription that reports the pane's death and exit status.
pub(super) const DEAD_SUBSCRIPTION: &str = "agent_hub_pane_dead";

/// What the hub watches about its pane (see [`pane_exit`]).
pub(super) const PANE_STATE_FORMAT: &str =
    "#{pane_id}|#{pane_dead}|#{pane_dead_status}|#{@agent_hub_exit}";

/// Bytes that paint a blank terminal as tmux shows the pane: `lines` from `capture-pane -p -e
/// -J` (the visible rows with their colours, wrapped rows joined into one line, trailing spaces
/// kept), `state` from `display-message -p '#{cursor_y} #{cursor_x} #{alternate_on}'`. Each
/// line is written from the first column and wraps where tmux wrapped it (the width is the
/// same), so rows keep their wrapped flag; attributes are reset at every line's end.
pub(super) fn paint(lines: &str, state: &str) -> Vec<u8> {
    let alternate = state.split_whitespace().nth(2) == Some("1");
    let mut out = String::new();
    if alternate {
        out.push_str("\x1b[?1049h");
    }
    out.push_str("\x1b[0m\x1b[H\x1b[2J");
    let lines = lines.strip_suffix('\n').unwrap_or(lines);
    out.push_str(&lines.replace('\n', "\x1b[0m\r\n"));
    out.push_str("\x1b[0m");
    out.push_str(&cursor_move(state));
    out.into_bytes()
}

/// The escape that puts the cursor where `state` (`#{cursor_y} #{cursor_x} ...`, 0-based) says
/// tmux has it; empty if it does not say.
fn cursor_move(state: &str) -> String {
    let mut yx = state.split_whitespace().map(|n| n.parse::<u32>().ok());
    match (yx.next().flatten(), yx.next().flatten()) {
        (Some(y), Some(x)) => format!("\x1b[{};{}H", y + 1, x + 1),
        _ => String::new(),
    }
}

/// Bytes that show an adopted pane's past: `history` is the reply of `capture-pane -p -e -J
/// -S -` (its lines, scrollback then every row of the screen, blank ones too, so the screen's
/// rows end up where tmux has them), `cursor` that of `display-message -p '#{cursor_y}
/// #{cursor_x}'`; the cursor is put where tmux has it, so what the program prints next lands
/// where it meant.
pub(super) fn seed(history: &[Vec<u8>], cursor: &[Vec<u8>]) -> Vec<u8> {
    let mut out = history.join(&b"\r\n"[..]);
    if let Some(state) = cursor.first() {
        out.extend_from_slice(cursor_move(&String::from_utf8_lossy(state)).as_bytes());
    }
    out
}

/// Asks tmux whether `pane_id` has ended, and with which status.
pub(super) async fn query_dead_pane(
    server: &TmuxPlace,
    pane_id: &str,
) -> Result<Option<ExitInfo>, TmuxError> {
    let value = server
        .run(&["display-message", "-p", "-t", pane_id, PANE_STATE_FORMAT])
        .await?;
    Ok(pane_exit(&value, pane_id))
}

/// Splits a [`PANE_STATE_FORMAT`] value for `pane_id`: (dead, tmux's status, the wrapper's).
fn pane_state(value: &str, pane_id: &str) -> Option<(bool, Option<i32>, Option<i32>)> {
    let mut fields = value.trim().split('|');
    if fields.next() != Some(pane_id) {
        return None;
    }
    let dead = fields.next() == Some("1");
    let status = fields.next().and_then(|f| f.parse().ok());
    let reported = fields.next().and_then(|f| f.parse().ok());
    Some((dead, status, reported))
}

/// Whether the value says `pane_id` is dead (status known or not).
pub(super) fn pane_is_dead(value: &str, pane_id: &str) -> bool {
    pane_state(value, pane_id).is_some_and(|(dead, _, _)| dead)
}

/// The exit of `pane_id`, once its status is known: from the pane wrapper (the program has
/// exited; the pane closes a moment later) or from tmux for a dead pane.
pub(super) fn pane_exit(value: &str, pane_id: &str) -> Option<ExitInfo> {
    let exit_code = match pane_state(value, pane_id)? {
        (_, _, Some(reported)) => reported,
        (true, Some(status), None) => status,
        _ => return None,
    };
    Some(ExitInfo {
        exit_code: Some(exit_code),
        reason: "exited".into(),
        exited_at: Utc::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::{paint, pane_exit, seed};

    fn nz(n: u16) -> std::num::NonZeroU16 {
        std::num::NonZeroU16::new(n).unwrap()
    }

    #[test]
    fn a_seed_puts_the_screen_rows_and_the_cursor_where_tmux_has_them() {
        // Scrollback, then a screen whose content is on its top row (after `clear`, say).
        let lines: Vec<Vec<u8>> = ["h1", "h2", "h3", "h4", "h5", "top", "", "", "", ""]
            .iter()
            .map(|l| l.as_bytes().to_vec())
            .collect();
        let mut vt = vt100::Parser::new(nz(5), nz(20), 0);
        vt.process(&seed(&lines, &[b"1 0".to_vec()]));
        vt.process(b"NEXT");
        let rows: Vec<String> = vt.screen().rows(0, 20).collect();
        assert_eq!(rows, ["top", "NEXT", "", "", ""]);
    }

    #[test]
    fn a_paint_reproduces_the_rows_colours_cursor_and_screen() {
        // A row exactly as wide as the screen, a line tmux wrapped onto two rows, a prompt
        // whose trailing space matters.
        let lines = "\x1b[31mred\x1b[39m and a row exactly forty columns wide\n\
                     a long line that tmux wrapped over two rows of forty\nfake> \n";
        let mut vt = vt100::Parser::new(nz(4), nz(40), 0);
        vt.process(b"garbage that the paint must clear\r\nmore\r\nand more\r\n!");
        vt.process(&paint(lines, "3 6 0"));
        let rows: Vec<String> = vt.screen().rows(0, 40).collect();
        assert_eq!(
            rows,
            [
                "red and a row exactly forty columns wide",
                "a long line that tmux wrapped over two r",
                "ows of forty",
                "fake> "
            ]
        );
        assert!(!vt.screen().row_wrapped(0) && vt.screen().row_wrapped(1));
        assert_eq!(vt.screen().cursor_position(), (3, 6));
        assert_eq!(
            vt.screen().cell(0, 0).unwrap().fgcolor(),
            vt100::Color::Idx(1)
        );
        assert_eq!(
            vt.screen().cell(0, 4).unwrap().fgcolor(),
            vt100::Color::Default
        );
        let mut vt = vt100::Parser::new(nz(4), nz(40), 0);
        vt.process(&paint("top\n", "0 3 1"));
        assert!(vt.screen().alternate_screen());
        assert_eq!(vt.screen().contents(), "top");
    }

    #[test]
    fn pane_states_are_matched_to_our_pane() {
        let code = |v: &str| pane_exit(v, "%3").and_then(|e| e.exit_code);
        assert_eq!(code("%3|1|7|"), Some(7), "tmux knows the status");
        assert_eq!(
            code("%3|0||4"),
            Some(4),
            "the wrapper reported before the pane closed"
        );
        assert_eq!(code("%3|1||4"), Some(4));
        assert_eq!(code("%3|0||"), None, "alive");
        assert_eq!(code("%3|1||"), None, "dead, status not known yet");
        assert_eq!(code("%4|1|7|"), None, "another pane");
        assert_eq!(code(""), None);
        assert!(super::pane_is_dead("%3|1||", "%3") && !super::pane_is_dead("%3|0||", "%3"));
    }
}
