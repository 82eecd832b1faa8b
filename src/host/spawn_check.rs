//! What a request names to start a program with, checked before anything starts: the working
//! directory and the program. A wrong one is the caller's mistake, refused with its own code
//! (`INVALID_CWD`, `INVALID_PROGRAM`) and a sentence saying what is wrong; a spawn that fails
//! after these checks passed stays the hub's failure (`PTY_SPAWN_FAILED`).

use std::path::Path;

use crate::error::{HubError, HubResult};
use crate::platform;

/// `cwd` as a request names it: not empty, an existing directory the hub may enter. A relative
/// path is taken from the hub's own working directory.
pub fn check_cwd(cwd: &Path) -> HubResult<()> {
    if cwd.as_os_str().is_empty() {
        return Err(invalid_cwd(
            "cwd is empty: name an existing directory, or leave cwd out for the hub's home directory"
                .to_string(),
        ));
    }
    let shown = cwd.display();
    match std::fs::metadata(cwd) {
        Ok(meta) if !meta.is_dir() => Err(invalid_cwd(format!("cwd '{shown}' is not a directory"))),
        Ok(_) if !platform::may_enter(cwd) => Err(invalid_cwd(format!(
            "cwd '{shown}' cannot be entered (no search permission)"
        ))),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(invalid_cwd(format!("cwd '{shown}' does not exist")))
        }
        Err(e) => Err(invalid_cwd(format!("cwd '{shown}' cannot be used: {e}"))),
    }
}

/// `program` as a session would run it in `cwd`: a name with a `/` is a path (a relative one
/// from `cwd`) to an executable file; a name without one must be an executable file in a
/// directory of `path` (the session's `PATH`; relative entries, and an empty one, from `cwd`;
/// no `PATH`, nowhere).
pub fn check_program(program: &str, cwd: &Path, path: Option<&str>) -> HubResult<()> {
    if platform::is_path_name(program) {
        return executable(&cwd.join(program))
            .map_err(|why| invalid_program(format!("program '{program}' {why}")));
    }
    let found = path.is_some_and(|path| {
        std::env::split_paths(path).any(|dir| {
            platform::program_files(&cwd.join(dir), program)
                .iter()
                .any(|file| executable(file).is_ok())
        })
    });
    if found {
        return Ok(());
    }
    Err(invalid_program(format!(
        "program '{program}' is not found on the session's PATH: name an installed program or a path to one"
    )))
}

/// Why `file` cannot be run, if it cannot.
fn executable(file: &Path) -> Result<(), &'static str> {
    match std::fs::metadata(file) {
        Err(_) => Err("does not exist"),
        Ok(meta) if meta.is_dir() => Err("is a directory"),
        Ok(_) if !platform::may_run(file) => Err("is not executable"),
        Ok(_) => Ok(()),
    }
}

fn invalid_cwd(message: String) -> HubError {
    HubError::InvalidCwd { message }
}

fn invalid_program(message: String) -> HubError {
    HubError::InvalidProgram { message }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A scratch directory with an executable `tool`, a plain file `notes` and a directory
    /// `sub`.
    fn scratch() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("notes"), "text").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        dir
    }

    fn cwd_error(cwd: &Path) -> String {
        match check_cwd(cwd) {
            Err(HubError::InvalidCwd { message }) => message,
            other => panic!("{}: {other:?}", cwd.display()),
        }
    }

    #[test]
    fn a_cwd_must_be_an_existing_directory() {
        let dir = scratch();
        check_cwd(dir.path()).unwrap();
        check_cwd(&dir.path().join("sub")).unwrap();
        check_cwd(Path::new(".")).unwrap();
        assert!(cwd_error(Path::new("")).starts_with("cwd is empty"));
        let missing = dir.path().join("missing");
        assert_eq!(
            cwd_error(&missing),
            format!("cwd '{}' does not exist", missing.display())
        );
        let file = dir.path().join("notes");
        assert_eq!(
            cwd_error(&file),
            format!("cwd '{}' is not a directory", file.display())
        );
        assert!(cwd_error(&file.join("below")).contains("cannot be used"));
    }

    fn program_error(program: &str, cwd: &Path, path: Option<&str>) -> String {
        match check_program(program, cwd, path) {
            Err(HubError::InvalidProgram { message }) => message,
            other => panic!("{program}: {other:?}"),
        }
    }

    #[test]
    fn a_program_is_a_path_to_an_executable_or_a_name_on_the_path() {
        let dir = scratch();
        let here = dir.path();
        let path = format!("/no/such/dir:{}", here.display());
        // Paths: absolute, or from the working directory.
        check_program(
            &here.join("tool").display().to_string(),
            Path::new("/"),
            None,
        )
        .unwrap();
        check_program("./tool", here, None).unwrap();
        check_program("../tool", &here.join("sub"), None).unwrap();
        // Names: looked up on the PATH given (relative and empty entries from the cwd).
        check_program("tool", Path::new("/"), Some(&path)).unwrap();
        check_program("tool", here, Some("sub:.")).unwrap();
        check_program("tool", here, Some("")).unwrap();
        check_program("sh", here, Some("/usr/bin:/bin")).unwrap();

        let absolute = |name: &str| here.join(name).display().to_string();
        assert_eq!(
            program_error(&absolute("missing"), here, None),
            format!("program '{}' does not exist", absolute("missing"))
        );
        assert!(program_error("./sub", here, None).ends_with("is a directory"));
        assert!(program_error("./notes", here, None).ends_with("is not executable"));
        assert!(program_error("tool", here, Some("/no/such/dir")).contains("not found"));
        assert!(program_error("tool", here, None).contains("not found"));
        // A name without a slash is never taken from the working directory itself.
        assert!(program_error("tool", here, Some("/usr/bin")).contains("PATH"));
        assert!(program_error("sub", here, Some(".")).contains("not found"));
        assert!(program_error("notes", here, Some(".")).contains("not found"));
    }
}
