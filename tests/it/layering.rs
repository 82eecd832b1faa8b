//! The layering of `src/`: no file of the core imports from a layer above it. The core is what
//! every feature stands on (sessions, backends, the output pipeline, screen, scrollback,
//! redaction, the guard, activity, config, the wire contract, errors, actors); the layers above
//! compose it (the hub, its components, the API, the CLI).

use std::path::{Path, PathBuf};

const CORE: &[&str] = &[
    "session",
    "backend",
    "output.rs",
    "screen",
    "scrollback.rs",
    "redact",
    "guard.rs",
    "activity.rs",
    "config",
    "protocol",
    "error.rs",
    "actor.rs",
    "escape.rs",
];

const UPPER: &[&str] = &[
    "hub", "api", "agents", "policy", "persist", "audit", "tasks", "cli", "daemon", "mcp",
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            rust_files(&entry.path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// `crate::<upper>` at a word boundary, outside comments.
fn upward_imports(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for upper in UPPER {
            let needle = format!("crate::{upper}");
            let hit = code.match_indices(&needle).any(|(at, _)| {
                let next = code[at + needle.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if hit {
                found.push(format!("line {}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_core_file_imports_an_upper_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for part in CORE {
        let path = src.join(part);
        assert!(path.exists(), "core part {part} is missing from src/");
        rust_files(&path, &mut files);
    }
    assert!(files.len() > 20, "too few core files found: {files:?}");
    let violations: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            upward_imports(&text)
                .into_iter()
                .map(move |v| format!("{}: {v}", f.display()))
        })
        .collect();
    assert!(
        violations.is_empty(),
        "core files import upper layers:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import() {
    assert_eq!(upward_imports("use crate::hub::Hub;").len(), 1);
    assert_eq!(
        upward_imports("    crate::policy::toml_files(dir)").len(),
        1
    );
    assert!(upward_imports("use crate::hubris::X; // crate::api").is_empty());
    assert!(upward_imports("/// see [`crate::tasks`]").is_empty());
}
