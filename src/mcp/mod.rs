//! The MCP layer: the tools `k_pty` and `k_agents` for agent runtimes (Claude Code, Codex, ...),
//! one implementation behind two transports: `agent-hub mcp` (stdio, a client of a running hub)
//! and streamable HTTP at `/mcp` on the hub's listener.
//!
//! Every action is a REST request ([`actions`] is the one table of them); [`dispatch`] builds
//! it from the call's arguments and runs it through an [`executor::Executor`], so replies and
//! error codes are the REST API's by construction. [`help`] generates `help` and the schemas,
//! [`server`] is the rmcp handler, [`http`] the `/mcp` service.

pub mod actions;
pub mod dispatch;
pub mod executor;
pub mod help;
pub mod http;
pub mod server;
