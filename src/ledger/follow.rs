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
    /// Follows `what` until `until` is cancelled.
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
                files = match ledger.look(&what, files).await {
                    Some(files) => files,
                    None => return,
                };
                if ended {
                    return;
                }
            }
        });
    }

    /// Counts what `files` gained; gives them back (`None` when the look could not run).
    async fn look(
        self: &Arc<Self>,
        what: &Following,
        mut files: RecordFiles,
    ) -> Option<RecordFiles> {
        let (files, reads) = tokio::task::spawn_blocking(move || {
            let reads = files.poll();
            (files, reads)
        })
        .await
        .ok()?;
        if !reads.is_empty() {
            self.record(&what.agent, &what.team, reads);
        }
        Some(files)
    }
}
