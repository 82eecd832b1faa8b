//! `/mcp`: the MCP server over streamable HTTP on the hub's own listener, as a nested service
//! of the hub's router. Requests pass the hub's auth layer first (any valid token may open a
//! session; each action then needs its REST route's role), and every tool call runs the REST
//! router in-process with the caller's `Authorization`.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::executor::InProcess;
use super::server::McpServer;
use crate::hub::Hub;

/// The streamable-HTTP service that calls `rest` (the hub's REST router) for every action.
pub fn service(
    hub: &Hub,
    rest: axum::Router,
) -> StreamableHttpService<McpServer<InProcess>, LocalSessionManager> {
    let server = McpServer::new(InProcess::new(rest));
    // The hub's auth layer already guards the host: an open hub answers loopback names only,
    // and a hub with tokens needs a bearer token no rebinding web page can send. rmcp's own
    // Host allow-list would refuse hubs listening on other names.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(hub.closing().child_token());
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
