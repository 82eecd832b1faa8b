//! Echo and talk samples through the hub: type `#<token>` + Enter (a shell comment), stop the
//! clock when the token first shows up in the session's WebSocket output, then wait (untimed)
//! for the next prompt so samples never overlap. Also the token every echo row of either
//! benchmark types.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_hub::client::HubClient;
use anyhow::{ensure, Result};

use super::ws::WsView;
use super::{timed_out, SAMPLE_TIMEOUT};

static TOKEN_SEQ: AtomicU64 = AtomicU64::new(0);

/// A token that never occurs in the output before it is typed.
pub fn next_token() -> String {
    format!("ah{:07}q", TOKEN_SEQ.fetch_add(1, Ordering::Relaxed))
}

/// One echo typed as a WebSocket input frame; `prompt` is what the shell prints next.
pub async fn hub_ws_echo(view: &mut WsView, prompt: &[u8]) -> Result<Duration> {
    let token = next_token();
    view.buf.clear();
    let start = Instant::now();
    view.send_input(&format!("#{token}\r")).await?;
    let at = view.wait_for(token.as_bytes(), 0).await?;
    let elapsed = start.elapsed();
    view.wait_for(prompt, at + token.len()).await?;
    Ok(elapsed)
}

/// One echo typed by REST `send_line`, seen on the session's WebSocket.
pub async fn hub_rest_echo(
    client: &HubClient,
    sid: &str,
    view: &mut WsView,
    prompt: &[u8],
) -> Result<Duration> {
    let token = next_token();
    view.buf.clear();
    let line = format!("#{token}");
    let start = Instant::now();
    let seen = async {
        let at = view.wait_for(token.as_bytes(), 0).await?;
        Ok::<_, anyhow::Error>((start.elapsed(), at))
    };
    let (posted, seen) = tokio::join!(client.send_line(sid, &line), seen);
    posted?;
    let (elapsed, at) = seen?;
    view.wait_for(prompt, at + token.len()).await?;
    Ok(elapsed)
}

/// `samples` round trips of REST `talk` running `true`, after `warmup` discarded ones.
pub async fn talk_samples(
    client: &HubClient,
    sid: &str,
    warmup: usize,
    samples: usize,
) -> Result<Vec<Duration>> {
    let mut taken = Vec::new();
    for i in 0..warmup + samples {
        let start = Instant::now();
        let reply = timed_out(
            async { Ok(client.talk(sid, "true", Some(10_000)).await?) },
            SAMPLE_TIMEOUT,
            "talk",
        )
        .await?;
        let elapsed = start.elapsed();
        ensure!(
            reply.result.exit_code == Some(0),
            "talk `true` replied {reply:?}"
        );
        if i >= warmup {
            taken.push(elapsed);
        }
    }
    Ok(taken)
}
