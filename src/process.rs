//! Stopping every process of a terminal, not just its leader. A terminal's programs share the
//! session id of the shell the PTY started (interactive shells put each job in its own process
//! group, so killing one group is not enough). On Linux they are found through `/proc`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::term::TermSignal;

/// How long processes get to exit after the first signal before SIGKILL.
pub const KILL_GRACE_PERIOD: Duration = Duration::from_millis(1500);
const POLL_INTERVAL: Duration = Duration::from_millis(20);

fn nix_signal(sig: TermSignal) -> Signal {
    match sig {
        TermSignal::Term => Signal::SIGTERM,
        TermSignal::Kill => Signal::SIGKILL,
        TermSignal::Hup => Signal::SIGHUP,
    }
}

/// Live (non-zombie) processes whose session id is `sid`, the leader included.
#[cfg(target_os = "linux")]
pub fn session_processes(sid: u32) -> Vec<u32> {
    processes_where(3, sid)
}

/// Live (non-zombie) processes in process group `pgid`.
#[cfg(target_os = "linux")]
pub fn group_processes(pgid: u32) -> Vec<u32> {
    processes_where(2, pgid)
}

/// Live processes whose `/proc/PID/stat` field `index` (counted after the command name:
/// 0 state, 1 ppid, 2 pgrp, 3 session) equals `value`.
#[cfg(target_os = "linux")]
fn processes_where(index: usize, value: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let value = value.to_string();
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // Fields after the parenthesised command name (which may contain spaces).
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.first() != Some(&"Z") && fields.get(index) == Some(&value.as_str())
        })
        .collect()
}

/// The session id of process `pid` (`None`: no such process, or no `/proc`).
pub fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(3)?.parse().ok()
}

/// The environment process `pid` was started with (`/proc/PID/environ`); `None`: no such
/// process, or not one the hub may read.
pub fn environ(pid: u32) -> Option<BTreeMap<String, String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(parse_environ(&bytes))
}

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

/// Without `/proc`, the leader's process group is the best available approximation.
#[cfg(not(target_os = "linux"))]
pub fn session_processes(sid: u32) -> Vec<u32> {
    if kill(Pid::from_raw(sid as i32), None).is_ok() {
        vec![sid]
    } else {
        Vec::new()
    }
}

fn signal_all(sid: u32, sig: Signal) {
    for pid in session_processes(sid) {
        let _ = kill(Pid::from_raw(pid as i32), sig);
    }
    // Also the group, for platforms where the scan above sees only the leader.
    let _ = nix::sys::signal::killpg(Pid::from_raw(sid as i32), sig);
}

/// Sends `first` to every process of session `sid`, waits up to [`KILL_GRACE_PERIOD`], then
/// SIGKILLs the rest. Returns the pids still alive at the end (empty on success).
pub async fn terminate_session(sid: u32, first: TermSignal) -> Vec<u32> {
    let first = nix_signal(first);
    off_worker(move || signal_all(sid, first)).await;
    if wait_until_gone(sid, KILL_GRACE_PERIOD).await {
        return Vec::new();
    }
    off_worker(move || signal_all(sid, Signal::SIGKILL)).await;
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
    fn a_process_environment_is_its_own() {
        let env = environ(std::process::id()).expect("this process's environment");
        assert_eq!(env.get("PATH"), std::env::var("PATH").ok().as_ref());
        assert_eq!(environ(u32::MAX), None);
    }
}
