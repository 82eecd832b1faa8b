//! `hub.toml`: the hub's settings. Every field has a default; flags and `AGENT_HUB_*`
//! environment variables override the file (see `cli::serve`). A bad file is reported with its
//! path, line, column and key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

mod agent;
mod audit;
pub mod notify;
pub mod policy;
pub mod team;
mod tokens;
mod workspace;

pub use agent::{AgentDef, Placement, Resume, StartTmux, WorkspaceDef, DEFAULT_TEAM};
pub use audit::{AuditConfig, MAX_FIELD_BYTES};
pub use tokens::{AuthMode, TokenConfig};

use crate::toml_file::TomlFileError;

/// A config that cannot be used: the file cannot be read, a value is out of place or out of
/// range. The text names the file, line, column and key where it can.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file cannot be read.
    #[error("{}: cannot read config file: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The text is not a config (bad TOML, a wrong type, an unknown key).
    #[error(transparent)]
    File(#[from] TomlFileError),
    /// A value of the file at `origin` is refused.
    #[error("{origin}: {source}")]
    Invalid {
        origin: String,
        #[source]
        source: Box<ConfigError>,
    },
    /// An `[[agents]]` entry is refused: which agent and field, and why.
    #[error("{origin}:{line}:{col}: agent '{agent}': {field}: {message}")]
    Agent {
        origin: String,
        line: usize,
        col: usize,
        agent: String,
        field: &'static str,
        message: String,
    },
    /// A terminal size out of range.
    #[error(
        "terminal size {cols}x{rows} is out of range: cols must be 1-{MAX_COLS}, rows 1-{MAX_ROWS}"
    )]
    TermSize { cols: u16, rows: u16 },
    #[error("scrollback_bytes must be at least 1024")]
    ScrollbackTooSmall,
    #[error("talk_timeout_ms must be positive")]
    TalkTimeoutZero,
    #[error(
        "agent_start_concurrency must be 1-{MAX_AGENT_START_CONCURRENCY} (agent starts per Docker engine doing their Docker work at once), not {value}"
    )]
    AgentStartConcurrency { value: usize },
    #[error("hub_id '{id}' must be 1-32 characters of letters, digits, '-' and '_'")]
    HubId { id: String },
    /// `[guard]` does not compile.
    #[error(transparent)]
    Guard(#[from] crate::guard::GuardError),
    #[error("audit.synchronous must be \"full\" or \"normal\"")]
    AuditSynchronous,
    #[error("audit.retention_days must be positive and audit.max_bytes at least 65536")]
    AuditLimits,
    /// `auth = "none"` on an address other machines can reach.
    #[error(
        "auth = \"none\" lets any caller control every agent, so it is only allowed on a loopback address, not on {listen}: remove auth = \"none\" (callers then use the owner's token or [[tokens]]) or listen on 127.0.0.1"
    )]
    AuthNotLoopback { listen: SocketAddr },
    #[error("token '{name}' is too short: use at least 16 characters")]
    TokenTooShort { name: String },
}

/// Default tmux socket: one tmux server per hub (see [`HubConfig::tmux_socket_name`]).
pub const DEFAULT_TMUX_SOCKET: &str = "agent-hub-{hub_id}";

/// Default of `agent_start_concurrency`: measured with 100 agents started at once on a 2-core
/// machine (docs/benchmarks.md, "Fleet start (#30)").
pub const DEFAULT_AGENT_START_CONCURRENCY: usize = 4;
/// Most `agent_start_concurrency` may be.
pub const MAX_AGENT_START_CONCURRENCY: usize = 64;

/// Default listen address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8100";

/// The hub's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HubConfig {
    /// Address the REST/WebSocket API listens on.
    pub listen: SocketAddr,
    /// Where the hub keeps its state.
    pub data_dir: PathBuf,
    /// Program for new sessions when the request names none (default: `$SHELL`, else /bin/bash).
    pub default_shell: Option<String>,
    /// Default terminal width for new sessions.
    pub cols: u16,
    /// Default terminal height for new sessions.
    pub rows: u16,
    /// Scrollback kept per session, in bytes.
    pub scrollback_bytes: usize,
    /// Default `talk` timeout.
    pub talk_timeout_ms: u64,
    /// tmux socket name (`tmux -L`) for tmux sessions; empty string = the user's default server.
    /// `{hub_id}` is replaced by the hub's id, so by default each hub has a tmux server of its
    /// own and never adopts another hub's sessions; naming a fixed socket shares one.
    pub tmux_socket: String,
    /// Variables of the hub's own environment that sessions inherit; nothing else leaks in.
    pub env_passthrough: Vec<String>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// This hub's id, put on every container it creates (`agent-hub.hub`); default: a random
    /// id kept in the data dir.
    pub hub_id: Option<String>,
    /// How long finished tasks (and their output sessions) are kept, in seconds.
    pub task_retention_s: u64,
    /// Container agents.
    pub agents: Vec<Spanned<AgentDef>>,
    /// Whether rendered reads (`term_read`) are allowed (`AGENT_HUB_TERM_BUFFER_ACCESS=off`
    /// turns them off).
    pub term_buffer_access: bool,
    /// The policies directory (`*.toml` policies, `agents/*.toml` state profiles); default:
    /// `policies` in the working directory, when it exists.
    pub policies_dir: Option<PathBuf>,
    /// Whether every request needs a credential (`"token"`, the default) or anonymous callers
    /// are admins (`"none"`: loopback listen addresses only, and the hub warns at every start).
    pub auth: AuthMode,
    /// People's API tokens and their roles, besides the owner's admin token the hub keeps in
    /// its data dir (see [`crate::access`]).
    pub tokens: Vec<TokenConfig>,
    /// Write scrollback snapshots to the data dir (off by default: terminals hold secrets).
    pub snapshots: bool,
    /// The newest bytes of each session a snapshot keeps.
    pub snapshot_max_bytes: usize,
    /// The command guard (`[guard]`).
    pub guard: crate::guard::GuardConfig,
    /// Extra secrets to redact (`[redact]`).
    pub redact: crate::redact::RedactConfig,
    /// The audit log (`[audit]`).
    pub audit: AuditConfig,
    /// The `agent-hub` executable mounted into agent containers (default: this process's
    /// own, when it is `agent-hub`).
    pub hub_binary: Option<PathBuf>,
    /// How many agent starts of one Docker engine do their Docker work (image and container
    /// inspect, home volume, create, start, tmux attach) at once; the others wait their turn,
    /// first come first served. The wait for an agent's `ready_pattern` is not counted.
    pub agent_start_concurrency: usize,
    /// `[prices."MODEL"]`: dollars per million tokens, added over the shipped table
    /// (`crate::usage::price`).
    pub prices: crate::usage::price::PriceEntries,
    /// `[teams.NAME]`: what a team has of its own (its budget).
    pub teams: team::Teams,
    /// `[[notify]]`: the webhooks told of what a person must act on (`docs/notify.md`).
    pub notify: Vec<notify::NotifyConfig>,
    /// Where people reach the dashboard (a hub behind a proxy); messages link there, else to
    /// the listen address.
    pub public_url: Option<Spanned<String>>,
    /// A webhook message about a question carries a signed, single-use link per choice that
    /// answers it (`docs/notify.md`, "Answer links"). Off by default.
    pub notify_actions: bool,
    /// The shipped prices with `prices` over them, made at load.
    #[serde(skip)]
    pub price_table: crate::usage::price::PriceTable,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            listen: DEFAULT_LISTEN
                .parse()
                .expect("the default listen address parses"),
            data_dir: default_data_dir(),
            default_shell: None,
            cols: 120,
            rows: 30,
            scrollback_bytes: 256 * 1024,
            talk_timeout_ms: 30_000,
            tmux_socket: DEFAULT_TMUX_SOCKET.into(),
            env_passthrough: crate::platform::SESSION_ENV
                .iter()
                .map(|name| name.to_string())
                .collect(),
            max_body_bytes: 1 << 20,
            hub_id: None,
            task_retention_s: 3600,
            agents: Vec::new(),
            auth: AuthMode::Token,
            tokens: Vec::new(),
            term_buffer_access: true,
            snapshots: false,
            snapshot_max_bytes: 64 * 1024,
            policies_dir: None,
            guard: Default::default(),
            redact: Default::default(),
            audit: Default::default(),
            hub_binary: None,
            agent_start_concurrency: DEFAULT_AGENT_START_CONCURRENCY,
            prices: Default::default(),
            teams: Default::default(),
            notify: Vec::new(),
            public_url: None,
            notify_actions: false,
            price_table: crate::usage::price::PriceTable::shipped(),
        }
    }
}

/// An `[[agents]]` entry in a config's text, for errors that name their place in it.
pub(crate) struct AgentPlace<'a> {
    pub text: &'a str,
    /// The file (or other source) the text came from.
    pub origin: &'a str,
    /// The entry's table.
    pub table: std::ops::Range<usize>,
    pub agent: &'a str,
}

impl AgentPlace<'_> {
    /// A refusal of `field` at `span`, else at the field's key (`workspace.repo`: `workspace`).
    pub fn error(
        &self,
        field: &'static str,
        span: Option<std::ops::Range<usize>>,
        message: String,
    ) -> ConfigError {
        let key = field.split('.').next().unwrap_or(field);
        let at = span.unwrap_or_else(|| field_span(self.text, self.table.clone(), key));
        let (line, col, _) = locate(self.text, Some(at));
        ConfigError::Agent {
            origin: self.origin.to_string(),
            line,
            col,
            agent: self.agent.to_string(),
            field,
            message,
        }
    }
}

/// The data dir when neither the config nor `--data-dir` / `AGENT_HUB_DATA_DIR` names one:
/// `$XDG_DATA_HOME/agent-hub`, else `~/.local/share/agent-hub` (Windows:
/// `%LOCALAPPDATA%\agent-hub`). Client commands look for the owner's token there too.
pub fn default_data_dir() -> PathBuf {
    crate::platform::default_data_dir()
}

impl HubConfig {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = Self::parse(&text, &path.display().to_string())?;
        // A relative policies directory is relative to the file that names it.
        if let (Some(dir), Some(base)) = (&config.policies_dir, path.parent()) {
            if dir.is_relative() {
                config.policies_dir = Some(base.join(dir));
            }
        }
        Ok(config)
    }

    /// Parses config text; `origin` names the source in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let mut config: HubConfig =
            toml::from_str(text).map_err(|e| TomlFileError::syntax(text, origin, e))?;
        config.validate().map_err(|e| ConfigError::Invalid {
            origin: origin.to_string(),
            source: Box::new(e),
        })?;
        let mut ids = std::collections::HashSet::new();
        for agent in &config.agents {
            let def = agent.get_ref();
            let place = AgentPlace {
                text,
                origin,
                table: agent.span(),
                agent: &def.id,
            };
            if let Err(e) = def.validate() {
                return Err(place.error(e.field, e.span, e.message));
            }
            if !ids.insert(def.id.clone()) {
                return Err(place.error("id", None, "duplicate agent id".into()));
            }
        }
        team::check(&config.teams, text, origin)?;
        for agent in &mut config.agents {
            let def = agent.get_mut();
            let team_hosts = config
                .teams
                .get(def.team())
                .map(|t| t.get_ref().docker_hosts.clone());
            def.settle_engines(&team_hosts.unwrap_or_default());
        }
        let listen = config.listen;
        config.listen_on(listen);
        workspace::check(&mut config, text, origin)?;
        config.price_table = crate::usage::price::PriceTable::with(&config.prices, text, origin)?;
        notify::check(&config.notify, config.public_url.as_ref(), text, origin)?;
        for agent in &mut config.agents {
            let (line, col, _) = locate(text, Some(agent.get_ref().image.span()));
            agent.get_mut().image_location = format!("{origin}:{line}:{col}");
        }
        Ok(config)
    }

    /// Listens on `addr` (the file's address at load, `serve --listen`'s after): on a hub whose
    /// engine cannot see its files (Windows) every agent is reached from afar, and a default
    /// `hub_url` follows the port.
    pub fn listen_on(&mut self, addr: SocketAddr) {
        self.listen = addr;
        if !crate::platform::ENGINE_SEES_HUB_FILES {
            let engine = crate::platform::local_engine();
            for agent in &mut self.agents {
                agent.get_mut().reach_from_afar(&engine, addr.port());
            }
        }
    }

    /// Where the dashboard is reached: `public_url`, else the listen address.
    pub fn dashboard_url(&self) -> String {
        match &self.public_url {
            Some(url) => url.get_ref().trim_end_matches('/').to_string(),
            None => format!("http://{}", self.listen),
        }
    }

    /// The agent definitions.
    pub fn agent_defs(&self) -> impl Iterator<Item = &AgentDef> {
        self.agents.iter().map(|a| a.get_ref())
    }

    /// Checks values serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_size(self.cols, self.rows)?;
        if self.scrollback_bytes < 1024 {
            return Err(ConfigError::ScrollbackTooSmall);
        }
        if self.talk_timeout_ms == 0 {
            return Err(ConfigError::TalkTimeoutZero);
        }
        if !(1..=MAX_AGENT_START_CONCURRENCY).contains(&self.agent_start_concurrency) {
            return Err(ConfigError::AgentStartConcurrency {
                value: self.agent_start_concurrency,
            });
        }
        if let Some(id) = &self.hub_id {
            check_hub_id(id)?;
        }
        crate::guard::Guard::new(&self.guard)?;
        self.audit.validate()?;
        if self.auth == AuthMode::None && !self.listen.ip().is_loopback() {
            return Err(ConfigError::AuthNotLoopback {
                listen: self.listen,
            });
        }
        for t in &self.tokens {
            if t.token.len() < 16 {
                return Err(ConfigError::TokenTooShort {
                    name: t.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// The tmux socket name, if a dedicated one is configured, with `{hub_id}` replaced by the
    /// hub's id (`default` before the hub has one).
    pub fn tmux_socket_name(&self) -> Option<String> {
        let hub_id = self.hub_id.as_deref().unwrap_or("default");
        (!self.tmux_socket.is_empty()).then(|| self.tmux_socket.replace("{hub_id}", hub_id))
    }
}

/// Validates a hub id (it becomes part of container names and labels).
pub fn check_hub_id(id: &str) -> Result<(), ConfigError> {
    let ok = !id.is_empty()
        && id.len() <= 32
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::HubId { id: id.to_string() })
    }
}

/// Largest accepted terminal width.
pub const MAX_COLS: u16 = 1000;
/// Largest accepted terminal height.
pub const MAX_ROWS: u16 = 500;

/// Validates a terminal size.
pub fn check_size(cols: u16, rows: u16) -> Result<(), ConfigError> {
    if cols == 0 || rows == 0 || cols > MAX_COLS || rows > MAX_ROWS {
        return Err(ConfigError::TermSize { cols, rows });
    }
    Ok(())
}

/// The span of the line assigning `field` in the table starting at `table` (up to the next
/// table header), or the table itself.
/// Where `key = ` is first written inside `span` of `text` (a key of an inline table).
pub(crate) fn key_in(
    text: &str,
    span: std::ops::Range<usize>,
    key: &str,
) -> Option<std::ops::Range<usize>> {
    let inside = text.get(span.clone())?;
    let pattern = regex::Regex::new(&format!(r"\b{}\s*=", regex::escape(key))).ok()?;
    let found = pattern.find(inside)?;
    Some(span.start + found.start()..span.start + found.end())
}

pub(crate) fn field_span(
    text: &str,
    table: std::ops::Range<usize>,
    field: &str,
) -> std::ops::Range<usize> {
    let start = table.start.min(text.len());
    let mut offset = start;
    for (n, line) in text[start..].split_inclusive('\n').enumerate() {
        if n > 0 && line.trim_start().starts_with('[') {
            break;
        }
        let key = line.split('=').next().unwrap_or("").trim();
        if key == field {
            return offset..offset + line.len();
        }
        offset += line.len();
    }
    table
}

pub use crate::toml_file::{locate, toml_files};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let c = HubConfig::parse("", "hub.toml").unwrap();
        assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!((c.cols, c.rows, c.scrollback_bytes), (120, 30, 262144));
    }

    #[test]
    fn errors_name_file_line_column_and_key() {
        let e = HubConfig::parse("cols = 100\nrows = \"tall\"\n", "hub.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("hub.toml:2:8:"), "{e}");
        assert!(e.contains("key `rows`"), "{e}");

        let e = HubConfig::parse("\n\ncolour = 3\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("x.toml:3:1:"), "{e}");
        assert!(e.contains("colour"), "{e}");
    }

    #[test]
    fn agent_errors_name_file_line_and_field() {
        let text = "cols = 100\n\n[[agents]]\nid = \"a\"\nimage = \"img\"\nready_pattern = \"(\"\n";
        let e = HubConfig::parse(text, "hub.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("hub.toml:6:") && e.contains("ready_pattern"),
            "{e}"
        );
        let text = "[[agents]]\nid = \"a\"\nimage = \"img\"\nmemory = \"lots\"\n";
        let e = HubConfig::parse(text, "hub.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("hub.toml:4:1:") && e.contains("memory"),
            "{e}"
        );
        let text = "[[agents]]\nid = \"a\"\nimage = \"i\"\n[[agents]]\nid = \"a\"\nimage = \"i\"\n";
        let e = HubConfig::parse(text, "hub.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("hub.toml:5:1:") && e.contains("duplicate"),
            "{e}"
        );
        let text = "[[agents]]\nid = \"a\"\nimage = \"i\"\nnetwork = 3\n";
        let e = HubConfig::parse(text, "hub.toml").unwrap_err().to_string();
        assert!(e.starts_with("hub.toml:4:") && e.contains("network"), "{e}");
        let ok = HubConfig::parse(
            "[[agents]]\nid = \"a\"\nimage = \"i\"\ncommand = [\"bash\"]\n",
            "h",
        )
        .unwrap();
        assert_eq!(ok.agent_defs().next().unwrap().command, vec!["bash"]);
    }

    #[test]
    fn values_are_validated() {
        let e = HubConfig::parse("cols = 0\n", "hub.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of range"), "{e}");
        assert!(HubConfig::parse("scrollback_bytes = 10\n", "h").is_err());
        assert!(HubConfig::parse("listen = \"nope\"\n", "h").is_err());
    }

    #[test]
    fn agent_start_concurrency_is_1_to_64_with_a_default() {
        let limit =
            |text: &str| HubConfig::parse(text, "hub.toml").map(|c| c.agent_start_concurrency);
        assert_eq!(limit("").unwrap(), DEFAULT_AGENT_START_CONCURRENCY);
        assert_eq!(limit("agent_start_concurrency = 1\n").unwrap(), 1);
        assert_eq!(limit("agent_start_concurrency = 64\n").unwrap(), 64);
        for bad in ["0", "65"] {
            let e = limit(&format!("agent_start_concurrency = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("hub.toml: agent_start_concurrency must be 1-64")
                    && e.ends_with(&format!("not {bad}")),
                "{e}"
            );
        }
        let e = limit("agent_start_concurrency = -1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("agent_start_concurrency"), "{e}");
    }
}
