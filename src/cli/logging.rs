//! The daemon's log: text (default) or one JSON object per line (`--log-format json`, for log
//! shippers), filtered by `AGENT_HUB_LOG` (default `info`), on stderr (coloured only when
//! stderr is a terminal: a log file or journald gets plain text); and the start-up lines
//! saying what the hub listens on, which engines it uses and what it restored.

use std::net::SocketAddr;

use crate::hub::Hub;

/// The format of the daemon's log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global log subscriber (once; later calls do nothing).
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENT_HUB_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Logs what the hub serves once it is up: its address, engines, agents, restored sessions.
pub fn started(hub: &Hub, addr: SocketAddr, restored_sessions: usize) {
    let mut engines: Vec<String> = hub
        .agents()
        .defs()
        .flat_map(|d| d.engines())
        .map(crate::docker::endpoint_name)
        .collect();
    engines.sort();
    engines.dedup();
    let agents = hub.agents().defs().count();
    let engines = if engines.is_empty() {
        "none".to_string()
    } else {
        engines.join(", ")
    };
    tracing::info!(
        listen = %addr,
        url = %format!("http://{addr}"),
        hub_id = hub.agents().hub_id(),
        data_dir = %hub.config().data_dir.display(),
        engines = %engines,
        agents,
        restored_sessions,
        "agent-hub listening on http://{addr}: {agents} agent(s) on engine(s) {engines}; {restored_sessions} session(s) restored"
    );
}
