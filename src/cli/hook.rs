//! `agent-hub hook EVENT [DETAIL]`: what an agent CLI's own hook runs to tell the hub its state
//! (Claude Code's `Stop`, `UserPromptSubmit`, `Notification` with `permission_prompt`). Posts
//! the event to the caller's own session (`AGENT_HUB_SESSION_ID`, a host session given hub
//! access) or container agent (`AGENT_HUB_AGENT_ID`) with the credential the hub gave it; the
//! session's profile maps the event to a state (`[signals.hooks]`).
//!
//! A hook must never get in the CLI's way: whatever the hub answers, the exit code is 0 (a
//! failure is one line on stderr) unless `--strict`. Claude Code, for one, treats exit code 2
//! of some hooks as "block this tool call" (Gemini CLI too). Standard input (the CLI's JSON
//! about the event) is not read, and nothing is printed on standard output without `--json`
//! (Gemini CLI parses a hook's standard output as JSON).
//!
//! Codex's `notify` program cannot name its event on its command line: Codex runs the
//! configured command with one JSON argument appended (`{"type": "agent-turn-complete", ...}`).
//! `agent-hub hook --notify PAYLOAD` takes that argument as the value of its option and names
//! the event by the payload's `type` (so `notify = ["agent-hub", "hook", "--notify"]`), rather
//! than ignoring trailing arguments: the command line stays strict (one event, at most one
//! detail, nothing else), the event is what Codex says happened (a later Codex that notifies
//! more kinds sends them under their own names, which a profile maps or ignores), and the
//! hub checks it as it checks any event name.

use clap::Args;
use serde_json::json;

use super::ClientOpts;

/// The longest a hook waits for the hub (the CLI waits for its hook).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
use crate::client::encode;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The hook event: `Stop`, `UserPromptSubmit`, `Notification`, ...
    #[arg(required_unless_present = "notify")]
    pub event: Option<String>,
    /// What the hook matched, when the profile tells matches apart: `permission_prompt`.
    pub detail: Option<String>,
    /// The JSON object Codex's `notify` program gets as its last argument: the event is its
    /// `type` (`agent-turn-complete`).
    #[arg(long, value_name = "PAYLOAD", conflicts_with_all = ["event", "detail"])]
    pub notify: Option<String>,
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
    let event = match (&args.event, &args.notify) {
        (Some(event), _) => event.clone(),
        (None, Some(payload)) => match notify_type(payload) {
            Some(kind) => kind,
            None => {
                eprintln!("agent-hub hook --notify: not a JSON object with a string `type`");
                return failed;
            }
        },
        (None, None) => unreachable!("clap requires EVENT or --notify"),
    };
    let reply = tell(&args.opts, &path, &event, args.detail.as_deref()).await;
    match reply {
        Ok(reply) => {
            if args.opts.json {
                println!("{reply}");
            }
            0
        }
        Err(e) => {
            eprintln!("agent-hub hook {event}: {e}");
            if args.opts.json {
                println!("{}", serde_json::to_string(&e.body).unwrap_or_default());
            }
            failed
        }
    }
}

/// The `type` of a `notify` payload (Codex: `{"type": "agent-turn-complete", ...}`).
fn notify_type(payload: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    Some(v.get("type")?.as_str()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notify_payload_names_its_event_by_its_type() {
        let codex = r#"{"type":"agent-turn-complete","turn-id":"1","input-messages":["hi"]}"#;
        assert_eq!(notify_type(codex).as_deref(), Some("agent-turn-complete"));
        for bad in [
            "",
            "agent-turn-complete",
            "[]",
            r#"{"type": 3}"#,
            r#"{"kind": "x"}"#,
        ] {
            assert_eq!(notify_type(bad), None, "{bad}");
        }
    }

    fn parse(args: &[&str]) -> Result<HookArgs, clap::Error> {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["agent-hub", "hook"].iter().chain(args))?;
        match cli.command {
            crate::cli::Command::Hook(args) => Ok(args),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_command_line_takes_an_event_or_a_notify_payload_and_nothing_more() {
        let codex = r#"{"type":"agent-turn-complete"}"#;
        let args = parse(&["--notify", codex]).unwrap();
        assert_eq!((args.event, args.notify.as_deref()), (None, Some(codex)));
        let args = parse(&["Notification", "permission_prompt"]).unwrap();
        assert_eq!(args.detail.as_deref(), Some("permission_prompt"));
        assert!(parse(&[]).is_err());
        assert!(parse(&["Stop", "x", codex]).is_err());
        assert!(parse(&["Stop", "--notify", codex]).is_err());
    }
}
