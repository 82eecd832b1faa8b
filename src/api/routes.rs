//! Every route of the hub, declared once: its method and path, the role it needs, what the audit
//! log records for it, and its handler. The router is built from this table, and the auth and
//! audit layers look a request up in it (so a route cannot be added without saying who may call
//! it and whether it is audited); the OpenAPI coverage test reads it too.

use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};

use super::{
    access, agents, answer, bridge, budgets, events, external_sessions, git, land, openapi,
    owner_routing, policies, previews, sessions, stream,
};
use super::{notify, review, tasks, traffic, usage, web};
use crate::actor::Role;
use crate::hub::Hub;
use crate::scope::AgentAccess;

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
    /// What an agent credential may do here (see [`crate::scope`]).
    pub agents: AgentAccess,
    /// The handler; `None` for a service mounted on its own (`/mcp`, see [`super::router`]).
    pub handler: Option<fn() -> MethodRouter<Hub>>,
}

/// The role a request that matches no route needs (it gets a 404 or 405 once authorised).
pub const UNMATCHED_ROLE: Role = Role::Operator;

macro_rules! route {
    ($method:ident $path:literal, $role:expr, $audit:expr, $agents:expr, $handler:path) => {
        Route {
            method: Some(Method::$method),
            path: $path,
            role: $role,
            audit: $audit,
            agents: $agents,
            handler: Some(|| on(MethodFilter::$method, $handler)),
        }
    };
}

use Audit::{As, No, Raw};
const OPEN: Option<Role> = None;
const OBSERVER: Option<Role> = Some(Role::Observer);
const OPERATOR: Option<Role> = Some(Role::Operator);
const ADMIN: Option<Role> = Some(Role::Admin);
const ANY: AgentAccess = AgentAccess::Filtered;
const NEVER: AgentAccess = AgentAccess::Never;
const LOOK: AgentAccess = AgentAccess::Look;
const TYPE: AgentAccess = AgentAccess::Type;
const CONTROL: AgentAccess = AgentAccess::Control;
const SEND_TO_AGENT: AgentAccess = AgentAccess::SendToAgent;
const OWN: AgentAccess = AgentAccess::Own;
const OWN_IN_HANDLER: AgentAccess = AgentAccess::OwnInHandler;
const MERGE: AgentAccess = AgentAccess::Merge;

/// The table. Reads need an observer, changes an operator; changing who owns what, the
/// external sessions, policies and the audit log's storage need an admin.
pub static ROUTES: &[Route] = &[
    route!(GET "/health", OPEN, No, ANY, super::health),
    route!(GET "/openapi.json", OBSERVER, No, ANY, openapi::document),
    route!(GET "/metrics", OBSERVER, No, NEVER, crate::api::metrics::scrape),
    // The dashboard's files are static (no data): the page loads, then signs in.
    route!(GET "/", OPEN, No, ANY, web::index),
    route!(GET "/favicon.ico", OPEN, No, ANY, web::favicon),
    // The service worker lives at the root so that its scope is the whole page.
    route!(GET "/sw.js", OPEN, No, ANY, web::service_worker),
    route!(GET "/web/{*path}", OPEN, No, ANY, web::asset),
    route!(GET "/v1/whoami", OBSERVER, No, ANY, web::whoami),
    // A sign-in link's one-time code is the credential here; the owner's token rotates.
    route!(POST "/v1/auth/signin", OPEN, No, ANY, access::signin),
    route!(POST "/v1/auth/signin-link", ADMIN, As("signin_link"), NEVER, access::signin_link),
    route!(POST "/v1/auth/rotate", ADMIN, As("token_rotate"), NEVER, access::rotate),
    // An answer link's signed token is the credential here (`notify_actions = true`).
    route!(GET "/answer/{session}/{token}", OPEN, No, NEVER, answer::page),
    route!(POST "/answer/{session}/{token}", OPEN, As("answer_link"), NEVER, answer::answer),
    // Any valid token opens an MCP session; each tool call then needs its REST route's role.
    Route {
        method: None,
        path: "/mcp",
        role: OBSERVER,
        audit: No,
        agents: ANY,
        handler: None,
    },
    route!(GET "/v1/pty/sessions", OBSERVER, No, ANY, sessions::list_sessions),
    route!(POST "/v1/pty/sessions", OPERATOR, As("create"), NEVER, sessions::create_session),
    route!(GET "/v1/pty/sessions/{id}", OBSERVER, No, LOOK, sessions::get_session),
    route!(DELETE "/v1/pty/sessions/{id}", OPERATOR, As("kill"), NEVER, sessions::kill_session),
    route!(POST "/v1/pty/sessions/{id}/send_line", OPERATOR, As("send_line"), TYPE, sessions::send_line),
    route!(POST "/v1/pty/sessions/{id}/keys", OPERATOR, As("keys"), TYPE, sessions::send_keys),
    route!(POST "/v1/pty/sessions/{id}/signal", OPERATOR, As("signal"), NEVER, sessions::signal),
    route!(GET "/v1/pty/sessions/{id}/read", OBSERVER, Raw("read"), LOOK, sessions::read),
    route!(POST "/v1/pty/sessions/{id}/talk", OPERATOR, As("talk"), TYPE, sessions::talk),
    route!(POST "/v1/pty/sessions/{id}/resize", OPERATOR, As("resize"), TYPE, sessions::resize),
    route!(POST "/v1/pty/sessions/{id}/term_read", OBSERVER, No, LOOK, sessions::term_read),
    route!(GET "/v1/pty/sessions/{id}/stream", OBSERVER, Raw("stream"), LOOK, stream::stream),
    route!(GET "/v1/pty/sessions/{id}/state", OBSERVER, No, LOOK, policies::session_state),
    route!(GET "/v1/agents/{id}/state", OBSERVER, No, LOOK, policies::agent_state),
    route!(POST "/v1/pty/sessions/{id}/hook", OPERATOR, No, OWN, policies::session_hook),
    route!(POST "/v1/agents/{id}/hook", OPERATOR, No, OWN, policies::agent_hook),
    route!(GET "/v1/policies", OBSERVER, No, NEVER, policies::list_policies),
    route!(GET "/v1/policies/check", OBSERVER, No, NEVER, policies::check),
    route!(POST "/v1/policies/reload", ADMIN, As("policies_reload"), NEVER, policies::reload),
    route!(POST "/v1/pty/resolve", OBSERVER, No, ANY, owner_routing::resolve_route),
    route!(POST "/v1/pty/send_line_to_agent", OPERATOR, As("send_line_to_agent"), SEND_TO_AGENT, owner_routing::send_line_to_agent),
    route!(POST "/v1/pty/update-ownership", ADMIN, As("update_ownership"), NEVER, owner_routing::update_ownership),
    route!(POST "/v1/pty/register", ADMIN, As("register"), NEVER, external_sessions::register),
    route!(DELETE "/v1/pty/unregister/{id}", ADMIN, As("unregister"), NEVER, external_sessions::unregister),
    route!(POST "/v1/pty/heartbeat", OPERATOR, As("heartbeat"), NEVER, external_sessions::heartbeat_many),
    route!(POST "/v1/pty/heartbeat/{id}", OPERATOR, As("heartbeat"), NEVER, external_sessions::heartbeat_one),
    route!(DELETE "/v1/pty/reset", ADMIN, As("reset"), NEVER, external_sessions::reset),
    // The bridge API, for hubs that register this hub's sessions.
    route!(POST "/pty/write", OPERATOR, As("bridge_write"), NEVER, bridge::write),
    route!(POST "/pty/read", OBSERVER, No, NEVER, bridge::read),
    route!(POST "/pty/talk", OPERATOR, As("bridge_talk"), NEVER, bridge::talk),
    route!(POST "/pty/buffer", OBSERVER, No, NEVER, bridge::buffer),
    route!(GET "/pty/list", OBSERVER, No, NEVER, bridge::list),
    route!(GET "/v1/agents", OBSERVER, No, ANY, agents::list_agents),
    route!(GET "/v1/engines", OBSERVER, No, NEVER, agents::engines),
    route!(GET "/v1/agents/{id}", OBSERVER, No, LOOK, agents::get_agent),
    route!(POST "/v1/agents/{id}/start", OPERATOR, As("agent_start"), CONTROL, agents::start_agent),
    route!(POST "/v1/agents/{id}/stop", OPERATOR, As("agent_stop"), CONTROL, agents::stop_agent),
    route!(POST "/v1/agents/{id}/restart", OPERATOR, As("agent_restart"), CONTROL, agents::restart_agent),
    route!(GET "/v1/agents/{id}/changes", OBSERVER, No, LOOK, agents::agent_changes),
    route!(GET "/v1/agents/{id}/work", OBSERVER, No, LOOK, agents::agent_work),
    route!(POST "/v1/agents/{id}/review", OPERATOR, As("agent_review"), TYPE, review::review_agent),
    route!(GET "/v1/agents/{id}/usage", OBSERVER, No, LOOK, usage::agent_usage),
    route!(GET "/v1/usage", OBSERVER, No, ANY, usage::usage),
    // Webhooks: their names and counts for observers; a test message is the admin's.
    route!(GET "/v1/notify", OBSERVER, No, NEVER, notify::status),
    route!(POST "/v1/notify/test", ADMIN, As("notify_test"), NEVER, notify::test),
    route!(GET "/v1/budgets", OBSERVER, No, ANY, budgets::budgets),
    route!(GET "/v1/agents/{id}/budget", OBSERVER, No, LOOK, budgets::agent_budget),
    route!(PUT "/v1/agents/{id}/budget", ADMIN, As("budget_set"), NEVER, budgets::set_agent_budget),
    route!(DELETE "/v1/agents/{id}/budget", ADMIN, As("budget_reset"), NEVER, budgets::reset_agent_budget),
    route!(POST "/v1/agents/{id}/budget/lift", ADMIN, As("budget_lift"), NEVER, budgets::lift_agent_budget),
    route!(GET "/v1/teams/{team}/budget", OBSERVER, No, NEVER, budgets::team_budget),
    route!(PUT "/v1/teams/{team}/budget", ADMIN, As("budget_set"), NEVER, budgets::set_team_budget),
    route!(DELETE "/v1/teams/{team}/budget", ADMIN, As("budget_reset"), NEVER, budgets::reset_team_budget),
    route!(POST "/v1/teams/{team}/budget/lift", ADMIN, As("budget_lift"), NEVER, budgets::lift_team_budget),
    // Landing an agent's work: a person, or a leader with `may_merge` for its team's agents.
    route!(POST "/v1/agents/{id}/merge", OPERATOR, As("agent_merge"), MERGE, land::merge),
    route!(POST "/v1/agents/{id}/update", OPERATOR, As("agent_update"), MERGE, land::update),
    route!(POST "/v1/agents/{id}/push", OPERATOR, As("agent_push"), MERGE, land::push),
    route!(DELETE "/v1/agents/{id}/workspace", OPERATOR, As("workspace_remove"), NEVER, agents::remove_workspace),
    // The agent's workspace over git's smart HTTP: its own credential fetches and pushes its
    // branch, people fetch. The handlers admit and audit themselves (a pack is not a record).
    route!(GET "/v1/agents/{id}/git/info/refs", OBSERVER, No, OWN_IN_HANDLER, git::info_refs),
    route!(POST "/v1/agents/{id}/git/git-upload-pack", OBSERVER, No, OWN_IN_HANDLER, git::upload_pack),
    route!(POST "/v1/agents/{id}/git/git-receive-pack", OPERATOR, No, OWN_IN_HANDLER, git::receive_pack),
    route!(GET "/v1/tasks", OBSERVER, No, NEVER, tasks::list_tasks),
    route!(POST "/v1/tasks", OPERATOR, As("task_create"), NEVER, tasks::create_task),
    route!(GET "/v1/tasks/{id}", OBSERVER, No, NEVER, tasks::get_task),
    route!(DELETE "/v1/tasks/{id}", OPERATOR, As("task_cancel"), NEVER, tasks::cancel_task),
    route!(POST "/v1/tasks/{id}/wait", OBSERVER, No, NEVER, tasks::wait_task),
    route!(GET "/v1/events", OBSERVER, No, NEVER, events::events),
    // Every visible session's last screen lines in one socket (agent credentials: their team's).
    route!(GET "/v1/previews", OBSERVER, No, ANY, previews::previews),
    // The audit log holds (redacted) commands of every session: operators read it, admins prune.
    route!(GET "/v1/pty-traffic/events", OPERATOR, No, NEVER, traffic::events),
    route!(GET "/v1/pty-traffic/events/{id}", OPERATOR, No, NEVER, traffic::event),
    route!(GET "/v1/pty-traffic/sessions", OPERATOR, No, NEVER, traffic::sessions),
    route!(GET "/v1/pty-traffic/sessions/{id}", OPERATOR, No, NEVER, traffic::session),
    route!(GET "/v1/pty-traffic/stats", OPERATOR, No, NEVER, traffic::stats),
    route!(GET "/v1/pty-traffic/blocked", OPERATOR, No, NEVER, traffic::blocked),
    route!(GET "/v1/pty-traffic/health", OPERATOR, No, NEVER, traffic::health),
    route!(POST "/v1/pty-traffic/storage/cleanup", ADMIN, As("audit_cleanup"), NEVER, traffic::cleanup),
    route!(GET "/v1/pty-traffic/stream", OPERATOR, No, NEVER, traffic::stream),
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
            // Two open routes carry their credential in the request: the sign-in exchange (a
            // one-time code in its body) and an answer link (a signed, single-use token in its
            // path; its answer is audited).
            let own_credential =
                r.path == super::super::access::SIGNIN_PATH || r.path == super::super::answer::PATH;
            assert!(
                r.role.is_some() || r.audit == Audit::No || own_credential,
                "{}: an open route cannot change anything",
                r.path
            );
            let changes = r.method.as_ref().is_some_and(|m| m != Method::GET) && !own_credential;
            assert!(
                !changes || r.role.is_some(),
                "{}: a route that changes something needs a role",
                r.path
            );
        }
    }
}
