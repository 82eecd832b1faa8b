//! Part 5: the producer's own cost on a host PTY session (#17): `seq` timing itself in a bare
//! portable-pty drained at full speed, and in a hub session with one WebSocket viewer,
//! interleaved.

use std::path::Path;
use std::time::Duration;

use agent_hub::protocol::CreateSessionRequest;
use anyhow::{anyhow, Context, Result};

use super::bare::BarePty;
use super::common::hub::HubUnderTest;
use super::common::procfs::CpuTimes;
use super::common::producer::{self, ProducerRun};
use super::common::ws::WsView;
use super::Plan;

/// Longest one run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The producer behind a trigger line, so the viewer is attached before it starts.
fn command(ms_file: &Path) -> Vec<String> {
    let script = format!(
        "read _; {}",
        producer::script(&ms_file.display().to_string(), ":")
    );
    vec!["-c".into(), script]
}

fn read_ms(ms_file: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(ms_file).context("the producer wrote no time")?;
    let _ = std::fs::remove_file(ms_file);
    text.trim()
        .parse()
        .map_err(|e| anyhow!("producer time {text:?}: {e}"))
}

fn bare_run(cwd: &Path) -> Result<ProducerRun> {
    let ms_file = cwd.join("producer.ms");
    let args = command(&ms_file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut pty = BarePty::spawn("sh", &args, cwd)?;
    std::thread::sleep(Duration::from_millis(200));
    pty.write(b"\n")?;
    let mut chunk = vec![0u8; 64 * 1024];
    while pty.read_some(&mut chunk) > 0 {}
    Ok(ProducerRun {
        ms: read_ms(&ms_file)?,
        ..ProducerRun::default()
    })
}

async fn hub_run(hut: &HubUnderTest, cwd: &Path) -> Result<ProducerRun> {
    let ms_file = cwd.join("producer.ms");
    let id = hut
        .create(CreateSessionRequest {
            shell: Some("sh".into()),
            args: command(&ms_file),
            cwd: Some(cwd.display().to_string()),
            ..CreateSessionRequest::default()
        })
        .await?;
    let mut view =
        WsView::connect(&hut.client, &hut.client.stream_url(&id, Some(0)), false).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = CpuTimes::now();
    view.send_input("\n").await?;
    let drained = tokio::time::timeout(RUN_TIMEOUT, async {
        while !view.exited() && view.pump().await? {}
        anyhow::Ok(())
    })
    .await;
    let bytes = hut.output_offset(&id).await?;
    let _ = hut.client.kill(&id).await;
    drained.map_err(|_| anyhow!("the hub producer run took too long"))??;
    Ok(producer::hub_run(read_ms(&ms_file)?, bytes, before))
}

/// Interleaved runs: bare, hub, bare, hub, ...
pub fn measure_producer(
    rt: &tokio::runtime::Runtime,
    hut: &HubUnderTest,
    plan: &Plan,
    cwd: &Path,
) -> Result<(Vec<ProducerRun>, Vec<ProducerRun>)> {
    let (mut bare, mut hub) = (Vec::new(), Vec::new());
    for _ in 0..plan.producer_runs {
        bare.push(bare_run(cwd)?);
        hub.push(rt.block_on(hub_run(hut, cwd))?);
    }
    Ok((bare, hub))
}
