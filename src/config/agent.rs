//! `[[agents]]` in `hub.toml`: what each container agent runs and how. Parsed with the rest of
//! the config; [`AgentDef::validate`] checks what serde cannot, naming the field.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// How the tmux session `agent` comes to exist in the container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartTmux {
    /// Decided from the image before its container is created: an image labelled
    /// `io.agent-hub.starts-tmux=true` (the shipped agent image) starts it, any other image
    /// gets the hub-started tmux (see [`crate::docker::resolve_start_tmux`]).
    #[default]
    Auto,
    /// The image's entrypoint starts it.
    Image,
    /// The hub keeps the container alive with a tiny init script and starts tmux itself:
    /// for images whose entrypoint knows nothing of tmux.
    Hub,
}

/// Whether the hub resumes the agent's conversation when it starts it again.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Resume {
    /// `true` (the default): as the agent's CLI profile says (`[resume]` in its profile);
    /// `false`: never.
    Enabled(bool),
    /// The arguments that resume, inserted after the program (for a CLI no profile knows).
    Args(Vec<String>),
}

impl Default for Resume {
    fn default() -> Self {
        Resume::Enabled(true)
    }
}

/// A git checkout of the agent's own: `workspace = { repo = "/srv/app", base = "main" }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceDef {
    /// A git repository on the hub's machine (an absolute path).
    pub repo: Spanned<String>,
    /// The branch (or any commit) the agent's branch starts from and its changes are shown
    /// against; default: the branch the repository has checked out when the hub loads.
    pub base: Option<Spanned<String>>,
    /// The agent's branch; default `agent/<id>`.
    pub branch: Option<Spanned<String>>,
    /// Files of the user's work tree that git does not track (`.env`, `config/local.*`),
    /// copied into a new checkout: patterns as in `.gitignore`, relative to the repository's
    /// root (with those of its `.worktreeinclude`).
    #[serde(default)]
    pub include: Vec<Spanned<String>>,
    /// Commands (`sh -c`) run in the agent's container, in its checkout, as its user, at the
    /// checkout's first start, before the agent's program starts.
    #[serde(default)]
    pub setup: Vec<Spanned<String>>,
}

/// The team of an agent with no `team`.
pub const DEFAULT_TEAM: &str = "default";

fn default_true() -> bool {
    true
}

/// One container agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentDef {
    /// Unique id: 1-64 characters of `a-z`, `0-9`, `_`, `-`, `.`.
    pub id: String,
    /// Image to run; must exist on the agent's engine.
    pub image: Spanned<String>,
    /// Program and arguments run in the tmux session (default: the image's default command).
    #[serde(default)]
    pub command: Vec<String>,
    /// Environment of the container.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory in the container.
    pub workdir: Option<String>,
    /// Bind mounts in Docker's `SOURCE:TARGET[:ro]` form.
    #[serde(default)]
    pub mounts: Vec<String>,
    /// Extra container labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Docker network mode (`none`, `host`, `bridge`, a network name); default: the engine's.
    pub network: Option<String>,
    /// Memory limit: bytes, or a number with `k`, `m` or `g`.
    pub memory: Option<String>,
    /// CPU limit, in CPUs (e.g. 1.5).
    pub cpus: Option<f64>,
    pub owner_agent_id: Option<String>,
    pub owner_role: Option<String>,
    /// A leader may merge, update and push its team's agents' branches through its
    /// credential (`POST /v1/agents/{id}/merge`, MCP `merge`); default false. Only a leader's.
    #[serde(default)]
    pub may_merge: bool,
    pub label: Option<String>,
    pub cli_type: Option<String>,
    /// Regex on the rendered screen that means "ready for input".
    pub ready_pattern: Option<Spanned<String>>,
    /// Seconds to wait for the tmux session and `ready_pattern`.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout: u64,
    /// Policy name (see `policies/`).
    pub policy: Option<String>,
    /// Docker endpoint (unix://, tcp://, https:// or ssh://); default: the local engine. With
    /// `docker_hosts`, the first of them (set at load): the agent runs on an engine its
    /// definition names, as one on a remote engine does, whichever it is placed on.
    pub docker_host: Option<String>,
    /// The engines the agent may run on (its team's `docker_hosts` when it names none): each
    /// start that finds it with nothing on its engine places it on the one with the most memory
    /// left (see `agents::placement`). Not with `docker_host`.
    #[serde(default)]
    pub docker_hosts: Vec<String>,
    /// Which of `docker_hosts` the agent is on, once placed (shared by the clones of a
    /// definition: it is the agent's).
    #[serde(skip)]
    pub placement: Placement,
    /// Remove the container when the agent stops (default: keep it, so a restart keeps its files).
    #[serde(default)]
    pub remove_on_stop: bool,
    /// Seconds between SIGTERM and SIGKILL when stopping.
    #[serde(default = "default_stop_grace")]
    pub stop_grace: u64,
    #[serde(default)]
    pub start_tmux: StartTmux,
    pub cols: Option<u16>,
    pub rows: Option<u16>,
    /// The team the agent belongs to (default: `default`, one team for all): a leader
    /// (`owner_role = "leader"`) acting through its credential sees and steers its team only.
    pub team: Option<String>,
    /// Give the container the hub's address, its own credential and its id
    /// (`AGENT_HUB_URL`, `AGENT_HUB_TOKEN_FILE`, `AGENT_HUB_AGENT_ID`; default: on).
    #[serde(default = "default_true")]
    pub hub_access: bool,
    /// Give the container the `agent-hub` executable at `/usr/local/bin/agent-hub` (default:
    /// on): read-only bind-mounted on the local engine, from a volume of the hub's build on
    /// another engine.
    pub mount_hub_binary: Option<bool>,
    /// Where the hub's API is reached from inside the container (default: the hub's unix
    /// socket, bind-mounted; set this for agents on a remote engine).
    pub hub_url: Option<String>,
    /// Resume the conversation when the hub starts the agent again (see [`Resume`]).
    #[serde(default)]
    pub resume: Resume,
    /// The agent user's home in the container, kept on the hub's machine
    /// (`<data_dir>/agents/<id>/home`) across stops, restarts and removed containers. Default:
    /// the image's `HOME`, else `/root` for root, else `/home/<user>`.
    pub home: Option<String>,
    /// Keep the home on the hub's machine (default: on).
    #[serde(default = "default_true")]
    pub keep_home: bool,
    /// A git checkout of the agent's own, mounted at its workdir.
    pub workspace: Option<WorkspaceDef>,
    /// Where `image` is written (`hub.toml:LINE:COL`), for errors found after loading.
    #[serde(skip)]
    pub image_location: String,
    /// `hub_url` was filled in by [`AgentDef::reach_from_afar`] (a Windows hub's default), so
    /// it follows the port the hub listens on.
    #[serde(skip)]
    pub hub_url_is_default: bool,
}

/// Which of its `docker_hosts` an agent is on: none until it is placed.
#[derive(Debug, Clone)]
pub struct Placement(Arc<AtomicUsize>);

const NOT_PLACED: usize = usize::MAX;

impl Default for Placement {
    fn default() -> Self {
        Placement(Arc::new(AtomicUsize::new(NOT_PLACED)))
    }
}

impl Placement {
    /// The index in `docker_hosts`, once placed.
    pub fn get(&self) -> Option<usize> {
        Some(self.0.load(Ordering::Acquire)).filter(|i| *i != NOT_PLACED)
    }

    /// Places it on `docker_hosts[index]`.
    pub fn set(&self, index: usize) {
        self.0.store(index, Ordering::Release);
    }
}

fn default_ready_timeout() -> u64 {
    30
}

fn default_stop_grace() -> u64 {
    10
}

/// A problem in a definition: which field, where in the file, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefError {
    pub field: &'static str,
    pub span: Option<std::ops::Range<usize>>,
    pub message: String,
}

impl AgentDef {
    /// The agent's team.
    pub fn team(&self) -> &str {
        self.team.as_deref().unwrap_or(DEFAULT_TEAM)
    }

    /// Whether the agent leads its team (`owner_role = "leader"`).
    pub fn is_leader(&self) -> bool {
        self.owner_role.as_deref() == Some("leader")
    }

    /// Whether the hub's executable is mounted into the container.
    pub fn mounts_hub_binary(&self) -> bool {
        self.hub_access && self.mount_hub_binary.unwrap_or(true)
    }

    /// Checks ids, regexes and limits.
    pub fn validate(&self) -> Result<(), DefError> {
        let err = |field, span, message: String| {
            Err(DefError {
                field,
                span,
                message,
            })
        };
        let id_ok = !self.id.is_empty()
            && self.id.len() <= 64
            && self
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-.".contains(c));
        if !id_ok {
            return err(
                "id",
                None,
                format!(
                    "agent id '{}' must be 1-64 characters of a-z, 0-9, '_', '-', '.'",
                    self.id
                ),
            );
        }
        if self.may_merge && !self.is_leader() {
            return err(
                "may_merge",
                None,
                format!(
                    "agent '{}' has may_merge = true but is no leader: only a leader \
                     (owner_role = \"leader\") may land its team's work",
                    self.id
                ),
            );
        }
        if self.image.get_ref().trim().is_empty() {
            return err(
                "image",
                Some(self.image.span()),
                "image must not be empty".into(),
            );
        }
        if let Some(p) = &self.ready_pattern {
            if let Err(e) = regex::Regex::new(p.get_ref()) {
                return err(
                    "ready_pattern",
                    Some(p.span()),
                    format!("invalid regex: {e}"),
                );
            }
        }
        if let Some(m) = &self.memory {
            if parse_bytes(m).is_none() {
                return err(
                    "memory",
                    None,
                    format!("memory '{m}' must be bytes or a number with k, m or g"),
                );
            }
        }
        if let Some(c) = self.cpus {
            if !(c > 0.0 && c <= 1024.0) {
                return err("cpus", None, format!("cpus {c} must be above 0"));
            }
        }
        for m in &self.mounts {
            let parts: Vec<&str> = m.split(':').collect();
            let ok = matches!(parts.len(), 2 | 3)
                && parts[..2].iter().all(|p| !p.is_empty())
                && parts.get(2).is_none_or(|o| matches!(*o, "ro" | "rw"));
            if !ok {
                return err(
                    "mounts",
                    None,
                    format!("mount '{m}' must be SOURCE:TARGET or SOURCE:TARGET:ro"),
                );
            }
        }
        crate::config::check_size(self.cols.unwrap_or(120), self.rows.unwrap_or(30))
            .or_else(|m| err("cols", None, m.to_string()))?;
        if let Resume::Args(args) = &self.resume {
            if args.is_empty() || args.iter().any(|a| a.is_empty() || a.contains('\n')) {
                return err(
                    "resume",
                    None,
                    "resume must be true, false or the arguments that resume (none empty, \
                     no line breaks)"
                        .into(),
                );
            }
        }
        if self.home.as_deref().is_some_and(|h| !h.starts_with('/')) {
            return err(
                "home",
                None,
                "home must be an absolute path in the container".into(),
            );
        }
        if self.ready_timeout == 0 {
            return err(
                "ready_timeout",
                None,
                "ready_timeout must be at least 1 second".into(),
            );
        }
        if self.docker_host.is_some() && !self.docker_hosts.is_empty() {
            return err(
                "docker_hosts",
                None,
                "docker_host names the one engine the agent runs on, docker_hosts the engines \
                 it may be placed on: use one of them"
                    .into(),
            );
        }
        check_hosts(&self.docker_hosts).or_else(|m| err("docker_hosts", None, m))?;
        Ok(())
    }

    /// The compiled ready pattern.
    pub fn ready_regex(&self) -> Option<regex::Regex> {
        self.ready_pattern
            .as_ref()
            .and_then(|p| regex::Regex::new(p.get_ref()).ok())
    }

    /// How long to wait for readiness.
    pub fn ready_timeout(&self) -> Duration {
        Duration::from_secs(self.ready_timeout)
    }

    /// The endpoint key ("" = the local default engine): with `docker_hosts`, the one it is
    /// placed on (before its first placement, the first of them).
    pub fn endpoint(&self) -> &str {
        match self.docker_hosts.as_slice() {
            [] => self.docker_host.as_deref().unwrap_or(""),
            hosts => &hosts[self.placement.get().unwrap_or(0).min(hosts.len() - 1)],
        }
    }

    /// Every engine the agent may run on: its `docker_hosts`, else its one engine.
    pub fn engines(&self) -> Vec<&str> {
        match self.docker_hosts.as_slice() {
            [] => vec![self.endpoint()],
            hosts => hosts.iter().map(String::as_str).collect(),
        }
    }

    /// Whether it is on the engine it will stay on: it names one engine, or it has been placed
    /// on one of its `docker_hosts`.
    pub fn placed(&self) -> bool {
        self.docker_hosts.is_empty() || self.placement.get().is_some()
    }

    /// Takes `hosts` (a team's default) when it names no engine of its own, and makes an agent
    /// with `docker_hosts` one on an engine it names (`docker_host`, the first of them).
    pub fn settle_engines(&mut self, hosts: &[String]) {
        if self.docker_host.is_none() && self.docker_hosts.is_empty() {
            self.docker_hosts = hosts.to_vec();
        }
        if let Some(first) = self.docker_hosts.first() {
            self.docker_host = Some(first.clone());
        }
    }

    /// For a hub whose local engine cannot see its files (Windows: Docker Desktop's engine is
    /// in a VM; see `platform::ENGINE_SEES_HUB_FILES`): the agent runs as one on a remote
    /// engine does. Its engine is named (`local_engine`, the local one's address), so nothing
    /// of the hub's is bind-mounted; it reaches the hub over TCP with its own credential
    /// (`hub_url`, default `http://host.docker.internal:<port>`, Docker Desktop's name for the
    /// host, following the port through [`crate::config::HubConfig::listen_on`]); and the
    /// hub's executable is not mounted (it is not a Linux one) unless asked.
    pub fn reach_from_afar(&mut self, local_engine: &str, port: u16) {
        if self.docker_host.is_none() {
            self.docker_host = Some(local_engine.to_string());
        }
        if self.hub_url.is_none() || self.hub_url_is_default {
            self.hub_url = Some(format!("http://host.docker.internal:{port}"));
            self.hub_url_is_default = true;
        }
        if self.mount_hub_binary.is_none() {
            self.mount_hub_binary = Some(false);
        }
    }

    /// The workdir in the container (`/workspace` for an agent with a workspace).
    pub fn workdir_or_default(&self) -> Option<String> {
        match (&self.workdir, &self.workspace) {
            (Some(w), _) => Some(w.clone()),
            (None, Some(_)) => Some("/workspace".into()),
            (None, None) => None,
        }
    }

    /// Whether its workspace is a clone in a volume on its engine, pushed back over the hub's
    /// API (a remote engine), not a checkout on the hub's machine mounted into it.
    pub fn clones_workspace(&self) -> bool {
        self.workspace.is_some() && self.docker_host.is_some()
    }

    /// The workspace's base (filled in at load when not written).
    pub fn workspace_base(&self) -> Option<String> {
        let ws = self.workspace.as_ref()?;
        Some(
            ws.base
                .as_ref()
                .map(|b| b.get_ref().clone())
                .unwrap_or_default(),
        )
    }

    /// The agent's branch in its workspace.
    pub fn workspace_branch(&self) -> Option<String> {
        let ws = self.workspace.as_ref()?;
        Some(match &ws.branch {
            Some(b) => b.get_ref().clone(),
            None => format!("agent/{}", self.id),
        })
    }

    /// The workspace's `include` patterns.
    pub fn workspace_include(&self) -> Vec<String> {
        self.workspace.as_ref().map_or_else(Vec::new, |ws| {
            ws.include.iter().map(|p| p.get_ref().clone()).collect()
        })
    }

    /// The workspace's `setup` commands.
    pub fn workspace_setup(&self) -> Vec<String> {
        self.workspace.as_ref().map_or_else(Vec::new, |ws| {
            ws.setup.iter().map(|c| c.get_ref().clone()).collect()
        })
    }

    /// Memory limit in bytes.
    pub fn memory_bytes(&self) -> Option<i64> {
        self.memory.as_deref().and_then(parse_bytes)
    }
}

/// A list of engines: each named, none twice.
pub fn check_hosts(hosts: &[String]) -> Result<(), String> {
    for (i, host) in hosts.iter().enumerate() {
        if host.trim().is_empty() {
            return Err(
                "every entry must name an engine (unix:///var/run/docker.sock for the local one)"
                    .into(),
            );
        }
        if hosts[..i].contains(host) {
            return Err(format!("{host} is named twice"));
        }
    }
    Ok(())
}

/// `512`, `64k`, `256m`, `2g` (case-insensitive) to bytes.
pub fn parse_bytes(text: &str) -> Option<i64> {
    let t = text.trim().to_ascii_lowercase();
    let (num, mult) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 1i64 << 10),
        'm' => (&t[..t.len() - 1], 1 << 20),
        'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t.as_str(), 1),
    };
    let n: f64 = num.trim().parse().ok()?;
    (n > 0.0).then_some((n * mult as f64) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(extra: &str) -> Result<AgentDef, toml::de::Error> {
        let text = format!("id = \"a1\"\nimage = \"img\"\n{extra}");
        toml::from_str::<AgentDef>(&text)
    }

    /// What a Windows hub does to every agent (its engine cannot see the hub's files): the
    /// engine named, the hub over TCP, no executable mounted; what the definition says wins.
    #[test]
    fn an_agent_reached_from_afar_names_its_engine_and_reaches_the_hub_over_tcp() {
        let mut a = def("").unwrap();
        assert!(a.mounts_hub_binary());
        a.reach_from_afar("npipe:////./pipe/docker_engine", 8100);
        assert_eq!(
            a.docker_host.as_deref(),
            Some("npipe:////./pipe/docker_engine")
        );
        assert_eq!(a.endpoint(), "npipe:////./pipe/docker_engine");
        assert_eq!(
            a.hub_url.as_deref(),
            Some("http://host.docker.internal:8100")
        );
        assert!(!a.mounts_hub_binary());
        // Listening elsewhere (`serve --listen`), the default follows.
        a.reach_from_afar("npipe:////./pipe/docker_engine", 9200);
        assert_eq!(
            a.hub_url.as_deref(),
            Some("http://host.docker.internal:9200")
        );

        let mut b = def(
            "docker_host = \"tcp://10.0.0.2:2375\"\nhub_url = \"http://10.0.0.1:8100\"\nmount_hub_binary = true",
        )
        .unwrap();
        b.reach_from_afar("npipe:////./pipe/docker_engine", 8100);
        assert!(!b.hub_url_is_default);
        assert_eq!(b.docker_host.as_deref(), Some("tcp://10.0.0.2:2375"));
        assert_eq!(b.hub_url.as_deref(), Some("http://10.0.0.1:8100"));
        assert!(b.mounts_hub_binary());
    }

    #[test]
    fn valid_definitions_pass_and_bad_fields_are_named() {
        assert!(def("").unwrap().validate().is_ok());
        assert!(def(
            "ready_pattern = '\\$ $'\nmemory = \"2g\"\ncpus = 1.5\nmounts = [\"/a:/b:ro\"]"
        )
        .unwrap()
        .validate()
        .is_ok());
        for (extra, field) in [
            ("ready_pattern = \"(\"", "ready_pattern"),
            ("memory = \"lots\"", "memory"),
            ("cpus = 0.0", "cpus"),
            ("mounts = [\"/only\"]", "mounts"),
            ("cols = 0", "cols"),
            ("ready_timeout = 0", "ready_timeout"),
            ("may_merge = true", "may_merge"),
        ] {
            assert_eq!(
                def(extra).unwrap().validate().unwrap_err().field,
                field,
                "{extra}"
            );
        }
        let leader = def("owner_role = \"leader\"\nmay_merge = true").unwrap();
        assert!(leader.validate().is_ok() && leader.may_merge);
        let bad_id = toml::from_str::<AgentDef>("id = \"Bad Id\"\nimage = \"x\"").unwrap();
        assert_eq!(bad_id.validate().unwrap_err().field, "id");
        assert!(def("colour = 1").is_err(), "unknown fields are rejected");
    }

    #[test]
    fn docker_hosts_name_engines_each_once_and_not_beside_docker_host() {
        let hosts = "docker_hosts = [\"tcp://a:2375\", \"tcp://b:2375\"]";
        let mut d = def(hosts).unwrap();
        assert!(d.validate().is_ok());
        d.settle_engines(&[]);
        // It runs on an engine its definition names; before it is placed, the first.
        assert_eq!(d.docker_host.as_deref(), Some("tcp://a:2375"));
        assert_eq!((d.endpoint(), d.placed()), ("tcp://a:2375", false));
        assert_eq!(d.engines(), ["tcp://a:2375", "tcp://b:2375"]);
        let clone = d.clone();
        d.placement.set(1);
        assert_eq!((clone.endpoint(), clone.placed()), ("tcp://b:2375", true));
        for (extra, says) in [
            (
                "docker_host = \"tcp://a:2375\"\ndocker_hosts = [\"tcp://b:2375\"]",
                "use one of them",
            ),
            (
                "docker_hosts = [\"tcp://a:2375\", \"tcp://a:2375\"]",
                "named twice",
            ),
            ("docker_hosts = [\"\"]", "must name an engine"),
        ] {
            let e = def(extra).unwrap().validate().unwrap_err();
            assert_eq!(e.field, "docker_hosts", "{extra}");
            assert!(e.message.contains(says), "{extra}: {}", e.message);
        }
        // One engine of its own: that one, whatever its team's default.
        let mut own = def("docker_host = \"tcp://c:2375\"").unwrap();
        own.settle_engines(&["tcp://a:2375".into()]);
        assert_eq!(own.engines(), ["tcp://c:2375"]);
        assert!(own.placed());
        let mut local = def("").unwrap();
        local.settle_engines(&[]);
        assert_eq!((local.endpoint(), local.docker_host.as_deref()), ("", None));
    }

    #[test]
    fn byte_sizes_parse() {
        assert_eq!(parse_bytes("512"), Some(512));
        assert_eq!(parse_bytes("64k"), Some(65536));
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("1.5m"), Some(1572864));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes("-1"), None);
    }
}
