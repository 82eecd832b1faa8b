//! An agent container's definition, recorded on the container: a hash of each part of the
//! create config the hub sends for it, in the label [`LABEL_DEFINITION`] (`image=… command=…
//! env=… workdir=… mounts=… labels=… other=…`). The next start computes it again from the
//! agent's definition as it is then and compares: a part whose hash differs changed in
//! `hub.toml` (or in what the hub adds to it), and the container is made again, as
//! `docker compose up` does.
//!
//! Everything in the create config is in exactly one part (`other` holds whatever the named
//! parts do not: the network, the memory and CPU limits, the init process, ...), and nothing
//! else is hashed, so a change to anything the container is made with changes the definition,
//! and a change to anything else (a `ready_pattern`, a `policy`, a `stop_grace`) does not.

use std::collections::BTreeMap;

use bollard::models::ContainerCreateBody;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The label that records a container's definition.
pub const LABEL_DEFINITION: &str = "agent-hub.definition";

/// The parts of a definition, in the order the label names them.
pub const PARTS: [&str; 7] = [
    "image", "command", "env", "workdir", "mounts", "labels", "other",
];

/// How many hex digits of a part's SHA-256 the label keeps (48 bits: a change is never missed
/// in practice, and the label stays short).
const HASH_DIGITS: usize = 12;

/// A container's definition: the hash of each of its [`PARTS`], in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition(Vec<(&'static str, String)>);

impl Definition {
    /// The definition of the container `body` makes (its own [`LABEL_DEFINITION`] aside).
    pub fn of(body: &ContainerCreateBody) -> Definition {
        let mut rest = body.clone();
        let mut labels: BTreeMap<String, String> =
            rest.labels.take().unwrap_or_default().into_iter().collect();
        labels.remove(LABEL_DEFINITION);
        let binds = rest.host_config.as_mut().and_then(|h| h.binds.take());
        let hashes = [
            hash(&rest.image.take()),
            hash(&(rest.entrypoint.take(), rest.cmd.take())),
            hash(&rest.env.take()),
            hash(&rest.working_dir.take()),
            hash(&binds),
            hash(&labels),
            hash(&rest),
        ];
        Definition(PARTS.into_iter().zip(hashes).collect())
    }

    /// The label's value: `image=<hash> command=<hash> ...`.
    pub fn label(&self) -> String {
        let parts: Vec<String> = self.0.iter().map(|(p, h)| format!("{p}={h}")).collect();
        parts.join(" ")
    }

    /// The parts whose hash differs from the one `recorded` (a label's value) gives them; every
    /// part when it names none (a label of some other form).
    pub fn changed_since(&self, recorded: &str) -> Vec<&'static str> {
        let old: BTreeMap<&str, &str> = recorded
            .split_whitespace()
            .filter_map(|p| p.split_once('='))
            .collect();
        self.0
            .iter()
            .filter(|(part, hash)| old.get(part) != Some(&hash.as_str()))
            .map(|(part, _)| *part)
            .collect()
    }
}

/// The first [`HASH_DIGITS`] hex digits of the SHA-256 of `part` as canonical JSON.
fn hash(part: &impl Serialize) -> String {
    let value = serde_json::to_value(part).unwrap_or(Value::Null);
    let text = canonical(value).to_string();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex[..HASH_DIGITS].to_string()
}

/// `value` with the keys of every object in sorted order, whatever order the map it came
/// from had (a `HashMap`'s differs from one process to the next).
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use bollard::models::HostConfig;

    use super::*;

    fn body() -> ContainerCreateBody {
        ContainerCreateBody {
            image: Some("img".into()),
            cmd: Some(vec!["claude".into()]),
            env: Some(vec!["A=1".into(), "B=2".into()]),
            working_dir: Some("/workspace".into()),
            labels: Some(HashMap::from([
                ("agent-hub.agent".to_string(), "a1".to_string()),
                ("team".to_string(), "core".to_string()),
            ])),
            host_config: Some(HostConfig {
                binds: Some(vec!["/srv:/workspace".into()]),
                memory: Some(1 << 30),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A change to a config.
    type Edit = fn(&mut ContainerCreateBody);

    /// One change to `body()` per part, and the part it must show in.
    fn changes() -> Vec<(&'static str, Edit)> {
        vec![
            ("image", |b| b.image = Some("img:2".into())),
            ("command", |b| b.cmd = Some(vec!["codex".into()])),
            ("command", |b| b.entrypoint = Some(vec!["sh".into()])),
            ("env", |b| b.env = Some(vec!["A=1".into(), "B=3".into()])),
            ("env", |b| b.env.as_mut().unwrap().reverse()),
            ("workdir", |b| b.working_dir = Some("/w".into())),
            ("mounts", |b| {
                let h = b.host_config.as_mut().unwrap();
                h.binds.as_mut().unwrap().push("/x:/x:ro".into());
            }),
            ("labels", |b| {
                let l = b.labels.as_mut().unwrap();
                l.insert("team".into(), "red".into());
            }),
            ("other", |b| b.host_config.as_mut().unwrap().memory = None),
            ("other", |b| {
                b.host_config.as_mut().unwrap().network_mode = Some("none".into())
            }),
            ("other", |b| b.tty = Some(true)),
        ]
    }

    #[test]
    fn a_change_to_any_part_of_the_create_config_shows_in_that_part_alone() {
        let before = Definition::of(&body());
        for (part, change) in changes() {
            let mut changed = body();
            change(&mut changed);
            let after = Definition::of(&changed);
            assert_ne!(after, before, "{part}");
            assert_eq!(after.changed_since(&before.label()), [part]);
        }
    }

    #[test]
    fn the_same_config_has_the_same_definition_whatever_its_maps_order() {
        let def = Definition::of(&body());
        assert!(def.changed_since(&def.label()).is_empty());
        // Labels in another order (a HashMap's order differs by process) and the label itself.
        let mut again = body();
        let mut labels: Vec<_> = again.labels.take().unwrap().into_iter().collect();
        labels.reverse();
        let mut labels: HashMap<_, _> = labels.into_iter().collect();
        labels.insert(LABEL_DEFINITION.into(), def.label());
        again.labels = Some(labels);
        assert_eq!(Definition::of(&again), def);
        // Pinned, so that the labels a hub recorded stay valid for the next hub version (a
        // change here makes every agent's container again once): `image` is the SHA-256 of
        // `"img"`, `env` of `["A=1","B=2"]`, `labels` of `{"agent-hub.agent":"a1","team":"core"}`.
        assert_eq!(
            def.label(),
            "image=2081a4063c97 command=e881a456c705 env=5d6de2faa426 workdir=4384b4849b7f \
             mounts=aafb55725827 labels=62bc1320b2ac other=4fe1de33b5c0"
        );
    }

    #[test]
    fn a_label_of_another_form_changes_every_part() {
        let def = Definition::of(&body());
        assert_eq!(def.changed_since("sha256:0123"), PARTS);
        assert_eq!(def.changed_since(""), PARTS);
        let mut recorded = def.label();
        recorded.push_str(" ports=abc");
        assert!(
            def.changed_since(&recorded).is_empty(),
            "unknown parts aside"
        );
    }
}
