//! What `help` answers and what `tools/list` shows, both generated from the action table:
//! every action with its parameters and the REST request behind it, this hub's capabilities
//! (from `GET /health`), and the tools' JSON schemas.

use serde_json::{json, Map, Value};

use super::actions::{self, Route, Tool};
use super::executor::{Executor, RestCall};
use crate::agent_state::wait::WAITABLE;

/// `help` for `tool`.
pub async fn describe<E: Executor>(exec: &E, tool: Tool) -> Value {
    let health = exec
        .execute(RestCall::new("GET", "/health".into(), None))
        .await
        .unwrap_or_else(|e| e);
    let actions: Vec<Value> = actions::of(tool)
        .map(|a| {
            let params: Vec<Value> = a
                .params
                .iter()
                .map(|p| {
                    json!({
                        "name": p.name,
                        "type": p.kind.schema()["type"],
                        "required": p.required,
                        "description": p.doc,
                    })
                })
                .collect();
            let rest = match a.route {
                Route::Rest { method, path } => json!(format!("{method} {path}")),
                _ => Value::Null,
            };
            json!({ "action": a.name, "description": a.doc, "params": params, "rest": rest })
        })
        .collect();
    json!({
        "ok": true,
        "tool": tool.name(),
        "description": tool.description(),
        "actions": actions,
        "other_tools": Tool::ALL.iter().filter(|t| **t != tool).map(|t| t.name()).collect::<Vec<_>>(),
        "capabilities": {
            "transport": exec.transport(),
            "hub_version": health["version"],
            "hub_id": health["hub_id"],
            "sessions": health["sessions"],
            "agents": health["agents"],
            "term_buffer_access": health["term_buffer_access"],
            "backends": ["pty", "tmux", "docker (container agents)", "external (registered bridges)"],
            "wait_states": WAITABLE,
            "session_arguments": "a session_id may be a session id, an agent id or a label; exactly one live session must match",
            "errors": "a failed action is a tool error whose JSON is {ok:false, error_code, message}, as the REST API answers",
        },
    })
}

/// An action that takes a parameter (`talk (required)`), and its doc there.
type Use = (String, &'static str);

/// The JSON schema of `tool`'s arguments: `action` plus every parameter of its actions (which
/// action takes which is in each description; `help` lists them per action).
pub fn input_schema(tool: Tool) -> Map<String, Value> {
    let names: Vec<&str> = actions::of(tool).map(|a| a.name).collect();
    let mut properties = Map::new();
    properties.insert(
        "action".into(),
        json!({ "type": "string", "enum": names, "description": "What to do; help describes every action." }),
    );
    // Per parameter: its kind, and each action that takes it with that action's doc.
    let mut uses: Vec<(&str, actions::Kind, Vec<Use>)> = Vec::new();
    for action in actions::of(tool) {
        for p in action.params {
            let mark = if p.required {
                format!("{} (required)", action.name)
            } else {
                action.name.to_string()
            };
            match uses.iter_mut().find(|(name, _, _)| *name == p.name) {
                Some((_, _, list)) => list.push((mark, p.doc)),
                None => uses.push((p.name, p.kind, vec![(mark, p.doc)])),
            }
        }
    }
    for (name, kind, list) in uses {
        let same_doc = list.iter().all(|(_, doc)| *doc == list[0].1);
        let doc = if same_doc {
            list[0].1.to_string()
        } else {
            let parts: Vec<String> = list.iter().map(|(a, d)| format!("{a}: {d}")).collect();
            parts.join(" / ")
        };
        let marks: Vec<&str> = list.iter().map(|(a, _)| a.as_str()).collect();
        let mut schema = kind.schema();
        schema["description"] = json!(format!("{doc} [for: {}]", marks.join(", ")));
        properties.insert(name.into(), schema);
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), json!(["action"]));
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_names_every_parameter_and_its_actions() {
        let schema = input_schema(Tool::Pty);
        let props = schema["properties"].as_object().unwrap();
        assert_eq!(
            props["action"]["enum"].as_array().unwrap().len(),
            actions::of(Tool::Pty).count()
        );
        let session = props["session_id"]["description"].as_str().unwrap();
        assert!(
            session.contains("send_line (required)") && session.contains("wait_state (required)"),
            "{session}"
        );
        assert_eq!(props["states"]["type"], "array");
        let timeout = props["timeout_ms"]["description"].as_str().unwrap();
        assert!(
            timeout.contains("talk: ") && timeout.contains("wait_state: "),
            "{timeout}"
        );
        assert_eq!(schema["required"], json!(["action"]));
        let agents = input_schema(Tool::Agents);
        assert_eq!(agents["properties"]["timeout_s"]["type"], "number");
    }
}
