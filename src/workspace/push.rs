//! Pushing an agent's branch to a remote of the user's repository, as the user would from
//! their shell: their remote, their git configuration and credentials (as the repository's
//! owner, with their home, when the hub is root), never a prompt.

use super::land::Op;
use super::{Branch, WorkspaceError};

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub remote: String,
    /// The remote's (push) URL.
    pub url: String,
    pub branch: String,
    /// The commit pushed.
    pub sha: String,
}

/// Pushes `refs/heads/<branch>` to the same name on `remote`.
pub fn push(b: &Branch, remote: &str) -> Result<Pushed, WorkspaceError> {
    let op = Op::open(b.repo)?;
    let no_such = || WorkspaceError::NoSuchRemote {
        remote: remote.to_string(),
    };
    if remote.is_empty() || remote.starts_with('-') || remote.contains('\0') {
        return Err(no_such());
    }
    let url = op
        .git()
        .args(["remote", "get-url", "--push", remote])
        .text()
        .map_err(|_| no_such())?;
    let branch_ref = format!("refs/heads/{}", b.branch);
    let sha = op.rev(&branch_ref).map_err(|_| WorkspaceError::NoBranch {
        branch: b.branch.to_string(),
    })?;
    let out = op
        .git()
        .args(["push", "--porcelain", remote])
        .arg(format!("{branch_ref}:{branch_ref}"))
        .output()?;
    if !out.success {
        let said = String::from_utf8_lossy(&out.stdout);
        return Err(WorkspaceError::PushFailed {
            remote: remote.to_string(),
            detail: format!("{} {}", out.stderr, said.trim()).trim().to_string(),
        });
    }
    Ok(Pushed {
        remote: remote.to_string(),
        url,
        branch: b.branch.to_string(),
        sha,
    })
}
