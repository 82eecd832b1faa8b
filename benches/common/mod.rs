//! Helpers both benchmark binaries use: percentiles, table cells, tokens to wait for in a
//! terminal's output, and a few /proc and command readings. Each binary uses a subset.
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static TOKEN_SEQ: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub n: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Samples of at least [`SLOW_MS`] (a 40 ms delayed ACK shows up here).
    pub slow: usize,
}

pub const SLOW_MS: f64 = 30.0;

/// Nearest-rank percentiles of `samples`.
pub fn stats(samples: &[Duration]) -> Stats {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        let rank = ((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len().max(1));
        ms.get(rank - 1).copied().unwrap_or(f64::NAN)
    };
    Stats {
        n: ms.len(),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        min_ms: ms.first().copied().unwrap_or(f64::NAN),
        max_ms: ms.last().copied().unwrap_or(f64::NAN),
        slow: ms.iter().filter(|&&m| m >= SLOW_MS).count(),
    }
}

pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub fn verdict(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "FAIL"
    }
}

pub fn join<T>(items: impl IntoIterator<Item = T>, f: impl Fn(T) -> String) -> String {
    items.into_iter().map(f).collect::<Vec<_>>().join(", ")
}

/// A token that never occurs in the output before it is typed.
pub fn next_token() -> String {
    format!("ah{:07}q", TOKEN_SEQ.fetch_add(1, Ordering::Relaxed))
}

pub fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// Where to resume a search after `len` bytes were searched without a match.
pub fn resume_at(len: usize, needle: &[u8], from: usize) -> usize {
    (len + 1).saturating_sub(needle.len()).max(from)
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
