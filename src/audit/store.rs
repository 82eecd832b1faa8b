//! The audit log's SQLite file: schema, writes, queries, retention. Plain functions on a
//! `Connection`; [`super::writer`] runs them.

pub use crate::protocol::{AuditRecord as Record, TrafficFilter as Filter};
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, ToSql};
use serde_json::{json, Value};

use super::AuditError;

/// The file name inside the data dir.
pub const FILE_NAME: &str = "audit.db";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,
    ts_ms INTEGER NOT NULL,
    actor TEXT NOT NULL,
    actor_agent_id TEXT,
    action TEXT NOT NULL,
    method TEXT,
    path TEXT,
    session_id TEXT,
    agent_id TEXT,
    owner_session_id TEXT,
    label TEXT,
    cli_type TEXT,
    command TEXT,
    response TEXT,
    duration_ms INTEGER,
    status INTEGER,
    success INTEGER,
    blocked INTEGER NOT NULL DEFAULT 0,
    blocked_pattern TEXT,
    error_code TEXT
);
CREATE INDEX IF NOT EXISTS events_ts ON events(ts_ms);
CREATE INDEX IF NOT EXISTS events_session ON events(session_id);
CREATE INDEX IF NOT EXISTS events_agent ON events(agent_id);
CREATE INDEX IF NOT EXISTS events_action ON events(action);
";

/// Opens (creating) the file in WAL mode. Commits do not wait for the disk and never
/// checkpoint: [`super::sync`] flushes the WAL and [`super::writer`] checkpoints it.
pub fn open(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    // Only the hub's user may read the log: it holds (redacted) commands of every session.
    let _ = crate::platform::set_mode(path, 0o600);
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
}

/// What [`put`] does when a record with the same id is there already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Keep it (a replayed attempt never overwrites its outcome).
    Keep,
    /// Replace it (an outcome completes its attempt).
    Replace,
}

/// Writes a record under its own id (the log hands ids out itself, see [`super::Audit`]).
pub fn put(conn: &Connection, r: &Record, existing: Existing) -> rusqlite::Result<()> {
    let verb = match existing {
        Existing::Keep => "INSERT OR IGNORE",
        Existing::Replace => "INSERT OR REPLACE",
    };
    let mut stmt = conn.prepare_cached(&format!(
        "{verb} INTO events (id, ts, ts_ms, actor, actor_agent_id, action, method, path,
            session_id, agent_id, owner_session_id, label, cli_type, command, response,
            duration_ms, status, success, blocked, blocked_pattern, error_code)
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21)"
    ))?;
    stmt.execute(params![
        r.id,
        r.ts,
        r.ts_ms,
        r.actor,
        r.actor_agent_id,
        r.action,
        r.method,
        r.path,
        r.session_id,
        r.agent_id,
        r.owner_session_id,
        r.label,
        r.cli_type,
        r.command,
        r.response,
        r.duration_ms,
        r.status,
        r.success,
        r.blocked,
        r.blocked_pattern,
        r.error_code
    ])?;
    Ok(())
}

/// The highest id ever given, also of records retention has deleted since.
pub fn last_id(conn: &Connection) -> rusqlite::Result<i64> {
    let max: Option<i64> = conn.query_row("SELECT MAX(id) FROM events", [], |r| r.get(0))?;
    let seq: Option<i64> = conn
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    Ok(max.unwrap_or(0).max(seq.unwrap_or(0)))
}

fn row_to_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    Ok(Record {
        id: row.get("id")?,
        ts: row.get("ts")?,
        ts_ms: row.get("ts_ms")?,
        actor: row.get("actor")?,
        actor_agent_id: row.get("actor_agent_id")?,
        action: row.get("action")?,
        method: row.get("method")?,
        path: row.get("path")?,
        session_id: row.get("session_id")?,
        agent_id: row.get("agent_id")?,
        owner_session_id: row.get("owner_session_id")?,
        label: row.get("label")?,
        cli_type: row.get("cli_type")?,
        command: row.get("command")?,
        response: row.get("response")?,
        duration_ms: row.get("duration_ms")?,
        status: row.get("status")?,
        success: row.get("success")?,
        blocked: row.get("blocked")?,
        blocked_pattern: row.get("blocked_pattern")?,
        error_code: row.get("error_code")?,
    })
}

/// Parses `since`/`until`: RFC 3339 or epoch milliseconds.
pub fn parse_time_ms(text: &str) -> Result<i64, AuditError> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|_| AuditError::BadTime { text: text.into() })
}

/// The largest page.
pub const MAX_LIMIT: u32 = 1000;

fn where_clause(f: &Filter) -> Result<(String, Vec<Box<dyn ToSql>>), AuditError> {
    let mut sql = vec!["1=1".to_string()];
    let mut args: Vec<Box<dyn ToSql>> = Vec::new();
    let mut eq = |col: &str, v: &Option<String>, sql: &mut Vec<String>| {
        if let Some(v) = v {
            args.push(Box::new(v.clone()));
            sql.push(format!("{col} = ?{}", args.len()));
        }
    };
    eq("session_id", &f.session_id, &mut sql);
    eq("agent_id", &f.agent_id, &mut sql);
    eq("action", &f.action, &mut sql);
    eq("actor", &f.actor, &mut sql);
    if f.errors_only {
        sql.push("success = 0".into());
    }
    if f.blocked_only {
        sql.push("blocked = 1".into());
    }
    if let Some(s) = &f.search {
        args.push(Box::new(format!(
            "%{}%",
            s.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        )));
        let n = args.len();
        sql.push(format!(
            "(command LIKE ?{n} ESCAPE '\\' OR response LIKE ?{n} ESCAPE '\\')"
        ));
    }
    for (text, op) in [(&f.since, ">="), (&f.until, "<")] {
        if let Some(t) = text {
            args.push(Box::new(parse_time_ms(t)?));
            sql.push(format!("ts_ms {op} ?{}", args.len()));
        }
    }
    if let Some(after) = f.after_id {
        args.push(Box::new(after));
        sql.push(format!("id > ?{}", args.len()));
    }
    Ok((sql.join(" AND "), args))
}

/// A page of records, oldest first, and the total that match.
pub fn query(conn: &Connection, f: &Filter) -> Result<(Vec<Record>, i64), AuditError> {
    let (clause, args) = where_clause(f)?;
    let limit = f.limit.unwrap_or(100).clamp(1, MAX_LIMIT);
    let offset = f.offset.unwrap_or(0);
    let total: i64 = conn.query_row(
        &format!("SELECT COUNT(*) FROM events WHERE {clause}"),
        params_from_iter(args.iter()),
        |r| r.get(0),
    )?;
    let mut stmt = conn.prepare(&format!(
        "SELECT * FROM events WHERE {clause} ORDER BY id LIMIT {limit} OFFSET {offset}"
    ))?;
    let rows = stmt
        .query_map(params_from_iter(args.iter()), row_to_record)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((rows, total))
}

/// One record.
pub fn get(conn: &Connection, id: i64) -> rusqlite::Result<Option<Record>> {
    conn.query_row("SELECT * FROM events WHERE id = ?1", [id], row_to_record)
        .optional()
}

/// Per-session aggregates (all sessions, or one).
pub fn sessions(conn: &Connection, id: Option<&str>) -> rusqlite::Result<Vec<Value>> {
    let mut stmt = conn.prepare(
        "SELECT session_id, COUNT(*), SUM(success = 0), SUM(blocked), MIN(ts), MAX(ts),
                MAX(agent_id), MAX(label), MAX(cli_type), MAX(owner_session_id),
                CAST(AVG(duration_ms) AS REAL)
         FROM events WHERE session_id IS NOT NULL AND (?1 IS NULL OR session_id = ?1)
         GROUP BY session_id ORDER BY MAX(id) DESC",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok(json!({
            "session_id": r.get::<_, String>(0)?,
            "events": r.get::<_, i64>(1)?,
            "errors": r.get::<_, Option<i64>>(2)?.unwrap_or(0),
            "blocked": r.get::<_, Option<i64>>(3)?.unwrap_or(0),
            "first_at": r.get::<_, String>(4)?,
            "last_at": r.get::<_, String>(5)?,
            "agent_id": r.get::<_, Option<String>>(6)?,
            "label": r.get::<_, Option<String>>(7)?,
            "cli_type": r.get::<_, Option<String>>(8)?,
            "owner_session_id": r.get::<_, Option<String>>(9)?,
            "avg_duration_ms": r.get::<_, Option<f64>>(10)?,
        }))
    })?;
    rows.collect()
}

/// Totals by action and outcome.
pub fn stats(conn: &Connection) -> rusqlite::Result<Value> {
    let (total, errors, blocked): (i64, Option<i64>, Option<i64>) = conn.query_row(
        "SELECT COUNT(*), SUM(success = 0), SUM(blocked) FROM events",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let mut stmt = conn.prepare(
        "SELECT action, COUNT(*), SUM(success = 0), SUM(blocked), CAST(AVG(duration_ms) AS REAL)
         FROM events GROUP BY action ORDER BY action",
    )?;
    let by_action = stmt
        .query_map([], |r| {
            Ok(json!({
                "action": r.get::<_, String>(0)?,
                "count": r.get::<_, i64>(1)?,
                "errors": r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                "blocked": r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                "avg_duration_ms": r.get::<_, Option<f64>>(4)?,
            }))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "total": total,
        "errors": errors.unwrap_or(0),
        "blocked": blocked.unwrap_or(0),
        "by_action": by_action,
        "db_bytes": db_bytes(conn)?,
    }))
}

/// Bytes the records take (pages in use).
pub fn db_bytes(conn: &Connection) -> rusqlite::Result<i64> {
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok((pages - free) * size)
}

/// Deletes records older than `max_age_ms`, then the oldest until the records take at most
/// `max_bytes`. Returns how many were deleted.
pub fn cleanup(
    conn: &Connection,
    now_ms: i64,
    max_age_ms: i64,
    max_bytes: i64,
) -> rusqlite::Result<usize> {
    let mut deleted = conn.execute(
        "DELETE FROM events WHERE ts_ms < ?1",
        [now_ms.saturating_sub(max_age_ms)],
    )?;
    loop {
        let count: i64 = conn.query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))?;
        if count == 0 || db_bytes(conn)? <= max_bytes {
            break;
        }
        // A tenth at a time (at least one), oldest first.
        let n = (count / 10).max(1);
        deleted += conn.execute(
            "DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT ?1)",
            [n],
        )?;
    }
    if deleted > 0 {
        conn.execute_batch("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")?;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(action: &str, session: &str, ts_ms: i64, success: bool, blocked: bool) -> Record {
        Record {
            ts: ts_ms.to_string(),
            ts_ms,
            actor: "t".into(),
            action: action.into(),
            session_id: Some(session.into()),
            command: Some(format!("cmd {action} {session}")),
            success: Some(success),
            blocked,
            ..Record::default()
        }
    }

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join(FILE_NAME)).unwrap();
        (dir, conn)
    }

    #[test]
    fn filters_and_pages() {
        let (_dir, conn) = db();
        for i in 0..30 {
            let action = if i % 3 == 0 { "talk" } else { "send_line" };
            let session = if i % 2 == 0 { "a" } else { "b" };
            let mut r = rec(action, session, 1000 + i, i % 5 != 0, i == 7);
            r.id = i + 1;
            put(&conn, &r, Existing::Keep).unwrap();
        }
        let q = |f: Filter| query(&conn, &f).unwrap();
        assert_eq!(q(Filter::default()).1, 30);
        assert_eq!(
            q(Filter {
                session_id: Some("a".into()),
                ..Default::default()
            })
            .1,
            15
        );
        assert_eq!(
            q(Filter {
                action: Some("talk".into()),
                ..Default::default()
            })
            .1,
            10
        );
        assert_eq!(
            q(Filter {
                errors_only: true,
                ..Default::default()
            })
            .1,
            6
        );
        assert_eq!(
            q(Filter {
                blocked_only: true,
                ..Default::default()
            })
            .1,
            1
        );
        assert_eq!(
            q(Filter {
                search: Some("talk b".into()),
                ..Default::default()
            })
            .1,
            5
        );
        let window = Filter {
            since: Some("1010".into()),
            until: Some("1020".into()),
            ..Default::default()
        };
        assert_eq!(q(window).1, 10);
        let (page, total) = q(Filter {
            limit: Some(7),
            offset: Some(14),
            ..Default::default()
        });
        assert_eq!(total, 30);
        assert_eq!(
            page.iter().map(|r| r.ts_ms).collect::<Vec<_>>(),
            (1014..1021).collect::<Vec<_>>()
        );
        let (after, _) = q(Filter {
            after_id: Some(28),
            ..Default::default()
        });
        assert_eq!(after.len(), 2);
        assert!(where_clause(&Filter {
            since: Some("yesterday".into()),
            ..Default::default()
        })
        .is_err());
        let s = sessions(&conn, Some("a")).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0]["events"], 15);
        assert_eq!(stats(&conn).unwrap()["total"], 30);
    }

    #[test]
    fn retention_by_age_and_size() {
        let (_dir, conn) = db();
        for i in 0..200 {
            let mut r = rec("send_line", "a", i, true, false);
            r.id = i + 1;
            r.command = Some("x".repeat(2000));
            put(&conn, &r, Existing::Keep).unwrap();
        }
        assert_eq!(cleanup(&conn, 200, 150, i64::MAX).unwrap(), 50);
        let (rows, total) = query(&conn, &Filter::default()).unwrap();
        assert_eq!((total, rows[0].ts_ms), (150, 50));
        let deleted = cleanup(&conn, 200, 1000, 100_000).unwrap();
        assert!(deleted > 0);
        assert!(db_bytes(&conn).unwrap() <= 100_000);
        let (rows, _) = query(&conn, &Filter::default()).unwrap();
        assert_eq!(rows.last().unwrap().ts_ms, 199, "the newest are kept");
        assert_eq!(last_id(&conn).unwrap(), 200);
        conn.execute("DELETE FROM events", []).unwrap();
        assert_eq!(last_id(&conn).unwrap(), 200, "ids are never given twice");
    }

    #[test]
    fn an_outcome_replaces_its_attempt_and_a_replay_keeps_it() {
        let (_dir, conn) = db();
        let mut attempt = rec("talk", "a", 1, true, false);
        attempt.id = 7;
        attempt.success = None;
        put(&conn, &attempt, Existing::Keep).unwrap();
        let mut outcome = attempt.clone();
        outcome.success = Some(true);
        outcome.status = Some(200);
        put(&conn, &outcome, Existing::Replace).unwrap();
        put(&conn, &attempt, Existing::Keep).unwrap();
        let stored = get(&conn, 7).unwrap().unwrap();
        assert_eq!((stored.status, stored.success), (Some(200), Some(true)));
        assert_eq!(query(&conn, &Filter::default()).unwrap().1, 1);
    }
}
