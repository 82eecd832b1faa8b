//! Every route of the hub, declared once: its method and path, the role it needs, what the audit
//! log records for it, and its handler. The router is built from this table, and the auth and
//! audit layers look a request up in it (so a route cannot be added without saying who may call
//! it and whether it is audited); the OpenAPI coverage test reads it too.

use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};

use super::{agents, bridge, events, openapi, policies, registry, routing, sessions, stream};
use super::{tasks, traffic, web};
use crate::actor::Role;
use crate::hub::Hub;

/// What the audit log records for a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audit {
    /// Nothing (reads and waits).
    No,
    /// Every request, as this action, before its reply.
    As(&'static str),
    /// Only a request for raw (unredacted) output, as `<name>_raw`.
    Raw(&'static str),
}

/// One route.
pub struct Route {
    /// `None`: every method (a service that routes by method itself).
    pub method: Option<Method>,
    /// axum's path template (`{id}`, `{*path}`).
    pub path: &'static str,
    /// The role a caller needs; `None`: open without a token.
    pub role: Option<Role>,
    pub audit: Audit,
    /// The handler; `None` for a service mounted on its own (`/mcp`, see [`super::router`]).
    pub handler: Option<fn() -> MethodRouter<Hub>>,
}

/// The role a request that matches no route needs (it gets a 404 or 405 once authorised).
pub const UNMATCHED_ROLE: Role = Role::Operator;

macro_rules! route {
    ($method:ident $path:literal, $role:expr, $audit:expr, $handler:path) => {
        Route {
            method: Some(Method::$method),
            path: $path,
            role: $role,
            audit: $audit,
            handler: Some(|| on(MethodFilter::$method, $handler)),
        }
    };
}

use Audit::{As, No, Raw};
const OPEN: Option<Role> = None;
const OBSERVER: Option<Role> = Some(Role::Observer);
const OPERATOR: Option<Role> = Some(Role::Operator);
const ADMIN: Option<Role> = Some(Role::Admin);

/// The table. Reads need an observer, changes an operator; changing who owns what, the
/// registry, policies and the audit log's storage need an admin.
pub static ROUTES: &[Route] = &[
    route!(GET "/health", OPEN, No, super::health),
    route!(GET "/openapi.json", OBSERVER, No, openapi::document),
    route!(GET "/metrics", OBSERVER, No, crate::metrics::http::scrape),
    // The dashboard's files are static (no data): the page loads, then signs in.
    route!(GET "/", OPEN, No, web::index),
    route!(GET "/favicon.ico", OPEN, No, web::favicon),
    route!(GET "/web/{*path}", OPEN, No, web::asset),
    route!(GET "/v1/whoami", OBSERVER, No, web::whoami),
    // Any valid token opens an MCP session; each tool call then needs its REST route's role.
    Route {
        method: None,
        path: "/mcp",
        role: OBSERVER,
        audit: No,
        handler: None,
    },
    route!(GET "/v1/pty/sessions", OBSERVER, No, sessions::list_sessions),
    route!(POST "/v1/pty/sessions", OPERATOR, As("create"), sessions::create_session),
    route!(GET "/v1/pty/sessions/{id}", OBSERVER, No, sessions::get_session),
    route!(DELETE "/v1/pty/sessions/{id}", OPERATOR, As("kill"), sessions::kill_session),
    route!(POST "/v1/pty/sessions/{id}/send_line", OPERATOR, As("send_line"), sessions::send_line),
    route!(POST "/v1/pty/sessions/{id}/keys", OPERATOR, As("keys"), sessions::send_keys),
    route!(POST "/v1/pty/sessions/{id}/signal", OPERATOR, As("signal"), sessions::signal),
    route!(GET "/v1/pty/sessions/{id}/read", OBSERVER, Raw("read"), sessions::read),
    route!(POST "/v1/pty/sessions/{id}/talk", OPERATOR, As("talk"), sessions::talk),
    route!(POST "/v1/pty/sessions/{id}/resize", OPERATOR, As("resize"), sessions::resize),
    route!(POST "/v1/pty/sessions/{id}/term_read", OBSERVER, No, sessions::term_read),
    route!(GET "/v1/pty/sessions/{id}/stream", OBSERVER, Raw("stream"), stream::stream),
    route!(GET "/v1/pty/sessions/{id}/state", OBSERVER, No, policies::session_state),
    route!(GET "/v1/agents/{id}/state", OBSERVER, No, policies::agent_state),
    route!(GET "/v1/policies", OBSERVER, No, policies::list_policies),
    route!(GET "/v1/policies/check", OBSERVER, No, policies::check),
    route!(POST "/v1/policies/reload", ADMIN, As("policies_reload"), policies::reload),
    route!(POST "/v1/pty/resolve", OBSERVER, No, routing::resolve_route),
    route!(POST "/v1/pty/send_line_to_agent", OPERATOR, As("send_line_to_agent"), routing::send_line_to_agent),
    route!(POST "/v1/pty/update-ownership", ADMIN, As("update_ownership"), routing::update_ownership),
    route!(POST "/v1/pty/register", ADMIN, As("register"), registry::register),
    route!(DELETE "/v1/pty/unregister/{id}", ADMIN, As("unregister"), registry::unregister),
    route!(POST "/v1/pty/heartbeat", OPERATOR, As("heartbeat"), registry::heartbeat_many),
    route!(POST "/v1/pty/heartbeat/{id}", OPERATOR, As("heartbeat"), registry::heartbeat_one),
    route!(DELETE "/v1/pty/reset", ADMIN, As("reset"), registry::reset),
    // The bridge API, for hubs that register this hub's sessions.
    route!(POST "/pty/write", OPERATOR, As("bridge_write"), bridge::write),
    route!(POST "/pty/read", OBSERVER, No, bridge::read),
    route!(POST "/pty/talk", OPERATOR, As("bridge_talk"), bridge::talk),
    route!(POST "/pty/buffer", OBSERVER, No, bridge::buffer),
    route!(GET "/pty/list", OBSERVER, No, bridge::list),
    route!(GET "/v1/agents", OBSERVER, No, agents::list_agents),
    route!(GET "/v1/agents/{id}", OBSERVER, No, agents::get_agent),
    route!(POST "/v1/agents/{id}/start", OPERATOR, As("agent_start"), agents::start_agent),
    route!(POST "/v1/agents/{id}/stop", OPERATOR, As("agent_stop"), agents::stop_agent),
    route!(POST "/v1/agents/{id}/restart", OPERATOR, As("agent_restart"), agents::restart_agent),
    route!(GET "/v1/tasks", OBSERVER, No, tasks::list_tasks),
    route!(POST "/v1/tasks", OPERATOR, As("task_create"), tasks::create_task),
    route!(GET "/v1/tasks/{id}", OBSERVER, No, tasks::get_task),
    route!(DELETE "/v1/tasks/{id}", OPERATOR, As("task_cancel"), tasks::cancel_task),
    route!(POST "/v1/tasks/{id}/wait", OBSERVER, No, tasks::wait_task),
    route!(GET "/v1/events", OBSERVER, No, events::events),
    // The audit log holds (redacted) commands of every session: operators read it, admins prune.
    route!(GET "/v1/pty-traffic/events", OPERATOR, No, traffic::events),
    route!(GET "/v1/pty-traffic/events/{id}", OPERATOR, No, traffic::event),
    route!(GET "/v1/pty-traffic/sessions", OPERATOR, No, traffic::sessions),
    route!(GET "/v1/pty-traffic/sessions/{id}", OPERATOR, No, traffic::session),
    route!(GET "/v1/pty-traffic/stats", OPERATOR, No, traffic::stats),
    route!(GET "/v1/pty-traffic/blocked", OPERATOR, No, traffic::blocked),
    route!(GET "/v1/pty-traffic/health", OPERATOR, No, traffic::health),
    route!(POST "/v1/pty-traffic/storage/cleanup", ADMIN, As("audit_cleanup"), traffic::cleanup),
    route!(GET "/v1/pty-traffic/stream", OPERATOR, No, traffic::stream),
];

/// The route a request matches, if any.
pub fn find(method: &Method, path: &str) -> Option<&'static Route> {
    ROUTES
        .iter()
        .find(|r| r.method.as_ref().is_none_or(|m| m == method) && matches_template(r.path, path))
}

/// Whether `path` fits the template: `{x}` takes one non-empty segment, `{*x}` the rest.
fn matches_template(template: &str, path: &str) -> bool {
    let mut want = template.split('/');
    let mut have = path.split('/');
    loop {
        match (want.next(), have.next()) {
            (None, None) => return true,
            (Some(w), Some(h)) if w.starts_with("{*") => {
                return !h.is_empty() || have.next().is_some()
            }
            (Some(w), Some(h)) if w.starts_with('{') => {
                if h.is_empty() {
                    return false;
                }
            }
            (Some(w), Some(h)) if w == h => {}
            _ => return false,
        }
    }
}

/// The router of every route that has a handler.
pub fn router() -> axum::Router<Hub> {
    ROUTES
        .iter()
        .filter_map(|r| Some((r.path, r.handler?)))
        .fold(axum::Router::new(), |router, (path, handler)| {
            router.route(path, handler())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_their_paths_only() {
        assert!(matches_template(
            "/v1/pty/sessions/{id}",
            "/v1/pty/sessions/x"
        ));
        assert!(!matches_template(
            "/v1/pty/sessions/{id}",
            "/v1/pty/sessions/"
        ));
        assert!(!matches_template(
            "/v1/pty/sessions/{id}",
            "/v1/pty/sessions/x/read"
        ));
        assert!(matches_template("/web/{*path}", "/web/vendor/xterm.mjs"));
        assert!(!matches_template("/web/{*path}", "/web/"));
        assert!(matches_template("/", "/"));
        assert!(!matches_template("/", "/x"));
    }

    #[test]
    fn every_route_is_declared_once() {
        let mut seen = std::collections::BTreeSet::new();
        for r in ROUTES {
            let method = r.method.as_ref().map_or("*".to_string(), Method::to_string);
            assert!(seen.insert((method, r.path)), "{} declared twice", r.path);
            assert!(
                r.role.is_some() || r.audit == Audit::No,
                "{}: an open route cannot change anything",
                r.path
            );
            let changes = r.method.as_ref().is_some_and(|m| m != Method::GET);
            assert!(
                !changes || r.role.is_some(),
                "{}: a route that changes something needs a role",
                r.path
            );
        }
    }
}
