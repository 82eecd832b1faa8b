//! `agent-hub register` and `agent-hub unregister`: lend another hub's (or any bridge's)
//! sessions to this hub, and take them back.

use clap::Args;
use serde_json::{json, Value};

use super::ops::fail;
use super::ClientOpts;
use crate::client::HubClient;

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

pub async fn register(args: RegisterArgs) -> i32 {
    let bridge = HubClient::new(&args.bridge).with_token(args.bridge_token.clone());
    let listed = match bridge
        .call(reqwest::Method::GET, "/pty/list", None::<&Value>)
        .await
    {
        Ok(v) => v["sessions"].as_array().cloned().unwrap_or_default(),
        Err(e) => return fail(&args.opts, &e),
    };
    let chosen: Vec<&Value> = if args.all {
        listed.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for id in &args.ids {
            match listed.iter().find(|s| s["session_id"] == json!(id)) {
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
        let pick = |flag: &Option<String>, key: &str| match flag {
            Some(v) => json!(v),
            None => s[key].clone(),
        };
        let body = json!({
            "session_id": s["session_id"],
            "source": args.source,
            "bridge_url": args.bridge,
            "bridge_token": args.bridge_token,
            "cli_type": s["cli_type"],
            "pid": s["pid"],
            "cols": s["cols"],
            "rows": s["rows"],
            "label": pick(&args.label, "label"),
            "owner_agent_id": pick(&args.agent_id, "owner_agent_id"),
            "owner_session_id": pick(&args.owner_session_id, "owner_session_id"),
            "owner_role": pick(&args.role, "owner_role"),
        });
        match hub
            .call(reqwest::Method::POST, "/v1/pty/register", Some(&body))
            .await
        {
            Ok(v) => {
                if !args.opts.json {
                    let verb = if v["created"] == true {
                        "registered"
                    } else {
                        "updated"
                    };
                    println!(
                        "{verb} {} ({}) from {}",
                        v["session_id"].as_str().unwrap_or(""),
                        v["session"]["label"].as_str().unwrap_or("no label"),
                        args.bridge
                    );
                }
                results.push(v);
            }
            Err(e) => {
                code = 1;
                if !args.opts.json {
                    eprintln!("agent-hub: {}: {e}", s["session_id"]);
                }
                results.push(e.body);
            }
        }
    }
    if args.opts.json {
        println!("{}", json!({ "ok": code == 0, "results": results }));
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
    let path = format!(
        "/v1/pty/unregister/{}{}",
        crate::client::encode(&args.id),
        if args.force { "?force=true" } else { "" }
    );
    match args
        .opts
        .client()
        .call(reqwest::Method::DELETE, &path, None::<&Value>)
        .await
    {
        Ok(v) => {
            if args.opts.json {
                println!("{v}");
            } else {
                println!("unregistered {}", args.id);
            }
            0
        }
        Err(e) => fail(&args.opts, &e),
    }
}
