//! An agent's work at a glance: how many commits its branch is ahead of its base and behind
//! it, how many files it changed, and whether the branch merges cleanly into the base (and
//! which files conflict when not). A handful of git processes that write nothing but objects
//! (the merge is tried in the object store alone, [`merge_tree`]); the hub computes it when a
//! turn ends, not per request.

use std::collections::BTreeSet;
use std::path::Path;

use chrono::{DateTime, Utc};

use super::changes::{checkout_dir, dirty_files};
use super::git::{fields, Git};
use super::merge_tree::merge_tree;
use super::repo::{locate, resolve_base};
use super::{Branch, Checkout, WorkspaceError};

/// An agent's work against its base, as of `checked_at`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct WorkSummary {
    /// Commits on the agent's branch that are not on its base.
    pub ahead: u32,
    /// Commits on the base that are not on the agent's branch.
    pub behind: u32,
    /// Files changed: by the branch's commits since the merge base with the base and, for a
    /// checkout on the hub's machine, in its work tree (untracked files included), each once.
    pub files: u32,
    /// Whether the branch's commits merge into the base with no conflict (uncommitted changes
    /// are not part of it).
    pub merges_cleanly: bool,
    /// The files that conflict, when the branch does not merge cleanly (absent when it does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// When it was computed.
    pub checked_at: DateTime<Utc>,
}

impl WorkSummary {
    /// Whether `other` says the same of the work (when it was computed aside).
    pub fn same_work(&self, other: &WorkSummary) -> bool {
        WorkSummary {
            checked_at: other.checked_at,
            ..self.clone()
        } == *other
    }
}

/// Where an agent's work is read.
#[derive(Debug, Clone, Copy)]
pub enum Work<'a> {
    /// Its checkout on the hub's machine: `HEAD` there, and its uncommitted files.
    Checkout(&'a Checkout<'a>),
    /// Its branch in the user's repository, as last pushed (a workspace on another engine,
    /// whose uncommitted files are in its container).
    Pushed(&'a Branch<'a>),
}

/// The summary of the agent's work now.
pub fn summary(work: Work) -> Result<WorkSummary, WorkspaceError> {
    let (dir, repo, base, tip, checkout) = match work {
        Work::Checkout(c) => (
            checkout_dir(c.path)?,
            c.repo,
            c.base,
            "HEAD".into(),
            Some(c.path),
        ),
        Work::Pushed(b) => {
            let dir = locate(b.repo)?.toplevel;
            (
                dir,
                b.repo,
                b.base,
                format!("refs/heads/{}", b.branch),
                None,
            )
        }
    };
    let base = resolve_base(&dir, base).map_err(|_| WorkspaceError::NoSuchBase {
        repo: repo.to_path_buf(),
        base: base.to_string(),
    })?;
    let tip = Git::new(&dir)
        .args(["rev-parse", "--verify"])
        .arg(format!("{tip}^{{commit}}"))
        .text()?;
    let (behind, ahead) = ahead_behind(&dir, &base, &tip)?;
    let merge_base = Git::new(&dir).args(["merge-base", &base, &tip]).text()?;
    let mut files = committed_files(&dir, &merge_base, &tip)?;
    if let Some(path) = checkout {
        files.extend(dirty_files(path)?);
    }
    let merged = merge_tree(&dir, &base, &tip)?;
    Ok(WorkSummary {
        ahead,
        behind,
        files: u32::try_from(files.len()).unwrap_or(u32::MAX),
        merges_cleanly: merged.is_clean(),
        conflicts: merged.conflicts,
        checked_at: Utc::now(),
    })
}

/// Commits only on `base`, and only on `tip` (`git rev-list --left-right --count`).
fn ahead_behind(dir: &Path, base: &str, tip: &str) -> Result<(u32, u32), WorkspaceError> {
    let out = Git::new(dir)
        .args(["rev-list", "--left-right", "--count"])
        .arg(format!("{base}...{tip}"))
        .text()?;
    Ok(parse_counts(&out))
}

/// `git rev-list --left-right --count` output: `LEFT\tRIGHT`.
pub(super) fn parse_counts(out: &str) -> (u32, u32) {
    let mut counts = out.split_whitespace().map(|n| n.parse().unwrap_or(0));
    (counts.next().unwrap_or(0), counts.next().unwrap_or(0))
}

/// The files the commits `merge_base..tip` changed (new paths of renames).
fn committed_files(
    dir: &Path,
    merge_base: &str,
    tip: &str,
) -> Result<BTreeSet<String>, WorkspaceError> {
    let out = Git::new(dir)
        .args(["diff", "--no-ext-diff", "--name-only", "-z", "-M"])
        .args([merge_base, tip, "--"])
        .run()?;
    Ok(fields(&out).into_iter().collect())
}
