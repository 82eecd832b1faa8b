//! `agent-hub wait-state TARGET STATE... [--timeout S]`: waits until a session's (or container
//! agent's) state is one of STATES, answering the moment it is; exits 0 when reached, 124 at
//! the timeout (like `run`), 1 on an error. The hub does the waiting (a long-poll on the state
//! route), so nothing polls here.

use clap::Args;

use super::ClientOpts;
use crate::client::encode;

#[derive(Debug, Args)]
pub struct WaitStateArgs {
    /// A session id, an agent id or a label.
    pub target: String,
    /// States to wait for: idle, blocked, limited, working, stuck, exited, unknown.
    #[arg(required = true)]
    pub states: Vec<String>,
    /// Seconds to wait at most (up to 600).
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn run(args: WaitStateArgs) -> i32 {
    let client = args.opts.client();
    let query = format!(
        "/state?wait={}&timeout_ms={}",
        encode(&args.states.join(",")),
        (args.timeout.max(0.0) * 1000.0) as u64
    );
    // A stopped agent has no session: its own route waits for it to start.
    let path = match client.resolve_target(&args.target).await {
        Ok(id) => format!("/v1/pty/sessions/{}{query}", encode(&id)),
        Err(e) if e.error_code == "AGENT_NOT_RUNNING" => {
            format!("/v1/agents/{}{query}", encode(&args.target))
        }
        Err(e) => return super::ops::fail(&args.opts, &e),
    };
    let raw: serde_json::Value = match client
        .call(reqwest::Method::GET, &path, None::<&serde_json::Value>)
        .await
    {
        Ok(v) => v,
        Err(e) => return super::ops::fail(&args.opts, &e),
    };
    let reply: WaitReply = serde_json::from_value(raw.clone()).unwrap_or_default();
    if args.opts.json {
        println!("{raw}");
    } else if reply.reached {
        println!("{}", reply.state);
    } else {
        eprintln!(
            "agent-hub: still {} after {}s (waited for {})",
            reply.state,
            args.timeout,
            args.states.join(", ")
        );
    }
    if reply.reached {
        0
    } else {
        super::run::EXIT_TIMEOUT
    }
}

/// What a state wait answers (the rest of the state object is printed with `--json`).
#[derive(Debug, Default, serde::Deserialize)]
struct WaitReply {
    #[serde(default)]
    state: String,
    #[serde(default)]
    reached: bool,
}
