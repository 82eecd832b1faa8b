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
use super::raw_start::{measure_raw_start, RawStart};
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
    raw: RawStart,
    start: OpsSummary,
    stop: OpsSummary,
    /// dockerd's CPU seconds during the raw baseline and during the hub's starts.
    dockerd_cpu_secs: (Option<f64>, Option<f64>),
}

/// Fleet start targets (#30), against the raw baseline of the same run.
const START_WALL_RATIO_TARGET: f64 = 1.3;
const FIRST_READY_TARGET: Duration = Duration::from_secs(3);
const P50_SHARE_TARGET: f64 = 0.5;
const STOP_WALL_TARGET: Duration = Duration::from_secs(5);

/// dockerd's CPU seconds while `work` runs.
async fn with_dockerd_cpu<T>(work: impl std::future::Future<Output = T>) -> (T, Option<f64>) {
    let dockerd = dockerd_pid();
    let before = dockerd.as_deref().and_then(cpu_secs);
    let out = work.await;
    let after = dockerd.as_deref().and_then(cpu_secs);
    (out, after.zip(before).map(|(a, b)| a - b))
}

/// The raw Docker baseline, then `n` agents started at once through the hub and stopped.
pub async fn measure_start_stop(
    hut: &HubUnderTest,
    hub_id: &str,
    image: &str,
    n: usize,
) -> StartStop {
    let (raw, raw_cpu) = with_dockerd_cpu(measure_raw_start(hub_id, image, n)).await;
    let ids = scale_ids(n);
    let ((results, wall), hub_cpu) = with_dockerd_cpu(agent_ops(&hut.client, &ids, "start")).await;
    let start = summarize(results, wall, AgentStatus::Running);
    let (results, wall) = agent_ops(&hut.client, &ids, "stop").await;
    StartStop {
        raw,
        start,
        stop: summarize(results, wall, AgentStatus::Stopped),
        dockerd_cpu_secs: (raw_cpu, hub_cpu),
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
    }
    report_fleet_start(r, summary);
    report_failures("raw baseline starts", &r.raw.failures);
    report_failures("starts", &r.start.failures);
    report_failures("stops", &r.stop.failures);
}

/// The fleet start against its raw baseline (#30): the table and the summary's verdicts.
fn report_fleet_start(r: &StartStop, summary: &mut Vec<SummaryRow>) {
    let n = r.start.requested;
    let raw = stats(&r.raw.ready);
    let hub = stats(&r.start.ok);
    let raw_wall = r.raw.wall.as_secs_f64();
    let hub_wall = r.start.wall.as_secs_f64();
    let ratio = hub_wall / raw_wall;
    let first = hub.min_ms / 1e3;
    let share = hub.p50_ms / 1e3 / hub_wall;
    let stop_wall = r.stop.wall.as_secs_f64();
    table(
        &format!(
            "4. fleet start (#30): {n} agents at once, the hub against raw Docker in the same run"
        ),
        &["quantity", "value", "target"],
    );
    println!(
        "| raw baseline: {n} x (`docker run -d` + `docker exec tmux new-session -d`), all ready | {} / {} in {raw_wall:.2} s (first {:.2} s, p50 {:.2} s; `docker rm -f` of all {:.2} s) | |",
        r.raw.ready.len(),
        r.raw.n,
        raw.min_ms / 1e3,
        raw.p50_ms / 1e3,
        r.raw.remove_wall.as_secs_f64()
    );
    println!(
        "| hub: {n} x POST start, all ready | {} / {n} in {hub_wall:.2} s | |",
        r.start.ok.len()
    );
    println!("| hub wall / raw wall | {ratio:.2} | <= {START_WALL_RATIO_TARGET} |");
    println!(
        "| hub first ready / p50 / max (s) | {first:.2} / {:.2} / {:.2} | first <= {} s |",
        hub.p50_ms / 1e3,
        hub.max_ms / 1e3,
        FIRST_READY_TARGET.as_secs()
    );
    println!("| hub p50 / hub wall | {share:.2} | <= {P50_SHARE_TARGET} |");
    println!(
        "| stop of {n} (+ remove), wall | {stop_wall:.2} s | <= {} s |",
        STOP_WALL_TARGET.as_secs()
    );
    println!(
        "| dockerd CPU during the raw baseline / the hub's starts | {} / {} CPU-s | |",
        opt_secs(r.dockerd_cpu_secs.0),
        opt_secs(r.dockerd_cpu_secs.1)
    );
    let all_ok = r.start.ok.len() == n && r.raw.ready.len() == r.raw.n;
    let rows = [
        (
            format!("fleet start: {n} agents all ready, hub wall / raw Docker wall ({hub_wall:.1} s / {raw_wall:.1} s)"),
            format!("{ratio:.2}"),
            format!("<= {START_WALL_RATIO_TARGET}, all ready"),
            all_ok && ratio <= START_WALL_RATIO_TARGET,
        ),
        (
            format!("fleet start: {n} agents, first ready"),
            format!("{first:.2} s"),
            format!("<= {} s", FIRST_READY_TARGET.as_secs()),
            all_ok && hub.min_ms <= FIRST_READY_TARGET.as_secs_f64() * 1e3,
        ),
        (
            format!("fleet start: {n} agents, p50 ready / all ready"),
            format!("{share:.2}"),
            format!("<= {P50_SHARE_TARGET}"),
            all_ok && share <= P50_SHARE_TARGET,
        ),
        (
            format!("fleet stop: {n} agents (+ remove), all stopped"),
            format!("{stop_wall:.2} s"),
            format!("<= {} s, all stopped", STOP_WALL_TARGET.as_secs()),
            r.stop.ok.len() == r.stop.requested && r.stop.wall <= STOP_WALL_TARGET,
        ),
    ];
    for (name, value, target, pass) in rows {
        summary.push(SummaryRow::value(&name, n, value, &target, verdict(pass)));
    }
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
