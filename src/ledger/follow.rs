//! Following one agent's record files while its session lives: a look every [`LOOK_EVERY`]
//! (a directory walk and a `stat` per file; a file is read only where it grew), and a last
//! look when the session ends, so the last turn is counted too.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Ledger;
use crate::usage::files::RecordFiles;
use crate::usage::records::Format;

/// How often an agent's record files are looked at.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Whose record files to follow, and where.
#[derive(Debug, Clone)]
pub struct Following {
    pub agent: String,
    pub team: String,
    /// The records' directory on this machine.
    pub dir: PathBuf,
    pub format: Format,
}

impl Ledger {
    /// Follows `what` until `until` is cancelled. The looks read the files on the task's own
    /// thread: a walk of a few directories and the lines a second added (the status files are
    /// followed the same way).
    pub fn follow(self: &Arc<Self>, what: Following, until: CancellationToken) {
        let ledger = self.clone();
        tokio::spawn(async move {
            let counted = ledger.read_up_to(&what.agent);
            let mut files = RecordFiles::new(what.dir.clone(), what.format, counted);
            loop {
                let ended = tokio::select! {
                    _ = until.cancelled() => true,
                    _ = tokio::time::sleep(LOOK_EVERY) => false,
                };
                let reads = files.poll();
                if !reads.is_empty() {
                    ledger.record(&what.agent, &what.team, reads);
                }
                if ended {
                    return;
                }
            }
        });
    }
}
