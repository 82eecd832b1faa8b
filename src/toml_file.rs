//! Reading TOML files people write: which files a folder holds, and where in a file a
//! problem is (line, column and key), so that every error names its place.

use std::path::{Path, PathBuf};

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
pub fn toml_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{}: cannot read: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}
