//! The signals the API accepts and what each does to a terminal session. Pure.

/// The signals the API accepts and what each does to a terminal session, following the ConPTY
/// design: SIGINT writes Ctrl-C (0x03), SIGQUIT writes Ctrl-\ (0x1c); SIGTERM, SIGKILL and
/// SIGHUP terminate the process.
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

/// A signal name the API does not accept; its message lists the accepted names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown signal '{}'; accepted: SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGHUP",
    .name.escape_debug()
)]
pub struct UnknownSignal {
    /// The name exactly as given.
    pub name: String,
}

/// Accepts "SIGINT", "INT", "sigint" etc. (surrounding whitespace ignored); `Err` for anything
/// else, with a message listing the accepted names.
pub fn signal_action(name: &str) -> Result<SignalAction, UnknownSignal> {
    let upper = name.trim().to_ascii_uppercase();
    let short = upper.strip_prefix("SIG").unwrap_or(&upper);
    match short {
        "INT" => Ok(SignalAction::Write(b"\x03")),
        "QUIT" => Ok(SignalAction::Write(b"\x1c")),
        "TERM" => Ok(SignalAction::Terminate(TermSignal::Term)),
        "KILL" => Ok(SignalAction::Terminate(TermSignal::Kill)),
        "HUP" => Ok(SignalAction::Terminate(TermSignal::Hup)),
        _ => Err(UnknownSignal {
            name: name.to_string(),
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
    }
}
