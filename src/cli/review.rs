//! `agent-hub review <agent> [--file F --line N] "note"`: a review note to an agent about the
//! work on its branch (`POST /v1/agents/{id}/review`).

use clap::Args;

use super::ops::{fail, print_json};
use super::ClientOpts;
use crate::protocol::{ReviewReply, ReviewRequest};
use crate::workspace::review::ReviewNote;

/// The agent gets one prompt: "Review notes on your branch agent/<id>", then the file, the
/// line and the hunk of its diff (committed against the base, else uncommitted) that holds
/// that line, then the note. Without --line the note is on the whole file; without --file on
/// the work as a whole. A file the branch did not change is allowed (the prompt says so).
/// While the agent is working the note is queued and typed once it is idle (receipt
/// `queued`); a stopped agent whose policy has start_on_message is started first.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  agent-hub review worker-a --file src/lib.rs --line 42 \"this can panic on an empty list\"\n  agent-hub review worker-a \"add a test for the error path\""
)]
pub struct ReviewArgs {
    /// The agent's id.
    pub agent: String,
    /// What you want the agent to know or change.
    pub note: String,
    /// The file the note is on, as the diff names it (relative to the repository's top).
    #[arg(long)]
    pub file: Option<String>,
    /// The line the note is on, in the file as the branch has it (needs --file).
    #[arg(long, requires = "file")]
    pub line: Option<u32>,
    /// Send even when the agent is blocked on a question (the note would answer it).
    #[arg(long)]
    pub force: bool,
    /// Print the prompt the agent got.
    #[arg(long)]
    pub show_prompt: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn run(args: ReviewArgs) -> i32 {
    let req = ReviewRequest {
        notes: vec![ReviewNote {
            note: args.note.clone(),
            file: args.file.clone(),
            line: args.line,
        }],
        force: args.force,
    };
    match args.opts.client().review_agent(&args.agent, &req).await {
        Ok(v) if args.opts.json => {
            print_json(&v);
            0
        }
        Ok(v) => {
            println!("{}", outcome(&v));
            if args.show_prompt {
                println!("\n{}", v.prompt);
            }
            0
        }
        Err(e) => fail(&args.opts, &e),
    }
}

/// What became of the notes, in one line.
fn outcome(v: &ReviewReply) -> String {
    let notes = match v.notes {
        1 => "1 review note".to_string(),
        n => format!("{n} review notes"),
    };
    let started = if v.started { " (started it)" } else { "" };
    let what = match v.receipt.as_str() {
        "submitted" => "submitted".to_string(),
        "queued" => "queued: the agent is busy; typed once it is idle".to_string(),
        other => format!("{other}: typed, but the screen did not show it taken"),
    };
    format!("{notes} on {} to {}{started}: {what}", v.branch, v.agent_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outcome_says_how_many_notes_where_and_the_receipt() {
        let reply = |notes, receipt: &str, started| ReviewReply {
            ok: true,
            agent_id: "w".into(),
            branch: "agent/w".into(),
            notes,
            prompt: String::new(),
            started,
            receipt: receipt.into(),
            resolved_session_id: "tmux_1".into(),
            delivery: serde_json::json!({}),
        };
        assert_eq!(
            outcome(&reply(1, "submitted", false)),
            "1 review note on agent/w to w: submitted"
        );
        assert_eq!(
            outcome(&reply(3, "queued", true)),
            "3 review notes on agent/w to w (started it): queued: the agent is busy; typed once it is idle"
        );
    }
}
