//! Who may call what. Every listener asks for a credential, loopback included: the owner's
//! admin token (kept in the data dir, see [`crate::access`]), a person's token (`[[tokens]]`
//! in `hub.toml`, or `AGENT_HUB_TOKEN` given to `serve`), or an agent's credential. Tokens carry a role:
//! `observer` (read-only: list, read, term_read, stream, resolve), `operator` (every session,
//! agent and task operation) or `admin` (everything, including registry changes). A token
//! travels as `Authorization: Bearer`, or for WebSockets as the subprotocol
//! `agent-hub.bearer.<token>` (never in the query string). Tokens are compared in constant
//! time. Only `auth = "none"` makes a caller without a credential an (anonymous) admin, on
//! loopback TCP only. WebSocket upgrades from a foreign `Origin` are refused either way.
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

pub use crate::http_client::WS_TOKEN_PROTOCOL;

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
        return refuse(HubError::Forbidden {
            message: "WebSocket connections from another origin are refused".into(),
        });
    }
    // An agent credential: the caller is that agent (no header can say otherwise), scoped
    // to its team (see `crate::scope`).
    let presented = presented_token(&req);
    if let Some(who) = presented
        .as_deref()
        .and_then(|t| hub.credentials().identify(t))
    {
        let access = super::routes::find(req.method(), req.uri().path()).map(|r| r.agents);
        if let Err(e) = super::scope::check_route(&hub, &who, access, req.uri().path()) {
            return refuse(e);
        }
        req.extensions_mut().insert(Actor::of_agent(who));
        return next.run(req).await;
    }
    let agent_id = req
        .headers()
        .get("x-agent-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let actor = match person(&hub, &req, presented.as_deref()) {
        Ok(Caller { name, role }) => Actor {
            token_name: name,
            agent_id,
            role,
            agent: None,
        },
        Err(e) => return refuse(e),
    };
    req.extensions_mut().insert(actor);
    next.run(req).await
}

fn refuse(e: HubError) -> Response {
    ApiError(e).into_response()
}

/// A caller that is not an agent: a token's holder, or anonymous.
struct Caller {
    name: String,
    role: Option<Role>,
}

impl Caller {
    fn anonymous(role: Option<Role>) -> Self {
        Caller {
            name: "anonymous".into(),
            role,
        }
    }
}

/// Who a request without an agent credential comes from, or why it is refused. Every listener
/// asks for a credential unless `auth = "none"` (loopback TCP only: the unix socket is mounted
/// into agent containers, so nothing there is anonymous).
fn person(hub: &Hub, req: &Request, presented: Option<&str>) -> Result<Caller, HubError> {
    let needed = required_role(req.method(), req.uri().path());
    let over_unix_socket = req.extensions().get::<OverUnixSocket>().is_some();
    let open = hub.access().anonymous_allowed() && !over_unix_socket;
    if open && !loopback_host(req) {
        // An open hub answers loopback names only: a web page that re-points its own name at
        // 127.0.0.1 (DNS rebinding) must not drive terminals.
        return Err(HubError::Forbidden {
            message: "this hub runs with auth = \"none\", so it only answers requests addressed to a loopback host (127.0.0.1, ::1, localhost)".into(),
        });
    }
    let Some(presented) = presented else {
        return match needed {
            None => Ok(Caller::anonymous(open.then_some(Role::Admin))),
            Some(_) if open => Ok(Caller::anonymous(Some(Role::Admin))),
            Some(_) => Err(HubError::Unauthorized {
                message: missing_credential(over_unix_socket).into(),
            }),
        };
    };
    if presented.starts_with(crate::credentials::TOKEN_PREFIX) {
        return Err(HubError::Unauthorized {
            message:
                "this agent credential is not valid any more (the agent stopped or was restarted)"
                    .into(),
        });
    }
    let Some(holder) = hub.access().holder(presented) else {
        return match needed {
            None => Ok(Caller::anonymous(None)),
            Some(_) => Err(HubError::Unauthorized {
                message: "invalid token: it is not the owner's token (it may have been rotated) nor one of [[tokens]]".into(),
            }),
        };
    };
    if let Some(role) = needed.filter(|&role| holder.role < role) {
        return Err(HubError::Forbidden {
            message: format!(
                "token '{}' has role {}; this needs {}",
                holder.name,
                role_name(holder.role),
                role_name(role)
            ),
        });
    }
    Ok(Caller {
        name: holder.name,
        role: Some(holder.role),
    })
}

fn missing_credential(over_unix_socket: bool) -> &'static str {
    if over_unix_socket {
        "a credential is required on the hub's unix socket (AGENT_HUB_TOKEN or AGENT_HUB_TOKEN_FILE)"
    } else {
        "a credential is required (Authorization: Bearer <token>): the owner's token is in the file admin-token of the hub's data dir, which the agent-hub CLI reads by itself on the hub's machine; people's tokens are [[tokens]] in hub.toml"
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Observer => "observer",
        Role::Operator => "operator",
        Role::Admin => "admin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (M::GET, "/sw.js", None),
            (M::GET, "/web/manifest.webmanifest", None),
            (M::POST, "/", Some(Role::Operator)),
            (M::GET, "/v1/whoami", Some(Role::Observer)),
            (M::POST, "/v1/auth/signin", None),
            (M::POST, "/v1/auth/signin-link", Some(Role::Admin)),
            (M::POST, "/v1/auth/rotate", Some(Role::Admin)),
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
