//! `agent-hub notify`: the outgoing webhooks (`[[notify]]`) and what became of their messages;
//! `notify test` sends a test message to each and reports each one's answer (an admin's token;
//! audited). Exit 1 when a webhook did not take the test message.

use clap::{Args, Subcommand};

use super::ops::{fail, print_json};
use super::ClientOpts;
use crate::protocol::{WebhookStatus, WebhookTest};

#[derive(Debug, Args)]
pub struct NotifyArgs {
    #[command(subcommand)]
    pub command: Option<NotifyCommand>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// Send a test message to every webhook and print each one's answer.
    Test {
        #[command(flatten)]
        opts: ClientOpts,
    },
}

pub async fn run(args: NotifyArgs) -> i32 {
    match args.command {
        None => status(&args.opts).await,
        Some(NotifyCommand::Test { opts }) => test(&opts).await,
    }
}

async fn status(opts: &ClientOpts) -> i32 {
    match opts.client().notify_status().await {
        Ok(v) if opts.json => {
            print_json(&v);
            0
        }
        Ok(v) if v.webhooks.is_empty() => {
            println!("no webhooks ([[notify]] in hub.toml)");
            0
        }
        Ok(v) => {
            print!("{}", status_table(&v.webhooks));
            0
        }
        Err(e) => fail(opts, &e),
    }
}

async fn test(opts: &ClientOpts) -> i32 {
    match opts.client().notify_test().await {
        Ok(v) => {
            if opts.json {
                print_json(&v);
            } else {
                for w in &v.webhooks {
                    println!("{}", test_line(w));
                }
            }
            i32::from(!v.delivered)
        }
        Err(e) => fail(opts, &e),
    }
}

/// `ok   NAME: HTTP 200`, `FAIL NAME: HTTP 500` or `FAIL NAME: cannot connect: ...`.
fn test_line(w: &WebhookTest) -> String {
    let tag = if w.ok { "ok  " } else { "FAIL" };
    let answer = match (&w.status, &w.error) {
        (Some(status), _) => format!("HTTP {status}"),
        (None, Some(error)) => error.clone(),
        (None, None) => "no answer".into(),
    };
    format!("{tag} {}: {answer}", w.name)
}

fn status_table(webhooks: &[WebhookStatus]) -> String {
    let mut rows = vec![[
        "WEBHOOK",
        "FORMAT",
        "SENT",
        "FAILED",
        "DEAD",
        "QUEUED",
        "LAST ERROR",
    ]
    .map(String::from)
    .to_vec()];
    for w in webhooks {
        rows.push(vec![
            w.name.clone(),
            w.format.clone(),
            w.sent.to_string(),
            w.failed.to_string(),
            w.dead.to_string(),
            w.queued.to_string(),
            w.last_error.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    super::usage::columns(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_line_says_each_answer() {
        let w = |ok, status, error: Option<&str>| WebhookTest {
            index: 0,
            name: "ops".into(),
            ok,
            status,
            error: error.map(String::from),
        };
        assert_eq!(test_line(&w(true, Some(200), None)), "ok   ops: HTTP 200");
        assert_eq!(
            test_line(&w(false, Some(500), Some("HTTP 500"))),
            "FAIL ops: HTTP 500"
        );
        assert_eq!(
            test_line(&w(false, None, Some("cannot connect: refused"))),
            "FAIL ops: cannot connect: refused"
        );
    }
}
