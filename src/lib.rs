//! agent-hub: runs fleets of CLI coding agents and gives people and leader agents a live,
//! lossless, routed view and control of every agent's terminal.
//!
//! # Layout
//! Four layers, each importing only its own and those below (enforced by
//! `tests/it/layering.rs`; see `docs/architecture.md`): the core (terminal vocabulary
//! [`term`], the JSON conventions [`json`], output, screen, redaction, guard, agent states,
//! config, backends, sessions, the wire types), the components, the composition ([`hub`]) and
//! the edge ([`api`], [`mcp`], [`cli`], [`client`], [`daemon`]).
//!
//! - [`hub`]: the composition root; the API's one door to durable changes (sessions start in
//!   four places, all through `SessionRegistry::add`).
//!   [`registry`] holds the live sessions, [`event_bus`] publishes lifecycle events: the narrow
//!   handles the components get.
//! - [`session`]: one terminal and the operations on it (send_line, keys, talk, resize, kill);
//!   `session::input` turns lines into bytes (key names and signals are [`term`]'s),
//!   `session::talk` finds a command's end.
//! - [`output`]: the per-session output pipeline (scrollback, activity, fan-out), written once
//!   above all backends. [`scrollback`] is its pure byte ring; [`screen`] the rendered screen.
//! - [`backend`]: backends only move bytes: host PTY (`pty`), tmux control mode (`tmux`), and
//!   `external` terminals owned by another process and reached through its bridge API.
//! - [`process`]: stopping every process of a terminal (process groups on Unix, job objects
//!   on Windows). [`platform`]: file owners, modes and program look-up, Unix or Windows.
//! - [`owner_routing`]: which session a leader means by agent id, owner session or label.
//! - [`tasks`]: shell commands run to completion (in a PTY session or with pipes).
//! - [`guard`]: the command guard every command-capable input passes, enforced inside the
//!   session's input operations (`session::write`) with the caller's [`actor`].
//! - [`redact`]: secret redaction for every output path (whole texts and byte streams).
//! - [`escape`]: where escape sequences begin and end in terminal output (used by `redact`
//!   and `screen`).
//! - [`audit`]: the durable SQLite audit log; `api::audit` records every mutating request
//!   before its reply, `api::traffic` serves `/v1/pty-traffic/`.
//! - [`api`]: REST + WebSocket translation; [`protocol`]: the wire types; [`error`]: stable codes.
//! - [`http_client`]: the one HTTP/WebSocket client of the hub's API; [`client`]: its typed
//!   methods, one a route, which the CLI uses; [`cli`]: one module per command.
//! - [`mcp`]: the MCP tools `k_pty` and `k_agents` (stdio via `agent-hub mcp`, and `/mcp`), each
//!   action a REST request run through the hub's own router or over HTTP.
//! - [`external_sessions`]: terminals owned by other processes: their registration; the bridge API's
//!   wire types and client are the external backend's (`backend::external`).
//! - [`persist`]: the registry file, the lifecycle log, snapshots, and restoring after restart.
//! - [`activity`]: meaningful activity (screen-text fingerprints with volatile parts masked).
//! - [`agent_state`]: working/idle/blocked/exited/unknown from data-driven profiles, with
//!   hysteresis and `stuck`; [`policy`]: idle timeouts and other policies, one loop applying
//!   them; [`delivery`]: submitting a prompt to an agent TUI with a receipt.
//! - [`config`]: the `hub.toml` settings. [`access`]: people's credentials (the owner's token
//!   in the data dir, `[[tokens]]`, sign-in codes); [`credentials`]: agents'.
//! - [`notify`]: outgoing webhooks (`[[notify]]`): which events a person must hear of, each
//!   webhook with its own queue, retries and dead letters.
//! - [`metrics`]: Prometheus metrics (served at `GET /metrics` by `api::metrics`).
//! - [`usage`]: what model calls used, read from the CLIs' own records, and what it cost by
//!   the price table; [`ledger`]: each agent's calls kept on disk, followed as they come.
//! - [`term`]: the terminal's vocabulary (size, signals, key names, a talk's result);
//!   [`json`]: the JSON conventions every wire type shares; [`toml_file`]: locating problems in
//!   TOML files.

pub mod access;
pub mod activity;
pub mod actor;
pub mod agent_state;
pub mod agents;
pub mod api;
pub mod audit;
pub mod backend;
pub mod cli;
pub mod client;
pub mod config;
pub mod credentials;
pub mod daemon;
pub mod delivery;
pub mod docker;
pub mod error;
pub mod escape;
pub mod event_bus;
pub mod external_sessions;
pub mod guard;
pub mod host;
pub mod http_client;
pub mod hub;
pub mod json;
pub mod ledger;
pub mod mcp;
pub mod metrics;
pub mod notify;
pub mod output;
pub mod owner_routing;
pub mod persist;
pub mod platform;
pub mod policy;
pub mod process;
pub mod protocol;
pub mod redact;
pub mod registry;
pub mod scope;
pub mod screen;
pub mod scrollback;
pub mod session;
pub mod tasks;
pub mod term;
pub mod tick;
pub mod toml_file;
pub mod usage;
pub mod workspace;
