//! The OpenAPI document against the hub that serves it: `tests/schemathesis/run.sh` runs
//! schemathesis (the version the script pins) on every operation of `GET /openapi.json` of a
//! fresh hub with `--checks all`, in every phase and on real sessions, tasks and container
//! agents the script makes first, and must report no failure, no error and no operation that
//! met nothing but 404s: the document admits what the hub accepts and nothing it refuses.
//!
//! Gating like the browser tests: skipped with a message when schemathesis is not installed
//! (`pip install schemathesis==<the pinned version>`), a failure when
//! `AGENT_HUB_SCHEMATHESIS=required` (CI). The container agents' part like the Docker tests:
//! without an engine or the test image the script leaves the agents' operations out and says
//! so (SKIPPED), and fails instead when `AGENT_HUB_DOCKER_TESTS=required` (CI), which it reads
//! from this test's environment.

use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis/run.sh")
}

/// The version `run.sh` pins (`SCHEMATHESIS_VERSION=`).
fn pinned_version() -> String {
    let text = std::fs::read_to_string(script()).expect("tests/schemathesis/run.sh");
    text.lines()
        .find_map(|l| l.strip_prefix("SCHEMATHESIS_VERSION="))
        .expect("run.sh pins SCHEMATHESIS_VERSION")
        .trim()
        .to_string()
}

/// Whether the run can happen here. Panics when it is required and cannot.
fn schemathesis_ready() -> bool {
    let required = std::env::var("AGENT_HUB_SCHEMATHESIS").is_ok_and(|v| v == "required");
    let pinned = pinned_version();
    let installed = Command::new("schemathesis")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let skip = match installed {
        None => "schemathesis not installed".to_string(),
        Some(v) if v.split_whitespace().last() == Some(pinned.as_str()) => return true,
        Some(v) => format!("{v} installed, run.sh pins {pinned}"),
    };
    if required {
        panic!(
            "the schemathesis run is required (AGENT_HUB_SCHEMATHESIS=required) but {skip} \
             (pip install schemathesis=={pinned})"
        );
    }
    eprintln!("SKIPPED: {skip}");
    false
}

#[test]
fn schemathesis_finds_nothing_the_document_and_the_hub_disagree_on() {
    if !schemathesis_ready() {
        return;
    }
    let out = Command::new("bash")
        .arg(script())
        .arg(env!("CARGO_BIN_EXE_agent-hub"))
        .output()
        .expect("run tests/schemathesis/run.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "tests/schemathesis/run.sh failed ({}): {}\n---- its whole output:\n{text}",
        out.status,
        digest(&text)
    );
    println!("{text}");
}

/// What failed, in a few lines ahead of the whole output (CI shows the first lines of a panic):
/// each failing operation, its checks, what it answered, and schemathesis's last line.
fn digest(text: &str) -> String {
    let mut lines = Vec::new();
    let mut in_failures = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("===") {
            in_failures = ["FAILURES", "ERRORS", "WARNINGS"]
                .iter()
                .any(|w| t.contains(w));
            if t.contains(" in ") || in_failures {
                lines.push(t.to_string());
            }
            continue;
        }
        let wanted = t.starts_with("___")
            || t.starts_with("- ")
            || t.starts_with("Actual:")
            || t.starts_with('[');
        if in_failures && wanted {
            lines.push(t.chars().take(160).collect());
        }
    }
    if lines.is_empty() {
        return "(no FAILURES section: see the output)".to_string();
    }
    lines.truncate(40);
    lines.join("\n")
}
