//! The durable audit and traffic log. Every operation that writes to a terminal or changes
//! state is recorded before its reply is sent: the attempt before it runs (if that fails the
//! operation is refused with `AUDIT_UNAVAILABLE`, unless `audit.fail_open`), then attempt and
//! outcome together in SQLite (WAL). Hub events that are actions of their own (policy actions,
//! agent lifecycle) are recorded as they happen. Commands and responses are redacted and capped
//! at [`MAX_FIELD_BYTES`].
//!
//! Nothing on a keystroke's way to the terminal waits for another thread or the disk: the
//! attempt is one line appended to the [`journal`] by the request's own task, and the outcome,
//! written after the terminal has its input, waits for a flush of the WAL that it shares with
//! every commit made at the same time ([`sync`]). The log hands out record ids itself, so an
//! attempt has its id before it reaches the database.

pub mod events;
mod journal;
pub mod store;
mod sync;
mod writer;

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;
use serde_json::{json, Value};
use tokio::sync::broadcast;

pub use crate::config::AuditConfig;
use store::Existing;
pub use store::{Filter, Record};
pub use writer::CHECKPOINT_INTERVAL;

pub use crate::config::MAX_FIELD_BYTES;
/// How often retention runs.
const CLEANUP_INTERVAL: Duration = Duration::from_secs(3600);

/// The audit log handle (cheap to clone).
#[derive(Clone)]
pub struct Audit {
    inner: Arc<Inner>,
}

struct Inner {
    config: AuditConfig,
    path: PathBuf,
    /// The open log; `None` when it is switched off or could not be opened.
    log: Option<Log>,
    /// The last record id handed out.
    last_id: AtomicI64,
    /// Flushes of the WAL, shared by the commits waiting for one; `None` with
    /// `synchronous = "normal"` (a commit then survives the hub, not the machine).
    sync: Option<Result<sync::GroupSync, AuditError>>,
    live: broadcast::Sender<Value>,
    last_error: Mutex<Option<AuditError>>,
    written: AtomicU64,
    unaudited: AtomicU64,
    meters: crate::metrics::AuditMeters,
}

/// The database, and the journal of attempts whose outcome is not in it yet. One without the
/// other is no log: without its journal the log cannot hand out ids safely (another hub may
/// be using it).
struct Log {
    db: writer::Db,
    journal: journal::Journal,
}

/// Why the log could not do what was asked. The log keeps a failure and answers it again
/// (a failed flush fails every later write, `health` shows the last error), so it is `Clone`
/// and holds its causes in an `Arc`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuditError {
    /// The log is switched off (`audit.enabled = false`).
    #[error("the audit log is switched off")]
    Off,
    /// A file of the log could not be opened or created (its directory, the attempts journal;
    /// another hub holding the journal is reported here).
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// SQLite could not open the database file.
    #[error("cannot open {}: {source}", path.display())]
    OpenDb {
        path: PathBuf,
        #[source]
        source: Arc<rusqlite::Error>,
    },
    /// A statement failed.
    #[error("{0}")]
    Sqlite(#[source] Arc<rusqlite::Error>),
    /// The log's thread is not running (it could not be started).
    #[error("the audit log is not running")]
    NotRunning,
    /// The log's thread ended before it answered.
    #[error("the audit writer stopped")]
    WriterStopped,
    /// An attempt could not be appended to the journal.
    #[error("cannot write the attempts journal: {0}")]
    Journal(#[source] Arc<std::io::Error>),
    /// The journal could not be emptied after its attempts were taken in.
    #[error("cannot empty {}: {source}", path.display())]
    ClearJournal {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// Flushing the WAL file to disk failed.
    #[error("{}: {source}", path.display())]
    Wal {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The thread that flushes the WAL could not be started.
    #[error("cannot start the audit sync thread: {0}")]
    SyncThread(#[source] Arc<std::io::Error>),
    /// The thread that flushes the WAL ended before it answered.
    #[error("the audit sync thread stopped")]
    SyncStopped,
    /// Records cannot be made durable: a flush failed (this and every later one), or the
    /// thread that flushes could not start or stopped.
    #[error("cannot flush the log to disk: {0}")]
    Flush(#[source] Box<AuditError>),
    /// `since`/`until` is not a time.
    #[error("'{text}' is neither RFC 3339 nor epoch milliseconds")]
    BadTime { text: String },
}

impl From<rusqlite::Error> for AuditError {
    fn from(e: rusqlite::Error) -> Self {
        AuditError::Sqlite(Arc::new(e))
    }
}

/// Whether a write must be on disk before it is answered.
#[derive(Clone, Copy, PartialEq)]
enum Durable {
    /// No: an attempt, made durable with its outcome before the reply.
    Later,
    Now,
}

impl Audit {
    /// Opens the log at the configured path.
    pub fn open(config: &AuditConfig, data_dir: &std::path::Path) -> Self {
        Self::open_with(config, data_dir, writer::flush_wal)
    }

    /// [`Audit::open`], with the flush of the WAL file given (tests watch it).
    fn open_with<F>(
        config: &AuditConfig,
        data_dir: &std::path::Path,
        flush: impl FnOnce(PathBuf) -> F,
    ) -> Self
    where
        F: FnMut() -> Result<(), AuditError> + Send + 'static,
    {
        let path = config
            .path
            .clone()
            .unwrap_or_else(|| data_dir.join(store::FILE_NAME));
        let db = config.enabled.then(|| writer::Db::open(&path));
        let mut flush = db
            .as_ref()
            .and_then(|db| db.as_ref().ok()?.wal.clone())
            .map(flush);
        let (mut log, mut last_id, mut error) = (None, 0, None);
        match db {
            Some(Ok(db)) => {
                match recover(&db, &path, flush.as_mut(), config.synchronous != "normal") {
                    Ok((journal, last)) => (log, last_id) = (Some(Log { db, journal }), last),
                    Err(e) => error = Some(e),
                }
            }
            Some(Err(e)) => error = Some(e),
            None => {}
        }
        let sync = match flush {
            Some(flush) if log.is_some() && config.synchronous != "normal" => Some(
                sync::GroupSync::start("audit-sync", flush)
                    .map_err(|e| AuditError::SyncThread(Arc::new(e))),
            ),
            _ => None,
        };
        if let Some(Err(e)) = &sync {
            error = Some(e.clone());
        }
        if let Some(e) = &error {
            tracing::error!("audit log: {e}");
        }
        Audit {
            inner: Arc::new(Inner {
                config: config.clone(),
                path,
                log,
                last_id: AtomicI64::new(last_id),
                sync,
                live: broadcast::channel(1024).0,
                last_error: Mutex::new(error),
                written: AtomicU64::new(0),
                unaudited: AtomicU64::new(0),
                meters: Default::default(),
            }),
        }
    }

    /// Whether operations go through when the log cannot be written.
    pub fn fail_open(&self) -> bool {
        self.inner.config.fail_open
    }

    /// Whether the log is kept at all.
    pub fn enabled(&self) -> bool {
        self.inner.config.enabled
    }

    /// The log's write latency and failure meters (for the hub's metrics).
    pub fn meters(&self) -> &crate::metrics::AuditMeters {
        &self.inner.meters
    }

    fn set_error(&self, e: AuditError) {
        *self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(e);
    }

    fn db(&self) -> Result<&writer::Db, AuditError> {
        self.log().map(|log| &log.db)
    }

    fn log(&self) -> Result<&Log, AuditError> {
        self.inner.log.as_ref().ok_or_else(|| {
            let why = self
                .inner
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            why.clone().unwrap_or(AuditError::Off)
        })
    }

    /// Notes a failed call, for [`Audit::healthy`] and `health`.
    fn failed<T>(&self, result: Result<T, AuditError>) -> Result<T, AuditError> {
        result.inspect_err(|e| self.set_error(e.clone()))
    }

    /// A write ([`writer::Db::write`]), then, if `durable` says so, the flush that makes it
    /// durable: timed, and counted when it fails (the hub's metrics).
    async fn write<T: Send + 'static>(
        &self,
        durable: Durable,
        f: impl FnOnce(&Connection) -> Result<T, AuditError> + Send + 'static,
    ) -> Result<T, AuditError> {
        let started = std::time::Instant::now();
        let mut result = self.db()?.write(f).await;
        if let (Ok(_), Durable::Now, Some(sync)) = (&result, durable, &self.inner.sync) {
            let flushed = match sync {
                Ok(sync) => sync.wait().await,
                Err(e) => Err(e.clone()),
            };
            if let Err(e) = flushed {
                result = Err(AuditError::Flush(Box::new(e)));
            }
        }
        match &result {
            Ok(_) => self
                .inner
                .meters
                .write_seconds
                .observe(started.elapsed().as_secs_f64()),
            Err(_) => {
                self.inner.meters.failures.inc();
            }
        }
        self.failed(result)
    }

    /// Why records can no longer be made durable, once a flush has failed (or the sync thread
    /// could not start): no operation may run then, whatever the database still takes.
    fn flush_broken(&self) -> Option<AuditError> {
        match &self.inner.sync {
            Some(Ok(sync)) => sync.broken(),
            Some(Err(e)) => Some(e.clone()),
            None => None,
        }
        .map(|e| AuditError::Flush(Box::new(e)))
    }

    fn next_id(&self) -> i64 {
        self.inner.last_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Records an attempt before its operation runs; returns its id.
    ///
    /// The request's own task appends it to the journal: no thread hop, no database commit, no
    /// wait for the disk. While the log is known to be failing, the attempt goes to the
    /// database instead, so an operation is refused until the database takes writes again.
    pub async fn begin(&self, mut record: Record) -> Result<i64, AuditError> {
        cap(&mut record);
        let journal = &self.log()?.journal;
        if let Some(e) = self.flush_broken() {
            return Err(e);
        }
        record.id = self.next_id();
        if !self.healthy() {
            let attempt = record.clone();
            self.write(Durable::Later, move |c| {
                store::put(c, &attempt, Existing::Keep).map_err(AuditError::from)
            })
            .await?;
            self.clear_error();
        }
        let appended = journal
            .append(&record)
            .map_err(|e| AuditError::Journal(Arc::new(e)));
        self.failed(appended)?;
        Ok(record.id)
    }

    /// Puts an attempt whose operation is still running into the log's queries (it is in
    /// the journal already).
    pub async fn show(&self, mut record: Record) -> Result<(), AuditError> {
        cap(&mut record);
        self.write(Durable::Later, move |c| {
            store::put(c, &record, Existing::Keep).map_err(AuditError::from)
        })
        .await
    }

    /// Records the outcome of an attempt (the whole record, under the attempt's id); once it is
    /// on disk, live viewers see the record.
    pub async fn finish(&self, mut record: Record) -> Result<(), AuditError> {
        cap(&mut record);
        let live = serde_json::to_value(&record).unwrap_or(Value::Null);
        let id = record.id;
        self.write(Durable::Now, move |c| {
            store::put(c, &record, Existing::Replace).map_err(AuditError::from)
        })
        .await?;
        if let Ok(log) = self.log() {
            log.journal.settle(id);
        }
        self.published(live);
        Ok(())
    }

    /// Records a complete event (one that is not a request: policy actions, agent lifecycle).
    pub async fn record(&self, mut record: Record) -> Result<i64, AuditError> {
        cap(&mut record);
        record.id = self.next_id();
        let live = serde_json::to_value(&record).unwrap_or(Value::Null);
        let id = record.id;
        self.write(Durable::Now, move |c| {
            store::put(c, &record, Existing::Replace).map_err(AuditError::from)
        })
        .await?;
        self.published(live);
        Ok(id)
    }

    fn published(&self, record: Value) {
        self.inner.written.fetch_add(1, Ordering::Relaxed);
        self.clear_error();
        let _ = self.inner.live.send(record);
    }

    fn clear_error(&self) {
        *self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether the last write succeeded (no error since): for callers that write the terminal
    /// first and the record after, to refuse while the log is known to be down.
    pub fn healthy(&self) -> bool {
        self.inner
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Counts an operation that went through unaudited (fail-open).
    pub fn count_unaudited(&self) {
        self.inner.unaudited.fetch_add(1, Ordering::Relaxed);
    }

    /// Finished records as they are written.
    pub fn subscribe(&self) -> broadcast::Receiver<Value> {
        self.inner.live.subscribe()
    }

    /// A page of records and the total matching.
    pub async fn query(&self, filter: Filter) -> Result<(Vec<Record>, i64), AuditError> {
        self.read(move |c| store::query(c, &filter)).await
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, AuditError> + Send + 'static,
    ) -> Result<T, AuditError> {
        let result = self.db()?.read(f).await;
        self.failed(result)
    }

    /// One record.
    pub async fn get(&self, id: i64) -> Result<Option<Record>, AuditError> {
        self.read(move |c| store::get(c, id).map_err(AuditError::from))
            .await
    }

    /// Per-session aggregates.
    pub async fn sessions(&self, id: Option<String>) -> Result<Vec<Value>, AuditError> {
        self.read(move |c| store::sessions(c, id.as_deref()).map_err(AuditError::from))
            .await
    }

    /// Totals.
    pub async fn stats(&self) -> Result<Value, AuditError> {
        self.read(|c| store::stats(c).map_err(AuditError::from))
            .await
    }

    /// Applies retention now; returns how many records were deleted.
    pub async fn cleanup(&self) -> Result<usize, AuditError> {
        let max_age_ms = (self.inner.config.retention_days * 86_400_000) as i64;
        let max_bytes = self.inner.config.max_bytes as i64;
        let db = self.db()?;
        let result = db.write_on_thread(move |c| {
            store::cleanup(
                c,
                chrono::Utc::now().timestamp_millis(),
                max_age_ms,
                max_bytes,
            )
            .map_err(AuditError::from)
        });
        self.failed(result.await)
    }

    /// Whether the log can be written now (a probe write in a rolled-back transaction).
    pub async fn health(&self) -> Value {
        let probe = match self.db() {
            Err(e) => Err(e),
            Ok(db) => db.write_on_thread(|c| {
                c.execute_batch(
                    "BEGIN IMMEDIATE; INSERT INTO events (ts, ts_ms, actor, action) VALUES ('', 0, '', 'probe'); ROLLBACK;",
                )
                .map_err(|e| {
                    let _ = c.execute_batch("ROLLBACK");
                    AuditError::from(e)
                })
            })
            .await,
        };
        let probe = match self.flush_broken() {
            Some(e) => probe.and(Err(e)),
            None => probe,
        };
        let last_error = self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        json!({
            "enabled": self.inner.config.enabled,
            "writable": probe.is_ok(),
            "error": probe.err().or(last_error).map(|e| e.to_string()),
            "path": self.inner.path.display().to_string(),
            "fail_open": self.inner.config.fail_open,
            "records_written": self.inner.written.load(Ordering::Relaxed),
            "unaudited_operations": self.inner.unaudited.load(Ordering::Relaxed),
        })
    }

    /// Runs retention now and then every hour while the hub lives.
    pub fn spawn_retention(
        &self,
        tracker: &tokio_util::task::TaskTracker,
        closing: tokio_util::sync::CancellationToken,
    ) {
        let audit = self.clone();
        tracker.spawn(async move {
            loop {
                if let Err(e) = audit.cleanup().await {
                    tracing::warn!("audit retention failed: {e}");
                }
                tokio::select! {
                    _ = closing.cancelled() => return,
                    _ = tokio::time::sleep(CLEANUP_INTERVAL) => {}
                }
            }
        });
    }
}

/// Takes in the attempts a crash left in the journal (kept as attempts without an outcome,
/// unless the database has their outcome), makes them durable, and empties the journal.
/// Returns the journal and the last record id ever given.
fn recover<F>(
    db: &writer::Db,
    path: &std::path::Path,
    flush: Option<&mut F>,
    full: bool,
) -> Result<(journal::Journal, i64), AuditError>
where
    F: FnMut() -> Result<(), AuditError>,
{
    let journal_path = path.with_extension("attempts");
    let (journal, left) = journal::Journal::open(&journal_path).map_err(|e| AuditError::Open {
        path: journal_path.clone(),
        source: Arc::new(e),
    })?;
    let last = db.write_blocking(|c| {
        let tx = c.unchecked_transaction()?;
        for attempt in &left {
            store::put(&tx, attempt, Existing::Keep)?;
        }
        tx.commit()?;
        Ok(store::last_id(c)?)
    })?;
    if !left.is_empty() {
        if let (Some(flush), true) = (flush, full) {
            flush()?;
        }
        tracing::warn!(
            "audit log: {} attempt(s) cut short by the hub's end are on record without an outcome",
            left.len()
        );
    }
    journal.clear().map_err(|e| AuditError::ClearJournal {
        path: journal_path,
        source: Arc::new(e),
    })?;
    let journal_last = left.iter().map(|r| r.id).max().unwrap_or(0);
    Ok((journal, last.max(journal_last)))
}

/// Caps the command and response at [`MAX_FIELD_BYTES`] (on a character boundary).
fn cap(record: &mut Record) {
    for text in [&mut record.command, &mut record.response]
        .into_iter()
        .flatten()
    {
        if text.len() > MAX_FIELD_BYTES {
            let mut end = MAX_FIELD_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str("…[truncated]");
        }
    }
}

/// A record stamped now.
pub fn new_record(actor: &str, actor_agent_id: Option<String>, action: &str) -> Record {
    let now = chrono::Utc::now();
    Record {
        ts: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ts_ms: now.timestamp_millis(),
        actor: actor.into(),
        actor_agent_id,
        action: action.into(),
        ..Record::default()
    }
}

#[cfg(test)]
mod tests;
