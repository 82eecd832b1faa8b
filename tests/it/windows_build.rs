//! The Windows build (`agent-hub.exe`, x86_64-pc-windows-gnu) run under Wine, driving a real
//! Linux container on the main engine reached over TCP: what the Windows build does on a
//! Windows host with Docker Desktop's engine, but for the named pipe (docs/testing.md, "The
//! Windows build under Wine").
//!
//! `AGENT_HUB_WINDOWS_EXE` names the executable (`.ci/run` builds it); without it the test
//! skips, saying so, unless `AGENT_HUB_WINE_TESTS=required` (CI), where it fails instead.

use std::path::{Path, PathBuf};

use reqwest::Method;
use serde_json::json;

use crate::docker_support::{agent_toml, docker_tcp, ConfiguredHub};
use crate::hub_process::HubProcess;
use crate::require_docker;
use crate::secure_default::doctor_finding;

/// The runner that starts a Windows executable under wine64 (with the test-only
/// `bcryptprimitives.dll` stand-in beside it).
const WINE_RUNNER: &str = "tests/windows/wine-runner.sh";

/// The Windows build to run, or `None` (skipped, saying so; a failure when required).
fn windows_exe() -> Option<PathBuf> {
    let required = std::env::var("AGENT_HUB_WINE_TESTS").is_ok_and(|v| v == "required");
    let exe = std::env::var_os("AGENT_HUB_WINDOWS_EXE").map(PathBuf::from);
    match exe {
        Some(exe) if exe.is_file() => Some(exe),
        other => {
            let why = match other {
                Some(exe) => format!("{} does not exist", exe.display()),
                None => "AGENT_HUB_WINDOWS_EXE is not set".to_string(),
            };
            assert!(
                !required,
                "the Windows build's tests are required: {why} (cargo build --release --target \
                 x86_64-pc-windows-gnu, then AGENT_HUB_WINDOWS_EXE=target/x86_64-pc-windows-gnu/release/agent-hub.exe)"
            );
            eprintln!("SKIPPED: {why}: the Windows build under Wine is not tested");
            None
        }
    }
}

/// `agent-hub.exe serve --config <config> --listen 127.0.0.1:<port>` under Wine (another
/// port than the file's), with the engine at `engine`.
async fn serve_under_wine(exe: &Path, hub: &ConfiguredHub, port: u16, engine: &str) -> HubProcess {
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join(WINE_RUNNER);
    let program = [
        "bash",
        runner.to_str().unwrap(),
        exe.to_str().expect("a UTF-8 path"),
    ];
    let config = hub.config.to_str().unwrap();
    let listen = format!("127.0.0.1:{port}");
    HubProcess::spawn_program(
        &program,
        &["--config", config, "--listen", &listen],
        &format!("http://{listen}"),
        &[("DOCKER_HOST", engine), ("RUST_LOG", "info")],
    )
    .await
}

async fn screen(hub: &HubProcess, id: &str) -> String {
    let (status, v) = hub
        .call_status(
            Method::POST,
            &format!("/v1/pty/sessions/{id}/term_read"),
            json!({"mode": "viewport", "max_lines": 100}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v["text"].as_str().unwrap_or_default().to_string()
}

/// `agent-hub.exe doctor --json` under Wine: the data dir follows Windows' convention
/// (`%LOCALAPPDATA%\agent-hub`) and tmux on the host is not asked for.
#[test]
fn the_windows_build_keeps_its_data_in_local_app_data() {
    let Some(exe) = windows_exe() else { return };
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join(WINE_RUNNER);
    let out = std::process::Command::new("bash")
        .arg(&runner)
        .arg(&exe)
        .args(["doctor", "--json"])
        .env_remove("AGENT_HUB_DATA_DIR")
        .env_remove("AGENT_HUB_URL")
        .output()
        .unwrap();
    let finding = |check: &str| doctor_finding(&out, check);
    let data = finding("data dir");
    let detail = data["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(r"C:\users\") && detail.contains(r"\AppData\Local\agent-hub"),
        "{data}"
    );
    assert_eq!(data["status"], "ok", "{data}");
    let token = finding("owner's token");
    assert!(
        token["detail"]
            .as_str()
            .unwrap()
            .contains(r"\AppData\Local\agent-hub\admin-token"),
        "{token}"
    );
    let tmux = finding("tmux");
    assert_eq!(tmux["status"], "ok", "{tmux}");
    assert!(
        tmux["explanation"]
            .as_str()
            .unwrap()
            .contains("tmux host sessions need a Unix host"),
        "{tmux}"
    );
}

/// The Windows build, under Wine, starts a shell agent in a Linux container on the engine it
/// reaches over TCP, talks to it, reads its screen and stops it; on Windows every engine is
/// reached as a remote one (its engine named, the hub's address over TCP); and a tmux host
/// session is refused with a 400 that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_windows_build_drives_a_container_agent() {
    require_docker!();
    let Some(engine) = docker_tcp() else { return };
    let Some(exe) = windows_exe() else { return };
    let files = ConfiguredHub::new();
    files.write_config(&agent_toml("win", "cli_type = \"shell\""));
    // Listening on another port than the file's: the agents' default `hub_url` follows it.
    let port = crate::hub_process::free_port();
    let mut hub = serve_under_wine(&exe, &files, port, &engine).await;

    // On Windows the local engine is reached as a remote one: named, and the hub over TCP.
    let agent = hub.call(Method::GET, "/v1/agents/win", json!({})).await;
    assert_eq!(agent["agent"]["docker_host"], engine.as_str(), "{agent}");

    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/win/start", json!({}))
        .await;
    assert_eq!(
        status,
        200,
        "start: {v}\nthe hub's log:\n{}",
        hub.log_text()
    );
    let sid = v["agent"]["session_id"].as_str().unwrap().to_string();
    let out = hub
        .talk(&sid, "echo from-windows-$((6*7)) \"$AGENT_HUB_URL\"")
        .await;
    let text = out["output"].as_str().unwrap_or_default();
    assert!(text.contains("from-windows-42"), "{out}");
    assert!(
        text.contains(&format!("http://host.docker.internal:{port}")),
        "the agent is given the hub's TCP address (the port it listens on): {out}"
    );
    let shown = screen(&hub, &sid).await;
    assert!(shown.contains("from-windows-42"), "{shown}");

    // The container is a Linux one on the engine, running.
    let running = std::process::Command::new("docker")
        .args(["-H", &engine, "ps", "-q", "--filter"])
        .arg(format!("label=agent-hub.hub={}", files.hub_id()))
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&running.stdout).trim().is_empty());

    // tmux host sessions are Unix's: refused with a 400 that says so.
    let (status, v) = hub
        .call_status(Method::POST, "/v1/pty/sessions", json!({"backend": "tmux"}))
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error_code"], "BAD_REQUEST", "{v}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("tmux host sessions need a Unix host")),
        "{v}"
    );

    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/win/stop", json!({}))
        .await;
    assert_eq!(status, 200, "stop: {v}");
    let agent = hub.call(Method::GET, "/v1/agents/win", json!({})).await;
    assert_ne!(agent["agent"]["status"], "running", "{agent}");
    hub.terminate();
}
