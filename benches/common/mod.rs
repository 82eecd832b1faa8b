//! The harness both benchmark binaries share: argument parsing and the skip line
//! ([`args`]), the in-process hub ([`hub`]), its WebSocket viewer and the echo and talk samples
//! taken through it ([`ws`], [`echo`], [`search`]), ingest runs ([`ingest`]), the producer's own cost ([`producer`]), percentiles and tables
//! ([`stats`], [`report`]), and `/proc` and environment readings ([`procfs`]). Each binary
//! keeps only what is specific to it and uses a subset of this.
#![allow(dead_code)]

pub mod args;
pub mod echo;
pub mod hub;
pub mod ingest;
pub mod procfs;
pub mod producer;
pub mod report;
pub mod search;
pub mod stats;
pub mod ws;

use std::time::Duration;

use anyhow::{anyhow, Result};

/// Longest any single sample may take before a benchmark gives up.
pub const SAMPLE_TIMEOUT: Duration = Duration::from_secs(10);

/// `f`, or an error naming `what` once `limit` has passed.
pub async fn timed_out<T>(
    f: impl std::future::Future<Output = Result<T>>,
    limit: Duration,
    what: &str,
) -> Result<T> {
    tokio::time::timeout(limit, f)
        .await
        .map_err(|_| anyhow!("timed out waiting for {what}"))?
}
