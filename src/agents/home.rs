//! Each agent's home, kept on the hub's machine: `<data_dir>/agents/<id>/home`, mounted as the
//! agent user's home in its container, so the CLI's own state (its conversations, settings and
//! credentials) outlives the container, even one removed at every stop.
//!
//! The mount is a named volume (`agent-hub-<hub>-<agent>-home`) of Docker's `local` driver bound
//! to that directory: Docker fills an empty volume from the image at its first mount, with the
//! image's owners, so the home starts as the image made it (`.bashrc`, config) and belongs to
//! the agent's user, whatever user the hub runs as. On a remote engine the volume lives on that
//! engine (the hub's machine has no directory of it).

use std::path::{Path, PathBuf};

use crate::config::AgentDef;

/// The volume that holds an agent's home.
pub fn volume_name(hub_id: &str, agent_id: &str) -> String {
    format!("agent-hub-{hub_id}-{agent_id}-home")
}

/// The agent's home in its container: its `home`, else the image's `HOME`, else `/root` for
/// root, else `/home/<user>`. `None` when nothing says (a numeric user without `HOME`).
pub fn home_in_container(def: &AgentDef, image_env: &[String], image_user: &str) -> Option<String> {
    if let Some(home) = &def.home {
        return Some(home.clone());
    }
    if let Some(home) = image_env.iter().find_map(|e| e.strip_prefix("HOME=")) {
        return Some(home.to_string());
    }
    let user = image_user.split(':').next().unwrap_or_default();
    match user {
        "" | "root" | "0" => Some("/root".into()),
        u if u.chars().all(|c| c.is_ascii_digit()) => None,
        u => Some(format!("/home/{u}")),
    }
}

/// The agent's directory in the data dir (`<data_dir>/agents/<id>`).
pub fn agent_dir(agents_dir: &Path, agent_id: &str) -> PathBuf {
    agents_dir.join(agent_id)
}

/// The agent's home on the hub's machine.
pub fn home_dir(agents_dir: &Path, agent_id: &str) -> PathBuf {
    agent_dir(agents_dir, agent_id).join("home")
}

/// The agent's workspace checkout on the hub's machine.
pub fn workspace_dir(agents_dir: &Path, agent_id: &str) -> PathBuf {
    agent_dir(agents_dir, agent_id).join("workspace")
}

/// The file the entrypoint reads the arguments of this start from, one a line.
pub fn start_args_file(agents_dir: &Path, agent_id: &str) -> PathBuf {
    agent_dir(agents_dir, agent_id).join("start-args")
}

/// The mark that the hub started the agent before.
pub fn started_mark(agents_dir: &Path, agent_id: &str) -> PathBuf {
    agent_dir(agents_dir, agent_id).join("started")
}

/// The mark that the workspace's `setup` succeeded in its checkout: the commands run, one a
/// line (removed when the checkout is made anew).
pub fn setup_mark(agents_dir: &Path, agent_id: &str) -> PathBuf {
    agent_dir(agents_dir, agent_id).join("setup-done")
}

/// The output of the workspace's last `setup` run.
pub fn setup_log(agents_dir: &Path, agent_id: &str) -> PathBuf {
    agent_dir(agents_dir, agent_id).join("setup.log")
}

/// The file the entrypoint waits on before it starts the agent's program while it is not
/// empty: the hub has a `setup` to run first.
pub fn setup_pending_file(agents_dir: &Path, agent_id: &str) -> PathBuf {
    agent_dir(agents_dir, agent_id).join(SETUP_PENDING)
}

/// The name of [`setup_pending_file`] (in the agent's directory in its container too).
pub const SETUP_PENDING: &str = "setup-pending";

/// The file of globs under the home of which one must exist for the start arguments to apply.
pub fn start_args_when_file(args_file: &Path) -> PathBuf {
    let mut name = args_file.as_os_str().to_owned();
    name.push("-when");
    PathBuf::from(name)
}

/// Writes the arguments of this start for the entrypoint, and the globs under the home that
/// must match for them to apply (one a line; none: the file is removed).
pub fn write_start_args(file: &Path, args: &[String], when: &[String]) -> std::io::Result<()> {
    write_lines(file, args)?;
    let when = if args.is_empty() { &[] } else { when };
    write_lines(&start_args_when_file(file), when)
}

fn write_lines(file: &Path, lines: &[String]) -> std::io::Result<()> {
    if lines.is_empty() {
        return match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text: String = lines.iter().map(|a| format!("{a}\n")).collect();
    crate::persist::registry_file::write_atomic(file, text.as_bytes())?;
    crate::platform::set_mode(file, 0o644)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(extra: &str) -> AgentDef {
        toml::from_str(&format!("id = \"a\"\nimage = \"i\"\n{extra}")).unwrap()
    }

    #[test]
    fn the_home_comes_from_the_definition_then_the_image() {
        let env = vec!["PATH=/bin".to_string(), "HOME=/srv/me".to_string()];
        assert_eq!(
            home_in_container(&def("home = \"/h\""), &env, "agent").as_deref(),
            Some("/h")
        );
        assert_eq!(
            home_in_container(&def(""), &env, "agent").as_deref(),
            Some("/srv/me")
        );
        assert_eq!(
            home_in_container(&def(""), &[], "agent").as_deref(),
            Some("/home/agent")
        );
        assert_eq!(
            home_in_container(&def(""), &[], "agent:agent").as_deref(),
            Some("/home/agent")
        );
        assert_eq!(
            home_in_container(&def(""), &[], "").as_deref(),
            Some("/root")
        );
        assert_eq!(
            home_in_container(&def(""), &[], "0:0").as_deref(),
            Some("/root")
        );
        assert_eq!(home_in_container(&def(""), &[], "1000"), None);
    }

    #[test]
    fn start_arguments_are_written_a_line_each_and_removed_when_none() {
        let dir = tempfile::tempdir().unwrap();
        let file = start_args_file(dir.path(), "a");
        let when_file = start_args_when_file(&file);
        assert_eq!(when_file, dir.path().join("a/start-args-when"));
        let when = [".codex/sessions/*/*/*/rollout-*.jsonl".to_string()];
        write_start_args(&file, &["resume".into(), "--last".into()], &when).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "resume\n--last\n");
        assert_eq!(
            std::fs::read_to_string(&when_file).unwrap(),
            ".codex/sessions/*/*/*/rollout-*.jsonl\n"
        );
        write_start_args(&file, &["-c".into()], &[]).unwrap();
        assert!(!when_file.exists(), "arguments without a condition");
        write_start_args(&file, &[], &when).unwrap();
        assert!(!file.exists() && !when_file.exists());
        write_start_args(&file, &[], &[]).unwrap();
    }
}
