//! What an agent changed in its checkout against its base: the commits since the merge base
//! and the uncommitted files, untracked ones included, with line counts and, when asked, the
//! diffs. Nothing here writes to the checkout: untracked files are shown as new files through
//! a temporary copy of the index.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::git::{fields, Git};
use super::repo::resolve_base;
use super::{Branch, Changes, Checkout, Commit, Diffs, FileChange, WorkspaceError};

/// What the agent changed against its base; `full` adds the diffs.
pub fn changes(c: &Checkout, full: bool) -> Result<Changes, WorkspaceError> {
    let path = checkout_dir(c.path)?;
    let committed = Committed::read(&path, c.repo, c.base, "HEAD", full)?;
    let untracked = Untracked::list(&path)?;
    let index = TempIndex::with_intent_to_add(&path, &untracked.files)?;
    let index = index.as_ref();
    let uncommitted_diff = match full {
        true => Some(diff_text(&path, index, &["HEAD"])?),
        false => None,
    };
    let uncommitted = untracked.relabel(file_changes(&path, index, &["HEAD"])?);
    Ok(committed.into_changes(c, &path.to_string_lossy(), uncommitted, uncommitted_diff))
}

/// What the agent pushed to its branch against its base, read in the user's repository (a
/// workspace on another engine: its uncommitted files are in its container, and the caller
/// adds them).
pub fn committed_changes(b: &Branch, full: bool) -> Result<Changes, WorkspaceError> {
    let repo = super::repo::locate(b.repo)?;
    let tip = format!("refs/heads/{}", b.branch);
    let committed = Committed::read(&repo.toplevel, b.repo, b.base, &tip, full)?;
    let c = Checkout {
        repo: b.repo,
        base: b.base,
        branch: b.branch,
        path: Path::new(""),
    };
    Ok(committed.into_changes(&c, "", Vec::new(), full.then(String::new)))
}

/// The uncommitted files from the output of `git ls-files --others --exclude-standard -z`
/// and of `git diff --numstat -z HEAD` and `git diff --name-status -z HEAD` run with the
/// untracked files intended to be added (in a container, say).
pub fn uncommitted_from(untracked: &[u8], numstat: &[u8], name_status: &[u8]) -> Vec<FileChange> {
    Untracked::parse(untracked).relabel(combine(numstat, name_status))
}

/// The commits and files between the merge base with the base and a tip.
struct Committed {
    head: String,
    merge_base: String,
    commits: Vec<Commit>,
    files: Vec<FileChange>,
    diff: Option<String>,
}

impl Committed {
    /// Read in `dir` (a work tree of the repository `repo`) from `base` to `tip`.
    fn read(
        dir: &Path,
        repo: &Path,
        base: &str,
        tip: &str,
        full: bool,
    ) -> Result<Self, WorkspaceError> {
        let head = Git::new(dir)
            .args(["rev-parse", "--verify"])
            .arg(tip)
            .text()?;
        resolve_base(dir, base).map_err(|_| WorkspaceError::NoSuchBase {
            repo: repo.to_path_buf(),
            base: base.to_string(),
        })?;
        let merge_base = Git::new(dir).args(["merge-base", base, &head]).text()?;
        let range = [merge_base.as_str(), head.as_str()];
        let diff = match full {
            true => Some(diff_text(dir, None, &range)?),
            false => None,
        };
        Ok(Committed {
            commits: commits(dir, &merge_base, &head)?,
            files: file_changes(dir, None, &range)?,
            head,
            merge_base,
            diff,
        })
    }

    fn into_changes(
        self,
        c: &Checkout,
        path: &str,
        uncommitted: Vec<FileChange>,
        uncommitted_diff: Option<String>,
    ) -> Changes {
        let diff = match (self.diff, uncommitted_diff) {
            (Some(committed), Some(uncommitted)) => Some(Diffs {
                committed,
                uncommitted,
            }),
            _ => None,
        };
        Changes {
            branch: c.branch.to_string(),
            base: c.base.to_string(),
            path: path.to_string(),
            head: self.head,
            merge_base: self.merge_base,
            commits: self.commits,
            committed: self.files,
            uncommitted,
            diff,
        }
    }
}

/// The files with uncommitted changes, untracked ones included (`git status`).
pub fn dirty_files(path: &Path) -> Result<Vec<String>, WorkspaceError> {
    let path = checkout_dir(path)?;
    let out = Git::new(&path)
        .args(["status", "--porcelain", "-z", "--untracked-files=all"])
        .run()?;
    Ok(parse_status(&out))
}

/// The checkout's absolute path; it must be a work tree.
fn checkout_dir(path: &Path) -> Result<PathBuf, WorkspaceError> {
    let path = std::path::absolute(path).map_err(WorkspaceError::io(format!(
        "could not resolve {}",
        path.display()
    )))?;
    if path.join(".git").exists() {
        Ok(path)
    } else {
        Err(WorkspaceError::WorkspaceMissing { path })
    }
}

/// The commits `merge_base..tip`, newest first.
pub(super) fn commits(
    path: &Path,
    merge_base: &str,
    tip: &str,
) -> Result<Vec<Commit>, WorkspaceError> {
    let out = Git::new(path)
        .args(["log", "-z", "--no-show-signature", "--format=%H %s"])
        .arg(format!("{merge_base}..{tip}"))
        .run()?;
    Ok(fields(&out)
        .into_iter()
        .map(|line| {
            let (sha, subject) = line.split_once(' ').unwrap_or((&line, ""));
            Commit {
                sha: sha.to_string(),
                subject: subject.to_string(),
            }
        })
        .collect())
}

/// The files changed from commit `from` to commit `to`, with line counts.
pub(super) fn files_between(
    dir: &Path,
    from: &str,
    to: &str,
) -> Result<Vec<FileChange>, WorkspaceError> {
    file_changes(dir, None, &[from, to])
}

/// `git diff` with the options every diff here uses, against the temporary index if any.
fn diff(path: &Path, index: Option<&TempIndex>, revs: &[&str]) -> Git {
    let git = Git::new(path).args(["diff", "--no-color", "--no-ext-diff", "-M"]);
    let git = match index {
        Some(index) => git.env("GIT_INDEX_FILE", &index.0),
        None => git,
    };
    git.args(revs)
}

fn diff_text(
    path: &Path,
    index: Option<&TempIndex>,
    revs: &[&str],
) -> Result<String, WorkspaceError> {
    let out = diff(path, index, revs)
        .args(["--no-textconv", "--"])
        .run()?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The changed files between `revs` (or the work tree), with line counts.
fn file_changes(
    path: &Path,
    index: Option<&TempIndex>,
    revs: &[&str],
) -> Result<Vec<FileChange>, WorkspaceError> {
    let numstat = diff(path, index, revs)
        .args(["--numstat", "-z", "--"])
        .run()?;
    let statuses = diff(path, index, revs)
        .args(["--name-status", "-z", "--"])
        .run()?;
    Ok(combine(&numstat, &statuses))
}

/// The changed files of `--name-status -z` with the line counts of `--numstat -z`.
fn combine(numstat: &[u8], statuses: &[u8]) -> Vec<FileChange> {
    let mut counts = parse_numstat(numstat);
    parse_name_status(statuses)
        .into_iter()
        .map(|(status, path)| {
            let (added, removed) = counts.remove(&path).unwrap_or((None, None));
            FileChange {
                path,
                added,
                removed,
                status: status.to_string(),
            }
        })
        .collect()
}

/// Line counts by (new) path from `--numstat -z`: `added\tremoved\tpath`, or for a rename
/// `added\tremoved\t` then the old and the new path; `-` counts for binary files.
pub(super) fn parse_numstat(out: &[u8]) -> HashMap<String, (Option<u64>, Option<u64>)> {
    let mut counts = HashMap::new();
    let mut fields = fields(out).into_iter();
    while let Some(field) = fields.next() {
        let mut parts = field.splitn(3, '\t');
        let added = parts.next().and_then(|n| n.parse().ok());
        let removed = parts.next().and_then(|n| n.parse().ok());
        let path = match parts.next() {
            Some(path) if !path.is_empty() => path.to_string(),
            _ => {
                fields.next();
                fields.next().unwrap_or_default()
            }
        };
        counts.insert(path, (added, removed));
    }
    counts
}

/// Statuses and (new) paths from `--name-status -z`: a letter (with a score for renames and
/// copies), then the path, or the old and the new path.
pub(super) fn parse_name_status(out: &[u8]) -> Vec<(&'static str, String)> {
    let mut files = Vec::new();
    let mut fields = fields(out).into_iter();
    while let Some(letter) = fields.next() {
        let status = match letter.chars().next() {
            Some('A') => "added",
            Some('D') => "deleted",
            Some('R') => "renamed",
            Some('C') => {
                fields.next();
                "added"
            }
            _ => "modified",
        };
        if status == "renamed" {
            fields.next();
        }
        if let Some(path) = fields.next() {
            files.push((status, path));
        }
    }
    files
}

/// The paths of `git status --porcelain -z`: `XY path`, a rename or copy followed by its
/// old path.
pub(super) fn parse_status(out: &[u8]) -> Vec<String> {
    let mut files = Vec::new();
    let mut fields = fields(out).into_iter();
    while let Some(entry) = fields.next() {
        let xy = entry.get(..2).unwrap_or_default();
        if xy.contains(['R', 'C']) {
            fields.next();
        }
        files.push(entry.get(3..).unwrap_or_default().to_string());
    }
    files
}

/// The untracked files of a checkout (ignored ones left out).
struct Untracked {
    /// Files, shown as new files.
    files: Vec<String>,
    /// Directories git does not look into (other repositories), listed with a trailing `/`.
    dirs: Vec<String>,
}

impl Untracked {
    fn list(path: &Path) -> Result<Self, WorkspaceError> {
        let out = Git::new(path)
            .args(["ls-files", "--others", "--exclude-standard", "-z"])
            .run()?;
        Ok(Self::parse(&out))
    }

    /// From the output of `git ls-files --others --exclude-standard -z`.
    fn parse(out: &[u8]) -> Self {
        let (dirs, files) = fields(out).into_iter().partition(|p| p.ends_with('/'));
        Untracked { files, dirs }
    }

    /// The uncommitted changes with the untracked files marked so, and the directories added.
    fn relabel(self, mut changes: Vec<FileChange>) -> Vec<FileChange> {
        let untracked: HashSet<&String> = self.files.iter().collect();
        for change in &mut changes {
            if change.status == "added" && untracked.contains(&change.path) {
                change.status = "untracked".into();
            }
        }
        changes.extend(self.dirs.into_iter().map(|path| FileChange {
            path,
            added: None,
            removed: None,
            status: "untracked".into(),
        }));
        changes
    }
}

/// A copy of a checkout's index in which the untracked files are intended to be added
/// (`git add -N`), so that diffs show them as new files; deleted when dropped.
struct TempIndex(PathBuf);

impl TempIndex {
    /// Files per `git add` call, well inside the argument length limit.
    const CHUNK: usize = 500;

    fn with_intent_to_add(path: &Path, files: &[String]) -> Result<Option<Self>, WorkspaceError> {
        if files.is_empty() {
            return Ok(None);
        }
        let real = Git::new(path)
            .args(["rev-parse", "--git-path", "index"])
            .text()?;
        let index = Self::copy_of(&path.join(real))?;
        for chunk in files.chunks(Self::CHUNK) {
            Git::new(path)
                .env("GIT_INDEX_FILE", &index.0)
                .env("GIT_LITERAL_PATHSPECS", "1")
                .args(["add", "--intent-to-add", "--"])
                .args(chunk)
                .run()?;
        }
        Ok(Some(index))
    }

    fn copy_of(real: &Path) -> Result<Self, WorkspaceError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "agent-hub-index-{}-{nanos}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        let context = format!("could not copy {} to {}", real.display(), path.display());
        let mut file = File::create_new(&path).map_err(WorkspaceError::io(&context))?;
        let index = TempIndex(path);
        match File::open(real) {
            Ok(mut source) => std::io::copy(&mut source, &mut file)
                .map(drop)
                .map_err(WorkspaceError::io(context))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(WorkspaceError::io(context)(e)),
        }
        Ok(index)
    }
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let mut lock = self.0.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}
