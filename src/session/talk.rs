//! `talk`: run one shell command in a session and return only its output and exit code.
//!
//! The typed line is `printf '__AH_%s_B\r\033[K' N; COMMAND; printf '\n__AH_%s_E%d\r\033[K' N
//! "$?"`. The shell echoes that line back, but the echo never contains the markers themselves
//! (`__AH_<N>_B`, `__AH_<N>_E<code>`), which only exist once `printf` has run, so the echo
//! cannot end a talk early, and a random nonce keeps the command's own output from doing so.
//! Each marker ends with CR and erase-line, so it is in the byte stream (where the scanner
//! needs it) but not on the screen of people watching the session: the next output overwrites
//! its row. The scanner never touches the shared scrollback: it reads its own copy of the
//! stream.

use std::time::{Duration, Instant};

use rand::Rng;

use crate::error::{HubError, HubResult};
use crate::output::{CursorItem, OutputCursor};

/// Most bytes of a talk's output kept; beyond this the oldest are dropped and the
/// result says `truncated`.
pub const MAX_TALK_CAPTURE_BYTES: usize = 4 << 20;

/// What ends a marker: back to the start of its row and erase the row.
const MARKER_END: &[u8] = b"\r\x1b[K";

/// What to type for a talk, and how to recognise its end.
#[derive(Debug, Clone)]
pub struct TalkPlan {
    /// The command line to type (without the final Enter).
    pub line: String,
    /// The nonce in the markers (the caller's sentinel, or a random one).
    pub sentinel: String,
}

/// Why a talk cannot be planned: the request is wrong, and the message says what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TalkError {
    #[error("talk runs one line: the command must not contain CR or LF")]
    MultiLine,
    #[error("command must not be empty")]
    EmptyCommand,
    #[error("sentinel must be 1-64 characters of A-Z, a-z, 0-9 and _")]
    BadSentinel,
}

/// Builds the plan for `command`. A caller-supplied sentinel must be 1-64 characters of
/// `[A-Za-z0-9_]` so it can sit in the command line unquoted.
pub fn plan(command: &str, sentinel: Option<&str>) -> Result<TalkPlan, TalkError> {
    if command.contains(['\r', '\n']) {
        return Err(TalkError::MultiLine);
    }
    if command.trim().is_empty() {
        return Err(TalkError::EmptyCommand);
    }
    let sentinel = match sentinel {
        Some(s) => {
            let valid = !s.is_empty()
                && s.len() <= 64
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(TalkError::BadSentinel);
            }
            s.to_string()
        }
        // 48 random bits: no command's output guesses it, and the typed line stays short
        // (a line longer than the terminal is wide makes the shell redraw as it wraps).
        None => format!("{:012x}", rand::rng().random::<u64>() >> 16),
    };
    let line = format!(
        "printf '__AH_%s_B\\r\\033[K' {sentinel}; {command}; printf '\\n__AH_%s_E%d\\r\\033[K' {sentinel} \"$?\""
    );
    Ok(TalkPlan { line, sentinel })
}

/// Incremental recogniser of a talk's markers in the session's output stream.
pub struct TalkScanner {
    begin: Vec<u8>,
    end: Vec<u8>,
    raw: Vec<u8>,
    /// Index in `raw` where the command's own output starts (after the begin marker line).
    body_start: Option<usize>,
    /// Everything before this index has been searched for the marker being looked for.
    scanned_to: usize,
    truncated: bool,
}

/// A finished talk, as found in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TalkCapture {
    /// The command's output bytes (terminal line endings and escapes included).
    pub body: Vec<u8>,
    pub exit_code: Option<i32>,
    /// Everything seen since the line was typed (echo and markers included).
    pub raw: Vec<u8>,
    pub truncated: bool,
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

impl TalkScanner {
    /// A scanner for the markers of `sentinel`.
    pub fn new(sentinel: &str) -> Self {
        TalkScanner {
            begin: format!("__AH_{sentinel}_B").into_bytes(),
            end: format!("__AH_{sentinel}_E").into_bytes(),
            raw: Vec::new(),
            body_start: None,
            scanned_to: 0,
            truncated: false,
        }
    }

    /// Adds output; returns the capture once the end marker line is complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<TalkCapture> {
        self.raw.extend_from_slice(bytes);
        if self.body_start.is_none() {
            if let Some(at) = find(&self.raw, &self.begin, self.scanned_to) {
                match find(&self.raw, MARKER_END, at) {
                    Some(end) => {
                        self.body_start = Some(end + MARKER_END.len());
                        self.scanned_to = end + MARKER_END.len();
                    }
                    None => return None,
                }
            } else {
                self.scanned_to = self.raw.len().saturating_sub(self.begin.len());
            }
        }
        let body_start = self.body_start?;
        let found = find(&self.raw, &self.end, self.scanned_to.max(body_start));
        let Some(at) = found else {
            self.scanned_to = self
                .raw
                .len()
                .saturating_sub(self.end.len())
                .max(body_start);
            self.cap();
            return None;
        };
        let digits_from = at + self.end.len();
        let marker_end = find(&self.raw, MARKER_END, digits_from)?;
        let code_text = String::from_utf8_lossy(&self.raw[digits_from..marker_end]);
        let exit_code = code_text.parse::<i32>().ok();
        let nl = marker_end + MARKER_END.len() - 1;
        let mut body = self.raw[body_start..at].to_vec();
        // The end marker's own leading newline is ours, not the command's.
        if body.ends_with(b"\r\n") {
            body.truncate(body.len() - 2);
        } else if body.ends_with(b"\n") {
            body.truncate(body.len() - 1);
        }
        Some(TalkCapture {
            body,
            exit_code,
            raw: self.raw[..=nl].to_vec(),
            truncated: self.truncated,
        })
    }

    /// Output seen so far after the begin marker (or everything, before it is seen).
    pub fn partial(&self) -> &[u8] {
        &self.raw[self.body_start.unwrap_or(0).min(self.raw.len())..]
    }

    /// Notes that bytes were lost before the scanner saw them.
    pub fn mark_truncated(&mut self) {
        self.truncated = true;
    }

    /// Keeps memory bounded for commands with huge output: drops the oldest half of the body.
    fn cap(&mut self) {
        if self.raw.len() <= MAX_TALK_CAPTURE_BYTES {
            return;
        }
        let drop = self.raw.len() / 2;
        self.raw.drain(..drop);
        self.body_start = self.body_start.map(|s| s.saturating_sub(drop));
        self.scanned_to = self.scanned_to.saturating_sub(drop);
        self.truncated = true;
    }
}

// ---- a talk on a session ------------------------------------------------------------------

pub use crate::term::TalkResult;

impl super::Session {
    /// Runs one shell command for `actor` (checked by the guard first) and returns its output
    /// and exit code. Talks on one session queue behind each other; other readers are not
    /// disturbed.
    pub async fn talk(
        &self,
        actor: &crate::actor::Actor,
        command: &str,
        sentinel: Option<&str>,
        timeout: Duration,
    ) -> HubResult<TalkResult> {
        self.check_command(actor, command)?;
        if let Some(whole) = self.backend.talk(command, sentinel, timeout) {
            return whole.await;
        }
        let plan = plan(command, sentinel).map_err(|e| HubError::bad_request(e.to_string()))?;
        let _turn = self.talk_lock.lock().await;
        let started = Instant::now();
        let mut scanner = TalkScanner::new(&plan.sentinel);
        let mut cursor = OutputCursor::new(self.output.clone(), self.output.end_offset());
        let mut line = plan.line.clone().into_bytes();
        line.push(b'\r');
        self.send_unchecked(line).await?;

        let partial = |s: &TalkScanner| super::input::plain_text(s.partial());
        let deadline = tokio::time::Instant::now() + timeout;
        let capture = loop {
            match tokio::time::timeout_at(deadline, cursor.next()).await {
                Err(_) => {
                    return Err(HubError::Timeout {
                        timeout_ms: timeout.as_millis() as u64,
                        output: partial(&scanner),
                    })
                }
                Ok(Some(CursorItem::Data {
                    bytes,
                    dropped_bytes,
                })) => {
                    if dropped_bytes > 0 {
                        scanner.mark_truncated();
                    }
                    if let Some(c) = scanner.feed(&bytes) {
                        break c;
                    }
                }
                Ok(Some(CursorItem::Exited(exit))) => {
                    return Err(self.exited_error(exit, partial(&scanner)));
                }
                Ok(None) => {
                    return Err(HubError::ReadFailed {
                        reason: "the session's output stream closed".into(),
                    })
                }
            }
        };
        Ok(TalkResult {
            output: super::input::plain_text(&capture.body),
            exit_code: capture.exit_code,
            sentinel: plan.sentinel,
            raw_output: String::from_utf8_lossy(&capture.raw).into_owned(),
            duration_ms: started.elapsed().as_millis() as u64,
            truncated: capture.truncated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed_echo(plan: &TalkPlan) -> Vec<u8> {
        format!("{}\r\n", plan.line).into_bytes()
    }

    #[test]
    fn echo_of_the_typed_line_never_ends_the_talk() {
        let p = plan("echo hi", Some("abc")).unwrap();
        let mut s = TalkScanner::new(&p.sentinel);
        assert!(s.feed(&typed_echo(&p)).is_none());
        assert!(s.feed(b"__AH_abc_B\r\x1b[Khi\r\n").is_none());
        let c = s.feed(b"\r\n__AH_abc_E0\r\x1b[K$ ").unwrap();
        assert_eq!(c.body, b"hi\r\n");
        assert_eq!(c.exit_code, Some(0));
        assert!(!c.truncated);
    }

    #[test]
    fn end_marker_split_anywhere_and_multi_digit_codes() {
        let p = plan("false", Some("n1")).unwrap();
        let stream = [
            typed_echo(&p),
            b"__AH_n1_B\r\x1b[Kout\r\n__AH_n1_E127\r\x1b[K".to_vec(),
        ]
        .concat();
        for split in 0..stream.len() {
            let mut s = TalkScanner::new("n1");
            let first = s.feed(&stream[..split]);
            let c = first.or_else(|| s.feed(&stream[split..])).unwrap();
            assert_eq!(c.exit_code, Some(127), "split at {split}");
            assert_eq!(c.body, b"out");
        }
    }

    #[test]
    fn output_that_looks_like_a_marker_of_another_nonce_is_output() {
        let mut s = TalkScanner::new("real");
        s.feed(b"__AH_real_B\r\x1b[K");
        assert!(s.feed(b"__AH_fake_E0\r\n__AH_real_B\r\n").is_none());
        let c = s.feed(b"\r\n__AH_real_E3\r\x1b[K").unwrap();
        assert_eq!(c.body, b"__AH_fake_E0\r\n__AH_real_B\r\n");
        assert_eq!(c.exit_code, Some(3));
    }

    #[test]
    fn plan_rejects_newlines_empty_commands_and_unsafe_sentinels() {
        assert!(plan("a\nb", None).is_err());
        assert!(plan("  ", None).is_err());
        assert!(plan("ls", Some("a b")).is_err());
        assert!(plan("ls", Some("x'; rm")).is_err());
        let p = plan("ls", None).unwrap();
        assert_eq!(p.sentinel.len(), 12);
        assert!(p.sentinel.chars().all(|c| c.is_ascii_hexdigit()));
        // Short enough that `talk true` fits a 120-column line after a 22-character prompt
        // (`agent@<container>:/$ `): a wrapped line costs a redraw (+0.35 ms per talk).
        assert!(plan("true", None).unwrap().line.len() <= 98);
        assert!(!p.line.contains(&format!("__AH_{}_B", p.sentinel)));
        assert!(!p.line.contains(&format!("__AH_{}_E", p.sentinel)));
    }

    #[test]
    fn huge_output_is_capped_and_flagged() {
        let mut s = TalkScanner::new("z");
        s.feed(b"__AH_z_B\r\x1b[K");
        let block = vec![b'x'; 1 << 20];
        for _ in 0..10 {
            assert!(s.feed(&block).is_none());
        }
        let c = s.feed(b"\n__AH_z_E0\r\x1b[K").unwrap();
        assert!(c.truncated);
        assert!(c.body.len() <= MAX_TALK_CAPTURE_BYTES + (1 << 20));
        assert_eq!(c.exit_code, Some(0));
    }
}
