//! `agent-hub agents | start | stop | restart`: container agents from the command line.
//! Several agents start (or stop) concurrently, with a line per agent as each finishes.
//! (`diff` and `workspace` are in [`super::workspace`].)

use std::io::IsTerminal;
use std::time::Instant;

use super::ClientOpts;
use crate::agents::recreate::REBUILT;
use crate::protocol::AgentStatus;
use crate::workspace::WorkSummary;
use clap::Args;

#[derive(Debug, Args)]
pub struct AgentsArgs {
    #[command(flatten)]
    pub opts: ClientOpts,
}

#[derive(Debug, Args)]
pub struct AgentOpArgs {
    /// Agent ids.
    #[arg(required = true)]
    pub ids: Vec<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub op: AgentOpArgs,
    /// Begin a new conversation instead of resuming the agent's last one (the earlier ones
    /// stay in its home; later starts resume the new one).
    #[arg(long)]
    pub fresh: bool,
}

pub async fn list(args: AgentsArgs) -> i32 {
    match args.opts.client().agents().await {
        Ok(v) if args.opts.json => {
            super::ops::print_json(&v);
            0
        }
        Ok(v) => {
            println!("AGENT            STATUS    NEXT    SESSION          LABEL          IMAGE");
            for a in &v.agents {
                let mut status = a.status.to_string();
                if let Some(code) = a.exit_code.filter(|_| a.status == AgentStatus::Exited) {
                    status = format!("exited({code})");
                }
                let next = if a.resumes { "resume" } else { "new" };
                println!(
                    "{:<16} {:<9} {:<7} {:<16} {:<14} {}",
                    a.id,
                    status,
                    next,
                    a.session_id.as_deref().unwrap_or("-"),
                    a.label.as_deref().unwrap_or("-"),
                    a.image,
                );
                if !a.docker_hosts.is_empty() {
                    println!("  {}", placement_note(&a.docker_host, &a.docker_hosts));
                }
                if let Some(err) = &a.error {
                    println!("  error: {err}");
                }
                if a.outdated {
                    println!("  outdated: {}", outdated_note(&a.changed));
                }
                if let Some(work) = &a.work {
                    println!("  work: {}", work_note(work));
                }
            }
            0
        }
        Err(e) => {
            eprintln!("agent-hub: {e}");
            1
        }
    }
}

/// Where an agent with `docker_hosts` is: the engine it was placed on, of its candidates.
fn placement_note(on: &str, candidates: &[String]) -> String {
    match on {
        "" => format!("engine: chosen at its start, of {}", candidates.join(", ")),
        on => format!("engine: {on} (placed, of {})", candidates.join(", ")),
    }
}

/// Runs `op` (start, stop, restart) on every agent at once and reports each as it finishes;
/// a `fresh` (re)start begins a new conversation.
pub async fn run_op(args: AgentOpArgs, op: &'static str, fresh: bool) -> i32 {
    let client = args.opts.client();
    let total = args.ids.len();
    let progress = !args.opts.json && std::io::stderr().is_terminal();
    if !args.opts.json && total > 1 {
        eprintln!("{op}ing {total} agents: {}", args.ids.join(", "));
    }
    let began = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for id in args.ids.clone() {
        let client = client.clone();
        tasks.spawn(async move {
            let started = Instant::now();
            let result = client.agent_op(&id, op, fresh).await;
            (id, started.elapsed(), result)
        });
    }
    let (mut done, mut failed) = (0, 0);
    while let Some(joined) = tasks.join_next().await {
        let Ok((id, took, result)) = joined else {
            continue;
        };
        done += 1;
        if progress {
            eprint!("\r\x1b[K");
        }
        match result {
            Ok(v) if args.opts.json => super::ops::print_json(&v),
            Ok(v) => {
                let note = op_note(v.already_running, v.recreated, &v.changed);
                let status = v.agent.status;
                println!(
                    "ok   {id:<16} {status}{note} in {:.1} s",
                    took.as_secs_f64()
                );
            }
            Err(e) => {
                failed += 1;
                if args.opts.json {
                    super::ops::print_json(&e.body);
                } else {
                    println!("FAIL {id:<16} {e}");
                    if let Some(screen) = e.body.details.get("screen").and_then(|s| s.as_str()) {
                        println!("     last screen:\n{}", indent(screen));
                    }
                }
            }
        }
        if progress && done < total {
            eprint!(
                "[{done}/{total} done, {:.1} s]",
                began.elapsed().as_secs_f64()
            );
        }
    }
    if !args.opts.json && total > 1 {
        eprintln!(
            "{done} agents, {failed} failed, {:.1} s",
            began.elapsed().as_secs_f64()
        );
    }
    i32::from(failed > 0)
}

/// What the line of an agent's start or restart adds to its status (from its reply).
fn op_note(already_running: bool, recreated: bool, changed: &[String]) -> String {
    if already_running {
        return " (already running)".into();
    }
    if !recreated {
        return String::new();
    }
    format!(
        " (container made again: {})",
        what_changed(changed, "it recorded")
    )
}

/// What the listing says under a running agent whose container is outdated.
/// An agent's work summary in a line: `2 ahead, 1 behind · 3 files · merges cleanly`, or
/// `· conflicts: a.rs, b.rs` (as of its last turn's end, start or stop).
fn work_note(w: &WorkSummary) -> String {
    let behind = match w.behind {
        0 => String::new(),
        n => format!(", {n} behind"),
    };
    let files = match w.files {
        1 => "1 file".to_string(),
        n => format!("{n} files"),
    };
    let merge = match w.merges_cleanly {
        true => "merges cleanly".to_string(),
        false => format!("conflicts: {}", w.conflicts.join(", ")),
    };
    format!("{} ahead{behind} · {files} · {merge}", w.ahead)
}

fn outdated_note(changed: &[String]) -> String {
    let what = what_changed(changed, "its container records");
    format!("{what}; `agent-hub restart` applies its definition")
}

/// What changed, from a reply's `changed`: `env, mounts changed`, `image rebuilt`; nothing
/// (the container did not record its definition) is `<records> no definition`.
fn what_changed(changed: &[String], records: &str) -> String {
    let rebuilt = changed.iter().any(|p| p == REBUILT);
    let parts: Vec<&str> = changed
        .iter()
        .map(String::as_str)
        .filter(|p| *p != REBUILT)
        .collect();
    match (parts.is_empty(), rebuilt) {
        (true, false) => format!("{records} no definition"),
        (true, true) => "image rebuilt".into(),
        (false, false) => format!("{} changed", parts.join(", ")),
        (false, true) => format!("image rebuilt, {} changed", parts.join(", ")),
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("     | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::{op_note, outdated_note, work_note};
    use crate::workspace::WorkSummary;

    #[test]
    fn a_work_line_says_ahead_behind_files_and_the_merge() {
        let w = WorkSummary {
            ahead: 3,
            behind: 0,
            files: 1,
            merges_cleanly: true,
            conflicts: Vec::new(),
            checked_at: chrono::Utc::now(),
        };
        assert_eq!(work_note(&w), "3 ahead · 1 file · merges cleanly");
        let w = WorkSummary {
            behind: 2,
            files: 5,
            merges_cleanly: false,
            conflicts: vec!["a.rs".into(), "b.rs".into()],
            ..w
        };
        assert_eq!(
            work_note(&w),
            "3 ahead, 2 behind · 5 files · conflicts: a.rs, b.rs"
        );
    }

    #[test]
    fn a_start_line_says_when_the_container_was_made_again_and_why() {
        let parts = ["env".to_string(), "mounts".to_string()];
        assert_eq!(op_note(true, false, &[]), " (already running)");
        assert_eq!(op_note(false, false, &[]), "");
        assert_eq!(
            op_note(false, true, &parts),
            " (container made again: env, mounts changed)"
        );
        assert!(op_note(false, true, &[]).contains("recorded no definition"));
        let rebuilt = ["image (rebuilt)".to_string(), "env".to_string()];
        assert_eq!(
            op_note(false, true, &rebuilt),
            " (container made again: image rebuilt, env changed)"
        );
        assert_eq!(
            op_note(false, true, &rebuilt[..1]),
            " (container made again: image rebuilt)"
        );
    }

    #[test]
    fn the_listing_says_what_makes_a_running_container_outdated_and_the_way_out() {
        assert_eq!(
            outdated_note(&["env".into()]),
            "env changed; `agent-hub restart` applies its definition"
        );
        assert_eq!(
            outdated_note(&["image (rebuilt)".into()]),
            "image rebuilt; `agent-hub restart` applies its definition"
        );
        assert!(outdated_note(&[]).starts_with("its container records no definition"));
    }
}
