//! Operating a hub through the real binary: `doctor` on a healthy machine and on one that
//! fails every check, `completions`, and `serve --log-format json`'s start-up line.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::cli::BIN;
use crate::docker_support::test_image;
use crate::hub_process::free_port;
use crate::support::TestHub;

/// `agent-hub doctor --json ARGS` with `env`; its exit code and report.
fn doctor(args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let out = Command::new(BIN)
        .arg("doctor")
        .arg("--json")
        .args(args)
        .envs(env.iter().copied())
        .env_remove("AGENT_HUB_TOKEN")
        .env_remove("AGENT_HUB_CONFIG")
        .env_remove("AGENT_HUB_DATA_DIR")
        .env_remove("AGENT_HUB_LISTEN")
        .output()
        .expect("run doctor");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), report)
}

/// `doctor` of a config, a data dir and a hub URL (with `env`).
fn doctor_of(
    config: &std::path::Path,
    data: &std::path::Path,
    hub: &str,
    env: &[(&str, &str)],
) -> (i32, Value) {
    let (config, data) = (config.to_str().unwrap(), data.to_str().unwrap());
    doctor(&["--config", config, "--data-dir", data, "--hub", hub], env)
}

/// The finding whose check starts with `prefix`.
fn finding<'a>(report: &'a Value, prefix: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["check"].as_str().unwrap_or("").starts_with(prefix))
        .unwrap_or_else(|| panic!("no finding {prefix}: {report:#}"))
}

fn assert_fails_with_fix(report: &Value, prefix: &str) {
    let f = finding(report, prefix);
    assert_eq!(f["status"], "fail", "{prefix}: {f:#}");
    for field in ["detail", "explanation", "fix"] {
        assert!(
            !f[field].as_str().unwrap_or("").is_empty(),
            "{prefix} has no {field}: {f:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_on_a_healthy_machine() {
    crate::require_docker!();
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hub.toml");
    std::fs::write(
        &config,
        format!("[[agents]]\nid = \"fine\"\nimage = \"{}\"\n", test_image()),
    )
    .unwrap();
    let data = dir.path().join("data");
    let (code, report) = doctor_of(&config, &data, &hub.base, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["ok"], true);
    for f in report["findings"].as_array().unwrap() {
        assert_eq!(f["status"], "ok", "{f:#}");
    }
    let image = finding(&report, "image");
    let detail = image["detail"].as_str().unwrap();
    assert!(detail.contains("tmux 3."), "{detail}");
    assert!(detail.contains("start_tmux = auto"), "{detail}");
    assert!(finding(&report, "engine")["detail"]
        .as_str()
        .unwrap()
        .contains("API 1."));
    assert!(finding(&report, "hub")["detail"]
        .as_str()
        .unwrap()
        .contains("session(s)"));
    // Another test's doctor may be probing right now: its probe goes in a moment, one left
    // behind stays.
    let no_probes = || async {
        let probes = Command::new("docker")
            .args(["ps", "-aq", "--filter", "label=agent-hub.doctor=true"])
            .output()
            .unwrap();
        probes.stdout.is_empty()
    };
    assert!(
        crate::support::wait_until(Duration::from_secs(30), no_probes).await,
        "a probe container was left behind"
    );
}

/// A data dir the doctor cannot write: read-only by mode for a normal user; root ignores
/// modes, so for root a directory on a read-only file system (sysfs).
fn unwritable_dir(tmp: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmp.join("read-only");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    if std::fs::write(dir.join("probe"), b"x").is_err() {
        return dir;
    }
    let sys = std::path::PathBuf::from("/sys/kernel");
    assert!(
        std::fs::write(sys.join("agent-hub-probe"), b"x").is_err(),
        "no unwritable directory found for this test"
    );
    sys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_explains_every_failed_check() {
    let docker = crate::docker_support::docker_ready();
    let dir = tempfile::tempdir().unwrap();
    let data = unwritable_dir(dir.path());
    let config = dir.path().join("hub.toml");
    let far = format!("tcp://127.0.0.1:{}", free_port());
    std::fs::write(
        &config,
        format!(
            "auth = \"none\"\n\
             [[agents]]\nid = \"missing\"\nimage = \"agent-hub/no-such-image:doctor\"\n\
             [[agents]]\nid = \"far\"\nimage = \"{}\"\ndocker_host = \"{far}\"\n",
            test_image()
        ),
    )
    .unwrap();
    // No tmux: a PATH with nothing on it.
    let empty_path = dir.path().join("bin");
    std::fs::create_dir(&empty_path).unwrap();
    let no_hub = format!("http://127.0.0.1:{}", free_port());
    let path = [("PATH", empty_path.to_str().unwrap())];
    // Anonymous access on an address other machines reach (the config alone is refused at load).
    let (config_arg, data_arg) = (config.to_str().unwrap(), data.to_str().unwrap());
    let (code, report) = doctor(
        &[
            "--config",
            config_arg,
            "--data-dir",
            data_arg,
            "--hub",
            &no_hub,
            "--listen",
            "0.0.0.0:8100",
        ],
        &path,
    );
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["ok"], false);
    assert_fails_with_fix(&report, "tmux");
    assert_fails_with_fix(&report, &format!("engine {far}"));
    if docker {
        assert_fails_with_fix(&report, "image agent-hub/no-such-image:doctor");
    }
    assert_fails_with_fix(&report, "data dir");
    assert_fails_with_fix(&report, "audit log");
    assert_fails_with_fix(&report, "listen and auth");
    assert_fails_with_fix(&report, "hub");
    assert!(finding(&report, "listen and auth")["fix"]
        .as_str()
        .unwrap()
        .contains("auth = \"none\""));
}

#[test]
fn completions_cover_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .expect("run completions");
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        for sub in ["serve", "attach", "send", "doctor", "completions"] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let bad = Command::new(BIN)
        .args(["completions", "cmd.exe"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn serve_logs_json_lines_saying_what_it_serves() {
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--log-format",
            "json",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
            data.path().to_str().unwrap(),
        ])
        .env_remove("AGENT_HUB_TOKEN")
        .env_remove("AGENT_HUB_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut started = None;
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) {
        if line.contains("listening") {
            started = Some(line);
            break;
        }
        seen.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    let line = started.unwrap_or_else(|| panic!("no start-up line; stderr: {seen:?}"));
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["level"], "INFO", "{v}");
    assert_eq!(v["listen"], format!("127.0.0.1:{port}"), "{v}");
    assert_eq!(v["engines"], "none", "{v}");
    assert_eq!(v["agents"], 0, "{v}");
    assert_eq!(v["restored_sessions"], 0, "{v}");
    for other in seen {
        assert!(
            serde_json::from_str::<Value>(&other).is_ok(),
            "a non-JSON log line: {other}"
        );
    }
}

#[test]
fn systemd_unit_verifies() {
    let Ok(out) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("SKIPPED: systemd-analyze is not installed (apt-get install systemd)");
        return;
    };
    assert!(out.status.success());
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/systemd/agent-hub.service"
    ))
    .unwrap();
    for needed in [
        "Restart=on-failure",
        "StateDirectory=agent-hub",
        "User=agent-hub",
        "SupplementaryGroups=docker",
    ] {
        assert!(unit.contains(needed), "the unit lacks {needed}");
    }
    // verify checks that ExecStart's program exists: point it at the binary under test.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent-hub.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/agent-hub", BIN)).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {said}");
    assert!(
        !said.contains("agent-hub.service"),
        "systemd-analyze has remarks on the unit: {said}"
    );
}
