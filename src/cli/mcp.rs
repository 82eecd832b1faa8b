//! `agent-hub mcp`: the MCP server on stdin/stdout, a client of a running hub (`--hub` /
//! `AGENT_HUB_URL`, `--token` / `AGENT_HUB_TOKEN`, as every command). Register it with
//! `claude mcp add agent-hub -- agent-hub mcp`. The hub is first reached on the first tool
//! call, so the server answers `initialize` at once even when the hub is down (calls then
//! fail as tool errors with `HUB_UNREACHABLE`).

use clap::Args;
use rmcp::ServiceExt;

use super::ClientOpts;
use crate::mcp::executor::OverHttp;
use crate::mcp::server::McpServer;

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn run(args: McpArgs) -> i32 {
    let server = McpServer::new(OverHttp::new(args.opts.client()));
    // stdout carries the protocol: nothing else may be printed there.
    let running = match server.serve(rmcp::transport::stdio_pipes()).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("agent-hub mcp: {e}");
            return 1;
        }
    };
    match running.waiting().await {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("agent-hub mcp: {e}");
            1
        }
    }
}
