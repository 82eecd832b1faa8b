//! Where a container agent's CLI keeps its config (Claude Code's `~/.claude`, Codex's
//! `~/.codex`, Gemini CLI's `~/.gemini`), seen from the hub's machine: the directory the agent's
//! environment names (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `$GEMINI_CLI_HOME/.gemini`), else the
//! CLI's default under its home, found on this machine through the agent's mounts and its kept
//! home. Resume, the hooks the hub writes and the status file all look there; when the hub
//! cannot see the directory, [`locate`] says why. Pure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::agent_state::profile::{Install, Profile};

/// How a CLI names its config dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDirSpec {
    /// The variable that moves it (`CLAUDE_CONFIG_DIR`).
    pub var: Option<String>,
    /// Its place under the directory the variable names (empty: that directory itself; Gemini
    /// CLI's `GEMINI_CLI_HOME` names a home, with `.gemini` under it).
    pub under_var: String,
    /// Its place under the home otherwise (`.claude`).
    pub under_home: String,
}

impl ConfigDirSpec {
    /// A CLI's data dir ([`crate::usage::DataDir`]), found as a config dir is.
    pub fn of_data_dir(data: &crate::usage::DataDir) -> Self {
        ConfigDirSpec {
            var: Some(data.env.clone()),
            under_var: String::new(),
            under_home: data.home.clone(),
        }
    }

    fn new(var: &str, under_var: &str, under_home: &str) -> Self {
        ConfigDirSpec {
            var: Some(var.into()),
            under_var: under_var.into(),
            under_home: under_home.into(),
        }
    }
}

/// The config dir of the CLI a profile reads: its status file's (`[signals.status_file]`),
/// else the one of the CLI whose hooks it installs; `None` when it names neither.
pub fn spec_of(profile: &Profile) -> Option<ConfigDirSpec> {
    if let Some(s) = &profile.signals.status_file {
        return Some(ConfigDirSpec {
            var: s.config_dir_env.clone(),
            under_var: String::new(),
            under_home: s.config_dir.clone(),
        });
    }
    profile.signals.install.map(spec_of_install)
}

/// The config dir of the CLI `install` writes the hooks of.
pub fn spec_of_install(install: Install) -> ConfigDirSpec {
    match install {
        Install::ClaudeCode => ConfigDirSpec::new("CLAUDE_CONFIG_DIR", "", ".claude"),
        Install::Codex => ConfigDirSpec::new("CODEX_HOME", "", ".codex"),
        Install::GeminiCli => ConfigDirSpec::new("GEMINI_CLI_HOME", ".gemini", ".gemini"),
    }
}

/// An agent's config dir, in its container and on the hub's machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDir {
    /// Where the CLI finds it: relative to its home (`.claude`), or an absolute path in the
    /// container (`/cfg`), as the entrypoint reads the globs of `start-args-when`.
    pub in_container: String,
    /// Where it is on the hub's machine, or why the hub cannot see it.
    pub on_host: Result<PathBuf, String>,
}

/// What the hub knows of an agent's files.
#[derive(Debug, Clone, Copy)]
pub struct AgentFiles<'a> {
    /// The container's environment.
    pub env: &'a BTreeMap<String, String>,
    /// Its mounts (`SOURCE:TARGET[:ro]`), whose sources are on this machine (a local engine).
    pub mounts: &'a [String],
    /// Its home in the container, when known (the definition's `home`, or the image's).
    pub home: Option<&'a str>,
    /// Its kept home on this machine, mounted at `home`.
    pub kept_home: Option<&'a Path>,
    /// The hub's copy of what it read of the container through its engine (an engine whose
    /// files it cannot see): every path of the container is there, as last read.
    pub copy: Option<&'a Path>,
}

/// Where the agent's CLI config dir is, in its container and on the hub's machine (or why the
/// hub cannot see it there).
pub fn locate(spec: &ConfigDirSpec, agent: AgentFiles) -> ConfigDir {
    let named = spec
        .var
        .as_ref()
        .and_then(|var| Some((var, agent.env.get(var).filter(|d| !d.is_empty())?)));
    let Some((var, dir)) = named else {
        return under_home(&spec.under_home, agent);
    };
    let path = join(Path::new(dir), &spec.under_var);
    let on_host = if !dir.starts_with('/') {
        Err(format!(
            "{var}={dir} is not an absolute path: the hub cannot tell where it is"
        ))
    } else {
        seen_through(&path, agent).map_err(|why| format!("{var}={dir} {why}"))
    };
    ConfigDir {
        in_container: as_the_entrypoint_reads(&path, agent),
        on_host,
    }
}

/// A path in the container as the entrypoint reads a glob: relative to `$HOME` (the agent's
/// own, else its home's place) when it is under it (so an older entrypoint finds it too), else
/// absolute.
fn as_the_entrypoint_reads(path: &Path, agent: AgentFiles) -> String {
    let own_home = agent.env.get("HOME").filter(|h| !h.is_empty());
    let home = own_home.map(String::as_str).or(agent.home);
    let under = home.and_then(|h| path.strip_prefix(h).ok());
    match under {
        Some(rest) if !rest.as_os_str().is_empty() => crate::platform::posix_path(rest),
        _ => crate::platform::posix_path(path),
    }
}

/// The CLI's default config dir, `under` its home (the environment's `HOME`, else the kept
/// home's place).
fn under_home(under: &str, agent: AgentFiles) -> ConfigDir {
    let in_container = under.to_string();
    let own_home = agent.env.get("HOME").filter(|h| !h.is_empty());
    let on_host = match own_home {
        Some(home) if Some(home.as_str()) != agent.home => {
            seen_through(&Path::new(home).join(under), agent)
                .map_err(|why| format!("HOME={home}: ~/{under} {why}"))
        }
        _ => in_kept_home(under, agent),
    };
    ConfigDir {
        in_container,
        on_host,
    }
}

/// `under` the kept home, unless a mount into the home holds it.
fn in_kept_home(under: &str, agent: AgentFiles) -> Result<PathBuf, String> {
    let absolute = agent.home.map(|h| Path::new(h).join(under));
    match absolute.and_then(|p| through_mounts(&p, agent)) {
        Some(Ok(on_host)) => Ok(on_host),
        Some(Err(volume)) => Err(format!(
            "~/{under} is on the Docker volume '{volume}', which the hub does not look into"
        )),
        None => match agent.kept_home {
            Some(kept) => Ok(kept.join(under)),
            None => Err(format!("keep_home = false: ~/{under} is not kept")),
        },
    }
}

/// `path` (an absolute path in the container) on this machine, or why the hub cannot see it
/// there.
pub fn on_this_machine(path: &str, agent: AgentFiles) -> Result<PathBuf, String> {
    seen_through(Path::new(path), agent)
}

/// `path` (in the container) on this machine, or why the hub cannot see it there.
fn seen_through(path: &Path, agent: AgentFiles) -> Result<PathBuf, String> {
    match through_mounts(path, agent) {
        Some(Ok(on_host)) => Ok(on_host),
        Some(Err(volume)) => Err(format!(
            "is on the Docker volume '{volume}', which the hub does not look into"
        )),
        None => Err(format!(
            "is in none of its mounts nor in its kept home{}: the hub cannot see it",
            home_named(agent)
        )),
    }
}

/// ` (/home/agent)`, or nothing when the home's place in the container is not known.
fn home_named(agent: AgentFiles) -> String {
    match (agent.home, agent.kept_home) {
        (Some(home), Some(_)) => format!(" ({home})"),
        _ => String::new(),
    }
}

/// `path` (in the container) on this machine, through the mount with the longest target that
/// holds it (the kept home wins a tie: it is mounted over a mount of the same target): `None`
/// when none holds it, `Err(volume)` when a named volume does.
fn through_mounts(path: &Path, agent: AgentFiles) -> Option<Result<PathBuf, String>> {
    if let Some(copy) = agent.copy {
        return Some(Ok(join(copy, path.strip_prefix("/").unwrap_or(path))));
    }
    let mounts = agent.mounts.iter().filter_map(|m| parse_mount(m));
    let home = agent
        .kept_home
        .and_then(|k| Some((k.to_str()?, agent.home?)));
    mounts
        .chain(home)
        .filter_map(|(source, target)| {
            let rest = path.strip_prefix(target).ok()?;
            let depth = Path::new(target).components().count();
            let place = match source.starts_with('/') {
                true => Ok(join(Path::new(source), rest)),
                false => Err(source.to_string()),
            };
            Some((depth, place))
        })
        .max_by_key(|(depth, _)| *depth)
        .map(|(_, place)| place)
}

/// `rest` under `base` (`base` itself when `rest` is empty, without a trailing `/`).
fn join(base: &Path, rest: impl AsRef<Path>) -> PathBuf {
    base.components()
        .chain(rest.as_ref().components())
        .collect()
}

/// A mount's source and target (`SOURCE:TARGET[:ro]`).
fn parse_mount(mount: &str) -> Option<(&str, &str)> {
    let mut parts = mount.split(':');
    let source = parts.next().filter(|s| !s.is_empty())?;
    let target = parts.next().filter(|t| t.starts_with('/'))?;
    Some((source, target))
}

/// `glob` (relative to the home, as a profile's `[resume] when` says it) relocated into the
/// config dir when it is under the CLI's default one (`.claude/projects/x` with `.claude`):
/// the rest of it under the config dir (`projects/x`); `None` otherwise.
pub fn in_config_dir<'g>(glob: &'g str, spec: &ConfigDirSpec) -> Option<&'g str> {
    let under = spec.under_home.trim_matches('/');
    glob.strip_prefix(under)?.strip_prefix('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude() -> ConfigDirSpec {
        spec_of_install(Install::ClaudeCode)
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn mounts(list: &[&str]) -> Vec<String> {
        list.iter().map(|m| m.to_string()).collect()
    }

    const KEPT: &str = "/data/agents/a/home";

    /// An agent with its home kept at [`KEPT`], mounted at `/home/agent`.
    fn agent<'a>(env: &'a BTreeMap<String, String>, mounts: &'a [String]) -> AgentFiles<'a> {
        AgentFiles {
            env,
            mounts,
            home: Some("/home/agent"),
            kept_home: Some(Path::new(KEPT)),
            copy: None,
        }
    }

    #[test]
    fn on_a_remote_engine_every_path_is_in_the_hubs_copy_of_the_container() {
        let e = env(&[("CODEX_HOME", "/cfg/codex")]);
        let m = vec!["vol:/cfg".to_string()];
        let files = AgentFiles {
            kept_home: None,
            copy: Some(Path::new("/data/agents/a/engine-copy")),
            ..agent(&e, &m)
        };
        let codex = spec_of_install(Install::Codex);
        assert_eq!(
            locate(&codex, files),
            at("/cfg/codex", "/data/agents/a/engine-copy/cfg/codex")
        );
        assert_eq!(
            locate(&claude(), files),
            at(".claude", "/data/agents/a/engine-copy/home/agent/.claude")
        );
    }

    fn at(in_container: &str, on_host: &str) -> ConfigDir {
        ConfigDir {
            in_container: in_container.into(),
            on_host: Ok(on_host.into()),
        }
    }

    #[test]
    fn a_config_dir_the_environment_names_is_found_through_the_agents_mounts() {
        let e = env(&[("CLAUDE_CONFIG_DIR", "/cfg")]);
        let m = mounts(&["/srv/repo:/workspace", "/home/me/.claude-agents/x:/cfg:ro"]);
        assert_eq!(
            locate(&claude(), agent(&e, &m)),
            at("/cfg", "/home/me/.claude-agents/x")
        );
        // Below a mount: the path under its source; with no home kept too.
        let e = env(&[("CLAUDE_CONFIG_DIR", "/mnt/all/cfg")]);
        let m = mounts(&["/home/me:/mnt/all"]);
        let files = AgentFiles {
            kept_home: None,
            ..agent(&e, &m)
        };
        assert_eq!(locate(&claude(), files), at("/mnt/all/cfg", "/home/me/cfg"));
    }

    #[test]
    fn a_config_dir_in_the_kept_home_is_found_there_and_the_deepest_mount_wins() {
        let codex = spec_of_install(Install::Codex);
        let e = env(&[("CODEX_HOME", "/home/agent/.codex-work")]);
        assert_eq!(
            locate(&codex, agent(&e, &[])),
            at(".codex-work", "/data/agents/a/home/.codex-work"),
            "under the home: relative to it"
        );
        // A mount into the home is over the home.
        let m = mounts(&["/home/me/.codex:/home/agent/.codex-work"]);
        assert_eq!(
            locate(&codex, agent(&e, &m)),
            at(".codex-work", "/home/me/.codex")
        );
        // Before the hub knows where the home is: absolute.
        let files = AgentFiles {
            home: None,
            ..agent(&e, &m)
        };
        assert_eq!(
            locate(&codex, files),
            at("/home/agent/.codex-work", "/home/me/.codex")
        );
        // The default, `~/.claude`, mounted from the user's own.
        let none = env(&[]);
        let m = mounts(&["/home/me/.claude:/home/agent/.claude"]);
        assert_eq!(
            locate(&claude(), agent(&none, &m)),
            at(".claude", "/home/me/.claude")
        );
        let files = AgentFiles {
            kept_home: None,
            ..agent(&none, &m)
        };
        assert_eq!(
            locate(&claude(), files),
            at(".claude", "/home/me/.claude"),
            "keep_home = false"
        );
        // Gemini CLI's variable names a home.
        let e = env(&[("GEMINI_CLI_HOME", "/g")]);
        let m = mounts(&["/srv/g:/g"]);
        assert_eq!(
            locate(&spec_of_install(Install::GeminiCli), agent(&e, &m)),
            at("/g/.gemini", "/srv/g/.gemini")
        );
    }

    #[test]
    fn the_default_is_under_the_kept_home_even_before_the_hub_knows_where_the_home_is() {
        let none = env(&[]);
        let empty = env(&[("CLAUDE_CONFIG_DIR", "")]);
        for e in [&none, &empty] {
            for home in [None, Some("/home/agent")] {
                let files = AgentFiles {
                    home,
                    ..agent(e, &[])
                };
                assert_eq!(
                    locate(&claude(), files),
                    at(".claude", "/data/agents/a/home/.claude")
                );
            }
        }
    }

    #[test]
    fn a_home_of_the_agents_own_is_where_the_default_is() {
        let same = env(&[("HOME", "/home/agent")]);
        assert_eq!(
            locate(&claude(), agent(&same, &[])),
            at(".claude", "/data/agents/a/home/.claude")
        );
        let other = env(&[("HOME", "/srv/me")]);
        let m = mounts(&["/home/me:/srv/me"]);
        assert_eq!(
            locate(&claude(), agent(&other, &m)),
            at(".claude", "/home/me/.claude")
        );
        assert_eq!(
            locate(&claude(), agent(&other, &[])).on_host,
            Err(
                "HOME=/srv/me: ~/.claude is in none of its mounts nor in its kept home \
                 (/home/agent): the hub cannot see it"
                    .into()
            )
        );
    }

    #[test]
    fn what_the_hub_cannot_see_is_said() {
        let m = mounts(&["/srv/repo:/workspace", "claude-cfg:/vol"]);
        let cfg = env(&[("CLAUDE_CONFIG_DIR", "/cfg")]);
        let on_volume = env(&[("CLAUDE_CONFIG_DIR", "/vol/c")]);
        let relative = env(&[("CLAUDE_CONFIG_DIR", "cfg")]);
        let none = env(&[]);
        let cases = [
            (
                agent(&cfg, &m),
                "CLAUDE_CONFIG_DIR=/cfg is in none of its mounts nor in its kept home \
                 (/home/agent): the hub cannot see it",
            ),
            (
                AgentFiles {
                    home: None,
                    ..agent(&cfg, &m)
                },
                "CLAUDE_CONFIG_DIR=/cfg is in none of its mounts nor in its kept home: the \
                 hub cannot see it",
            ),
            (
                agent(&on_volume, &m),
                "CLAUDE_CONFIG_DIR=/vol/c is on the Docker volume 'claude-cfg', which the hub \
                 does not look into",
            ),
            (
                agent(&relative, &m),
                "CLAUDE_CONFIG_DIR=cfg is not an absolute path: the hub cannot tell where it is",
            ),
            (
                AgentFiles {
                    kept_home: None,
                    ..agent(&none, &m)
                },
                "keep_home = false: ~/.claude is not kept",
            ),
        ];
        for (files, reason) in cases {
            assert_eq!(locate(&claude(), files).on_host, Err(reason.to_string()));
        }
    }

    #[test]
    fn globs_under_the_default_config_dir_move_with_it() {
        let spec = claude();
        assert_eq!(
            in_config_dir(".claude/projects/-w/*.jsonl", &spec),
            Some("projects/-w/*.jsonl")
        );
        assert_eq!(in_config_dir(".claude.json", &spec), None);
        assert_eq!(in_config_dir(".claude-x/projects", &spec), None);
        assert_eq!(in_config_dir("notes/.claude/x", &spec), None);
    }

    #[test]
    fn profiles_name_their_clis_config_dir() {
        let set = crate::agent_state::profile::ProfileSet::default();
        let of = |cli| spec_of(&set.for_cli_type(Some(cli)));
        assert_eq!(of("claude"), Some(claude()));
        assert_eq!(of("codex"), Some(spec_of_install(Install::Codex)));
        assert_eq!(of("gemini"), Some(spec_of_install(Install::GeminiCli)));
        assert_eq!(of("aider"), None);
    }
}
