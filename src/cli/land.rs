//! `agent-hub merge`, `agent-hub update` and `agent-hub push`: landing an agent's work from
//! the command line.

use clap::Args;

use super::ops::{fail, print_json};
use super::ClientOpts;
use crate::http_client::ClientError;
use crate::protocol::{MergeReply, MergeRequest, PushRequest, UpdateRequest};
use crate::workspace::{Commit, LandMode};

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("mode").multiple(false))]
pub struct MergeArgs {
    /// The agent's id.
    pub agent: String,
    /// One commit on the base with the branch's changes (message: the commits' subjects).
    #[arg(long, group = "mode")]
    pub squash: bool,
    /// Replay the branch's commits on the base, then move the base to the last of them.
    #[arg(long, group = "mode")]
    pub rebase: bool,
    /// Only fast-forward the base to the branch; refused (NOT_FAST_FORWARD) when the base has
    /// commits the branch lacks.
    #[arg(long, group = "mode")]
    pub ff_only: bool,
    /// The merge or squash commit's message.
    #[arg(long, short)]
    pub message: Option<String>,
    /// Merge even while the agent is working.
    #[arg(long)]
    pub force: bool,
    /// On a conflict, send the conflicting files and hunks to the agent as a prompt to
    /// resolve them on its branch.
    #[arg(long)]
    pub to_agent: bool,
    /// After the merge, move the agent's branch and checkout to the new base, so that its
    /// next task starts from what landed (its checkout must be clean).
    #[arg(long)]
    pub continue_from_base: bool,
    /// Change nothing: show the commits and files that would land, and any conflicts.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The agent's id.
    pub agent: String,
    /// Replay the agent's commits on the base instead of merging the base in.
    #[arg(long)]
    pub rebase: bool,
    /// Update even while the agent is working.
    #[arg(long)]
    pub force: bool,
    /// On a conflict, send the conflicting files and hunks to the agent as a prompt.
    #[arg(long)]
    pub to_agent: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The agent's id.
    pub agent: String,
    /// The remote of the agent's repository to push to.
    #[arg(long, default_value = "origin")]
    pub remote: String,
    #[command(flatten)]
    pub opts: ClientOpts,
}

impl MergeArgs {
    fn mode(&self) -> LandMode {
        match (self.squash, self.rebase, self.ff_only) {
            (true, _, _) => LandMode::Squash,
            (_, true, _) => LandMode::Rebase,
            (_, _, true) => LandMode::FfOnly,
            _ => LandMode::Merge,
        }
    }
}

pub async fn merge(args: MergeArgs) -> i32 {
    let req = MergeRequest {
        mode: args.mode(),
        message: args.message.clone(),
        force: args.force,
        to_agent: args.to_agent,
        continue_from_base: args.continue_from_base,
        dry_run: args.dry_run,
    };
    match args.opts.client().merge_agent(&args.agent, &req).await {
        Ok(v) if args.opts.json => {
            print_json(&v);
            0
        }
        Ok(v) => {
            print!("{}", merge_text(&v));
            0
        }
        Err(e) => conflict_or_fail(&args.opts, &e),
    }
}

/// A merge's reply for people.
fn merge_text(v: &MergeReply) -> String {
    let mode = v.mode.name();
    let mut text = match (v.dry_run, v.clean) {
        (true, Some(true)) => format!("would {mode} {} into {}:\n", v.branch, v.base),
        (true, _) => format!(
            "{} does NOT {mode} cleanly into {}{}\n",
            v.branch,
            v.base,
            conflict_list(v.conflicts.as_deref().unwrap_or_default())
        ),
        (false, _) => format!(
            "{mode}: {} into {} ({} -> {}, work tree {})\n",
            v.branch,
            v.base,
            short(v.before.as_deref().unwrap_or_default()),
            short(v.after.as_deref().unwrap_or_default()),
            v.worktree.as_deref().unwrap_or_default()
        ),
    };
    text.push_str(&commit_lines(&v.commits));
    for f in &v.files {
        let count = |n: Option<u64>| n.map_or("-".to_string(), |n| n.to_string());
        text.push_str(&format!(
            "  {:<9} +{} -{} {}\n",
            f.status,
            count(f.added),
            count(f.removed),
            f.path
        ));
    }
    if let Some(at) = &v.continued_at {
        text.push_str(&format!("{} now continues from {}\n", v.branch, short(at)));
    }
    text
}

fn conflict_list(paths: &[String]) -> String {
    match paths {
        [] => String::new(),
        paths => format!(": conflicts in {}", paths.join(", ")),
    }
}

fn commit_lines(commits: &[Commit]) -> String {
    commits
        .iter()
        .map(|c| format!("  {} {}\n", short(&c.sha), c.subject))
        .collect()
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// A `MERGE_CONFLICT` printed with its files and hunks (for people); any other error as
/// usual.
fn conflict_or_fail(opts: &ClientOpts, e: &ClientError) -> i32 {
    if opts.json || e.error_code != "MERGE_CONFLICT" {
        return fail(opts, e);
    }
    eprintln!("agent-hub: {e}");
    let conflicts = e.body.details.get("conflicts").and_then(|c| c.as_array());
    for conflict in conflicts.into_iter().flatten() {
        eprintln!("\n== {} ==", conflict["path"].as_str().unwrap_or_default());
        for hunk in conflict["hunks"].as_array().into_iter().flatten() {
            eprint!("{}", hunk.as_str().unwrap_or_default());
        }
    }
    1
}

pub async fn update(args: UpdateArgs) -> i32 {
    let req = UpdateRequest {
        rebase: args.rebase,
        force: args.force,
        to_agent: args.to_agent,
    };
    match args
        .opts
        .client()
        .update_agent_branch(&args.agent, &req)
        .await
    {
        Ok(v) if args.opts.json => {
            print_json(&v);
            0
        }
        Ok(v) if !v.updated => {
            println!("{} already has {}", v.branch, v.base);
            0
        }
        Ok(v) => {
            println!(
                "{} updated from {} ({} -> {}, checkout {})",
                v.branch,
                v.base,
                short(&v.before),
                short(&v.after),
                v.worktree
            );
            0
        }
        Err(e) => conflict_or_fail(&args.opts, &e),
    }
}

pub async fn push(args: PushArgs) -> i32 {
    let req = PushRequest {
        remote: Some(args.remote.clone()),
    };
    match args
        .opts
        .client()
        .push_agent_branch(&args.agent, &req)
        .await
    {
        Ok(v) if args.opts.json => {
            print_json(&v);
            0
        }
        Ok(v) => {
            println!(
                "pushed {} ({}) to {} {}",
                v.branch,
                short(&v.sha),
                v.remote,
                v.url
            );
            0
        }
        Err(e) => fail(&args.opts, &e),
    }
}
