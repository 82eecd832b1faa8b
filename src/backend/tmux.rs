//! tmux backend: a tmux session the hub creates or adopts by name, on the host or inside a
//! container ([`TmuxPlace`]), streamed losslessly through a control-mode client
//! (`tmux -C attach -f ignore-size`). Input goes in as
//! `send-keys -H` commands on the client's stdin (one writer); every byte the pane prints
//! comes back as `%output`. The monitor never changes the size a human attached to the same
//! session sees; the hub sizes the window explicitly with `resize-window`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

pub use super::tmux_place::TmuxPlace;
use super::tmux_place::TMUX_CALL_TIMEOUT;

use super::tmux_control::{is_safe_name, send_bytes_commands, ControlMessage, ControlParser};
use super::{Backend, SpawnSpec, TermSize};
use crate::output::{ExitInfo, Output};
use crate::session::input::TermSignal;

/// Lines of pane history kept by tmux for sessions the hub creates.
pub const TMUX_HISTORY_LIMIT: u32 = 50_000;
/// Name of the subscription that reports the pane's death and exit status.
const DEAD_SUBSCRIPTION: &str = "agent_hub_pane_dead";
/// `sh -c` script a hub-created pane runs. It waits until the hub's control client is
/// attached (tmux latches the `wait-for` signal, so the order does not matter), so not even
/// the program's first output is missed; runs the program; records its exit status in the
/// pane option `@agent_hub_exit` (tmux itself does not always learn a dead pane's status);
/// and keeps the pane open a moment, because tmux's control mode reads pane output lazily
/// and drops what it has not sent yet when the pane dies. The exit status is kept.
const PANE_WRAPPER: &str = "tmux wait-for \"agent-hub-go-${TMUX_PANE#%}\" 2>/dev/null; \"$@\"; rc=$?; tmux set-option -p -t \"$TMUX_PANE\" @agent_hub_exit \"$rc\" 2>/dev/null; sleep 0.3; exit $rc";
/// What the hub watches about its pane (see [`pane_exit`]).
const PANE_STATE_FORMAT: &str = "#{pane_id}|#{pane_dead}|#{pane_dead_status}|#{@agent_hub_exit}";
/// While a pane is dead but its exit status not yet known, how often to ask tmux again.
const DEAD_STATUS_POLL: Duration = Duration::from_millis(100);
/// After a pane is reported dead, how long output tmux still holds for it may arrive.
const DEAD_PANE_DRAIN: Duration = Duration::from_millis(250);

type Ack = oneshot::Sender<Result<(), String>>;

/// Acks waiting for tmux's replies, in command order: (replies still expected, first error, ack).
type PendingAcks = Arc<Mutex<VecDeque<(usize, Option<String>, Ack)>>>;

/// A tmux pane streamed through a control-mode client.
pub struct TmuxBackend {
    place: TmuxPlace,
    session_name: String,
    pane_id: String,
    pane_pid: Option<u32>,
    commands: mpsc::UnboundedSender<(Vec<String>, Ack)>,
}

fn invalid_name(name: &str) -> String {
    format!(
        "tmux session name '{name}' is not allowed: use 1-64 characters of letters, digits, '_', '-' and '.'"
    )
}

impl TmuxBackend {
    /// Adopts the tmux session `name` if it exists, else creates it running `spec`.
    /// Returns the backend and whether the session was adopted. An adopted pane's history
    /// (and cursor) seed the output, so it does not start blank.
    pub async fn start(
        server: TmuxPlace,
        name: &str,
        spec: &SpawnSpec,
        output: Arc<Output>,
    ) -> Result<(Self, bool), String> {
        if !is_safe_name(name) || name.starts_with(['%', '$', '@', '=']) {
            return Err(invalid_name(name));
        }
        let mut adopted = server.has_session(name).await;
        if !adopted {
            match create_session(&server, name, spec).await {
                Ok(()) => {}
                // Someone else (an image's slow entrypoint) created it meanwhile: adopt it.
                Err(e) if e.contains("duplicate session") => adopted = true,
                Err(e) => return Err(e),
            }
        }
        let target = format!("={name}:");
        let ids = server
            .run(&[
                "display-message",
                "-p",
                "-t",
                &target,
                "#{pane_id} #{pane_pid}",
            ])
            .await?;
        let mut parts = ids.split_whitespace();
        let pane_id = parts.next().unwrap_or_default().to_string();
        let pane_pid = parts.next().and_then(|p| p.parse().ok());
        if !pane_id.starts_with('%') {
            return Err(format!("tmux did not report a pane for session '{name}'"));
        }
        if adopted {
            // Show the pane's past output, so an adopted session does not start blank.
            let history = server
                .run(&["capture-pane", "-p", "-e", "-J", "-S", "-", "-t", &pane_id])
                .await
                .unwrap_or_default();
            let mut seed = history.trim_end_matches('\n').replace('\n', "\r\n");
            let cursor = server
                .run(&[
                    "display-message",
                    "-p",
                    "-t",
                    &pane_id,
                    "#{cursor_y} #{cursor_x}",
                ])
                .await
                .unwrap_or_default();
            let mut yx = cursor
                .split_whitespace()
                .filter_map(|n| n.parse::<u32>().ok());
            if let (Some(y), Some(x)) = (yx.next(), yx.next()) {
                seed.push_str(&format!("\x1b[{};{}H", y + 1, x + 1));
            }
            output.push(seed.as_bytes());
        } else {
            server
                .run(&[
                    "resize-window",
                    "-t",
                    &pane_id,
                    "-x",
                    &spec.size.cols.to_string(),
                    "-y",
                    &spec.size.rows.to_string(),
                ])
                .await?;
        }
        let commands = start_control_client(&server, name, &pane_id, output).await?;
        Ok((
            TmuxBackend {
                place: server,
                session_name: name.to_string(),
                pane_id,
                pane_pid,
                commands,
            },
            adopted,
        ))
    }

    async fn send_commands(&self, lines: Vec<String>) -> Result<(), String> {
        let (ack, done) = oneshot::channel();
        self.commands
            .send((lines, ack))
            .map_err(|_| "the tmux control client has exited".to_string())?;
        tokio::time::timeout(TMUX_CALL_TIMEOUT, done)
            .await
            .map_err(|_| {
                format!(
                    "tmux did not answer within {} s",
                    TMUX_CALL_TIMEOUT.as_secs()
                )
            })?
            .map_err(|_| "the tmux control client has exited".to_string())?
    }
}

async fn create_session(server: &TmuxPlace, name: &str, spec: &SpawnSpec) -> Result<(), String> {
    if server.is_host() && !spec.cwd.is_dir() {
        return Err(format!(
            "working directory '{}' does not exist or is not a directory",
            spec.cwd.display()
        ));
    }
    let history = TMUX_HISTORY_LIMIT.to_string();
    let cols = spec.size.cols.to_string();
    let rows = spec.size.rows.to_string();
    let cwd = spec.cwd.to_string_lossy().into_owned();
    // Options that must hold before the pane exists (history-limit applies to new panes only).
    let mut args: Vec<&str> = vec![
        "start-server",
        ";",
        "set-option",
        "-g",
        "history-limit",
        &history,
        ";",
        "set-option",
        "-s",
        "escape-time",
        "10",
        ";",
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        &cols,
        "-y",
        &rows,
        "-c",
        &cwd,
    ];
    let env_pairs: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for pair in &env_pairs {
        args.extend(["-e", pair]);
    }
    // The program runs under a small sh wrapper: see PANE_WRAPPER.
    args.extend([
        "--",
        "sh",
        "-c",
        PANE_WRAPPER,
        "agent-hub-pane",
        &spec.program,
    ]);
    args.extend(spec.args.iter().map(String::as_str));
    args.extend([
        ";",
        "set-option",
        "-t",
        name,
        "status",
        "off",
        ";",
        "set-option",
        "-w",
        "-t",
        name,
        "remain-on-exit",
        "on",
    ]);
    // On the host, the server (if this call starts it) gets exactly the session's environment.
    let env = server.is_host().then_some(&spec.env);
    server
        .run_with_env(&args, env)
        .await
        .map_err(|e| format!("tmux new-session failed: {e}"))?;
    Ok(())
}

/// Starts `tmux -C attach` and the tasks that read its output and write its commands.
async fn start_control_client(
    server: &TmuxPlace,
    name: &str,
    pane_id: &str,
    output: Arc<Output>,
) -> Result<mpsc::UnboundedSender<(Vec<String>, Ack)>, String> {
    let io = server
        .open_control(&[
            "attach-session",
            "-f",
            "ignore-size",
            "-t",
            &format!("={name}"),
        ])
        .await?;

    // The pane's death and exit status, for sessions with remain-on-exit. Session-scoped:
    // tmux 3.3 stops evaluating pane-scoped subscriptions once the pane is dead.
    let subscribe = format!("refresh-client -B '{DEAD_SUBSCRIPTION}::{PANE_STATE_FORMAT}'");
    // Lets a hub-created pane start its program now that nothing it prints can be missed.
    let release = format!(
        "wait-for -S agent-hub-go-{}",
        pane_id.trim_start_matches('%')
    );
    let pending: PendingAcks = Arc::new(Mutex::new(VecDeque::new()));
    let (attached_tx, attached) = oneshot::channel();

    let reader = tokio::spawn(read_control_output(
        io.reader,
        io.ended,
        server.clone(),
        name.to_string(),
        pane_id.to_string(),
        output,
        pending.clone(),
        attached_tx,
    ));
    // Only a client tmux has confirmed is usable: a `docker exec` into a dying container can
    // print an error and then keep its stream open without ever attaching.
    match tokio::time::timeout(TMUX_CALL_TIMEOUT, attached).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return Err("the tmux control client ended before attaching".into()),
        Err(_) => {
            reader.abort();
            return Err(format!(
                "the tmux control client did not attach within {} s",
                TMUX_CALL_TIMEOUT.as_secs()
            ));
        }
    }
    let (commands, requests) = mpsc::unbounded_channel();
    tokio::spawn(write_commands(
        io.writer,
        requests,
        pending,
        vec![subscribe, release],
    ));
    Ok(commands)
}

/// The control client's single writer, started once the attach is confirmed (commands sent
/// before it fail with "no current client"). Sends `first` (the subscription to the pane's
/// state, the release of a new pane), then writes queued commands in order.
async fn write_commands(
    mut stdin: Pin<Box<dyn AsyncWrite + Send>>,
    mut requests: mpsc::UnboundedReceiver<(Vec<String>, Ack)>,
    pending: PendingAcks,
    first: Vec<String>,
) {
    let (nobody_waits, _) = oneshot::channel();
    if write_lines(&mut stdin, first, nobody_waits, &pending).await {
        while let Some((lines, ack)) = requests.recv().await {
            if lines.is_empty() {
                // A detach request: settled once the client has been told to go.
                let _ = stdin.write_all(b"detach-client\n").await;
                let _ = ack.send(Ok(()));
                return;
            }
            if !write_lines(&mut stdin, lines, ack, &pending).await {
                return;
            }
        }
    }
    // The session is gone from the hub: detach the control client cleanly.
    let _ = stdin.write_all(b"detach-client\n").await;
}

/// Writes command lines; `ack` is settled when tmux has answered all of them.
async fn write_lines(
    stdin: &mut Pin<Box<dyn AsyncWrite + Send>>,
    lines: Vec<String>,
    ack: Ack,
    pending: &PendingAcks,
) -> bool {
    let mut text = lines.join("\n");
    text.push('\n');
    // Register before writing: the reply may arrive before write_all returns.
    if let Ok(mut p) = pending.lock() {
        p.push_back((lines.len(), None, ack));
    }
    if let Err(e) = stdin.write_all(text.as_bytes()).await {
        if let Some((_, _, ack)) = pending.lock().ok().and_then(|mut p| p.pop_back()) {
            let _ = ack.send(Err(format!("cannot write to tmux: {e}")));
        }
        return false;
    }
    true
}

fn settle_reply(pending: &PendingAcks, success: bool, lines: &[Vec<u8>]) {
    let Ok(mut p) = pending.lock() else { return };
    let Some(front) = p.front_mut() else { return };
    if !success && front.1.is_none() {
        let text: Vec<String> = lines
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        front.1 = Some(format!("tmux: {}", text.join(" ")));
    }
    front.0 = front.0.saturating_sub(1);
    if front.0 == 0 {
        if let Some((_, error, ack)) = p.pop_front() {
            let _ = ack.send(error.map_or(Ok(()), Err));
        }
    }
}

/// The control client's reader: pane output into the pipeline, replies to the writer's acks,
/// and the pane's death. A dead pane (remain-on-exit) is kept until the session is removed,
/// so output tmux has not flushed yet is not thrown away with it; the exit is recorded after a
/// short drain.
#[allow(clippy::too_many_arguments)]
async fn read_control_output(
    mut stdout: Pin<Box<dyn AsyncRead + Send>>,
    ended: BoxFuture<'static, ()>,
    server: TmuxPlace,
    name: String,
    pane_id: String,
    output: Arc<Output>,
    pending: PendingAcks,
    attached: oneshot::Sender<()>,
) {
    let mut attached = Some(attached);
    let mut parser = ControlParser::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut exit: Option<ExitInfo> = None;
    let mut finish_at: Option<tokio::time::Instant> = None;
    // Set while the pane is known dead but its status is not: when to ask tmux again.
    let mut recheck_at: Option<(tokio::time::Instant, u32)> = None;
    loop {
        let drained = async {
            match finish_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let recheck = async {
            match recheck_at {
                Some((at, _)) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let n = tokio::select! {
            read = stdout.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = drained => {
                finish_at = None;
                if let Some(exit) = &exit {
                    output.finish(exit.clone());
                }
                continue;
            }
            _ = recheck => {
                let attempts = recheck_at.map_or(0, |(_, n)| n);
                recheck_at = None;
                exit = query_dead_pane(&server, &pane_id).await.ok().flatten();
                match exit {
                    Some(_) => finish_at = Some(tokio::time::Instant::now() + DEAD_PANE_DRAIN),
                    None if attempts < 20 => {
                        recheck_at = Some((tokio::time::Instant::now() + DEAD_STATUS_POLL, attempts + 1));
                    }
                    // The status never came: record the exit without a code.
                    None => {
                        output.finish(ExitInfo { exit_code: None, reason: "exited".into(), exited_at: Utc::now() });
                    }
                }
                continue;
            }
        };
        // One push per read, not per `%output` line (~1.4 KB each): fewer locks, sends and
        // WebSocket frames under load.
        let mut batch: Vec<u8> = Vec::new();
        for message in parser.feed(&buf[..n]) {
            if !matches!(message, ControlMessage::Output { .. }) {
                tracing::debug!(session = %name, ?message, "tmux control message");
            }
            match message {
                ControlMessage::Output { pane_id: p, data } if p == pane_id => {
                    batch.extend_from_slice(&data)
                }
                // Replies to our own stdin commands, in order (not the attach's, nor hooks').
                ControlMessage::Reply {
                    from_stdin: true,
                    success,
                    lines,
                    ..
                } => settle_reply(&pending, success, &lines),
                // The attach command's own reply: the client is ready for commands.
                ControlMessage::Reply {
                    from_stdin: false, ..
                } => {
                    if let Some(tx) = attached.take() {
                        let _ = tx.send(());
                    }
                }
                ControlMessage::SubscriptionChanged { name: sub, value }
                    if sub == DEAD_SUBSCRIPTION && exit.is_none() =>
                {
                    exit = pane_exit(&value, &pane_id);
                    if exit.is_some() {
                        finish_at = Some(tokio::time::Instant::now() + DEAD_PANE_DRAIN);
                    } else if pane_is_dead(&value, &pane_id) && recheck_at.is_none() {
                        recheck_at = Some((tokio::time::Instant::now() + DEAD_STATUS_POLL, 0));
                    }
                }
                _ => {}
            }
        }
        output.push(&batch);
    }
    ended.await;
    if exit.is_none() {
        // The client may have gone before the subscription reported a dead pane.
        exit = query_dead_pane(&server, &pane_id).await.ok().flatten();
    }
    if let Ok(mut p) = pending.lock() {
        for (_, _, ack) in p.drain(..) {
            let _ = ack.send(Err("the tmux session has ended".into()));
        }
    }
    output.finish(exit.unwrap_or_else(|| ExitInfo {
        exit_code: None,
        reason: "tmux session closed".into(),
        exited_at: Utc::now(),
    }));
}

/// Asks tmux whether `pane_id` has ended, and with which status.
async fn query_dead_pane(server: &TmuxPlace, pane_id: &str) -> Result<Option<ExitInfo>, String> {
    let value = server
        .run(&["display-message", "-p", "-t", pane_id, PANE_STATE_FORMAT])
        .await?;
    Ok(pane_exit(&value, pane_id))
}

/// Splits a [`PANE_STATE_FORMAT`] value for `pane_id`: (dead, tmux's status, the wrapper's).
fn pane_state(value: &str, pane_id: &str) -> Option<(bool, Option<i32>, Option<i32>)> {
    let mut fields = value.trim().split('|');
    if fields.next() != Some(pane_id) {
        return None;
    }
    let dead = fields.next() == Some("1");
    let status = fields.next().and_then(|f| f.parse().ok());
    let reported = fields.next().and_then(|f| f.parse().ok());
    Some((dead, status, reported))
}

/// Whether the value says `pane_id` is dead (status known or not).
fn pane_is_dead(value: &str, pane_id: &str) -> bool {
    pane_state(value, pane_id).is_some_and(|(dead, _, _)| dead)
}

/// The exit of `pane_id`, once its status is known: from the pane wrapper (the program has
/// exited; the pane closes a moment later) or from tmux for a dead pane.
fn pane_exit(value: &str, pane_id: &str) -> Option<ExitInfo> {
    let exit_code = match pane_state(value, pane_id)? {
        (_, _, Some(reported)) => reported,
        (true, Some(status), None) => status,
        _ => return None,
    };
    Some(ExitInfo {
        exit_code: Some(exit_code),
        reason: "exited".into(),
        exited_at: Utc::now(),
    })
}

impl Backend for TmuxBackend {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, crate::error::HubResult<()>> {
        async move {
            self.send_commands(send_bytes_commands(&self.pane_id, &bytes))
                .await
                .map_err(|reason| crate::error::HubError::WriteFailed { reason })
        }
        .boxed()
    }

    fn resize(&self, size: TermSize) -> BoxFuture<'_, Result<(), String>> {
        let line = format!(
            "resize-window -t {} -x {} -y {}",
            self.pane_id, size.cols, size.rows
        );
        async move { self.send_commands(vec![line]).await }.boxed()
    }

    fn terminate(&self, first: TermSignal) -> BoxFuture<'_, Result<(), String>> {
        async move {
            // Host panes: every process of the pane's terminal. In a container, killing the
            // session hangs the pane up and the container's own lifecycle does the rest.
            let left = match self.pane_pid {
                Some(pid) if self.place.is_host() => {
                    crate::process::terminate_session(pid, first).await
                }
                _ => Vec::new(),
            };
            let _ = self
                .place
                .run(&["kill-session", "-t", &format!("={}", self.session_name)])
                .await;
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("processes still alive after SIGKILL: {left:?}"))
            }
        }
        .boxed()
    }

    fn detach(&self) -> BoxFuture<'_, ()> {
        async move {
            // An empty batch tells the writer to detach the client and stop.
            let (ack, done) = oneshot::channel();
            if self.commands.send((Vec::new(), ack)).is_ok() {
                let _ = tokio::time::timeout(TMUX_CALL_TIMEOUT, done).await;
            }
        }
        .boxed()
    }

    fn pid(&self) -> Option<u32> {
        // A container's pids mean nothing on the host.
        self.pane_pid.filter(|_| self.place.is_host())
    }
}

#[cfg(test)]
mod tests {
    use super::pane_exit;

    #[test]
    fn pane_states_are_matched_to_our_pane() {
        let code = |v: &str| pane_exit(v, "%3").and_then(|e| e.exit_code);
        assert_eq!(code("%3|1|7|"), Some(7), "tmux knows the status");
        assert_eq!(
            code("%3|0||4"),
            Some(4),
            "the wrapper reported before the pane closed"
        );
        assert_eq!(code("%3|1||4"), Some(4));
        assert_eq!(code("%3|0||"), None, "alive");
        assert_eq!(code("%3|1||"), None, "dead, status not known yet");
        assert_eq!(code("%4|1|7|"), None, "another pane");
        assert_eq!(code(""), None);
        assert!(super::pane_is_dead("%3|1||", "%3") && !super::pane_is_dead("%3|0||", "%3"));
    }
}
