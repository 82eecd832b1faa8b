//! The owner's admin token: `<data_dir>/admin-token`, made at the hub's first start (mode 0600,
//! in a data dir only its user can enter), kept across restarts, replaced by `token rotate`.
//! Client commands on the hub's machine read it from there (see `cli::credential`).

use std::io::Write;
use std::path::{Path, PathBuf};

use rand::Rng;

use super::AccessError;

/// The file's name in the data dir.
pub const FILE_NAME: &str = "admin-token";
/// Every owner token begins with this (agent credentials begin with `ahk_`).
pub const TOKEN_PREFIX: &str = "aho_";

/// Where a hub with this data dir keeps its owner's token.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// A new random token: the prefix and 64 hex digits (256 bits).
pub fn generate() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    std::iter::once(TOKEN_PREFIX.to_string())
        .chain(bytes.iter().map(|b| format!("{b:02x}")))
        .collect()
}

/// Reads the token at `file` (whitespace trimmed); `None` when there is no such file.
pub fn read(file: &Path) -> Result<Option<String>, AccessError> {
    match std::fs::read_to_string(file) {
        Ok(text) => Ok(Some(text.trim().to_string()).filter(|t| !t.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AccessError::Read {
            file: file.to_path_buf(),
            source,
        }),
    }
}

/// The token at `file`, made and written there when there is none yet. A file others may read
/// is made private again, with a warning.
pub fn load_or_create(file: &Path) -> Result<String, AccessError> {
    if let Some(token) = read(file)? {
        make_private(file);
        return Ok(token);
    }
    let token = generate();
    write(file, &token)?;
    tracing::info!("made the owner's admin token in {}", file.display());
    Ok(token)
}

/// Writes `token` to `file` (mode 0600) through a temporary file renamed over it, so a reader
/// never sees half a token.
pub fn write(file: &Path, token: &str) -> Result<(), AccessError> {
    let fail = |source| AccessError::Write {
        file: file.to_path_buf(),
        source,
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let tmp = file.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    crate::platform::private_file(&mut options);
    let mut out = options.open(&tmp).map_err(fail)?;
    out.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| out.sync_all())
        .map_err(fail)?;
    std::fs::rename(&tmp, file).map_err(fail)
}

/// Makes the token file the owner's alone if its mode lets others in (on Windows the profile's
/// ACL protects it: see `platform`).
fn make_private(file: &Path) {
    let Ok(meta) = std::fs::metadata(file) else {
        return;
    };
    if crate::platform::open_to_others(&meta) {
        tracing::warn!(
            "{} could be read by other users; made it private (mode 0600)",
            file.display()
        );
        let _ = crate::platform::set_mode(file, 0o600);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_made_once_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        let first = load_or_create(&file).unwrap();
        assert!(
            first.starts_with(TOKEN_PREFIX) && first.len() == 68,
            "{first}"
        );
        assert_eq!(load_or_create(&file).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_readable_token_file_is_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        std::fs::write(&file, "aho_given\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(load_or_create(&file).unwrap(), "aho_given");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
