//! The log's two SQLite connections and the thread that serves them.
//!
//! Every write goes through the `write` connection. A request's own task takes it for the
//! moment an insert needs, so recording a keystroke costs no hop to another thread; only when
//! another write holds it does the write go to the thread, which waits its turn. Queries and
//! checkpoints run on the thread's own `read` connection (in WAL mode readers never block the
//! writer), so a long query never holds up a keystroke.
//!
//! Commits do not wait for the disk (`synchronous = NORMAL`) and never checkpoint (that would
//! flush on the request's task): [`super::sync`] makes commits durable in groups, and the
//! thread checkpoints the WAL at most once a [`CHECKPOINT_INTERVAL`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::{store, AuditError};

/// How often, at most, the thread copies the WAL into the database file.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

/// Work for the thread: gets its connection.
type Task = Box<dyn FnOnce(&Connection) + Send>;

enum Job {
    Read(Task),
    Write(Task),
}

/// The connection every write uses, and whether it wrote since the last checkpoint.
struct WriteSide {
    conn: Mutex<Connection>,
    dirty: AtomicBool,
}

impl WriteSide {
    fn run<T>(
        &self,
        conn: &Connection,
        f: impl FnOnce(&Connection) -> Result<T, AuditError>,
    ) -> Result<T, AuditError> {
        let result = f(conn);
        self.dirty.store(true, Ordering::Relaxed);
        result
    }
}

/// The open log; dropping it stops the thread.
pub struct Db {
    write: Arc<WriteSide>,
    jobs: Option<mpsc::Sender<Job>>,
    /// The WAL file, whose flush makes every commit before it durable.
    pub wal: Option<PathBuf>,
}

impl Db {
    /// Opens both connections and starts the thread.
    pub fn open(path: &Path) -> Result<Db, AuditError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| AuditError::Open {
                path: path.to_path_buf(),
                source: Arc::new(e),
            })?;
        }
        let open = || {
            store::open(path).map_err(|e| AuditError::OpenDb {
                path: path.to_path_buf(),
                source: Arc::new(e),
            })
        };
        let (write, read) = (open()?, open()?);
        let wal = write.path().map(|p| PathBuf::from(format!("{p}-wal")));
        let write = Arc::new(WriteSide {
            conn: Mutex::new(write),
            dirty: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::channel::<Job>();
        let side = write.clone();
        let jobs = std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || serve(read, &side, &rx))
            .map(|_| tx)
            .map_err(|e| tracing::error!("audit log: cannot start its thread: {e}"))
            .ok();
        Ok(Db { write, jobs, wal })
    }

    fn lock_write(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.write.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the write connection: here and now when it is free, else on the thread.
    pub async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, AuditError> + Send + 'static,
    ) -> Result<T, AuditError> {
        let busy = match self.write.conn.try_lock() {
            Ok(conn) => return self.write.run(&conn, f),
            Err(TryLockError::Poisoned(p)) => return self.write.run(&p.into_inner(), f),
            Err(TryLockError::WouldBlock) => f,
        };
        self.on_thread(Job::Write, busy).await
    }

    /// Runs `f` on the write connection, waiting for it (the log's opening, before any task
    /// uses it).
    pub fn write_blocking<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, AuditError>,
    ) -> Result<T, AuditError> {
        self.write.run(&self.lock_write(), f)
    }

    /// Runs `f` on the thread's write connection (long writes: retention, probes).
    pub async fn write_on_thread<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, AuditError> + Send + 'static,
    ) -> Result<T, AuditError> {
        self.on_thread(Job::Write, f).await
    }

    /// Runs `f` on the thread's read connection.
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, AuditError> + Send + 'static,
    ) -> Result<T, AuditError> {
        self.on_thread(Job::Read, f).await
    }

    async fn on_thread<T: Send + 'static>(
        &self,
        kind: fn(Task) -> Job,
        f: impl FnOnce(&Connection) -> Result<T, AuditError> + Send + 'static,
    ) -> Result<T, AuditError> {
        let (tx, rx) = oneshot::channel();
        let task: Task = Box::new(move |conn| {
            let _ = tx.send(f(conn));
        });
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|j| j.send(kind(task)).is_ok());
        if !sent {
            return Err(AuditError::NotRunning);
        }
        rx.await.unwrap_or(Err(AuditError::WriterStopped))
    }
}

/// The thread: runs jobs in order and checkpoints the WAL when it has grown.
fn serve(read: Connection, write: &WriteSide, jobs: &mpsc::Receiver<Job>) {
    let mut checkpointed = Instant::now();
    loop {
        match jobs.recv_timeout(CHECKPOINT_INTERVAL) {
            Ok(Job::Read(task)) => task(&read),
            Ok(Job::Write(task)) => {
                let conn = write.conn.lock().unwrap_or_else(|e| e.into_inner());
                task(&conn);
                write.dirty.store(true, Ordering::Relaxed);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        if checkpointed.elapsed() >= CHECKPOINT_INTERVAL
            && write.dirty.swap(false, Ordering::Relaxed)
        {
            if let Err(e) = read.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
                tracing::warn!("audit log: checkpoint failed: {e}");
            }
            checkpointed = Instant::now();
        }
    }
}

/// Flushes the WAL file at `wal` to disk: with `synchronous = NORMAL` a commit is in the WAL
/// and a completed checkpoint has flushed everything older to the database file, so this makes
/// every commit before it durable. The file is opened at the first flush that finds it (there
/// is nothing to flush before SQLite has made it).
pub fn flush_wal(wal: PathBuf) -> impl FnMut() -> Result<(), AuditError> + Send + 'static {
    let mut file: Option<std::fs::File> = None;
    move || {
        let failed = |e| AuditError::Wal {
            path: wal.clone(),
            source: Arc::new(e),
        };
        if file.is_none() {
            match std::fs::OpenOptions::new().write(true).open(&wal) {
                Ok(f) => file = Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(failed(e)),
            }
        }
        file.as_ref()
            .map_or(Ok(()), |f| f.sync_data())
            .map_err(failed)
    }
}
