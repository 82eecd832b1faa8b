//! Starting host sessions: a program in a local PTY or in a tmux session of the hub's own tmux
//! server, registered in the session registry. The hub and the PTY tasks start sessions
//! through this narrow handle.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;

use crate::actor::Actor;
use crate::backend::pty::PtyBackend;
use crate::backend::tmux::{TmuxBackend, TmuxPlace};
use crate::backend::{Backend, SpawnSpec, TermSize};
use crate::config::{check_size, HubConfig};
use crate::error::{HubError, HubResult};
use crate::guard::Guard;
use crate::output::Output;
use crate::protocol::BackendKind;
use crate::redact::Redactor;
use crate::registry::{NewSession, Origin, Registry, SessionRegistry};
use crate::session::{Owner, Session, SessionSpec, StatusFiles};

pub mod spawn_check;
pub mod usage;

use spawn_check::{check_cwd, check_program};

/// What a new session should run.
#[derive(Debug, Clone, Default)]
pub struct CreateSession {
    pub backend: BackendKind,
    pub shell: Option<String>,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub cols: Option<u16>,
    pub rows: Option<u16>,
    pub env: BTreeMap<String, String>,
    pub tmux_session: Option<String>,
    pub owner: Owner,
    /// The policy that applies (must be loaded).
    pub policy: Option<String>,
    /// Give the program a credential acting as its owner agent (see
    /// [`crate::protocol::CreateSessionRequest::hub_access`]).
    pub hub_access: bool,
}

/// Starts host sessions (cheap to clone).
#[derive(Clone)]
pub struct HostSessions {
    pub config: Arc<HubConfig>,
    pub sessions: Arc<Registry>,
    pub guard: Arc<Guard>,
    /// Learns the secrets in a new session's environment.
    pub redactor: Arc<Redactor>,
    /// A requested policy must be loaded.
    pub policy: Arc<crate::policy::Engine>,
    /// For sessions given hub access.
    pub credentials: Arc<crate::credentials::Credentials>,
    /// Where the API really listens, once the daemon has bound it (else `config.listen`).
    pub api_addr: Arc<std::sync::OnceLock<std::net::SocketAddr>>,
    /// Counts what a session's CLI spends.
    pub ledger: Arc<crate::ledger::Ledger>,
}

impl HostSessions {
    /// The environment a session's program gets: the configured pass-through variables of the
    /// hub's own environment, terminal defaults, then the request's variables.
    pub fn child_env(
        &self,
        id: &str,
        extra: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for key in &self.config.env_passthrough {
            if let Ok(value) = std::env::var(key) {
                env.insert(key.clone(), value);
            }
        }
        env.insert("TERM".into(), "xterm-256color".into());
        env.entry("LANG".into()).or_insert_with(|| "C.UTF-8".into());
        env.insert("AGENT_HUB_SESSION_ID".into(), id.into());
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    }

    fn default_shell(&self) -> String {
        self.config
            .default_shell
            .clone()
            .unwrap_or_else(crate::platform::default_shell)
    }

    /// Starts a session for `actor`: its program and arguments are a command too
    /// (`sh -c 'rm -rf /'`), so they pass the command guard first.
    pub async fn create_as(&self, actor: &Actor, req: CreateSession) -> HubResult<Arc<Session>> {
        if let Some(shell) = &req.shell {
            let command = std::iter::once(shell.as_str())
                .chain(req.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            self.guard.check_input(&command, actor.role())?;
        }
        self.create(req).await
    }

    /// Starts a session and registers it (the hub's own sessions: not checked by the guard).
    pub async fn create(&self, req: CreateSession) -> HubResult<Arc<Session>> {
        let cfg = &self.config;
        let size = TermSize {
            cols: req.cols.unwrap_or(cfg.cols),
            rows: req.rows.unwrap_or(cfg.rows),
        };
        check_size(size.cols, size.rows).map_err(|e| HubError::bad_request(e.to_string()))?;
        if let Some(bad) = req
            .env
            .keys()
            .find(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return Err(HubError::bad_request(format!(
                "invalid environment variable name '{bad}'"
            )));
        }
        check_spawn_text(&req)?;
        if req.backend == BackendKind::Tmux {
            if let Some(why) = crate::backend::tmux::HOST_SESSIONS_REFUSED {
                return Err(HubError::bad_request(why));
            }
        }
        if let Some(name) = &req.tmux_session {
            let ok = crate::backend::tmux::control::is_safe_name(name)
                && !name.starts_with(['%', '$', '@', '=']);
            if !ok {
                return Err(HubError::bad_request(format!(
                    "tmux session name '{name}' is not allowed: use 1-64 characters of letters, digits, '_', '-' and '.'"
                )));
            }
        }
        self.redactor
            .add_env_secrets(&req.env, &cfg.redact.secret_env);
        if let Some(name) = &req.policy {
            if self.policy.policy(name).is_none() {
                return Err(HubError::PolicyNotFound { name: name.clone() });
            }
        }
        let kind = match req.backend {
            BackendKind::Pty => crate::protocol::SessionBackend::Pty,
            BackendKind::Tmux => crate::protocol::SessionBackend::Tmux,
        };
        let id = self.sessions.new_id(kind.as_str());
        // What the request names is checked (a refusal); the hub's own defaults are not (a
        // failure to start them is the hub's).
        let cwd = match req.cwd {
            Some(cwd) => {
                check_cwd(&cwd)?;
                cwd
            }
            None => crate::platform::home_dir(),
        };
        let mut env = self.child_env(&id, &req.env);
        if let Some(shell) = &req.shell {
            check_program(shell, &cwd, env.get("PATH").map(String::as_str))?;
        }
        if req.hub_access {
            env.extend(self.hub_access_env(&id, &req.owner)?);
        }
        let spawn = SpawnSpec {
            program: req.shell.unwrap_or_else(|| self.default_shell()),
            args: req.args,
            env,
            cwd,
            size,
        };
        let output = Arc::new(Output::new(cfg.scrollback_bytes));
        let (backend, tmux_session): (Box<dyn Backend>, _) = match req.backend {
            BackendKind::Pty => {
                let b = PtyBackend::spawn(&spawn, output.clone()).map_err(|e| {
                    HubError::SpawnFailed {
                        reason: e.to_string(),
                    }
                })?;
                (Box::new(b), None)
            }
            BackendKind::Tmux => {
                let name = req.tmux_session.unwrap_or_else(|| id.clone());
                let server = TmuxPlace::Host {
                    socket_name: cfg.tmux_socket_name(),
                };
                let (b, _adopted) = TmuxBackend::start(server, &name, &spawn, output.clone())
                    .await
                    .map_err(|e| HubError::SpawnFailed {
                        reason: e.to_string(),
                    })?;
                (Box::new(b), Some(name))
            }
        };
        let env_with_home = with_home(&spawn.env);
        let status_files = StatusFiles::Host(env_with_home.clone());
        let usage_place = (env_with_home, spawn.cwd.clone(), self.team_of(&req.owner));
        let spec = SessionSpec {
            id: id.clone(),
            backend: kind,
            source: "host".into(),
            shell: spawn.program,
            args: spawn.args,
            cwd: spawn.cwd.display().to_string(),
            tmux_session,
            agent_id: None,
            policy: req.policy,
            container_id: None,
            created_at: Utc::now(),
        };
        let session = self.sessions.add(
            NewSession {
                spec,
                size,
                owner: req.owner,
                output,
                backend,
            },
            Origin::Created,
        );
        session.follow_status_file(status_files);
        self.follow_usage(&session, usage_place);
        Ok(session)
    }

    /// The team a session's spending counts for: its owner agent's, else the default one.
    fn team_of(&self, owner: &Owner) -> String {
        let agent = owner.owner_agent_id.as_deref();
        let def = agent.and_then(|id| self.config.agent_defs().find(|d| d.id == id));
        def.map_or(crate::config::DEFAULT_TEAM, |d| d.team())
            .to_string()
    }

    /// Counts what the session's CLI spends from the records it writes after the session
    /// started (found from its environment `env` and its working directory), or keeps why
    /// not.
    fn follow_usage(
        &self,
        session: &Arc<Session>,
        (env, cwd, team): (BTreeMap<String, String>, PathBuf, String),
    ) {
        let id = session.id().to_string();
        let followed =
            usage::records_of(&session.profile(), &env, &cwd).and_then(|(dir, format)| {
                let following = crate::ledger::Following {
                    agent: id.clone(),
                    team,
                    from: crate::usage::files::extent(&dir, format),
                    dir,
                    format,
                };
                self.ledger.follow(following, session.closed())
            });
        if let Err(why) = followed {
            self.ledger.note_unread(&id, why);
        }
    }

    /// What a host session given hub access gets: the hub's TCP address, a credential acting
    /// as its owner agent (team and role from that agent's definition, else the `default` team
    /// and the session's `owner_role`), and the agent id.
    fn hub_access_env(&self, id: &str, owner: &Owner) -> HubResult<BTreeMap<String, String>> {
        let agent_id = owner.owner_agent_id.clone().ok_or_else(|| {
            HubError::bad_request("hub_access needs owner_agent_id: the agent the session acts as")
        })?;
        let def = self.config.agent_defs().find(|d| d.id == agent_id);
        let who = crate::actor::AgentIdentity {
            agent_id: agent_id.clone(),
            team: def
                .map_or(crate::config::DEFAULT_TEAM, |d| d.team())
                .to_string(),
            leader: def.map_or(owner.owner_role.as_deref() == Some("leader"), |d| {
                d.is_leader()
            }),
            may_merge: def.is_some_and(|d| d.is_leader() && d.may_merge),
        };
        let token = self
            .credentials
            .mint(&crate::credentials::session_holder(id), who);
        let listen = self.api_addr.get().copied().unwrap_or(self.config.listen);
        let host = if listen.ip().is_unspecified() || listen.ip().is_loopback() {
            format!("127.0.0.1:{}", listen.port())
        } else {
            listen.to_string()
        };
        Ok(BTreeMap::from([
            ("AGENT_HUB_URL".to_string(), format!("http://{host}")),
            ("AGENT_HUB_TOKEN".to_string(), token),
            ("AGENT_HUB_AGENT_ID".to_string(), agent_id),
            // Its own session, which `agent-hub hook` reports for.
            ("AGENT_HUB_SESSION_ID".to_string(), id.to_string()),
        ]))
    }
}

/// A session's environment with a `HOME`: its own, else the hub's (`platform::home_dir`).
fn with_home(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = env.clone();
    if env.get("HOME").is_none_or(|h| h.is_empty()) {
        let hub = crate::platform::home_dir().to_string_lossy().into_owned();
        env.insert("HOME".into(), hub);
    }
    env
}

/// What no program can be started with, refused as a bad request rather than failing the
/// spawn (a server error): an empty program name, and a NUL byte in the program, an argument,
/// an environment value or the directory. (A program or directory that does not exist is
/// refused by [`spawn_check`].)
fn check_spawn_text(req: &CreateSession) -> HubResult<()> {
    if req.shell.as_deref() == Some("") {
        return Err(HubError::bad_request("shell must not be empty"));
    }
    let mut texts = req.shell.iter().chain(&req.args).chain(req.env.values());
    let cwd_nul = req
        .cwd
        .as_ref()
        .is_some_and(|c| c.to_string_lossy().contains('\0'));
    if cwd_nul || texts.any(|t| t.contains('\0')) {
        return Err(HubError::bad_request(
            "shell, args, env values and cwd must not contain NUL bytes",
        ));
    }
    Ok(())
}
