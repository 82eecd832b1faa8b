//! The layering of `src/`, enforced: every top-level module is in one layer of [`LAYERS`], no
//! file imports a module of a higher layer, and the imports between top-level modules have no
//! cycle. The layers, lowest first:
//!
//! - **core**: the terminal's vocabulary, the output pipeline, screen, redaction, the guard, the git workspaces,
//!   agent states, the settings, backends, sessions and the wire types;
//! - **components**: what the hub is made of (agents, tasks, policy, audit, persistence,
//!   metrics, external sessions, ...), each holding narrow handles, never the hub;
//! - **composition**: `hub`, which builds the components and hands each its handles;
//! - **edge**: how the world reaches the hub: the API, MCP, the CLI and its client, and the
//!   daemon, the process that starts the hub and the API's listeners.
//!
//! An import is a path `crate::<module>` (in a `use`, a path or a `crate::{...}` group), or a
//! `super::` chain that climbs to the crate root, outside comments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, &[&str])] = &[
    (
        "core",
        &[
            "term",
            "tick",
            "wire",
            "toml_file",
            "workspace",
            "error",
            "actor",
            "escape",
            "scrollback",
            "activity",
            "scope",
            "http_client",
            "output",
            "redact",
            "guard",
            "process",
            "agent_state",
            "config",
            "screen",
            "backend",
            "session",
            "protocol",
            "routing",
        ],
    ),
    (
        "components",
        &[
            "event_bus",
            "registry",
            "metrics",
            "credentials",
            "access",
            "docker",
            "delivery",
            "external",
            "persist",
            "agents",
            "host",
            "tasks",
            "policy",
            "audit",
        ],
    ),
    ("composition", &["hub"]),
    ("edge", &["api", "mcp", "client", "cli", "daemon"]),
];

/// The layer index of each module.
fn layer_of() -> BTreeMap<&'static str, usize> {
    let mut map = BTreeMap::new();
    for (n, (_, modules)) in LAYERS.iter().enumerate() {
        for m in *modules {
            assert!(map.insert(*m, n).is_none(), "{m} is in two layers");
        }
    }
    map
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            rust_files(&entry.path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The top-level module a file under `src/` belongs to, and how deep its module is
/// (`src/a.rs` and `src/a/mod.rs`: 1; `src/a/b.rs`: 2).
fn module_of(src: &Path, file: &Path) -> (String, usize) {
    let rel = file.strip_prefix(src).unwrap();
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let top = parts[0].trim_end_matches(".rs").to_string();
    let depth = match parts.last().map(String::as_str) {
        Some("mod.rs") => parts.len() - 1,
        _ => parts.len(),
    };
    (top, depth)
}

/// The code of a line: what stands before a `//` comment (strings holding `//` are rare in
/// the lines that matter here).
fn code_of(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// The code of a whole file, comments taken out line by line (so a `use` group that spans
/// lines is read whole).
fn code_of_file(text: &str) -> String {
    text.lines().map(code_of).collect::<Vec<_>>().join("\n")
}

/// The names right after `crate::` in `code`, with those in a `crate::{a, b::c}` group (over
/// as many lines as it takes); and after a `super::` chain of at least `depth` links (which
/// reaches the crate root), a group there too. Each with the byte offset where it was found.
fn imported_names_at(code: &str, depth: usize) -> Vec<(usize, String)> {
    let mut names = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `hub_crate::`, not ours
        }
        let rest = &code[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => names.extend(group_names(group).into_iter().map(|n| (at, n))),
            None => names.push((at, ident(rest))),
        }
    }
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with("super::") {
            continue; // counted from the chain's first link
        }
        let mut rest = &code[at..];
        let mut links = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            links += 1;
        }
        if links >= depth {
            match rest.strip_prefix('{') {
                Some(group) => names.extend(group_names(group).into_iter().map(|n| (at, n))),
                None => names.push((at, ident(rest))),
            }
        }
    }
    names.retain(|(_, n)| !n.is_empty());
    names
}

/// [`imported_names_at`] without the offsets.
fn imported_names(code: &str, depth: usize) -> Vec<String> {
    imported_names_at(code, depth)
        .into_iter()
        .map(|(_, n)| n)
        .collect()
}

/// The first names of the paths in a `{a, b::c, d::{e}}` group (after its `{`).
fn group_names(group: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    let mut taking = true;
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.push(std::mem::take(&mut current));
                taking = true;
            }
            c if depth == 0 && taking && (c.is_alphanumeric() || c == '_') => current.push(c),
            c if depth == 0 && !c.is_whitespace() => taking = false,
            _ => {}
        }
    }
    names.push(current);
    names
}

/// Every import between top-level modules: (from, to) -> where.
fn import_graph(src: &Path) -> BTreeMap<(String, String), Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let known: BTreeSet<String> = files
        .iter()
        .map(|f| module_of(src, f).0)
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for file in &files {
        let (from, depth) = module_of(src, file);
        if from == "lib" || from == "main" {
            continue;
        }
        let code = code_of_file(&std::fs::read_to_string(file).unwrap());
        for (offset, to) in imported_names_at(&code, depth) {
            if to != from && known.contains(&to) {
                let line = code[..offset].matches('\n').count() + 1;
                let at = format!("{}:{line}", file.strip_prefix(src).unwrap().display());
                graph.entry((from.clone(), to)).or_default().push(at);
            }
        }
    }
    graph
}

/// The cycles of a graph: its strongly connected components of more than one node.
fn cycles(edges: &BTreeSet<(String, String)>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = edges.iter().flat_map(|(a, b)| [a, b]).collect();
    let reaches = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for (a, b) in edges {
                if *a == n && seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reaches(n))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for n in &nodes {
        let component: BTreeSet<String> = reach[n]
            .iter()
            .filter(|m| reach[*m].contains(*n))
            .cloned()
            .collect();
        if component.len() > 1 && !found.contains(&component) {
            found.push(component);
        }
    }
    found
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_top_level_module_is_in_the_layer_table_and_every_entry_exists() {
    let layers = layer_of();
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| module_of(&src, f).0)
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let missing: Vec<&String> = modules
        .iter()
        .filter(|m| !layers.contains_key(m.as_str()))
        .collect();
    assert!(missing.is_empty(), "modules in no layer: {missing:?}");
    let stale: Vec<&&str> = layers.keys().filter(|m| !modules.contains(**m)).collect();
    assert!(
        stale.is_empty(),
        "the layer table names modules src/ does not have: {stale:?}"
    );
}

#[test]
fn no_module_imports_a_higher_layer() {
    let layers = layer_of();
    let graph = import_graph(&src_dir());
    assert!(graph.len() > 100, "too few imports found: {}", graph.len());
    let upward: Vec<String> = graph
        .iter()
        .filter(|((from, to), _)| layers[from.as_str()] < layers[to.as_str()])
        .map(|((from, to), at)| {
            let (lf, lt) = (
                LAYERS[layers[from.as_str()]].0,
                LAYERS[layers[to.as_str()]].0,
            );
            format!("{from} ({lf}) imports {to} ({lt}) at {}", at.join(", "))
        })
        .collect();
    assert!(
        upward.is_empty(),
        "imports of a higher layer:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_imports_between_modules_have_no_cycle() {
    let graph = import_graph(&src_dir());
    let edges: BTreeSet<(String, String)> = graph.keys().cloned().collect();
    let found = cycles(&edges);
    let described: Vec<String> = found
        .iter()
        .map(|c| {
            let inside: Vec<String> = graph
                .iter()
                .filter(|((a, b), _)| c.contains(a) && c.contains(b))
                .map(|((a, b), at)| format!("  {a} -> {b} at {}", at.join(", ")))
                .collect();
            format!("{c:?}:\n{}", inside.join("\n"))
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n{}", described.join("\n"));
}

#[test]
fn the_checks_see_imports_and_cycles() {
    assert_eq!(imported_names("use crate::hub::Hub;", 1), ["hub"]);
    assert_eq!(
        imported_names("use crate::{api, wire::{whole, Encoding}, hub};", 1),
        ["api", "wire", "hub"]
    );
    assert_eq!(
        imported_names("    crate::policy::toml_files(dir)", 2),
        ["policy"]
    );
    assert!(imported_names("use my_crate::hub::X;", 1).is_empty());
    // `super::` reaches the root from a top-level file, not from one a level down.
    assert_eq!(
        imported_names("use super::session::Session;", 1),
        ["session"]
    );
    assert!(imported_names("use super::session::Session;", 2).is_empty());
    assert_eq!(imported_names("super::super::hub::Hub", 2), ["hub"]);
    assert!(imported_names(code_of("/// see [`crate::tasks`]"), 1).is_empty());
    // A group over several lines (as rustfmt writes a long one), and a group after `super::`.
    let spread = code_of_file("use crate::{\n    api::x, // crate::mcp\n    hub::{Hub, Y},\n};");
    assert_eq!(imported_names(&spread, 1), ["api", "hub"]);
    assert_eq!(
        imported_names("use super::super::{hub::Hub, api};", 2),
        ["hub", "api"]
    );
    let edge = |a: &str, b: &str| (a.to_string(), b.to_string());
    let tree: BTreeSet<_> = [edge("a", "b"), edge("b", "c"), edge("a", "c")].into();
    assert!(cycles(&tree).is_empty());
    let knot: BTreeSet<_> = [
        edge("a", "b"),
        edge("b", "c"),
        edge("c", "a"),
        edge("c", "d"),
    ]
    .into();
    assert_eq!(
        cycles(&knot),
        [BTreeSet::from(["a".to_string(), "b".into(), "c".into()])]
    );
}
