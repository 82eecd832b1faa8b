//! Every image name and tag is defined once, in `docker/images.env`: the scripts source it
//! (through `docker/images.sh`), the tests and benchmarks read it here. A name written out
//! anywhere else is how main once went red on a new machine: `build-hub.sh` built on a base
//! tag that `build-offline.sh` no longer made, and only an engine holding an old image passed.

use std::path::{Path, PathBuf};

const IMAGES_ENV: &str = include_str!("../../docker/images.env");

/// The value of `key` in `docker/images.env`.
pub fn image(key: &str) -> String {
    images_env_value(IMAGES_ENV, key).unwrap_or_else(|| panic!("docker/images.env has no {key}"))
}

fn images_env_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
}

/// The repositories the project's images live in (`agent-hub/agent`, ...).
fn repositories() -> Vec<String> {
    let mut repos: Vec<String> = [
        "AGENT_TEST_IMAGE",
        "AGENT_CLIS_IMAGE",
        "HUB_IMAGE",
        "HUB_TEST_IMAGE",
    ]
    .iter()
    .map(|k| image(k).split(':').next().unwrap().to_string())
    .collect();
    repos.push(image("BASE_REPO"));
    repos.sort();
    repos.dedup();
    repos
}

/// The files that build, start or read images: scripts, CI, tests, benchmarks.
fn files_that_name_images(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join(".ci/run")];
    for dir in [
        "docker",
        "tests/it",
        "tests/rig",
        "tests/schemathesis",
        "benches",
    ] {
        collect(&root.join(dir), &mut files);
    }
    files.retain(|f| {
        let name = f.file_name().unwrap().to_string_lossy();
        (name.ends_with(".sh") || name.ends_with(".rs") || name == "run")
            && !f.ends_with("tests/it/images.rs")
    });
    files
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// `agent-hub/agent:test`, `agent-hub/debian-base:bookworm`...: a repository of ours with a
/// tag, written out in a line.
fn written_out_names(text: &str, repos: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for repo in repos {
            if line.contains(&format!("{repo}:")) {
                found.push(format!("line {}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn every_image_name_comes_from_images_env() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repos = repositories();
    assert!(
        repos.contains(&"agent-hub/debian-base".to_string()),
        "{repos:?}"
    );
    let mut offenders = Vec::new();
    for file in files_that_name_images(root) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for hit in written_out_names(&text, &repos) {
            offenders.push(format!("{}: {hit}", file.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "image names written out instead of read from docker/images.env:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_scanner_finds_a_written_out_tag() {
    let repos = vec!["agent-hub/debian-base".to_string()];
    let script = "base=$BASE_IMAGE\nbase=agent-hub/debian-base:bookworm\n";
    assert_eq!(
        written_out_names(script, &repos),
        vec!["line 2: base=agent-hub/debian-base:bookworm"]
    );
    assert_eq!(
        images_env_value("# A=no\nA = yes\n", "A").as_deref(),
        Some("yes")
    );
}

/// The base image's tag as docker/images.sh derives it: the scripts that make it and the
/// one that builds on it agree, on any engine.
#[test]
fn build_offline_and_build_hub_use_the_same_base_image() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg("source docker/images.sh && echo \"$BASE_IMAGE\"")
        .current_dir(root)
        .output()
        .expect("bash");
    assert!(out.status.success(), "{out:?}");
    let base = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(
        base.starts_with(&format!("{}:{}-", image("BASE_REPO"), image("BASE_SUITE"))),
        "{base}"
    );
    for script in ["docker/build-offline.sh", "docker/build-hub.sh"] {
        let text = std::fs::read_to_string(root.join(script)).unwrap();
        assert!(
            text.contains("source \"$here/images.sh\""),
            "{script} does not source images.sh"
        );
        assert!(
            text.contains("$BASE_IMAGE"),
            "{script} does not use BASE_IMAGE"
        );
    }
}
