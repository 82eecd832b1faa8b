//! A CLI's own status files: Claude Code keeps `<config dir>/sessions/<pid>.json` for each
//! running TUI, with `"status": "busy" | "idle" | "waiting" | "shell"` (2.1.330: rewritten the
//! moment its screen changes state; `waiting` while it asks, with `"waitingFor": "permission
//! prompt"`). A profile's `[signals.status_file]` says where the files are and what each
//! status means; this module decides which file is a session's program's and what it says.
//! Reading the files is the session's ([`crate::session`]), on this machine: a container
//! agent's through its kept home or its mounts ([`crate::agents::config_dir`]), never inside a
//! container; a program on this machine's in the config dir its own environment names.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::State;

/// `[signals.status_file]` of a profile.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusFileSpec {
    /// The variable that names the CLI's config dir (`CLAUDE_CONFIG_DIR`), when it is set.
    pub config_dir_env: Option<String>,
    /// The config dir under the home otherwise (`.claude`).
    pub config_dir: String,
    /// The directory of status files under the config dir (`sessions`), one `<pid>.json` per
    /// running program.
    pub dir: String,
    /// The JSON field holding the status (`status`).
    pub field: String,
    /// Each status to the state it means; other statuses are ignored.
    pub states: BTreeMap<String, State>,
}

impl StatusFileSpec {
    /// The config dir of a program started with `env`: the one its variable names, else
    /// `config_dir` under its `HOME`; `None` when neither is set.
    pub fn config_dir_of(&self, env: &BTreeMap<String, String>) -> Option<PathBuf> {
        let set = |var: &str| env.get(var).filter(|d| !d.is_empty()).map(PathBuf::from);
        let named = self.config_dir_env.as_deref().and_then(set);
        named.or_else(|| Some(set("HOME")?.join(&self.config_dir)))
    }

    /// The directory of status files of a program started with `env`.
    pub fn dir_of(&self, env: &BTreeMap<String, String>) -> Option<PathBuf> {
        Some(self.config_dir_of(env)?.join(&self.dir))
    }

    /// What one status file says: its program, when that started, and the status (`None` when
    /// the file is not one, e.g. half written).
    pub fn parse(&self, text: &str) -> Option<Entry> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(Entry {
            pid: u32::try_from(v["pid"].as_u64()?).ok()?,
            started_at_ms: v["startedAt"].as_u64().unwrap_or(0),
            status: v[self.field.as_str()].as_str().map(str::to_string),
            status_at_ms: v["statusUpdatedAt"].as_u64().unwrap_or(0),
        })
    }

    /// The state a status means, and the signal's name (`status-file:busy`).
    pub fn signal(&self, status: &str) -> Option<(State, String)> {
        let state = *self.states.get(status)?;
        Some((state, format!("status-file:{status}")))
    }
}

/// One program's status file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub pid: u32,
    /// When the program started (ms since the epoch).
    pub started_at_ms: u64,
    pub status: Option<String>,
    /// When the status was written (`statusUpdatedAt`, ms; 0 when the file does not say): a
    /// status written again is news (`busy` and back to `idle` between two looks).
    pub status_at_ms: u64,
}

/// Whether a status file's file name is one (`<pid>.json`).
pub fn is_status_file(name: &str) -> bool {
    name.strip_suffix(".json")
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// The session's program's entry: among the programs started at `not_before_ms` or later
/// (not an earlier session's, left behind by a crash), those `ours` accepts (on this machine:
/// a process of the session's terminal; in a container, whose pids mean nothing here, any),
/// the newest.
pub fn pick<'a>(
    entries: impl IntoIterator<Item = &'a Entry>,
    not_before_ms: u64,
    ours: impl Fn(u32) -> bool,
) -> Option<&'a Entry> {
    entries
        .into_iter()
        .filter(|e| e.started_at_ms >= not_before_ms && ours(e.pid))
        .max_by_key(|e| e.started_at_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn claude() -> StatusFileSpec {
        StatusFileSpec {
            config_dir_env: Some("CLAUDE_CONFIG_DIR".into()),
            config_dir: ".claude".into(),
            dir: "sessions".into(),
            field: "status".into(),
            states: BTreeMap::from([
                ("busy".into(), State::Working),
                ("waiting".into(), State::Blocked),
                ("idle".into(), State::Idle),
            ]),
        }
    }

    #[test]
    fn the_directory_is_the_config_dir_the_environment_names_else_the_homes() {
        let spec = claude();
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let home = env(&[("HOME", "/home/a")]);
        assert_eq!(
            spec.dir_of(&home).unwrap(),
            Path::new("/home/a/.claude/sessions")
        );
        let set = env(&[("HOME", "/home/a"), ("CLAUDE_CONFIG_DIR", "/cfg")]);
        assert_eq!(spec.dir_of(&set).unwrap(), Path::new("/cfg/sessions"));
        assert_eq!(
            spec.dir_of(&env(&[("CLAUDE_CONFIG_DIR", "/cfg")])).unwrap(),
            Path::new("/cfg/sessions")
        );
        let empty = env(&[("HOME", "/home/a"), ("CLAUDE_CONFIG_DIR", "")]);
        assert_eq!(
            spec.dir_of(&empty).unwrap(),
            Path::new("/home/a/.claude/sessions")
        );
        assert_eq!(spec.dir_of(&env(&[("HOME", "")])), None);
        assert_eq!(spec.dir_of(&env(&[])), None);
    }

    #[test]
    fn a_file_says_its_program_its_start_and_its_status() {
        let spec = claude();
        let text = r#"{"pid":25708,"startedAt":1795677101570,"status":"waiting","waitingFor":"permission prompt","statusUpdatedAt":1795677116828}"#;
        let entry = spec.parse(text).unwrap();
        assert_eq!(
            entry,
            Entry {
                pid: 25708,
                started_at_ms: 1795677101570,
                status: Some("waiting".into()),
                status_at_ms: 1795677116828,
            }
        );
        assert_eq!(
            spec.signal("waiting"),
            Some((State::Blocked, "status-file:waiting".into()))
        );
        // Before its first status; half written; not one.
        assert_eq!(
            spec.parse(r#"{"pid":7,"startedAt":1}"#).unwrap().status,
            None
        );
        assert_eq!(spec.parse(r#"{"pid":7,"sta"#), None);
        assert_eq!(spec.parse(r#"{"peerToken":"x"}"#), None);
        // A status the profile does not name says nothing.
        assert_eq!(spec.signal("shell"), None);
    }

    #[test]
    fn only_pid_json_files_are_status_files() {
        assert!(is_status_file("25708.json"));
        for name in [
            "25708.abc.key",
            "25708.json.tmp",
            ".json",
            "x1.json",
            "12.jso",
        ] {
            assert!(!is_status_file(name), "{name}");
        }
    }

    #[test]
    fn the_sessions_file_is_the_newest_of_its_own_programs_started_with_it() {
        let e = |pid, started_at_ms| Entry {
            pid,
            started_at_ms,
            status: Some(format!("{pid}")),
            status_at_ms: 0,
        };
        let files = [e(10, 100), e(11, 300), e(12, 200), e(13, 50)];
        // Any program (a container's home): the newest.
        assert_eq!(pick(&files, 0, |_| true).map(|e| e.pid), Some(11));
        // Only the session's own processes.
        let ours = |pid| pid == 10 || pid == 12;
        assert_eq!(pick(&files, 0, ours).map(|e| e.pid), Some(12));
        // Not one started before the session (a crashed earlier run's file).
        assert_eq!(pick(&files, 150, |pid| pid == 10 || pid == 13), None);
        assert_eq!(pick(&[], 0, |_| true), None);
    }
}
