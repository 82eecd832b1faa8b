//! A session is one terminal: identity, metadata, the output pipeline, the rendered screen and a
//! backend. The operations people and agents use (send_line, keys, signal, talk, resize, kill)
//! are written here once, whatever the backend; `write` holds the input operations and the
//! command guard they enforce.

pub mod input;
pub mod talk;
mod wait;
pub mod write;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::agent_state::profile::Profile;
use crate::agent_state::{StateReport, Watch};
use crate::backend::{Backend, TermSize};
use crate::error::{HubError, HubResult};
use crate::guard::Guard;
use crate::output::{CursorItem, ExitInfo, Output, OutputCursor};
use crate::screen::Screen;
use input::{SignalAction, TermSignal};

/// How often the background screen follower catches up with new output at most. Readers of
/// the screen always catch up first, so this only bounds how far behind it may drift.
const SCREEN_FOLLOW_INTERVAL: Duration = Duration::from_millis(20);
/// The longest a quiet session's screen goes without a look. A look is due sooner whenever the
/// agent state could change with no new output or input ([`crate::agent_state::Watch::next_due`]);
/// this only bounds the wait where nothing is due (100 idle sessions: 20 looks a second).
const QUIET_LOOK_INTERVAL: Duration = Duration::from_secs(5);

/// Who a session belongs to: the routing keys leaders use instead of session ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Owner {
    pub owner_agent_id: Option<String>,
    pub owner_session_id: Option<String>,
    pub owner_role: Option<String>,
    pub label: Option<String>,
    pub cli_type: Option<String>,
    /// The agent conversation this terminal belongs to (for example a Claude Code session id).
    #[serde(default)]
    pub conversation_id: Option<String>,
}

/// The fixed facts about a session, set when it starts.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionSpec {
    pub id: String,
    pub backend: crate::protocol::SessionBackend,
    /// Where the terminal lives: `host` (host PTYs and tmux), `docker`, or for external
    /// sessions what their registration said (`remote-hub`, `ide`, ...).
    pub source: String,
    pub shell: String,
    pub args: Vec<String>,
    pub cwd: String,
    /// The tmux session name, for tmux-backed sessions.
    pub tmux_session: Option<String>,
    /// The container agent this terminal belongs to.
    pub agent_id: Option<String>,
    /// The policy that applies to this session (a name the `policy` module knows).
    pub policy: Option<String>,
    /// The container, for docker sessions.
    pub container_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Everything a client sees about a session (`GET /v1/pty/sessions/{id}`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionInfo {
    #[serde(flatten)]
    pub spec: SessionSpec,
    #[serde(flatten)]
    pub owner: Owner,
    pub cols: u16,
    pub rows: u16,
    pub pid: Option<u32>,
    pub alive: bool,
    pub exit_code: Option<i32>,
    pub exit_reason: Option<String>,
    /// Last *meaningful* activity: a change of the rendered screen's text (volatile parts such
    /// as a tmux status line, clocks and spinners masked) or input; never raw bytes alone.
    pub last_activity_at: DateTime<Utc>,
    /// Last meaningful change of the rendered screen.
    pub last_screen_change_at: Option<DateTime<Utc>>,
    /// Last output byte of any kind (a status-line redraw counts here, not above).
    pub last_output_at: Option<DateTime<Utc>>,
    pub last_input_at: Option<DateTime<Utc>>,
    /// When the session's owner last said it is alive (`POST /v1/pty/heartbeat`).
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    /// Absolute offset just past the newest output byte.
    pub output_offset: u64,
    /// For external sessions: the bridge and its health.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<crate::backend::external::ExternalInfo>,
    /// What the terminal supports besides input and output (`resize`, `kill`, `owned`).
    #[serde(default)]
    pub capabilities: crate::backend::Capabilities,
    /// The agent state, in the session list (what `GET .../state` says), so a fleet view needs
    /// one request, not one per session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_state: Option<crate::protocol::StateView>,
}

/// The result of a talk.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TalkResult {
    pub output: String,
    pub exit_code: Option<i32>,
    pub sentinel: String,
    pub raw_output: String,
    pub duration_ms: u64,
    pub truncated: bool,
}

struct Mutable {
    size: TermSize,
    owner: Owner,
    last_input_at: Option<DateTime<Utc>>,
    last_heartbeat_at: Option<DateTime<Utc>>,
}

/// `bytes` carries Enter: input that submits something.
fn submits(bytes: &[u8]) -> bool {
    bytes.contains(&b'\r') || bytes.contains(&b'\n')
}

/// One terminal session.
pub struct Session {
    spec: SessionSpec,
    mutable: Mutex<Mutable>,
    output: Arc<Output>,
    screen: Mutex<Screen>,
    /// Meaningful activity and agent state (see [`crate::agent_state`]).
    watch: Mutex<Watch>,
    backend: Box<dyn Backend>,
    /// The command guard every caller's input passes (see [`write`]).
    guard: Arc<Guard>,
    /// Serialises talks so two never interleave on one terminal.
    talk_lock: tokio::sync::Mutex<()>,
    /// Stops the session's background tasks when it is removed.
    cancel: CancellationToken,
    /// Interactive viewers attached (WebSocket screen mode): while there is one, its terminal
    /// answers the program's terminal queries; otherwise the hub does (PTY sessions only).
    viewers: std::sync::atomic::AtomicUsize,
    /// Counts input written by users of the session: state waiters wake on it (input turns the
    /// state to `working` at once, before any output).
    inputs: tokio::sync::watch::Sender<u64>,
    /// Told of every change of the reported agent state (the hub publishes it as an event).
    on_state_change: std::sync::OnceLock<Box<dyn Fn(StateChange) + Send + Sync>>,
}

/// The reported agent state changed (`session_state_changed` on the event bus).
#[derive(Debug, Clone)]
pub struct StateChange {
    pub state: crate::agent_state::State,
    pub previous: crate::agent_state::State,
    pub since: DateTime<Utc>,
    pub rule: String,
}

impl Session {
    /// Wraps a started backend. `output` must be the pipeline the backend pushes into.
    pub fn new(
        spec: SessionSpec,
        size: TermSize,
        owner: Owner,
        output: Arc<Output>,
        backend: Box<dyn Backend>,
        profile: Arc<Profile>,
        guard: Arc<Guard>,
    ) -> Arc<Self> {
        let session = Arc::new(Session {
            spec,
            mutable: Mutex::new(Mutable {
                size,
                owner,
                last_input_at: None,
                last_heartbeat_at: None,
            }),
            output,
            screen: Mutex::new(Screen::new(size)),
            watch: Mutex::new(Watch::new(profile, tokio::time::Instant::now())),
            backend,
            guard,
            talk_lock: tokio::sync::Mutex::new(()),
            cancel: CancellationToken::new(),
            viewers: std::sync::atomic::AtomicUsize::new(0),
            inputs: tokio::sync::watch::channel(0).0,
            on_state_change: std::sync::OnceLock::new(),
        });
        tokio::spawn(follow_screen(
            Arc::downgrade(&session),
            session.cancel.clone(),
        ));
        session
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mutable> {
        self.mutable.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The fixed facts about the session.
    pub fn spec(&self) -> &SessionSpec {
        &self.spec
    }

    /// The output pipeline (scrollback, subscribers).
    pub fn output(&self) -> &Arc<Output> {
        &self.output
    }

    /// A snapshot of everything a client sees about the session.
    pub fn info(&self) -> SessionInfo {
        let m = self.lock();
        let exit = self.output.exit();
        let last_output_at = self.output.last_output_at();
        let (last_activity_at, last_screen_change_at) = {
            let w = self.lock_watch();
            (
                crate::activity::wall_clock(w.last_activity_at()),
                w.last_screen_change_at().map(crate::activity::wall_clock),
            )
        };
        SessionInfo {
            spec: self.spec.clone(),
            owner: m.owner.clone(),
            cols: m.size.cols,
            rows: m.size.rows,
            pid: self.backend.pid(),
            alive: exit.is_none(),
            exit_code: exit.as_ref().and_then(|e| e.exit_code),
            exit_reason: exit.map(|e| e.reason),
            last_activity_at,
            last_screen_change_at,
            last_output_at,
            last_input_at: m.last_input_at,
            last_heartbeat_at: m.last_heartbeat_at,
            output_offset: self.output.end_offset(),
            external: self.backend.external().map(|link| link.info()),
            capabilities: self.backend.capabilities(),
            agent_state: None,
        }
    }

    /// Notes that the session's owner is alive.
    pub fn heartbeat(&self) {
        self.lock().last_heartbeat_at = Some(Utc::now());
    }

    /// For external sessions, the bridge that owns the terminal (what the registry keeps).
    pub fn external(&self) -> Option<&Arc<crate::backend::external::ExternalLink>> {
        self.backend.external()
    }

    /// What the session's backend can do besides moving bytes.
    pub fn capabilities(&self) -> crate::backend::Capabilities {
        self.backend.capabilities()
    }

    /// The owner identity.
    pub fn owner(&self) -> Owner {
        self.lock().owner.clone()
    }

    /// Changes the owner fields that are given, in place.
    pub fn update_owner(&self, update: Owner) {
        let mut m = self.lock();
        let o = &mut m.owner;
        for (field, value) in [
            (&mut o.owner_agent_id, update.owner_agent_id),
            (&mut o.owner_session_id, update.owner_session_id),
            (&mut o.owner_role, update.owner_role),
            (&mut o.label, update.label),
            (&mut o.cli_type, update.cli_type),
            (&mut o.conversation_id, update.conversation_id),
        ] {
            if value.is_some() {
                *field = value;
            }
        }
    }

    fn exited_error(&self, exit: ExitInfo, output: String) -> HubError {
        HubError::ProcessExited {
            exit_code: exit.exit_code,
            output,
        }
    }

    /// Delivers a signal: SIGINT and SIGQUIT as their control characters (runs nothing, so
    /// unchecked), the others by terminating the terminal's processes.
    pub async fn signal(&self, name: &str) -> HubResult<()> {
        match input::signal_action(name).map_err(HubError::bad_request)? {
            SignalAction::Write(bytes) => self.send_unchecked(bytes.to_vec()).await,
            SignalAction::Terminate(sig) => self.terminate(sig).await,
        }
    }

    /// Resizes the terminal; the program sees the new size.
    pub async fn resize(&self, size: TermSize) -> HubResult<()> {
        if !self.capabilities().resize {
            return Err(HubError::ResizeUnsupported {
                id: self.spec.id.clone(),
            });
        }
        if let Some(exit) = self.output.exit() {
            return Err(self.exited_error(exit, String::new()));
        }
        self.lock_watch()
            .note_own_repaint(tokio::time::Instant::now());
        self.backend
            .resize(size)
            .await
            .map_err(|reason| HubError::WriteFailed { reason })?;
        self.lock().size = size;
        self.with_screen(|s| s.resize(size));
        self.repaint_from_backend().await;
        Ok(())
    }

    /// Takes the screen from the backend where it is the authority (tmux reflows wrapped lines
    /// on a resize; an emulator fed the same bytes cuts them). Only while the output is quiet
    /// (a screen taken mid-output could not be placed in the stream); a session that keeps
    /// printing for a second keeps its emulator's screen.
    async fn repaint_from_backend(&self) {
        const QUIET: Duration = Duration::from_millis(50);
        // Only a backend that knows its screen is waited on (a PTY's resize returns at once).
        if self.backend.visible_screen().is_none() {
            return;
        }
        let give_up = tokio::time::Instant::now() + Duration::from_secs(1);
        while tokio::time::Instant::now() < give_up {
            let before = self.output.end_offset();
            tokio::time::sleep(QUIET).await;
            if self.output.end_offset() != before {
                continue;
            }
            let Some(capture) = self.backend.visible_screen() else {
                return;
            };
            let Ok(paint) = capture.await else { return };
            if self.output.end_offset() == before {
                self.with_screen(|s| s.repaint_from(&paint, before));
                return;
            }
        }
    }

    /// Stops every process of the terminal (`first`, then SIGKILL after a grace period).
    pub async fn terminate(&self, first: TermSignal) -> HubResult<()> {
        if !self.capabilities().kill {
            return Err(HubError::KillUnsupported {
                id: self.spec.id.clone(),
            });
        }
        self.backend
            .terminate(first)
            .await
            .map_err(|message| HubError::Internal { message })
    }

    /// Stops the background tasks; called when the session leaves the registry.
    pub fn close(&self) {
        self.cancel.cancel();
    }

    /// Stops streaming without stopping the program (detaches a tmux client cleanly).
    pub async fn detach(&self) {
        self.backend.detach().await;
    }

    /// Counts an interactive viewer for as long as the returned guard lives.
    pub fn viewer(self: &Arc<Self>) -> ViewerGuard {
        self.viewers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ViewerGuard(self.clone())
    }

    /// A rendered read of the screen and its scrollback.
    pub fn term_read(&self, req: &crate::screen::TermReadRequest) -> crate::screen::TermRead {
        self.with_screen(|s| s.read(req))
    }

    /// The rendered screen: from the backend when it renders whole (a bridge's own
    /// emulator), else from this session's emulator.
    pub async fn rendered(
        &self,
        req: &crate::screen::TermReadRequest,
    ) -> HubResult<crate::screen::TermRead> {
        match self.backend.term_read(req) {
            Some(whole) => whole.await,
            None => Ok(self.term_read(req)),
        }
    }

    /// Sends the emulator's answers to terminal queries (cursor position, device attributes)
    /// when the hub is the terminal (a PTY) and no interactive viewer's terminal will answer,
    /// so programs that ask at start-up do not hang.
    async fn answer_queries(&self) {
        let replies = self.with_screen(|s| s.take_replies());
        let hub_answers = self.spec.backend == crate::protocol::SessionBackend::Pty
            && self.viewers.load(std::sync::atomic::Ordering::SeqCst) == 0;
        if hub_answers {
            for reply in replies {
                let _ = self.backend.write(reply).await;
            }
        }
    }

    fn lock_watch(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.watch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Uses `profile` to read the screen from now on (after a reload or an owner change).
    pub fn set_profile(&self, profile: Arc<Profile>) {
        let mut w = self.lock_watch();
        if !Arc::ptr_eq(w.profile(), &profile) {
            w.set_profile(profile);
        }
    }

    /// The profile reading this session's screen.
    pub fn profile(&self) -> Arc<Profile> {
        self.lock_watch().profile().clone()
    }

    /// Sets who is told of state changes (once; later calls are ignored).
    pub fn set_on_state_change(&self, f: impl Fn(StateChange) + Send + Sync + 'static) {
        let _ = self.on_state_change.set(Box::new(f));
    }

    /// Runs `f` on the watch and reports a change of the state it made.
    fn watch_changing(&self, f: impl FnOnce(&mut Watch)) {
        let change = {
            let mut w = self.lock_watch();
            let previous = w.state();
            f(&mut w);
            (w.state() != previous).then(|| {
                let r = w.report(tokio::time::Instant::now());
                StateChange {
                    state: r.state,
                    previous,
                    since: r.since,
                    rule: r.rule,
                }
            })
        };
        if let (Some(change), Some(tell)) = (change, self.on_state_change.get()) {
            tell(change);
        }
    }

    /// Looks at the screen now: records meaningful change and updates the state.
    fn observe_screen(&self) -> tokio::time::Instant {
        let now = tokio::time::Instant::now();
        let exited = self.output.exit().is_some();
        // The output's wall-clock time as an instant: when the screen last changed, at most.
        let output_at = self.output.last_output_at().map(|t| {
            let ago = (chrono::Utc::now() - t).to_std().unwrap_or_default();
            now.checked_sub(ago).unwrap_or(now)
        });
        self.with_screen(|s| {
            self.watch_changing(|w| w.observe_output(s.vt(), s.title(), exited, output_at, now))
        });
        now
    }

    /// Looks at the screen now and reports the state.
    pub fn state_report(&self) -> StateReport {
        let now = self.observe_screen();
        self.lock_watch().report(now)
    }

    /// When the session's watch started (its program's start, as the hub saw it).
    pub fn started_at(&self) -> tokio::time::Instant {
        self.lock_watch().created()
    }

    /// The monotonic time input was last written by someone using the session.
    pub fn last_input_instant(&self) -> Option<tokio::time::Instant> {
        self.lock_watch().last_input_at()
    }

    /// The monotonic time of the last meaningful activity.
    pub fn last_activity_instant(&self) -> tokio::time::Instant {
        self.lock_watch().last_activity_at()
    }

    /// The activity fingerprint of the screen now (after catching up).
    pub fn screen_fingerprint(&self) -> u64 {
        let profile = self.profile();
        self.with_screen(|s| crate::activity::fingerprint(s.vt(), &profile.masks))
    }

    /// Whether the program has enabled bracketed paste (DECSET 2004).
    pub fn bracketed_paste(&self) -> bool {
        self.with_screen(|s| s.vt().bracketed_paste())
    }

    /// Runs `f` on the screen after catching it up with all output so far.
    pub fn with_screen<T>(&self, f: impl FnOnce(&mut Screen) -> T) -> T {
        let mut screen = self.screen.lock().unwrap_or_else(|e| e.into_inner());
        let chunk = self.output.read(Some(screen.fed_to()), usize::MAX);
        screen.feed(chunk.start_offset, &chunk.bytes);
        f(&mut screen)
    }

    /// Runs one shell command for `actor` (checked by the guard first) and returns its output
    /// and exit code. Talks on one session queue behind each other; other readers are not
    /// disturbed.
    pub async fn talk(
        &self,
        actor: &crate::actor::Actor,
        command: &str,
        sentinel: Option<&str>,
        timeout: Duration,
    ) -> HubResult<TalkResult> {
        self.check_command(actor, command)?;
        if let Some(whole) = self.backend.talk(command, sentinel, timeout) {
            return whole.await;
        }
        let plan = talk::plan(command, sentinel).map_err(HubError::bad_request)?;
        let _turn = self.talk_lock.lock().await;
        let started = Instant::now();
        let mut scanner = talk::TalkScanner::new(&plan.sentinel);
        let mut cursor = OutputCursor::new(self.output.clone(), self.output.end_offset());
        let mut line = plan.line.clone().into_bytes();
        line.push(b'\r');
        self.send_unchecked(line).await?;

        let partial = |s: &talk::TalkScanner| input::plain_text(s.partial());
        let deadline = tokio::time::Instant::now() + timeout;
        let capture = loop {
            match tokio::time::timeout_at(deadline, cursor.next()).await {
                Err(_) => {
                    return Err(HubError::Timeout {
                        timeout_ms: timeout.as_millis() as u64,
                        output: partial(&scanner),
                    })
                }
                Ok(Some(CursorItem::Data {
                    bytes,
                    dropped_bytes,
                })) => {
                    if dropped_bytes > 0 {
                        scanner.mark_truncated();
                    }
                    if let Some(c) = scanner.feed(&bytes) {
                        break c;
                    }
                }
                Ok(Some(CursorItem::Exited(exit))) => {
                    return Err(self.exited_error(exit, partial(&scanner)));
                }
                Ok(None) => {
                    return Err(HubError::ReadFailed {
                        reason: "the session's output stream closed".into(),
                    })
                }
            }
        };
        Ok(TalkResult {
            output: input::plain_text(&capture.body),
            exit_code: capture.exit_code,
            sentinel: plan.sentinel,
            raw_output: String::from_utf8_lossy(&capture.raw).into_owned(),
            duration_ms: started.elapsed().as_millis() as u64,
            truncated: capture.truncated,
        })
    }
}

/// Keeps a session's interactive-viewer count up while it lives.
pub struct ViewerGuard(Arc<Session>);

impl Drop for ViewerGuard {
    fn drop(&mut self) {
        self.0
            .viewers
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Keeps the emulator close to the output so screen reads rarely have much to catch up on.
async fn follow_screen(session: std::sync::Weak<Session>, cancel: CancellationToken) {
    let Some((mut progress, mut inputs)) = session
        .upgrade()
        .map(|s| (s.output.watch_progress(), s.inputs.subscribe()))
    else {
        return;
    };
    // Catch up first: output that arrived before the subscription (a program's start-up
    // query, say) would otherwise wait for a change that may never come.
    loop {
        let began = tokio::time::Instant::now();
        let look_by = match session.upgrade() {
            Some(s) => {
                s.answer_queries().await;
                let now = s.observe_screen();
                let quiet = now + QUIET_LOOK_INTERVAL;
                s.lock_watch()
                    .next_due(now)
                    .map_or(quiet, |due| due.min(quiet))
            }
            None => return,
        };
        // Emulation costs ~30 ns a byte: during a flood, back off so it takes at most ~5% of
        // a core, which a busy agent's own program would otherwise lose on a small machine
        // (#17); reads still catch up exactly, from the ring.
        tokio::time::sleep(SCREEN_FOLLOW_INTERVAL.max(began.elapsed() * 20)).await;
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = progress.changed() => if changed.is_err() { return },
            // Input turns the state `working` before any output, and starts its hold.
            changed = inputs.changed() => if changed.is_err() { return },
            // A state can change with no output (a quiet screen settles into `idle` after the
            // profile's dwell): look again the moment it can, so the change is reported in
            // time, and not before.
            _ = tokio::time::sleep_until(look_by) => {}
        }
    }
}
