//! Parts 1 and 2: keystroke -> echo round trips for a container agent (WebSocket input frame
//! and REST `send_line` through the hub, a raw bollard TTY exec of `tmux attach` without it,
//! and the older `docker exec` send-keys + capture-pane polling design), and `talk` latency.

use std::time::{Duration, Instant};

use agent_hub::client::HubClient;
use anyhow::{ensure, Result};
use bollard::Docker;

use super::common::echo::{hub_rest_echo, hub_ws_echo, next_token, talk_samples};
use super::common::hub::HubUnderTest;
use super::common::report::{table, verdict};
use super::common::stats::{interleaved, stats, without_warmup, Stats, SLOW_MS};
use super::common::ws::WsView;
use super::common::{timed_out, SAMPLE_TIMEOUT};
use super::docker::{capture_pane, tmux_in, RawExec};
use super::{Plan, SummaryRow, TMUX_SESSION};

const ECHO_P50_TARGET_MS: f64 = 2.0;
const ECHO_P99_TARGET_MS: f64 = 10.0;
const TALK_P50_TARGET_MS: f64 = 3.0;
/// What the agent's shell prints when it waits (tmux may skip the trailing blank of `$ `).
pub const PROMPT: &[u8] = b"$";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoRow {
    HubWs,
    HubRest,
    RawExec,
}

impl EchoRow {
    const ALL: [EchoRow; 3] = [EchoRow::HubWs, EchoRow::HubRest, EchoRow::RawExec];

    fn label(self) -> &'static str {
        match self {
            EchoRow::HubWs => "echo: hub, WS input frame -> WS output",
            EchoRow::HubRest => "echo: hub, REST send_line -> WS output",
            EchoRow::RawExec => "echo: raw bollard TTY exec `tmux attach` (no hub)",
        }
    }
}

/// The sessions the echo rows type into.
struct EchoTargets<'a> {
    client: &'a HubClient,
    sid: String,
    view: WsView,
    raw: RawExec,
}

/// tmux re-renders the screen for an attached client: the token shows up as typed text, and
/// the prompt after it (tmux may skip its trailing blank, so wait for `$` only).
pub async fn raw_echo(raw: &mut RawExec) -> Result<Duration> {
    let token = next_token();
    raw.buf.clear();
    let start = Instant::now();
    raw.write(format!("#{token}\r").as_bytes()).await?;
    let at = raw.wait_for(token.as_bytes(), 0).await?;
    let elapsed = start.elapsed();
    raw.wait_for(PROMPT, at + token.len()).await?;
    Ok(elapsed)
}

impl EchoTargets<'_> {
    async fn sample(&mut self, row: EchoRow) -> Result<Duration> {
        let sample = async {
            match row {
                EchoRow::HubWs => hub_ws_echo(&mut self.view, PROMPT).await,
                EchoRow::HubRest => {
                    hub_rest_echo(self.client, &self.sid, &mut self.view, PROMPT).await
                }
                EchoRow::RawExec => raw_echo(&mut self.raw).await,
            }
        };
        timed_out(sample, SAMPLE_TIMEOUT, row.label()).await
    }

    /// `samples` samples of every row after `warmup` discarded ones, interleaved
    /// ([`interleaved`]).
    async fn interleave(
        &mut self,
        counts: (usize, usize, usize),
    ) -> Result<Vec<(EchoRow, Vec<Duration>)>> {
        let rows = EchoRow::ALL;
        let mut taken: Vec<Vec<Duration>> = vec![Vec::new(); rows.len()];
        for i in interleaved(rows.len(), counts) {
            taken[i].push(self.sample(rows[i]).await?);
        }
        Ok(rows
            .into_iter()
            .zip(without_warmup(taken, counts.0))
            .collect())
    }
}

/// The older design: `docker exec tmux send-keys -l`, then `docker exec tmux capture-pane`
/// back-to-back until the token is on the screen (no sleep between polls: its lower bound).
fn old_design_echo(container: &str) -> Result<Duration> {
    let token = next_token();
    let typed = format!("#{token}");
    let start = Instant::now();
    tmux_in(
        container,
        &["send-keys", "-t", TMUX_SESSION, "-l", "--", &typed],
    )?;
    while !capture_pane(container)?.contains(&token) {
        ensure!(start.elapsed() < SAMPLE_TIMEOUT, "token never showed up");
    }
    let elapsed = start.elapsed();
    tmux_in(container, &["send-keys", "-t", TMUX_SESSION, "Enter"])?;
    Ok(elapsed)
}

pub struct EchoResults {
    pub rows: Vec<(EchoRow, Vec<Duration>)>,
    pub old_design: Vec<Duration>,
}

/// Detaches the raw TTY client explicitly (closing its input would leave the `tmux attach`
/// process running) and waits for its stream to end, so later baselines run there alone.
pub async fn detach_raw(mut raw: RawExec, container: &str) -> Result<()> {
    tmux_in(container, &["detach-client", "-s", TMUX_SESSION])?;
    ensure!(
        raw.drain_to_end(Duration::from_secs(5)).await,
        "the raw tmux attach did not end after detach-client"
    );
    Ok(())
}

pub async fn measure_echo(
    hut: &HubUnderTest,
    docker: &Docker,
    raw_container: &str,
    plan: &Plan,
) -> Result<EchoResults> {
    let (sid, _) = hut.start_agent("echo").await?;
    let mut view =
        WsView::connect(&hut.client, &hut.client.stream_url(&sid, Some(0)), true).await?;
    timed_out(
        hub_ws_echo(&mut view, PROMPT),
        SAMPLE_TIMEOUT,
        "the first hub echo",
    )
    .await?;
    let attach = ["tmux", "attach", "-t", TMUX_SESSION];
    let mut raw = RawExec::start(docker, raw_container, &attach, true).await?;
    timed_out(raw_echo(&mut raw), SAMPLE_TIMEOUT, "the first raw echo").await?;
    let mut targets = EchoTargets {
        client: &hut.client,
        sid,
        view,
        raw,
    };
    let counts = (plan.warmup, plan.echo_samples, plan.echo_block);
    let rows = targets.interleave(counts).await;
    detach_raw(targets.raw, raw_container).await?;
    let rows = rows?;
    let old_design = (0..3 + plan.poll_samples)
        .map(|_| old_design_echo(raw_container))
        .collect::<Result<Vec<_>>>()?
        .split_off(3);
    Ok(EchoResults { rows, old_design })
}

fn print_latency_row(name: &str, s: Stats, target: &str, result: &str) {
    println!(
        "| {name} | {} | {:.3} | {:.3} | {:.3} | {} | {target} | {result} |",
        s.n, s.p50_ms, s.p99_ms, s.max_ms, s.slow
    );
}

fn echo_target() -> String {
    format!("p50 <= {ECHO_P50_TARGET_MS} ms, p99 <= {ECHO_P99_TARGET_MS} ms")
}

pub fn report_echo_and_talk(echo: &EchoResults, talk: &[Duration], summary: &mut Vec<SummaryRow>) {
    table(
        "1-2. Keystroke -> echo and talk, container agent (ms)",
        &[
            "measurement",
            "n",
            "p50",
            "p99",
            "max",
            &format!("samples >= {SLOW_MS} ms"),
            "target",
            "result",
        ],
    );
    for (row, samples) in &echo.rows {
        let s = stats(samples);
        let (target, result) = match row {
            EchoRow::RawExec => ("baseline".to_string(), "-"),
            _ => (
                echo_target(),
                verdict(s.p50_ms <= ECHO_P50_TARGET_MS && s.p99_ms <= ECHO_P99_TARGET_MS),
            ),
        };
        print_latency_row(row.label(), s, &target, result);
        summary.push(SummaryRow::latency(row.label(), s, &target, result));
    }
    if !echo.old_design.is_empty() {
        let old = "echo: older design, CLI `docker exec` send-keys + capture-pane polling";
        let s = stats(&echo.old_design);
        print_latency_row(old, s, "baseline", "-");
        summary.push(SummaryRow::latency(old, s, "baseline", "-"));
    }
    if talk.is_empty() {
        return;
    }
    let name = "talk `true`: REST POST .../talk round trip";
    let target = format!("p50 <= {TALK_P50_TARGET_MS} ms");
    let s = stats(talk);
    let result = verdict(s.p50_ms <= TALK_P50_TARGET_MS);
    print_latency_row(name, s, &target, result);
    summary.push(SummaryRow::latency(name, s, &target, result));
}

/// Part 2 on the agent's session `sid`.
pub async fn measure_talk(hut: &HubUnderTest, sid: &str, plan: &Plan) -> Result<Vec<Duration>> {
    talk_samples(&hut.client, sid, plan.warmup, plan.talk_samples).await
}
