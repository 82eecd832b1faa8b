//! The signals the API accepts and what each does to a terminal session. Pure.
//!
//! Two sets, by the terminal a session has: a Unix terminal (a PTY, a tmux pane, on the host
//! or in a container) and a Windows console (ConPTY), which has no signals, only Ctrl-C,
//! Ctrl-Break and being closed. The backend names its set ([`Signals`]).

/// The signals the API accepts and what each does to a terminal session, following the ConPTY
/// design: SIGINT writes Ctrl-C (0x03), SIGQUIT writes Ctrl-\ (0x1c) on Unix and Ctrl-Break on
/// a Windows console; SIGTERM, SIGKILL and SIGHUP terminate the process (on Windows: close the
/// console's job, every process in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalAction {
    /// Write these bytes to the terminal, as if typed.
    Write(&'static [u8]),
    /// Terminate the session's process with this signal.
    Terminate(TermSignal),
}

/// How to terminate a session's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermSignal {
    Term,
    Kill,
    Hup,
}

/// Which terminal a session has, and so which signals it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Signals {
    /// A Unix terminal: SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGHUP.
    #[default]
    Unix,
    /// A Windows console (ConPTY): Ctrl-C, Ctrl-Break, close.
    Console,
}

/// Ctrl-Break as a Windows console reads it from its input: a key event (VK_CANCEL with Ctrl
/// held, down then up) in the `win32-input-mode` encoding ConPTY's input accepts.
pub const CTRL_BREAK: &[u8] = b"\x1b[3;70;0;1;8;1_\x1b[3;70;0;0;8;1_";

impl Signals {
    /// The accepted names and what each does, for error messages.
    pub fn accepted(self) -> &'static str {
        match self {
            Signals::Unix => "SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGHUP",
            Signals::Console => {
                "SIGINT (Ctrl-C), SIGBREAK or SIGQUIT (Ctrl-Break), SIGTERM, SIGKILL or SIGHUP \
                 (close: every process of the console ends); a Windows console has no other signal"
            }
        }
    }
}

/// A signal name the API does not accept; its message lists the accepted names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown signal '{}'; accepted: {}", .name.escape_debug(), .set.accepted())]
pub struct UnknownSignal {
    /// The name exactly as given.
    pub name: String,
    /// The set it was looked up in.
    pub set: Signals,
}

/// Accepts "SIGINT", "INT", "sigint" etc. (surrounding whitespace ignored) for a Unix
/// terminal; `Err` for anything else, with a message listing the accepted names.
pub fn signal_action(name: &str) -> Result<SignalAction, UnknownSignal> {
    signal_action_in(name, Signals::Unix)
}

/// [`signal_action`] for a terminal of the set `set`.
pub fn signal_action_in(name: &str, set: Signals) -> Result<SignalAction, UnknownSignal> {
    let upper = name.trim().to_ascii_uppercase();
    let short = upper.strip_prefix("SIG").unwrap_or(&upper);
    match (short, set) {
        ("INT", _) => Ok(SignalAction::Write(b"\x03")),
        ("QUIT", Signals::Unix) => Ok(SignalAction::Write(b"\x1c")),
        ("QUIT" | "BREAK", Signals::Console) => Ok(SignalAction::Write(CTRL_BREAK)),
        ("TERM", _) => Ok(SignalAction::Terminate(TermSignal::Term)),
        ("KILL", _) => Ok(SignalAction::Terminate(TermSignal::Kill)),
        ("HUP", _) => Ok(SignalAction::Terminate(TermSignal::Hup)),
        _ => Err(UnknownSignal {
            name: name.to_string(),
            set,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals() {
        use SignalAction::{Terminate, Write};
        let cases: &[(&str, SignalAction)] = &[
            ("SIGINT", Write(b"\x03")),
            ("INT", Write(b"\x03")),
            ("sigint", Write(b"\x03")),
            ("int", Write(b"\x03")),
            ("SigInt", Write(b"\x03")),
            (" SIGINT\n", Write(b"\x03")),
            ("SIGQUIT", Write(b"\x1c")),
            ("quit", Write(b"\x1c")),
            ("SIGTERM", Terminate(TermSignal::Term)),
            ("term", Terminate(TermSignal::Term)),
            ("SIGKILL", Terminate(TermSignal::Kill)),
            ("Kill", Terminate(TermSignal::Kill)),
            ("SIGHUP", Terminate(TermSignal::Hup)),
            ("hup", Terminate(TermSignal::Hup)),
        ];
        for (name, want) in cases {
            assert_eq!(signal_action(name), Ok(*want), "signal {name:?}");
        }
        for bad in [
            "",
            "SIG",
            "SIGSTOP",
            "9",
            "SIGSIGINT",
            "INTX",
            "SIG INT",
            "ſigint",
        ] {
            let err = signal_action(bad).expect_err(bad).to_string();
            assert!(
                err.contains("SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGHUP"),
                "{err}"
            );
        }
        assert_eq!(
            signal_action("STOP").map_err(|e| e.to_string()),
            Err(
                "unknown signal 'STOP'; accepted: SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGHUP".into()
            )
        );
        assert!(
            signal_action("BREAK").is_err(),
            "SIGBREAK is a console's only"
        );
    }

    #[test]
    fn a_windows_console_takes_ctrl_c_ctrl_break_and_close() {
        use SignalAction::{Terminate, Write};
        let console = |name| signal_action_in(name, Signals::Console);
        assert_eq!(console("SIGINT"), Ok(Write(b"\x03")));
        assert_eq!(console("sigbreak"), Ok(Write(CTRL_BREAK)));
        assert_eq!(console("QUIT"), Ok(Write(CTRL_BREAK)));
        assert_eq!(console("TERM"), Ok(Terminate(TermSignal::Term)));
        assert_eq!(console("SIGKILL"), Ok(Terminate(TermSignal::Kill)));
        assert_eq!(console("hup"), Ok(Terminate(TermSignal::Hup)));
        let err = console("SIGSTOP").unwrap_err().to_string();
        assert!(
            err.starts_with("unknown signal 'SIGSTOP'; accepted: SIGINT (Ctrl-C), SIGBREAK"),
            "{err}"
        );
        assert!(err.contains("no other signal"), "{err}");
        // Ctrl-Break is a key event, down then up, with Ctrl held (VK_CANCEL = 3, scan 70).
        assert_eq!(CTRL_BREAK, b"\x1b[3;70;0;1;8;1_\x1b[3;70;0;0;8;1_");
    }
}
