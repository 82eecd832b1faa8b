//! Percentiles of latency samples and a few numeric helpers for the tables.

use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub n: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
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
        p95_ms: pct(0.95),
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

pub fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

/// The order in which interleaved rows take their samples: `warmup + samples` per row, in
/// blocks of `block` whose row order rotates every round, so drifting machine load (and
/// whatever the previous block left warm or cold) hits every row alike. Yields row indices.
pub fn interleaved(rows: usize, (warmup, samples, block): (usize, usize, usize)) -> Vec<usize> {
    let mut order = Vec::with_capacity(rows * (warmup + samples));
    let mut left = warmup + samples;
    let mut round = 0;
    while left > 0 {
        let n = left.min(block.max(1));
        for k in 0..rows {
            let i = (round + k) % rows;
            order.extend(std::iter::repeat_n(i, n));
        }
        round += 1;
        left -= n;
    }
    order
}

/// Each row's samples with its first `warmup` dropped.
pub fn without_warmup(taken: Vec<Vec<Duration>>, warmup: usize) -> Vec<Vec<Duration>> {
    taken
        .into_iter()
        .map(|mut s| s.split_off(warmup.min(s.len())))
        .collect()
}
