//! Group commit: many writers, one sync. A writer that has committed takes a ticket and waits
//! until a sync that *started after* its ticket has ended; one sync serves every ticket taken
//! before it began, so writers that commit together pay for one disk flush between them, and
//! nobody holds the database while the disk works.
//!
//! A failed sync is final: the disk may have dropped the data it could not write (a later sync
//! of the same file can succeed without it), so every wait after it fails too, and the log
//! reports itself unwritable until the hub restarts.

use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::watch;

use super::AuditError;

/// What the sync thread has done: every ticket up to `upto` is settled, with `error` if the
/// log cannot be made durable any more.
#[derive(Debug, Clone, Default)]
struct Done {
    upto: u64,
    error: Option<AuditError>,
}

#[derive(Default)]
struct Asked {
    tickets: u64,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    asked: Mutex<Asked>,
    wake: Condvar,
}

/// The handle writers wait on; dropping it stops the sync thread once it has served every
/// ticket taken.
pub struct GroupSync {
    shared: Arc<Shared>,
    done: watch::Receiver<Done>,
}

impl GroupSync {
    /// Starts the thread `name` that runs `sync` for each group.
    pub fn start(
        name: &str,
        mut sync: impl FnMut() -> Result<(), AuditError> + Send + 'static,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let (tx, done) = watch::channel(Done::default());
        let theirs = shared.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut settled = Done::default();
                loop {
                    let target = {
                        let mut asked = theirs.asked.lock().unwrap_or_else(|e| e.into_inner());
                        while asked.tickets == settled.upto && !asked.closed {
                            asked = theirs.wake.wait(asked).unwrap_or_else(|e| e.into_inner());
                        }
                        if asked.tickets == settled.upto {
                            return;
                        }
                        asked.tickets
                    };
                    if settled.error.is_none() {
                        settled.error = sync().err();
                    }
                    settled.upto = target;
                    tx.send_replace(settled.clone());
                }
            })?;
        Ok(GroupSync { shared, done })
    }

    /// Why the log can no longer be made durable, once a flush has failed.
    pub fn broken(&self) -> Option<AuditError> {
        self.done.borrow().error.clone()
    }

    /// Waits until everything committed before this call is durable.
    pub async fn wait(&self) -> Result<(), AuditError> {
        let ticket = {
            let mut asked = self.shared.asked.lock().unwrap_or_else(|e| e.into_inner());
            asked.tickets += 1;
            asked.tickets
        };
        self.shared.wake.notify_one();
        let mut done = self.done.clone();
        let settled = done
            .wait_for(|d| d.upto >= ticket)
            .await
            .map_err(|_| AuditError::SyncStopped)?
            .clone();
        settled.error.map_or(Ok(()), Err)
    }
}

impl Drop for GroupSync {
    fn drop(&mut self) {
        self.shared
            .asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed = true;
        self.shared.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    /// A disk that takes 5 ms a flush and makes durable what was written when it began.
    struct Disk {
        written: AtomicU64,
        durable: AtomicU64,
        flushes: AtomicU64,
    }

    fn disk() -> Arc<Disk> {
        Arc::new(Disk {
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        })
    }

    fn flusher(disk: &Arc<Disk>) -> impl FnMut() -> Result<(), AuditError> + Send + 'static {
        let disk = disk.clone();
        move || {
            let snapshot = disk.written.load(Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            disk.durable.fetch_max(snapshot, Ordering::SeqCst);
            disk.flushes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn each_writer_waits_for_a_flush_of_its_write_and_writers_share_flushes() {
        let disk = disk();
        let sync = Arc::new(GroupSync::start("test-sync", flusher(&disk)).unwrap());
        let writers: Vec<_> = (0..64)
            .map(|_| {
                let (disk, sync) = (disk.clone(), sync.clone());
                tokio::spawn(async move {
                    let mine = disk.written.fetch_add(1, Ordering::SeqCst) + 1;
                    sync.wait().await.unwrap();
                    assert!(
                        disk.durable.load(Ordering::SeqCst) >= mine,
                        "write {mine} acknowledged before it was flushed"
                    );
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let flushes = disk.flushes.load(Ordering::SeqCst);
        assert!(
            (1..32).contains(&flushes),
            "64 concurrent writers took {flushes} flushes"
        );
        // A writer alone still gets its own flush.
        disk.written.fetch_add(1, Ordering::SeqCst);
        sync.wait().await.unwrap();
        assert_eq!(disk.durable.load(Ordering::SeqCst), 65);
    }

    #[tokio::test]
    async fn a_failed_flush_fails_every_later_wait() {
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let sync = GroupSync::start("test-sync", move || {
            match counted.fetch_add(1, Ordering::SeqCst) {
                0 => Ok(()),
                _ => Err(AuditError::Wal {
                    path: "audit.db-wal".into(),
                    source: Arc::new(std::io::Error::other("EIO")),
                }),
            }
        })
        .unwrap();
        let text = |r: Result<(), AuditError>| r.map_err(|e| e.to_string());
        assert_eq!(text(sync.wait().await), Ok(()));
        assert_eq!(text(sync.wait().await), Err("audit.db-wal: EIO".into()));
        assert_eq!(text(sync.wait().await), Err("audit.db-wal: EIO".into()));
        assert_eq!(
            sync.broken().map(|e| e.to_string()).as_deref(),
            Some("audit.db-wal: EIO")
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "no flush after the failure"
        );
    }

    #[tokio::test]
    async fn dropping_the_handle_stops_the_thread() {
        let disk = disk();
        let sync = GroupSync::start("test-sync", flusher(&disk)).unwrap();
        sync.wait().await.unwrap();
        let mut done = sync.done.clone();
        drop(sync);
        // The thread drops its sender when it returns.
        tokio::time::timeout(Duration::from_secs(5), done.wait_for(|_| false))
            .await
            .expect("the sync thread did not stop")
            .map(|_| ())
            .expect_err("no sync after the drop");
    }
}
