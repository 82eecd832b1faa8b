//! `agent-hub serve`: load the config, start the API, stop cleanly on SIGINT/SIGTERM.

use std::path::PathBuf;

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::config::HubConfig;
use crate::hub::{CreateSession, Hub};
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

fn build_config(args: &ServeArgs) -> Result<HubConfig, String> {
    let mut config = match &args.config {
        Some(path) => HubConfig::load(path)?,
        None => HubConfig::default(),
    };
    if let Some(v) = args.listen {
        config.listen = v;
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
    if !config.listen.ip().is_loopback() && config.tokens.is_empty() {
        return Err(format!(
            "refusing to listen on {} with no API token: set AGENT_HUB_TOKEN or [[tokens]] in hub.toml, or listen on loopback (127.0.0.1:8100)",
            config.listen
        ));
    }
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
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("agent-hub: cannot listen on {}: {e}", config.listen);
            return 2;
        }
    };
    let addr = listener.local_addr().map_or(config.listen, |a| a);
    let mut config = config;
    resolve_hub_id(&mut config);
    if let Err(e) = crate::policy::Loaded::load(&config) {
        eprintln!("agent-hub: {e}");
        return 2;
    }
    let hub = Hub::new(config);
    if let Err(e) = check_images(&hub).await {
        eprintln!("agent-hub: {e}");
        return 2;
    }
    // Before the Docker sync: container sessions get their ids and owners back.
    let persistence = crate::persist::start(&hub).await;
    let restored = hub.list().len();
    crate::agents::sync::spawn(&hub);
    crate::policy::runner::spawn(&hub);
    tokio::spawn(reload_on_sighup(hub.clone()));
    if args.open_shell {
        let req = CreateSession {
            owner: Owner {
                label: Some("main".into()),
                ..Owner::default()
            },
            ..CreateSession::default()
        };
        match hub.create_session(req).await {
            Ok(s) => eprintln!(
                "agent-hub: opened shell session {} (label \"main\")",
                s.id()
            ),
            Err(e) => eprintln!("agent-hub: could not open a shell session: {e}"),
        }
    }
    super::logging::started(&hub, addr, restored);
    tracing::info!(url = %dashboard_url(addr), "dashboard at {}", dashboard_url(addr));
    let shutdown = hub.closing();
    tokio::spawn(signal_shutdown(shutdown.clone()));
    let result = crate::api::serve(listener, hub.clone(), shutdown).await;
    hub.shutdown().await;
    persistence.flush().await;
    match result {
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

/// Rejects agent definitions whose image is missing on a reachable engine. An engine that
/// cannot be reached is not an error here: host sessions keep working and the agent's start
/// says DOCKER_UNAVAILABLE.
async fn check_images(hub: &Hub) -> Result<(), String> {
    for def in hub.agents().defs() {
        let docker = match hub.agents().endpoints().client(def.endpoint()).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(agent = %def.id, "{e}");
                continue;
            }
        };
        if let Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) = docker.inspect_image(def.image.get_ref()).await
        {
            return Err(format!(
                "{}: agent '{}': image: image '{}' not found on {} (build or pull it first)",
                def.image_location,
                def.id,
                def.image.get_ref(),
                crate::docker::endpoint_name(def.endpoint())
            ));
        }
    }
    Ok(())
}

/// Reloads policies and profiles on SIGHUP; a bad file is logged and the old set kept.
async fn reload_on_sighup(hub: Hub) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        let closing = hub.closing();
        loop {
            tokio::select! {
                _ = closing.cancelled() => return,
                got = hup.recv() => if got.is_none() { return },
            }
            match crate::policy::runner::reload(&hub) {
                Ok(l) => eprintln!(
                    "agent-hub: SIGHUP: reloaded {} policies, {} profiles",
                    l.policies.len(),
                    l.profiles.names().len()
                ),
                Err(e) => {
                    eprintln!("agent-hub: SIGHUP: reload failed, keeping the old policies: {e}")
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = hub;
}

async fn signal_shutdown(token: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            token.cancel();
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    token.cancel();
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
