//! `agent-hub attach ID`: your terminal, in raw mode, wired to a session through the hub's
//! WebSocket. The current screen is painted at once, window resizes are forwarded, and the
//! detach key returns you to your shell with the session still running. The terminal is
//! restored on every way out (detach, session exit, error, panic).

use std::io::Write;

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use super::ClientOpts;
use crate::client::HubClient;
use crate::protocol::{AgentStatus, ClientFrame, ServerFrame};

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Session id, agent id, or session label.
    pub id: String,
    /// Run a native tmux client instead (`docker exec -it <container> tmux attach -t agent`);
    /// needs the docker CLI on this machine. Container agents only.
    #[arg(long)]
    pub direct: bool,
    /// Key that detaches: ctrl-<letter> or ctrl-] / ctrl-\ / ctrl-^ / ctrl-_.
    #[arg(long, env = "AGENT_HUB_DETACH_KEY", default_value = "ctrl-]")]
    pub detach_key: String,
    /// Do not resize the session to this terminal.
    #[arg(long)]
    pub no_resize: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// The byte a `ctrl-X` detach key sends.
pub fn parse_detach_key(spec: &str) -> Result<u8, String> {
    let lower = spec.to_ascii_lowercase();
    let key = lower
        .strip_prefix("ctrl-")
        .or_else(|| lower.strip_prefix("c-"))
        .or_else(|| lower.strip_prefix('^'))
        .ok_or_else(|| format!("detach key '{spec}' must look like ctrl-] or ctrl-a"))?;
    match key.as_bytes() {
        [c @ b'a'..=b'z'] => Ok(c - b'a' + 1),
        [b'@'] => Ok(0),
        [b'['] => Err("ctrl-[ is Escape and cannot be the detach key".into()),
        [b'\\'] => Ok(0x1c),
        [b']'] => Ok(0x1d),
        [b'^'] => Ok(0x1e),
        [b'_'] => Ok(0x1f),
        _ => Err(format!(
            "detach key '{spec}' must look like ctrl-] or ctrl-a"
        )),
    }
}

/// Puts the terminal in raw mode and restores it when dropped (and on panic).
struct RawMode;

impl RawMode {
    fn enable() -> Result<Self, String> {
        crossterm::terminal::enable_raw_mode()
            .map_err(|e| format!("attach needs an interactive terminal: {e}"))?;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = crossterm::terminal::disable_raw_mode();
            previous(info);
        }));
        Ok(RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

enum Ending {
    Detached,
    Exited(Option<i32>, String),
    Closed,
}

pub async fn run(args: AttachArgs) -> i32 {
    let detach = match parse_detach_key(&args.detach_key) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("agent-hub: {e}");
            return 2;
        }
    };
    let client = args.opts.client();
    if args.direct {
        return attach_direct(&client, &args.id).await;
    }
    // Resolve first so a typo gives a clear error, not a failed upgrade.
    let session_id = match client.resolve_target(&args.id).await {
        Ok(id) => id,
        Err(e) => {
            eprintln!("agent-hub: {e}");
            return 1;
        }
    };
    let url = client.stream_url(&session_id, None);
    let socket = match client.ws_connect(&url).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("agent-hub: cannot open {url}: {e}");
            return 1;
        }
    };
    let raw = match RawMode::enable() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agent-hub: {e}");
            return 1;
        }
    };
    let ending = pump(socket, detach, !args.no_resize).await;
    drop(raw);
    match ending {
        Ok(Ending::Detached) => {
            eprintln!("\r\n[detached from {session_id}]");
            0
        }
        Ok(Ending::Exited(code, reason)) => {
            let code = crate::error::exit_code_text(code.map(i64::from));
            eprintln!("\r\n[session {session_id} {reason}, {code}]");
            0
        }
        Ok(Ending::Closed) => {
            eprintln!("\r\n[connection to the hub closed]");
            1
        }
        Err(e) => {
            eprintln!("\r\nagent-hub: {e}");
            1
        }
    }
}

/// `docker exec -it <container> tmux attach -t agent`, for a native tmux client.
async fn attach_direct(client: &HubClient, id: &str) -> i32 {
    let agent = match client.agent(id).await {
        Ok(v) => v.agent,
        Err(e) => {
            eprintln!("agent-hub: {e} (--direct takes an agent id)");
            return 1;
        }
    };
    let Some(container) = agent
        .container_id
        .filter(|_| agent.status == AgentStatus::Running)
    else {
        eprintln!("agent-hub: agent '{id}' is not running");
        return 1;
    };
    let mut cmd = std::process::Command::new("docker");
    cmd.env("DOCKER_HOST", &agent.docker_host);
    cmd.args([
        "exec",
        "-it",
        "-e",
        "LANG=C.UTF-8",
        &container,
        "tmux",
        "attach",
        "-t",
        crate::agents::AGENT_TMUX_SESSION,
    ]);
    match cmd.status() {
        Ok(status) => status.code().unwrap_or(1),
        Err(e) => {
            eprintln!("agent-hub: cannot run docker: {e}");
            1
        }
    }
}

fn resize_frame() -> Option<Message> {
    let (cols, rows) = crossterm::terminal::size().ok()?;
    let frame = ClientFrame::Resize { cols, rows };
    Some(Message::Text(serde_json::to_string(&frame).ok()?.into()))
}

async fn pump(
    socket: crate::client::WsStream,
    detach: u8,
    follow_size: bool,
) -> Result<Ending, String> {
    let (mut ws_tx, mut ws_rx) = socket.split();
    // Stdin is read on a plain thread: a blocking read cannot be cancelled, and the process
    // exits right after attach returns anyway.
    let (keys_tx, mut keys) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let _vt = super::console::VtConsole::enable();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = super::console::read_keys(&mut buf) {
            if n == 0 || keys_tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut resizes = super::console::Resizes::new()?;
    if follow_size {
        if let Some(frame) = resize_frame() {
            ws_tx.send(frame).await.map_err(|e| e.to_string())?;
        }
    }
    let mut stdout = std::io::stdout();
    loop {
        let resized = resizes.next();
        tokio::select! {
            message = ws_rx.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    stdout.write_all(&bytes).and_then(|_| stdout.flush()).map_err(|e| e.to_string())?;
                }
                Some(Ok(Message::Text(text))) => {
                    if let Ok(ServerFrame::Exit { exit_code, reason }) = serde_json::from_str(text.as_str()) {
                        return Ok(Ending::Exited(exit_code, reason));
                    }
                }
                Some(Ok(Message::Close(_))) | None => return Ok(Ending::Closed),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("connection error: {e}")),
            },
            Some(bytes) = keys.recv() => {
                let (before, detached) = match bytes.iter().position(|&b| b == detach) {
                    Some(i) => (&bytes[..i], true),
                    None => (&bytes[..], false),
                };
                if !before.is_empty() {
                    ws_tx.send(Message::Binary(before.to_vec().into())).await.map_err(|e| e.to_string())?;
                }
                if detached {
                    let _ = ws_tx.send(Message::Close(None)).await;
                    return Ok(Ending::Detached);
                }
            }
            Some(()) = resized, if follow_size => {
                if let Some(frame) = resize_frame() {
                    ws_tx.send(frame).await.map_err(|e| e.to_string())?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_detach_key;

    #[test]
    fn detach_keys_parse() {
        assert_eq!(parse_detach_key("ctrl-]"), Ok(0x1d));
        assert_eq!(parse_detach_key("Ctrl-A"), Ok(1));
        assert_eq!(parse_detach_key("^q"), Ok(17));
        assert!(parse_detach_key("ctrl-[").is_err());
        assert!(parse_detach_key("x").is_err());
    }
}
