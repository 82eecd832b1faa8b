//! The layering of `src/`, enforced: every top-level module is in one layer of [`LAYERS`], no
//! file imports a module of a higher layer, the imports between top-level modules have no
//! cycle, and inside a module no import circle ties more than [`MOST_FILES_IN_A_CIRCLE`] of
//! its files together (see [`child_graph`]). The layers, lowest first:
//!
//! - **core**: the terminal's vocabulary, the output pipeline, screen, redaction, the guard, the git workspaces,
//!   agent states, the settings, backends, sessions and the wire types;
//! - **components**: what the hub is made of (agents, tasks, policy, audit, persistence, the
//!   usage ledger, metrics, external sessions, ...), each holding narrow handles, never the hub;
//! - **composition**: `hub`, which builds the components and hands each its handles;
//! - **edge**: how the world reaches the hub: the API, MCP, the CLI and its client, and the
//!   daemon, the process that starts the hub and the API's listeners.
//!
//! An import is a path after `crate::` or a chain of `super::` (in a `use`, a path or a
//! `{...}` group), outside comments; a `super::` inside an inline module (`mod tests {`)
//! climbs out of that module first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, &[&str])] = &[
    (
        "core",
        &[
            "term",
            "tick",
            "json",
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
            "platform",
            "agent_state",
            "config",
            "screen",
            "backend",
            "session",
            "protocol",
            "owner_routing",
            "usage",
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
            "external_sessions",
            "persist",
            "ledger",
            "agents",
            "host",
            "tasks",
            "policy",
            "audit",
            "notify",
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

/// Every file under `src/` but the crate roots (`lib.rs`, `main.rs`), with its module path:
/// `src/a.rs` and `src/a/mod.rs` are `a`, `src/a/b.rs` is `a::b`.
fn module_files(src: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.retain(|f| f != &src.join("lib.rs") && f != &src.join("main.rs"));
    files
        .into_iter()
        .map(|f| {
            let module = module_path(src, &f);
            (f, module)
        })
        .collect()
}

fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
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

/// The name at the start of `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// Whether the character before `at` continues a name (`my_crate::` is not `crate::`).
fn inside_name(code: &str, at: usize) -> bool {
    code[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// The paths of the use tree at the start of `text` (what follows a `crate::`): `a::b::C` is
/// one path, `{a, b::{c, d}}` three. A path ends where something else than a name follows.
fn tree_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    read_tree(text, Vec::new(), &mut paths);
    paths
}

/// Reads one use tree from `text` into `paths`, each path after `path`; returns what follows.
fn read_tree<'a>(
    mut text: &'a str,
    mut path: Vec<String>,
    paths: &mut Vec<Vec<String>>,
) -> &'a str {
    loop {
        if let Some(group) = text.strip_prefix('{') {
            return read_group(group, &path, paths);
        }
        let name = ident(text);
        text = &text[name.len()..];
        if name.is_empty() {
            break;
        }
        if name != "self" {
            path.push(name.to_string());
        }
        match text.strip_prefix("::") {
            Some(rest) => text = rest,
            None => break,
        }
    }
    paths.push(path);
    text
}

/// Reads the trees of a group (after its `{`) into `paths`; returns what follows its `}`.
fn read_group<'a>(mut text: &'a str, path: &[String], paths: &mut Vec<Vec<String>>) -> &'a str {
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix('}') {
            return rest;
        }
        text = read_tree(text, path.to_vec(), paths);
        // What a tree may hold after its path (`as Name`, `*`) up to the next item.
        text = &text[text.find([',', '}']).unwrap_or(text.len())..];
        match text.strip_prefix(',') {
            Some(rest) => text = rest,
            None if text.is_empty() => return text,
            None => {}
        }
    }
}

/// An import as written: at which byte of the code, how many `super::` links it climbs
/// (`None`: it starts at `crate::`), and the path after that.
struct Import {
    at: usize,
    climbs: Option<usize>,
    path: Vec<String>,
}

/// Every path after `crate::` or a chain of `super::` in `code`, a group spread into its paths.
fn imports(code: &str) -> Vec<Import> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if !inside_name(code, at) {
            let rest = &code[at + "crate::".len()..];
            found.extend(tree_paths(rest).into_iter().map(|path| Import {
                at,
                climbs: None,
                path,
            }));
        }
    }
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with("super::") || inside_name(code, at) {
            continue; // counted from the chain's first link
        }
        let mut rest = &code[at..];
        let mut links = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            links += 1;
        }
        found.extend(tree_paths(rest).into_iter().map(|path| Import {
            at,
            climbs: Some(links),
            path,
        }));
    }
    found
}

/// Whether a line (its code, trimmed) opens an inline module: `mod name {`.
fn opens_inline_module(line: &str) -> bool {
    let line = match line.strip_prefix("pub") {
        Some(rest) => rest.split_once(' ').map_or("", |(_, r)| r),
        None => line,
    };
    line.strip_prefix("mod ")
        .is_some_and(|rest| rest[ident(rest).len()..].trim() == "{")
}

/// How many inline modules (`mod tests { ... }`) each line of `code` is in: one opens on a
/// line `mod name {` and ends at the next line that is a lone `}` at the same indent (the
/// layout the formatter gives it).
fn inline_depths(code: &str) -> Vec<usize> {
    let mut open: Vec<&str> = Vec::new();
    code.lines()
        .map(|line| {
            let body = line.trim();
            let indent = &line[..line.len() - line.trim_start().len()];
            if body == "}" && open.last() == Some(&indent) {
                open.pop();
            }
            let depth = open.len();
            if opens_inline_module(body) {
                open.push(indent);
            }
            depth
        })
        .collect()
}

/// The imports of the code of a file of `module`, each as a path from the crate root (a
/// `super::` inside an inline module climbs from that module first), with where it was found.
fn absolute_imports(code: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    let inline = inline_depths(code);
    let mut found = Vec::new();
    for import in imports(code) {
        let path = match import.climbs {
            None => import.path,
            Some(links) => {
                let line = code[..import.at].matches('\n').count();
                let Some(climb) = links.checked_sub(inline[line]) else {
                    continue; // within the file
                };
                let Some(keep) = module.len().checked_sub(climb) else {
                    continue;
                };
                module[..keep].iter().cloned().chain(import.path).collect()
            }
        };
        if !path.is_empty() {
            found.push((import.at, path));
        }
    }
    found
}

/// Where an import is: `file:line`, the file under `src/`.
fn place(src: &Path, file: &Path, code: &str, at: usize) -> String {
    let line = code[..at].matches('\n').count() + 1;
    format!("{}:{line}", file.strip_prefix(src).unwrap().display())
}

/// Every import between top-level modules: (from, to) -> where.
fn import_graph(src: &Path) -> BTreeMap<(String, String), Vec<String>> {
    let files = module_files(src);
    let known: BTreeSet<&String> = files.iter().map(|(_, module)| &module[0]).collect();
    let mut graph: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (file, module) in &files {
        let code = code_of_file(&std::fs::read_to_string(file).unwrap());
        for (at, path) in absolute_imports(&code, module) {
            let (from, to) = (&module[0], &path[0]);
            if to != from && known.contains(to) {
                let places = graph.entry((from.clone(), to.clone())).or_default();
                add_place(places, place(src, file, &code, at));
            }
        }
    }
    graph
}

/// Adds a place once (the paths of one group share theirs).
fn add_place(places: &mut Vec<String>, at: String) {
    if !places.contains(&at) {
        places.push(at);
    }
}

/// The most files an import circle inside a module may have.
const MOST_FILES_IN_A_CIRCLE: usize = 3;

/// The modules of `src/` as a tree: each module's children by name (a child is a file, or a
/// directory whole), and the names its own file takes from them (see [`taken_names`]).
struct Tree {
    children: BTreeMap<Vec<String>, BTreeSet<String>>,
    taken: BTreeMap<Vec<String>, BTreeMap<String, String>>,
}

impl Tree {
    fn of(files: &[(PathBuf, Vec<String>)]) -> Tree {
        let mut tree = Tree {
            children: BTreeMap::new(),
            taken: BTreeMap::new(),
        };
        for (file, module) in files {
            for depth in 1..module.len() {
                let parent = module[..depth].to_vec();
                let child = module[depth].clone();
                tree.children.entry(parent).or_default().insert(child);
            }
            if file.ends_with("mod.rs") {
                let code = code_of_file(&std::fs::read_to_string(file).unwrap());
                tree.taken.insert(module.clone(), taken_names(&code));
            }
        }
        tree
    }

    /// The child of `parent` a name right below it stands for: the child of that name, or
    /// the one the parent's own file took it from.
    fn child(&self, parent: &[String], name: &str) -> Option<String> {
        let children = self.children.get(parent)?;
        if children.contains(name) {
            return Some(name.to_string());
        }
        let taken = self.taken.get(parent)?.get(name)?;
        children.contains(taken).then(|| taken.clone())
    }

    /// The children an import of `path` from a file of `module` goes between, in each module
    /// both are in: (module, from, to).
    fn edges(&self, module: &[String], path: &[String]) -> Vec<(String, String, String)> {
        let mut edges = Vec::new();
        for depth in 1..module.len() {
            let parent = &module[..depth];
            if path.len() <= depth || path[..depth] != *parent {
                break;
            }
            let from = &module[depth];
            match self.child(parent, &path[depth]) {
                Some(to) if to != *from => edges.push((parent.join("/"), from.clone(), to)),
                _ => {}
            }
        }
        edges
    }
}

/// The names a module's own file (`mod.rs`) takes from its children with a `use` (mostly
/// to re-export them): name -> child (or whatever else the path starts with).
fn taken_names(code: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for (at, _) in code.match_indices("use ") {
        if inside_name(code, at) {
            continue;
        }
        let rest = code[at + "use ".len()..].trim_start();
        for path in tree_paths(rest.strip_prefix("self::").unwrap_or(rest)) {
            if let [first, .., name] = path.as_slice() {
                names.insert(name.clone(), first.clone());
            }
        }
    }
    names
}

/// Every import between two children of one module, a child being a file or a directory
/// whole (its files' imports are its own): (module, from, to) -> where. A module's own file
/// (`mod.rs`) is none of them: it declares the children, holds what they share and
/// re-exports them, so it would tie each to every other; a name it took from a child counts
/// as that child.
fn child_graph(src: &Path) -> BTreeMap<(String, String, String), Vec<String>> {
    let files = module_files(src);
    let tree = Tree::of(&files);
    let mut graph: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for (file, module) in &files {
        let code = code_of_file(&std::fs::read_to_string(file).unwrap());
        for (at, path) in absolute_imports(&code, module) {
            for edge in tree.edges(module, &path) {
                add_place(graph.entry(edge).or_default(), place(src, file, &code, at));
            }
        }
    }
    graph
}

/// The import circles of more than [`MOST_FILES_IN_A_CIRCLE`] files inside a module (files
/// that all reach each other by imports): (module, its children in the circle).
fn big_circles(
    graph: &BTreeMap<(String, String, String), Vec<String>>,
) -> Vec<(String, BTreeSet<String>)> {
    let mut by_module: BTreeMap<&String, BTreeSet<(String, String)>> = BTreeMap::new();
    for (module, from, to) in graph.keys() {
        by_module
            .entry(module)
            .or_default()
            .insert((from.clone(), to.clone()));
    }
    let mut found = Vec::new();
    for (module, edges) in by_module {
        for circle in cycles(&edges) {
            if circle.len() > MOST_FILES_IN_A_CIRCLE {
                found.push((module.clone(), circle));
            }
        }
    }
    found
}

/// The file (or directory) of a child of a module, under `src/`.
fn child_file(src: &Path, module: &str, child: &str) -> String {
    let file = format!("{module}/{child}.rs");
    if src.join(&file).is_file() {
        file
    } else {
        format!("{module}/{child}/")
    }
}

/// A circle as the failure shows it: its files, then the imports between them.
fn describe_circle(
    src: &Path,
    graph: &BTreeMap<(String, String, String), Vec<String>>,
    (module, circle): &(String, BTreeSet<String>),
) -> String {
    let files: Vec<String> = circle.iter().map(|c| child_file(src, module, c)).collect();
    let imports: Vec<String> = graph
        .iter()
        .filter(|((m, a, b), _)| m == module && circle.contains(a) && circle.contains(b))
        .map(|((_, a, b), at)| format!("  {a} -> {b} at {}", at.join(", ")))
        .collect();
    format!(
        "{} files in {module}: {}\n{}",
        circle.len(),
        files.join(", "),
        imports.join("\n")
    )
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
    let modules: BTreeSet<String> = module_files(&src_dir())
        .into_iter()
        .map(|(_, module)| module[0].clone())
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
fn no_module_has_an_import_circle_of_more_than_three_files() {
    let src = src_dir();
    let graph = child_graph(&src);
    assert!(graph.len() > 100, "too few imports found: {}", graph.len());
    let found = big_circles(&graph);
    let described: Vec<String> = found
        .iter()
        .map(|circle| describe_circle(&src, &graph, circle))
        .collect();
    assert!(
        found.is_empty(),
        "import circles of more than {MOST_FILES_IN_A_CIRCLE} files inside a module:\n{}",
        described.join("\n")
    );
}

/// The top-level modules `code` imports, read as a file `depth` modules down in `here`.
fn imported_names(code: &str, depth: usize) -> Vec<String> {
    let module = vec!["here".to_string(); depth];
    let mut names: Vec<String> = absolute_imports(code, &module)
        .into_iter()
        .map(|(_, path)| path[0].clone())
        .filter(|name| name != "here")
        .collect();
    names.dedup();
    names
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

fn owned(paths: &[&[&str]]) -> Vec<Vec<String>> {
    paths
        .iter()
        .map(|p| p.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn the_checks_read_paths_inline_modules_and_re_exports() {
    let paths = tree_paths("{a::B, c::{self, d::E as F, *}, g}; h::I");
    let want = owned(&[&["a", "B"], &["c"], &["c", "d", "E"], &["c"], &["g"]]);
    assert_eq!(paths, want);
    // A test module's `super::` is the file's module; one more link climbs out of it.
    let code = code_of_file("use super::x::X;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::y::Y;\n}\nuse super::z;");
    let module = ["m".to_string(), "file".into()];
    let found: Vec<Vec<String>> = absolute_imports(&code, &module)
        .into_iter()
        .map(|(_, path)| path)
        .collect();
    let want = owned(&[
        &["m", "x", "X"],
        &["m", "file"],
        &["m", "y", "Y"],
        &["m", "z"],
    ]);
    assert_eq!(found, want);
    let taken = taken_names(
        "mod b;\npub use b::{B, Bee};\npub(crate) use self::c::C;\nuse std::sync::Arc;",
    );
    assert_eq!(taken["Bee"], "b");
    assert_eq!(taken["C"], "c");
    assert_eq!(taken["Arc"], "std");
}

/// Writes the files of a made-up `src/`.
fn made_up_src(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, code) in files {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, code).unwrap();
    }
    dir
}

#[test]
fn a_circle_of_four_files_is_found_and_one_of_three_is_not() {
    // In `m`: a -> b -> c -> d -> a, through a re-export, a directory, and a test module;
    // in `n`: x -> y -> z -> x.
    let src = made_up_src(&[
        ("lib.rs", "pub mod m;\npub mod n;"),
        ("m/mod.rs", "mod a;\nmod b;\nmod c;\nmod d;\npub use c::C;"),
        ("m/a.rs", "use super::b::B;"),
        ("m/b/mod.rs", "mod inner;"),
        ("m/b/inner.rs", "use super::super::C;"),
        ("m/c.rs", "pub struct C(crate::m::d::D);"),
        (
            "m/d.rs",
            "#[cfg(test)]\nmod tests {\n    use super::super::a;\n}",
        ),
        ("n/mod.rs", "mod x;\nmod y;\nmod z;"),
        ("n/x.rs", "use super::y;"),
        ("n/y.rs", "use super::z;"),
        ("n/z.rs", "use crate::n::x;"),
    ]);
    let graph = child_graph(src.path());
    let found = big_circles(&graph);
    let abcd = BTreeSet::from(["a", "b", "c", "d"].map(str::to_string));
    assert_eq!(found, [("m".to_string(), abcd)]);
    let shown = describe_circle(src.path(), &graph, &found[0]);
    assert!(
        shown.starts_with("4 files in m: m/a.rs, m/b/, m/c.rs, m/d.rs\n"),
        "{shown}"
    );
    assert!(shown.contains("  b -> c at m/b/inner.rs:1"), "{shown}");
    assert!(shown.contains("  d -> a at m/d.rs:3"), "{shown}");
}

/// Where what differs between Unix and Windows may be chosen with `#[cfg]`: the platform and
/// process modules, the backends, and the edge (the API's listeners, the CLI, its client, the
/// daemon). The core's and the components' logic carries none (issue #45).
const PLATFORM_CHOICES: &[&str] = &[
    "platform",
    "process",
    "backend",
    "http_client",
    "api",
    "cli",
    "client",
    "daemon",
];

/// Whether `line` chooses by operating system.
fn chooses_platform(line: &str) -> bool {
    let code = code_of(line);
    (code.contains("cfg(") || code.contains("cfg!("))
        && ["unix", "windows", "target_os", "target_family"]
            .iter()
            .any(|word| code.contains(word))
}

/// The `file:line`s outside [`PLATFORM_CHOICES`] that choose by operating system, but in
/// tests: a test file (`tests.rs`, under `tests/`), a `mod tests` (to the end of its file),
/// or the line marking a test or a test helper as needing Unix (a `// ` reason after it).
fn platform_choices_in_logic(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (file, module) in module_files(src) {
        let top = module.first().map(String::as_str).unwrap_or("");
        let rel = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let test_file = rel.ends_with("tests.rs") || rel.contains("tests/");
        if PLATFORM_CHOICES.contains(&top) || test_file {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("mod tests {") {
                break;
            }
            let marks_a_test = line.contains("#[cfg(unix)] // ");
            if chooses_platform(line) && !marks_a_test && !line.contains("cfg(all(test") {
                found.push(format!("src/{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn only_the_platform_the_backends_and_the_edge_choose_by_operating_system() {
    let found = platform_choices_in_logic(&src_dir());
    assert!(
        found.is_empty(),
        "choices by operating system in the core's or the components' logic (move them into \
         src/platform, src/process or a backend):\n{}",
        found.join("\n")
    );
    // The check finds one where there is one.
    let made = made_up_src(&[
        ("lib.rs", "pub mod config;\npub mod platform;"),
        (
            "config/mod.rs",
            "#[cfg(unix)]\nfn a() {}\n#[cfg(test)]\nmod tests {\n#[cfg(unix)]\nfn t() {}\n}",
        ),
        ("platform/mod.rs", "#[cfg(windows)]\nmod windows;"),
    ]);
    assert_eq!(
        platform_choices_in_logic(made.path()),
        ["src/config/mod.rs:1: #[cfg(unix)]"]
    );
}
