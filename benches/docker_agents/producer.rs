//! Part 6: the producer's own cost in a container agent (#17): `seq` timing itself in a tmux
//! session of the agent's tmux server that no client watches, and in the agent's own session
//! (the hub attached, one WebSocket viewer), interleaved.

use std::time::Duration;

use anyhow::{anyhow, Result};

use super::common::hub::HubUnderTest;
use super::common::procfs::CpuTimes;
use super::common::producer::{self, ProducerRun};
use super::common::timed_out;
use super::common::ws::WsView;
use super::docker::docker_cli;
use super::{Plan, TMUX_SESSION};

/// Longest one run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
const MS_FILE: &str = "/tmp/producer.ms";
const DONE_CHANNEL: &str = "producer-done";
/// The tmux session no client is attached to.
const BARE_SESSION: &str = "bare";

/// Runs the producer in `session` and waits (pumping `view`, if any) until it has signalled.
async fn run_in(container: &str, session: &str, view: Option<&mut WsView>) -> Result<f64> {
    docker_cli(&["exec", container, "rm", "-f", MS_FILE])?;
    let script = producer::script(MS_FILE, &format!("tmux wait-for -S {DONE_CHANNEL}"));
    let typed = [
        "exec",
        container,
        "tmux",
        "send-keys",
        "-t",
        session,
        "-l",
        &script,
        ";",
        "send-keys",
        "-t",
        session,
        "Enter",
    ];
    docker_cli(&typed)?;
    // tmux latches a signal nobody waits for yet, so the order does not matter.
    let mut wait = tokio::process::Command::new("docker");
    wait.args(["exec", container, "tmux", "wait-for", DONE_CHANNEL])
        .kill_on_drop(true);
    let done = wait.status();
    tokio::pin!(done);
    let run = async {
        match view {
            None => done.await.map(|_| ()),
            Some(view) => loop {
                tokio::select! {
                    status = &mut done => break status.map(|_| ()),
                    pumped = view.pump_live() => pumped?,
                }
            },
        }
        .map_err(anyhow::Error::from)
    };
    timed_out(run, RUN_TIMEOUT, "the producer run").await?;
    let text = docker_cli(&["exec", container, "cat", MS_FILE])?;
    text.trim()
        .parse()
        .map_err(|e| anyhow!("producer time {text:?}: {e}"))
}

/// Interleaved runs: no hub watching, then the hub's session with one viewer; repeated.
pub async fn measure_producer(
    hut: &HubUnderTest,
    plan: &Plan,
) -> Result<(Vec<ProducerRun>, Vec<ProducerRun>)> {
    let (sid, container) = hut.start_agent("producer").await?;
    docker_cli(&[
        "exec",
        &container,
        "tmux",
        "new-session",
        "-d",
        "-s",
        BARE_SESSION,
        "-x",
        "120",
        "-y",
        "30",
        "bash --norc --noprofile",
    ])?;
    let mut view = WsView::connect(&hut.client, &hut.client.stream_url(&sid, None), false).await?;
    let (mut bare, mut hub) = (Vec::new(), Vec::new());
    for _ in 0..plan.producer_runs {
        bare.push(ProducerRun {
            ms: run_in(&container, BARE_SESSION, None).await?,
            ..ProducerRun::default()
        });
        let from = hut.output_offset(&sid).await?;
        let before = CpuTimes::now();
        let ms = run_in(&container, TMUX_SESSION, Some(&mut view)).await?;
        // Until the viewer has every byte the session ingested.
        let end = hut.output_offset(&sid).await?;
        timed_out(
            async {
                while view.next_offset < end {
                    view.pump_live().await?;
                }
                Ok(())
            },
            RUN_TIMEOUT,
            "the viewer",
        )
        .await?;
        hub.push(producer::hub_run(ms, end - from, before));
    }
    let _ = hut.client.agent_op("producer", "stop", false).await;
    Ok((bare, hub))
}
