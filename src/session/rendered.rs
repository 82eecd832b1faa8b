//! The session's rendered screen: the emulator caught up with the output on every read,
//! rendered reads (from the backend when it renders whole), resizes (with tmux's own repaint
//! where tmux is the authority), and answers to the program's terminal queries.

use std::time::Duration;

use super::Session;
use crate::backend::TermSize;
use crate::error::{HubError, HubResult};
use crate::screen::Screen;

impl Session {
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
            .map_err(|e| HubError::WriteFailed {
                reason: e.to_string(),
            })?;
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
    pub(super) async fn answer_queries(&self) {
        let replies = self.with_screen(|s| s.take_replies());
        let hub_answers = self.spec.backend == crate::session::SessionBackend::Pty
            && self.viewers.load(std::sync::atomic::Ordering::SeqCst) == 0;
        if hub_answers {
            for reply in replies {
                let _ = self.backend.write(reply).await;
            }
        }
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
}
