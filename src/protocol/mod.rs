//! Wire types of the REST and WebSocket API, shared by the server (`api`) and the client
//! (`client`, the CLI): session requests here, their replies in [`replies`], the agent, task and
//! audit-traffic routes in [`fleet`], the policy and state routes in [`policy`], the error body
//! in [`ErrorBody`].
//! Only data, and the base64 form of bytes. The OpenAPI document (`api::openapi`) is generated
//! from these types.

mod engines;
mod events;
mod fleet;
mod land;
mod notify;
mod policy;
mod replies;
pub(crate) mod schema;
mod usage;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The largest output offset a request may name (`since`, `offset`): offsets are `int64` on
/// the wire, and no session's output gets near it.
pub const MAX_OFFSET: u64 = i64::MAX as u64;

/// Refuses an offset above [`MAX_OFFSET`] (`name` is the field's).
pub fn check_offset(name: &str, offset: Option<u64>) -> Result<(), crate::error::HubError> {
    match offset {
        Some(n) if n > MAX_OFFSET => Err(crate::error::HubError::bad_request(format!(
            "{name} must be 0-{MAX_OFFSET}"
        ))),
        _ => Ok(()),
    }
}

/// Which backend a new session runs on.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    #[default]
    Pty,
    Tmux,
}

pub use crate::json::{base64_decode, base64_encode, whole, Encoding, ErrorBody, NoOtherFields};
use crate::session::Owner;
pub use engines::*;
pub use events::*;
pub use fleet::*;
pub use land::*;
pub use notify::*;
pub use policy::*;
pub use replies::*;
pub use usage::*;

/// `POST /v1/pty/sessions`. Text holds no NUL byte (a program cannot be given one).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct CreateSessionRequest {
    #[serde(default)]
    pub backend: BackendKind,
    /// The program (default: the hub's shell): a path (with a `/`; a relative one from
    /// `cwd`) to an executable file, or the name of one on the session's `PATH`.
    #[schema(min_length = 1, pattern = r"^[^\u0000]*$")]
    pub shell: Option<String>,
    #[serde(default)]
    #[schema(schema_with = schema::no_nul_list)]
    pub args: Vec<String>,
    /// The working directory, an existing one (default: the hub's home directory). A
    /// relative path is taken from the hub's working directory.
    #[schema(min_length = 1, pattern = r"^[^\u0000]*$")]
    pub cwd: Option<String>,
    #[serde(default, deserialize_with = "whole::opt")]
    #[schema(minimum = 1, maximum = 1000)]
    pub cols: Option<u16>,
    #[serde(default, deserialize_with = "whole::opt")]
    #[schema(minimum = 1, maximum = 500)]
    pub rows: Option<u16>,
    /// Variables for the program: a name is not empty and has no `=`.
    #[serde(default)]
    #[schema(schema_with = schema::env_vars)]
    pub env: BTreeMap<String, String>,
    /// The tmux session's name (tmux backend; default: the session id).
    #[schema(pattern = r"^[A-Za-z0-9_.-]{1,64}$")]
    pub tmux_session: Option<String>,
    /// A loaded policy's name (idle timeout and the rest apply to the session).
    pub policy: Option<String>,
    /// Give the program the hub as a container agent gets it (`AGENT_HUB_URL`,
    /// `AGENT_HUB_TOKEN`, `AGENT_HUB_AGENT_ID`): a credential acting as `owner_agent_id`
    /// (required), scoped like that agent's, revoked when the session is killed.
    #[serde(default)]
    pub hub_access: bool,
    /// Who the session belongs to (label, owner_agent_id, owner_session_id, owner_role,
    /// cli_type, conversation_id).
    #[serde(flatten)]
    pub owner: Owner,
    #[serde(flatten, skip_serializing)]
    #[schema(ignore)]
    pub no_other_fields: NoOtherFields,
}

/// `POST .../send_line`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendLineRequest {
    pub data: String,
    /// Deliver as a prompt an agent TUI submits (bracketed paste, Enter, check), with a receipt.
    #[serde(default)]
    pub submit: bool,
    /// With `submit`: send even when the agent is blocked on a question.
    #[serde(default)]
    pub force: bool,
}

/// `POST .../keys`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeysRequest {
    /// Key names (`Enter`, `Escape`, `Up`, `C-c`, `F5`) or single characters.
    #[schema(schema_with = schema::key_names)]
    pub keys: Vec<String>,
    /// Wait for the screen to answer (at most 1.5 s) and reply with a receipt: `submitted`
    /// when the screen changed, `stalled` when it did not (the dashboard's answer buttons ask
    /// for it).
    #[serde(default)]
    pub receipt: bool,
}

/// `POST .../signal`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// `SIGINT`, `SIGQUIT`, `SIGTERM`, `SIGKILL` or `SIGHUP`, in any case, with or without
    /// `SIG`.
    #[schema(
        pattern = r"^[\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*(?:[Ss][Ii][Gg])?(?:[Ii][Nn][Tt]|[Qq][Uu][Ii][Tt]|[Tt][Ee][Rr][Mm]|[Kk][Ii][Ll][Ll]|[Hh][Uu][Pp])[\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$"
    )]
    pub signal: String,
}

/// `POST .../talk`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TalkRequest {
    #[schema(schema_with = schema::talk_command)]
    pub command: String,
    #[schema(schema_with = schema::talk_sentinel)]
    pub sentinel: Option<String>,
    /// Default: the hub's `talk_timeout_ms`.
    #[serde(default, deserialize_with = "whole::opt")]
    #[schema(minimum = 1, maximum = 3_600_000)]
    pub timeout_ms: Option<u64>,
}

/// `POST .../resize`
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizeRequest {
    #[serde(deserialize_with = "whole::int")]
    #[schema(minimum = 1, maximum = 1000)]
    pub cols: u16,
    #[serde(deserialize_with = "whole::int")]
    #[schema(minimum = 1, maximum = 500)]
    pub rows: u16,
}

/// `GET .../read`
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReadQuery {
    /// Default 4096.
    #[param(minimum = 1, maximum = 4_194_304)]
    pub max_bytes: Option<usize>,
    /// Absolute offset to read from, waiting up to `timeout_ms` for output past it.
    #[param(maximum = 9_223_372_036_854_775_807_u64)]
    pub since: Option<u64>,
    /// With `since`: default 5000.
    #[param(maximum = 60_000)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub encoding: Encoding,
    /// Unredacted output: admin tokens only, and the request is audited.
    #[serde(default)]
    pub raw: bool,
}

/// `GET .../read` reply.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReadReply {
    pub ok: bool,
    pub output: String,
    pub start_offset: u64,
    pub end_offset: u64,
    pub dropped_bytes: u64,
    pub alive: bool,
    pub encoding: Encoding,
}

/// `GET .../stream` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Absolute offset to replay the retained output from (without it: a repaint of the
    /// screen).
    #[param(maximum = 9_223_372_036_854_775_807_u64)]
    pub since: Option<u64>,
    /// Unredacted output: admin tokens only, and the request is audited.
    #[serde(default)]
    pub raw: bool,
}

/// Text frames a WebSocket client sends (binary frames are raw input bytes).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientFrame {
    /// Raw input, written as is (no escape decoding, no Enter added).
    Input { data: String },
    /// Resize the terminal.
    Resize { cols: u16, rows: u16 },
}

/// Text frames the server sends (binary frames are output bytes, in order).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// First frame. `offset` is the absolute offset the binary stream continues from;
    /// `mode` is `replay` (retained output from `since`) or `screen` (a repaint of the current
    /// screen comes first).
    Hello {
        session_id: String,
        offset: u64,
        mode: String,
        cols: u16,
        rows: u16,
    },
    /// Bytes were lost between the previous frame and the next one (evicted before this
    /// viewer could receive them).
    Resync { dropped_bytes: u64, offset: u64 },
    /// The program ended; the server closes the socket after this frame.
    Exit {
        exit_code: Option<i32>,
        reason: String,
    },
    /// A client frame was rejected; the stream goes on.
    Error { error_code: String, message: String },
}

/// `GET /v1/previews` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PreviewsQuery {
    /// Lines a preview holds (default 3).
    #[param(minimum = 1, maximum = 20)]
    pub lines: Option<usize>,
}

/// The text frames of `GET /v1/previews`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PreviewFrame {
    /// The previews that changed since the previous frame (the first frame has every visible
    /// session's): session id -> its last non-blank screen lines, oldest first, rendered as
    /// `term_read` renders and redacted like its reply. `removed`: sessions no longer listed.
    Previews {
        previews: std::collections::BTreeMap<String, Vec<String>>,
        removed: Vec<String>,
    },
}
