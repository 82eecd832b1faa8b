//! The MCP server: the tools `k_pty` and `k_agents` (schemas from the action table), each call
//! run by [`super::dispatch`] through the transport's [`Executor`]. A failed action is a tool
//! result with `isError: true` and the REST error body `{ok:false, error_code, message}`; only
//! an unknown tool name is a protocol error.

use std::sync::Arc;

use axum::http::HeaderMap;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::actions::Tool;
use super::executor::{Executor, InProcess, OverHttp};
use super::{dispatch, help};

/// How the server reaches the hub for one call: the executor as is (stdio), or bound to the
/// credentials of the HTTP request that carried the call (`/mcp`).
pub trait CallerExecutor: Executor + Clone {
    fn for_request(&self, headers: Option<&HeaderMap>) -> Self;
}

impl CallerExecutor for OverHttp {
    fn for_request(&self, _: Option<&HeaderMap>) -> Self {
        self.clone()
    }
}

impl CallerExecutor for InProcess {
    fn for_request(&self, headers: Option<&HeaderMap>) -> Self {
        match headers {
            Some(h) => self.for_caller(h),
            None => self.clone(),
        }
    }
}

/// Called once, the first time a client lists the tools.
type OnListed = Arc<dyn Fn() + Send + Sync>;

/// The MCP server over one executor.
#[derive(Clone)]
pub struct McpServer<E> {
    exec: E,
    tools: Arc<Vec<rmcp::model::Tool>>,
    on_listed: Option<(OnListed, Arc<std::sync::atomic::AtomicBool>)>,
}

impl<E: CallerExecutor> McpServer<E> {
    pub fn new(exec: E) -> Self {
        let tools = Tool::ALL
            .iter()
            .map(|t| {
                rmcp::model::Tool::new(t.name(), t.description(), Arc::new(help::input_schema(*t)))
            })
            .collect();
        McpServer {
            exec,
            tools: Arc::new(tools),
            on_listed: None,
        }
    }

    /// Calls `f` the first time a client lists the tools: its connection is then up, and its
    /// model gets the tools from then on.
    pub fn on_tools_listed(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_listed = Some((Arc::new(f), Arc::default()));
        self
    }
}

const INSTRUCTIONS: &str = "agent-hub runs CLI coding agents in terminals. k_pty drives terminal sessions (a session_id may be a session id, an agent id or a label); k_agents manages container agents and tasks. After handing an agent work (k_pty send_line_to_agent), use k_pty wait_state with states [idle, blocked] and then term_read to see the result. Call action help for every action and parameter.";

impl<E: CallerExecutor> ServerHandler for McpServer<E> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agent-hub", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some((f, done)) = &self.on_listed {
            if !done.swap(true, std::sync::atomic::Ordering::Relaxed) {
                f();
            }
        }
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = Tool::from_name(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}': k_pty or k_agents", request.name),
                None,
            ));
        };
        let headers = context
            .extensions
            .get::<axum::http::request::Parts>()
            .map(|p| &p.headers);
        let exec = self.exec.for_request(headers);
        let args = request.arguments.unwrap_or_default();
        let result = match dispatch::call(&exec, tool, args).await {
            Ok(body) => CallToolResult::structured(body),
            Err(body) => CallToolResult::structured_error(body),
        };
        Ok(result.into())
    }
}
