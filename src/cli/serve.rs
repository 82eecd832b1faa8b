//! `agent-hub serve`: build the config from the file, flags and environment, then run the
//! [`Daemon`] until SIGINT/SIGTERM.

use std::path::PathBuf;

use clap::Args;

use crate::config::{ConfigError, HubConfig};
use crate::daemon::{Components, Daemon, DaemonOptions};
use crate::hub::CreateSession;
use crate::session::Owner;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Config file (hub.toml).
    #[arg(long, env = "AGENT_HUB_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:8100; loopback only).
    #[arg(long, env = "AGENT_HUB_LISTEN")]
    pub listen: Option<std::net::SocketAddr>,
    /// Directory for the hub's state.
    #[arg(long, env = "AGENT_HUB_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Program for new sessions that name none.
    #[arg(long, env = "AGENT_HUB_SHELL")]
    pub shell: Option<String>,
    /// Scrollback kept per session, in bytes.
    #[arg(long, env = "AGENT_HUB_SCROLLBACK_BYTES")]
    pub scrollback_bytes: Option<usize>,
    /// Default talk timeout in milliseconds.
    #[arg(long, env = "AGENT_HUB_TALK_TIMEOUT_MS")]
    pub talk_timeout_ms: Option<u64>,
    /// tmux socket name for tmux sessions ("" = your default tmux server).
    #[arg(long, env = "AGENT_HUB_TMUX_SOCKET")]
    pub tmux_socket: Option<String>,
    /// Open one host shell session labelled "main" at start-up.
    #[arg(long)]
    pub open_shell: bool,
    /// Keep scrollback snapshots in the data dir, so host PTY sessions that end with the hub
    /// can still be read after a restart (off by default: terminals hold secrets).
    #[arg(long, env = "AGENT_HUB_SNAPSHOTS")]
    pub snapshots: bool,
    /// Log lines as text or as one JSON object per line (for log shippers).
    #[arg(long, env = "AGENT_HUB_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: super::logging::LogFormat,
}

fn build_config(args: &ServeArgs) -> Result<HubConfig, ConfigError> {
    let mut config = match &args.config {
        Some(path) => HubConfig::load(path)?,
        None => HubConfig::default(),
    };
    if let Some(v) = args.listen {
        config.listen_on(v);
    }
    if let Some(v) = &args.data_dir {
        config.data_dir = v.clone();
    }
    if let Some(v) = &args.shell {
        config.default_shell = Some(v.clone());
    }
    if let Some(v) = args.scrollback_bytes {
        config.scrollback_bytes = v;
    }
    if let Some(v) = args.talk_timeout_ms {
        config.talk_timeout_ms = v;
    }
    if let Some(v) = &args.tmux_socket {
        config.tmux_socket = v.clone();
    }
    if args.snapshots {
        config.snapshots = true;
    }
    if std::env::var("AGENT_HUB_TERM_BUFFER_ACCESS").is_ok_and(|v| v.eq_ignore_ascii_case("off")) {
        config.term_buffer_access = false;
    }
    if let Ok(token) = std::env::var("AGENT_HUB_TOKEN") {
        config.tokens.push(crate::config::TokenConfig {
            name: "env".into(),
            token,
            role: crate::actor::Role::Admin,
        });
    }
    config.validate()?;
    Ok(config)
}

pub async fn run(args: ServeArgs) -> i32 {
    super::logging::init(args.log_format);
    let config = match build_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agent-hub: {e}");
            return 2;
        }
    };
    if let Err(e) = std::fs::create_dir_all(&config.data_dir) {
        eprintln!(
            "agent-hub: cannot create data dir {}: {e}",
            config.data_dir.display()
        );
        return 2;
    }
    let mut config = config;
    resolve_hub_id(&mut config);
    // The shell is open before the API answers: whoever sees the hub up finds it.
    let open = args.open_shell.then(|| CreateSession {
        owner: Owner {
            label: Some("main".into()),
            ..Owner::default()
        },
        ..CreateSession::default()
    });
    let opts = DaemonOptions {
        listener: None,
        components: Components::all(),
        open_sessions: open.into_iter().collect(),
    };
    let daemon = match Daemon::start(config, opts).await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("agent-hub: {e}");
            return 2;
        }
    };
    super::logging::started(daemon.hub(), daemon.addr(), daemon.restored_sessions());
    announce_access(daemon.hub(), daemon.addr());
    match daemon.run_until_stopped().await {
        Ok(()) => {
            eprintln!("agent-hub: stopped");
            0
        }
        Err(e) => {
            eprintln!("agent-hub: server error: {e}");
            1
        }
    }
}

/// The hub's id: from the config, else kept in the data dir (created once). A data dir that
/// cannot be written is not fatal: the hub runs with a new id and says so.
fn resolve_hub_id(config: &mut HubConfig) {
    if config.hub_id.is_some() {
        return;
    }
    let path = config.data_dir.join("hub_id");
    let kept = std::fs::read_to_string(&path)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|id| crate::config::check_hub_id(id).is_ok());
    let id = kept.unwrap_or_else(|| {
        let id = format!("{:08x}", rand::random::<u32>());
        if let Err(e) = std::fs::write(&path, format!("{id}\n")) {
            tracing::error!(
                "cannot write {}: {e}; this run uses hub id {id}, and containers started now will not be recognised as this hub's after a restart",
                path.display()
            );
        }
        id
    });
    config.hub_id = Some(id);
}

/// Says how people get in: the dashboard's one-time sign-in link and where the owner's token
/// is, or, with `auth = "none"`, a warning (at every start) that anyone local is an admin.
fn announce_access(hub: &crate::hub::Hub, addr: std::net::SocketAddr) {
    let url = dashboard_url(addr);
    let access = hub.access();
    if access.anonymous_allowed() {
        tracing::warn!(
            "auth = \"none\": any process on this machine, agents included, can control every agent through {url} without a credential; remove auth = \"none\" from hub.toml to require the owner's token"
        );
        tracing::info!(url = %url, "dashboard at {url}");
        return;
    }
    let link = format!(
        "{}{}",
        url.trim_end_matches('/'),
        crate::api::access::signin_path(&access.issue_signin_code())
    );
    let minutes = crate::access::signin::CODE_LIFETIME.as_secs() / 60;
    let kept = match access.owner_kept() {
        true => format!(
            "The owner's admin token is in {}; agent-hub commands run as this user read it by themselves",
            access.owner_file().display()
        ),
        false => "The owner's admin token could not be kept in the data dir (see above)".into(),
    };
    tracing::info!(
        url = %url,
        token_file = %access.owner_file().display(),
        "dashboard: open {link} (a sign-in link: it works once, within {minutes} minutes; `agent-hub token link` makes another). {kept}"
    );
}

/// The dashboard's address for people: a wildcard listen address is reached as `localhost`.
fn dashboard_url(addr: std::net::SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("http://localhost:{}/", addr.port())
    } else {
        format!("http://{addr}/")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn wildcard_addresses_become_localhost() {
        let url = |s: &str| super::dashboard_url(s.parse().unwrap());
        assert_eq!(url("127.0.0.1:8080"), "http://127.0.0.1:8080/");
        assert_eq!(url("0.0.0.0:7000"), "http://localhost:7000/");
        assert_eq!(url("[::1]:7000"), "http://[::1]:7000/");
    }
}
