//! Rejecting unknown fields in requests that flatten a shared struct (the owner identity):
//! serde's `deny_unknown_fields` does not work together with `flatten`, so such a request ends
//! with a [`NoOtherFields`] field that fails on any key no other field took.

use serde::de::{Deserializer, Error, MapAccess, Visitor};
use serde::Deserialize;

/// Put last in a request, as `#[serde(flatten, skip_serializing)]`: any key left over is an
/// error (`unknown field `x``), like `deny_unknown_fields`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoOtherFields;

impl<'de> Deserialize<'de> for NoOtherFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Leftovers;
        impl<'de> Visitor<'de> for Leftovers {
            type Value = NoOtherFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("no other fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                match map.next_key::<String>()? {
                    Some(key) => Err(A::Error::custom(format!("unknown field `{key}`"))),
                    None => Ok(NoOtherFields),
                }
            }
        }
        deserializer.deserialize_map(Leftovers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Owner {
        label: Option<String>,
        owner_role: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    struct Req {
        id: String,
        #[serde(flatten)]
        owner: Owner,
        #[serde(flatten)]
        _rest: NoOtherFields,
    }

    #[test]
    fn known_and_flattened_fields_pass_and_any_other_is_refused() {
        let ok: Req =
            serde_json::from_str(r#"{"id":"a","label":"w1","owner_role":"leader"}"#).unwrap();
        assert_eq!(ok.id, "a");
        assert_eq!(ok.owner.label.as_deref(), Some("w1"));
        assert_eq!(ok.owner.owner_role.as_deref(), Some("leader"));
        let err = serde_json::from_str::<Req>(r#"{"id":"a","label":"w1","lable":"x"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `lable`"), "{err}");
    }
}
