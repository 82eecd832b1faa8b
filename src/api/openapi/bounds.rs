//! The bounds of request schemas that `utoipa`'s derive cannot state, added to the generated
//! document (a [`Modify`]): rules between fields (at least one routing key, `timeout_ms` only
//! with `wait`, base64 `data` with `encoding: base64`, `hub_access` with an owner agent, a
//! budget's cap, a review note's line with its file),
//! and requests that take a flattened struct and refuse unknown fields, which `utoipa` writes
//! as an `allOf` that cannot say "no other fields"; and the bridge's talk, whose fields are
//! talk's. Each rule here is one the hub checks.

use serde_json::{json, Value};
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{AdditionalProperties, Object, Schema};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{OpenApi, RefOr};
use utoipa::Modify;

use crate::protocol::schema::BASE64;

pub(super) struct Bounds;

/// The name of the bearer-token security scheme (every route but the open ones).
pub(super) const BEARER: &str = "bearer";

impl Modify for Bounds {
    fn modify(&self, doc: &mut OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        let schemas = &mut components.schemas;
        // Requests with a flattened part and no other fields: one object, closed.
        for name in [
            "CreateSessionRequest",
            "UpdateOwnershipRequest",
            "RegisterRequest",
            "BridgeBufferRequest",
        ] {
            let merged = merge_all_of(schemas, name);
            schemas.insert(name.to_string(), RefOr::T(Schema::Object(merged)));
        }
        // The roles the hub knows (`owner_routing::check_owner_role`); creating a session takes any.
        for name in ["UpdateOwnershipRequest", "RegisterRequest"] {
            if let Some(role) = object(schemas, name).properties.get_mut("owner_role") {
                *role = schema(json!({
                    "type": ["string", "null"],
                    "enum": ["leader", "worker", null],
                }));
            }
        }
        // The bridge's talk takes what talk takes (its type lives below `protocol`).
        for field in ["command", "sentinel"] {
            let talk = object(schemas, "TalkRequest").properties[field].clone();
            object(schemas, "BridgeTalkRequest")
                .properties
                .insert(field.to_string(), talk);
        }
        // Routing needs at least one key (`owner_routing::RouteKeys::is_empty`).
        let route_keys = at_least_one(&[
            ("agent_id", "string"),
            ("owner_session_id", "string"),
            ("label", "string"),
        ]);
        add(object(schemas, "RouteKeys"), "anyOf", route_keys.clone());
        add(object(schemas, "SendToAgentRequest"), "anyOf", route_keys);
        add(
            object(schemas, "HeartbeatRequest"),
            "anyOf",
            at_least_one(&[("session_ids", "array"), ("owner_agent_id", "string")]),
        );
        // A budget caps dollars, tokens or both (`usage::budget::Budget::check`).
        add(
            object(schemas, "Budget"),
            "anyOf",
            at_least_one(&[("usd", "number"), ("tokens", "integer")]),
        );
        add(
            object(schemas, "StateQuery"),
            "dependentRequired",
            json!({ "timeout_ms": ["wait"] }),
        );
        // A review note's text and file are not blank (`workspace::review::is_text`).
        for field in ["note", "file"] {
            let properties = &mut object(schemas, "ReviewNote").properties;
            let mut property = serde_json::to_value(&properties[field]).expect("a schema");
            property["pattern"] = json!(crate::protocol::schema::not_blank());
            properties.insert(field.to_string(), schema(property));
        }
        // A review note's line is on its file (`workspace::review::check_notes`).
        add(
            object(schemas, "ReviewNote"),
            "anyOf",
            json!([
                { "properties": { "line": { "type": "null" } } },
                { "required": ["file"], "properties": { "file": { "type": "string" } } },
            ]),
        );
        add(
            object(schemas, "BridgeWriteRequest"),
            "anyOf",
            json!([
                { "properties": { "encoding": { "const": "utf8" } } },
                {
                    "required": ["encoding"],
                    "properties": {
                        "encoding": { "const": "base64" },
                        "data": { "pattern": BASE64 },
                    },
                },
            ]),
        );
        add(
            object(schemas, "CreateSessionRequest"),
            "anyOf",
            json!([
                { "properties": { "hub_access": { "const": false } } },
                {
                    "required": ["owner_agent_id"],
                    "properties": { "owner_agent_id": { "type": "string" } },
                },
            ]),
        );
    }
}

type Schemas = std::collections::BTreeMap<String, RefOr<Schema>>;

fn schema(value: Value) -> RefOr<Schema> {
    serde_json::from_value(value).expect("a schema")
}

/// The component `name`, an object.
fn object<'a>(schemas: &'a mut Schemas, name: &str) -> &'a mut Object {
    match schemas.get_mut(name) {
        Some(RefOr::T(Schema::Object(o))) => o,
        _ => panic!("the document has no object schema {name}"),
    }
}

/// Adds a JSON Schema keyword `utoipa`'s types have no field for (it is written out as is).
fn add(object: &mut Object, keyword: &str, value: Value) {
    object
        .extensions
        .get_or_insert_with(Extensions::default)
        .insert(keyword.to_string(), value);
}

/// `anyOf` branches: at least one of the fields is given, and not `null`.
fn at_least_one(fields: &[(&str, &str)]) -> Value {
    Value::Array(
        fields
            .iter()
            .map(
                |(name, ty)| json!({ "required": [name], "properties": { *name: { "type": ty } } }),
            )
            .collect(),
    )
}

/// One object holding the properties of every part of the component `name`'s `allOf` (a
/// `$ref` part is looked up), closed to others (`additionalProperties: false`).
fn merge_all_of(schemas: &Schemas, name: &str) -> Object {
    let Some(RefOr::T(Schema::AllOf(all_of))) = schemas.get(name) else {
        panic!("{name} is not an allOf");
    };
    let mut merged = Object::new();
    merged.description = all_of.description.clone();
    for part in &all_of.items {
        let part = match part {
            RefOr::Ref(r) => {
                let target = r.ref_location.rsplit('/').next().unwrap_or_default();
                match schemas.get(target) {
                    Some(RefOr::T(Schema::Object(o))) => o,
                    _ => panic!("{name}: {target} is not an object schema"),
                }
            }
            RefOr::T(Schema::Object(o)) => o,
            RefOr::T(_) => panic!("{name}: a part is not an object"),
        };
        for (key, value) in &part.properties {
            merged.properties.insert(key.clone(), value.clone());
        }
        merged.required.extend(part.required.iter().cloned());
    }
    merged.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
    merged
}
