//! The durable audit and traffic log. Every operation that writes to a terminal or changes
//! state is recorded in SQLite (WAL) before its reply is sent: the attempt first (if that write
//! fails the operation is refused with `AUDIT_UNAVAILABLE`, unless `audit.fail_open`), then its
//! outcome. Hub events that are actions of their own (policy actions, agent lifecycle) are
//! recorded as they happen. Commands and responses are redacted and capped at
//! [`MAX_FIELD_BYTES`]. One thread owns the connection; callers await its answers.

pub mod events;
pub mod store;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;
use serde_json::{json, Value};
use tokio::sync::{broadcast, oneshot};

pub use crate::config::AuditConfig;
pub use store::{Filter, Record};

pub use crate::config::MAX_FIELD_BYTES;
/// How often retention runs.
const CLEANUP_INTERVAL: Duration = Duration::from_secs(3600);

/// Work for the writer thread: gets the connection, or why there is none.
type Job = Box<dyn FnOnce(Result<&Connection, &str>) + Send>;

/// The audit log handle (cheap to clone).
#[derive(Clone)]
pub struct Audit {
    inner: Arc<Inner>,
}

struct Inner {
    config: AuditConfig,
    path: PathBuf,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    live: broadcast::Sender<Value>,
    last_error: Mutex<Option<String>>,
    written: AtomicU64,
    unaudited: AtomicU64,
    meters: crate::metrics::AuditMeters,
}

/// Why a record could not be written.
#[derive(Debug, Clone)]
pub struct Unavailable(pub String);

impl Audit {
    /// Opens the log (on its own thread) at the configured path.
    pub fn open(config: &AuditConfig, data_dir: &std::path::Path) -> Self {
        let path = config
            .path
            .clone()
            .unwrap_or_else(|| data_dir.join(store::FILE_NAME));
        let (tx, rx) = mpsc::channel::<Job>();
        let audit = Audit {
            inner: Arc::new(Inner {
                config: config.clone(),
                path: path.clone(),
                jobs: Mutex::new(config.enabled.then_some(tx)),
                live: broadcast::channel(1024).0,
                last_error: Mutex::new(None),
                written: AtomicU64::new(0),
                unaudited: AtomicU64::new(0),
                meters: Default::default(),
            }),
        };
        if config.enabled {
            let full = config.synchronous != "normal";
            let weak = Arc::downgrade(&audit.inner);
            let spawned = std::thread::Builder::new()
                .name("audit-writer".into())
                .spawn(move || {
                    let open = || -> Result<Connection, String> {
                        if let Some(dir) = path.parent() {
                            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
                        }
                        store::open(&path, full).map_err(|e| e.to_string())
                    };
                    let conn = open().map_err(|e| {
                        let e = format!("cannot open {}: {e}", path.display());
                        tracing::error!("audit log: {e}");
                        if let Some(inner) = weak.upgrade() {
                            *inner.last_error.lock().unwrap_or_else(|e| e.into_inner()) =
                                Some(e.clone());
                        }
                        e
                    });
                    while let Ok(job) = rx.recv() {
                        job(conn.as_ref().map_err(String::as_str));
                    }
                });
            if let Err(e) = spawned {
                audit.set_error(format!("cannot start the audit writer: {e}"));
            }
        }
        audit
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

    fn set_error(&self, e: String) {
        *self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(e);
    }

    /// Runs `f` on the writer thread.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, String> + Send + 'static,
    ) -> Result<T, Unavailable> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let result = match conn {
                Ok(c) => f(c),
                Err(e) => Err(e.to_string()),
            };
            let _ = tx.send(result);
        });
        let sent = self
            .inner
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|jobs| jobs.send(job).is_ok());
        if sent != Some(true) {
            return Err(Unavailable("the audit log is not running".into()));
        }
        match rx.await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.set_error(e.clone());
                Err(Unavailable(e))
            }
            Err(_) => Err(Unavailable("the audit writer stopped".into())),
        }
    }

    /// [`Audit::run`] for a write: timed, and counted when it fails (the hub's metrics).
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, String> + Send + 'static,
    ) -> Result<T, Unavailable> {
        let started = std::time::Instant::now();
        let result = self.run(f).await;
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
        result
    }

    /// Records an attempt; returns its id once it is on disk.
    ///
    /// The attempt is written to the WAL without waiting for the disk (a failing disk still
    /// fails the write); the outcome's commit syncs the WAL, and with it the attempt, before
    /// the reply goes out. That halves the syncs per operation.
    pub async fn begin(&self, mut record: Record) -> Result<i64, Unavailable> {
        cap(&mut record);
        let full = self.inner.config.synchronous != "normal";
        let id = self
            .write(move |c| {
                let sync = |level: &str| c.pragma_update(None, "synchronous", level);
                let relaxed = full.then(|| sync("NORMAL")).transpose();
                let id = store::insert(c, &record);
                if full {
                    let _ = sync("FULL");
                }
                relaxed.map_err(|e| e.to_string())?;
                id.map_err(|e| e.to_string())
            })
            .await?;
        Ok(id)
    }

    /// Records the outcome of an attempt; once it is on disk, live viewers see the record.
    pub async fn finish(&self, mut record: Record) -> Result<(), Unavailable> {
        cap(&mut record);
        let live = serde_json::to_value(&record).unwrap_or(Value::Null);
        self.write(move |c| store::update(c, &record).map_err(|e| e.to_string()))
            .await?;
        self.published(live);
        Ok(())
    }

    /// Records a complete event (one that is not a request: policy actions, agent lifecycle).
    pub async fn record(&self, mut record: Record) -> Result<i64, Unavailable> {
        cap(&mut record);
        let mut live = serde_json::to_value(&record).unwrap_or(Value::Null);
        let copy = record.clone();
        let id = self
            .write(move |c| store::insert(c, &copy).map_err(|e| e.to_string()))
            .await?;
        live["id"] = json!(id);
        self.published(live);
        Ok(id)
    }

    fn published(&self, record: Value) {
        self.inner.written.fetch_add(1, Ordering::Relaxed);
        *self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        let _ = self.inner.live.send(record);
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
    pub async fn query(&self, filter: Filter) -> Result<(Vec<Record>, i64), Unavailable> {
        self.run(move |c| store::query(c, &filter)).await
    }

    /// One record.
    pub async fn get(&self, id: i64) -> Result<Option<Record>, Unavailable> {
        self.run(move |c| store::get(c, id).map_err(|e| e.to_string()))
            .await
    }

    /// Per-session aggregates.
    pub async fn sessions(&self, id: Option<String>) -> Result<Vec<Value>, Unavailable> {
        self.run(move |c| store::sessions(c, id.as_deref()).map_err(|e| e.to_string()))
            .await
    }

    /// Totals.
    pub async fn stats(&self) -> Result<Value, Unavailable> {
        self.run(|c| store::stats(c).map_err(|e| e.to_string()))
            .await
    }

    /// Applies retention now; returns how many records were deleted.
    pub async fn cleanup(&self) -> Result<usize, Unavailable> {
        let max_age_ms = (self.inner.config.retention_days * 86_400_000) as i64;
        let max_bytes = self.inner.config.max_bytes as i64;
        self.run(move |c| {
            store::cleanup(
                c,
                chrono::Utc::now().timestamp_millis(),
                max_age_ms,
                max_bytes,
            )
            .map_err(|e| e.to_string())
        })
        .await
    }

    /// Whether the log can be written now (a probe write in a rolled-back transaction).
    pub async fn health(&self) -> Value {
        let probe = self
            .run(|c| {
                c.execute_batch(
                    "BEGIN IMMEDIATE; INSERT INTO events (ts, ts_ms, actor, action) VALUES ('', 0, '', 'probe'); ROLLBACK;",
                )
                .map_err(|e| {
                    let _ = c.execute_batch("ROLLBACK");
                    e.to_string()
                })
            })
            .await;
        let last_error = self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        json!({
            "enabled": self.inner.config.enabled,
            "writable": probe.is_ok(),
            "error": probe.err().map(|e| e.0).or(last_error),
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
                    tracing::warn!("audit retention failed: {}", e.0);
                }
                tokio::select! {
                    _ = closing.cancelled() => return,
                    _ = tokio::time::sleep(CLEANUP_INTERVAL) => {}
                }
            }
        });
    }
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
