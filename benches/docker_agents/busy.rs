//! Part 7, the busy fleet (#30): N agents each printing `seq 1 1000` every 0.1 s (about
//! 50 kB/s in bursts) plus one quiet agent, over two windows:
//! - the **cost window**, the fleet alone: the hub's CPU per MB and per chunk, its looks and
//!   its memory. Nothing else runs: the bench's own client shares the hub's threads, and its
//!   samples (a WebSocket echo and a `talk` ten times a second, each audited) would cost the
//!   hub about as much as the fleet's bytes;
//! - the **latency window**: the quiet agent's echo and `talk true` latency while the fleet
//!   prints, beside the echo of a raw `tmux attach` in a container of its own (no hub): what
//!   this machine's engine and tmux give under the same load. The hub's CPU is reported for
//!   this window too.

use std::time::{Duration, Instant};

use agent_hub::agents::AgentStatus;
use anyhow::{anyhow, Result};

use super::common::echo::hub_ws_echo;
use super::common::hub::{agent_ops, HubUnderTest};
use super::common::procfs::{rss_kb, CpuTimes};
use super::common::report::{table, verdict};
use super::common::stats::{stats, Stats};
use super::common::ws::WsView;
use super::common::{timed_out, SAMPLE_TIMEOUT};
use super::docker::RawExec;
use super::echo::{detach_raw, raw_echo, PROMPT};
use super::scale::start_in_waves;
use super::{Plan, SummaryRow, TMUX_SESSION};

/// What every busy agent types into its shell.
const BUSY_LOOP: &str = "while :; do seq 1 1000; sleep 0.1; done";
/// The agent the latency samples go to; it prints nothing but its answers.
pub const QUIET_AGENT: &str = "quiet";
/// Time for the loops to get going before the window opens.
const SETTLE: Duration = Duration::from_secs(2);
/// Between two pairs of latency samples.
const SAMPLE_PAUSE: Duration = Duration::from_millis(100);
const CPU_PER_MB_TARGET: f64 = 0.05;

/// Busy agent ids: `b001`...
pub fn busy_ids(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("b{i:03}")).collect()
}

/// The talk p95 target for a fleet of `n` (#30: 5 ms at 20, 10 ms at 50).
fn talk_p95_target_ms(n: usize) -> f64 {
    if n <= 20 {
        5.0
    } else {
        10.0
    }
}

/// What the hub did over one window.
struct Window {
    secs: f64,
    bytes: u64,
    chunks: u64,
    hub_cpu: f64,
    looks: u64,
}

impl Window {
    /// Runs `during` and measures the hub around it.
    async fn around<T>(
        hut: &HubUnderTest,
        during: impl std::future::Future<Output = T>,
    ) -> (Self, T) {
        let (bytes0, chunks0) = ingested(hut);
        let cpu0 = CpuTimes::now();
        let looks0 = agent_hub::session::screen_looks();
        let t0 = Instant::now();
        let out = during.await;
        let used = CpuTimes::now().since(cpu0);
        let secs = t0.elapsed().as_secs_f64();
        let (bytes1, chunks1) = ingested(hut);
        let window = Window {
            secs,
            bytes: bytes1 - bytes0,
            chunks: chunks1 - chunks0,
            hub_cpu: used.process - used.main,
            looks: agent_hub::session::screen_looks() - looks0,
        };
        (window, out)
    }

    fn mb(&self) -> f64 {
        self.bytes as f64 / 1e6
    }

    fn cpu_per_mb(&self) -> f64 {
        self.hub_cpu / self.mb().max(1e-9)
    }

    fn cpu_percent(&self) -> f64 {
        self.hub_cpu / self.secs * 100.0
    }
}

/// The latency window's samples.
struct Samples {
    echo: Vec<Duration>,
    talk: Vec<Duration>,
    raw_echo: Vec<Duration>,
}

pub struct BusyResults {
    agents: usize,
    cost: Window,
    sampled: Window,
    rss_kb: u64,
    samples: Samples,
}

/// Output bytes and chunks ingested so far, over every session of the hub.
fn ingested(hut: &HubUnderTest) -> (u64, u64) {
    hut.hub.list().iter().fold((0, 0), |(bytes, chunks), s| {
        (
            bytes + s.output().end_offset(),
            chunks + s.output().chunks(),
        )
    })
}

async fn session_of(hut: &HubUnderTest, id: &str) -> Result<String> {
    hut.client
        .agent(id)
        .await?
        .agent
        .session_id
        .ok_or_else(|| anyhow!("agent {id} has no session"))
}

/// Echo and talk samples on the quiet agent and a raw echo beside it, in turn with a pause,
/// until `window` has passed.
async fn sample_quiet(
    hut: &HubUnderTest,
    sid: &str,
    view: &mut WsView,
    raw: &mut RawExec,
    window: Duration,
) -> Result<Samples> {
    let mut samples = Samples {
        echo: Vec::new(),
        talk: Vec::new(),
        raw_echo: Vec::new(),
    };
    let begin = Instant::now();
    while begin.elapsed() < window {
        let echo = timed_out(hub_ws_echo(view, PROMPT), SAMPLE_TIMEOUT, "echo");
        samples.echo.push(echo.await?);
        let start = Instant::now();
        let talked = async { Ok(hut.client.talk(sid, "true", Some(10_000)).await?) };
        timed_out(talked, SAMPLE_TIMEOUT, "talk").await?;
        samples.talk.push(start.elapsed());
        let raw_echo = timed_out(raw_echo(raw), SAMPLE_TIMEOUT, "raw echo");
        samples.raw_echo.push(raw_echo.await?);
        tokio::time::sleep(SAMPLE_PAUSE).await;
    }
    Ok(samples)
}

/// One busy fleet of `n`: started, printing, measured over the plan's window, stopped.
pub async fn measure_busy(
    hut: &HubUnderTest,
    docker: &bollard::Docker,
    raw_container: &str,
    n: usize,
    plan: &Plan,
) -> Result<BusyResults> {
    let ids = busy_ids(n);
    let mut all = ids.clone();
    all.push(QUIET_AGENT.into());
    let started = start_in_waves(hut, &all, plan.idle_wave).await;
    let measured = async {
        if let Some(failure) = started.failures.first() {
            return Err(anyhow!("busy fleet start failed: {failure}"));
        }
        for id in &ids {
            hut.client
                .send_line(&session_of(hut, id).await?, BUSY_LOOP)
                .await?;
        }
        let quiet = session_of(hut, QUIET_AGENT).await?;
        let mut view =
            WsView::connect(&hut.client, &hut.client.stream_url(&quiet, None), true).await?;
        let attach = ["tmux", "attach", "-t", TMUX_SESSION];
        let mut raw = RawExec::start(docker, raw_container, &attach, true).await?;
        timed_out(raw_echo(&mut raw), SAMPLE_TIMEOUT, "the first raw echo").await?;
        tokio::time::sleep(SETTLE).await;
        eprintln!("7. the cost window of {n} busy agents opens");
        let (cost, ()) = Window::around(hut, tokio::time::sleep(plan.busy_window)).await;
        let rss_kb = rss_kb().0;
        eprintln!("7. the latency window of {n} busy agents opens");
        let sampling = sample_quiet(hut, &quiet, &mut view, &mut raw, plan.busy_window);
        let (sampled, samples) = Window::around(hut, sampling).await;
        detach_raw(raw, raw_container).await?;
        Ok(BusyResults {
            agents: n,
            cost,
            sampled,
            rss_kb,
            samples: samples?,
        })
    }
    .await;
    let (stopped, _) = agent_ops(&hut.client, &all, "stop").await;
    for r in stopped {
        match r.outcome {
            Ok(agent) if agent.status == AgentStatus::Stopped => {}
            other => eprintln!("stop of {} in the busy fleet: {:?}", r.id, other.err()),
        }
    }
    measured
}

fn latency_cell(s: Stats) -> String {
    format!("{:.2} / {:.2}", s.p50_ms, s.p95_ms)
}

pub fn report_busy(results: &[BusyResults], summary: &mut Vec<SummaryRow>) {
    table(
        "7. Busy fleet: N agents printing `seq 1 1000` every 0.1 s, plus one quiet agent",
        &[
            "busy agents",
            "window (s)",
            "output, all agents (MB/s)",
            "chunks/s",
            "hub CPU (% of a core)",
            "hub CPU-s per MB",
            "hub CPU per chunk (µs)",
            "screen looks/s, all agents",
            "hub VmRSS (MB)",
            "sampling: hub CPU (% of a core) / CPU-s per MB",
            "quiet echo p50 / p95 (ms)",
            "quiet talk p50 / p95 (ms)",
            "raw echo, no hub, p50 / p95 (ms)",
        ],
    );
    for r in results {
        let c = &r.cost;
        let per_mb = c.cpu_per_mb();
        let (echo, talk) = (stats(&r.samples.echo), stats(&r.samples.talk));
        println!(
            "| {} | {:.1} | {:.2} | {:.0} | {:.1} | {per_mb:.3} | {:.1} | {:.0} | {:.1} | {:.1} / {:.3} | {} | {} | {} |",
            r.agents,
            c.secs,
            c.mb() / c.secs,
            c.chunks as f64 / c.secs,
            c.cpu_percent(),
            c.hub_cpu / c.chunks.max(1) as f64 * 1e6,
            c.looks as f64 / c.secs,
            r.rss_kb as f64 / 1024.0,
            r.sampled.cpu_percent(),
            r.sampled.cpu_per_mb(),
            latency_cell(echo),
            latency_cell(talk),
            latency_cell(stats(&r.samples.raw_echo)),
        );
        summary.push(SummaryRow::value(
            &format!("busy fleet of {}: hub CPU per MB", r.agents),
            r.agents,
            format!("{per_mb:.3} CPU-s/MB"),
            &format!("<= {CPU_PER_MB_TARGET}"),
            verdict(per_mb <= CPU_PER_MB_TARGET),
        ));
        let target = talk_p95_target_ms(r.agents);
        summary.push(SummaryRow::value(
            &format!("busy fleet of {}: quiet agent's talk p95", r.agents),
            talk.n,
            format!("{:.2} ms", talk.p95_ms),
            &format!("p95 <= {target} ms"),
            verdict(talk.p95_ms <= target),
        ));
        let raw = stats(&r.samples.raw_echo);
        summary.push(SummaryRow::value(
            &format!(
                "busy fleet of {}: raw echo p95, no hub (the machine's floor)",
                r.agents
            ),
            raw.n,
            format!("{:.2} ms", raw.p95_ms),
            "-",
            "info",
        ));
    }
}
