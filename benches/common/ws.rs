//! A WebSocket subscriber of one hub session: keeps the output bytes (or only counts them, or
//! feeds them to an ingest [`Tally`]) and counts what the hub says it lost.

use std::time::{Duration, Instant};

use agent_hub::client::HubClient;
use agent_hub::protocol::ServerFrame;
use anyhow::{anyhow, bail, ensure, Context, Result};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::ingest::Tally;
use super::search::Search;

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct WsView {
    ws: WsStream,
    /// Whether output bytes are kept in `buf` (when no tally takes them).
    keep: bool,
    pub buf: Vec<u8>,
    /// When set, output bytes go here instead of `buf`.
    pub tally: Option<Tally>,
    /// Output bytes received.
    pub received: u64,
    /// Absolute offset just past the last byte received.
    pub next_offset: u64,
    /// Binary frames received.
    pub frames: u64,
    pub resyncs: u64,
    pub dropped: u64,
    /// How the session ended, once the hub said so.
    pub exit: Option<String>,
}

impl WsView {
    /// A viewer of `url`, presenting `client`'s credential.
    pub async fn connect(client: &HubClient, url: &str, keep: bool) -> Result<Self> {
        let request = client.ws_request(url).map_err(anyhow::Error::msg)?;
        // Nagle off on our side, as any interactive client would do.
        let (ws, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
            .await
            .with_context(|| format!("connect {url}"))?;
        Ok(WsView {
            ws,
            keep,
            buf: Vec::new(),
            tally: None,
            received: 0,
            next_offset: 0,
            frames: 0,
            resyncs: 0,
            dropped: 0,
            exit: None,
        })
    }

    pub fn exited(&self) -> bool {
        self.exit.is_some()
    }

    pub async fn send_input(&mut self, data: &str) -> Result<()> {
        let frame = json!({ "type": "input", "data": data }).to_string();
        self.ws.send(Message::text(frame)).await?;
        Ok(())
    }

    /// Handles one message; false once the stream has ended.
    pub async fn pump(&mut self) -> Result<bool> {
        let message = match self.ws.next().await {
            None => return Ok(false),
            Some(m) => m?,
        };
        match message {
            Message::Binary(bytes) => {
                self.received += bytes.len() as u64;
                self.next_offset += bytes.len() as u64;
                self.frames += 1;
                match &mut self.tally {
                    Some(t) => t.feed(&bytes),
                    None if self.keep => self.buf.extend_from_slice(&bytes),
                    None => {}
                }
            }
            Message::Text(text) => match serde_json::from_str::<ServerFrame>(text.as_str())? {
                ServerFrame::Hello { offset, .. } => self.next_offset = offset,
                ServerFrame::Resync {
                    dropped_bytes,
                    offset,
                } => {
                    self.resyncs += 1;
                    self.dropped += dropped_bytes;
                    if let Some(t) = &mut self.tally {
                        t.skip(dropped_bytes);
                    }
                    self.next_offset = offset;
                }
                ServerFrame::Exit { exit_code, reason } => {
                    self.exit = Some(format!("exit {exit_code:?}, {reason}"));
                }
                ServerFrame::Error { message, .. } => bail!("hub stream error: {message}"),
            },
            Message::Close(_) => return Ok(false),
            _ => {}
        }
        Ok(true)
    }

    /// Handles one message; an error when the stream or the session has ended.
    pub async fn pump_live(&mut self) -> Result<()> {
        ensure!(self.pump().await?, "the session's WebSocket ended");
        match &self.exit {
            Some(exit) => Err(anyhow!("the hub ended the session's stream: {exit}")),
            None => Ok(()),
        }
    }

    /// Receives until `needle` occurs in `buf` at or after `from`; returns its position.
    pub async fn wait_for(&mut self, needle: &[u8], from: usize) -> Result<usize> {
        let mut search = Search::new(needle, from);
        loop {
            if let Some(at) = search.found_in(&self.buf) {
                return Ok(at);
            }
            self.pump_live().await?;
        }
    }

    /// Receives until nothing has arrived for `quiet`, for at most `limit`.
    pub async fn wait_quiet(&mut self, quiet: Duration, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        while let Ok(pumped) = tokio::time::timeout(quiet, self.pump_live()).await {
            pumped?;
            ensure!(Instant::now() < deadline, "the session never went quiet");
        }
        Ok(())
    }
}
