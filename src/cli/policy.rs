//! `agent-hub policy check | list | reload`: what the hub's policies would do now and why (a
//! dry run: nothing is done), which agents use each policy, and reloading them from disk.

use clap::{Args, Subcommand};
use serde_json::Value;

use super::ClientOpts;

#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Dry run: for every agent or session under a policy, what the policy would do right now
    /// (stop, warn, restart, notify, interrupt or nothing) and why. Nothing is done.
    Check {
        /// Only this agent (or session id).
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// List the loaded policies, their settings and the agents and sessions using each.
    List {
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Reload policies and agent profiles from the policies directory (as SIGHUP does); a bad
    /// file is reported with file, line and key, and the old set stays in force.
    Reload {
        #[command(flatten)]
        opts: ClientOpts,
    },
}

pub async fn run(args: PolicyArgs) -> i32 {
    let (opts, result) = match &args.command {
        PolicyCommand::Check { agent, opts } => {
            (opts, opts.client().policy_check(agent.as_deref()).await)
        }
        PolicyCommand::List { opts } => (opts, opts.client().policies().await),
        PolicyCommand::Reload { opts } => (opts, opts.client().policies_reload().await),
    };
    match result {
        Ok(v) if opts.json => {
            println!("{v}");
            0
        }
        Ok(v) => {
            match &args.command {
                PolicyCommand::Check { .. } => print_checks(&v),
                PolicyCommand::List { .. } => print_policies(&v),
                PolicyCommand::Reload { .. } => println!(
                    "reloaded policies: {}; profiles: {}",
                    join(&v["policies"]),
                    join(&v["profiles"])
                ),
            }
            0
        }
        Err(e) => {
            if opts.json {
                super::ops::print_json(&e.body);
            } else {
                eprintln!("agent-hub: {e}");
            }
            1
        }
    }
}

fn join(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_checks(v: &Value) {
    let rows = v["checks"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        println!("no agent or session is under a policy");
        return;
    }
    println!("AGENT/SESSION     POLICY        STATE     WOULD      REASON");
    for r in rows {
        let who = r["agent_id"]
            .as_str()
            .or(r["session_id"].as_str())
            .unwrap_or("?");
        let mut state = r["state"].as_str().unwrap_or("stopped").to_string();
        if r["stuck"] == true {
            state.push_str(",stuck");
        }
        let dry = if r["dry_run"] == true {
            " (dry run)"
        } else {
            ""
        };
        println!(
            "{who:<17} {:<13} {state:<9} {:<10} {}{dry}",
            r["policy"].as_str().unwrap_or(""),
            r["would"].as_str().unwrap_or(""),
            r["reason"].as_str().unwrap_or(""),
        );
    }
}

fn print_policies(v: &Value) {
    println!("directory: {}", v["dir"].as_str().unwrap_or("(none)"));
    for p in v["policies"].as_array().into_iter().flatten() {
        let s = &p["settings"];
        println!(
            "{:<16} idle_timeout_s={} action={} agents=[{}] sessions=[{}]",
            p["name"].as_str().unwrap_or(""),
            s["idle_timeout_s"],
            s["idle_action"].as_str().unwrap_or(""),
            join(&p["agents"]),
            join(&p["sessions"]),
        );
    }
    println!("profiles: {}", join(&v["profiles"]));
}
