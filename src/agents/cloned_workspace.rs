//! An agent's workspace on a remote engine: a clone of its branch in a volume on that engine,
//! made at its first start and pushed back to the user's repository over the hub's API (see
//! `api/git.rs`), when a turn ends and before a stop. Nothing here needs the engine to see a
//! file of the hub's machine: the hub works in the container through the engine's exec API.
//!
//! - The volume (`agent-hub-<hub>-<agent>-workspace`, labelled like the homes) is mounted at the
//!   workdir and outlives the container; the clone is marked complete by
//!   [`CLONED_MARK`], which the shipped entrypoint waits for (`AGENT_HUB_WORKSPACE=clone`)
//!   before it starts the agent's program, so the program starts in its checkout.
//! - Every git command the hub runs there presents a credential of the agent's own, minted for
//!   that command and revoked after it, in git's environment (`GIT_CONFIG_*`): never in the
//!   clone's `.git/config`, nor the container's environment.

use std::time::Duration;

use super::containers::Place;
use super::{AgentStatus, Agents};
use crate::config::AgentDef;
use crate::docker::exec::{ExecOutput, ExecRequest};
use crate::error::{HubError, HubResult};
use crate::workspace::{Changes, Diffs};

/// The file that says the clone is complete (an interrupted one is made again).
pub const CLONED_MARK: &str = ".git/agent-hub-cloned";
/// Set on the container: the entrypoint waits for [`CLONED_MARK`] before starting the program.
pub const CLONE_ENV: (&str, &str) = ("AGENT_HUB_WORKSPACE", "clone");
/// How long a clone or a push may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);

/// The volume that holds an agent's clone on its engine.
pub fn volume_name(hub_id: &str, agent_id: &str) -> String {
    format!("agent-hub-{hub_id}-{agent_id}-workspace")
}

/// The workdir the clone is at (default `/workspace`).
pub fn workdir(def: &AgentDef) -> String {
    def.workdir_or_default()
        .unwrap_or_else(|| "/workspace".into())
}

/// Mounts the agent's workspace volume at its workdir and tells the entrypoint to wait for the
/// clone.
pub(super) fn mount(def: &mut AgentDef, hub_id: &str) {
    let workdir = workdir(def);
    def.mounts
        .push(format!("{}:{workdir}", volume_name(hub_id, &def.id)));
    def.workdir = Some(workdir);
    def.env.insert(CLONE_ENV.0.into(), CLONE_ENV.1.into());
}

/// Clones the agent's branch into the workdir unless a complete clone is there (a partial one
/// is cleared first), with an identity for commits when the container has none; says
/// `cloned` when it made one.
const CLONE: &str = r#"set -eu
cd "$1"
if [ -f .git/agent-hub-cloned ]; then exit 0; fi
find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +
git clone --quiet --branch "$3" -- "$2" .
git config --get user.name >/dev/null || git config user.name "$4"
git config --get user.email >/dev/null || git config user.email "$5"
: > .git/agent-hub-cloned
echo cloned
"#;

/// Pushes the branch to the hub (a clone not complete has nothing to push).
const PUSH: &str = r#"set -eu
cd "$1"
[ -f .git/agent-hub-cloned ] || exit 0
git push --quiet origin "refs/heads/$2:refs/heads/$2"
"#;

/// The uncommitted files, as `workspace::uncommitted_from` reads them, sections apart by `$2`:
/// the untracked files, then the diff's line counts and statuses against `HEAD` with them
/// intended to be added (in a copy of the index: nothing of the agent's changes), then with
/// `$3 = full` the diff itself.
const UNCOMMITTED: &str = r#"set -eu
cd "$1"
t=$(mktemp)
trap 'rm -f "$t" "$t.lock"' EXIT
i=$(git rev-parse --git-path index)
if [ -f "$i" ]; then cp "$i" "$t"; else rm -f "$t"; fi
export GIT_INDEX_FILE="$t" GIT_OPTIONAL_LOCKS=0 LC_ALL=C
git ls-files --others --exclude-standard -z
printf '%s' "$2"
git ls-files --others --exclude-standard -z | GIT_LITERAL_PATHSPECS=1 xargs -0 -r git add --intent-to-add --
git diff --no-color --no-ext-diff -M --numstat -z HEAD --
printf '%s' "$2"
git diff --no-color --no-ext-diff -M --name-status -z HEAD --
if [ "$3" = full ]; then
    printf '%s' "$2"
    git diff --no-color --no-ext-diff -M --no-textconv HEAD --
fi
"#;

impl Agents {
    /// Before its container is made: the agent's branch (made from the base the first time)
    /// and its workspace volume, mounted.
    pub(super) async fn prepare_cloned_workspace(&self, def: &mut AgentDef) -> HubResult<()> {
        let Some(ws) = self.workspace_info(def) else {
            return Ok(());
        };
        super::workspace::blocking(move || {
            crate::workspace::ensure_branch(&super::workspace::branch(&ws))
        })
        .await?;
        let name = volume_name(self.hub_id(), &def.id);
        let spec = super::containers::VolumeSpec {
            name: &name,
            device: None,
            agent_id: &def.id,
            hub_id: self.hub_id(),
        };
        self.handles
            .containers
            .ensure_volume(def.endpoint(), spec)
            .await?;
        mount(def, self.hub_id());
        Ok(())
    }

    /// Once its container runs: the clone, unless it is there (a new one's setup is to run).
    pub(super) async fn clone_workspace(&self, def: &AgentDef, container: &str) -> HubResult<()> {
        let (Some(ws), Some(hub_url)) = (self.workspace_info(def), def.hub_url.as_deref()) else {
            return Ok(());
        };
        let url = format!("{}/v1/agents/{}/git", hub_url.trim_end_matches('/'), def.id);
        let email = format!("{}@agent-hub.invalid", def.id);
        let args = [workdir(def), url, ws.branch, def.id.clone(), email];
        let out = self.git_as_agent(def, container, CLONE, &args).await?;
        if out.exit_code != 0 {
            return Err(HubError::AgentStartFailed {
                id: def.id.clone(),
                reason: format!(
                    "its workspace could not be cloned from the hub at {hub_url} (is hub_url how \
                     its container reaches the hub?): {}",
                    error_text(&out)
                ),
                screen: None,
            });
        }
        if out.stdout_text().trim_end().ends_with("cloned") {
            self.forget_setup(&def.id);
        }
        Ok(())
    }

    /// Pushes the agent's branch from its container to the user's repository (`why`: for the
    /// log). Nothing for an agent whose workspace is not a clone, or that is not running.
    pub async fn push_workspace(&self, id: &str, why: &str) -> HubResult<()> {
        let def = self.def(id)?;
        let lock = self.push_locks.of(id)?;
        let _one = lock.lock().await;
        let Some(container) = self.running_clone(def) else {
            return Ok(());
        };
        let Some(ws) = self.workspace_info(def) else {
            return Ok(());
        };
        let args = [workdir(def), ws.branch];
        let out = self.git_as_agent(def, &container, PUSH, &args).await?;
        if out.exit_code != 0 {
            tracing::warn!(
                agent = id,
                "its workspace was not pushed ({why}): {}",
                error_text(&out)
            );
            return Err(HubError::Workspace {
                code: "GIT_FAILED",
                message: format!(
                    "the push of agent '{id}''s branch failed: {}",
                    error_text(&out)
                ),
                files: Vec::new(),
            });
        }
        tracing::debug!(agent = id, "workspace pushed ({why})");
        Ok(())
    }

    /// What the agent pushed to its branch, and the uncommitted files in its container while
    /// it runs.
    pub(super) async fn cloned_changes(&self, def: &AgentDef, full: bool) -> HubResult<Changes> {
        let ws = self.workspace_of(&def.id)?;
        let path = ws.path.clone();
        let of = ws.clone();
        let mut changes = super::workspace::blocking(move || {
            crate::workspace::committed_changes(&super::workspace::branch(&of), full)
        })
        .await?;
        changes.path = path;
        let Some(container) = self.running_clone(def) else {
            return Ok(changes);
        };
        let sep = format!("\u{1}agent-hub-{:016x}\u{1}", rand::random::<u64>());
        let mode = if full { "full" } else { "files" };
        let args = [workdir(def), sep.clone(), mode.into()];
        let at = Place {
            endpoint: def.endpoint(),
            container: &container,
        };
        let req = ExecRequest {
            argv: script_argv(UNCOMMITTED, &args),
            ..ExecRequest::default()
        };
        let out = self.handles.containers.exec(at, &req).await?;
        if out.exit_code != 0 {
            return Err(HubError::Workspace {
                code: "GIT_FAILED",
                message: format!(
                    "git in agent '{}''s container: {}",
                    def.id,
                    error_text(&out)
                ),
                files: Vec::new(),
            });
        }
        let parts = split(&out.stdout, sep.as_bytes());
        let part = |n: usize| parts.get(n).copied().unwrap_or_default();
        changes.uncommitted = crate::workspace::uncommitted_from(part(0), part(1), part(2));
        if let Some(diff) = changes.diff.as_mut() {
            *diff = Diffs {
                committed: std::mem::take(&mut diff.committed),
                uncommitted: String::from_utf8_lossy(part(3)).into_owned(),
            };
        }
        Ok(changes)
    }

    /// The agent's running container, when its workspace is a clone.
    fn running_clone(&self, def: &AgentDef) -> Option<String> {
        if !def.clones_workspace() {
            return None;
        }
        let rt = self.lock().get(&def.id).cloned()?;
        let running = matches!(rt.status, AgentStatus::Running | AgentStatus::Starting);
        running.then_some(rt.container_id).flatten()
    }

    /// Runs `script` (`sh -c`) in the agent's container as its user, its git presenting a
    /// credential of the agent's own minted for it and revoked after.
    async fn git_as_agent(
        &self,
        def: &AgentDef,
        container: &str,
        script: &str,
        args: &[String],
    ) -> HubResult<ExecOutput> {
        let holder = crate::credentials::git_holder(&def.id);
        let who = self
            .identity(&def.id)
            .ok_or_else(|| HubError::AgentNotFound { id: def.id.clone() })?;
        let token = self.handles.credentials.mint(&holder, who);
        let req = ExecRequest {
            argv: script_argv(script, args),
            env: vec![
                "GIT_TERMINAL_PROMPT=0".to_string(),
                "GIT_CONFIG_COUNT=1".into(),
                "GIT_CONFIG_KEY_0=http.extraHeader".into(),
                format!("GIT_CONFIG_VALUE_0=Authorization: Bearer {token}"),
            ],
            ..ExecRequest::default()
        };
        let at = Place {
            endpoint: def.endpoint(),
            container,
        };
        let run = self.handles.containers.exec(at, &req);
        let out = tokio::time::timeout(GIT_TIMEOUT, run).await;
        self.handles.credentials.revoke(&holder);
        out.unwrap_or_else(|_| {
            Err(HubError::Workspace {
                code: "GIT_FAILED",
                message: format!(
                    "git in agent '{}''s container took over {} s",
                    def.id,
                    GIT_TIMEOUT.as_secs()
                ),
                files: Vec::new(),
            })
        })
    }
}

/// What a failed command said (its exit code when it said nothing).
fn error_text(out: &ExecOutput) -> String {
    match out.stderr_text() {
        text if text.is_empty() => format!("exit code {}", out.exit_code),
        text => text,
    }
}

/// `sh -c SCRIPT agent-hub ARGS...`.
fn script_argv(script: &str, args: &[String]) -> Vec<String> {
    ["sh", "-c", script, "agent-hub"]
        .iter()
        .map(|s| s.to_string())
        .chain(args.iter().cloned())
        .collect()
}

/// `bytes` cut at every `sep`.
fn split<'a>(bytes: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut parts = Vec::new();
    let mut rest = bytes;
    while let Some(at) = rest.windows(sep.len()).position(|w| w == sep) {
        parts.push(&rest[..at]);
        rest = &rest[at + sep.len()..];
    }
    parts.push(rest);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sections_are_cut_at_the_separator() {
        let sep = b"\x01s\x01";
        assert_eq!(
            split(b"a\0b\0\x01s\x01\x01s\x01c", sep),
            vec![&b"a\0b\0"[..], b"", b"c"]
        );
        assert_eq!(split(b"", sep), vec![&b""[..]]);
    }

    #[test]
    fn the_volume_is_mounted_at_the_workdir_and_the_entrypoint_told_to_wait() {
        let mut def: AgentDef = toml::from_str(
            "id = \"w1\"\nimage = \"i\"\nworkspace = { repo = \"/r\" }\ndocker_host = \"tcp://h:1\"",
        )
        .unwrap();
        mount(&mut def, "hub");
        assert_eq!(def.mounts, ["agent-hub-hub-w1-workspace:/workspace"]);
        assert_eq!(def.workdir.as_deref(), Some("/workspace"));
        assert_eq!(def.env["AGENT_HUB_WORKSPACE"], "clone");
    }
}
