//! What differs between Unix and Windows, in one place: who owns a file and what its mode
//! lets through, making a file the hub's alone, running git as another user, links, and
//! whether a path may be entered or run. Everything above calls these and carries no
//! `#[cfg]` of its own (the backends and the edge carry the rest; `tests/it/layering.rs`
//! checks it).
//!
//! On Windows there is no root, no user or group id and no mode bits: the hub's files are
//! protected by the ACL of the user's profile they live in (`%LOCALAPPDATA%\agent-hub`
//! inherits it: the user, SYSTEM and Administrators), so making a file "private" changes
//! nothing there, and nothing is ever given to another user.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

/// The local engine's address: `DOCKER_HOST`, else the platform's default
/// (`unix:///var/run/docker.sock`; Docker Desktop's named pipe on Windows).
pub fn local_engine() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| DEFAULT_ENGINE.into())
}

/// `path` as text with `/` between its parts, whatever this machine's separator: a path in a
/// Linux container, or a name kept in a file, reads the same when the hub runs on Windows
/// (a drive prefix has no meaning there and is dropped).
pub fn posix_path(path: &std::path::Path) -> String {
    use std::path::Component;
    let mut text = String::new();
    for part in path.components() {
        let name = match part {
            Component::Prefix(_) => continue,
            Component::RootDir => {
                text.push('/');
                continue;
            }
            Component::CurDir => ".".into(),
            Component::ParentDir => "..".into(),
            Component::Normal(name) => name.to_string_lossy(),
        };
        if !text.is_empty() && !text.ends_with('/') {
            text.push('/');
        }
        text.push_str(&name);
    }
    text
}

/// Who owns a file and its mode bits (`mode & 0o7777`: permissions, setuid, setgid, sticky).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOwner {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_command_line_goes_to_the_systems_shell() {
        let (shell, args) = command_shell("echo a  b");
        assert_eq!(args.last().map(String::as_str), Some("echo a  b"));
        if cfg!(unix) {
            assert_eq!((shell.as_str(), args.len()), ("sh", 2));
            assert_eq!(args[0], "-c");
        } else {
            assert!(shell.to_ascii_lowercase().ends_with("cmd.exe"), "{shell}");
            assert_eq!(args[..3], ["/D", "/S", "/C"]);
        }
    }

    #[test]
    fn a_path_reads_with_slashes_on_every_system() {
        let cases = [
            ("/cfg/projects", "/cfg/projects"),
            (
                ".claude/projects/-workspace/4b1f.jsonl",
                ".claude/projects/-workspace/4b1f.jsonl",
            ),
            ("/", "/"),
            ("", ""),
            ("./a/../b/", "./a/../b"),
        ];
        for (given, want) in cases {
            assert_eq!(posix_path(std::path::Path::new(given)), want, "{given:?}");
        }
        let joined = std::path::Path::new("/cfg")
            .join("projects")
            .join("x.jsonl");
        assert_eq!(posix_path(&joined), "/cfg/projects/x.jsonl");
    }

    #[test]
    fn a_file_the_hub_makes_is_its_own_and_may_be_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        private_file(&mut options);
        std::io::Write::write_all(&mut options.open(&file).unwrap(), b"x").unwrap();
        set_mode(&file, 0o600).unwrap();
        let owner = owner(&std::fs::metadata(&file).unwrap());
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
        if is_root() {
            assert_eq!(owner.uid, 0);
        }
        assert!(may_enter(dir.path()));
        assert!(home_dir().is_absolute(), "{}", home_dir().display());
        assert!(!is_path_name("git") && is_path_name("./git"));
    }
}
