//! Which engine an agent with `docker_hosts` runs on. A start that finds it with nothing on the
//! engine it was on (no kept home, no workspace, no container) places it on the engine with the
//! most memory left, as Docker says it ([`memory_left`]: its total less what its running
//! containers use or reserve); an engine that does not answer is passed over, and a tie goes to
//! the one listed first. The choice is recorded in the data dir (`agents/<id>/engine`) and kept
//! for later starts, and after a restart of the hub, as long as the agent keeps anything there.
//! This is Docker's own information read at the start, not a scheduler: agents placed at the
//! same moment see the same figures.

use std::path::PathBuf;

use super::containers::Place;
use super::{home, Agents};
use crate::config::AgentDef;
use crate::docker::{self, engines::memory_left};
use crate::error::{HubError, HubResult};

/// The engine to place an agent on: of those that answered (`Some(memory left)`), the one with
/// the most memory left; the first listed of equals. `None` when none answered.
pub fn choose<'a>(candidates: &[(&'a str, Option<u64>)]) -> Option<&'a str> {
    let mut best: Option<(&str, u64)> = None;
    for (endpoint, left) in candidates {
        let Some(left) = *left else { continue };
        if best.is_none_or(|(_, most)| left > most) {
            best = Some((endpoint, left));
        }
    }
    best.map(|(endpoint, _)| endpoint)
}

/// The file that records the engine an agent was placed on.
fn record_file(agents_dir: &std::path::Path, agent_id: &str) -> PathBuf {
    home::agent_dir(agents_dir, agent_id).join("engine")
}

impl Agents {
    /// Places the agents on the engines recorded in the data dir (one its definition no longer
    /// names is forgotten).
    pub(super) fn restore_placements(&self) {
        for def in self.defs().filter(|d| !d.docker_hosts.is_empty()) {
            let file = record_file(&self.handles.access.agents_dir, &def.id);
            let Ok(recorded) = std::fs::read_to_string(&file) else {
                continue;
            };
            let recorded = recorded.trim();
            match def.docker_hosts.iter().position(|h| h == recorded) {
                Some(i) => def.placement.set(i),
                None => tracing::info!(
                    agent = %def.id,
                    "it was on {recorded}, which its docker_hosts no longer name: placed again at its start"
                ),
            }
        }
    }

    /// Places the agent on the engine where its container is (`endpoint`), when it has not been
    /// placed: a placement the data dir lost is found again.
    pub(super) fn adopt_placements(&self, endpoint: &str, with_containers: &[String]) {
        for id in with_containers {
            let Ok(def) = self.def(id) else { continue };
            if def.placed() {
                continue;
            }
            if let Some(i) = def.docker_hosts.iter().position(|h| h == endpoint) {
                tracing::info!(agent = %id, "its container is on {}: placed there", docker::endpoint_name(endpoint));
                self.record_placement(def, i);
            }
        }
    }

    fn record_placement(&self, def: &AgentDef, index: usize) {
        def.placement.set(index);
        let file = record_file(&self.handles.access.agents_dir, &def.id);
        let written = file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| {
                crate::persist::registry_file::write_atomic(
                    &file,
                    format!("{}\n", def.docker_hosts[index]).as_bytes(),
                )
            });
        if let Err(e) = written {
            tracing::warn!(agent = %def.id, "cannot record its engine in {}: {e}", file.display());
        }
    }

    /// Whether the agent keeps something on `endpoint`: its home or workspace (kept across
    /// stops), or its container. An engine that does not answer may hold them: it stays.
    async fn keeps_anything_on(&self, def: &AgentDef, endpoint: &str) -> bool {
        if def.keep_home || def.workspace.is_some() {
            return true;
        }
        let name = docker::container_name(self.hub_id(), &def.id);
        let at = Place {
            endpoint,
            container: &name,
        };
        !matches!(self.handles.containers.inspect(at).await, Ok(None))
    }

    /// Before a start: an agent with `docker_hosts` that keeps nothing on the engine it is on
    /// (or was never placed) is placed on the one with the most memory left.
    pub(super) async fn place(&self, id: &str) -> HubResult<()> {
        let def = self.def(id)?;
        if def.docker_hosts.is_empty() {
            return Ok(());
        }
        if let Some(i) = def.placement.get() {
            if self.keeps_anything_on(def, &def.docker_hosts[i]).await {
                return Ok(());
            }
        }
        let asked = def.docker_hosts.iter().map(|endpoint| async move {
            let facts = self
                .handles
                .containers
                .engine_facts(endpoint, self.hub_id())
                .await;
            (
                endpoint.as_str(),
                facts.ok().map(|f| memory_left(&f).unwrap_or(0)),
            )
        });
        let candidates = futures_util::future::join_all(asked).await;
        let said: Vec<String> = candidates
            .iter()
            .map(|(endpoint, left)| {
                let left = match left {
                    Some(bytes) => format!("{} MiB left", bytes >> 20),
                    None => "unreachable".into(),
                };
                format!("{} {left}", docker::endpoint_name(endpoint))
            })
            .collect();
        let Some(chosen) = choose(&candidates) else {
            return Err(HubError::DockerUnavailable {
                endpoint: def.docker_hosts.join(", "),
                reason: "none of the agent's docker_hosts answers".into(),
            });
        };
        let index = def
            .docker_hosts
            .iter()
            .position(|h| h == chosen)
            .unwrap_or(0);
        tracing::info!(
            agent = id,
            "placed on {} ({})",
            docker::endpoint_name(chosen),
            said.join(", ")
        );
        self.record_placement(def, index);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::choose;

    /// Engines with the memory each has left (`None`: it did not answer).
    type Candidates<'a> = &'a [(&'a str, Option<u64>)];

    #[test]
    fn the_engine_with_the_most_memory_left_is_chosen() {
        let cases: [(Candidates, Option<&str>); 7] = [
            (&[("a", Some(100)), ("b", Some(300))], Some("b")),
            (&[("a", Some(300)), ("b", Some(100))], Some("a")),
            // An engine that does not answer is passed over, however much it had.
            (&[("a", None), ("b", Some(1))], Some("b")),
            (&[("a", Some(0)), ("b", None)], Some("a")),
            // Equals: the first listed.
            (&[("a", Some(5)), ("b", Some(5)), ("c", Some(5))], Some("a")),
            (&[("a", Some(1)), ("b", Some(5)), ("c", Some(5))], Some("b")),
            (&[("a", None), ("b", None)], None),
        ];
        for (candidates, chosen) in cases {
            assert_eq!(choose(candidates), chosen, "{candidates:?}");
        }
        assert_eq!(choose(&[]), None);
    }
}
