//! Whether a start keeps the agent's container or makes it again: a stopped container made with
//! another definition than the agent has now (see [`Definition`]), or from another image than
//! its image's name names now (an image rebuilt under the same tag), is removed and made again,
//! with the same home and workspace; a running one is kept (a start never stops a running
//! agent: `restart` applies the new definition), and said to be outdated.
//!
//! A container that records no definition (made by a hub before definitions were recorded) is
//! made again once: the hub cannot tell what it was made with, and the agent's work is in its
//! home and workspace, which are kept.
//!
//! The image is compared by ID only when both are known: the container's (its inspect says
//! it) and the one its name names now. When the name names nothing now (the tag was removed),
//! that is not a change: the hub cannot tell whether the image changed, and could not make the
//! container again from a name that names nothing (a start says the image is not found, and
//! leaves the container as it is).

use super::containers::ContainerState;
use crate::docker::Definition;

/// The part a rebuilt image changes: the image's name names another image than the
/// container's.
pub const REBUILT: &str = "image (rebuilt)";

/// What differs between an agent's container and its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// These parts of the definition (`image`, `env`, ...: see [`Definition`]), and
    /// [`REBUILT`] when the image was rebuilt under the same name.
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
        let parts = match self {
            Change::Parts(parts) => parts,
            Change::Unrecorded => {
                return write!(f, "it records no definition (made by an older hub)")
            }
        };
        let defined: Vec<&str> = parts.iter().copied().filter(|p| *p != REBUILT).collect();
        let rebuilt = "its image was rebuilt (its name names another image now)";
        match (defined.is_empty(), parts.contains(&REBUILT)) {
            (false, false) => write!(f, "its definition changed ({})", defined.join(", ")),
            (false, true) => write!(
                f,
                "its definition changed ({}) and {rebuilt}",
                defined.join(", ")
            ),
            (true, _) => write!(f, "{rebuilt}"),
        }
    }
}

/// What a start would make the agent's container of now.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The definition it would make it with.
    pub definition: &'a Definition,
    /// The ID of the image the definition's image name names now; `None` when the engine has
    /// no image of that name (or does not say).
    pub image_id: Option<&'a str>,
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

/// What a start does about `container`, the agent's, when a new one would be `wanted`.
pub fn decide(container: &ContainerState, wanted: Wanted) -> Decision {
    match (change(container, wanted), container.running) {
        (None, _) => Decision::Keep,
        (Some(change), true) => Decision::KeepOutdated(change),
        (Some(change), false) => Decision::Recreate(change),
    }
}

/// What differs between `container` and what a start would make now, if anything.
pub fn change(container: &ContainerState, wanted: Wanted) -> Option<Change> {
    let Some(recorded) = container.definition.as_deref() else {
        return Some(Change::Unrecorded);
    };
    let mut parts = wanted.definition.changed_since(recorded);
    // A new name is a change of its own; the same name naming another image is a rebuild.
    if !parts.contains(&"image") && rebuilt(container.image_id.as_deref(), wanted.image_id) {
        parts.insert(0, REBUILT);
    }
    (!parts.is_empty()).then_some(Change::Parts(parts))
}

/// Whether the image a name names now (`now`) is another than the one a container was made
/// from (`made_from`): known only when both are.
fn rebuilt(made_from: Option<&str>, now: Option<&str>) -> bool {
    matches!((made_from, now), (Some(then), Some(now)) if then != now)
}

#[cfg(test)]
mod tests {
    use bollard::models::ContainerCreateBody;

    use super::*;

    fn definition(image: &str, env: &str) -> Definition {
        Definition::of(&ContainerCreateBody {
            image: Some(image.into()),
            env: Some(vec![env.into()]),
            ..Default::default()
        })
    }

    fn container(running: bool, recorded: Option<&Definition>, image_id: &str) -> ContainerState {
        ContainerState {
            id: "cid".into(),
            running,
            definition: recorded.map(Definition::label),
            image_id: Some(image_id.into()).filter(|i: &String| !i.is_empty()),
            ..Default::default()
        }
    }

    #[test]
    fn a_stopped_container_of_another_definition_is_made_again_and_a_running_one_kept() {
        let (a, b) = (definition("img", "A=1"), definition("img", "A=2"));
        let env = || Change::Parts(vec!["env"]);
        let table = [
            (container(false, Some(&a), "sha256:1"), Decision::Keep),
            (container(true, Some(&a), "sha256:1"), Decision::Keep),
            (
                container(false, Some(&b), "sha256:1"),
                Decision::Recreate(env()),
            ),
            (
                container(true, Some(&b), "sha256:1"),
                Decision::KeepOutdated(env()),
            ),
            (
                container(false, None, "sha256:1"),
                Decision::Recreate(Change::Unrecorded),
            ),
            (
                container(true, None, "sha256:1"),
                Decision::KeepOutdated(Change::Unrecorded),
            ),
        ];
        let wanted = Wanted {
            definition: &a,
            image_id: Some("sha256:1"),
        };
        for (existing, want) in table {
            assert_eq!(decide(&existing, wanted), want, "{existing:?}");
        }
    }

    #[test]
    fn an_image_rebuilt_under_the_same_name_is_a_change_when_both_ids_are_known() {
        let a = definition("img", "A=1");
        let wanted = |image_id| Wanted {
            definition: &a,
            image_id,
        };
        let rebuilt = || Change::Parts(vec![REBUILT]);
        let table = [
            // The name names another image now: made again (kept while it runs).
            (
                "sha256:1",
                Some("sha256:2"),
                false,
                Decision::Recreate(rebuilt()),
            ),
            (
                "sha256:1",
                Some("sha256:2"),
                true,
                Decision::KeepOutdated(rebuilt()),
            ),
            ("sha256:1", Some("sha256:1"), false, Decision::Keep),
            // The name names nothing now (the tag was removed): the hub cannot tell, and
            // could not make the container again from it.
            ("sha256:1", None, false, Decision::Keep),
            ("sha256:1", None, true, Decision::Keep),
            // The container does not say what it was made from.
            ("", Some("sha256:2"), false, Decision::Keep),
        ];
        for (made_from, now, running, want) in table {
            let existing = container(running, Some(&a), made_from);
            assert_eq!(decide(&existing, wanted(now)), want, "{made_from} {now:?}");
        }
        // With another definition too, the rebuild comes first; a new name is not a rebuild.
        let b = definition("img", "A=2");
        let existing = container(false, Some(&b), "sha256:1");
        assert_eq!(
            change(&existing, wanted(Some("sha256:2"))),
            Some(Change::Parts(vec![REBUILT, "env"]))
        );
        let other_name = definition("img:2", "A=1");
        let renamed = Wanted {
            definition: &other_name,
            image_id: Some("sha256:2"),
        };
        let existing = container(false, Some(&a), "sha256:1");
        assert_eq!(
            change(&existing, renamed),
            Some(Change::Parts(vec!["image"]))
        );
    }

    #[test]
    fn a_change_says_what_changed() {
        let parts = Change::Parts(vec!["image", "env"]);
        assert_eq!(parts.to_string(), "its definition changed (image, env)");
        assert_eq!(parts.parts(), ["image", "env"]);
        let rebuilt = Change::Parts(vec![REBUILT]);
        assert_eq!(
            rebuilt.to_string(),
            "its image was rebuilt (its name names another image now)"
        );
        assert_eq!(rebuilt.parts(), ["image (rebuilt)"]);
        assert_eq!(
            Change::Parts(vec![REBUILT, "env"]).to_string(),
            "its definition changed (env) and its image was rebuilt (its name names another \
             image now)"
        );
        assert!(Change::Unrecorded
            .to_string()
            .contains("records no definition"));
        assert!(Change::Unrecorded.parts().is_empty());
    }
}
