//! What a conflicting merge leaves for a person or an agent to resolve: each conflicting file
//! with the regions git marked in the merged tree (`<<<<<<<` to `>>>>>>>`), read from the
//! object store, so nothing is written to any work tree to show them.

use super::git::Git;
use super::WorkspaceError;

/// One conflicting file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Conflict {
    pub path: String,
    /// The text of each conflicted region, markers included; empty when the conflict is not
    /// in the file's lines (deleted on one side, a binary file, a file against a directory).
    pub hunks: Vec<String>,
}

/// The conflicts of the files `paths` in the merged tree `tree`, read through `git` calls made
/// by `call`.
pub(super) fn read(
    call: &dyn Fn() -> Git,
    tree: &str,
    paths: &[String],
) -> Result<Vec<Conflict>, WorkspaceError> {
    paths
        .iter()
        .map(|path| {
            let out = call()
                .args(["cat-file", "blob"])
                .arg(format!("{tree}:{path}"))
                .output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            Ok(Conflict {
                path: path.clone(),
                hunks: if out.success {
                    hunks(&text)
                } else {
                    Vec::new()
                },
            })
        })
        .collect()
}

/// The regions of `text` from a line starting `<<<<<<<` to the next starting `>>>>>>>`, both
/// included; an unterminated region is left out.
pub(super) fn hunks(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut open: Option<Vec<&str>> = None;
    for line in text.split_inclusive('\n') {
        match open.as_mut() {
            None if line.starts_with("<<<<<<<") => open = Some(vec![line]),
            None => {}
            Some(region) => {
                region.push(line);
                if line.starts_with(">>>>>>>") {
                    found.push(region.concat());
                    open = None;
                }
            }
        }
    }
    found
}

/// The conflicts as a prompt asking the agent to bring `base` into its branch and resolve
/// them.
pub fn prompt(branch: &str, base: &str, conflicts: &[Conflict]) -> String {
    let mut text = format!(
        "Your branch {branch} conflicts with {base} in {} file(s), so it cannot land. Merge \
         {base} into your branch (git merge {base}), resolve these conflicts, and commit:\n",
        conflicts.len()
    );
    for c in conflicts {
        text.push_str(&format!("\n== {} ==\n", c.path));
        for hunk in &c.hunks {
            text.push_str(hunk);
            if !hunk.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    text
}
