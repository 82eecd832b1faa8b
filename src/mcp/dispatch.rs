//! Runs one tool call: checks the arguments against the action table, builds the action's REST
//! request, and executes it through an [`Executor`] (the hub's router in-process, or HTTP to a
//! hub). A `session_id` that names no session is resolved as an agent id or label by the hub's
//! own `POST /v1/pty/resolve`, then the request is made again with the session it found. The
//! reply is the REST reply, unchanged: `Ok` the success body, `Err` the `{ok:false, ...}` body.

use serde_json::{json, Map, Value};

use super::actions::{self, Action, Kind, Place, Route, Tool};
use super::executor::{Executor, RestCall};

/// The error body for arguments the MCP layer refuses (the REST API's `BAD_REQUEST` shape).
pub fn bad_request(message: impl Into<String>) -> Value {
    json!({ "ok": false, "error_code": "BAD_REQUEST", "message": message.into() })
}

/// Runs `tool` with `args` (the call's `arguments` object).
pub async fn call<E: Executor>(
    exec: &E,
    tool: Tool,
    args: Map<String, Value>,
) -> Result<Value, Value> {
    let Some(name) = args.get("action").and_then(Value::as_str) else {
        return Err(bad_request(format!(
            "{} needs an action: one of {}",
            tool.name(),
            action_names(tool)
        )));
    };
    let Some(action) = actions::find(tool, name) else {
        return Err(bad_request(format!(
            "unknown action '{name}' for {}: one of {} (action help describes them)",
            tool.name(),
            action_names(tool)
        )));
    };
    check_args(action, &args)?;
    match action.route {
        Route::Help => Ok(super::help::describe(exec, tool).await),
        Route::Refused { code, message } => {
            Err(json!({ "ok": false, "error_code": code, "message": message }))
        }
        Route::Rest { method, path } => run_rest(exec, action, method, path, &args).await,
    }
}

fn action_names(tool: Tool) -> String {
    actions::of(tool)
        .map(|a| a.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses parameters the action does not take and missing required ones, naming what it takes.
fn check_args(action: &Action, args: &Map<String, Value>) -> Result<(), Value> {
    let takes = || {
        let names: Vec<&str> = action.params.iter().map(|p| p.name).collect();
        if names.is_empty() {
            format!("{} takes no parameters", action.name)
        } else {
            format!("{} takes: {}", action.name, names.join(", "))
        }
    };
    for (key, value) in args {
        if key == "action" || value.is_null() {
            continue;
        }
        if action.param(key).is_none() {
            return Err(bad_request(format!(
                "unknown parameter '{key}'; {}",
                takes()
            )));
        }
    }
    for p in action.params.iter().filter(|p| p.required) {
        if args.get(p.name).is_none_or(Value::is_null) {
            return Err(bad_request(format!(
                "missing parameter '{}'; {}",
                p.name,
                takes()
            )));
        }
    }
    Ok(())
}

async fn run_rest<E: Executor>(
    exec: &E,
    action: &Action,
    method: &str,
    path: &str,
    args: &Map<String, Value>,
) -> Result<Value, Value> {
    let target = action
        .param("session_id")
        .filter(|p| p.place == Place::Path)
        .and(args.get("session_id"))
        .and_then(Value::as_str);
    let Some(target) = target else {
        return exec.execute(build(action, method, path, args, None)?).await;
    };
    let not_a_session = |reply: &Result<Value, Value>| matches!(reply, Err(e) if e["error_code"] == "PTY_SESSION_NOT_FOUND");
    if method == "GET" || crate::owner_routing::is_session_id_shaped(target) {
        // Reads are not audited, and an id as the hub hands them out needs no lookup first (it
        // would cost a request on every call): try the argument as a session id, resolve it
        // like a label only if no session has it.
        let reply = exec.execute(build(action, method, path, args, None)?).await;
        if !not_a_session(&reply) {
            return reply;
        }
    } else {
        // A request that changes something is audited even when it fails: look the session
        // up first, so the log never shows an attempt on a label.
        let lookup = exec
            .execute(RestCall::new(
                "GET",
                format!("/v1/pty/sessions/{}", crate::client::encode(target)),
                None,
            ))
            .await;
        if !not_a_session(&lookup) {
            lookup?;
            return exec.execute(build(action, method, path, args, None)?).await;
        }
    }
    let id = resolve_session(exec, target).await?;
    exec.execute(build(action, method, path, args, Some(&id))?)
        .await
}

/// The one live session whose agent id or label is `target` (`POST /v1/pty/resolve`).
async fn resolve_session<E: Executor>(exec: &E, target: &str) -> Result<String, Value> {
    let resolved = exec
        .execute(RestCall::new(
            "POST",
            "/v1/pty/resolve".into(),
            Some(json!({ "agent_id": target, "label": target })),
        ))
        .await
        .map_err(|mut e| {
            if e["error_code"] == "NOT_FOUND" {
                e["message"] = json!(format!(
                    "no live session has the id, agent id or label '{target}' (k_pty list shows them)"
                ));
            }
            e
        })?;
    Ok(resolved["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

/// The REST request for `args`; `session` replaces the `session_id` argument once resolved.
fn build(
    action: &Action,
    method: &str,
    path: &str,
    args: &Map<String, Value>,
    session: Option<&str>,
) -> Result<RestCall, Value> {
    let mut path = path.to_string();
    let mut query = Vec::new();
    let mut body = Map::new();
    for p in action.params {
        let Some(value) = args.get(p.name).filter(|v| !v.is_null()) else {
            continue;
        };
        match p.place {
            Place::Path => {
                let text = match (p.name, session) {
                    ("session_id", Some(id)) => id.to_string(),
                    _ => scalar(p.name, p.kind, value)?,
                };
                path = path.replace(&format!("{{{}}}", p.name), &crate::client::encode(&text));
            }
            Place::Query => query.push(format!(
                "{}={}",
                p.wire,
                crate::client::encode(&scalar(p.name, p.kind, value)?)
            )),
            Place::Body => {
                body.insert(p.wire.to_string(), value.clone());
            }
        }
    }
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let body = (method == "POST").then_some(Value::Object(body));
    Ok(RestCall::new(method, path, body))
}

/// A value for a path or query string: strings as they are, numbers and booleans as JSON
/// writes them, string lists comma-joined.
fn scalar(name: &str, kind: Kind, value: &Value) -> Result<String, Value> {
    let wrong = || {
        bad_request(format!(
            "parameter '{name}' must be {}",
            kind.schema()["type"]
        ))
    };
    match (kind, value) {
        (Kind::Str, Value::String(s)) => Ok(s.clone()),
        (Kind::Int | Kind::Num, Value::Number(n)) => Ok(n.to_string()),
        (Kind::Bool, Value::Bool(b)) => Ok(b.to_string()),
        (Kind::StrList, Value::String(s)) => Ok(s.clone()),
        (Kind::StrList, Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(String::from).ok_or_else(wrong))
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.join(",")),
        _ => Err(wrong()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn built(tool: Tool, v: Value) -> RestCall {
        let a = args(v);
        let action = actions::find(tool, a["action"].as_str().unwrap()).unwrap();
        check_args(action, &a).unwrap();
        let Route::Rest { method, path } = action.route else {
            panic!("not a REST action")
        };
        build(action, method, path, &a, None).unwrap()
    }

    #[test]
    fn arguments_become_the_rest_request() {
        let c = built(
            Tool::Pty,
            json!({"action": "read", "session_id": "Worker A", "max_bytes": 100}),
        );
        assert_eq!(
            (c.method.as_str(), c.path.as_str()),
            ("GET", "/v1/pty/sessions/Worker%20A/read?max_bytes=100")
        );
        assert!(c.body.is_none());

        let c = built(
            Tool::Pty,
            json!({"action": "wait_state", "session_id": "s1", "states": ["idle", "blocked"], "timeout_ms": 500}),
        );
        assert_eq!(
            c.path,
            "/v1/pty/sessions/s1/state?wait=idle%2Cblocked&timeout_ms=500"
        );

        let c = built(
            Tool::Pty,
            json!({"action": "talk", "session_id": "s1", "command": "ls", "timeout_ms": 9}),
        );
        assert_eq!(c.path, "/v1/pty/sessions/s1/talk");
        assert_eq!(c.body, Some(json!({"command": "ls", "timeout_ms": 9})));

        let c = built(
            Tool::Agents,
            json!({"action": "wait", "task_id": "task_1", "timeout_ms": 5}),
        );
        assert_eq!(
            (c.method.as_str(), c.path.as_str()),
            ("POST", "/v1/tasks/task_1/wait?timeout_ms=5")
        );
        assert_eq!(c.body, Some(json!({})));

        let c = built(
            Tool::Pty,
            json!({"action": "kill", "session_id": "s1", "ignored": null}),
        );
        assert_eq!(
            (c.method.as_str(), c.path.as_str()),
            ("DELETE", "/v1/pty/sessions/s1")
        );
    }

    #[test]
    fn bad_arguments_are_refused_with_what_the_action_takes() {
        let send = actions::find(Tool::Pty, "send_line").unwrap();
        let e = check_args(send, &args(json!({"session_id": "s", "text": "x"}))).unwrap_err();
        assert_eq!(e["error_code"], "BAD_REQUEST");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("unknown parameter 'text'"),
            "{e}"
        );
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("session_id, data, submit, force"),
            "{e}"
        );
        let e = check_args(send, &args(json!({"session_id": "s"}))).unwrap_err();
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("missing parameter 'data'"),
            "{e}"
        );
        let read = actions::find(Tool::Pty, "read").unwrap();
        let Route::Rest { method, path } = read.route else {
            unreachable!()
        };
        let e = build(
            read,
            method,
            path,
            &args(json!({"session_id": "s", "max_bytes": "many"})),
            None,
        )
        .unwrap_err();
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("'max_bytes' must be \"integer\""),
            "{e}"
        );
    }

    /// A hub with one session, `pty_1a2b3c4d`, labelled `Worker A`; records every call.
    #[derive(Default)]
    struct OneSession(std::sync::Mutex<Vec<String>>);

    impl Executor for OneSession {
        async fn execute(&self, call: RestCall) -> Result<Value, Value> {
            let line = format!("{} {}", call.method, call.path);
            self.0.lock().unwrap().push(line);
            if call.path == "/v1/pty/resolve" {
                return Ok(json!({ "ok": true, "session_id": "pty_1a2b3c4d" }));
            }
            if call.path.contains("/pty_1a2b3c4d") {
                Ok(json!({ "ok": true }))
            } else {
                Err(json!({ "ok": false, "error_code": "PTY_SESSION_NOT_FOUND" }))
            }
        }

        fn transport(&self) -> &'static str {
            "test"
        }
    }

    async fn calls_made(session_id: &str) -> Vec<String> {
        let exec = OneSession::default();
        let reply = call(
            &exec,
            Tool::Pty,
            args(json!({ "action": "send_line", "session_id": session_id, "data": "ls" })),
        )
        .await;
        assert!(reply.is_ok(), "{reply:?}");
        exec.0.into_inner().unwrap()
    }

    #[tokio::test]
    async fn a_change_by_session_id_is_one_request_and_a_label_is_looked_up_first() {
        assert_eq!(
            calls_made("pty_1a2b3c4d").await,
            ["POST /v1/pty/sessions/pty_1a2b3c4d/send_line"]
        );
        // Never an audited attempt on the label itself.
        assert_eq!(
            calls_made("Worker A").await,
            [
                "GET /v1/pty/sessions/Worker%20A",
                "POST /v1/pty/resolve",
                "POST /v1/pty/sessions/pty_1a2b3c4d/send_line"
            ]
        );
        // An id-shaped name of no session is resolved like a label.
        assert_eq!(
            calls_made("pty_00000000").await,
            [
                "POST /v1/pty/sessions/pty_00000000/send_line",
                "POST /v1/pty/resolve",
                "POST /v1/pty/sessions/pty_1a2b3c4d/send_line"
            ]
        );
    }
}
