//! `agent-hub token`: the owner's admin token of a hub on this machine. `rotate` replaces it
//! (the old one is refused at once), `link` prints a new one-time sign-in link for the
//! dashboard, `show` prints the token and where it is kept.

use clap::{Args, Subcommand};
use serde_json::json;

use super::ops::{fail, print_json};
use super::ClientOpts;

#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub action: TokenAction,
}

/// The hub and data dir a `token` command is about.
#[derive(Debug, Args)]
pub struct TokenOpts {
    #[command(flatten)]
    pub opts: ClientOpts,
}

#[derive(Debug, Subcommand)]
pub enum TokenAction {
    /// Replace the owner's token: the hub refuses the old one from the next request on, and
    /// commands on this machine read the new one from the data dir. With no hub answering,
    /// the file is replaced and a hub started later uses the new token.
    Rotate(TokenOpts),
    /// Print a new one-time sign-in link for the dashboard (it works once, within 15 minutes).
    Link(TokenOpts),
    /// Print the owner's token (for the dashboard's sign-in form, or AGENT_HUB_TOKEN on
    /// another machine) and the file it is kept in.
    Show(TokenOpts),
}

pub async fn run(args: TokenArgs) -> i32 {
    match args.action {
        TokenAction::Rotate(t) => rotate(&t.opts).await,
        TokenAction::Link(t) => link(&t.opts).await,
        TokenAction::Show(t) => show(&t.opts),
    }
}

fn owner_file(opts: &ClientOpts) -> std::path::PathBuf {
    let dir = opts
        .data_dir
        .clone()
        .unwrap_or_else(crate::config::default_data_dir);
    crate::access::owner::path(&dir)
}

async fn rotate(opts: &ClientOpts) -> i32 {
    let (file, how) = match opts.client().rotate_owner_token().await {
        Ok(reply) => (reply.file, "the hub refuses the old token from now on"),
        Err(e) if e.error_code == "HUB_UNREACHABLE" => {
            let file = owner_file(opts);
            let written = crate::access::owner::write(&file, &crate::access::owner::generate());
            if let Err(e) = written {
                eprintln!("agent-hub: {e}");
                return 1;
            }
            (
                file.display().to_string(),
                "no hub answered, so only the file was replaced: a hub running on another address keeps the old token until it restarts",
            )
        }
        Err(e) => return fail(opts, &e),
    };
    if opts.json {
        print_json(&json!({"ok": true, "file": file}));
    } else {
        println!("the owner's token was replaced; the new one is in {file}");
        println!("{how}; dashboard tabs signed in with the old one must sign in again");
    }
    0
}

async fn link(opts: &ClientOpts) -> i32 {
    let client = opts.client();
    match client.signin_link().await {
        Ok(reply) => {
            let url = format!("{}{}", client.base(), reply.path);
            if opts.json {
                print_json(&json!({"ok": true, "url": url, "expires_in_s": reply.expires_in_s}));
            } else {
                println!("{url}");
                eprintln!(
                    "a sign-in link for the dashboard: it works once, within {} minutes",
                    reply.expires_in_s / 60
                );
            }
            0
        }
        Err(e) => fail(opts, &e),
    }
}

fn show(opts: &ClientOpts) -> i32 {
    let file = owner_file(opts);
    match crate::access::owner::read(&file) {
        Ok(Some(token)) => {
            if opts.json {
                print_json(
                    &json!({"ok": true, "token": token, "file": file.display().to_string()}),
                );
            } else {
                println!("{token}");
                eprintln!("(the owner's admin token, kept in {})", file.display());
            }
            0
        }
        Ok(None) => {
            let message = format!(
                "{} does not exist: start the hub once with this data dir (agent-hub serve), or point --data-dir (AGENT_HUB_DATA_DIR) at the hub's data dir",
                file.display()
            );
            report(opts, "TOKEN_NOT_FOUND", message)
        }
        Err(e) => report(opts, "TOKEN_UNREADABLE", e.to_string()),
    }
}

fn report(opts: &ClientOpts, code: &str, message: String) -> i32 {
    fail(opts, &crate::client::ClientError::new(code, message))
}
