//! The workspace's `setup` commands (`setup = ["npm ci", "uv sync"]`): run in the agent's
//! container, in its checkout, as its user, once per checkout, before its program starts.
//!
//! - **Once**: a success is remembered in the agent's directory ([`home::setup_mark`], the
//!   commands run); a checkout made anew forgets it, and a changed list of commands runs
//!   again ([`decide`]). A failure is not remembered: the next start runs the commands again.
//! - **Before the program**: every start of an agent with `setup` first writes
//!   [`home::SETUP_PENDING`] into its directory in the container (mounted locally, put through
//!   the engine on another), and the shipped entrypoint does not start the program while that
//!   file is not empty. After the commands (or when there is nothing to run), the hub empties
//!   it. A hub-started tmux session is started after it anyway.
//! - **Through the engine**: each command is `docker exec`, so a remote engine works the same.
//! - **Its output**: the hub's log (`agent=<id>`), `<data_dir>/agents/<id>/setup.log` (the
//!   last run), and on a failure the start's error, `WORKSPACE_SETUP_FAILED` with the command
//!   and its last [`TAIL_LINES`] lines; the container is stopped as after any failed start
//!   (and its wait file emptied: archives can be put into a stopped container).

use std::time::Duration;

use super::containers::Place;
use super::{home, Agents};
use crate::config::AgentDef;
use crate::docker::archive::Entry;
use crate::docker::exec::ExecRequest;
use crate::error::{HubError, HubResult};
use crate::protocol::EventKind;

/// How many last lines of a failed command's output its error shows.
pub const TAIL_LINES: usize = 20;
/// How long all of a start's setup commands may take together.
const SETUP_TIMEOUT: Duration = Duration::from_secs(3600);
/// The stable code of a failed setup.
const FAILED: &str = "WORKSPACE_SETUP_FAILED";

/// What a start does about the workspace's setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing to run: none configured, or these commands succeeded in this checkout.
    Nothing,
    /// Run the commands.
    Run,
}

/// Whether to run `commands`, given what the mark of the last success says (`None`: none).
pub fn decide(commands: &[String], done: Option<&str>) -> Step {
    match commands.is_empty() || done == Some(record(commands).as_str()) {
        true => Step::Nothing,
        false => Step::Run,
    }
}

/// The mark's text for `commands`: one a line.
fn record(commands: &[String]) -> String {
    commands.iter().map(|c| format!("{c}\n")).collect()
}

/// The last `n` lines of `text` with something on them.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Agents {
    /// Before the container starts (local engine): tells the entrypoint whether to wait for
    /// the setup. On another engine this goes with the start's files (`engine_files`).
    pub(super) fn hold_for_setup(&self, def: &AgentDef) -> HubResult<()> {
        let file = home::setup_pending_file(&self.handles.access.agents_dir, &def.id);
        let result = match def.workspace_setup().is_empty() {
            true => std::fs::remove_file(&file).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            }),
            false => std::fs::write(&file, "setup\n"),
        };
        result.map_err(|e| HubError::Internal {
            message: format!("cannot write {}: {e}", file.display()),
        })
    }

    /// The checkout was made now: its setup has not run.
    pub(super) fn forget_setup(&self, id: &str) {
        let mark = home::setup_mark(&self.handles.access.agents_dir, id);
        if let Err(e) = std::fs::remove_file(&mark) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(agent = id, "cannot remove {}: {e}", mark.display());
            }
        }
    }

    /// Once the container runs (and its clone is made): the setup commands when [`decide`]
    /// says so, then the entrypoint released. A failure stops the container.
    pub(super) async fn run_setup(&self, def: &AgentDef, container: &str) -> HubResult<()> {
        let commands = def.workspace_setup();
        if commands.is_empty() {
            return Ok(());
        }
        let agents_dir = &self.handles.access.agents_dir;
        let mark = home::setup_mark(agents_dir, &def.id);
        let done = std::fs::read_to_string(&mark).ok();
        let at = Place {
            endpoint: def.endpoint(),
            container,
        };
        if decide(&commands, done.as_deref()) == Step::Run {
            let mut log = String::new();
            let ran = tokio::time::timeout(
                SETUP_TIMEOUT,
                self.run_commands(def, container, &commands, &mut log),
            )
            .await
            .unwrap_or_else(|_| {
                Err(failed(format!(
                    "agent '{}''s workspace setup took over {} s",
                    def.id,
                    SETUP_TIMEOUT.as_secs()
                )))
            });
            // (An agent on another engine may have no directory here yet.)
            let _ = std::fs::create_dir_all(home::agent_dir(agents_dir, &def.id));
            let log_file = home::setup_log(agents_dir, &def.id);
            if let Err(e) = std::fs::write(&log_file, &log) {
                tracing::warn!(agent = %def.id, "cannot write {}: {e}", log_file.display());
            }
            if let Err(e) = ran {
                // Stopped first, so the program never starts; then the wait file emptied,
                // so a start after `setup` is taken out of the definition does not wait.
                let _ = self.handles.containers.stop(at, def.stop_grace).await;
                let _ = self.release_after_setup(def, at).await;
                return Err(e);
            }
            std::fs::write(&mark, record(&commands)).map_err(|e| HubError::Internal {
                message: format!("cannot write {}: {e}", mark.display()),
            })?;
        }
        self.release_after_setup(def, at).await
    }

    /// Runs each command in turn (`sh -c`, standard error with standard output), its output
    /// appended to `log`; the first failure ends it.
    async fn run_commands(
        &self,
        def: &AgentDef,
        container: &str,
        commands: &[String],
        log: &mut String,
    ) -> HubResult<()> {
        let workdir = def.workdir.clone().unwrap_or_else(|| "/workspace".into());
        for (n, command) in commands.iter().enumerate() {
            let step = format!("workspace setup {}/{}: {command}", n + 1, commands.len());
            self.emit(&def.id, EventKind::AgentStarting, &step);
            let req = ExecRequest {
                argv: [
                    "sh",
                    "-c",
                    "exec 2>&1; sh -c \"$1\"",
                    "agent-hub-setup",
                    command,
                ]
                .map(String::from)
                .to_vec(),
                workdir: workdir.clone(),
                ..ExecRequest::default()
            };
            let at = Place {
                endpoint: def.endpoint(),
                container,
            };
            let out = self.handles.containers.exec(at, &req).await?;
            let text = out.stdout_text();
            log.push_str(&format!("$ {command}\n{text}"));
            for line in text.lines() {
                tracing::info!(agent = %def.id, "setup: {line}");
            }
            if out.exit_code != 0 {
                log.push_str(&format!("(exit code {})\n", out.exit_code));
                return Err(failed(format!(
                    "agent '{}''s workspace setup command `{command}` failed (exit code {}); \
                     its last lines:\n{}",
                    def.id,
                    out.exit_code,
                    last_lines(&text, TAIL_LINES)
                )));
            }
        }
        Ok(())
    }

    /// Empties the entrypoint's wait file: the program may start.
    async fn release_after_setup(&self, def: &AgentDef, at: Place<'_>) -> HubResult<()> {
        if !super::engine_files::through_engine(def) {
            let file = home::setup_pending_file(&self.handles.access.agents_dir, &def.id);
            return std::fs::write(&file, "").map_err(|e| HubError::Internal {
                message: format!("cannot write {}: {e}", file.display()),
            });
        }
        let entries = [Entry::file(home::SETUP_PENDING, "")];
        self.handles
            .containers
            .put_files(at, super::hub_access::AGENT_DIR_IN_CONTAINER, &entries)
            .await
    }
}

fn failed(message: String) -> HubError {
    HubError::Workspace {
        code: FAILED,
        message,
        files: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(commands: &[&str]) -> Vec<String> {
        commands.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn setup_runs_until_these_commands_succeeded_in_this_checkout() {
        let two = list(&["npm ci", "uv sync"]);
        let cases: &[(&[String], Option<&str>, Step)] = &[
            (&[], None, Step::Nothing),
            (&[], Some("npm ci\n"), Step::Nothing),
            (&two, None, Step::Run),
            (&two, Some("npm ci\nuv sync\n"), Step::Nothing),
            // A changed list is a new setup.
            (&two, Some("npm ci\n"), Step::Run),
            (&two, Some("uv sync\nnpm ci\n"), Step::Run),
            (&two, Some(""), Step::Run),
        ];
        for (commands, done, want) in cases {
            assert_eq!(
                decide(commands, *done),
                *want,
                "{commands:?} after {done:?}"
            );
        }
    }

    #[test]
    fn an_error_shows_the_last_lines_with_something_on_them() {
        let text: String = (1..=30).map(|n| format!("line {n}\n\n")).collect();
        let tail = last_lines(&text, TAIL_LINES);
        assert_eq!(tail.lines().count(), 20);
        assert!(
            tail.starts_with("line 11\n") && tail.ends_with("line 30"),
            "{tail}"
        );
        assert_eq!(last_lines("one\n", 20), "one");
        assert_eq!(last_lines("", 20), "");
    }
}
