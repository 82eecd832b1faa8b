//! Parts 4 and 5, the fleet at scale: N agents started concurrently until all are ready, then
//! stopped; and the hub's memory and CPU with N attached idle agents (with the memory of the
//! two parts every session has, measured alone).

use std::time::{Duration, Instant};

use agent_hub::agents::AgentStatus;
use agent_hub::backend::TermSize;
use agent_hub::output::Output;
use agent_hub::screen::{Screen, SCREEN_SCROLLBACK_ROWS};
use anyhow::Result;

use super::common::hub::{agent_ops, HubUnderTest, OpResult};
use super::common::ingest::LINE_CHARS;
use super::common::procfs::{clock_ticks_per_second, cpu_secs, rss_kb, trim_heap};
use super::common::report::{opt_secs, table, verdict};
use super::common::stats::stats;
use super::docker::dockerd_pid;
use super::{scale_ids, Plan, SummaryRow};

/// Idle time before measuring memory, so start-up work has settled.
const SETTLE: Duration = Duration::from_secs(2);
/// Hub memory per idle agent, beyond the scrollback bytes it holds.
const RSS_PER_AGENT_TARGET_KB: f64 = 256.0;
const IDLE_CPU_TARGET_PCT: f64 = 1.0;
/// Lines each agent prints before the busy reading, and the target per busy agent (#12 item 7).
const BUSY_LINES: u32 = 5000;
const RSS_PER_BUSY_AGENT_TARGET_KB: f64 = 1024.0;

pub struct OpsSummary {
    requested: usize,
    ok: Vec<Duration>,
    pub failures: Vec<String>,
    wall: Duration,
}

fn summarize(results: Vec<OpResult>, wall: Duration, expect_status: AgentStatus) -> OpsSummary {
    let mut s = OpsSummary {
        requested: results.len(),
        ok: Vec::new(),
        failures: Vec::new(),
        wall,
    };
    for r in results {
        match r.outcome {
            Ok(agent) if agent.status == expect_status => s.ok.push(r.took),
            Ok(agent) => s
                .failures
                .push(format!("{}: status {:?}", r.id, agent.status)),
            Err(e) => s.failures.push(format!("{}: {e:#}", r.id)),
        }
    }
    s
}

pub struct StartStop {
    start: OpsSummary,
    stop: OpsSummary,
}

pub async fn measure_start_stop(hut: &HubUnderTest, n: usize) -> StartStop {
    let ids = scale_ids(n);
    let (results, wall) = agent_ops(&hut.client, &ids, "start").await;
    let start = summarize(results, wall, AgentStatus::Running);
    let (results, wall) = agent_ops(&hut.client, &ids, "stop").await;
    StartStop {
        start,
        stop: summarize(results, wall, AgentStatus::Stopped),
    }
}

fn report_failures(what: &str, failures: &[String]) {
    if failures.is_empty() {
        return;
    }
    println!("\n{} {what} failed; the first ones:", failures.len());
    for f in failures.iter().take(5) {
        println!("- {f}");
    }
}

pub fn report_start_stop(r: &StartStop, summary: &mut Vec<SummaryRow>) {
    table(
        &format!(
            "4. {} agents started concurrently (POST start in parallel), then stopped",
            r.start.requested
        ),
        &[
            "operation",
            "ok / requested",
            "wall until the last reply (s)",
            "per agent p50 (s)",
            "p99 (s)",
            "max (s)",
        ],
    );
    for (name, ops) in [("start -> ready", &r.start), ("stop (+ remove)", &r.stop)] {
        let s = stats(&ops.ok);
        println!(
            "| {name} | {} / {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            ops.ok.len(),
            ops.requested,
            ops.wall.as_secs_f64(),
            s.p50_ms / 1e3,
            s.p99_ms / 1e3,
            s.max_ms / 1e3
        );
        let all_ok = ops.ok.len() == ops.requested;
        summary.push(SummaryRow {
            name: format!(
                "{} agents concurrently, {name}: all done in {:.2} s",
                ops.requested,
                ops.wall.as_secs_f64()
            ),
            n: ops.ok.len().to_string(),
            p50: format!("{:.2} s", s.p50_ms / 1e3),
            p99: format!("{:.2} s", s.p99_ms / 1e3),
            target: "none (all must succeed)".into(),
            result: verdict(all_ok).into(),
        });
    }
    report_failures("starts", &r.start.failures);
    report_failures("stops", &r.stop.failures);
}

pub struct IdleResults {
    start: OpsSummary,
    wave: usize,
    rss_before: (u64, u64),
    rss_after: (u64, u64),
    rss_trimmed: Option<(u64, u64)>,
    scrollback_capacity: usize,
    /// Output bytes held in the running agents' scrollback rings, in total.
    ring_bytes: u64,
    cpu_secs: f64,
    wall_secs: f64,
    dockerd_cpu_secs: Option<f64>,
    /// After every agent printed [`BUSY_LINES`] lines and its screen was read: RSS and RssAnon,
    /// and the bytes then held in the rings.
    rss_busy: (u64, u64),
    ring_busy: u64,
    stop: OpsSummary,
    parts: MemoryParts,
}

/// Anonymous memory per session of two hub parts every session has, built here alone.
struct MemoryParts {
    /// `Output::new(scrollback)` holding the prompt: ring reserve and broadcast channel.
    output_kb: f64,
    /// `Screen::new(120x30)` fed the prompt: the vt100 emulator.
    screen_kb: f64,
    /// The same after enough output to fill its row scrollback (an active agent).
    screen_full_kb: f64,
}

/// RssAnon growth per item while `n` items built by `make` are alive.
fn anon_kb_per<T>(n: usize, make: impl Fn() -> T) -> f64 {
    trim_heap();
    let before = rss_kb().1;
    let items: Vec<T> = (0..n).map(|_| make()).collect();
    let after = rss_kb().1;
    drop(items);
    trim_heap();
    per_agent_kb(before, after, n)
}

fn bench_screen(fed: &[u8]) -> Screen {
    let mut screen = Screen::new(TermSize {
        cols: 120,
        rows: 30,
    });
    screen.feed(0, fed);
    screen
}

fn memory_parts(n: usize, capacity: usize) -> MemoryParts {
    let prompt = b"$ \x1b[1;3H";
    let lines: Vec<u8> = (0..SCREEN_SCROLLBACK_ROWS + 100)
        .flat_map(|i| format!("{i:09} {}\r\n", "x".repeat(LINE_CHARS - 10)).into_bytes())
        .collect();
    MemoryParts {
        output_kb: anon_kb_per(n, || {
            let output = Output::new(capacity);
            output.push(prompt);
            output
        }),
        screen_kb: anon_kb_per(n, || bench_screen(prompt)),
        screen_full_kb: anon_kb_per(10, || bench_screen(&lines)),
    }
}

/// Sum over the running sessions of the bytes their rings hold.
async fn ring_bytes(hut: &HubUnderTest, capacity: usize) -> Result<u64> {
    let list = hut.client.list().await?;
    Ok(list
        .sessions
        .iter()
        .filter(|s| s.alive)
        .map(|s| s.output_offset.min(capacity as u64))
        .sum())
}

pub async fn measure_idle(hut: &HubUnderTest, plan: &Plan) -> Result<IdleResults> {
    let ids = scale_ids(plan.idle_agents);
    tokio::time::sleep(SETTLE).await;
    trim_heap();
    let rss_before = rss_kb();
    let start = start_in_waves(hut, &ids, plan.idle_wave).await;
    tokio::time::sleep(SETTLE).await;
    let rss_after = rss_kb();
    let capacity = hut.hub.config().scrollback_bytes;
    let ring = ring_bytes(hut, capacity).await?;
    let dockerd = dockerd_pid();
    let (cpu0, dockerd0) = (
        cpu_secs("self").unwrap_or(f64::NAN),
        dockerd.as_deref().and_then(cpu_secs),
    );
    let t0 = Instant::now();
    tokio::time::sleep(plan.idle_window).await;
    let (cpu1, dockerd1) = (
        cpu_secs("self").unwrap_or(f64::NAN),
        dockerd.as_deref().and_then(cpu_secs),
    );
    let wall_secs = t0.elapsed().as_secs_f64();
    let rss_trimmed = trim_heap().then(rss_kb);
    make_busy(hut, &ids).await?;
    tokio::time::sleep(SETTLE).await;
    let rss_busy = rss_kb();
    let ring_busy = ring_bytes(hut, capacity).await?;
    let (results, wall) = agent_ops(&hut.client, &ids, "stop").await;
    Ok(IdleResults {
        start,
        wave: plan.idle_wave,
        rss_before,
        rss_after,
        rss_trimmed,
        scrollback_capacity: capacity,
        ring_bytes: ring,
        cpu_secs: cpu1 - cpu0,
        wall_secs,
        dockerd_cpu_secs: dockerd1.zip(dockerd0).map(|(a, b)| a - b),
        rss_busy,
        ring_busy,
        stop: summarize(results, wall, AgentStatus::Stopped),
        parts: memory_parts(plan.idle_agents.max(1), capacity),
    })
}

/// Has every agent print [`BUSY_LINES`] lines (a talk each, so the output is all in), then
/// reads each screen once, as a viewer or a policy would.
async fn make_busy(hut: &HubUnderTest, ids: &[String]) -> Result<()> {
    let command = format!("seq 1 {BUSY_LINES}");
    for id in ids {
        let Some(sid) = hut.client.agent(id).await?.agent.session_id else {
            continue;
        };
        hut.client.talk(&sid, &command, Some(60_000)).await?;
        let _ = hut.client.term_read(&sid, &Default::default()).await?;
    }
    Ok(())
}

/// Starts `ids`, `wave` at a time; one summary over all of them.
pub async fn start_in_waves(hut: &HubUnderTest, ids: &[String], wave: usize) -> OpsSummary {
    let begin = Instant::now();
    let mut all = Vec::new();
    for chunk in ids.chunks(wave) {
        all.extend(agent_ops(&hut.client, chunk, "start").await.0);
    }
    summarize(all, begin.elapsed(), AgentStatus::Running)
}

fn per_agent_kb(before: u64, after: u64, n: usize) -> f64 {
    (after as f64 - before as f64) / n.max(1) as f64
}

pub fn report_idle(r: &IdleResults, summary: &mut Vec<SummaryRow>) {
    let n = r.start.ok.len();
    let requested = r.start.requested;
    let title = format!(
        "5. {n} attached idle agents (of {requested} started, {} at a time)",
        r.wave
    );
    let ring_per_agent = r.ring_bytes as f64 / n.max(1) as f64;
    let ring_kb = ring_per_agent / 1024.0;
    let rss = per_agent_kb(r.rss_before.0, r.rss_after.0, n);
    let anon = per_agent_kb(r.rss_before.1, r.rss_after.1, n);
    let beyond = rss - ring_kb;
    let cpu_pct = r.cpu_secs / r.wall_secs * 100.0;
    table(&title, &["quantity", "value"]);
    println!(
        "| start of all {requested} ({} at a time) | {} ok in {:.1} s |",
        r.wave,
        n,
        r.start.wall.as_secs_f64()
    );
    println!(
        "| hub process VmRSS before -> with agents (kB) | {} -> {} (RssAnon {} -> {}) |",
        r.rss_before.0, r.rss_after.0, r.rss_before.1, r.rss_after.1
    );
    if let Some((vm, anon)) = r.rss_trimmed {
        println!(
            "| VmRSS after malloc_trim(0) at the end of the idle window (kB) | {vm} (RssAnon {anon}) |"
        );
    }
    println!("| RSS per agent (kB) | {rss:.1} (RssAnon {anon:.1}) |");
    println!(
        "| scrollback per agent: capacity reserved (virtual) / bytes held | {} kB / {ring_per_agent:.0} bytes |",
        r.scrollback_capacity / 1024
    );
    println!("| RSS per agent beyond the scrollback bytes it holds (kB) | {beyond:.1} |");
    println!(
        "| of which, measured alone: `Output` (ring reserve + 1024-slot broadcast) / `Screen` \
         (vt100 120x30) / the rest (exec connection, tasks, session) (kB anon) | {:.1} / {:.1} / \
         {:.1} |",
        r.parts.output_kb,
        r.parts.screen_kb,
        anon - r.parts.output_kb - r.parts.screen_kb
    );
    println!(
        "| not in the idle figure: a `Screen` after {} lines of output (its {}-row scrollback \
         full), as an active agent has (kB anon) | {:.0} |",
        SCREEN_SCROLLBACK_ROWS + 100,
        SCREEN_SCROLLBACK_ROWS,
        r.parts.screen_full_kb
    );
    println!(
        "| hub process CPU over {:.1} s idle | {:.2} CPU-s = {cpu_pct:.2} % of one core (tick {:.0} ms) |",
        r.wall_secs,
        r.cpu_secs,
        1e3 / clock_ticks_per_second()
    );
    println!(
        "| dockerd CPU over the same window (not the hub) | {} CPU-s |",
        opt_secs(r.dockerd_cpu_secs)
    );
    println!(
        "| stop of all (concurrent) | {} ok in {:.1} s |",
        r.stop.ok.len(),
        r.stop.wall.as_secs_f64()
    );
    report_failures("starts", &r.start.failures);
    report_failures("stops", &r.stop.failures);
    let rss_target = format!("<= {RSS_PER_AGENT_TARGET_KB:.0} kB per agent beyond scrollback");
    summary.push(SummaryRow::value(
        &format!("{n} idle agents: hub RSS per agent beyond its scrollback"),
        n,
        format!("{beyond:.1} kB"),
        &rss_target,
        verdict(n > 0 && beyond <= RSS_PER_AGENT_TARGET_KB),
    ));
    let busy = per_agent_kb(r.rss_before.0, r.rss_busy.0, n)
        - r.ring_busy as f64 / 1024.0 / n.max(1) as f64;
    println!(
        "| after each printed {BUSY_LINES} lines: VmRSS (kB), RSS per agent beyond the ring bytes it holds (kB) | {} (RssAnon {}), {busy:.1} |",
        r.rss_busy.0, r.rss_busy.1
    );
    summary.push(SummaryRow::value(
        &format!("{n} busy agents (each printed {BUSY_LINES} lines): hub RSS per agent beyond its byte ring"),
        n,
        format!("{busy:.1} kB"),
        &format!("<= {RSS_PER_BUSY_AGENT_TARGET_KB:.0} kB"),
        verdict(n > 0 && busy <= RSS_PER_BUSY_AGENT_TARGET_KB),
    ));
    summary.push(SummaryRow::value(
        &format!("{n} idle agents: hub CPU over {:.0} s", r.wall_secs),
        n,
        format!("{cpu_pct:.2} %"),
        &format!("< {IDLE_CPU_TARGET_PCT} %"),
        verdict(n > 0 && cpu_pct < IDLE_CPU_TARGET_PCT),
    ));
}
