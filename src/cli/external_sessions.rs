//! `agent-hub register` and `agent-hub unregister`: lend another hub's (or any bridge's)
//! sessions to this hub, and take them back.

use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::ops::{fail, finish, print_json};
use super::ClientOpts;
use crate::client::HubClient;
use crate::external_sessions::RegisterRequest;
use crate::protocol::{BridgeSession, ErrorBody, RegisterReply};

#[derive(Debug, Args)]
pub struct RegisterArgs {
    /// Base URL of the bridge that owns the sessions (another hub: its API URL).
    #[arg(long)]
    pub bridge: String,
    /// Token to present to the bridge (kept by the hub, never shown).
    #[arg(long, env = "AGENT_HUB_BRIDGE_TOKEN", hide_env_values = true)]
    pub bridge_token: Option<String>,
    /// Register every session the bridge lists.
    #[arg(long, conflicts_with = "ids")]
    pub all: bool,
    /// Session ids on the bridge (see its `GET /pty/list`).
    #[arg(required_unless_present = "all")]
    pub ids: Vec<String>,
    /// Owner fields to set instead of the ones the bridge reports.
    #[arg(long)]
    pub label: Option<String>,
    #[arg(long)]
    pub agent_id: Option<String>,
    #[arg(long)]
    pub owner_session_id: Option<String>,
    /// leader or worker.
    #[arg(long)]
    pub role: Option<String>,
    /// What the hub lists as the sessions' source.
    #[arg(long, default_value = "remote-hub")]
    pub source: String,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// One session's outcome in `register --json`.
#[derive(Serialize)]
#[serde(untagged)]
enum Outcome {
    Registered(Box<RegisterReply>),
    Failed(ErrorBody),
}

pub async fn register(args: RegisterArgs) -> i32 {
    let bridge = HubClient::new(&args.bridge).with_token(args.bridge_token.clone());
    let listed = match bridge.bridge_list().await {
        Ok(v) => v.sessions,
        Err(e) => return fail(&args.opts, &e),
    };
    let chosen: Vec<&BridgeSession> = if args.all {
        listed.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for id in &args.ids {
            match listed.iter().find(|s| &s.session_id == id) {
                Some(s) => chosen.push(s),
                None => {
                    eprintln!(
                        "agent-hub: the bridge at {} has no session '{id}'",
                        args.bridge
                    );
                    return 1;
                }
            }
        }
        chosen
    };
    let hub = args.opts.client();
    let mut results = Vec::new();
    let mut code = 0;
    for s in chosen {
        let owner = &s.info.owner;
        let pick = |flag: &Option<String>, listed: &Option<String>| flag.clone().or(listed.clone());
        let req = RegisterRequest {
            session_id: s.session_id.clone(),
            remote_session_id: None,
            source: Some(args.source.clone()),
            pid: s.info.pid,
            bridge_url: args.bridge.clone(),
            bridge_token: args.bridge_token.clone(),
            cols: Some(s.info.cols),
            rows: Some(s.info.rows),
            owner: crate::session::Owner {
                owner_agent_id: pick(&args.agent_id, &owner.owner_agent_id),
                owner_session_id: pick(&args.owner_session_id, &owner.owner_session_id),
                owner_role: pick(&args.role, &owner.owner_role),
                label: pick(&args.label, &owner.label),
                cli_type: owner.cli_type.clone(),
                conversation_id: None,
            },
            no_other_fields: Default::default(),
        };
        match hub.register(&req).await {
            Ok(v) => {
                if !args.opts.json {
                    let verb = if v.created { "registered" } else { "updated" };
                    println!(
                        "{verb} {} ({}) from {}",
                        v.session_id,
                        v.session.owner.label.as_deref().unwrap_or("no label"),
                        args.bridge
                    );
                }
                results.push(Outcome::Registered(Box::new(v)));
            }
            Err(e) => {
                code = 1;
                if !args.opts.json {
                    eprintln!("agent-hub: {}: {e}", s.session_id);
                }
                results.push(Outcome::Failed(e.body));
            }
        }
    }
    if args.opts.json {
        print_json(&json!({ "ok": code == 0, "results": results }));
    }
    code
}

#[derive(Debug, Args)]
pub struct UnregisterArgs {
    /// Session id in this hub.
    pub id: String,
    /// Also unregister a leader's session.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn unregister(args: UnregisterArgs) -> i32 {
    let result = args.opts.client().unregister(&args.id, args.force).await;
    finish(&args.opts, result, |_| format!("unregistered {}", args.id))
}
