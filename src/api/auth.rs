//! Who may call what. Tokens (from `hub.toml` or `AGENT_HUB_TOKEN`) carry a role:
//! `observer` (read-only: list, read, term_read, stream, resolve), `operator` (every session,
//! agent and task operation) or `admin` (everything, including registry changes). A token
//! travels as `Authorization: Bearer`, or for WebSockets as the subprotocol
//! `agent-hub.bearer.<token>` (never in the query string). Tokens are compared in constant
//! time. With no token configured the hub is open, and `serve` then refuses to listen beyond
//! loopback. WebSocket upgrades from a foreign `Origin` are refused either way.
//!
//! Every request gets an [`Actor`] extension (token name plus `X-Agent-Id`) for the audit trail.
//! A per-agent credential (see [`crate::credentials`]) makes the caller that agent, scoped to
//! its team (see [`super::scope`]).

use super::error::ApiError;
use crate::actor::{Actor, Role};
use crate::error::HubError;
use crate::hub::Hub;
use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Marks a request that came in over the hub's unix socket (see `api::serve_unix`).
#[derive(Debug, Clone, Copy)]
pub struct OverUnixSocket;

/// WebSocket subprotocol prefix that carries a token.
pub const WS_TOKEN_PROTOCOL: &str = "agent-hub.bearer.";

/// Equal-time comparison: the time taken does not depend on where the inputs differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// The role a request needs: its route's, from the one route table ([`super::routes`]); a
/// request that matches no route needs an operator (it then gets a 404 or 405).
pub fn required_role(method: &Method, path: &str) -> Option<Role> {
    super::routes::find(method, path).map_or(Some(super::routes::UNMATCHED_ROLE), |r| r.role)
}

fn presented_token(req: &Request) -> Option<String> {
    if let Some(value) = req.headers().get(header::AUTHORIZATION) {
        return value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| t.trim().to_string());
    }
    let protocols = req
        .headers()
        .get(header::SEC_WEBSOCKET_PROTOCOL)?
        .to_str()
        .ok()?;
    protocols
        .split(',')
        .find_map(|p| p.trim().strip_prefix(WS_TOKEN_PROTOCOL).map(String::from))
}

/// Whether the request's `Host` names this machine's loopback (no `Host`, as HTTP/1.0 allows,
/// is let through: a browser always sends one).
fn loopback_host(req: &Request) -> bool {
    let Some(host) = req.headers().get(header::HOST) else {
        return true;
    };
    let host = host.to_str().unwrap_or("");
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether a WebSocket `Origin` may connect: none (not a browser), or this host.
fn origin_allowed(req: &Request) -> bool {
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return true;
    };
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let origin = origin.to_str().unwrap_or("");
    let origin_host = origin.split("://").nth(1).unwrap_or("");
    host.is_some_and(|h| h == origin_host)
}

/// The middleware: authenticates, authorises, checks WebSocket origins, attaches the [`Actor`].
pub async fn authorize(State(hub): State<Hub>, mut req: Request, next: Next) -> Response {
    let is_upgrade = req.headers().contains_key(header::UPGRADE);
    if is_upgrade && !origin_allowed(&req) {
        return ApiError(HubError::Forbidden {
            message: "WebSocket connections from another origin are refused".into(),
        })
        .into_response();
    }
    // An agent credential: the caller is that agent (no header can say otherwise), scoped
    // to its team (see `crate::scope`).
    let presented = presented_token(&req);
    if let Some(who) = presented
        .as_deref()
        .and_then(|t| hub.credentials().identify(t))
    {
        let route = super::routes::find(req.method(), req.uri().path());
        if let Err(e) = super::scope::check_route(&hub, &who, route, req.uri().path()) {
            return ApiError(e).into_response();
        }
        req.extensions_mut().insert(Actor::of_agent(who));
        return next.run(req).await;
    }
    if presented
        .as_deref()
        .is_some_and(|t| t.starts_with(crate::credentials::TOKEN_PREFIX))
    {
        return ApiError(HubError::Unauthorized {
            message:
                "this agent credential is not valid any more (the agent stopped or was restarted)"
                    .into(),
        })
        .into_response();
    }
    // The unix socket is mounted into agent containers: nothing there is anonymous, even on a
    // hub with no tokens (which is open on loopback TCP only).
    let over_unix_socket = req.extensions().get::<OverUnixSocket>().is_some();
    let open_hub = hub.config().tokens.is_empty();
    if over_unix_socket && open_hub && required_role(req.method(), req.uri().path()).is_some() {
        return ApiError(HubError::Unauthorized {
            message: "a credential is required on the hub's unix socket (AGENT_HUB_TOKEN or AGENT_HUB_TOKEN_FILE)".into(),
        })
        .into_response();
    }
    let agent_id = req
        .headers()
        .get("x-agent-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let tokens = &hub.config().tokens;
    let needed = required_role(req.method(), req.uri().path());
    if tokens.is_empty() && !loopback_host(&req) {
        // An open hub answers loopback names only: a web page that re-points its own name at
        // 127.0.0.1 (DNS rebinding) must not drive terminals.
        return ApiError(HubError::Forbidden {
            message: "this hub has no API token, so it only answers requests addressed to a loopback host (127.0.0.1, ::1, localhost)".into(),
        })
        .into_response();
    }
    let actor = if tokens.is_empty() {
        Actor {
            token_name: "anonymous".into(),
            agent_id,
            role: Some(Role::Admin),
            agent: None,
        }
    } else {
        let matched = presented.as_deref().and_then(|p| {
            // Check every token so the time taken does not say which one matched.
            let mut found = None;
            for t in tokens {
                if constant_time_eq(t.token.as_bytes(), p.as_bytes()) {
                    found = Some(t);
                }
            }
            found
        });
        match (needed, matched) {
            (None, _) => Actor {
                token_name: "anonymous".into(),
                agent_id,
                role: None,
                agent: None,
            },
            (Some(_), None) => {
                let message = if presented.is_some() {
                    "invalid token"
                } else {
                    "a token is required (Authorization: Bearer ...)"
                };
                return ApiError(HubError::Unauthorized {
                    message: message.into(),
                })
                .into_response();
            }
            (Some(role), Some(token)) if token.role < role => {
                return ApiError(HubError::Forbidden {
                    message: format!(
                        "token '{}' has role {:?}; this needs {:?}",
                        token.name, token.role, role
                    )
                    .to_lowercase(),
                })
                .into_response();
            }
            (Some(_), Some(token)) => Actor {
                token_name: token.name.clone(),
                agent_id,
                role: Some(token.role),
                agent: None,
            },
        }
    };
    req.extensions_mut().insert(actor);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn routes_need_the_right_role() {
        use Method as M;
        let table = [
            (M::GET, "/health", None),
            (M::POST, "/mcp", Some(Role::Observer)),
            (M::DELETE, "/mcp", Some(Role::Observer)),
            (M::GET, "/", None),
            (M::GET, "/web/app.js", None),
            (M::GET, "/favicon.ico", None),
            (M::POST, "/", Some(Role::Operator)),
            (M::GET, "/v1/whoami", Some(Role::Observer)),
            (M::GET, "/v1/pty/sessions", Some(Role::Observer)),
            (M::GET, "/v1/pty/sessions/x/read", Some(Role::Observer)),
            (M::GET, "/v1/pty/sessions/x/stream", Some(Role::Observer)),
            (
                M::POST,
                "/v1/pty/sessions/x/term_read",
                Some(Role::Observer),
            ),
            (M::POST, "/v1/pty/resolve", Some(Role::Observer)),
            (M::POST, "/v1/pty/sessions", Some(Role::Operator)),
            (
                M::POST,
                "/v1/pty/sessions/x/send_line",
                Some(Role::Operator),
            ),
            (M::POST, "/v1/pty/sessions/x/talk", Some(Role::Operator)),
            (M::DELETE, "/v1/pty/sessions/x", Some(Role::Operator)),
            (M::POST, "/v1/agents/a/start", Some(Role::Operator)),
            (M::POST, "/v1/tasks", Some(Role::Operator)),
            (M::POST, "/v1/tasks/task_1/wait", Some(Role::Observer)),
            (M::DELETE, "/v1/tasks/task_1", Some(Role::Operator)),
            (M::GET, "/v1/events", Some(Role::Observer)),
            (M::POST, "/v1/pty/register", Some(Role::Admin)),
            (M::POST, "/v1/pty/update-ownership", Some(Role::Admin)),
            (M::DELETE, "/v1/pty/reset", Some(Role::Admin)),
            (M::GET, "/v1/agents/a/state", Some(Role::Observer)),
            (M::GET, "/v1/pty/sessions/x/state", Some(Role::Observer)),
            (M::GET, "/v1/policies", Some(Role::Observer)),
            (M::GET, "/v1/policies/check", Some(Role::Observer)),
            (M::POST, "/v1/policies/reload", Some(Role::Admin)),
            (M::GET, "/v1/pty-traffic/events", Some(Role::Operator)),
            (M::GET, "/v1/pty-traffic/stream", Some(Role::Operator)),
            (M::GET, "/v1/pty-traffic/health", Some(Role::Operator)),
            (
                M::POST,
                "/v1/pty-traffic/storage/cleanup",
                Some(Role::Admin),
            ),
        ];
        for (method, path, role) in table {
            assert_eq!(required_role(&method, path), role, "{method} {path}");
        }
    }
}
