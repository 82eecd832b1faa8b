//! Where a host session's CLI records what its model calls used: the place its profile's
//! `[usage]` names, found from the environment the session started its program with (the
//! variable that moves it, else under its `HOME`) or, for Aider, the session's working
//! directory. Pure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::agent_state::profile::Profile;
use crate::agents::config_dir::{spec_of, ConfigDirSpec};
use crate::usage::records::Format;
use crate::usage::Under;

/// The records' directory and format of a program of `profile` started with `env` (`HOME`
/// included) in `cwd`, or why there are none the hub reads.
pub fn records_of(
    profile: &Profile,
    env: &BTreeMap<String, String>,
    cwd: &Path,
) -> Result<(PathBuf, Format), String> {
    let spec = profile.usage.as_ref().ok_or_else(|| {
        format!(
            "the {} profile names no usage records (its CLI keeps none the hub reads)",
            profile.name
        )
    })?;
    let place = match spec.under() {
        Under::ConfigDir => {
            let config = spec_of(profile)
                .ok_or_else(|| format!("the {} profile names no config dir", profile.name))?;
            named_by(&config, env)?
        }
        Under::DataDir(data) => named_by(&ConfigDirSpec::of_data_dir(data), env)?,
        Under::Workdir => cwd.to_path_buf(),
    };
    Ok((place.join(&spec.dir), spec.records))
}

/// The directory `spec` names in `env`: its variable's, else its place under `HOME`.
fn named_by(spec: &ConfigDirSpec, env: &BTreeMap<String, String>) -> Result<PathBuf, String> {
    let set = |var: &str| env.get(var).filter(|d| !d.is_empty());
    if let Some((var, dir)) = spec.var.as_deref().and_then(|v| Some((v, set(v)?))) {
        return match dir.starts_with('/') {
            true => Ok(Path::new(dir).join(&spec.under_var)),
            false => Err(format!("{var}={dir} is not an absolute path")),
        };
    }
    let home = set("HOME").ok_or("its environment names no HOME")?;
    Ok(Path::new(home).join(&spec.under_home))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_state::profile::ProfileSet;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn of(cli: &str, pairs: &[(&str, &str)]) -> Result<(PathBuf, Format), String> {
        let profile = ProfileSet::default().for_cli_type(Some(cli));
        records_of(&profile, &env(pairs), Path::new("/repo"))
    }

    #[test]
    fn each_cli_s_records_are_where_its_environment_says() {
        let home = [("HOME", "/home/me")];
        let claude = of("claude", &home).unwrap();
        assert_eq!(
            claude,
            ("/home/me/.claude/projects".into(), Format::ClaudeTranscript)
        );
        let moved = of("claude", &[("HOME", "/h"), ("CLAUDE_CONFIG_DIR", "/cfg")]).unwrap();
        assert_eq!(moved.0, PathBuf::from("/cfg/projects"));
        let gemini = of("gemini", &[("HOME", "/h"), ("GEMINI_CLI_HOME", "/g")]).unwrap();
        assert_eq!(gemini.0, PathBuf::from("/g/.gemini/tmp"));
        let opencode = of("opencode", &home).unwrap();
        assert_eq!(
            opencode,
            ("/home/me/.local/share/opencode".into(), Format::OpencodeDb)
        );
        let data = of("opencode", &[("HOME", "/h"), ("XDG_DATA_HOME", "/x")]).unwrap();
        assert_eq!(data.0, PathBuf::from("/x/opencode"));
        let aider = of("aider", &home).unwrap();
        assert_eq!(aider, ("/repo".into(), Format::AiderHistory));
        assert!(of("codex", &[("HOME", "/h"), ("CODEX_HOME", "rel")])
            .unwrap_err()
            .contains("not an absolute path"));
        assert!(of("shell", &home)
            .unwrap_err()
            .contains("names no usage records"));
    }
}
