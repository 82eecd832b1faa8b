//! The control-mode client of a tmux backend: `tmux -C attach`, its single writer (commands
//! in order, each acknowledged by tmux's reply) and its reader ([`super::reader`]: pane output
//! into the pipeline, replies settling the acks of [`super::acks`], the pane's death and exit
//! status).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::acks::{Ack, Pending, PendingAcks, Purpose};
use super::pane::{DEAD_SUBSCRIPTION, PANE_STATE_FORMAT};
use super::pipe::{self, PanePipe};
use super::reader::ControlReader;
use super::{TmuxError, TmuxPlace};
use crate::backend::tmux::place::TMUX_CALL_TIMEOUT;
use crate::output::{ExitInfo, Output};

/// The [`Purpose::Seed`] batch for `pane_id`: its history and screen, then its cursor (one
/// write, so tmux runs both before it reads the pane again).
fn seed_commands(pane_id: &str) -> Vec<String> {
    vec![
        format!("capture-pane -p -e -J -S - -t {pane_id}"),
        format!("display-message -p -t {pane_id} '#{{cursor_y}} #{{cursor_x}}'"),
    ]
}

/// Commands for the control client's writer. An empty batch asks it to detach.
pub(super) struct Request {
    pub lines: Vec<String>,
    pub ack: Ack,
    pub purpose: Purpose,
}

impl Request {
    pub fn new(lines: Vec<String>, ack: Ack) -> Self {
        Request {
            lines,
            ack,
            purpose: Purpose::Plain,
        }
    }
}

/// Starts `tmux -C attach` and the tasks that read its output and write its commands. The
/// pane's bytes come through `pane_pipe` when there is one, else through `%output`.
pub(super) async fn start_control_client(
    server: &TmuxPlace,
    name: &str,
    pane_id: &str,
    output: Arc<Output>,
    seed: bool,
    pane_pipe: Option<PanePipe>,
) -> Result<mpsc::UnboundedSender<Request>, TmuxError> {
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
    let (exit_tx, exit_rx) = tokio::sync::watch::channel(None);
    let detached = Arc::new(AtomicBool::new(false));

    let reader = ControlReader::new(
        server.clone(),
        (name.to_string(), pane_id.to_string()),
        output.clone(),
        pending.clone(),
        attached_tx,
        (exit_tx, detached.clone()),
        seed,
    );
    let reader = tokio::spawn(reader.run(io.reader, io.ended));
    // Only a client tmux has confirmed is usable: a `docker exec` into a dying container can
    // print an error and then keep its stream open without ever attaching.
    match tokio::time::timeout(TMUX_CALL_TIMEOUT, attached).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return Err(TmuxError::EndedBeforeAttach),
        Err(_) => {
            reader.abort();
            return Err(TmuxError::AttachTimedOut);
        }
    }
    let (commands, requests) = mpsc::unbounded_channel();
    tokio::spawn(write_commands(
        io.writer,
        requests,
        pending,
        vec![subscribe],
        (pane_id.to_string(), detached),
    ));
    if seed {
        // Settled by the reader, which puts the pane's past into the output at its place.
        let (ack, _) = oneshot::channel();
        let _ = commands.send(Request {
            lines: seed_commands(pane_id),
            ack,
            purpose: Purpose::Seed,
        });
    }
    if let Some(p) = pane_pipe {
        open_pipe(server, &commands, p, pane_id, output, exit_rx).await;
    }
    let (released, _) = oneshot::channel();
    let _ = commands.send(Request::new(vec![release], released));
    Ok(commands)
}

/// Moves the pane's bytes to `p` (see [`pipe`]); on failure they keep coming as `%output`.
async fn open_pipe(
    server: &TmuxPlace,
    commands: &mpsc::UnboundedSender<Request>,
    p: PanePipe,
    pane_id: &str,
    output: Arc<Output>,
    exit: tokio::sync::watch::Receiver<Option<ExitInfo>>,
) {
    let Some(open) = p.open_command(pane_id) else {
        return p.abandon(server).await;
    };
    let (ack, answer) = oneshot::channel();
    let sent = commands.send(Request {
        lines: vec![open],
        ack,
        purpose: Purpose::OpensPipe,
    });
    let opened = sent.is_ok()
        && matches!(
            tokio::time::timeout(TMUX_CALL_TIMEOUT, answer).await,
            Ok(Ok(Ok(())))
        );
    if opened {
        tokio::spawn(p.stream(output, exit));
        let (off, _) = oneshot::channel();
        let _ = commands.send(Request::new(vec![pipe::output_pause_command(pane_id)], off));
    } else {
        tracing::warn!(pane = %pane_id, "pipe-pane failed: pane output through control mode");
        p.abandon(server).await;
    }
}

/// The control client's single writer, started once the attach is confirmed (commands sent
/// before it fail with "no current client"). Sends `first` (the subscription to the pane's
/// state), then writes queued commands in order. Detaching closes the pane's pipe first, and
/// tells the reader (`detached`) the client goes because the hub said so.
async fn write_commands(
    mut stdin: Pin<Box<dyn AsyncWrite + Send>>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    pending: PendingAcks,
    first: Vec<String>,
    (pane_id, detached): (String, Arc<AtomicBool>),
) {
    let (nobody_waits, _) = oneshot::channel();
    if write_lines(&mut stdin, Request::new(first, nobody_waits), &pending).await {
        while let Some(request) = requests.recv().await {
            if request.lines.is_empty() {
                // A detach request: settled once the client has been told to go.
                detached.store(true, Ordering::SeqCst);
                let _ = stdin.write_all(detach_lines(&pane_id).as_bytes()).await;
                let _ = request.ack.send(Ok(()));
                return;
            }
            if !write_lines(&mut stdin, request, &pending).await {
                return;
            }
        }
        // The session is gone from the hub: the hub detaches the client.
        detached.store(true, Ordering::SeqCst);
    }
    // Detach the control client cleanly.
    let _ = stdin.write_all(detach_lines(&pane_id).as_bytes()).await;
}

/// What the writer sends to leave: the pane's pipe closed (its reader ends), then the client.
fn detach_lines(pane_id: &str) -> String {
    format!("{}\ndetach-client\n", pipe::close_command(pane_id))
}

/// Writes command lines; the request's ack is settled when tmux has answered all of them.
async fn write_lines(
    stdin: &mut Pin<Box<dyn AsyncWrite + Send>>,
    request: Request,
    pending: &PendingAcks,
) -> bool {
    let mut text = request.lines.join("\n");
    text.push('\n');
    // Register before writing: the reply may arrive before write_all returns.
    if let Ok(mut p) = pending.lock() {
        p.push_back(Pending::new(
            request.lines.len(),
            request.ack,
            request.purpose,
        ));
    }
    if let Err(e) = stdin.write_all(text.as_bytes()).await {
        if let Some(failed) = pending.lock().ok().and_then(|mut p| p.pop_back()) {
            let _ = failed.ack.send(Err(TmuxError::Write(e)));
        }
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Wake, Waker};

    /// Wakes the pipe's starter: notes what the output holds at that very moment.
    struct LookAtWake {
        output: Arc<Output>,
        seen: Mutex<Option<Vec<u8>>>,
    }

    impl Wake for LookAtWake {
        fn wake(self: Arc<Self>) {
            let now = self.output.read(Some(0), usize::MAX).bytes;
            *self.seen.lock().unwrap() = Some(now);
        }
    }

    /// A batch waiting for `replies` replies, and where its ack goes.
    fn batch(
        replies: usize,
        purpose: Purpose,
    ) -> (Pending, oneshot::Receiver<Result<(), TmuxError>>) {
        let (ack, answer) = oneshot::channel();
        (Pending::new(replies, ack, purpose), answer)
    }

    /// Runs the reader over `stream` with `pending` batches; returns the output it made.
    async fn read_all(stream: &'static [u8], pending: Vec<Pending>, seed: bool) -> Arc<Output> {
        let output = Arc::new(Output::new(1 << 16));
        read_into(&output, stream, VecDeque::from(pending), seed).await;
        output
    }

    async fn read_into(
        output: &Arc<Output>,
        stream: &'static [u8],
        pending: VecDeque<Pending>,
        seed: bool,
    ) {
        let (attached, _) = oneshot::channel();
        let (exit_tx, _exit_rx) = tokio::sync::watch::channel(None);
        let server = TmuxPlace::Host {
            socket_name: Some(format!("ah-no-server-{}", std::process::id())),
        };
        let reader = ControlReader::new(
            server,
            ("s".into(), "%7".into()),
            output.clone(),
            Arc::new(Mutex::new(pending)),
            attached,
            (exit_tx, Arc::default()),
            seed,
        );
        reader.run(Box::pin(stream), Box::pin(async {})).await;
    }

    #[tokio::test]
    async fn an_adopted_pane_s_past_is_placed_in_the_stream_where_tmux_took_it() {
        // Output before the capture's reply is in the capture; output after it is not. The
        // subscription's reply comes first and must not end the wait for the seed.
        let (subscription, _) = batch(1, Purpose::Plain);
        let (seed, _) = batch(2, Purpose::Seed);
        let stream = b"%output %7 early\n%begin 1 4 1\n%end 1 4 1\n%output %7 drawn\n\
            %begin 1 5 1\n$ ls\nfile\n$ \n\n\n%end 1 5 1\n%begin 1 6 1\n2 2\n%end 1 6 1\n\
            %output %7 late\n";
        let output = read_all(stream, vec![subscription, seed], true).await;
        assert_eq!(
            String::from_utf8_lossy(&output.read(Some(0), usize::MAX).bytes),
            "$ ls\r\nfile\r\n$ \r\n\r\n\x1b[3;3Hlate"
        );
    }

    #[tokio::test]
    async fn a_failed_seed_shows_the_output_it_held_and_what_follows() {
        let (seed, _) = batch(2, Purpose::Seed);
        let stream = b"%output %7 early\n%begin 1 5 1\nno pane\n%error 1 5 1\n\
            %begin 1 6 1\n%error 1 6 1\n%output %7 late\n";
        let output = read_all(stream, vec![seed], true).await;
        assert_eq!(output.read(Some(0), usize::MAX).bytes, b"earlylate");
    }

    #[tokio::test]
    async fn a_pipe_nobody_waits_for_any_more_leaves_the_bytes_on_the_control_client() {
        // `open_pipe` gave up waiting (and abandoned the FIFO) before tmux answered.
        let (pipe_pane, answer) = batch(1, Purpose::OpensPipe);
        drop(answer);
        let stream = b"%output %7 before\n%begin 1 5 1\n%end 1 5 1\n%output %7 after\n";
        let output = read_all(stream, vec![pipe_pane], false).await;
        assert_eq!(output.read(Some(0), usize::MAX).bytes, b"beforeafter");
    }

    #[test]
    fn seed_commands_are_one_capture_and_one_cursor_query() {
        assert_eq!(
            seed_commands("%3"),
            [
                "capture-pane -p -e -J -S - -t %3",
                "display-message -p -t %3 '#{cursor_y} #{cursor_x}'"
            ]
        );
    }

    #[tokio::test]
    async fn the_pane_bytes_before_the_pipe_pane_reply_are_in_before_the_pipe_starts() {
        let output = Arc::new(Output::new(1 << 16));
        let (pipe_pane, mut answer) = batch(1, Purpose::OpensPipe);
        let look = Arc::new(LookAtWake {
            output: output.clone(),
            seen: Mutex::new(None),
        });
        let waker = Waker::from(look.clone());
        let first_poll = Pin::new(&mut answer).poll(&mut Context::from_waker(&waker));
        assert!(first_poll.is_pending());
        let pending = VecDeque::from([pipe_pane]);
        // One read holds the pane's last `%output` and, after it, the reply to `pipe-pane`.
        let stream =
            b"%output %7 before\\040the\\040pipe\n%begin 1 5 1\n%end 1 5 1\n%output %7 after\n";
        read_into(&output, stream, pending, false).await;
        // When the pipe's reader may start, the bytes before the reply are in the output.
        let seen = look.seen.lock().unwrap().clone();
        assert_eq!(seen.as_deref(), Some(&b"before the pipe"[..]));
        assert!(matches!(answer.try_recv(), Ok(Ok(()))));
        // And `%output` after the reply is the pipe's to deliver, not the control client's.
        assert_eq!(output.read(Some(0), usize::MAX).bytes, b"before the pipe");
    }
}
