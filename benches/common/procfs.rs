//! Readings of this machine and process: CPU seconds and memory from Linux `/proc`, the
//! tokio runtime whose threads are counted as the hub's, and the environment line's facts.

use std::path::Path;
use std::process::Command;

/// Name of the tokio runtime's threads (the hub's async tasks), for CPU accounting.
pub const WORKER_THREAD_NAME: &str = "hub-rt";

/// The multi-threaded runtime the hub and the bench client run on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name(WORKER_THREAD_NAME)
        .enable_all()
        .build()
}

pub fn clock_ticks_per_second() -> f64 {
    static TICK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICK.get_or_init(|| {
        command_output("getconf", &["CLK_TCK"])
            .parse()
            .unwrap_or(100.0)
    })
}

pub fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// utime, stime, cutime and cstime of `/proc/{task}/stat`, in seconds.
fn stat_times(task: &str) -> Option<[f64; 4]> {
    let text = std::fs::read_to_string(format!("/proc/{task}/stat")).ok()?;
    // Fields after the parenthesised command name, from field 3 (state) on.
    let rest = &text[text.rfind(')')? + 2..];
    let tick = clock_ticks_per_second();
    let fields: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse::<f64>().unwrap_or(0.0) / tick)
        .collect();
    fields.try_into().ok()
}

/// utime + stime of a process (`self`, a pid, or `self/task/<tid>`), in seconds.
pub fn cpu_secs(task: &str) -> Option<f64> {
    stat_times(task).map(|f| f[0] + f[1])
}

/// CPU seconds used so far by this process's threads and its waited-for children (zeros where
/// they cannot be read). Threads that ended still count in `process`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTimes {
    /// All threads of this process.
    pub process: f64,
    /// The main thread: the bench's client side.
    pub main: f64,
    /// The tokio worker threads: the hub's async tasks (HTTP, WebSocket, screen follower).
    pub workers: f64,
    /// Waited-for child processes.
    pub children: f64,
}

impl CpuTimes {
    pub fn now() -> Self {
        let own = stat_times("self").unwrap_or_default();
        let main = cpu_secs(&format!("self/task/{}", std::process::id())).unwrap_or(0.0);
        let comm = |task: &Path| std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        let workers = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|t| comm(&t.path()).starts_with(WORKER_THREAD_NAME))
            .filter_map(|t| cpu_secs(&format!("self/task/{}", t.file_name().to_string_lossy())))
            .sum();
        CpuTimes {
            process: own[0] + own[1],
            main,
            workers,
            children: own[2] + own[3],
        }
    }

    pub fn since(self, before: CpuTimes) -> CpuTimes {
        CpuTimes {
            process: self.process - before.process,
            main: self.main - before.main,
            workers: self.workers - before.workers,
            children: self.children - before.children,
        }
    }
}

/// `VmRSS` and `RssAnon` of this process, in kB.
pub fn rss_kb() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("RssAnon:"))
}

/// Returns freed heap memory to the kernel (glibc), so RSS shows live memory only.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim_heap() -> bool {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::os::raw::c_int;
    }
    // SAFETY: malloc_trim only releases free memory of glibc's allocator.
    unsafe { malloc_trim(0) };
    true
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim_heap() -> bool {
    false
}

pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

pub fn utc_now() -> String {
    chrono::Utc::now().format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The header's command line: `cargo bench --bench NAME`, with the options given after `--`.
pub fn bench_command(name: &str, options: &[String]) -> String {
    let tail = if options.is_empty() {
        String::new()
    } else {
        format!(" -- {}", options.join(" "))
    };
    format!("cargo bench --bench {name}{tail}")
}

/// Kills the tmux server `tmux -L socket` and removes its socket file (tmux leaves it behind).
pub fn kill_tmux_server(socket: &str) {
    let _ = Command::new("tmux")
        .args(["-L", socket, "kill-server"])
        .env_remove("TMUX")
        .output();
    if let Some(path) = tmux_socket_path(socket) {
        let _ = std::fs::remove_file(path);
    }
}

/// Where `tmux -L name` puts its socket: `$TMUX_TMPDIR` (or /tmp), `tmux-<uid>/name`.
fn tmux_socket_path(name: &str) -> Option<std::path::PathBuf> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .to_string();
    let dir = std::env::var_os("TMUX_TMPDIR").unwrap_or_else(|| "/tmp".into());
    Some(
        std::path::PathBuf::from(dir)
            .join(format!("tmux-{uid}"))
            .join(name),
    )
}
