//! A CLI's status file found through its own process's environment: a host session whose
//! launcher sets `HOME` itself (a wrapper script running `HOME=/x claude`) keeps its status
//! file under that home, not the hub's, and the hub reads it there.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{wait_until, TestHub};

/// A stand-in for Claude Code: writes its status file (`idle`) where Claude Code would, under
/// `$HOME/.claude/sessions/<pid>.json`, draws a prompt and waits.
const FAKE_CLAUDE: &str = r#"#!/bin/sh
dir="$HOME/.claude/sessions"
mkdir -p "$dir"
now=$(date +%s%3N)
printf '{"pid":%s,"startedAt":%s,"status":"idle","statusUpdatedAt":%s}' $$ "$now" "$now" \
    >"$dir/$$.tmp"
mv "$dir/$$.tmp" "$dir/$$.json"
printf 'ready\n> '
exec sleep 600
"#;

/// Writes an executable script.
fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

async fn state(hub: &TestHub, sid: &str) -> Value {
    let (status, v) = hub
        .get(&format!("/v1/pty/sessions/{sid}/state?explain=true"))
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

/// Waits (10 s at most) until the session's state comes from `source`.
async fn source_is(hub: &TestHub, sid: &str, source: &str) {
    let reached = wait_until(Duration::from_secs(10), || async {
        state(hub, sid).await["source"] == source
    })
    .await;
    assert!(reached, "not from {source}: {}", state(hub, sid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launcher_that_sets_home_still_has_its_clis_status_file_read() {
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("its-home");
    std::fs::create_dir(&home).unwrap();
    let claude = dir.path().join("claude");
    script(&claude, FAKE_CLAUDE);
    let launcher = dir.path().join("launch-claude");
    let wrapper = format!(
        "#!/bin/sh\nHOME='{}' '{}'\n",
        home.display(),
        claude.display()
    );
    script(&launcher, &wrapper);
    let request = json!({
        "backend": "tmux", "shell": launcher, "args": [], "cli_type": "claude",
        "cwd": dir.path(), "cols": 80, "rows": 24,
    });
    let (status, v) = hub.post("/v1/pty/sessions", request).await;
    assert_eq!(status, 200, "{v}");
    let sid = v["session_id"].as_str().unwrap().to_string();
    hub.wait_output(&sid, "ready", Duration::from_secs(10))
        .await;
    source_is(&hub, &sid, "status-file:idle").await;

    // The file changes: so does the state, at once.
    let sessions = home.join(".claude/sessions");
    let file = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("the fake CLI's status file");
    let mut entry: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    entry["status"] = json!("busy");
    entry["statusUpdatedAt"] = json!(chrono::Utc::now().timestamp_millis());
    std::fs::write(&file, entry.to_string()).unwrap();
    source_is(&hub, &sid, "status-file:busy").await;
    assert_eq!(state(&hub, &sid).await["state"], "working");
}
