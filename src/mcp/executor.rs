//! The one way MCP actions reach the hub: a REST request, executed either by the hub's own
//! router in-process ([`InProcess`], for `/mcp`: the caller's `Authorization` travels with it,
//! so auth, audit, the guard and redaction apply exactly as for REST) or over HTTP to a running
//! hub ([`OverHttp`], for `agent-hub mcp`). Either way the reply is the REST API's JSON.

use std::future::Future;

use axum::http::{header, HeaderMap, HeaderValue, Method, Request};
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::client::HubClient;

/// One REST request: `path` includes the query string.
#[derive(Debug, Clone, PartialEq)]
pub struct RestCall {
    pub method: Method,
    pub path: String,
    pub body: Option<Value>,
}

impl RestCall {
    pub fn new(method: &str, path: String, body: Option<Value>) -> Self {
        RestCall {
            method: Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET),
            path,
            body,
        }
    }
}

/// Executes REST requests: `Ok` is a success reply's body, `Err` an error reply's
/// (`{ok:false, error_code, message, ...}`).
pub trait Executor: Send + Sync + 'static {
    fn execute(&self, call: RestCall) -> impl Future<Output = Result<Value, Value>> + Send;

    /// Which transport serves the tools (for `help`).
    fn transport(&self) -> &'static str;
}

/// The headers of the MCP request that the REST request carries: who is calling, and the
/// `Host` an open hub checks.
const FORWARDED: [header::HeaderName; 2] = [header::AUTHORIZATION, header::HOST];

/// The hub's router, called in-process with the MCP request's credentials.
#[derive(Clone)]
pub struct InProcess {
    router: axum::Router,
    headers: HeaderMap,
}

impl InProcess {
    /// An executor for `router`, with no caller yet (see [`InProcess::for_caller`]).
    pub fn new(router: axum::Router) -> Self {
        InProcess {
            router,
            headers: HeaderMap::new(),
        }
    }

    /// The same router, calling with the credentials of the MCP request `headers`.
    pub fn for_caller(&self, headers: &HeaderMap) -> Self {
        let mut forwarded = HeaderMap::new();
        for name in FORWARDED {
            if let Some(v) = headers.get(&name) {
                forwarded.insert(name, v.clone());
            }
        }
        if let Some(v) = headers.get("x-agent-id") {
            forwarded.insert("x-agent-id", v.clone());
        }
        InProcess {
            router: self.router.clone(),
            headers: forwarded,
        }
    }
}

impl Executor for InProcess {
    async fn execute(&self, call: RestCall) -> Result<Value, Value> {
        let mut req = Request::builder().method(call.method).uri(&call.path);
        if let Some(h) = req.headers_mut() {
            h.extend(self.headers.clone());
            if call.body.is_some() {
                h.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
            }
        }
        let body = match &call.body {
            Some(v) => axum::body::Body::from(v.to_string()),
            None => axum::body::Body::empty(),
        };
        let req = req.body(body).map_err(|e| internal(e.to_string()))?;
        let resp = match self.router.clone().oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .map_err(|e| internal(e.to_string()))?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| internal(format!("the hub's reply is not JSON: {e}")))?;
        if status.is_success() {
            Ok(value)
        } else {
            Err(value)
        }
    }

    fn transport(&self) -> &'static str {
        "streamable-http"
    }
}

fn internal(message: String) -> Value {
    json!({ "ok": false, "error_code": "INTERNAL", "message": message })
}

/// HTTP to a running hub, as every CLI command talks to it.
#[derive(Clone)]
pub struct OverHttp {
    client: HubClient,
}

impl OverHttp {
    pub fn new(client: HubClient) -> Self {
        OverHttp { client }
    }
}

impl Executor for OverHttp {
    async fn execute(&self, call: RestCall) -> Result<Value, Value> {
        self.client
            .call::<Value>(call.method, &call.path, call.body.as_ref())
            .await
            .map_err(|e| serde_json::to_value(e.body).unwrap_or_default())
    }

    fn transport(&self) -> &'static str {
        "stdio"
    }
}
