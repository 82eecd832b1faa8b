//! Writing input to a session, with the command guard enforced here, inside the session.
//!
//! Every operation for someone using the terminal takes that caller's [`Actor`] and checks
//! what it would run against the guard for the actor's role before a byte is written: a line
//! ([`Session::send_line`]), keys that spell a line ([`Session::send_keys`]), raw bytes
//! ([`Session::send_bytes`]), a talk command ([`Session::talk`]), a prompt
//! ([`Session::check_line`], used by `delivery`), and keystrokes collected into a line
//! ([`Session::type_input`], the WebSocket viewer). So no caller can forget the guard.
//!
//! The hub's own writes (interrupts, a policy's warning line, the Enter of a delivery, the
//! line-kill after a refused line, a talk's line once its command passed) go through the
//! explicitly named [`Session::send_unchecked`] and [`Session::send_own_unchecked`].

use chrono::Utc;

use super::{input, submits, Session};
use crate::actor::Actor;
use crate::error::{HubError, HubResult};
use crate::guard::Guard;

/// The line being typed over a raw-input channel (a WebSocket viewer), simple editing
/// applied, so the line a keystroke ends is checked whole.
#[derive(Debug, Default)]
pub struct TypedLine(Vec<u8>);

/// What became of keystrokes given to [`Session::type_input`].
#[derive(Debug)]
pub enum Typed {
    /// Keystrokes that end no line: written.
    Keys,
    /// They end a line that passed the guard: not written yet, write it with
    /// [`Session::write_line`] (the caller may record it first or after).
    Line(CheckedLine),
    /// They end a line the guard refused: nothing of them was written, and the line already
    /// in the program's line editor was killed (Ctrl-U).
    Refused { line: String, error: HubError },
}

/// Typed bytes ending a line that passed the guard; only the session makes one.
#[derive(Debug)]
pub struct CheckedLine {
    bytes: Vec<u8>,
    line: String,
}

impl CheckedLine {
    /// The line as the program's line editor sees it.
    pub fn line(&self) -> &str {
        &self.line
    }
}

/// The guard for a line `actor` is about to submit (a `send_line`, a prompt): as sent and as it
/// will be typed (escapes such as `\xNN` decoded).
pub fn check_line(guard: &Guard, actor: &Actor, text: &str) -> HubResult<()> {
    guard.check_input(text, actor.role())?;
    guard.check_typed(&input::line_bytes(text), actor.role())
}

/// Ctrl-U: the terminal's line-kill character.
const LINE_KILL: u8 = 0x15;

impl Session {
    /// Raw bytes typed by `actor`: bytes that end a line are checked as the line they spell.
    pub async fn send_bytes(&self, actor: &Actor, bytes: Vec<u8>) -> HubResult<()> {
        self.guard.check_typed(&bytes, actor.role())?;
        self.write_input(bytes, true).await
    }

    /// Refuses input while `engine` (the endpoint this terminal goes through) does not
    /// answer; `None` takes input again.
    pub fn set_unreachable(&self, engine: Option<String>) {
        *self.unreachable.lock().unwrap_or_else(|e| e.into_inner()) = engine;
    }

    fn unreachable_engine(&self) -> Option<String> {
        self.unreachable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Types one line for `actor` and presses Enter (see [`input::line_bytes`]); the line is
    /// checked as sent and as it will be typed (escapes such as `\xNN` decoded).
    pub async fn send_line(&self, actor: &Actor, text: &str) -> HubResult<usize> {
        self.check_line(actor, text)?;
        let bytes = input::line_bytes(text);
        let n = bytes.len();
        self.write_input(bytes, true).await?;
        Ok(n)
    }

    /// Presses named keys for `actor`; keys that spell a line pass the guard like a line.
    pub async fn send_keys(&self, actor: &Actor, names: &[String]) -> HubResult<usize> {
        let bytes = input::keys_bytes(names).map_err(|e| HubError::bad_request(e.to_string()))?;
        let n = bytes.len();
        self.send_bytes(actor, bytes).await?;
        Ok(n)
    }

    /// The guard for a line `actor` is about to submit (see [`check_line`]).
    pub fn check_line(&self, actor: &Actor, text: &str) -> HubResult<()> {
        check_line(&self.guard, actor, text)
    }

    /// The guard for a command line `actor` runs whole (a talk).
    pub(super) fn check_command(&self, actor: &Actor, command: &str) -> HubResult<()> {
        self.guard.check_input(command, actor.role())
    }

    /// Keystrokes from `actor`, collected into `typed`: keystrokes that end no line are
    /// written at once; a line end makes the whole line pass the guard first.
    pub async fn type_input(
        &self,
        actor: &Actor,
        typed: &mut TypedLine,
        bytes: Vec<u8>,
    ) -> HubResult<Typed> {
        let Some(last_end) = bytes.iter().rposition(|b| matches!(b, b'\r' | b'\n')) else {
            crate::guard::edit_line(&mut typed.0, &bytes);
            self.write_input(bytes, true).await?;
            return Ok(Typed::Keys);
        };
        crate::guard::edit_line(&mut typed.0, &bytes[..last_end]);
        let line = String::from_utf8_lossy(&std::mem::take(&mut typed.0)).into_owned();
        // What follows the last line end begins the next line.
        crate::guard::edit_line(&mut typed.0, &bytes[last_end + 1..]);
        if let Err(error) = self.guard.check_input(&line, actor.role()) {
            // The keys are in the program's line editor already: kill the line so the refused
            // command does not linger there.
            let _ = self.send_unchecked(vec![LINE_KILL]).await;
            return Ok(Typed::Refused { line, error });
        }
        Ok(Typed::Line(CheckedLine { bytes, line }))
    }

    /// Writes a line that passed the guard in [`Session::type_input`].
    pub async fn write_line(&self, checked: CheckedLine) -> HubResult<()> {
        self.write_input(checked.bytes, true).await
    }

    /// The hub's own input that counts as input to the session (an interrupt, a delivery's
    /// Enter, a talk's line after its command passed): NOT checked by the guard.
    pub async fn send_unchecked(&self, bytes: Vec<u8>) -> HubResult<()> {
        self.write_input(bytes, true).await
    }

    /// The hub's own input that is not the input of someone using the session (a policy's
    /// warning line): NOT checked, and it neither counts as activity nor sets the `working`
    /// hold.
    pub async fn send_own_unchecked(&self, bytes: Vec<u8>) -> HubResult<()> {
        self.write_input(bytes, false).await
    }

    async fn write_input(&self, bytes: Vec<u8>, counts: bool) -> HubResult<()> {
        if let Some(exit) = self.output.exit() {
            return Err(self.exited_error(exit, String::new()));
        }
        if let Some(endpoint) = self.unreachable_engine() {
            return Err(HubError::DockerUnavailable {
                endpoint,
                reason: "the agent's engine does not answer; nothing was written (send it again when the agent is running)".into(),
            });
        }
        let submits = submits(&bytes);
        // Taken before writing: the program may answer before the write returns.
        let sent_at = tokio::time::Instant::now();
        self.backend.write(bytes).await?;
        if counts {
            self.lock().last_input_at = Some(Utc::now());
            self.watch_changing(|w| w.note_input(submits, sent_at));
            self.inputs.send_modify(|n| *n += 1);
        }
        Ok(())
    }
}
