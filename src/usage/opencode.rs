//! opencode's model calls, read from its SQLite database (`$XDG_DATA_HOME/opencode/opencode.db`;
//! opencode 1.18.33 writes no record files). Each model call is a `step-finish` part (a row
//! of `part`) holding that call's tokens; the assistant message it belongs to names the model
//! (`docs/research/cli-usage-records.md`, 1.4).
//!
//! The database is opened read-only, at a look only when it or its write-ahead log changed
//! since the last look that read it, and only while opencode has it open (its `-shm` is
//! there: a reader would otherwise make the `-wal` and `-shm` files itself). A database that
//! is missing, busy or unreadable gives nothing; the next look tries again.
//!
//! Where a look starts: after the newest `part` row the last look saw (its rowid), so a look
//! reads only the rows written since. SQLite gives a new row the rowid after the largest, so
//! rowids grow with each row written, except after the newest rows were deleted (opencode
//! deletes the messages an undo took back, and a deleted session's): their rowids are given
//! again. So each call's watermark (its [`DbCall::end`]) is its time instead: the part's
//! `time_created` (in milliseconds) times 65536 plus the low 16 bits of its rowid (two calls
//! of the same millisecond). A look that finds the row it saw last gone, or another row in
//! its place, reads the whole table again for calls past the last watermark; so does the
//! first look after a restart, past the watermark counted before it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::Value;

use super::{Call, Tokens};

/// The database's name in its directory.
pub const DB_FILE: &str = "opencode.db";

/// The bits of a watermark below a call's millisecond.
const TIE_BITS: u32 = 16;

/// The step-finish parts past a rowid (and up to another) recorded at or after a
/// millisecond, oldest first, each with its message.
const STEP_FINISHES: &str = "SELECT p.rowid, p.id, p.time_created, p.data, m.data \
     FROM part p LEFT JOIN message m ON m.id = p.message_id \
     WHERE p.rowid > ?1 AND p.rowid <= ?2 AND p.time_created >= ?3 \
     AND p.data LIKE '%\"step-finish\"%' \
     ORDER BY p.time_created, p.rowid";

/// A call read, and its watermark: later calls have greater ones.
#[derive(Debug, Clone, PartialEq)]
pub struct DbCall {
    pub end: u64,
    pub call: Call,
}

/// One opencode database, followed look by look.
#[derive(Debug)]
pub struct Database {
    path: PathBuf,
    /// The size and time of the database and its log when a look last read them.
    read_at: Option<Stamp>,
    /// The newest part row the last look saw.
    seen: Option<Row>,
    /// The watermark of the last call read (or counted before a restart).
    counted: u64,
}

/// The length and modification time of the database and of its log (none when missing).
type Stamp = [Option<(u64, SystemTime)>; 2];

/// A part row: its rowid and id.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    rowid: i64,
    id: String,
}

impl Database {
    /// The database in `dir`; the calls up to `counted` (a watermark) were counted before.
    pub fn new(dir: &Path, counted: u64) -> Self {
        Database {
            path: dir.join(DB_FILE),
            read_at: None,
            seen: None,
            counted,
        }
    }

    /// The calls recorded since the last look, oldest first (none when nothing changed).
    pub fn poll(&mut self) -> Vec<DbCall> {
        let Some(now) = self.changed() else {
            return Vec::new();
        };
        let Ok((calls, seen)) = self.read() else {
            return Vec::new();
        };
        self.read_at = Some(now);
        self.seen = seen;
        if let Some(last) = calls.last() {
            self.counted = last.end;
        }
        calls
    }

    /// The files' stamp, when opencode has the database open and it changed since it was read.
    fn changed(&self) -> Option<Stamp> {
        if !sibling(&self.path, "-shm").exists() {
            return None;
        }
        let stamp = |path: &Path| {
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.len(), meta.modified().ok()?))
        };
        let now = [
            Some(stamp(&self.path)?),
            stamp(&sibling(&self.path, "-wal")),
        ];
        (self.read_at != Some(now)).then_some(now)
    }

    /// The calls past the watermark, and the newest row now (one snapshot of the database).
    fn read(&self) -> rusqlite::Result<(Vec<DbCall>, Option<Row>)> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags)?;
        let db = conn.unchecked_transaction()?;
        let newest = newest_row(&db)?;
        let from = match &self.seen {
            Some(seen) if still_there(&db, seen)? => seen.rowid,
            _ => 0,
        };
        let Some(newest) = newest else {
            return Ok((Vec::new(), None));
        };
        let calls = step_finishes(&db, from, newest.rowid, self.counted)?;
        Ok((calls, Some(newest)))
    }
}

/// `path` with `suffix` added to its name (`opencode.db-wal`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The part row with the largest rowid, if any.
fn newest_row(db: &Connection) -> rusqlite::Result<Option<Row>> {
    db.query_row(
        "SELECT rowid, id FROM part ORDER BY rowid DESC LIMIT 1",
        [],
        |r| {
            Ok(Row {
                rowid: r.get(0)?,
                id: r.get(1)?,
            })
        },
    )
    .optional()
}

/// Whether `row` is still in the table under its rowid.
fn still_there(db: &Connection, row: &Row) -> rusqlite::Result<bool> {
    let id: Option<String> = db
        .query_row("SELECT id FROM part WHERE rowid = ?1", [row.rowid], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(id.as_deref() == Some(row.id.as_str()))
}

/// The calls of the step-finish parts with a rowid in `from..=to` whose watermark is past
/// `counted`, oldest first.
fn step_finishes(
    db: &Connection,
    from: i64,
    to: i64,
    counted: u64,
) -> rusqlite::Result<Vec<DbCall>> {
    let since = i64::try_from(counted >> TIE_BITS).unwrap_or(i64::MAX);
    let mut query = db.prepare(STEP_FINISHES)?;
    let rows = query.query_map((from, to, since), |r| {
        Ok(StepFinish {
            rowid: r.get(0)?,
            id: r.get(1)?,
            time_created: r.get(2)?,
            part: r.get(3)?,
            message: r.get(4)?,
        })
    })?;
    let mut calls = Vec::new();
    let mut last = counted;
    for row in rows {
        let Some(call) = row?.call() else {
            continue;
        };
        if call.end > last {
            last = call.end;
            calls.push(call);
        }
    }
    Ok(calls)
}

/// A step-finish part's row as read, with its message's data.
struct StepFinish {
    rowid: i64,
    id: String,
    time_created: i64,
    part: String,
    message: Option<String>,
}

/// The watermark of a moment: every call recorded from then on ends past it.
pub fn end_at(time: DateTime<Utc>) -> u64 {
    u64::try_from(time.timestamp_millis()).unwrap_or(0) << TIE_BITS
}

impl StepFinish {
    /// The call it records; none for a row that is no step-finish part, or not JSON.
    fn call(&self) -> Option<DbCall> {
        let part: Value = serde_json::from_str(&self.part).ok()?;
        if part.get("type")?.as_str()? != "step-finish" {
            return None;
        }
        let millis = u64::try_from(self.time_created).ok()?;
        Some(DbCall {
            end: (millis << TIE_BITS) | (self.rowid as u64 & ((1 << TIE_BITS) - 1)),
            call: Call {
                key: format!("opencode:{}", self.id),
                at: DateTime::<Utc>::from_timestamp_millis(self.time_created),
                model: self.model(),
                tokens: tokens(part.get("tokens")?),
                // opencode's `cost` is worked out from its own price config (0 for a model it
                // has no price for): the hub's price table decides instead.
                stated_cost_usd: None,
            },
        })
    }

    /// The model its assistant message names (`modelID`).
    fn model(&self) -> Option<String> {
        let message: Value = serde_json::from_str(self.message.as_deref()?).ok()?;
        let model = message.get("modelID")?.as_str()?;
        (!model.is_empty()).then(|| model.to_string())
    }
}

/// A step-finish's `tokens` in the hub's meaning: opencode's `input` already counts neither
/// cache kind; its `output` leaves out the `reasoning`, which the hub counts as output.
fn tokens(t: &Value) -> Tokens {
    let count = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cache = t.get("cache");
    Tokens {
        input: count(t.get("input")),
        output: count(t.get("output")) + count(t.get("reasoning")),
        cache_read: count(cache.and_then(|c| c.get("read"))),
        cache_write: count(cache.and_then(|c| c.get("write"))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What opencode 1.18.33 wrote for a call of the stand-in's (prompt 1922 of which 560 were
    /// cached, completion 34 of which 9 were reasoning) through its OpenAI-compatible
    /// provider: the step-finish part and its assistant message, as read from a real run.
    const STEP_FINISH: &str = r#"{"reason":"stop","snapshot":"4b825dc642cb6eb9a060e54bf8d69288fbee4904","type":"step-finish","tokens":{"total":1956,"input":1362,"output":25,"reasoning":9,"cache":{"write":0,"read":560}},"cost":0}"#;
    const ASSISTANT: &str = r#"{"parentID":"msg_21c83e704001j3WW03TtkBieIC","role":"assistant","mode":"build","agent":"build","path":{"cwd":"/tmp/oc-probe/home/proj","root":"/tmp/oc-probe/home/proj"},"cost":0,"tokens":{"total":1956,"input":1362,"output":25,"reasoning":9,"cache":{"write":0,"read":560}},"modelID":"standin-model","providerID":"standin","time":{"created":1795774737402,"completed":1795774739654},"finish":"stop"}"#;
    const USER: &str = r#"{"role":"user","time":{"created":1795774736132},"agent":"build","model":{"providerID":"standin","modelID":"standin-model"},"summary":{"diffs":[]}}"#;
    const STEP_START: &str =
        r#"{"snapshot":"4b825dc642cb6eb9a060e54bf8d69288fbee4904","type":"step-start"}"#;
    const TEXT: &str = r#"{"type":"text","text":"Hello there.","time":{"start":1795774739357,"end":1795774739383}}"#;
    const SESSION: &str = "ses_de37c19b6ffeRS57jjzVN4gzMh";
    /// When the first call was recorded (ms).
    pub(crate) const T0: i64 = 1_795_774_739_481;

    /// opencode's database in `dir`, as opencode 1.18.33 makes it (in WAL mode), held open
    /// as opencode holds it.
    pub(crate) fn opencode_db(dir: &Path) -> Connection {
        let db = Connection::open(dir.join(DB_FILE)).unwrap();
        db.pragma_update(None, "journal_mode", "wal").unwrap();
        db.execute_batch(include_str!(
            "../../tests/fixtures/opencode/schema-1.18.33.sql"
        ))
        .unwrap();
        db.execute_batch(&format!(
            "INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) \
             VALUES ('global', '/tmp/oc-probe/home/proj', 'git', {t}, {t}, '[]');
             INSERT INTO session (id, project_id, slug, directory, title, version, agent, model, \
             time_created, time_updated) VALUES ('{SESSION}', 'global', 'gentle-knight', \
             '/tmp/oc-probe/home/proj', 'Hello there.', '1.18.33', 'build', \
             '{{\"id\":\"standin-model\",\"providerID\":\"standin\",\"variant\":\"default\"}}', {t}, {t});",
            t = T0 - 4000
        ))
        .unwrap();
        db
    }

    fn message(db: &Connection, id: &str, at: i64, data: &str) {
        db.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) \
             VALUES (?1, ?2, ?3, ?3, ?4)",
            (id, SESSION, at, data),
        )
        .unwrap();
    }

    fn part(db: &Connection, id: &str, message: &str, at: i64, data: &str) {
        db.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) \
             VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
            (id, message, SESSION, at, data),
        )
        .unwrap();
    }

    /// A turn as opencode writes it: the user's message and text, then one assistant message
    /// per model call with its step-start, text and step-finish parts. `n` names its rows.
    pub(crate) fn turn(db: &Connection, n: u32, at: i64, calls: u32) {
        let user = format!("msg_u{n}");
        message(db, &user, at - 3000, USER);
        part(db, &format!("prt_u{n}"), &user, at - 3000, TEXT);
        for c in 0..calls {
            let (m, at) = (format!("msg_a{n}_{c}"), at + i64::from(c) * 1000);
            message(db, &m, at - 2000, ASSISTANT);
            part(db, &format!("prt_s{n}_{c}"), &m, at - 140, STEP_START);
            part(db, &format!("prt_t{n}_{c}"), &m, at - 120, TEXT);
            part(db, &format!("prt_f{n}_{c}"), &m, at, STEP_FINISH);
        }
    }

    fn keys(calls: &[DbCall]) -> Vec<&str> {
        calls.iter().map(|c| c.call.key.as_str()).collect()
    }

    #[test]
    fn each_step_finish_is_a_call_with_its_tokens_and_its_messages_model() {
        let dir = tempfile::tempdir().unwrap();
        let db = opencode_db(dir.path());
        turn(&db, 1, T0, 2);
        let mut read = Database::new(dir.path(), 0);
        let calls = read.poll();
        assert_eq!(keys(&calls), ["opencode:prt_f1_0", "opencode:prt_f1_1"]);
        let call = &calls[0].call;
        let tokens = Tokens {
            input: 1362,
            output: 34,
            cache_read: 560,
            cache_write: 0,
        };
        assert_eq!(call.tokens, tokens);
        assert_eq!(call.model.as_deref(), Some("standin-model"));
        assert_eq!(call.at.unwrap().timestamp_millis(), T0);
        assert_eq!(call.stated_cost_usd, None);
        assert!(calls[0].end < calls[1].end);
    }

    #[test]
    fn a_look_reads_only_what_was_written_since_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let db = opencode_db(dir.path());
        turn(&db, 1, T0, 1);
        let mut read = Database::new(dir.path(), 0);
        let first = read.poll();
        assert_eq!(keys(&first), ["opencode:prt_f1_0"]);
        assert!(read.poll().is_empty());
        // Rows of other kinds, and an update of the call's part, are no new call.
        part(&db, "prt_patch", "msg_a1_0", T0 + 10, r#"{"type":"patch"}"#);
        db.execute("UPDATE part SET data = data WHERE id = 'prt_f1_0'", [])
            .unwrap();
        assert!(read.poll().is_empty());
        turn(&db, 2, T0 + 10_000, 2);
        let next = read.poll();
        assert_eq!(keys(&next), ["opencode:prt_f2_0", "opencode:prt_f2_1"]);
        assert!(first[0].end < next[0].end && next[0].end < next[1].end);
    }

    #[test]
    fn after_a_restart_the_calls_counted_before_are_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = opencode_db(dir.path());
        turn(&db, 1, T0, 3);
        let before = Database::new(dir.path(), 0).poll();
        assert_eq!(before.len(), 3);
        let mut read = Database::new(dir.path(), before[1].end);
        assert_eq!(keys(&read.poll()), ["opencode:prt_f1_2"]);
        let mut read = Database::new(dir.path(), before[2].end);
        assert!(read.poll().is_empty());
        turn(&db, 2, T0 + 10_000, 1);
        assert_eq!(keys(&read.poll()), ["opencode:prt_f2_0"]);
    }

    #[test]
    fn calls_after_an_undo_are_read_though_sqlite_gives_their_rowids_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = opencode_db(dir.path());
        turn(&db, 1, T0, 1);
        turn(&db, 2, T0 + 10_000, 2);
        let mut read = Database::new(dir.path(), 0);
        assert_eq!(read.poll().len(), 3);
        // The second turn taken back (its messages and parts deleted), then another turn in
        // its place: its rows get the deleted rows' rowids.
        db.execute_batch(
            "DELETE FROM part WHERE rowid > (SELECT rowid FROM part WHERE id = 'prt_f1_0');
             DELETE FROM message WHERE id IN ('msg_u2', 'msg_a2_0', 'msg_a2_1');",
        )
        .unwrap();
        turn(&db, 3, T0 + 20_000, 1);
        assert_eq!(keys(&read.poll()), ["opencode:prt_f3_0"]);
        assert!(read.poll().is_empty());
    }

    #[test]
    fn rows_that_do_not_parse_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let db = opencode_db(dir.path());
        message(&db, "msg_bad", T0 - 2000, "{not json");
        part(
            &db,
            "prt_bad",
            "msg_bad",
            T0,
            r#"{"type":"step-finish","tokens":"#,
        );
        part(&db, "prt_badmsg", "msg_bad", T0 + 1, STEP_FINISH);
        let text = r#"{"type":"text","text":"no call","note":"step-finish"}"#;
        part(&db, "prt_text", "msg_bad", T0 + 2, text);
        let calls = Database::new(dir.path(), 0).poll();
        assert_eq!(keys(&calls), ["opencode:prt_badmsg"]);
        assert_eq!(calls[0].call.model, None);
        assert_eq!(calls[0].call.tokens.input, 1362);
    }

    #[test]
    fn nothing_is_read_nor_made_where_no_database_is_open() {
        let dir = tempfile::tempdir().unwrap();
        // No database yet; then one that opencode closed (its log and `-shm` gone).
        let mut read = Database::new(dir.path(), 0);
        assert!(read.poll().is_empty());
        let db = opencode_db(dir.path());
        turn(&db, 1, T0, 1);
        drop(db);
        assert!(!sibling(&dir.path().join(DB_FILE), "-shm").exists());
        assert!(read.poll().is_empty());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [DB_FILE]);
        // Open again: read then.
        let _db = Connection::open(dir.path().join(DB_FILE)).unwrap();
        _db.execute("UPDATE part SET data = data", []).unwrap();
        assert_eq!(read.poll().len(), 1);
    }

    #[test]
    fn a_file_that_is_no_database_gives_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        std::fs::write(&path, "not a database, though long enough to look like one").unwrap();
        std::fs::write(sibling(&path, "-shm"), "").unwrap();
        assert!(Database::new(dir.path(), 0).poll().is_empty());
    }
}
