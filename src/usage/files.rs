//! One agent's record files, followed as they grow: every file of its format under the
//! records' directory (`*.jsonl`, its subdirectories included; Aider's history in the directory
//! itself), each read by a [`Reader`] of its own, whole lines only (a line being written is
//! read once it ends).
//!
//! After a restart the files are read from their start again, so that each reader knows what
//! came before (a call written on several lines, the model a Codex rollout named earlier); the
//! calls that end at or before where the hub had counted up to are not counted again.
//!
//! opencode keeps no record files: its database (`opencode.db` in the records' directory) is
//! read by [`Database`] instead, each call's end being its watermark there.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::opencode::{Database, DB_FILE};
use super::records::{Format, Reader};
use super::Call;

/// The most read of one file at one look (the rest is read at the next).
const MAX_READ: u64 = 8 << 20;

/// A call read now: its file (relative to the records' directory), the byte just after its
/// line (opencode's database: the call's watermark), and the call.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadCall {
    pub file: String,
    pub end: u64,
    pub call: Call,
}

/// The record files of one agent.
#[derive(Debug)]
pub struct RecordFiles {
    dir: PathBuf,
    format: Format,
    files: HashMap<String, Followed>,
    /// How far each file had been counted (before a restart), by file.
    counted_up_to: HashMap<String, u64>,
    /// opencode's database, read in place of record files.
    db: Option<Database>,
}

#[derive(Debug)]
struct Followed {
    reader: Reader,
    /// The bytes read so far (whole lines).
    read: u64,
}

impl RecordFiles {
    pub fn new(dir: PathBuf, format: Format, counted_up_to: HashMap<String, u64>) -> Self {
        let db = (format == Format::OpencodeDb).then(|| {
            let counted = counted_up_to.get(DB_FILE).copied().unwrap_or(0);
            Database::new(&dir, counted)
        });
        RecordFiles {
            dir,
            format,
            files: HashMap::new(),
            counted_up_to,
            db,
        }
    }

    /// The calls the files gained since the last look (none when the directory is missing).
    pub fn poll(&mut self) -> Vec<ReadCall> {
        if let Some(db) = &mut self.db {
            return poll_db(db);
        }
        let mut found = Vec::new();
        walk(&self.dir, self.format, 0, &mut found);
        let mut out = Vec::new();
        for path in found {
            let Ok(rel) = path.strip_prefix(&self.dir) else {
                continue;
            };
            let rel = crate::platform::posix_path(rel);
            let Ok(len) = std::fs::metadata(&path).map(|m| m.len()) else {
                continue;
            };
            let format = self.format;
            let followed = self.files.entry(rel.clone()).or_insert_with(|| Followed {
                reader: Reader::new(format),
                read: 0,
            });
            if len < followed.read {
                // Cut short or replaced: a new file.
                *followed = Followed {
                    reader: Reader::new(format),
                    read: 0,
                };
                self.counted_up_to.remove(&rel);
            }
            if len > followed.read {
                let counted = self.counted_up_to.get(&rel).copied().unwrap_or(0);
                followed.read_new(&path, &rel, counted, &mut out);
            }
        }
        out
    }
}

/// How far each record file of `format` under `dir` goes now (a host session counts only what
/// its CLI writes after it started).
pub fn extent(dir: &Path, format: Format) -> HashMap<String, u64> {
    if format == Format::OpencodeDb {
        let now = super::opencode::end_at(chrono::Utc::now());
        return HashMap::from([(DB_FILE.to_string(), now)]);
    }
    let mut found = Vec::new();
    walk(dir, format, 0, &mut found);
    found
        .into_iter()
        .filter_map(|path| {
            let len = std::fs::metadata(&path).ok()?.len();
            let rel = crate::platform::posix_path(path.strip_prefix(dir).ok()?);
            Some((rel, len))
        })
        .collect()
}

impl Followed {
    /// Reads the whole lines `path` gained; the calls they record past `counted` go to `out`.
    fn read_new(&mut self, path: &Path, rel: &str, counted: u64, out: &mut Vec<ReadCall>) {
        let Ok(mut file) = std::fs::File::open(path) else {
            return;
        };
        let mut bytes = Vec::new();
        let read = file
            .seek(SeekFrom::Start(self.read))
            .and_then(|_| file.take(MAX_READ).read_to_end(&mut bytes));
        if read.is_err() {
            return;
        }
        let Some(whole) = bytes.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let mut at = self.read;
        for line in bytes[..=whole].split_inclusive(|&b| b == b'\n') {
            at += line.len() as u64;
            let text = String::from_utf8_lossy(line);
            if let Some(call) = self.reader.line(text.trim_end()) {
                if at > counted {
                    out.push(ReadCall {
                        file: rel.to_string(),
                        end: at,
                        call,
                    });
                }
            }
        }
        self.read = at;
    }
}

/// The calls opencode's database gained, as read from the file [`DB_FILE`].
fn poll_db(db: &mut Database) -> Vec<ReadCall> {
    let read = db.poll().into_iter();
    read.map(|c| ReadCall {
        file: DB_FILE.to_string(),
        end: c.end,
        call: c.call,
    })
    .collect()
}

/// The record files of `format` under `dir`, at most [`Format::depth`] levels down (links not
/// followed).
fn walk(dir: &Path, format: Format, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && depth < format.depth() {
            walk(&path, format, depth + 1, out);
        } else if kind.is_file() && format.names(&entry.file_name().to_string_lossy()) {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn claude_line(request: &str, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","requestRef":"{request}","message":{{"id":"m","model":"claude-x","usage":{{"input_tokens":10,"output_tokens":{output}}}}}}}"#
        )
    }

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn whole_lines_are_read_as_they_come_in_every_subdirectory() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("proj");
        std::fs::create_dir(&sub).unwrap();
        let file = sub.join("s.jsonl");
        let mut files =
            RecordFiles::new(dir.path().into(), Format::ClaudeTranscript, HashMap::new());
        assert!(files.poll().is_empty());
        let first = format!("{}\n", claude_line("a", 5));
        append(&file, &first);
        let half = claude_line("b", 7);
        append(&file, &half[..20]);
        let read = files.poll();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].file, "proj/s.jsonl");
        assert_eq!(read[0].end, first.len() as u64);
        assert_eq!(read[0].call.tokens.output, 5);
        append(&file, &format!("{}\n", &half[20..]));
        let read = files.poll();
        assert_eq!(read.len(), 1, "{read:?}");
        assert_eq!(read[0].call.tokens.output, 7);
        assert!(files.poll().is_empty());
        // Another file elsewhere in the tree, a file of another kind ignored.
        append(
            &dir.path().join("t.jsonl"),
            &format!("{}\n", claude_line("c", 1)),
        );
        append(
            &dir.path().join("notes.txt"),
            &format!("{}\n", claude_line("d", 1)),
        );
        assert_eq!(files.poll().len(), 1);
    }

    #[test]
    fn counting_from_the_extent_leaves_out_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        append(&file, &format!("{}\n", claude_line("a", 5)));
        let from = extent(dir.path(), Format::ClaudeTranscript);
        assert_eq!(from.len(), 1, "{from:?}");
        let mut files = RecordFiles::new(dir.path().into(), Format::ClaudeTranscript, from);
        append(&file, &format!("{}\n", claude_line("b", 9)));
        append(
            &dir.path().join("new.jsonl"),
            &format!("{}\n", claude_line("c", 3)),
        );
        let mut outputs: Vec<u64> = files.poll().iter().map(|r| r.call.tokens.output).collect();
        outputs.sort();
        assert_eq!(outputs, [3, 9]);
    }

    #[test]
    fn after_a_restart_what_was_counted_is_not_counted_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        let one = format!("{}\n", claude_line("a", 5));
        // The same call on a second line (another content block), then a new call.
        append(&file, &one);
        append(&file, &one);
        append(&file, &format!("{}\n", claude_line("b", 9)));
        let counted = HashMap::from([("s.jsonl".to_string(), one.len() as u64)]);
        let mut files = RecordFiles::new(dir.path().into(), Format::ClaudeTranscript, counted);
        let read = files.poll();
        assert_eq!(read.len(), 1, "{read:?}");
        assert_eq!(read[0].call.tokens.output, 9);
    }

    #[test]
    fn opencode_is_read_from_its_database_past_what_was_counted() {
        use crate::usage::opencode::tests::{opencode_db, turn, T0};
        let dir = tempfile::tempdir().unwrap();
        let db = opencode_db(dir.path());
        turn(&db, 1, T0, 2);
        // A `.jsonl` file there is no record of opencode's.
        append(
            &dir.path().join("s.jsonl"),
            &format!("{}\n", claude_line("a", 5)),
        );
        let mut files = RecordFiles::new(dir.path().into(), Format::OpencodeDb, HashMap::new());
        let read = files.poll();
        assert_eq!(read.len(), 2, "{read:?}");
        assert!(read.iter().all(|r| r.file == DB_FILE));
        assert!(read[0].end < read[1].end);
        assert!(files.poll().is_empty());
        let counted = HashMap::from([(DB_FILE.to_string(), read[0].end)]);
        let mut files = RecordFiles::new(dir.path().into(), Format::OpencodeDb, counted);
        let again = files.poll();
        assert_eq!(again, read[1..]);
    }
}
