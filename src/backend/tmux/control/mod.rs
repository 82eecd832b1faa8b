//! tmux control-mode protocol, pure and I/O-free: a streaming parser for what a
//! `tmux -C attach` client prints on stdout ([`parser`]: [`ControlParser`] →
//! [`ControlMessage`]), and builders for command lines written to its stdin ([`commands`]:
//! [`send_bytes_commands`], [`is_safe_name`]). Spawning tmux and owning its pipes belong to
//! the caller.
//!
//! Protocol facts this module relies on (checked against the tmux 3.3a source and a
//! live tmux 3.3a over pipes):
//!
//! * Every line ends with a bare `\n`; over a pipe tmux adds no `\r`, so none is
//!   stripped. Use `-C`, not `-CC` (`-CC` wraps the stream in a DCS for a TTY).
//! * `%output %<pane> <data>` (and, with `refresh-client -f pause-after=N`,
//!   `%extended-output %<pane> <age> ... : <data>`) carry raw pane bytes: every
//!   byte `< 0x20` and `\` is written as `\ooo` (3 octal digits); every other byte,
//!   0x7f and 0x80..=0xff included, is written as is, whatever the client's locale.
//!   A raw `\n` or `\r` therefore never occurs inside the data.
//! * Each command line sent on stdin yields one `%begin <time> <number> <flags>` ...
//!   `%end`/`%error` block carrying the same three arguments (an `a ; b` line yields
//!   one block per command, and none for `b` if `a` fails). `flags` is 1 for commands read from this client's
//!   stdin and 0 otherwise: the attach command's own (empty) block, which opens
//!   every session, and commands run by hooks. Notifications and `%output` are
//!   queued behind a block, never inside it (tmux(1): "A notification will never
//!   occur inside an output block"); the one 3.3a exception is `refresh-client -A
//!   '%N:pause'`/`':continue'`, which writes `%pause %N`/`%continue %N` inside its
//!   own reply block, so those arrive as reply lines. Reply lines may start with
//!   `%` (e.g. `display-message -p '#{pane_id}'` replies `%0`) and are kept whole.
//! * Commands that wait (`run-shell`, `if-shell`) print `%end` when they start, not
//!   when they finish. Reply text (not `%output`) has non-ASCII replaced by `_`
//!   unless the client runs in a UTF-8 locale or with `tmux -u`.
//! * `%exit [reason]` is printed by the client process itself as its last line.
//! * An empty line on stdin detaches the client, so no builder here returns one.

pub mod commands;
pub mod parser;

pub use commands::{is_safe_name, send_bytes_commands, MAX_NAME_LEN, SEND_CHUNK};
pub use parser::{ControlMessage, ControlParser};

#[cfg(test)]
mod real_tmux_tests;
