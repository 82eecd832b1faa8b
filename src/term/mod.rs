//! The terminal's vocabulary, shared by every layer above it: a size in cells, the signals a
//! terminal's processes can get, key names and their bytes, and what a talk returns. Pure data
//! and pure functions; `backend` and `session` build on it.

pub mod keys;
pub mod signal;
mod size;
mod talk;

pub use keys::{key_bytes, keys_bytes, UnknownKey};
pub use signal::{
    signal_action, signal_action_in, SignalAction, Signals, TermSignal, UnknownSignal,
};
pub use size::TermSize;
pub use talk::TalkResult;
