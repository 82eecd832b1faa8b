//! Reading TOML files people write: which files a folder holds, and where in a file a
//! problem is (line, column and key), so that every error names its place.

use std::path::{Path, PathBuf};

/// A TOML file (or the folder holding it) that cannot be used: it cannot be read, or it has
/// a problem at a place, named `FILE:LINE:COL: what (key `KEY`)`.
#[derive(Debug, thiserror::Error)]
pub enum TomlFileError {
    /// The file or folder cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The text is not TOML, or not of the expected shape (a wrong type, an unknown key).
    #[error("{origin}:{line}:{col}: {}{}", source.message().trim(), key_note(key))]
    Syntax {
        origin: String,
        line: usize,
        col: usize,
        key: Option<String>,
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A value the file's reader refuses; `message` says why.
    #[error("{origin}:{line}:{col}: {message}{}", key_note(key))]
    Invalid {
        origin: String,
        line: usize,
        col: usize,
        key: Option<String>,
        message: String,
    },
}

/// ` (key `KEY`)`, or nothing.
fn key_note(key: &Option<String>) -> String {
    key.as_ref()
        .map(|k| format!(" (key `{k}`)"))
        .unwrap_or_default()
}

impl TomlFileError {
    /// `text` (from `origin`) does not deserialize.
    pub fn syntax(text: &str, origin: &str, source: toml::de::Error) -> Self {
        let (line, col, key) = locate(text, source.span());
        TomlFileError::Syntax {
            origin: origin.to_string(),
            line,
            col,
            key,
            source: Box::new(source),
        }
    }

    /// The value at `span` of `text` (from `origin`) is refused.
    pub fn invalid(
        text: &str,
        origin: &str,
        span: Option<std::ops::Range<usize>>,
        message: impl Into<String>,
    ) -> Self {
        let (line, col, key) = locate(text, span);
        TomlFileError::Invalid {
            origin: origin.to_string(),
            line,
            col,
            key,
            message: message.into(),
        }
    }
}

/// 1-based line and column of a byte span's start, and the key on that line, if any.
pub fn locate(text: &str, span: Option<std::ops::Range<usize>>) -> (usize, usize, Option<String>) {
    let at = span.map(|s| s.start).unwrap_or(0).min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() + 1;
    let line_text = text[line_start..].lines().next().unwrap_or("");
    let key = line_text
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    (line, col, key)
}

/// The `*.toml` files directly in `dir`, sorted.
pub fn toml_files(dir: &Path) -> Result<Vec<PathBuf>, TomlFileError> {
    let entries = std::fs::read_dir(dir).map_err(|source| TomlFileError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// The text of the file at `path`.
pub fn read(path: &Path) -> Result<String, TomlFileError> {
    std::fs::read_to_string(path).map_err(|source| TomlFileError::Read {
        path: path.to_path_buf(),
        source,
    })
}
