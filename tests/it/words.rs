//! What people read is written for people: the main CLI flows and the hub's start-up and
//! shutdown log, run for real, print no Rust `Debug` output (`Some(3)`, `None`, a
//! `Name { field: ... }` dump).

use std::process::Command;

use serde_json::json;

use crate::cli::BIN;
use crate::hub_process::FreshHub;

/// Where `text` shows `Debug` output instead of words, if anywhere.
fn debug_output(text: &str) -> Option<String> {
    let struct_dump = regex::Regex::new(r"\b[A-Z][A-Za-z]+ \{ [a-z_]+: ").unwrap();
    text.lines()
        .find(|line| line.contains("Some(") || line.contains("None") || struct_dump.is_match(line))
        .map(String::from)
}

#[test]
fn the_detector_finds_debug_output() {
    assert!(debug_output("exit code Some(3)").is_some());
    assert!(debug_output("state None here").is_some());
    assert!(debug_output("restored=RestoreReport { tmux_reattached: [] }").is_some());
    assert_eq!(debug_output("exit code 3\nrestored 2 sessions"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_hub_s_log_speak_in_sentences() {
    let env = [("PS1", "$ "), ("AGENT_HUB_SHELL", "bash")];
    let mut fresh = FreshHub::start("words", &["--open-shell"], &env).await;
    let (base, dir) = (fresh.base.clone(), fresh.dir.clone());
    let hub = &mut fresh.hub;
    let made = hub
        .call(
            reqwest::Method::POST,
            "/v1/pty/sessions",
            json!({"backend": "tmux", "shell": "bash", "args": ["--norc", "--noprofile"], "label": "worker"}),
        )
        .await;
    assert!(made["ok"].as_bool().unwrap_or(false), "{made}");
    let flows: Vec<Vec<&str>> = vec![
        vec!["ls"],
        vec!["talk", "worker", "echo hello"],
        vec!["talk", "worker", "exit 3"],
        vec!["talk", "main", "(exit 4)"],
        vec!["send", "main", "echo sent"],
        vec!["keys", "main", "Enter"],
        vec!["read", "main"],
        vec!["screen", "main"],
        vec!["resolve", "main"],
        vec!["wait-state", "main", "working", "--timeout", "0.2"],
        vec!["run", "--", "sh", "-c", "echo task; exit 5"],
        vec!["agents"],
        vec!["policy", "list"],
        vec!["policy", "check"],
        vec!["audit", "--limit", "5"],
        vec!["token", "link"],
        vec!["kill", "no-such-session"],
        vec!["send", "no-such-session", "x"],
        vec!["kill", "worker"],
        vec!["doctor"],
    ];
    let mut printed = String::new();
    for flow in &flows {
        let out = Command::new(BIN)
            .args(flow)
            .env("AGENT_HUB_URL", &base)
            .env("AGENT_HUB_DATA_DIR", &dir)
            .env_remove("AGENT_HUB_TOKEN")
            .output()
            .unwrap();
        let said = format!(
            "$ agent-hub {}\n{}{}",
            flow.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(line) = debug_output(&said) {
            panic!(
                "Debug output in `agent-hub {}`: {line}\n{said}",
                flow.join(" ")
            );
        }
        printed.push_str(&said);
    }
    // The flows did what they say (so the check above read real output).
    for expected in ["hello", "exit code 3", "task", "PTY_SESSION_NOT_FOUND"] {
        assert!(printed.contains(expected), "no {expected:?} in:\n{printed}");
    }
    // Start-up, and a graceful stop.
    let started = hub.log_line("listening on").await;
    assert!(started.contains("restored"), "{started}");
    hub.log_line("restored the registry").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(hub.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let _ = hub.child.wait();
    let log = hub.log_text();
    if let Some(line) = debug_output(&log) {
        panic!("Debug output in the hub's log: {line}\n{log}");
    }
}
