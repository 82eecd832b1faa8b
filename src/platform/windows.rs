//! The Windows side of [`super`]: no root, no ids and no mode bits. The hub's files are
//! protected by the ACL of the user's profile they are made in (see the module above), so
//! modes and owners are left as they are.

use std::fs::{Metadata, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::FileOwner;

/// Never: Windows has no root the hub could run as.
pub fn is_root() -> bool {
    false
}

/// What a Linux container sees of a Windows file Docker Desktop mounts: root's, open to all.
pub fn owner(_meta: &Metadata) -> FileOwner {
    FileOwner {
        uid: 0,
        gid: 0,
        mode: 0o777,
    }
}

/// Nothing to give: the hub is never root here ([`is_root`]).
pub fn chown(_path: &Path, _uid: u32, _gid: u32) -> io::Result<()> {
    Ok(())
}

/// Nothing to give: the hub is never root here ([`is_root`]).
pub fn lchown(_path: &Path, _uid: u32, _gid: u32) -> io::Result<()> {
    Ok(())
}

/// Nothing to set: the profile's ACL decides who may read the file.
pub fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}

/// Never by its mode: the profile's ACL decides who may read the file.
pub fn open_to_others(_meta: &Metadata) -> bool {
    false
}

/// Nothing to set: the profile's ACL decides who may read the file.
pub fn private_file(_options: &mut OpenOptions) {}

/// Runs as the hub: there is no other user's id to take.
pub fn run_as(_cmd: &mut std::process::Command, _uid: u32, _gid: u32) {}

/// No user ids, so no home to find by one.
pub fn home_of(_uid: u32) -> Option<PathBuf> {
    None
}

/// A link to a directory or a file, as `target` is (making links may need the developer
/// mode or the privilege to).
pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    let base = link.parent().unwrap_or(Path::new("."));
    if base.join(target).is_dir() {
        std::os::windows::fs::symlink_dir(target, link)
    } else {
        std::os::windows::fs::symlink_file(target, link)
    }
}

/// Whether `dir` is a directory the hub can list.
pub fn may_enter(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok()
}

/// Whether `file` is a program Windows runs: one of `PATHEXT`'s extensions.
pub fn may_run(file: &Path) -> bool {
    let Some(ext) = file.extension().and_then(|e| e.to_str()) else {
        return false;
    };
    run_extensions()
        .iter()
        .any(|e| e.trim_start_matches('.').eq_ignore_ascii_case(ext))
}

/// Whether a program name is a path (has a separator) rather than a name looked up on `PATH`.
pub fn is_path_name(program: &str) -> bool {
    program.contains('/') || program.contains('\\')
}

/// The files a program name found in `dir` may be: the name itself, and with each of
/// `PATHEXT`'s extensions when it has none.
pub fn program_files(dir: &Path, program: &str) -> Vec<PathBuf> {
    let mut files = vec![dir.join(program)];
    if Path::new(program).extension().is_none() {
        files.extend(
            run_extensions()
                .iter()
                .map(|ext| dir.join(format!("{program}{ext}"))),
        );
    }
    files
}

fn run_extensions() -> Vec<String> {
    let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
    exts.split(';')
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect()
}

/// The shell a host session runs when none is named: `%COMSPEC%`, else `cmd.exe`.
pub fn default_shell() -> String {
    std::env::var("COMSPEC")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "cmd.exe".into())
}

/// The program and arguments that run the command line `cmd` (a task's): `%COMSPEC% /D /S /C
/// CMD` (no AutoRun; the quotes the command line gets around CMD are taken off again).
pub fn command_shell(cmd: &str) -> (String, Vec<String>) {
    let args = ["/D", "/S", "/C", cmd].map(String::from).to_vec();
    (default_shell(), args)
}

/// The hub's user's home: `%USERPROFILE%`, else `$HOME`, else `C:\`.
pub fn home_dir() -> PathBuf {
    ["USERPROFILE", "HOME"]
        .iter()
        .filter_map(std::env::var_os)
        .find(|home| !home.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(r"C:\"))
}

/// Where the hub keeps its data when nothing names a place: `%LOCALAPPDATA%\agent-hub`, else
/// `%USERPROFILE%\AppData\Local\agent-hub`, else `.agent-hub`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LOCALAPPDATA") {
        return PathBuf::from(dir).join("agent-hub");
    }
    match std::env::var_os("USERPROFILE") {
        Some(home) => PathBuf::from(home).join(r"AppData\Local\agent-hub"),
        None => PathBuf::from(".agent-hub"),
    }
}

/// The hub's environment variables a host session gets by default: what a console program
/// needs to start and find its files (`SystemRoot`, `COMSPEC`, `PATHEXT`, the profile's
/// directories).
pub const SESSION_ENV: &[&str] = &[
    "PATH",
    "PATHEXT",
    "SystemRoot",
    "SystemDrive",
    "windir",
    "COMSPEC",
    "USERPROFILE",
    "USERNAME",
    "USERDOMAIN",
    "HOMEDRIVE",
    "HOMEPATH",
    "APPDATA",
    "LOCALAPPDATA",
    "ProgramData",
    "ProgramFiles",
    "TEMP",
    "TMP",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "OS",
];

/// Whether the local engine sees the hub's files: Docker Desktop's engine runs Linux
/// containers in a VM of its own, where the hub's paths, pipes and executable mean nothing,
/// so every engine is treated as one on another machine (see `AgentDef::reach_from_afar`).
pub const ENGINE_SEES_HUB_FILES: bool = false;

/// The local engine's address when `DOCKER_HOST` names none: Docker Desktop's named pipe.
pub const DEFAULT_ENGINE: &str = "npipe:////./pipe/docker_engine";
