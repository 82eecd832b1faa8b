//! Whether a start keeps the agent's container or makes it again: a stopped container made with
//! another definition than the agent has now (see [`Definition`]) is removed and made
//! again, with the same home and workspace; a running one is kept (a start never stops a
//! running agent: `restart` applies the new definition).
//!
//! A container that records no definition (made by a hub before definitions were recorded) is
//! made again once: the hub cannot tell what it was made with, and the agent's work is in its
//! home and workspace, which are kept.

use super::containers::ContainerState;
use crate::docker::Definition;

/// What differs between an agent's container and its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// These parts of the definition (`image`, `env`, ...: see [`Definition`]).
    Parts(Vec<&'static str>),
    /// Unknown: the container records no definition.
    Unrecorded,
}

impl Change {
    /// The parts that changed, as the start's reply lists them (none when unknown).
    pub fn parts(&self) -> Vec<String> {
        match self {
            Change::Parts(parts) => parts.iter().map(|p| p.to_string()).collect(),
            Change::Unrecorded => Vec::new(),
        }
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Parts(parts) => write!(f, "its definition changed ({})", parts.join(", ")),
            Change::Unrecorded => write!(f, "it records no definition (made by an older hub)"),
        }
    }
}

/// What a start does about the agent's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Use it as it is.
    Keep,
    /// It runs with another definition: use it (say so; a restart applies the new one).
    KeepOutdated(Change),
    /// It is stopped and was made with another definition: remove it and make it again.
    Recreate(Change),
}

/// What a start does about `container`, the agent's, when its definition is `wanted`.
pub fn decide(container: &ContainerState, wanted: &Definition) -> Decision {
    let change = match container.definition.as_deref() {
        None => Change::Unrecorded,
        Some(recorded) => match wanted.changed_since(recorded) {
            parts if parts.is_empty() => return Decision::Keep,
            parts => Change::Parts(parts),
        },
    };
    match container.running {
        true => Decision::KeepOutdated(change),
        false => Decision::Recreate(change),
    }
}

#[cfg(test)]
mod tests {
    use bollard::models::ContainerCreateBody;

    use super::*;

    fn definition(env: &str) -> Definition {
        Definition::of(&ContainerCreateBody {
            image: Some("img".into()),
            env: Some(vec![env.into()]),
            ..Default::default()
        })
    }

    fn container(running: bool, recorded: Option<&Definition>) -> ContainerState {
        ContainerState {
            id: "cid".into(),
            running,
            definition: recorded.map(Definition::label),
            ..Default::default()
        }
    }

    #[test]
    fn a_stopped_container_of_another_definition_is_made_again_and_a_running_one_kept() {
        let (a, b) = (definition("A=1"), definition("A=2"));
        let env = || Change::Parts(vec!["env"]);
        let table = [
            (container(false, Some(&a)), Decision::Keep),
            (container(true, Some(&a)), Decision::Keep),
            (container(false, Some(&b)), Decision::Recreate(env())),
            (container(true, Some(&b)), Decision::KeepOutdated(env())),
            (
                container(false, None),
                Decision::Recreate(Change::Unrecorded),
            ),
            (
                container(true, None),
                Decision::KeepOutdated(Change::Unrecorded),
            ),
        ];
        for (existing, want) in table {
            assert_eq!(decide(&existing, &a), want, "{existing:?}");
        }
    }

    #[test]
    fn a_change_says_what_changed() {
        let parts = Change::Parts(vec!["image", "env"]);
        assert_eq!(parts.to_string(), "its definition changed (image, env)");
        assert_eq!(parts.parts(), ["image", "env"]);
        assert!(Change::Unrecorded
            .to_string()
            .contains("records no definition"));
        assert!(Change::Unrecorded.parts().is_empty());
    }
}
