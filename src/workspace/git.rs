//! Running `git`: one place that fixes how every call is made.
//!
//! Every call runs `git -C <dir>` with `safe.directory=*` (the hub may be root on a user's
//! repository), none of the repository's hooks and no fsmonitor (they would run as the hub),
//! absolute worktree links (the container mounts the checkout elsewhere), `LC_ALL=C` (messages
//! and formats as documented), no prompt, no optional locks (reading never rewrites the
//! agent's index) and none of the caller's variables that would point git at another
//! repository.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::{Command, Stdio};

use super::WorkspaceError;

/// The configuration every call gets.
const CONFIG: &[&str] = &[
    "safe.directory=*",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "worktree.useRelativePaths=false",
];

/// Variables of the hub's environment that would change which repository or files git uses.
const CLEARED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
];

/// One git call being built.
pub(super) struct Git {
    cmd: Command,
    /// The arguments shown in errors (`-C <dir>` and the command's own).
    shown: Vec<OsString>,
}

/// A finished call.
pub(super) struct Out {
    pub success: bool,
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Git {
    /// `git -C dir` with the fixed configuration and environment.
    pub(super) fn new(dir: &Path) -> Self {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(dir);
        for setting in CONFIG {
            cmd.arg("-c").arg(setting);
        }
        for name in CLEARED {
            cmd.env_remove(name);
        }
        cmd.env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(Stdio::null());
        let shown = vec!["-C".into(), dir.into()];
        Git { cmd, shown }
    }

    pub(super) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(arg.as_ref());
        self.shown.push(arg.as_ref().to_owned());
        self
    }

    pub(super) fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(self, args: I) -> Self {
        args.into_iter().fold(self, Git::arg)
    }

    pub(super) fn env(mut self, name: &str, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(name, value);
        self
    }

    /// Runs as the user and group `ids` with that user's home (the repository's owner, when
    /// the hub is root: what git writes is theirs, and their own configuration is read);
    /// `None`: as the hub.
    pub(super) fn run_as_user(mut self, ids: Option<(u32, u32)>) -> Self {
        if let Some((uid, gid)) = ids {
            // Their own configuration, never the hub's.
            let home = crate::platform::home_of(uid).unwrap_or_else(|| "/nonexistent".into());
            crate::platform::run_as(&mut self.cmd, uid, gid);
            self.cmd.env("HOME", home).env_remove("XDG_CONFIG_HOME");
        }
        self
    }

    /// The command as built, to run some other way (streaming: [`super::http_backend`]).
    pub(super) fn into_command(self) -> Command {
        self.cmd
    }

    /// Runs it, whatever its exit status.
    pub(super) fn output(mut self) -> Result<Out, WorkspaceError> {
        let out = self
            .cmd
            .output()
            .map_err(WorkspaceError::io("could not run git (is it installed?)"))?;
        Ok(Out {
            success: out.status.success(),
            code: out.status.code(),
            stdout: out.stdout,
            stderr: describe_failure(&out.stderr, out.status),
        })
    }

    /// Runs it; a failure is an error. Its standard output.
    pub(super) fn run(self) -> Result<Vec<u8>, WorkspaceError> {
        let args = self.shown_args();
        let out = self.output()?;
        if out.success {
            Ok(out.stdout)
        } else {
            Err(WorkspaceError::Git {
                args,
                stderr: out.stderr,
            })
        }
    }

    /// Runs it; a failure is an error. Its standard output as text, trimmed.
    pub(super) fn text(self) -> Result<String, WorkspaceError> {
        Ok(String::from_utf8_lossy(&self.run()?).trim().to_string())
    }

    /// The arguments for messages.
    pub(super) fn shown_args(&self) -> String {
        let words: Vec<_> = self.shown.iter().map(|a| a.to_string_lossy()).collect();
        words.join(" ")
    }
}

/// Standard error trimmed, or the exit status when git said nothing.
fn describe_failure(stderr: &[u8], status: std::process::ExitStatus) -> String {
    let text = String::from_utf8_lossy(stderr).trim().to_string();
    if text.is_empty() {
        status.to_string()
    } else {
        text
    }
}

/// The NUL-separated fields of a `-z` output, as text (the last, empty one dropped).
pub(super) fn fields(out: &[u8]) -> Vec<String> {
    let mut fields: Vec<String> = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    if fields.last().is_some_and(|f| f.is_empty()) {
        fields.pop();
    }
    fields
}
