//! Review notes on an agent's branch, as the one prompt that carries them to the agent: each
//! note with its file, its line and the hunk of the agent's diff that holds that line (new-side
//! line numbers: the file as the branch has it). Pure: the diffs come from [`super::changes`],
//! the prompt goes out through the hub's normal delivery.

use std::fmt::Write as _;

/// At most this many notes go in one review.
pub const MAX_NOTES: usize = 50;
/// A note's text, at most (characters).
pub const MAX_NOTE_CHARS: usize = 10_000;
/// A file's path, at most (characters).
pub const MAX_FILE_CHARS: usize = 4_096;
/// A hunk longer than twice this many lines is shown only this many lines around the note's.
pub const CONTEXT_LINES: u32 = 10;

/// One review note: on a line of a file, on a whole file, or on the work as a whole.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewNote {
    /// What the reviewer says (not blank, no NUL: the pattern is added in `api::openapi`).
    #[schema(min_length = 1, max_length = 10000)]
    pub note: String,
    /// The file it is about, as the diff names it (relative to the repository's top).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 4096)]
    pub file: Option<String>,
    /// The line it is about, in the file as the branch has it (1-based; needs `file`).
    #[serde(
        default,
        deserialize_with = "crate::json::whole::opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 4294967295_u64)]
    pub line: Option<u32>,
}

/// Why notes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("no notes: give at least one")]
    NoNotes,
    #[error("{count} notes: at most {MAX_NOTES} go in one review")]
    TooMany { count: usize },
    #[error("note {index}: its text is blank or has a NUL character")]
    Blank { index: usize },
    #[error("note {index}: its text is longer than {MAX_NOTE_CHARS} characters")]
    TooLong { index: usize },
    #[error("note {index}: its file is blank, has a NUL character or is longer than {MAX_FILE_CHARS} characters")]
    BadFile { index: usize },
    #[error("note {index}: a line needs its file (give file with line)")]
    LineWithoutFile { index: usize },
    #[error("note {index}: lines count from 1")]
    LineZero { index: usize },
}

/// Checks notes before anything is read or sent (`index` counts from 1).
pub fn check_notes(notes: &[ReviewNote]) -> Result<(), NoteError> {
    if notes.is_empty() {
        return Err(NoteError::NoNotes);
    }
    if notes.len() > MAX_NOTES {
        return Err(NoteError::TooMany { count: notes.len() });
    }
    for (i, n) in notes.iter().enumerate() {
        let index = i + 1;
        if !is_text(&n.note) {
            return Err(NoteError::Blank { index });
        }
        if n.note.chars().count() > MAX_NOTE_CHARS {
            return Err(NoteError::TooLong { index });
        }
        if let Some(f) = &n.file {
            if !is_text(f) || f.chars().count() > MAX_FILE_CHARS {
                return Err(NoteError::BadFile { index });
            }
        }
        match (n.line, &n.file) {
            (Some(0), _) => return Err(NoteError::LineZero { index }),
            (Some(_), None) => return Err(NoteError::LineWithoutFile { index }),
            _ => {}
        }
    }
    Ok(())
}

/// Not blank (something besides white space) and no NUL: what the document's pattern says.
pub fn is_text(s: &str) -> bool {
    !s.trim().is_empty() && !s.contains('\0')
}

/// One file of a unified diff.
#[derive(Debug, Clone, PartialEq)]
pub struct FileDiff {
    /// Its path on the new side (the old one for a deleted file).
    pub path: String,
    pub hunks: Vec<Hunk>,
}

/// One hunk: its `@@` header and its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Hunk {
    /// The first new-side line it covers.
    pub new_start: u32,
    /// How many new-side lines it covers (0: lines removed after `new_start`).
    pub new_count: u32,
    pub header: String,
    pub lines: Vec<String>,
}

impl Hunk {
    /// Whether the new-side `line` is in it (a pure removal holds the line it follows).
    pub fn contains(&self, line: u32) -> bool {
        match self.new_count {
            0 => line == self.new_start.max(1),
            n => line >= self.new_start && line - self.new_start < n,
        }
    }

    /// The header and the lines, only [`CONTEXT_LINES`] either side of `line` when long.
    pub fn text_around(&self, line: u32) -> String {
        let long = self.lines.len() > 2 * CONTEXT_LINES as usize + 1;
        let mut out = self.header.clone();
        let mut new_line = self.new_start;
        let (mut skipped_above, mut skipped_below) = (0usize, 0usize);
        for l in &self.lines {
            let at = new_line;
            if !l.starts_with(['-', '\\']) {
                new_line += 1;
            }
            if long && at.abs_diff(line) > CONTEXT_LINES {
                match at < line {
                    true => skipped_above += 1,
                    false => skipped_below += 1,
                }
                continue;
            }
            if skipped_above > 0 {
                let _ = write!(out, "\n[... {skipped_above} lines of the hunk above]");
                skipped_above = 0;
            }
            out.push('\n');
            out.push_str(l);
        }
        if skipped_below > 0 {
            let _ = write!(out, "\n[... {skipped_below} lines of the hunk below]");
        }
        out
    }
}

/// The files and hunks of `git diff`'s unified output.
pub fn parse_diff(diff: &str) -> Vec<FileDiff> {
    let mut files: Vec<FileDiff> = Vec::new();
    let mut in_hunk = false;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            files.push(FileDiff {
                path: path_of_git_line(rest),
                hunks: Vec::new(),
            });
            in_hunk = false;
            continue;
        }
        let Some(file) = files.last_mut() else {
            continue;
        };
        if let Some(header) = line.strip_prefix("@@ ") {
            if let Some((new_start, new_count)) = new_range(header) {
                file.hunks.push(Hunk {
                    new_start,
                    new_count,
                    header: line.to_string(),
                    lines: Vec::new(),
                });
                in_hunk = true;
                continue;
            }
        }
        if in_hunk && line.starts_with([' ', '+', '-', '\\']) {
            if let Some(h) = file.hunks.last_mut() {
                h.lines.push(line.to_string());
            }
            continue;
        }
        in_hunk = false;
        let named = line
            .strip_prefix("+++ ")
            .filter(|p| *p != "/dev/null")
            .or_else(|| line.strip_prefix("rename to "));
        if let Some(p) = named {
            let p = unquote(p);
            file.path = p.strip_prefix("b/").map(str::to_string).unwrap_or(p);
        }
    }
    files
}

/// The new side's range of a hunk header's text after `@@ `: `-a,b +c,d @@ ...`.
fn new_range(header: &str) -> Option<(u32, u32)> {
    let plus = header.split(' ').find_map(|w| w.strip_prefix('+'))?;
    let (start, count) = match plus.split_once(',') {
        Some((s, c)) => (s.parse().ok()?, c.parse().ok()?),
        None => (plus.parse().ok()?, 1),
    };
    Some((start, count))
}

/// The path of a `diff --git a/P b/P` line (both sides alike unless renamed; `+++` or
/// `rename to` say the new one).
fn path_of_git_line(rest: &str) -> String {
    if let Some(quoted) = rest.strip_prefix('"') {
        let end = quoted.find("\" ").map_or(rest.len(), |i| i + 2);
        let a = unquote(&rest[..end]);
        return a.strip_prefix("a/").map(str::to_string).unwrap_or(a);
    }
    let half = rest.len().saturating_sub(1) / 2;
    let a = rest.get(..half).unwrap_or(rest);
    a.strip_prefix("a/").unwrap_or(a).to_string()
}

/// A path as git quotes it (`"a\tb"`, octal bytes for the rest) made plain.
fn unquote(p: &str) -> String {
    let Some(inner) = p.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return p.to_string();
    };
    let mut bytes = Vec::new();
    let mut chars = inner.bytes().peekable();
    while let Some(b) = chars.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match chars.next() {
            Some(b'n') => bytes.push(b'\n'),
            Some(b't') => bytes.push(b'\t'),
            Some(d @ b'0'..=b'7') => {
                let mut v = u32::from(d - b'0');
                for _ in 0..2 {
                    if let Some(&n @ b'0'..=b'7') = chars.peek() {
                        v = v * 8 + u32::from(n - b'0');
                        chars.next();
                    }
                }
                bytes.push(v as u8);
            }
            Some(other) => bytes.push(other),
            None => {}
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The agent's diffs a review looks lines up in.
#[derive(Debug, Clone, Copy)]
pub struct ReviewedDiffs<'a> {
    pub branch: &'a str,
    pub base: &'a str,
    /// `merge_base..head`.
    pub committed: &'a str,
    /// The work tree against `head`.
    pub uncommitted: &'a str,
}

/// The one prompt that carries `notes` (checked by [`check_notes`]) to the agent.
pub fn compose(diffs: &ReviewedDiffs, notes: &[ReviewNote]) -> String {
    let sides = [
        ("committed", parse_diff(diffs.committed)),
        ("uncommitted", parse_diff(diffs.uncommitted)),
    ];
    let count = match notes.len() {
        1 => "1 note".to_string(),
        n => format!("{n} notes"),
    };
    let mut out = format!(
        "Review notes on your branch {} (against {}), {count}. Please address each one:",
        diffs.branch, diffs.base
    );
    for (i, n) in notes.iter().enumerate() {
        let _ = write!(out, "\n\n{}. ", i + 1);
        out.push_str(&where_and_hunk(&sides, n));
        let _ = write!(out, "\nNote: {}", n.note.trim());
    }
    out
}

/// A note's place (file, line) and the hunk that holds its line, as the prompt says them.
fn where_and_hunk(sides: &[(&str, Vec<FileDiff>)], n: &ReviewNote) -> String {
    let Some(file) = n.file.as_deref() else {
        return "On the work as a whole:".to_string();
    };
    let changed = sides
        .iter()
        .any(|(_, files)| files.iter().any(|f| f.path == file));
    let Some(line) = n.line else {
        return match changed {
            true => format!("File {file} (the whole file):"),
            false => format!("File {file} (the whole file; unchanged on your branch):"),
        };
    };
    let found = sides.iter().find_map(|(side, files)| {
        let f = files.iter().find(|f| f.path == file)?;
        Some((*side, f.hunks.iter().find(|h| h.contains(line))?))
    });
    match (found, changed) {
        (Some((side, hunk)), _) => format!(
            "File {file}, line {line}, in this hunk of your {side} changes:\n```diff\n{}\n```",
            hunk.text_around(line)
        ),
        (None, true) => {
            format!("File {file}, line {line} (outside the hunks you changed in this file):")
        }
        (None, false) => {
            format!("File {file}, line {line} (this file is unchanged on your branch):")
        }
    }
}

#[cfg(test)]
mod tests;
