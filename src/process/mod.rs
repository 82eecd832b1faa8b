//! Stopping every process of a terminal, not just its leader. On Unix a terminal's programs
//! share the session id of the shell the PTY started (interactive shells put each job in its
//! own process group, so killing one group is not enough); on Linux they are found through
//! `/proc`. On Windows a terminal's programs are held in a job object made for its first
//! process ([`contain`]): whatever that process starts is in the job too, and ending the job
//! ends them all (Windows has no gentler signal for a console's programs than that).
//!
//! The platform's side is in `unix.rs` and `windows.rs`; the waiting and escalation here are
//! the same for both.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::term::TermSignal;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as os;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;

#[cfg(target_os = "linux")]
pub use os::group_processes;
pub use os::{contain, environ, kill_group, new_group, release, session_of, session_processes};

/// How long processes get to exit after the first signal before SIGKILL.
pub const KILL_GRACE_PERIOD: Duration = Duration::from_millis(1500);
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// `NAME=value` entries, each ended by a NUL byte; an entry without `=` or not UTF-8 is
/// skipped.
pub fn parse_environ(bytes: &[u8]) -> BTreeMap<String, String> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|entry| std::str::from_utf8(entry).ok()?.split_once('='))
        .filter(|(name, _)| !name.is_empty())
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

/// Sends `first` to every process of session `sid`, waits up to [`KILL_GRACE_PERIOD`], then
/// SIGKILLs the rest. Returns the pids still alive at the end (empty on success).
pub async fn terminate_session(sid: u32, first: TermSignal) -> Vec<u32> {
    off_worker(move || os::signal_all(sid, first)).await;
    if wait_until_gone(sid, KILL_GRACE_PERIOD).await {
        return Vec::new();
    }
    off_worker(move || os::signal_all(sid, TermSignal::Kill)).await;
    wait_until_gone(sid, KILL_GRACE_PERIOD).await;
    live_session_processes(sid).await
}

/// Processes of a terminal that are still alive after SIGKILL (what [`none_left`] reports).
#[derive(Debug, thiserror::Error)]
#[error("processes still alive after SIGKILL: {}", pid_list(.left))]
pub struct ProcessError {
    /// Their pids.
    pub left: Vec<u32>,
}

fn pid_list(pids: &[u32]) -> String {
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    pids.join(", ")
}

/// `Ok` when `left` (what [`terminate_session`] returned) is empty, else an error naming them.
pub fn none_left(left: &[u32]) -> Result<(), ProcessError> {
    if left.is_empty() {
        return Ok(());
    }
    Err(ProcessError {
        left: left.to_vec(),
    })
}

/// [`session_processes`] from an async task: the `/proc` scan runs on a blocking thread, not
/// on the runtime's workers.
pub async fn live_session_processes(sid: u32) -> Vec<u32> {
    off_worker(move || session_processes(sid)).await
}

/// Runs a blocking scan on the blocking pool (inline if the pool is gone, at shutdown).
async fn off_worker<T: Send + 'static>(f: impl FnOnce() -> T + Send + Clone + 'static) -> T {
    match tokio::task::spawn_blocking(f.clone()).await {
        Ok(value) => value,
        Err(_) => f(),
    }
}

async fn wait_until_gone(sid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if live_session_processes(sid).await.is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_is_read_entry_by_entry() {
        let bytes = b"HOME=/x\0CLAUDE_CONFIG_DIR=/c=d\0junk\0=v\0\xff=1\0EMPTY=\0";
        let env = parse_environ(bytes);
        let want = [("CLAUDE_CONFIG_DIR", "/c=d"), ("EMPTY", ""), ("HOME", "/x")];
        let want: BTreeMap<String, String> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(env, want);
        assert!(parse_environ(b"").is_empty());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_process_environment_is_its_own() {
        let env = environ(std::process::id()).expect("this process's environment");
        assert_eq!(env.get("PATH"), std::env::var("PATH").ok().as_ref());
        assert_eq!(environ(u32::MAX), None);
    }
}
