//! Delivering a prompt so that an agent TUI really submits it, with a receipt. A shell takes a
//! typed line and Enter; agent TUIs need more: multi-line text must arrive as one bracketed
//! paste (when the program enabled DECSET 2004) or its newlines submit early, Enter must come
//! after the paste has been taken in, and an Enter that was swallowed must be pressed again.
//!
//! Steps: wait while the agent's MCP connection to the hub is awaited; refuse when the agent
//! is `blocked` (a prompt would answer its question) unless forced; paste or type the text;
//! wait until the screen shows it; pause; Enter; wait for a meaningful screen change; Enter
//! once more if none, or if the change was the Enter taken as a newline (Gemini CLI does that
//! with an Enter it reads too soon after a paste); receipt `submitted` or `stalled`.

use std::time::Duration;

use serde::Serialize;

use crate::actor::Actor;
use crate::agent_state::State;
use crate::error::{HubError, HubResult};
use crate::session::Session;

/// Pause between the text and Enter, so the program has taken the paste in.
pub const SUBMIT_PAUSE: Duration = Duration::from_millis(150);
/// How long to wait for the screen to answer an Enter before pressing it again / giving up.
pub const CONFIRM_WITHIN: Duration = Duration::from_millis(1500);

const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";

/// How a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Receipt {
    /// The screen changed after Enter: the program took the prompt.
    Submitted,
    /// The screen did not change after two Enters.
    Stalled,
    /// Nothing was typed: the agent is `limited` (a usage or rate limit) and its policy waits
    /// it out; the prompt is delivered once the limit is over (`queued_until` when known). Or
    /// the agent was `working` and the sender asked not to type into its work
    /// ([`Options::queue_while_working`]): delivered once it is `idle`.
    Queued,
}

/// What a delivery did.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryReport {
    pub receipt: Receipt,
    /// The text went as one bracketed paste.
    pub bracketed_paste: bool,
    /// How many times Enter was pressed (1 or 2).
    pub enters: u8,
    pub bytes_written: usize,
    /// The agent's state before delivery.
    pub state_before: State,
    /// For a `queued` prompt: when the limit is expected to end, if the screen says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_until: Option<chrono::DateTime<chrono::Utc>>,
}

/// Options of a delivery.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Send even when the agent is blocked on a question.
    pub force: bool,
    pub pause: Duration,
    pub confirm_within: Duration,
    /// Queue the prompt while the agent is `working` (or has prompts queued already), to be
    /// delivered in order once it is `idle`, instead of typing it into its work.
    pub queue_while_working: bool,
}

/// Who a prompt is from.
#[derive(Debug, Clone, Copy)]
pub enum By<'a> {
    /// Someone using the session: the text passes the command guard for this actor.
    Caller(&'a Actor),
    /// The hub itself (a policy's warning line): not checked, and written without counting
    /// as activity.
    Hub,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            force: false,
            pause: SUBMIT_PAUSE,
            confirm_within: CONFIRM_WITHIN,
            queue_while_working: false,
        }
    }
}

/// The bytes of `text` without Enter, literally (a prompt is text, not `send_line`'s escape
/// notation: `printf("a\n")` arrives as written): one bracketed paste with line breaks as CR
/// when `paste` (paste markers inside the text are removed, so it cannot end the paste early),
/// else one typed line with its line breaks turned into spaces (each would submit early).
pub fn payload(text: &str, paste: bool) -> Vec<u8> {
    let text = text.trim_end_matches(['\r', '\n']);
    if text.is_empty() {
        return Vec::new();
    }
    let lines: Vec<&str> = text.split('\n').map(|l| l.trim_end_matches('\r')).collect();
    if !paste {
        let line = lines.join(" ");
        return line.bytes().filter(|&b| b != b'\r').collect();
    }
    let body = lines
        .join("\r")
        .replace("\x1b[201~", "")
        .replace("\x1b[200~", "");
    let mut out = PASTE_START.to_vec();
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(PASTE_END);
    out
}

/// Submits `text` from `by` to the session's program and reports whether it took it. A
/// caller's text passes the command guard before anything is written.
pub async fn submit(
    session: &Session,
    by: By<'_>,
    text: &str,
    opts: Options,
) -> HubResult<DeliveryReport> {
    if let By::Caller(actor) = by {
        session.check_line(actor, text)?;
    }
    // A prompt taken before the program's MCP connection to the hub is up is answered
    // without the hub's tools.
    session.mcp_ready().await;
    let before = session.state_report();
    if before.state == State::Blocked && !opts.force {
        return Err(HubError::AgentBlocked {
            evidence: before.evidence,
        });
    }
    let paste = session.bracketed_paste();
    let body = payload(text, paste);
    let mut bytes_written = body.len();
    let write = |bytes: Vec<u8>| async move {
        // Checked above as a whole: what is written now is the hub's doing.
        match by {
            By::Hub => session.send_own_unchecked(bytes).await,
            By::Caller(_) => session.send_unchecked(bytes).await,
        }
    };
    if !body.is_empty() {
        let echo = Echo::new(session, text);
        write(body).await?;
        // Enter only once the program has shown the text (or has had `confirm_within` to): a
        // TUI that was busy when the text came reads it and the Enter behind it at once (Gemini
        // CLI then drops the Enter, or takes it for a newline).
        echo.shown(session, opts.confirm_within).await;
        tokio::time::sleep(opts.pause).await;
    }
    for enters in 1..=2u8 {
        if enters > 1 {
            tokio::time::sleep(opts.pause).await;
        }
        let baseline = session.screen_fingerprint();
        let caret = Caret::of(session);
        write(b"\r".to_vec()).await?;
        bytes_written += 1;
        if screen_changes(session, baseline, opts.confirm_within).await
            && !caret.went_to_a_new_line(&Caret::of(session))
        {
            return Ok(DeliveryReport {
                receipt: Receipt::Submitted,
                bracketed_paste: paste,
                enters,
                bytes_written,
                state_before: before.state,
                queued_until: None,
            });
        }
    }
    Ok(DeliveryReport {
        receipt: Receipt::Stalled,
        bracketed_paste: paste,
        enters: 2,
        bytes_written,
        state_before: before.state,
        queued_until: None,
    })
}

/// The end of a prompt's text as the program will show it, and how often the screen showed
/// it before the text was sent (the same words may be on the screen already).
struct Echo {
    tail: String,
    before: usize,
}

/// How much of the text's end is looked for: short enough to stay on one row.
const ECHO_CHARS: usize = 12;

impl Echo {
    fn new(session: &Session, text: &str) -> Self {
        let last = text
            .trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .trim_end();
        let skip = last.chars().count().saturating_sub(ECHO_CHARS);
        let tail: String = last.chars().skip(skip).collect();
        let before = Self::count(session, &tail);
        Echo { tail, before }
    }

    fn count(session: &Session, tail: &str) -> usize {
        if tail.is_empty() {
            return 0;
        }
        session.with_screen(|s| s.vt().contents().matches(tail).count())
    }

    /// Waits up to `within` for the screen to show the tail once more than before (or the
    /// program to end).
    async fn shown(&self, session: &Session, within: Duration) {
        let shown = || Self::count(session, &self.tail) > self.before;
        screen_until(session, within, Duration::ZERO, shown).await;
    }
}

/// The cursor's row as the screen shows it: the row's text, the text left of the cursor, the
/// row above, and whether any row below shows something.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Caret {
    row: String,
    left: String,
    above: String,
    below: bool,
}

impl Caret {
    fn of(session: &Session) -> Self {
        session.with_screen(|s| {
            let vt = s.vt();
            let (row, col) = vt.cursor_position();
            let rows: Vec<String> = vt.rows(0, vt.size().1.get()).collect();
            let text = |r: u16| rows.get(usize::from(r)).cloned().unwrap_or_default();
            let row_text = text(row);
            Caret {
                left: row_text.chars().take(usize::from(col)).collect(),
                above: row.checked_sub(1).map(text).unwrap_or_default(),
                below: rows.iter().skip(usize::from(row) + 1).any(|r| !blank(r)),
                row: row_text,
            }
        })
    }

    /// Whether Enter only moved the cursor to a new, empty line of the program's input box
    /// (the program took it as a newline): the row the cursor was on is now the row above it,
    /// unchanged, nothing but blanks and borders is left of the cursor, and the box's rest (a
    /// footer) is drawn below it. A submitted prompt clears the input instead, a shell shows
    /// its prompt on the new line, and a line-mode program leaves nothing below the cursor.
    fn went_to_a_new_line(&self, after: &Caret) -> bool {
        !blank(&self.row)
            && after.above.trim_end() == self.row.trim_end()
            && blank(&after.left)
            && after.below
    }
}

/// The receipt of keys pressed when the screen's fingerprint was `baseline`: `submitted` when
/// the screen changed within [`CONFIRM_WITHIN`] (or the program ended), else `stalled`.
pub async fn keys_receipt(session: &Session, baseline: u64) -> Receipt {
    if screen_changes(session, baseline, CONFIRM_WITHIN).await {
        Receipt::Submitted
    } else {
        Receipt::Stalled
    }
}

/// Nothing but blanks and box borders.
fn blank(text: &str) -> bool {
    text.chars().all(|c| c.is_whitespace() || "│┃|".contains(c))
}

/// Waits up to `within` for the screen's fingerprint to differ from `baseline` (or the
/// program to end).
async fn screen_changes(session: &Session, baseline: u64, within: Duration) -> bool {
    // Let a burst of output land before looking again.
    let changed = || session.screen_fingerprint() != baseline;
    screen_until(session, within, Duration::from_millis(10), changed).await
}

/// Waits up to `within` for `done` to hold, looking again when output comes (`settle` after
/// it) or the program ends; whether `done` holds (or the program ended) at the end.
async fn screen_until(
    session: &Session,
    within: Duration,
    settle: Duration,
    done: impl Fn() -> bool,
) -> bool {
    let mut progress = session.output().watch_progress();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if session.output().exit().is_some() || done() {
            return true;
        }
        match tokio::time::timeout_at(deadline, progress.changed()).await {
            Ok(Ok(())) => tokio::time::sleep(settle).await,
            _ => return done(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caret(above: &str, row: &str, col: usize) -> Caret {
        Caret {
            row: row.into(),
            left: row.chars().take(col).collect(),
            above: above.into(),
            below: true,
        }
    }

    #[test]
    fn an_enter_taken_as_a_newline_is_told_from_a_submit() {
        let typed = caret("", " > please run a tool", 20);
        let table: &[(Caret, bool, &str)] = &[
            (
                caret(" > please run a tool", "", 3),
                true,
                "Gemini CLI's newline",
            ),
            (caret("│ > x", "│   ", 4), false, "another row above"),
            (
                caret("", " > Type your message", 3),
                false,
                "a cleared input",
            ),
            (
                caret(" > please run a tool", "$ ", 2),
                false,
                "a shell's next prompt",
            ),
            (
                caret(" > please run a tool", "│ ", 2),
                true,
                "a newline in a box",
            ),
        ];
        for (after, newline, what) in table {
            assert_eq!(typed.went_to_a_new_line(after), *newline, "{what}");
        }
        let line_mode = Caret {
            below: false,
            ..caret(" > please run a tool", "", 0)
        };
        assert!(!typed.went_to_a_new_line(&line_mode), "nothing drawn below");
        let empty = caret("", "", 0);
        assert!(
            !empty.went_to_a_new_line(&caret("", "", 0)),
            "nothing typed"
        );
    }

    #[test]
    fn payloads() {
        let table: &[(&str, bool, &[u8])] = &[
            ("ls -la", false, b"ls -la"),
            ("a\nb", false, b"a b"),
            (r#"printf("a\n") \\ x"#, false, br#"printf("a\n") \\ x"#),
            (
                "end\x1b[201~rm -rf ~",
                true,
                b"\x1b[200~endrm -rf ~\x1b[201~",
            ),
            ("a\nb", true, b"\x1b[200~a\rb\x1b[201~"),
            ("one line\n", true, b"\x1b[200~one line\x1b[201~"),
            ("x\r\ny", true, b"\x1b[200~x\ry\x1b[201~"),
            ("", false, b""),
            ("", true, b""),
        ];
        for (text, paste, expected) in table {
            assert_eq!(payload(text, *paste), *expected, "{text:?} {paste}");
        }
    }
}
