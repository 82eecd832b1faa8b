//! Giving a container agent the hub: its address, its own credential and its id, with nothing
//! to configure inside the container. A new container gets
//!
//! - `AGENT_HUB_URL`: `unix:///run/agent-hub/api.sock`, the hub's API socket, whose directory is
//!   bind-mounted (it works with `network = "none"`); or the agent's `hub_url` (remote engines);
//! - `AGENT_HUB_TOKEN_FILE`: `/run/agent-hub-agent/token`, a read-only mount of a directory of
//!   its own in the data dir, where the hub writes the credential it mints at each start (the
//!   CLI and `agent-hub mcp` read it when `AGENT_HUB_TOKEN` is not set);
//! - `AGENT_HUB_AGENT_ID` (set for every agent container);
//! - the `agent-hub` executable, read-only at `/usr/local/bin/agent-hub` (local engines).
//!
//! The agent's directory is mounted for every agent on the local engine, `hub_access` or not:
//! it also holds `start-args`, the arguments of each start (see [`super::resume`]).
//!
//! A tmux session the hub starts also gets `AGENT_HUB_TOKEN` itself.

use std::path::{Path, PathBuf};

use crate::config::AgentDef;

/// Where the socket's directory is mounted in a container.
pub const SOCKET_DIR_IN_CONTAINER: &str = "/run/agent-hub";
/// The socket's file name.
pub const SOCKET_NAME: &str = "api.sock";
/// Where the agent's own directory (its credential) is mounted.
pub const AGENT_DIR_IN_CONTAINER: &str = "/run/agent-hub-agent";
/// Where the executable is mounted.
pub const BINARY_IN_CONTAINER: &str = "/usr/local/bin/agent-hub";
/// Where the agent's pipe directory is mounted: the FIFO its pane's bytes go through, read by
/// the hub itself (see `backend::tmux::pipe`).
pub const PIPE_DIR_IN_CONTAINER: &str = "/run/agent-hub-pipe";

/// Where the hub keeps what it gives its agents.
#[derive(Debug, Clone, Default)]
pub struct HubAccess {
    /// The directory of the API socket (`<data_dir>/run`).
    pub socket_dir: PathBuf,
    /// The agents' own directories (`<data_dir>/agents/<id>`).
    pub agents_dir: PathBuf,
    /// The `agent-hub` executable to mount, when known.
    pub binary: Option<PathBuf>,
    /// The agents' pipe directories (`<data_dir>/pipes/<id>`).
    pub pipes_dir: PathBuf,
}

impl HubAccess {
    /// The layout in `data_dir`; `binary` is the executable to mount (default: this process's,
    /// when it is `agent-hub`).
    pub fn new(data_dir: &Path, binary: Option<PathBuf>) -> Self {
        let binary = binary.or_else(|| {
            std::env::current_exe()
                .ok()
                .filter(|p| p.file_name().is_some_and(|n| n == "agent-hub"))
        });
        HubAccess {
            socket_dir: data_dir.join("run"),
            agents_dir: data_dir.join("agents"),
            binary,
            pipes_dir: data_dir.join("pipes"),
        }
    }

    /// The API socket's path on the host.
    pub fn socket_path(&self) -> PathBuf {
        self.socket_dir.join(SOCKET_NAME)
    }

    fn agent_dir(&self, agent_id: &str) -> PathBuf {
        super::home::agent_dir(&self.agents_dir, agent_id)
    }

    /// Makes the agent's own directory (local engines) and adds the environment and mounts a
    /// new container of `def` gets (see [`Self::add_env_and_mounts`]).
    pub fn add_to(&self, def: &mut AgentDef) {
        if def.docker_host.is_none() {
            if let Err(e) = self.make_agent_dir(&def.id) {
                let dir = self.agent_dir(&def.id);
                tracing::warn!(agent = %def.id, "cannot make {}: {e}", dir.display());
            }
        }
        self.add_env_and_mounts(def);
    }

    /// Adds the environment and mounts a new container of `def` gets (only the agent's own
    /// directory when its `hub_access` is off), making nothing.
    pub fn add_env_and_mounts(&self, def: &mut AgentDef) {
        let local = def.docker_host.is_none();
        if local {
            // The agent's own directory: its credential, and the arguments of each start.
            let dir = self.agent_dir(&def.id);
            def.mounts
                .push(format!("{}:{AGENT_DIR_IN_CONTAINER}:ro", dir.display()));
        }
        if !def.hub_access {
            return;
        }
        let url = match &def.hub_url {
            Some(url) => url.clone(),
            None => format!("unix://{SOCKET_DIR_IN_CONTAINER}/{SOCKET_NAME}"),
        };
        def.env.insert("AGENT_HUB_URL".into(), url);
        if def.hub_url.is_none() && local {
            let dir = self.socket_dir.display();
            def.mounts.push(format!("{dir}:{SOCKET_DIR_IN_CONTAINER}"));
        }
        // Mounted on the local engine, put through the engine on another.
        let token_file = format!("{AGENT_DIR_IN_CONTAINER}/token");
        def.env.insert("AGENT_HUB_TOKEN_FILE".into(), token_file);
        // On another engine the executable is in a volume there (see `engine_files`).
        if def.mounts_hub_binary() && local {
            if let Some(bin) = &self.binary {
                def.mounts
                    .push(format!("{}:{BINARY_IN_CONTAINER}:ro", bin.display()));
            }
        }
    }

    /// Gives a new container of `def` on the local engine its pipe directory, made afresh
    /// (whatever a hub that stopped left in it is gone). A remote engine's containers relay
    /// their pane's bytes instead.
    pub fn add_pipe_dir(&self, def: &mut AgentDef) -> std::io::Result<()> {
        if def.docker_host.is_some() {
            return Ok(());
        }
        let dir = self.pipes_dir.join(&def.id);
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::create_dir_all(&dir)?;
        // The container's user reaches its FIFOs (the hub makes them; see PipeRoot).
        crate::platform::set_mode(&dir, 0o755)?;
        self.add_pipe_mount(def);
        Ok(())
    }

    /// Adds the mount of the agent's pipe directory (local engines), making nothing.
    pub fn add_pipe_mount(&self, def: &mut AgentDef) {
        if def.docker_host.is_none() {
            let dir = self.pipes_dir.join(&def.id);
            def.mounts
                .push(format!("{}:{PIPE_DIR_IN_CONTAINER}", dir.display()));
        }
    }

    /// Makes the agent's directory, readable by the container's user (it is the agent's alone).
    fn make_agent_dir(&self, agent_id: &str) -> std::io::Result<PathBuf> {
        let dir = self.agent_dir(agent_id);
        std::fs::create_dir_all(&dir)?;
        crate::platform::set_mode(&dir, 0o755)?;
        Ok(dir)
    }

    /// Writes the agent's credential where its container reads it.
    pub fn write_token(&self, agent_id: &str, token: &str) -> std::io::Result<()> {
        let file = self.make_agent_dir(agent_id)?.join("token");
        crate::persist::registry_file::write_atomic(&file, format!("{token}\n").as_bytes())?;
        crate::platform::set_mode(&file, 0o644)?;
        Ok(())
    }

    /// Removes the agent's credential file (it stopped).
    pub fn remove_token(&self, agent_id: &str) {
        let _ = std::fs::remove_file(self.agent_dir(agent_id).join("token"));
    }
}
