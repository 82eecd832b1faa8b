//! An agent's files through its engine, for an engine whose files the hub cannot see (one on
//! another machine: `docker_host`). Everything the hub gives a container (its credential, the
//! arguments of a start, the CLI's hooks, a link to the hub's executable) is put through the
//! engine's archive API into the made container before it starts, and what the hub's decisions
//! read (the conversations a start resumes, the CLI's settings) is read back the same way into
//! the hub's copy of the container (`<data_dir>/agents/<id>/engine-copy/<path in the
//! container>`), which the same code that reads a local agent's kept home then reads. A copy
//! holds what the last look read: names only for conversations, the bytes of small settings.
//!
//! On the local engine the same files are bind-mounted from the data dir instead: the faster
//! way when the engine sees the hub's files, with the same paths in the container.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::config_dir;
use super::containers::Place;
use super::hub_access::{AGENT_DIR_IN_CONTAINER, BINARY_IN_CONTAINER};
use super::{home, resume, Agents};
use crate::config::AgentDef;
use crate::docker::archive::{Entry, Got, Read};
use crate::docker::hub_binary;
use crate::error::{HubError, HubResult};

/// The largest file whose bytes a look reads (settings, Claude Code's state file).
const SMALL_FILE: usize = 4 << 20;

/// Whether the hub reaches the agent's files only through its engine.
pub(super) fn through_engine(def: &AgentDef) -> bool {
    def.docker_host.is_some()
}

/// What a start puts into the container.
#[derive(Debug, Default)]
pub(super) struct StartFiles<'a> {
    /// The credential of this start.
    pub token: Option<&'a str>,
    /// The plan's arguments for the entrypoint (`None`: the hub starts the session with them).
    pub args: Option<&'a resume::Plan>,
    /// The user the image runs as (owner of what is put into its home).
    pub user: &'a str,
    /// The hub's executable in the container, from its engine's volume (linked at
    /// `/usr/local/bin/agent-hub`).
    pub executable: Option<&'a str>,
    /// Whether the entrypoint waits for the workspace's `setup` ([`home::SETUP_PENDING`]).
    pub setup_pending: bool,
}

impl Agents {
    /// The hub's copy of what it read of the agent's container through its engine.
    pub(super) fn engine_copy(&self, id: &str) -> PathBuf {
        home::agent_dir(&self.handles.access.agents_dir, id).join("engine-copy")
    }

    /// The agent's home in the hub's copy of its container (agents on a remote engine that
    /// keep one).
    pub(super) fn copied_home(&self, def: &AgentDef) -> Option<PathBuf> {
        if !through_engine(def) || !def.keep_home {
            return None;
        }
        let home = self.home_in_container_now(def)?;
        Some(in_copy(&self.engine_copy(&def.id), &home))
    }

    /// Follows a directory of the running agent's container through its engine into the
    /// hub's copy (`copy_dir`, a path of the copy), from now until `until`; `every` as the
    /// [`Mirror`] says. Files of its earlier runs (older than its start) are left out. Returns
    /// the token cancelled after its last read (`until` itself when there is nothing to
    /// follow): what follows the copy follows it until then.
    pub(super) fn mirror(
        &self,
        def: &AgentDef,
        container: &str,
        copy_dir: &Path,
        every: Duration,
        until: CancellationToken,
    ) -> CancellationToken {
        let copy = self.engine_copy(&def.id);
        let Ok(rest) = copy_dir.strip_prefix(&copy) else {
            return until;
        };
        let then = CancellationToken::new();
        let since = self
            .lock()
            .get(&def.id)
            .and_then(|rt| rt.started_at)
            // (Less a little: the engine's clock may be behind the hub's.)
            .map_or(0, |t| t.timestamp().max(0) as u64)
            .saturating_sub(CLOCK_SLACK_S);
        let read = match every == STATUS_EVERY {
            true => Read::Contents(SMALL_FILE),
            false => Read::Contents(RECORDS_FILE),
        };
        Mirror {
            containers: self.handles.containers.clone(),
            endpoint: def.endpoint().to_string(),
            container: container.to_string(),
            dir: format!("/{}", rest.display()),
            copy_dir: copy_dir.to_path_buf(),
            since,
            every,
            read,
        }
        .spawn(until, then.clone());
        then
    }

    /// The paths in the container the hub's decisions read, and how much of each.
    fn paths_to_read(&self, def: &AgentDef) -> Vec<(String, Read)> {
        let Some(home) = self.home_in_container_now(def) else {
            return Vec::new();
        };
        let profile = (self.handles.profiles)(def.cli_type.as_deref()).profile;
        let config = config_dir::spec_of(&profile).map(|spec| {
            let dir = self.with_files(def, |files| config_dir::locate(&spec, files));
            (spec, absolute(&home, &dir.in_container))
        });
        let mut paths = Vec::new();
        let slug = def
            .workdir_or_default()
            .map_or_else(|| "*".to_string(), |w| resume::workdir_slug(&w));
        let when = profile.resume.as_ref().map(|r| r.when.clone());
        for glob in when.unwrap_or_default() {
            let glob = glob.replace("{workdir_slug}", &slug);
            let moved = config.as_ref().and_then(|(spec, dir)| {
                config_dir::in_config_dir(&glob, spec).map(|rest| format!("{dir}/{rest}"))
            });
            let path = moved.unwrap_or_else(|| absolute(&home, &glob));
            paths.push((fixed_part(&path), Read::Names));
        }
        if let Some(install) = profile.signals.install {
            if let Some((_, dir)) = &config {
                let settings = super::hooks::settings_file(install);
                paths.push((format!("{dir}/{settings}"), Read::Contents(SMALL_FILE)));
                paths.push((format!("{dir}/.claude.json"), Read::Contents(SMALL_FILE)));
            }
            paths.push((format!("{home}/.claude.json"), Read::Contents(SMALL_FILE)));
        }
        paths
    }

    /// Reads into the hub's copy (made afresh) what the next start's decisions need, from the
    /// agent's container (made or stopped) through its engine. A path that cannot be read is
    /// logged and left out: the decisions then say what they cannot see.
    pub(super) async fn read_through_engine(&self, def: &AgentDef, container: &str) {
        let copy = self.engine_copy(&def.id);
        let _ = std::fs::remove_dir_all(&copy);
        let at = Place {
            endpoint: def.endpoint(),
            container,
        };
        for (path, read) in self.paths_to_read(def) {
            match self.handles.containers.read_files(at, &path, read).await {
                Ok(Some(files)) => {
                    let parent = Path::new(&path).parent().unwrap_or(Path::new("/"));
                    let dir = in_copy(&copy, &parent.to_string_lossy());
                    if let Err(e) = write_copy(&dir, &files, read) {
                        tracing::warn!(agent = %def.id, "cannot copy {path}: {e}");
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::info!(agent = %def.id, "{path} not read through its engine: {e}")
                }
            }
        }
    }

    /// Puts a start's files into the agent's container (made, not started yet) through its
    /// engine: its credential and start arguments under [`AGENT_DIR_IN_CONTAINER`], the link
    /// to the hub's executable, and the CLI's settings with the hub's hooks (written into the
    /// copy by [`Self::install_hooks`]).
    pub(super) async fn put_start_files(
        &self,
        def: &AgentDef,
        container: &str,
        files: StartFiles<'_>,
    ) -> HubResult<()> {
        let at = Place {
            endpoint: def.endpoint(),
            container,
        };
        let containers = &self.handles.containers;
        let failed = |what: &str, e: HubError| HubError::AgentStartFailed {
            id: def.id.clone(),
            reason: format!("cannot put {what} into its container through its engine: {e}"),
            screen: None,
        };
        let agent_dir = agent_dir_entries(&files);
        let (run, name) = split_dir(AGENT_DIR_IN_CONTAINER);
        let entries: Vec<Entry> = std::iter::once(Entry::dir(name))
            .chain(agent_dir.into_iter().map(|e| prefixed(name, e)))
            .collect();
        containers
            .put_files(at, run, &entries)
            .await
            .map_err(|e| failed("its credential and start arguments", e))?;
        if let Some(target) = files.executable {
            let (bin_dir, name) = split_dir(BINARY_IN_CONTAINER);
            let link = [Entry::symlink(name, target)];
            containers
                .put_files(at, bin_dir, &link)
                .await
                .map_err(|e| failed("the hub's executable", e))?;
        }
        self.put_settings(def, at, files.user).await
    }

    /// Puts the CLI's settings from the copy (where the hooks were written) into the
    /// container, owned by the agent's user.
    async fn put_settings(&self, def: &AgentDef, at: Place<'_>, user: &str) -> HubResult<()> {
        let profile = (self.handles.profiles)(def.cli_type.as_deref()).profile;
        let (Some(install), Some(home)) =
            (profile.signals.install, self.home_in_container_now(def))
        else {
            return Ok(());
        };
        let spec = config_dir::spec_of_install(install);
        let dir = self.with_files(def, |files| config_dir::locate(&spec, files));
        let dir = absolute(&home, &dir.in_container);
        let settings = super::hooks::settings_file(install);
        let local = in_copy(&self.engine_copy(&def.id), &format!("{dir}/{settings}"));
        if unread_mark(&local).exists() {
            let why = format!("its {settings} is larger than {SMALL_FILE} bytes and was not read");
            tracing::warn!(agent = %def.id, "its CLI's hooks not written: {why}; left alone");
            return Ok(());
        }
        let Ok(bytes) = std::fs::read(&local) else {
            return Ok(());
        };
        let owner = self.owner_of(at, user).await;
        let (parent, name) = split_dir(&dir);
        let entries = [
            Entry::dir(name).owned_by(owner),
            Entry::file(format!("{name}/{settings}"), bytes).owned_by(owner),
        ];
        let put = self
            .handles
            .containers
            .put_files(at, parent, &entries)
            .await;
        if let Err(e) = put {
            tracing::warn!(agent = %def.id, "its CLI's hooks not written through its engine: {e}");
        }
        Ok(())
    }

    /// The uid and gid of `user` in the container (numeric, or a name its `/etc/passwd`
    /// knows, read through the engine); root when it says nothing.
    async fn owner_of(&self, at: Place<'_>, user: &str) -> Option<(u64, u64)> {
        let (name, group) = user.split_once(':').unwrap_or((user, ""));
        if let Ok(uid) = name.parse::<u64>() {
            return Some((uid, group.parse().unwrap_or(uid)));
        }
        if name.is_empty() || name == "root" {
            return None;
        }
        let read = Read::Contents(SMALL_FILE);
        let files = self.handles.containers.read_files(at, "/etc/passwd", read);
        let passwd = files.await.ok().flatten()?.pop()?;
        passwd_entry(&String::from_utf8_lossy(&passwd.bytes), name)
    }

    /// The build of the hub's executable and its volume's mount, for an agent on another
    /// engine that gets the executable.
    fn hub_binary_build(&self, def: &AgentDef) -> Option<(PathBuf, String)> {
        if !through_engine(def) || !def.mounts_hub_binary() {
            return None;
        }
        let binary = self.handles.access.binary.clone()?;
        match hub_binary::build_of(&binary) {
            Ok(build) => Some((binary, build)),
            Err(e) => {
                tracing::warn!(agent = %def.id, "the hub's executable {}: {e}", binary.display());
                None
            }
        }
    }

    /// The mount of the volume with the hub's executable (see [`Self::add_hub_binary_volume`]),
    /// made or not: what a start would add.
    pub(super) fn hub_binary_mount(&self, def: &AgentDef) -> Option<String> {
        let (_, build) = self.hub_binary_build(def)?;
        Some(binary_mount(&hub_binary::volume_name(&build)))
    }

    /// Adds the volume with the hub's executable on the agent's engine to `def` (made and
    /// filled the first time this build meets the engine); returns the executable's path in
    /// the container. A failure is logged, and the agent runs without it (the screen alone
    /// reads it then).
    pub(super) async fn add_hub_binary_volume(&self, def: &mut AgentDef) -> Option<String> {
        let (binary, build) = self.hub_binary_build(def)?;
        let image = def.image.get_ref().clone();
        let made = self
            .handles
            .containers
            .hub_binary_volume(def.endpoint(), &binary, &build, &image)
            .await;
        match made {
            Ok(on_engine) => {
                def.mounts.push(binary_mount(&on_engine.volume));
                Some(on_engine.executable)
            }
            Err(e) => {
                tracing::warn!(agent = %def.id, "no hub executable in its container: {e}");
                None
            }
        }
    }
}

/// The read-only mount of the volume holding the hub's executable.
fn binary_mount(volume: &str) -> String {
    format!("{volume}:{}:ro", hub_binary::DIR_IN_CONTAINER)
}

/// How often a running agent's status files are read through its engine.
pub(super) const STATUS_EVERY: Duration = Duration::from_secs(1);
/// How often a running agent's usage records are read through its engine.
pub(super) const USAGE_EVERY: Duration = Duration::from_secs(3);
/// How far behind the hub's clock the engine's may be for a file of this run.
const CLOCK_SLACK_S: u64 = 2;
/// The largest usage record file read through the engine.
const RECORDS_FILE: usize = 64 << 20;

/// Keeps a directory of the hub's copy of a running container (`copy_dir`, the container's
/// `dir`) as the container has it, read through its engine every `every` until `until`:
/// files that went are removed, files older than `since` (seconds since the epoch: an earlier
/// run's) left out. What the hub follows there (status files, usage records) it then follows
/// as it does in a kept home.
pub(super) struct Mirror {
    pub containers: std::sync::Arc<dyn super::containers::Containers>,
    pub endpoint: String,
    pub container: String,
    pub dir: String,
    pub copy_dir: PathBuf,
    pub since: u64,
    pub every: Duration,
    pub read: Read,
}

impl Mirror {
    /// Runs until `until` is cancelled, then reads once more (what the last moments wrote)
    /// and cancels `then`: what follows the copy looks last after that.
    pub(super) fn spawn(self, until: CancellationToken, then: CancellationToken) {
        tokio::spawn(async move {
            loop {
                self.once().await;
                tokio::select! {
                    _ = until.cancelled() => break,
                    _ = tokio::time::sleep(self.every) => {}
                }
            }
            self.once().await;
            then.cancel();
        });
    }

    async fn once(&self) {
        let at = Place {
            endpoint: &self.endpoint,
            container: &self.container,
        };
        let found = match self.containers.read_files(at, &self.dir, self.read).await {
            Ok(found) => found.unwrap_or_default(),
            Err(e) => {
                tracing::debug!(dir = %self.dir, "not read through the engine: {e}");
                return;
            }
        };
        let fresh: Vec<Got> = found
            .into_iter()
            .filter(|g| g.is_dir || g.mtime >= self.since)
            .collect();
        let Some(parent) = self.copy_dir.parent() else {
            return;
        };
        let keep: std::collections::HashSet<PathBuf> = fresh
            .iter()
            .filter(|g| !g.is_dir)
            .map(|g| parent.join(&g.path))
            .collect();
        if let Err(e) = write_copy(parent, &fresh, self.read) {
            tracing::debug!(dir = %self.dir, "not copied: {e}");
        }
        remove_others(&self.copy_dir, &keep);
    }
}

/// Removes the files under `dir` that are not in `keep`.
fn remove_others(dir: &Path, keep: &std::collections::HashSet<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            remove_others(&path, keep);
        } else if !keep.contains(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The entries of the agent's own directory for a start.
fn agent_dir_entries(files: &StartFiles) -> Vec<Entry> {
    let mut entries = Vec::new();
    if let Some(token) = files.token {
        entries.push(Entry::file("token", format!("{token}\n")));
    }
    if let Some(plan) = files.args {
        let lines = |l: &[String]| l.iter().map(|a| format!("{a}\n")).collect::<String>();
        let when: &[String] = if plan.args.is_empty() {
            &[]
        } else {
            &plan.when
        };
        entries.push(Entry::file("start-args", lines(&plan.args)));
        entries.push(Entry::file("start-args-when", lines(when)));
    }
    if files.setup_pending {
        entries.push(Entry::file(home::SETUP_PENDING, "setup\n"));
    }
    entries
}

/// `e` under the directory `dir`.
fn prefixed(dir: &str, mut e: Entry) -> Entry {
    e.path = format!("{dir}/{}", e.path);
    e
}

/// `/a/b/c` as (`/a/b`, `c`).
fn split_dir(path: &str) -> (&str, &str) {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", name)) => ("/", name),
        Some((parent, name)) => (parent, name),
        None => ("/", path),
    }
}

/// A path in the container as the entrypoint reads it (relative to the home, or absolute),
/// made absolute.
fn absolute(home: &str, path: &str) -> String {
    match path.starts_with('/') {
        true => path.to_string(),
        false => format!("{}/{path}", home.trim_end_matches('/')),
    }
}

/// The part of a glob before its first segment with a wildcard: what one read fetches.
fn fixed_part(glob: &str) -> String {
    let fixed: Vec<&str> = glob
        .split('/')
        .take_while(|s| !s.contains(['*', '?', '[']))
        .collect();
    match fixed.join("/") {
        f if f.is_empty() => "/".into(),
        f => f,
    }
}

/// A path of the container in the copy.
fn in_copy(copy: &Path, path: &str) -> PathBuf {
    copy.join(path.trim_start_matches('/'))
}

/// Writes what a read found under `dir` of the copy (names only: empty files; a file too
/// large for the contents read is left out, so nothing reads it as empty).
fn write_copy(dir: &Path, files: &[Got], read: Read) -> std::io::Result<()> {
    for got in files {
        let rel = Path::new(&got.path);
        if rel.is_absolute() || rel.components().any(|c| c.as_os_str() == "..") {
            continue;
        }
        let path = dir.join(rel);
        if got.is_dir {
            std::fs::create_dir_all(&path)?;
            continue;
        }
        if got.cut && read != Read::Names {
            // Too large to read: marked, so nothing writes over it from a copy without it.
            std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
            std::fs::write(unread_mark(&path), b"")?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &got.bytes)?;
    }
    Ok(())
}

/// The mark beside a file of the copy that was too large to read.
fn unread_mark(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".agent-hub-unread");
    PathBuf::from(name)
}

/// The uid and gid of `name` in a passwd file.
fn passwd_entry(passwd: &str, name: &str) -> Option<(u64, u64)> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 4 && fields[0] == name)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_is_read_from_its_fixed_part() {
        assert_eq!(
            fixed_part("/home/a/.claude/projects/-workspace/*.jsonl"),
            "/home/a/.claude/projects/-workspace"
        );
        assert_eq!(
            fixed_part("/home/a/.codex/sessions/*/*/*/*.jsonl"),
            "/home/a/.codex/sessions"
        );
        assert_eq!(
            fixed_part("/home/a/.aider.chat.history.md"),
            "/home/a/.aider.chat.history.md"
        );
        assert_eq!(fixed_part("/*"), "/");
    }

    #[test]
    fn paths_split_and_join_as_the_container_names_them() {
        assert_eq!(
            split_dir("/run/agent-hub-agent"),
            ("/run", "agent-hub-agent")
        );
        assert_eq!(
            split_dir("/usr/local/bin/agent-hub"),
            ("/usr/local/bin", "agent-hub")
        );
        assert_eq!(split_dir("/x"), ("/", "x"));
        assert_eq!(absolute("/home/a/", ".claude"), "/home/a/.claude");
        assert_eq!(absolute("/home/a", "/cfg"), "/cfg");
        assert_eq!(
            in_copy(Path::new("/d/c"), "/home/a"),
            Path::new("/d/c/home/a")
        );
    }

    #[test]
    fn a_file_too_large_to_read_is_marked_not_copied_empty() {
        let dir = tempfile::tempdir().unwrap();
        let got = |path: &str, cut: bool| Got {
            path: path.into(),
            bytes: if cut { Vec::new() } else { b"{}".to_vec() },
            cut,
            ..Got::default()
        };
        let files = [
            got(".claude/settings.json", true),
            got(".claude/.claude.json", false),
        ];
        write_copy(dir.path(), &files, Read::Contents(10)).unwrap();
        let settings = dir.path().join(".claude/settings.json");
        assert!(!settings.exists());
        assert!(unread_mark(&settings).exists());
        assert_eq!(
            std::fs::read(dir.path().join(".claude/.claude.json")).unwrap(),
            b"{}"
        );
        // Names only: every file is there, empty.
        write_copy(dir.path(), &files, Read::Names).unwrap();
        assert_eq!(std::fs::read(&settings).unwrap(), b"");
    }

    #[test]
    fn a_user_is_found_in_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nagent:x:1000:1001::/home/agent:/bin/sh\n";
        assert_eq!(passwd_entry(passwd, "agent"), Some((1000, 1001)));
        assert_eq!(passwd_entry(passwd, "nobody"), None);
    }

    #[test]
    fn a_start_puts_its_credential_and_arguments() {
        let plan = resume::Plan {
            args: vec!["--continue".into()],
            when: vec![".claude/projects/*/*.jsonl".into()],
            resumes: true,
            reason: String::new(),
        };
        let files = StartFiles {
            token: Some("t0k"),
            args: Some(&plan),
            user: "agent",
            executable: None,
            setup_pending: false,
        };
        let got: Vec<(String, Vec<u8>)> = agent_dir_entries(&files)
            .into_iter()
            .map(|e| match e.kind {
                crate::docker::archive::Kind::File(b) => (e.path, b),
                _ => panic!("not a file"),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("token".to_string(), b"t0k\n".to_vec()),
                ("start-args".to_string(), b"--continue\n".to_vec()),
                (
                    "start-args-when".to_string(),
                    b".claude/projects/*/*.jsonl\n".to_vec()
                ),
            ]
        );
        let fresh = resume::Plan::fresh("x");
        let files = StartFiles {
            args: Some(&fresh),
            setup_pending: true,
            ..Default::default()
        };
        let names: Vec<(String, usize)> = agent_dir_entries(&files)
            .into_iter()
            .map(|e| match e.kind {
                crate::docker::archive::Kind::File(b) => (e.path, b.len()),
                _ => panic!("not a file"),
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("start-args".into(), 0),
                ("start-args-when".into(), 0),
                ("setup-pending".into(), 6)
            ]
        );
    }
}
