//! `agent-hub diff <agent>` and `agent-hub workspace remove <agent>`: an agent's git checkout
//! of its own, from the command line.

use clap::{Args, Subcommand};

use super::ops::{fail, print_json};
use super::ClientOpts;
use crate::workspace::{Changes, FileChange};

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The agent's id.
    pub agent: String,
    /// Print the full diffs (committed, then uncommitted) after the summary.
    #[arg(long)]
    pub full: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

#[derive(Debug, Args)]
pub struct WorkspaceArgs {
    #[command(subcommand)]
    pub command: WorkspaceCommand,
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Delete the agent's checkout and keep its branch in the repository. Refused while the
    /// agent runs, and while the checkout has uncommitted changes unless --force.
    Remove {
        /// The agent's id.
        agent: String,
        /// Remove it even with uncommitted changes (they are lost; commits stay on the branch).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        opts: ClientOpts,
    },
}

pub async fn diff(args: DiffArgs) -> i32 {
    match args
        .opts
        .client()
        .agent_changes(&args.agent, args.full)
        .await
    {
        Ok(v) if args.opts.json => {
            print_json(&v);
            0
        }
        Ok(v) => {
            print!("{}", summary(&args.agent, &v.changes));
            if let Some(diff) = &v.changes.diff {
                for (title, text) in [
                    ("committed", &diff.committed),
                    ("uncommitted", &diff.uncommitted),
                ] {
                    if !text.is_empty() {
                        println!("\n==== {title} ====\n{}", text.trim_end());
                    }
                }
            }
            0
        }
        Err(e) => fail(&args.opts, &e),
    }
}

pub async fn run(args: WorkspaceArgs) -> i32 {
    match args.command {
        WorkspaceCommand::Remove { agent, force, opts } => {
            match opts.client().remove_workspace(&agent, force).await {
                Ok(v) if opts.json => {
                    print_json(&v);
                    0
                }
                Ok(v) => {
                    println!("removed {} (branch {} kept)", v.path, v.branch);
                    0
                }
                Err(e) => {
                    let code = fail(&opts, &e);
                    let files = e.body.details.get("files").and_then(|f| f.as_array());
                    if let (false, Some(files)) = (opts.json, files) {
                        for f in files.iter().filter_map(|f| f.as_str()) {
                            eprintln!("  {f}");
                        }
                    }
                    code
                }
            }
        }
    }
}

/// The changes in a few lines: where, the commits, the files committed and uncommitted.
fn summary(agent: &str, c: &Changes) -> String {
    let short = |sha: &str| sha.chars().take(8).collect::<String>();
    let mut out = format!(
        "{agent}: branch {} at {} (base {}, from {}), checkout {}\n",
        c.branch,
        short(&c.head),
        c.base,
        short(&c.merge_base),
        c.path
    );
    out += &format!(
        "committed: {} commits, {} files\n",
        c.commits.len(),
        c.committed.len()
    );
    for commit in &c.commits {
        out += &format!("  {} {}\n", short(&commit.sha), commit.subject);
    }
    out += &files(&c.committed);
    out += &format!("uncommitted: {} files\n", c.uncommitted.len());
    out += &files(&c.uncommitted);
    out
}

fn files(list: &[FileChange]) -> String {
    let count = |n: Option<u64>, sign: char| n.map_or("bin".to_string(), |n| format!("{sign}{n}"));
    list.iter()
        .map(|f| {
            format!(
                "  {:>6} {:>6}  {:<9} {}\n",
                count(f.added, '+'),
                count(f.removed, '-'),
                f.status,
                f.path
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::Commit;

    #[test]
    fn the_summary_lists_commits_and_files_apart() {
        let file = |path: &str, added, removed, status: &str| FileChange {
            path: path.into(),
            added,
            removed,
            status: status.into(),
        };
        let c = Changes {
            branch: "agent/a".into(),
            base: "main".into(),
            path: "/d/agents/a/workspace".into(),
            head: "0123456789abcdef".into(),
            merge_base: "fedcba9876543210".into(),
            commits: vec![Commit {
                sha: "0123456789abcdef".into(),
                subject: "Add hello".into(),
            }],
            committed: vec![file("hello.txt", Some(2), Some(0), "added")],
            uncommitted: vec![file("logo.png", None, None, "untracked")],
            diff: None,
        };
        let text = summary("a", &c);
        assert!(
            text.starts_with("a: branch agent/a at 01234567 (base main, from fedcba98)"),
            "{text}"
        );
        assert!(
            text.contains("committed: 1 commits, 1 files\n  01234567 Add hello\n"),
            "{text}"
        );
        assert!(
            text.contains("    +2     -0  added     hello.txt\n"),
            "{text}"
        );
        assert!(
            text.contains("uncommitted: 1 files\n     bin    bin  untracked logo.png\n"),
            "{text}"
        );
    }
}
