//! tmux backend: a tmux session the hub creates or adopts by name, on the host or inside a
//! container ([`TmuxPlace`]), streamed losslessly through a control-mode client
//! (`tmux -C attach -f ignore-size`). Input goes in as
//! `send-keys -H` commands on the client's stdin (one writer); every byte the pane prints
//! comes back as `%output`. The monitor never changes the size a human attached to the same
//! session sees; the hub sizes the window explicitly with `resize-window`.

mod acks;
mod client;
pub mod control;
mod error;
#[cfg_attr(windows, path = "no_fifo.rs")]
mod fifo;
mod pane;
mod pipe;
pub mod place;
mod reader;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};

pub use error::TmuxError;
use place::TMUX_CALL_TIMEOUT;
pub use place::{PipeRoot, TmuxPlace};

use super::{Backend, BackendError, SpawnSpec, TermSize};
use crate::output::Output;
use crate::term::TermSignal;
use client::{start_control_client, Request};
use control::{is_safe_name, send_bytes_commands};
use pipe::{PanePipe, FIFO_SEEN};

/// Why the host's own tmux cannot run a session here (`None`: it can). tmux and the FIFOs its
/// panes' bytes come through are Unix's; containers keep their tmux on every platform.
pub const HOST_SESSIONS_REFUSED: Option<&str> = if cfg!(unix) {
    None
} else {
    Some(
        "tmux host sessions need a Unix host: on Windows use backend \"pty\" (a ConPTY console); \
         container agents keep their tmux",
    )
};

/// Lines of pane history kept by tmux for sessions the hub creates.
pub const TMUX_HISTORY_LIMIT: u32 = 50_000;
/// `sh -c` script a hub-created pane runs. It waits until the hub's control client is
/// attached (tmux latches the `wait-for` signal, so the order does not matter), so not even
/// the program's first output is missed; runs the program; records its exit status in the
/// pane option `@agent_hub_exit` (tmux itself does not always learn a dead pane's status);
/// and keeps the pane open a moment, because tmux's control mode reads pane output lazily
/// and drops what it has not sent yet when the pane dies. The exit status is kept.
const PANE_WRAPPER: &str = "tmux wait-for \"agent-hub-go-${TMUX_PANE#%}\" 2>/dev/null; \"$@\"; rc=$?; tmux set-option -p -t \"$TMUX_PANE\" @agent_hub_exit \"$rc\" 2>/dev/null; sleep 0.3; exit $rc";

/// A tmux pane streamed through a control-mode client.
pub struct TmuxBackend {
    place: TmuxPlace,
    session_name: String,
    pane_id: String,
    pane_pid: Option<u32>,
    commands: mpsc::UnboundedSender<Request>,
    /// Bumped at each write: tells the pane's pipe reader that input went in.
    input: tokio::sync::watch::Sender<u64>,
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
    ) -> Result<(Self, bool), TmuxError> {
        Self::start_with(server, name, spec, output, false).await
    }

    /// Like [`TmuxBackend::start`], but an adopted pane is made `spec`'s size too (an agent's
    /// terminal is the hub's). Resized before the control client attaches, so the past it
    /// shows is the pane as tmux reflowed it and no repaint (two more tmux calls) is needed;
    /// a pane of that size already is not resized at all.
    pub async fn start_sized(
        server: TmuxPlace,
        name: &str,
        spec: &SpawnSpec,
        output: Arc<Output>,
    ) -> Result<(Self, bool), TmuxError> {
        Self::start_with(server, name, spec, output, true).await
    }

    async fn start_with(
        server: TmuxPlace,
        name: &str,
        spec: &SpawnSpec,
        output: Arc<Output>,
        size_adopted: bool,
    ) -> Result<(Self, bool), TmuxError> {
        if !is_safe_name(name) || name.starts_with(['%', '$', '@', '=']) {
            return Err(TmuxError::InvalidName {
                name: name.to_string(),
            });
        }
        // The FIFO is made first, so the one tmux call that finds the pane also says whether
        // the server sees it.
        let direct = PanePipe::direct_at(&server);
        let check = direct.as_ref().and_then(PanePipe::seen_check);
        let found = find_or_create(&server, name, spec, check.as_ref(), size_adopted).await;
        let found = match found {
            Ok(f) => f,
            Err(e) => {
                if let Some(p) = direct {
                    p.abandon(&server).await;
                }
                return Err(e);
            }
        };
        let (input, typed) = tokio::sync::watch::channel(0u64);
        let pane_pipe = PanePipe::chosen(direct, found.fifo_seen, &server)
            .await
            .map(|p| p.with_input(typed));
        // An adopted pane's past is shown (taken by the control client, in its stream).
        let seed = found.adopted;
        let commands =
            start_control_client(&server, name, &found.pane_id, output, seed, pane_pipe).await?;
        Ok((
            TmuxBackend {
                place: server,
                session_name: name.to_string(),
                pane_id: found.pane_id,
                pane_pid: found.pane_pid,
                commands,
                input,
            },
            found.adopted,
        ))
    }

    async fn send_commands(&self, lines: Vec<String>) -> Result<(), TmuxError> {
        let (ack, done) = oneshot::channel();
        self.commands
            .send(Request::new(lines, ack))
            .map_err(|_| TmuxError::ClientExited)?;
        tokio::time::timeout(TMUX_CALL_TIMEOUT, done)
            .await
            .map_err(|_| TmuxError::NoAnswer)?
            .map_err(|_| TmuxError::ClientExited)?
    }
}

/// The pane of a session, as [`find_or_create`] found it.
struct FoundPane {
    pane_id: String,
    pane_pid: Option<u32>,
    /// Its window's size.
    size: Option<TermSize>,
    /// The session existed (it was not created by this start).
    adopted: bool,
    /// The tmux server said it sees the hub's FIFO ([`PanePipe::seen_check`]).
    fifo_seen: bool,
}

/// The pane of session `name`, the session created running `spec` (and sized) when it does
/// not exist. In a container every tmux call is an exec, so the pane is looked at in one.
async fn find_or_create(
    server: &TmuxPlace,
    name: &str,
    spec: &SpawnSpec,
    check: Option<&[String; 2]>,
    size_adopted: bool,
) -> Result<FoundPane, TmuxError> {
    let probe = pane_probe(name, check);
    let probe: Vec<&str> = probe.iter().map(String::as_str).collect();
    let mut adopted = true;
    let looked = match server.run(&probe).await {
        Ok(out) => out,
        Err(_) => {
            match create_session(server, name, spec).await {
                Ok(()) => adopted = false,
                // Someone else (an image's slow entrypoint) created it meanwhile: adopt it.
                Err(e) if e.is_duplicate_session() => {}
                Err(e) => return Err(e),
            }
            server.run(&probe).await?
        }
    };
    let Some(found) = parse_probe(&looked, adopted) else {
        return Err(TmuxError::NoPane {
            name: name.to_string(),
        });
    };
    // An adopted pane keeps its size unless asked (a human may be looking at it).
    if !adopted || (size_adopted && found.size != Some(spec.size)) {
        server
            .run(&[
                "resize-window",
                "-t",
                &found.pane_id,
                "-x",
                &spec.size.cols.to_string(),
                "-y",
                &spec.size.rows.to_string(),
            ])
            .await?;
    }
    Ok(found)
}

/// One tmux command line that fails unless session `name` exists (`display-message` alone
/// succeeds, printing nothing, for a missing target), then prints its pane's id and pid and
/// its window's size, then [`FIFO_SEEN`] when `check` holds.
fn pane_probe(name: &str, check: Option<&[String; 2]>) -> Vec<String> {
    let mut args: Vec<String> = [
        "has-session",
        "-t",
        &format!("={name}"),
        ";",
        "display-message",
        "-p",
        "-t",
        &format!("={name}:"),
        "#{pane_id} #{pane_pid} #{window_width} #{window_height}",
    ]
    .map(String::from)
    .into();
    if let Some([condition, then]) = check {
        args.extend([
            ";".into(),
            "if-shell".into(),
            condition.clone(),
            then.clone(),
        ]);
    }
    args
}

/// The pane in a [`pane_probe`]'s output; `None` when it names none.
fn parse_probe(out: &str, adopted: bool) -> Option<FoundPane> {
    let mut lines = out.lines();
    let mut ids = lines.next()?.split_whitespace();
    let pane_id = ids.next().filter(|id| id.starts_with('%'))?.to_string();
    let pane_pid = ids.next().and_then(|p| p.parse().ok());
    let mut number = || ids.next().and_then(|n| n.parse().ok());
    let size = number()
        .zip(number())
        .map(|(cols, rows)| TermSize { cols, rows });
    Some(FoundPane {
        pane_id,
        pane_pid,
        size,
        adopted,
        fifo_seen: lines.any(|l| l.trim() == FIFO_SEEN),
    })
}

async fn create_session(server: &TmuxPlace, name: &str, spec: &SpawnSpec) -> Result<(), TmuxError> {
    if server.is_host() && !spec.cwd.is_dir() {
        return Err(TmuxError::NoWorkingDirectory {
            path: spec.cwd.clone(),
        });
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
        .map_err(|e| TmuxError::NewSession(Box::new(e)))?;
    Ok(())
}

impl Backend for TmuxBackend {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, crate::error::HubResult<()>> {
        async move {
            self.input.send_modify(|n| *n += 1);
            self.send_commands(send_bytes_commands(&self.pane_id, &bytes))
                .await
                .map_err(|e| crate::error::HubError::WriteFailed {
                    reason: e.to_string(),
                })
        }
        .boxed()
    }

    fn resize(&self, size: TermSize) -> BoxFuture<'_, Result<(), BackendError>> {
        let line = format!(
            "resize-window -t {} -x {} -y {}",
            self.pane_id, size.cols, size.rows
        );
        async move { Ok(self.send_commands(vec![line]).await?) }.boxed()
    }

    fn visible_screen(&self) -> Option<BoxFuture<'_, Result<Vec<u8>, BackendError>>> {
        Some(
            async move {
                let lines = self
                    .place
                    .run(&["capture-pane", "-p", "-e", "-J", "-t", &self.pane_id])
                    .await?;
                let state = self
                    .place
                    .run(&[
                        "display-message",
                        "-p",
                        "-t",
                        &self.pane_id,
                        "#{cursor_y} #{cursor_x} #{alternate_on}",
                    ])
                    .await?;
                Ok(pane::paint(&lines, &state))
            }
            .boxed(),
        )
    }

    fn terminate(&self, first: TermSignal) -> BoxFuture<'_, Result<(), BackendError>> {
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
            Ok(crate::process::none_left(&left)?)
        }
        .boxed()
    }

    fn detach(&self) -> BoxFuture<'_, ()> {
        async move {
            // An empty batch tells the writer to detach the client and stop.
            let (ack, done) = oneshot::channel();
            if self.commands.send(Request::new(Vec::new(), ack)).is_ok() {
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
    use super::*;

    #[test]
    fn the_pane_probe_fails_for_a_missing_session_and_asks_about_the_fifo_only_when_told() {
        let plain = pane_probe("agent", None);
        assert_eq!(
            plain.join(" "),
            "has-session -t =agent ; display-message -p -t =agent: \
             #{pane_id} #{pane_pid} #{window_width} #{window_height}"
        );
        let check = [
            "[ -p '/p/d/out' ]".to_string(),
            "display-message -p x".into(),
        ];
        let checked = pane_probe("agent", Some(&check));
        assert_eq!(
            checked[plain.len()..],
            [";", "if-shell", "[ -p '/p/d/out' ]", "display-message -p x"]
        );
    }

    #[test]
    fn a_probe_s_answer_gives_the_pane_its_size_and_whether_the_fifo_is_seen() {
        let found = parse_probe("%3 4321 120 30\nagent-hub-fifo-seen\n", true).unwrap();
        assert_eq!(
            (found.pane_id.as_str(), found.pane_pid, found.size),
            (
                "%3",
                Some(4321),
                Some(TermSize {
                    cols: 120,
                    rows: 30
                })
            )
        );
        assert!(found.adopted && found.fifo_seen);
        let unseen = parse_probe("%3 4321 80 24\n", false).unwrap();
        assert!(!unseen.adopted && !unseen.fifo_seen);
        // `display-message` on a missing target prints a blank line and succeeds.
        assert!(parse_probe(" \n", true).is_none());
        assert!(parse_probe("", true).is_none());
    }
}
