//! Bringing the registry back after a restart (even after SIGKILL): host tmux sessions are
//! re-adopted with their id and owner, container sessions get theirs back when the Docker
//! sync attaches them, the ended session of a stopped container agent is listed as ended
//! again (its last screen, from its snapshot) for its agent to take back, external sessions
//! are registered again and health-checked, and host PTY sessions, which cannot outlive the
//! hub, are listed as exited with the reason.
//! Host tmux sessions on the hub's socket that the registry does not know are adopted too,
//! so a lost or corrupt registry still brings back what tmux still runs.

use crate::protocol::SessionBackend;
use crate::registry::{NewSession, Origin, SessionRegistry};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use chrono::Utc;
use serde::Serialize;

use super::registry_file::{RegistryFile, SavedSession};
use super::{Handles, PersistError};
use crate::backend::exited::ExitedBackend;
use crate::backend::tmux::{TmuxBackend, TmuxPlace};
use crate::backend::{SpawnSpec, TermSize};
use crate::external_sessions::RegisterRequest;
use crate::output::{ExitInfo, Output};
use crate::session::{Owner, SessionSpec};

/// What a restore did, for the log and `/health`.
#[derive(Debug, Default, Clone, Serialize)]
pub struct RestoreReport {
    pub tmux_reattached: Vec<String>,
    pub tmux_adopted_unknown: Vec<String>,
    pub exited: Vec<String>,
    pub containers_pending: Vec<String>,
    pub external: Vec<String>,
    pub skipped: Vec<String>,
}

/// `1 session` / `2 sessions`.
fn count(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

impl std::fmt::Display for RestoreReport {
    /// One sentence for the log: `restored the registry: re-attached 2 tmux sessions, ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = [
            (&self.tmux_reattached, "re-attached", "tmux session"),
            (
                &self.tmux_adopted_unknown,
                "adopted",
                "tmux session found running",
            ),
            (&self.exited, "kept as ended", "session"),
            (
                &self.containers_pending,
                "waiting for its engine:",
                "container agent session",
            ),
            (&self.external, "registered again", "external session"),
            (&self.skipped, "skipped", "session already live"),
        ]
        .into_iter()
        .filter(|(ids, _, _)| !ids.is_empty())
        .map(|(ids, did, what)| format!("{did} {}", count(ids.len(), what)))
        .collect();
        match parts.is_empty() {
            true => write!(f, "restored the registry: nothing to bring back"),
            false => write!(f, "restored the registry: {}", parts.join(", ")),
        }
    }
}

/// Why a PTY session that was running when the registry was last saved is no more.
pub const PTY_GONE: &str =
    "the hub stopped while it ran (host PTY sessions end with the hub that started them)";

pub async fn restore(hub: &Handles, file: Option<RegistryFile>, data_dir: &Path) -> RestoreReport {
    let mut report = RestoreReport::default();
    let place = TmuxPlace::Host {
        socket_name: hub.config.tmux_socket_name(),
    };
    let mut known_tmux = HashSet::new();
    for saved in file.map(|f| f.sessions).unwrap_or_default() {
        if hub.sessions.session(&saved.id).is_some() {
            report.skipped.push(saved.id);
            continue;
        }
        match saved.backend {
            SessionBackend::Docker => match (&saved.container_id, &saved.exit) {
                (Some(container), None) => {
                    hub.sessions.remember_container_session(
                        container,
                        &saved.id,
                        saved.owner.clone(),
                    );
                    report.containers_pending.push(saved.id);
                }
                (_, Some(_)) if last_screen_kept(hub, &saved, data_dir) => {
                    restore_last_screen(hub, &saved, data_dir);
                    report.exited.push(saved.id);
                }
                _ => report.skipped.push(saved.id),
            },
            SessionBackend::Tmux => {
                let name = saved.tmux_session.clone().unwrap_or_default();
                known_tmux.insert(name.clone());
                let alive = saved.exit.is_none() && place.has_session(&name).await;
                if alive && adopt_tmux(hub, &place, &name, Some(&saved)).await.is_ok() {
                    report.tmux_reattached.push(saved.id);
                } else {
                    let reason = format!("the tmux session '{name}' ended while the hub was down");
                    tombstone(hub, &saved, &reason, data_dir);
                    report.exited.push(saved.id);
                }
            }
            SessionBackend::External => match restore_external(hub, &saved).await {
                Ok(()) => report.external.push(saved.id),
                Err(e) => {
                    tracing::warn!(session = %saved.id, "external session not restored: {e}");
                    report.skipped.push(saved.id);
                }
            },
            SessionBackend::Pty => {
                tombstone(hub, &saved, PTY_GONE, data_dir);
                report.exited.push(saved.id);
            }
        }
    }
    // Only on the hub's own tmux server: the user's default server is not ours to take.
    let own_server = hub.config.tmux_socket_name().is_some();
    let unknown = match own_server {
        true => place.list_sessions().await.unwrap_or_default(),
        false => Vec::new(),
    };
    for name in unknown {
        if known_tmux.contains(&name) {
            continue;
        }
        match adopt_tmux(hub, &place, &name, None).await {
            Ok(id) => report.tmux_adopted_unknown.push(id),
            Err(e) => tracing::warn!(tmux_session = %name, "could not adopt: {e}"),
        }
    }
    report
}

/// The agent of a container session, when `hub.toml` still defines it.
fn defined_agent<'a>(hub: &Handles, saved: &'a SavedSession) -> Option<&'a str> {
    let agent = saved.agent_id.as_deref()?;
    hub.config
        .agent_defs()
        .any(|d| d.id == agent)
        .then_some(agent)
}

/// Whether the ended session of a container agent left its last screen: a snapshot (with
/// `snapshots` on), and an agent `hub.toml` still defines to show it. (Without one the agent
/// says it has no screen of its last run, as before the restart it would have had.)
fn last_screen_kept(hub: &Handles, saved: &SavedSession, data_dir: &Path) -> bool {
    defined_agent(hub, saved).is_some() && super::snapshots::exists(data_dir, &saved.id)
}

/// The ended session of a stopped container agent: listed as ended again, with its snapshot
/// (its last screen), and given back to its agent when the Docker sync finds it stopped.
/// Never alive again: the agent's next start makes a new session.
fn restore_last_screen(hub: &Handles, saved: &SavedSession, data_dir: &Path) {
    tombstone(hub, saved, "", data_dir);
    if let Some(agent) = defined_agent(hub, saved) {
        hub.sessions.remember_ended_agent_session(agent, &saved.id);
    }
}

fn spec_of(saved: &SavedSession, backend: SessionBackend) -> SessionSpec {
    SessionSpec {
        id: saved.id.clone(),
        backend,
        source: saved.source.clone(),
        shell: saved.shell.clone(),
        args: saved.args.clone(),
        cwd: saved.cwd.clone(),
        tmux_session: saved.tmux_session.clone(),
        agent_id: saved.agent_id.clone(),
        policy: saved.policy.clone(),
        container_id: saved.container_id.clone(),
        created_at: saved.created_at,
    }
}

/// Attaches a host tmux session again: with its saved id and owner, or (unknown to the
/// registry) with a new id. Returns the session id.
async fn adopt_tmux(
    hub: &Handles,
    place: &TmuxPlace,
    name: &str,
    saved: Option<&SavedSession>,
) -> Result<String, PersistError> {
    let cfg = &hub.config;
    let size = saved.map_or(
        TermSize {
            cols: cfg.cols,
            rows: cfg.rows,
        },
        |s| TermSize {
            cols: s.cols,
            rows: s.rows,
        },
    );
    let spawn = SpawnSpec {
        program: saved.map(|s| s.shell.clone()).unwrap_or_default(),
        args: Vec::new(),
        cwd: "/".into(),
        env: Default::default(),
        size,
    };
    let output = Arc::new(Output::new(cfg.scrollback_bytes));
    let (backend, adopted) = TmuxBackend::start(place.clone(), name, &spawn, output.clone())
        .await
        .map_err(PersistError::TmuxAttach)?;
    if !adopted {
        return Err(PersistError::TmuxGone {
            name: name.to_string(),
        });
    }
    let (spec, owner) = match saved {
        Some(s) => (spec_of(s, SessionBackend::Tmux), s.owner.clone()),
        None => {
            let id = hub.sessions.new_id("tmux");
            let spec = SessionSpec {
                id,
                backend: SessionBackend::Tmux,
                source: "host".into(),
                shell: String::new(),
                args: Vec::new(),
                cwd: String::new(),
                tmux_session: Some(name.to_string()),
                agent_id: None,
                policy: None,
                container_id: None,
                created_at: Utc::now(),
            };
            (spec, Owner::default())
        }
    };
    let id = spec.id.clone();
    let new = NewSession::new(spec, size, owner, output, backend);
    hub.sessions.add(new, Origin::Restored);
    Ok(id)
}

/// Lists a session whose program is gone as exited, with the saved scrollback if any.
fn tombstone(hub: &Handles, saved: &SavedSession, reason_if_running: &str, data_dir: &Path) {
    let output = Arc::new(Output::new(hub.config.scrollback_bytes));
    if let Some(bytes) = super::snapshots::load(data_dir, &saved.id) {
        output.push(&bytes);
    }
    let exit = match &saved.exit {
        Some(e) => ExitInfo {
            exit_code: e.exit_code,
            reason: e.reason.clone(),
            exited_at: e.exited_at,
        },
        None => ExitInfo {
            exit_code: None,
            reason: reason_if_running.to_string(),
            exited_at: Utc::now(),
        },
    };
    output.finish(exit);
    let size = TermSize {
        cols: saved.cols,
        rows: saved.rows,
    };
    let spec = spec_of(saved, saved.backend);
    let new = NewSession::new(spec, size, saved.owner.clone(), output, ExitedBackend);
    hub.sessions.add(new, Origin::Restored);
}

async fn restore_external(hub: &Handles, saved: &SavedSession) -> crate::error::HubResult<()> {
    let link = saved
        .external
        .as_ref()
        .ok_or_else(|| crate::error::HubError::bad_request("no bridge saved"))?;
    hub.sessions.reserve_id(&saved.id);
    let req = RegisterRequest {
        session_id: saved.id.clone(),
        remote_session_id: Some(link.remote_session_id.clone()),
        source: Some(saved.source.clone()),
        pid: saved.pid,
        bridge_url: link.bridge_url.clone(),
        bridge_token: link.bridge_token.clone(),
        cols: Some(saved.cols),
        rows: Some(saved.rows),
        owner: saved.owner.clone(),
        no_other_fields: Default::default(),
    };
    let (session, _) = hub.externals.register(req, false).await?;
    if let Some(link) = session.external().cloned() {
        hub.tracker.spawn(async move {
            if let Err(e) = link.check_health().await {
                tracing::warn!(bridge = link.client.url(), "restored external session: {e}");
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod report_tests {
    use super::RestoreReport;

    #[test]
    fn the_report_is_a_sentence() {
        assert_eq!(
            RestoreReport::default().to_string(),
            "restored the registry: nothing to bring back"
        );
        let report = RestoreReport {
            tmux_reattached: vec!["a".into(), "b".into()],
            exited: vec!["c".into()],
            ..RestoreReport::default()
        };
        assert_eq!(
            report.to_string(),
            "restored the registry: re-attached 2 tmux sessions, kept as ended 1 session"
        );
    }
}
