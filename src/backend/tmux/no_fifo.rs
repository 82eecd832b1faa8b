//! Windows has no FIFOs: a pane's bytes always come through a relay beside the tmux server
//! (in the container), never through a FIFO of the hub's own (see [`super::pipe`]).

use std::path::PathBuf;

use super::place::PipeRoot;
use super::TmuxError;
use crate::backend::pane_reader::PaneReader;

/// What [`make`] would give where FIFOs exist (never made here).
#[allow(dead_code)]
pub(super) struct Made {
    pub reader: PaneReader,
    pub dir: String,
    pub local: PathBuf,
}

/// Always refused: no FIFO here.
pub(super) fn make(_root: &PipeRoot) -> Result<Made, TmuxError> {
    Err(TmuxError::NoFifos)
}
