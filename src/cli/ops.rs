//! The one-shot client commands: ls, new, read, send, keys, talk, signal, resize, kill.
//! Each prints text by default and the hub's JSON reply with `--json`.

use std::io::Write;

use clap::Args;
use serde::Serialize;

use super::ClientOpts;
use crate::client::{ClientError, HubClient};
use crate::hub::BackendKind;
use crate::protocol::{CreateSessionRequest, Encoding, ReadQuery};

/// Prints a reply (JSON or text) and returns the exit code.
pub(super) fn finish<T: Serialize>(
    opts: &ClientOpts,
    result: Result<T, ClientError>,
    text: impl FnOnce(&T) -> String,
) -> i32 {
    match result {
        Ok(v) => {
            if opts.json {
                print_json(&v);
            } else {
                let t = text(&v);
                if !t.is_empty() {
                    println!("{t}");
                }
            }
            0
        }
        Err(e) => fail(opts, &e),
    }
}

/// Prints a value as one line of JSON.
pub(super) fn print_json(v: &impl Serialize) {
    println!("{}", serde_json::to_string(v).unwrap_or_default());
}

pub(super) fn fail(opts: &ClientOpts, e: &ClientError) -> i32 {
    if opts.json {
        print_json(&e.body);
    } else {
        eprintln!("agent-hub: {e}");
    }
    1
}

fn client(opts: &ClientOpts) -> HubClient {
    opts.client()
}

/// The session id `target` names (a session id, an agent id or a label; see
/// [`HubClient::resolve_target`]), or the exit code after printing why there is none.
pub(super) async fn session_id(opts: &ClientOpts, target: &str) -> Result<String, i32> {
    client(opts)
        .resolve_target(target)
        .await
        .map_err(|e| fail(opts, &e))
}

#[derive(Debug, Args)]
pub struct LsArgs {
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn ls(args: LsArgs) -> i32 {
    let result = client(&args.opts).list().await;
    finish(&args.opts, result, |v| {
        let mut out = format!(
            "{:<16} {:<6} {:<6} {:<9} {:<12} {}",
            "ID", "KIND", "ALIVE", "SIZE", "LABEL", "COMMAND"
        );
        for s in &v.sessions {
            let alive = if s.alive {
                "yes".to_string()
            } else {
                format!("exit {}", s.exit_code.map_or("?".into(), |c| c.to_string()))
            };
            out.push_str(&format!(
                "\n{:<16} {:<6} {:<6} {:<9} {:<12} {}",
                s.spec.id,
                s.spec.backend.as_str(),
                alive,
                format!("{}x{}", s.cols, s.rows),
                s.owner.label.as_deref().unwrap_or("-"),
                s.spec.shell,
            ));
        }
        out
    })
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// Run in the tmux session NAME (adopted if it exists, created if not).
    #[arg(long, value_name = "NAME")]
    pub tmux: Option<String>,
    /// Use a tmux session named after the new session id.
    #[arg(long, conflicts_with = "tmux")]
    pub tmux_new: bool,
    /// A label for routing and listing ("Worker A").
    #[arg(long)]
    pub label: Option<String>,
    /// Working directory (default: the hub's home directory).
    #[arg(long)]
    pub cwd: Option<String>,
    #[arg(long)]
    pub cols: Option<u16>,
    #[arg(long)]
    pub rows: Option<u16>,
    /// Extra environment variables, KEY=VALUE (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// A loaded policy (idle timeout and the rest) that applies to the session.
    #[arg(long)]
    pub policy: Option<String>,
    /// What runs in it (claude-code, codex, aider, shell, ...): picks the state profile.
    #[arg(long)]
    pub cli_type: Option<String>,
    /// The agent the session belongs to (routing key; with --hub-access, who it acts as).
    #[arg(long, value_name = "AGENT_ID")]
    pub owner_agent_id: Option<String>,
    /// leader or worker.
    #[arg(long, value_name = "ROLE")]
    pub owner_role: Option<String>,
    /// Give the program the hub (AGENT_HUB_URL, AGENT_HUB_TOKEN, AGENT_HUB_AGENT_ID): a
    /// credential acting as --owner-agent-id, scoped like that agent's team.
    #[arg(long, requires = "owner_agent_id")]
    pub hub_access: bool,
    /// The program and its arguments (default: the hub's shell).
    #[arg(last = true)]
    pub command: Vec<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn new(args: NewArgs) -> i32 {
    let mut env = std::collections::BTreeMap::new();
    for pair in &args.env {
        let Some((k, v)) = pair.split_once('=') else {
            eprintln!("agent-hub: --env takes KEY=VALUE, got '{pair}'");
            return 2;
        };
        env.insert(k.to_string(), v.to_string());
    }
    let mut command = args.command.into_iter();
    let req = CreateSessionRequest {
        backend: if args.tmux.is_some() || args.tmux_new {
            BackendKind::Tmux
        } else {
            BackendKind::Pty
        },
        shell: command.next(),
        args: command.collect(),
        cwd: args.cwd,
        cols: args.cols,
        rows: args.rows,
        env,
        tmux_session: args.tmux,
        policy: args.policy,
        owner: crate::session::Owner {
            label: args.label,
            cli_type: args.cli_type,
            owner_agent_id: args.owner_agent_id,
            owner_role: args.owner_role,
            ..Default::default()
        },
        hub_access: args.hub_access,
        ..CreateSessionRequest::default()
    };
    let result = client(&args.opts).create(&req).await;
    finish(&args.opts, result, |v| v.session_id.clone())
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Session id, agent id or label (see `agent-hub ls`).
    pub id: String,
    /// Keep printing new output until the session ends (Ctrl-C stops).
    #[arg(long, short)]
    pub follow: bool,
    /// Start at this absolute output offset instead of the most recent bytes.
    #[arg(long)]
    pub since: Option<u64>,
    /// How many recent bytes to print first.
    #[arg(long, default_value_t = 4096)]
    pub max_bytes: usize,
    /// Unredacted output (secrets shown): needs an admin token, and the hub audits the request.
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn read(args: ReadArgs) -> i32 {
    let c = client(&args.opts);
    let id = match session_id(&args.opts, &args.id).await {
        Ok(id) => id,
        Err(code) => return code,
    };
    let mut query = ReadQuery {
        max_bytes: Some(args.max_bytes),
        since: args.since,
        timeout_ms: Some(0),
        encoding: if args.opts.json {
            Encoding::Utf8
        } else {
            Encoding::Base64
        },
        raw: args.raw,
    };
    let mut stdout = std::io::stdout();
    loop {
        let reply = match c.read(&id, &query).await {
            Ok(r) => r,
            Err(e) => return fail(&args.opts, &e),
        };
        if args.opts.json {
            print_json(&reply);
        } else {
            let bytes = match crate::protocol::base64_decode(&reply.output) {
                Ok(bytes) => bytes,
                Err(e) => {
                    eprintln!("agent-hub: the hub's reply is not valid base64 output: {e}");
                    return 1;
                }
            };
            let _ = stdout.write_all(&bytes);
            let _ = stdout.flush();
        }
        if !args.follow || (!reply.alive && reply.end_offset == query.since.unwrap_or(0)) {
            return 0;
        }
        query.since = Some(reply.end_offset);
        query.max_bytes = Some(1 << 20);
        query.timeout_ms = Some(30_000);
    }
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// `SESSION TEXT` (a session id, agent id or label), or just `TEXT` with --to-agent /
    /// --to-label / --to-owner-session.
    /// In TEXT, `\t`, `\xNN` and similar escapes are decoded, and Enter is added.
    #[arg(required = true, num_args = 1..=2, value_names = ["ID", "TEXT"])]
    pub args: Vec<String>,
    /// Route by owner agent id instead of a session id (exactly one live session must match).
    #[arg(long)]
    pub to_agent: Option<String>,
    /// Route by label.
    #[arg(long)]
    pub to_label: Option<String>,
    /// Route by owner session id.
    #[arg(long)]
    pub to_owner_session: Option<String>,
    /// Deliver TEXT as a prompt an agent TUI submits (bracketed paste, Enter, check) and print
    /// the receipt: submitted or stalled. Always so with --to-agent/--to-label/--to-owner-session.
    #[arg(long)]
    pub submit: bool,
    /// Send even when the agent is blocked on a question (otherwise refused: AGENT_BLOCKED).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn send(args: SendArgs) -> i32 {
    let keys = crate::owner_routing::RouteKeys {
        agent_id: args.to_agent.clone(),
        owner_session_id: args.to_owner_session.clone(),
        label: args.to_label.clone(),
    };
    let c = client(&args.opts);
    let result = match (keys.is_empty(), args.args.as_slice()) {
        (true, [target, text]) => {
            let id = match session_id(&args.opts, target).await {
                Ok(id) => id,
                Err(code) => return code,
            };
            let result = if args.submit || args.force {
                c.submit_line(&id, text, args.force).await
            } else {
                c.send_line(&id, text).await
            };
            return finish(&args.opts, result, |v| match &v.receipt {
                Some(receipt) => format!("{receipt}: {}", v.session_id),
                None => String::new(),
            });
        }
        (false, [text]) => c.send_line_to_agent(&keys, text, args.force).await,
        (true, _) => {
            eprintln!("agent-hub: send takes ID TEXT (or TEXT with --to-agent/--to-label/--to-owner-session)");
            return 2;
        }
        (false, _) => {
            eprintln!(
                "agent-hub: with --to-agent/--to-label/--to-owner-session, send takes only TEXT"
            );
            return 2;
        }
    };
    finish(&args.opts, result, |v| {
        let started = if v.started { " (started it)" } else { "" };
        format!("{}: {}{started}", v.receipt, v.resolved_session_id)
    })
}

#[derive(Debug, Args)]
pub struct ResolveArgs {
    #[arg(long)]
    pub agent_id: Option<String>,
    #[arg(long)]
    pub owner_session_id: Option<String>,
    #[arg(long)]
    pub label: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn resolve(args: ResolveArgs) -> i32 {
    let keys = crate::owner_routing::RouteKeys {
        agent_id: args.agent_id,
        owner_session_id: args.owner_session_id,
        label: args.label,
    };
    let result = client(&args.opts).resolve(&keys).await;
    finish(&args.opts, result, |v| v.session_id.clone())
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    /// Session id, agent id or label (see `agent-hub ls`).
    pub id: String,
    /// Key names: Enter, Escape, Tab, Up, Down, C-c, M-x, F5, or single characters.
    #[arg(required = true)]
    pub keys: Vec<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn keys(args: KeysArgs) -> i32 {
    let id = match session_id(&args.opts, &args.id).await {
        Ok(id) => id,
        Err(code) => return code,
    };
    let result = client(&args.opts).keys(&id, &args.keys).await;
    finish(&args.opts, result, |_| String::new())
}

#[derive(Debug, Args)]
pub struct TalkArgs {
    /// Session id, agent id or label (see `agent-hub ls`).
    pub id: String,
    /// One shell command line.
    pub command: String,
    /// Give up after this many milliseconds (default: the hub's talk timeout).
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn talk(args: TalkArgs) -> i32 {
    let id = match session_id(&args.opts, &args.id).await {
        Ok(id) => id,
        Err(code) => return code,
    };
    match client(&args.opts)
        .talk(&id, &args.command, args.timeout_ms)
        .await
    {
        Ok(v) => {
            if args.opts.json {
                print_json(&v);
            } else {
                print!("{}", v.result.output);
                let _ = std::io::stdout().flush();
            }
            v.result.exit_code.unwrap_or(1)
        }
        Err(e) => {
            if !args.opts.json {
                if let Some(out) = e.body.details.get("output").and_then(|o| o.as_str()) {
                    print!("{out}");
                }
            }
            fail(&args.opts, &e)
        }
    }
}

#[derive(Debug, Args)]
pub struct SignalArgs {
    /// Session id, agent id or label (see `agent-hub ls`).
    pub id: String,
    /// SIGINT, SIGQUIT, SIGTERM, SIGKILL or SIGHUP.
    pub signal: String,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn signal(args: SignalArgs) -> i32 {
    let id = match session_id(&args.opts, &args.id).await {
        Ok(id) => id,
        Err(code) => return code,
    };
    let result = client(&args.opts).signal(&id, &args.signal).await;
    finish(&args.opts, result, |_| String::new())
}

#[derive(Debug, Args)]
pub struct ResizeArgs {
    /// Session id, agent id or label (see `agent-hub ls`).
    pub id: String,
    pub cols: u16,
    pub rows: u16,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn resize(args: ResizeArgs) -> i32 {
    let id = match session_id(&args.opts, &args.id).await {
        Ok(id) => id,
        Err(code) => return code,
    };
    let result = client(&args.opts).resize(&id, args.cols, args.rows).await;
    finish(&args.opts, result, |_| String::new())
}

#[derive(Debug, Args)]
pub struct KillArgs {
    /// Session id, agent id or label (see `agent-hub ls`).
    pub id: String,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn kill(args: KillArgs) -> i32 {
    let id = match session_id(&args.opts, &args.id).await {
        Ok(id) => id,
        Err(code) => return code,
    };
    let result = client(&args.opts).kill(&id).await;
    finish(&args.opts, result, |v| {
        format!(
            "killed {} ({})",
            v.session_id,
            v.exit_reason.as_deref().unwrap_or("gone")
        )
    })
}

#[derive(Debug, Args)]
pub struct ScreenArgs {
    /// Session id, agent id or label (see `agent-hub ls`).
    pub id: String,
    /// tail (scrollback and screen), viewport (the screen now), or delta (lines since --marker).
    #[arg(long, default_value = "tail")]
    pub mode: String,
    /// Most lines to print (cap 200).
    #[arg(long)]
    pub lines: Option<usize>,
    /// Marker from a previous read (delta mode); printed to stderr after each read.
    #[arg(long)]
    pub marker: Option<String>,
    /// Keep wrapped rows apart instead of joining them into logical lines.
    #[arg(long)]
    pub no_merge: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn screen(args: ScreenArgs) -> i32 {
    let mode = match args.mode.as_str() {
        "tail" => crate::screen::ReadMode::Tail,
        "viewport" => crate::screen::ReadMode::Viewport,
        "delta" => crate::screen::ReadMode::Delta,
        other => {
            eprintln!("agent-hub: --mode must be tail, viewport or delta, not '{other}'");
            return 2;
        }
    };
    let req = crate::screen::TermReadRequest {
        mode,
        max_lines: args.lines,
        max_chars: None,
        merge_wrapped: Some(!args.no_merge),
        marker_id: args.marker,
    };
    let id = match session_id(&args.opts, &args.id).await {
        Ok(id) => id,
        Err(code) => return code,
    };
    let result = client(&args.opts).term_read(&id, &req).await;
    finish(&args.opts, result, |v| {
        eprintln!("marker: {}", v.read.marker_id);
        v.read.text.clone()
    })
}
