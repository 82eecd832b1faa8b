//! Following one agent's record files while its session lives: a look every [`LOOK_EVERY`]
//! (a directory walk and a `stat` per file; a file is read only where it grew), and a last
//! look when the session ends, so the last turn is counted too. A directory is followed for
//! one session at a time: two sessions writing to it could not be told apart.

use std::collections::HashMap;
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
    /// Where counting starts in each file (a host session's CLI counts only what it writes
    /// after the session started); nothing for an agent's own records.
    pub from: HashMap<String, u64>,
}

impl Ledger {
    /// Follows `what` until `until` is cancelled. The looks read the files on the task's own
    /// thread: a walk of a few directories and the lines a second added (the status files are
    /// followed the same way).
    /// Refused (with the reason) when another live session's records are followed there.
    pub fn follow(
        self: &Arc<Self>,
        what: Following,
        until: CancellationToken,
    ) -> Result<(), String> {
        self.claim(&what)?;
        let ledger = self.clone();
        tokio::spawn(async move {
            let mut counted = what.from.clone();
            for (file, end) in ledger.read_up_to(&what.agent) {
                let from = counted.entry(file).or_default();
                *from = end.max(*from);
            }
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
                    ledger.release(&what);
                    return;
                }
            }
        });
        Ok(())
    }

    /// Takes `what`'s directory for its session, unless another one has it.
    fn claim(&self, what: &Following) -> Result<(), String> {
        let mut followed = self.followed.lock().unwrap_or_else(|e| e.into_inner());
        match followed.get(&what.dir) {
            Some(other) if *other != what.agent => Err(format!(
                "its records ({}) are {other}'s too: the hub cannot tell which session wrote them",
                what.dir.display()
            )),
            _ => {
                followed.insert(what.dir.clone(), what.agent.clone());
                Ok(())
            }
        }
    }

    fn release(&self, what: &Following) {
        let mut followed = self.followed.lock().unwrap_or_else(|e| e.into_inner());
        if followed.get(&what.dir) == Some(&what.agent) {
            followed.remove(&what.dir);
        }
    }
}
