//! `agent-hub policy check | list | reload`: what the hub's policies would do now and why (a
//! dry run: nothing is done), which agents use each policy, and reloading them from disk.

use clap::{Args, Subcommand};

use super::ClientOpts;
use crate::protocol::{PolicyCheckReply, PolicyListReply};

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
    let (PolicyCommand::Check { opts, .. }
    | PolicyCommand::List { opts }
    | PolicyCommand::Reload { opts }) = &args.command;
    let client = opts.client();
    let result = match &args.command {
        PolicyCommand::Check { agent, .. } => client
            .policy_check(agent.as_deref())
            .await
            .map(|v| shown(opts, &v, print_checks)),
        PolicyCommand::List { .. } => client
            .policies()
            .await
            .map(|v| shown(opts, &v, print_policies)),
        PolicyCommand::Reload { .. } => client.policies_reload().await.map(|v| {
            shown(opts, &v, |v| {
                println!(
                    "reloaded policies: {}; profiles: {}",
                    v.policies.join(", "),
                    v.profiles.join(", ")
                )
            })
        }),
    };
    match result {
        Ok(()) => 0,
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

/// Prints a reply as JSON with `--json`, else with `print`.
fn shown<T: serde::Serialize>(opts: &ClientOpts, reply: &T, print: impl FnOnce(&T)) {
    if opts.json {
        super::ops::print_json(reply);
    } else {
        print(reply);
    }
}

fn print_checks(v: &PolicyCheckReply) {
    if v.checks.is_empty() {
        println!("no agent or session is under a policy");
        return;
    }
    println!("AGENT/SESSION     POLICY        STATE     WOULD      REASON");
    for r in &v.checks {
        let who = r
            .agent_id
            .as_deref()
            .or(r.session_id.as_deref())
            .unwrap_or("?");
        let mut state = r.state.map_or("stopped", |s| s.as_str()).to_string();
        if r.stuck {
            state.push_str(",stuck");
        }
        let dry = if r.dry_run { " (dry run)" } else { "" };
        let would = serde_json::to_value(r.would).unwrap_or_default();
        println!(
            "{who:<17} {:<13} {state:<9} {:<10} {}{dry}",
            r.policy,
            would.as_str().unwrap_or(""),
            r.reason,
        );
        if let Some(profile) = &r.profile {
            let checked = match r.profile_checked_with.join(", ") {
                s if s.is_empty() => "not checked against a recorded CLI".to_string(),
                s => format!("checked with {s}"),
            };
            println!(
                "{:<17} profile {profile} ({checked}); rule {}: {}",
                "",
                r.rule.as_deref().unwrap_or(""),
                r.evidence.join(", "),
            );
        }
    }
}

fn print_policies(v: &PolicyListReply) {
    let dir = v.dir.as_ref().map(|d| d.display().to_string());
    println!("directory: {}", dir.as_deref().unwrap_or("(none)"));
    for p in &v.policies {
        let s = &p.settings;
        let idle_timeout = s
            .idle_timeout_s
            .map_or("null".to_string(), |t| t.to_string());
        let action = serde_json::to_value(s.idle_action).unwrap_or_default();
        println!(
            "{:<16} idle_timeout_s={idle_timeout} action={} agents=[{}] sessions=[{}]",
            p.name,
            action.as_str().unwrap_or(""),
            p.agents.join(", "),
            p.sessions.join(", "),
        );
    }
    println!("profiles: {}", v.profiles.join(", "));
}
