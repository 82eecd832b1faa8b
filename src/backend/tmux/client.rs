//! The control-mode client of a tmux backend: `tmux -C attach`, its single writer (commands
//! in order, each acknowledged by tmux's reply) and its reader (pane output into the pipeline,
//! replies to the acks, the pane's death and exit status).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::pane::{pane_exit, pane_is_dead, query_dead_pane, PANE_STATE_FORMAT};
use super::TmuxPlace;
use crate::backend::tmux_control::{ControlMessage, ControlParser};
use crate::backend::tmux_place::TMUX_CALL_TIMEOUT;
use crate::output::{ExitInfo, Output};

/// Name of the subscription that reports the pane's death and exit status.
const DEAD_SUBSCRIPTION: &str = "agent_hub_pane_dead";
/// While a pane is dead but its exit status not yet known, how often to ask tmux again.
const DEAD_STATUS_POLL: Duration = Duration::from_millis(100);
/// After a pane is reported dead, how long output tmux still holds for it may arrive.
const DEAD_PANE_DRAIN: Duration = Duration::from_millis(250);

pub(super) type Ack = oneshot::Sender<Result<(), String>>;

/// Acks waiting for tmux's replies, in command order: (replies still expected, first error, ack).
type PendingAcks = Arc<Mutex<VecDeque<(usize, Option<String>, Ack)>>>;

/// Starts `tmux -C attach` and the tasks that read its output and write its commands.
pub(super) async fn start_control_client(
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
