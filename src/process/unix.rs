//! The Unix side of [`super`]: session ids and process groups, signals through `nix`.

use std::collections::BTreeMap;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::parse_environ;
use crate::term::TermSignal;

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

/// Without `/proc`, the leader's process group is the best available approximation.
#[cfg(not(target_os = "linux"))]
pub fn session_processes(sid: u32) -> Vec<u32> {
    if kill(Pid::from_raw(sid as i32), None).is_ok() {
        vec![sid]
    } else {
        Vec::new()
    }
}

/// Sends `sig` to every process of session `sid` and to its group.
pub(super) fn signal_all(sid: u32, sig: TermSignal) {
    let sig = nix_signal(sig);
    for pid in session_processes(sid) {
        let _ = kill(Pid::from_raw(pid as i32), sig);
    }
    // Also the group, for platforms where the scan above sees only the leader.
    let _ = nix::sys::signal::killpg(Pid::from_raw(sid as i32), sig);
}

/// Starts `cmd` in a process group of its own (its id is the child's pid), so
/// [`kill_group`] reaches whatever it starts.
pub fn new_group(cmd: &mut tokio::process::Command) {
    cmd.process_group(0);
}

/// Nothing to do on Unix: the terminal's session or group holds its processes.
pub fn contain(_pid: u32) -> std::io::Result<()> {
    Ok(())
}

/// Nothing to do on Unix (see [`contain`]).
pub fn release(_pid: u32) {}

/// SIGKILLs the process group `pgid` (one [`new_group`] made).
pub fn kill_group(pgid: u32) {
    let _ = nix::sys::signal::killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
}
