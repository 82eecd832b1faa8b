//! The producer's own cost: how long a program that prints a lot (`seq 1 2000000`, 14.9 MB
//! on a terminal) takes with no hub watching and with the hub attached and one viewer, and
//! what the hub spends per MB. The program times itself (`date +%s%N` around `seq`) and writes
//! the milliseconds to a file, so the clock is the producer's, not the bench's.

use super::procfs::CpuTimes;
use super::report::{table, verdict};
use super::stats::median;

/// Lines the producer prints.
pub const SEQ_LINES: u32 = 2_000_000;
/// Targets (#17): the producer at most this much slower with the hub attached, and the hub's
/// CPU per MB ingested.
pub const SLOWDOWN_TARGET: f64 = 1.3;
pub const CPU_PER_MB_TARGET: f64 = 0.05;

/// The producer: times `seq`, writes the milliseconds to `ms_file`, then runs `after`.
pub fn script(ms_file: &str, after: &str) -> String {
    format!(
        "s=$(date +%s%N); seq 1 {SEQ_LINES}; e=$(date +%s%N); \
         echo $(( (e - s) / 1000000 )) > {ms_file}; {after}"
    )
}

/// One producer run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProducerRun {
    /// The producer's own run time.
    pub ms: f64,
    /// With the hub: bytes the session ingested, and CPU seconds over the run of the hub (every
    /// thread of the process but the main one) and of the bench client (the viewer, on the
    /// main thread).
    pub bytes: u64,
    pub hub_cpu: f64,
    pub client_cpu: f64,
}

impl ProducerRun {
    pub fn hub_cpu_per_mb(&self) -> f64 {
        self.hub_cpu / (self.bytes as f64 / 1e6).max(1e-9)
    }
}

/// Measures a hub run: call with the CPU reading taken before it.
pub fn hub_run(ms: f64, bytes: u64, before: CpuTimes) -> ProducerRun {
    let used = CpuTimes::now().since(before);
    ProducerRun {
        ms,
        bytes,
        hub_cpu: used.process - used.main,
        client_cpu: used.main,
    }
}

/// Summary rows: (measurement, n, value, target, result) for one place (`container agent`,
/// `host PTY session`).
pub fn summary(place: &str, bare: &[ProducerRun], hub: &[ProducerRun]) -> Vec<[String; 5]> {
    let ms = |runs: &[ProducerRun]| median(&runs.iter().map(|r| r.ms).collect::<Vec<_>>());
    let (bare_ms, hub_ms) = (ms(bare), ms(hub));
    let slowdown = hub_ms / bare_ms.max(1e-9);
    let per_mb = median(
        &hub.iter()
            .map(ProducerRun::hub_cpu_per_mb)
            .collect::<Vec<_>>(),
    );
    let client = median(&hub.iter().map(|r| r.client_cpu).collect::<Vec<_>>());
    let mb = median(&hub.iter().map(|r| r.bytes as f64 / 1e6).collect::<Vec<_>>());
    vec![
        [
            format!("{place}: `seq 1 {SEQ_LINES}` run time, no hub"),
            bare.len().to_string(),
            format!("{bare_ms:.0} ms"),
            String::new(),
            String::new(),
        ],
        [
            format!("{place}: same, hub attached with one WebSocket viewer"),
            hub.len().to_string(),
            format!("{hub_ms:.0} ms ({slowdown:.2}x)"),
            format!("<= {SLOWDOWN_TARGET}x the no-hub time"),
            verdict(slowdown <= SLOWDOWN_TARGET).to_string(),
        ],
        [
            format!("{place}: hub CPU per MB ingested"),
            hub.len().to_string(),
            format!("{per_mb:.3} CPU-s/MB ({mb:.1} MB; the viewer client {client:.2} CPU-s)"),
            format!("<= {CPU_PER_MB_TARGET} CPU-s/MB"),
            verdict(per_mb <= CPU_PER_MB_TARGET).to_string(),
        ],
    ]
}

/// Prints summary rows as their own table.
pub fn print(rows: &[[String; 5]]) {
    table(
        "The producer's own cost",
        &["measurement", "n", "value", "target", "result"],
    );
    for row in rows {
        println!("| {} |", row.join(" | "));
    }
}
