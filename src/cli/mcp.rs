//! `agent-hub mcp`: the MCP server on stdin/stdout, a client of a running hub (`--hub` /
//! `AGENT_HUB_URL`, `--token` / `AGENT_HUB_TOKEN`, as every command). Register it with
//! `claude mcp add agent-hub -- agent-hub mcp`. The hub is first reached on the first tool
//! call, so the server answers `initialize` at once even when the hub is down (calls then
//! fail as tool errors with `HUB_UNREACHABLE`).
//!
//! Run by an agent the hub started (`AGENT_HUB_SESSION_ID` or `AGENT_HUB_AGENT_ID` set), it
//! tells the hub once its client has listed the tools (hook event `McpReady`): until then the
//! hub holds prompts for that agent, which its CLI would answer without the hub's tools.

use clap::Args;
use rmcp::ServiceExt;

use super::hook::{hook_path, tell};
use super::ClientOpts;
use crate::mcp::executor::OverHttp;
use crate::mcp::server::McpServer;
use crate::protocol::MCP_READY_EVENT;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The session to tell the hub is connected (default: `AGENT_HUB_SESSION_ID`).
    #[arg(long, env = "AGENT_HUB_SESSION_ID")]
    pub session: Option<String>,
    /// The container agent to tell when no session is given (default: `AGENT_HUB_AGENT_ID`).
    #[arg(long, env = "AGENT_HUB_AGENT_ID")]
    pub agent: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn run(args: McpArgs) -> i32 {
    let mut server = McpServer::new(OverHttp::new(args.opts.client()));
    if let Some(path) = hook_path(args.session.as_deref(), args.agent.as_deref()) {
        let opts = args.opts.clone();
        server = server.on_tools_listed(move || {
            let (opts, path) = (opts.clone(), path.clone());
            tokio::spawn(async move {
                if let Err(e) = tell(&opts, &path, MCP_READY_EVENT, None).await {
                    eprintln!("agent-hub mcp: could not tell the hub it is connected: {e}");
                }
            });
        });
    }
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
