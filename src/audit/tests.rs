//! The log's write path: attempts are journalled on the caller's task and survive a crash,
//! outcomes wait for a flush, the WAL is checkpointed, a failed flush is reported, and one log
//! has one hub.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::*;

fn config(synchronous: &str) -> AuditConfig {
    AuditConfig {
        synchronous: synchronous.into(),
        ..AuditConfig::default()
    }
}

fn attempt(command: &str) -> Record {
    let mut r = new_record("test", None, "send_line");
    r.command = Some(command.into());
    r
}

/// A flush that counts its calls and waits for `release` before each one ends.
fn held_flush(
    calls: &Arc<AtomicU64>,
    release: mpsc::Receiver<()>,
) -> impl FnOnce(PathBuf) -> Box<dyn FnMut() -> Result<(), AuditError> + Send> {
    let calls = calls.clone();
    move |wal| {
        Box::new(move || {
            calls.fetch_add(1, Ordering::SeqCst);
            release.recv().map_err(|e| AuditError::Wal {
                path: wal.clone(),
                source: Arc::new(std::io::Error::other(e)),
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_is_on_record_without_the_thread_or_the_database_and_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let audit = Audit::open(&config("full"), dir.path());
    // The thread is busy and the write connection taken: neither may be waited for.
    let (unblock_thread, thread_blocked) = mpsc::channel::<()>();
    let busy = audit.clone();
    let thread = tokio::spawn(async move { busy.read(move |_| Ok(thread_blocked.recv())).await });
    let (unblock_db, db_blocked) = mpsc::channel::<()>();
    let (taken, db_taken) = mpsc::channel::<()>();
    let holder = audit.clone();
    let db = std::thread::spawn(move || {
        holder.db().unwrap().write_blocking(|_| {
            taken.send(()).unwrap();
            Ok(db_blocked.recv())
        })
    });
    db_taken.recv().unwrap();
    let id = tokio::time::timeout(Duration::from_secs(2), audit.begin(attempt("ls")))
        .await
        .expect("the attempt waited for the thread or the database")
        .unwrap();
    unblock_thread.send(()).unwrap();
    unblock_db.send(()).unwrap();
    thread.await.unwrap().unwrap().unwrap();
    db.join().unwrap().unwrap().unwrap();

    // The hub ends before the outcome: the next start has the attempt, without an outcome,
    // and hands out ids after it.
    drop(audit);
    let audit = Audit::open(&config("full"), dir.path());
    let stored = audit.get(id).await.unwrap().expect("the attempt was lost");
    assert_eq!(
        (stored.command.as_deref(), stored.success),
        (Some("ls"), None)
    );
    assert!(audit.record(attempt("next")).await.unwrap() > id);
}

#[tokio::test]
async fn a_second_hub_cannot_open_a_log_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let first = Audit::open(&config("full"), dir.path());
    let second = Audit::open(&config("full"), dir.path());
    let e = second.begin(attempt("x")).await.unwrap_err().to_string();
    assert!(e.contains("another hub"), "{e}");
    let mine = first.record(attempt("first's")).await.unwrap();
    // Nor may it write events (they would take the first hub's ids) or read.
    let e = second
        .record(attempt("second's"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("another hub"), "{e}");
    assert!(second.query(Filter::default()).await.is_err());
    assert!(!second.healthy());
    let kept = first.get(mine).await.unwrap().unwrap();
    assert_eq!(kept.command.as_deref(), Some("first's"));
    first.begin(attempt("y")).await.unwrap();
    drop((first, second));
    let again = Audit::open(&config("full"), dir.path());
    again.begin(attempt("z")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_is_answered_after_a_flush_and_an_attempt_never_waits_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let (release, released) = mpsc::channel();
    let audit = Audit::open_with(&config("full"), dir.path(), held_flush(&calls, released));
    let mut record = attempt("echo hi");
    record.id = audit.begin(record.clone()).await.unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the attempt waited for a flush"
    );
    assert!(
        audit.get(record.id).await.unwrap().is_none(),
        "the attempt is in the journal only"
    );

    record.status = Some(200);
    let a = audit.clone();
    let finishing = tokio::spawn(async move { a.finish(record).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the outcome asked for no flush"
    );
    assert!(!finishing.is_finished(), "answered before its flush ended");
    release.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(2), finishing)
        .await
        .expect("no answer after the flush")
        .unwrap()
        .unwrap();
    let stored = audit.get(1).await.unwrap().unwrap();
    assert_eq!(
        (stored.command.as_deref(), stored.status),
        (Some("echo hi"), Some(200))
    );
}

#[tokio::test]
async fn with_synchronous_normal_nothing_waits_for_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let (_release, released) = mpsc::channel();
    let audit = Audit::open_with(&config("normal"), dir.path(), held_flush(&calls, released));
    let mut record = attempt("x");
    record.id = audit.begin(record.clone()).await.unwrap();
    audit.finish(record).await.unwrap();
    audit.record(attempt("y")).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_failed_flush_refuses_later_writes_and_health_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let eio = |wal: PathBuf| {
        move || {
            Err(AuditError::Wal {
                path: wal.clone(),
                source: Arc::new(std::io::Error::other("EIO")),
            })
        }
    };
    let audit = Audit::open_with(&config("full"), dir.path(), eio);
    assert!(audit.healthy());
    let e = audit.record(attempt("x")).await.unwrap_err().to_string();
    assert!(e.contains("EIO"), "{e}");
    assert!(!audit.healthy());
    // No operation may run now, although the database itself still takes writes.
    let e = audit.begin(attempt("y")).await.unwrap_err().to_string();
    assert!(e.contains("EIO"), "{e}");
    let health = audit.health().await;
    assert_eq!(health["writable"], false, "{health}");
    assert!(
        health["error"].as_str().unwrap().contains("EIO"),
        "{health}"
    );
}

#[tokio::test]
async fn the_wal_is_checkpointed_and_reused_not_grown() {
    let dir = tempfile::tempdir().unwrap();
    let audit = Audit::open(&config("normal"), dir.path());
    let db_file = dir.path().join(store::FILE_NAME);
    let wal_file = dir.path().join(format!("{}-wal", store::FILE_NAME));
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    // A round returns once its records are journalled; the health probe is a job on the
    // writer's thread behind them, so once it answers every record is in the WAL (on a loaded
    // machine the thread can still be writing when the round returns).
    let round = || async {
        for _ in 0..150 {
            let mut r = attempt(&"x".repeat(2000));
            r.id = audit.next_id();
            audit.show(r).await.unwrap();
        }
        audit.health().await;
    };
    // The thread checkpoints within an interval of going idle; waiting 2.5 leaves room for a
    // slow scheduler without racing it (a checkpoint that lands before a size is read cannot
    // be missed).
    let settle = || tokio::time::sleep(CHECKPOINT_INTERVAL * 5 / 2);
    let db_at_open = size(&db_file);
    round().await;
    // On a slow machine a checkpoint can fall inside this round, so the file may hold as
    // little as half a round's frames (the WAL restarts after it).
    let wal_after_one = size(&wal_file);
    settle().await;
    let db_after_one = size(&db_file);
    assert!(
        db_after_one > db_at_open,
        "no checkpoint: the database file stayed at {db_at_open} bytes"
    );
    round().await;
    settle().await;
    round().await;
    let wal_after_three = size(&wal_file);
    // Reused, the file stays at one round's frames at most, twice the first reading at most;
    // grown, it would hold all three rounds.
    assert!(
        wal_after_three <= 2 * wal_after_one,
        "the WAL grew from {wal_after_one} to {wal_after_three} bytes over three rounds: it \
         was not reused"
    );
}
