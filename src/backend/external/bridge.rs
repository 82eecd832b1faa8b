//! The bridge API: how one process lends its terminals to a hub. A terminal owned by another
//! process (another hub on another machine, an IDE, a script) is registered with
//! `POST /v1/pty/register` and its owner serves these routes; the hub serves them too, for its
//! own sessions, so one hub can steer another's sessions as its own.
//!
//! - `POST /pty/write {session_id, data, encoding?}`: raw input, written as is;
//! - `POST /pty/read {session_id, timeout_ms, offset?, max_bytes?, encoding?}`: output from
//!   `offset` (absolute), waiting up to `timeout_ms` when there is none yet;
//! - `POST /pty/talk {session_id, command, sentinel?, timeout_ms}`;
//! - `POST /pty/buffer {session_id, mode, max_lines, ...}`: a rendered read (term_read);
//! - `GET /pty/list`, `GET /health`.
//!
//! This module holds the wire types; [`super::client`] calls a bridge, `api::bridge` serves one.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::json::{whole, Encoding};

/// `POST /pty/write`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = BridgeWriteRequest)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    pub session_id: String,
    pub data: String,
    #[serde(default)]
    pub encoding: Encoding,
}

/// `POST /pty/read`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = BridgeReadRequest)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    pub session_id: String,
    /// How long to wait for output (default 0: answer at once).
    #[serde(default, deserialize_with = "whole::int")]
    #[schema(maximum = 60_000)]
    pub timeout_ms: u64,
    /// Absolute offset to read from; without it, only output newer than the request.
    #[serde(default, deserialize_with = "whole::opt")]
    #[schema(maximum = 9_223_372_036_854_775_807_u64)]
    pub offset: Option<u64>,
    /// Default 65536.
    #[serde(default, deserialize_with = "whole::opt")]
    #[schema(minimum = 1, maximum = 4_194_304)]
    pub max_bytes: Option<usize>,
    #[serde(default)]
    pub encoding: Encoding,
}

/// `POST /pty/read` reply.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = BridgeReadReply)]
pub struct ReadReply {
    pub ok: bool,
    pub session_id: String,
    pub data: String,
    #[serde(default)]
    pub encoding: Encoding,
    /// Absolute offset of the first byte of `data`.
    #[serde(default)]
    pub offset: u64,
    /// Where the next read continues.
    #[serde(default)]
    pub next_offset: u64,
    /// Bytes between the requested offset and `offset` that are no longer kept.
    #[serde(default)]
    pub dropped_bytes: u64,
    #[serde(default = "yes")]
    pub alive: bool,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub exit_reason: Option<String>,
}

fn yes() -> bool {
    true
}

/// `POST /pty/talk`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = BridgeTalkRequest)]
#[serde(deny_unknown_fields)]
pub struct TalkRequest {
    pub session_id: String,
    pub command: String,
    pub sentinel: Option<String>,
    /// Default: the hub's `talk_timeout_ms`.
    #[serde(default, deserialize_with = "whole::opt")]
    #[schema(minimum = 1, maximum = 3_600_000)]
    pub timeout_ms: Option<u64>,
}

/// `POST /pty/buffer`: a rendered read request for one session.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = BridgeBufferRequest)]
pub struct BufferRequest {
    pub session_id: String,
    #[serde(flatten)]
    pub read: crate::screen::TermReadRequest,
    #[serde(flatten, skip_serializing)]
    #[schema(ignore)]
    pub no_other_fields: crate::json::NoOtherFields,
}
