//! The Unix side of [`super`]: user and group ids, mode bits, `chown`, `access(2)`.

use std::fs::{Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{access, AccessFlags};

use super::FileOwner;

/// Whether the hub runs as root (and so may give files to other users).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The owner and permission bits of `meta`.
pub fn owner(meta: &Metadata) -> FileOwner {
    FileOwner {
        uid: meta.uid(),
        gid: meta.gid(),
        mode: meta.mode() & 0o7777,
    }
}

/// Gives `path` (followed if a link) to `uid`:`gid`.
pub fn chown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
}

/// Gives `path` (the link itself if one) to `uid`:`gid`.
pub fn lchown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
}

/// Sets the permission bits of `path`.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Whether a user other than the owner may read or write the file (its group's or others'
/// bits).
pub fn open_to_others(meta: &Metadata) -> bool {
    meta.mode() & 0o077 != 0
}

/// Makes the file `options` creates readable and writable by its owner alone (0600).
pub fn private_file(options: &mut OpenOptions) {
    options.mode(0o600);
}

/// Runs `cmd` as `uid`:`gid`.
pub fn run_as(cmd: &mut std::process::Command, uid: u32, gid: u32) {
    use std::os::unix::process::CommandExt;
    cmd.uid(uid).gid(gid);
}

/// The home directory of the user `uid`, if there is one.
pub fn home_of(uid: u32) -> Option<PathBuf> {
    let user = nix::unistd::User::from_uid(uid.into()).ok().flatten()?;
    Some(user.dir)
}

/// Makes the link `link` pointing at `target`.
pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Whether the hub may pass through the directory `dir`.
pub fn may_enter(dir: &Path) -> bool {
    access(dir, AccessFlags::X_OK).is_ok()
}

/// Whether the hub may run the file `file`.
pub fn may_run(file: &Path) -> bool {
    access(file, AccessFlags::X_OK).is_ok()
}

/// Whether a program name is a path (has a separator) rather than a name looked up on `PATH`.
pub fn is_path_name(program: &str) -> bool {
    program.contains('/')
}

/// The files a program name found in `dir` may be: the name itself.
pub fn program_files(dir: &Path, program: &str) -> Vec<PathBuf> {
    vec![dir.join(program)]
}

/// The shell a host session runs when none is named: `$SHELL`, else `/bin/bash`.
pub fn default_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/bash".into())
}

/// The program and arguments that run the command line `cmd` (a task's): `sh -c CMD`.
pub fn command_shell(cmd: &str) -> (String, Vec<String>) {
    ("sh".into(), vec!["-c".into(), cmd.into()])
}

/// The hub's user's home, where a session or task starts when the request names no `cwd`:
/// `$HOME`, else `/`.
pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Where the hub keeps its data when nothing names a place: `$XDG_DATA_HOME/agent-hub`, else
/// `~/.local/share/agent-hub`, else `.agent-hub`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(dir).join("agent-hub");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/agent-hub"),
        None => PathBuf::from(".agent-hub"),
    }
}

/// The hub's environment variables a host session gets by default.
pub const SESSION_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
];

/// Whether the local engine sees the hub's files: on Unix it runs on this machine, so the
/// hub's data dir, FIFOs and socket can be bind-mounted into its containers.
pub const ENGINE_SEES_HUB_FILES: bool = true;

/// The local engine's address when `DOCKER_HOST` names none.
pub const DEFAULT_ENGINE: &str = "unix:///var/run/docker.sock";
