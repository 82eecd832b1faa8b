//! `agent-hub hook EVENT [DETAIL]`: what an agent CLI's own hook runs to tell the hub its state
//! (Claude Code's `Stop`, `UserPromptSubmit`, `Notification` with `permission_prompt`). Posts
//! the event to the caller's own session (`AGENT_HUB_SESSION_ID`, a host session given hub
//! access) or container agent (`AGENT_HUB_AGENT_ID`) with the credential the hub gave it; the
//! session's profile maps the event to a state (`[signals.hooks]`).
//!
//! A hook must never get in the CLI's way: whatever the hub answers, the exit code is 0 (a
//! failure is one line on stderr) unless `--strict`. Claude Code, for one, treats exit code 2
//! of some hooks as "block this tool call". Standard input (the CLI's JSON about the event) is
//! not read.

use clap::Args;
use serde_json::json;

use super::ClientOpts;

/// The longest a hook waits for the hub (the CLI waits for its hook).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
use crate::client::encode;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The hook event: `Stop`, `UserPromptSubmit`, `Notification`, ...
    pub event: String,
    /// What the hook matched, when the profile tells matches apart: `permission_prompt`.
    pub detail: Option<String>,
    /// The session to report for (default: `AGENT_HUB_SESSION_ID`).
    #[arg(long, env = "AGENT_HUB_SESSION_ID")]
    pub session: Option<String>,
    /// The container agent to report for when no session is given (default:
    /// `AGENT_HUB_AGENT_ID`, set in every container agent).
    #[arg(long, env = "AGENT_HUB_AGENT_ID")]
    pub agent: Option<String>,
    /// Exit 1 when the hub cannot be told (default: 0 with a warning, so a hub that is away
    /// never disturbs the agent's CLI).
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Where an event for `session` (else `agent`) goes; `None` when neither is known.
pub fn hook_path(session: Option<&str>, agent: Option<&str>) -> Option<String> {
    match (session, agent) {
        (Some(s), _) => Some(format!("/v1/pty/sessions/{}/hook", encode(s))),
        (None, Some(a)) => Some(format!("/v1/agents/{}/hook", encode(a))),
        (None, None) => None,
    }
}

/// Tells the hub `event` (with `detail`) at `path`, waiting [`TIMEOUT`] at most.
pub async fn tell(
    opts: &ClientOpts,
    path: &str,
    event: &str,
    detail: Option<&str>,
) -> Result<serde_json::Value, crate::client::ClientError> {
    let body = json!({ "event": event, "detail": detail });
    opts.client()
        .call_within::<serde_json::Value>(reqwest::Method::POST, path, Some(&body), TIMEOUT)
        .await
}

pub async fn run(args: HookArgs) -> i32 {
    let failed = if args.strict { 1 } else { 0 };
    let Some(path) = hook_path(args.session.as_deref(), args.agent.as_deref()) else {
        eprintln!(
            "agent-hub hook: no session or agent to report for (AGENT_HUB_SESSION_ID or \
             AGENT_HUB_AGENT_ID, or --session/--agent)"
        );
        return failed;
    };
    let reply = tell(&args.opts, &path, &args.event, args.detail.as_deref()).await;
    match reply {
        Ok(reply) => {
            if args.opts.json {
                println!("{reply}");
            }
            0
        }
        Err(e) => {
            eprintln!("agent-hub hook {}: {e}", args.event);
            if args.opts.json {
                println!("{}", serde_json::to_string(&e.body).unwrap_or_default());
            }
            failed
        }
    }
}
