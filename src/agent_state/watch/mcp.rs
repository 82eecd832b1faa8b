//! A program that connects to the hub's MCP server is not ready until it has: its prompt
//! reads `working` (`mcp:connecting`) meanwhile.

use std::time::Duration;

use tokio::time::Instant;

use super::Watch;
use crate::agent_state::classify::Classification;
use crate::agent_state::State;

impl Watch {
    /// The program will connect to the hub's MCP server (`agent-hub mcp`) and is not ready
    /// until it has (for `within` at most): its prompt reads `working` (`mcp:connecting`)
    /// meanwhile. A CLI may draw its prompt and take a prompt before its MCP servers are
    /// connected, and then answers it without their tools (Claude Code 2.1.330).
    pub fn expect_mcp(&mut self, within: Duration, now: Instant) {
        self.mcp_wait = Some(now + within);
    }

    /// The program's MCP connection to the hub is up (its server listed its tools).
    pub fn note_mcp_ready(&mut self) {
        self.mcp_wait = None;
    }

    /// Whether the program's MCP connection was awaited and has not come (awaited still, or
    /// given up on).
    pub fn mcp_missing(&self) -> bool {
        self.mcp_wait.is_some()
    }

    /// Whether the program's MCP connection is still awaited now.
    pub fn mcp_pending(&self, now: Instant) -> bool {
        self.mcp_wait.is_some_and(|until| now < until)
    }

    /// `idle` is `working` while the MCP connection is awaited.
    pub(super) fn hold_for_mcp(&self, reading: Classification, now: Instant) -> Classification {
        if reading.state != State::Idle || !self.mcp_pending(now) {
            return reading;
        }
        Classification {
            state: State::Working,
            rule: "mcp:connecting".into(),
            evidence: vec!["waiting for the agent's MCP connection to the hub".into()],
        }
    }
}
