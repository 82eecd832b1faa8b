//! Ingest runs: the text file a program `cat`s, byte-exact accounting of what arrives, and
//! the in-process observer of when the hub's pipeline held the last byte.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use agent_hub::hub::Hub;
use anyhow::Result;

/// Test file: lines of 99 printable characters and '\n' (text, as agents print).
pub const LINE_CHARS: usize = 99;

/// Writes `lines` lines of [`LINE_CHARS`] printable characters and '\n', handing each line
/// (with its '\n') to `on_line`; returns the file size.
pub fn write_text_file(path: &Path, lines: usize, mut on_line: impl FnMut(&[u8])) -> Result<u64> {
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let alphabet: Vec<u8> = (b'!'..=b'~').collect();
    let mut line = vec![0u8; LINE_CHARS + 1];
    for i in 0..lines {
        let head = format!("{i:09} ");
        line[..head.len()].copy_from_slice(head.as_bytes());
        for (j, byte) in line[head.len()..LINE_CHARS].iter_mut().enumerate() {
            *byte = alphabet[(i + j) % alphabet.len()];
        }
        line[LINE_CHARS] = b'\n';
        out.write_all(&line)?;
        on_line(&line);
    }
    out.flush()?;
    Ok(std::fs::metadata(path)?.len())
}

pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

pub fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Counts a run's output after the trigger: checksums the first `expected` bytes and keeps
/// what follows, which must start with `done_line`.
pub struct Tally {
    expected: u64,
    done_line: &'static [u8],
    pub received: u64,
    /// Bytes the hub dropped before this subscriber saw them (told by a resync frame).
    pub skipped: u64,
    hash: u64,
    tail: Vec<u8>,
    /// When the `expected`-th byte arrived.
    pub done_at: Option<Instant>,
}

impl Tally {
    pub fn new(expected: u64, done_line: &'static [u8]) -> Self {
        Tally {
            expected,
            done_line,
            received: 0,
            skipped: 0,
            hash: FNV_OFFSET,
            tail: Vec::new(),
            done_at: None,
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        let head = (self.expected.saturating_sub(self.received) as usize).min(bytes.len());
        self.hash = fnv1a(self.hash, &bytes[..head]);
        let room = 64usize.saturating_sub(self.tail.len());
        self.tail
            .extend_from_slice(&bytes[head..][..room.min(bytes.len() - head)]);
        self.received += bytes.len() as u64;
        if self.received >= self.expected && self.done_at.is_none() {
            self.done_at = Some(Instant::now());
        }
    }

    /// Counts `n` bytes the hub dropped before the subscriber saw them (a resync). The run
    /// still ends when the rest has arrived, and is no longer exact. (Before this, a resync
    /// left `received` short of `expected` for good, and the run could only end at the bench's
    /// timeout, which read like a stalled hub: #12 item 9.)
    pub fn skip(&mut self, n: u64) {
        let past_expected = (self.received + n).saturating_sub(self.expected.max(self.received));
        let room = 64usize.saturating_sub(self.tail.len());
        self.tail
            .extend(std::iter::repeat_n(0u8, (past_expected as usize).min(room)));
        self.received += n;
        self.skipped += n;
        if self.received >= self.expected && self.done_at.is_none() {
            self.done_at = Some(Instant::now());
        }
    }

    /// Everything up to and including the done line has arrived (or was skipped).
    pub fn complete(&self) -> bool {
        self.received >= self.expected && self.tail.len() >= self.done_line.len()
    }

    /// The bytes are exactly the expected ones, followed by the done line.
    pub fn exact(&self, expected_hash: u64) -> bool {
        self.skipped == 0 && self.hash == expected_hash && self.tail.starts_with(self.done_line)
    }
}

/// When the hub's pipeline holds output up to offset `target` of session `sid` (an in-process
/// observer, not part of the API).
pub fn ingested_at(hub: &Hub, sid: &str, target: u64) -> Result<tokio::task::JoinHandle<Instant>> {
    let mut progress = hub.get(sid)?.output().watch_progress();
    Ok(tokio::spawn(async move {
        while *progress.borrow_and_update() < target {
            if progress.changed().await.is_err() {
                break;
            }
        }
        Instant::now()
    }))
}

/// How long after the hub had ingested the last byte the subscriber had it too (`done`), in
/// ms; `None` when the observer did not finish (it normally has long ago: a starved one gets a
/// moment).
pub async fn ws_lag_ms(ingested: tokio::task::JoinHandle<Instant>, done: Instant) -> Option<f64> {
    tokio::time::timeout(Duration::from_secs(1), ingested)
        .await
        .ok()
        .and_then(|joined| joined.ok())
        .map(|at| done.saturating_duration_since(at).as_secs_f64() * 1e3)
}
