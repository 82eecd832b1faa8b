//! The backend of a session whose program is gone (a host PTY that ended with a previous run
//! of the hub): nothing to write to, resize or stop. Its output holds what was saved, if any.

use futures_util::future::BoxFuture;

use super::{Backend, BackendError, TermSize};
use crate::term::TermSignal;

pub struct ExitedBackend;

impl Backend for ExitedBackend {
    fn write(&self, _bytes: Vec<u8>) -> BoxFuture<'_, crate::error::HubResult<()>> {
        Box::pin(async {
            Err(crate::error::HubError::WriteFailed {
                reason: "the session has ended".into(),
            })
        })
    }

    fn resize(&self, _size: TermSize) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Err(BackendError::Ended) })
    }

    fn terminate(&self, _first: TermSignal) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }

    fn pid(&self) -> Option<u32> {
        None
    }
}
