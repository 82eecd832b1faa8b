//! Restarts without loss: a real `agent-hub serve` process killed with SIGKILL and started
//! again on the same data dir; a corrupt registry, a cut-short events log and a read-only data
//! dir do not stop the hub.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::hub_process::{free_port, HubProcess};
use crate::support::{wait_until, TmuxServerGuard, OWNER_FIELDS};

const T: Duration = Duration::from_secs(15);

fn tmux(socket: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("tmux")
        .arg("-L")
        .arg(socket)
        .args(args)
        .output()
        .expect("tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `serve` on a fresh port with this data dir and tmux socket, plus `extra` flags.
async fn serve(data: &Path, socket: &str, extra: &[&str]) -> HubProcess {
    serve_with(data, socket, extra, &[]).await
}

/// `serve` with more environment (`AGENT_HUB_TOKEN` for a data dir it cannot write).
async fn serve_with(data: &Path, socket: &str, extra: &[&str], env: &[(&str, &str)]) -> HubProcess {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "--listen",
        &listen,
        "--data-dir",
        data.to_str().unwrap(),
        "--tmux-socket",
        socket,
        "--shell",
        "bash",
    ];
    args.extend_from_slice(extra);
    let env = [&[("PS1", "$ ")], env].concat();
    HubProcess::spawn(&args, &format!("http://{listen}"), &env).await
}

/// An admin token for hubs whose data dir is read-only (no owner's token can be kept there).
const RO_TOKEN: (&str, &str) = ("AGENT_HUB_TOKEN", "persist-read-only-admin-0123456789");

async fn read_all(hub: &HubProcess, id: &str) -> String {
    let v = hub
        .call(
            Method::GET,
            &format!("/v1/pty/sessions/{id}/read?since=0&max_bytes=1000000&timeout_ms=0"),
            json!({}),
        )
        .await;
    v["output"].as_str().unwrap_or("").to_string()
}

async fn sessions(hub: &HubProcess) -> Vec<Value> {
    let v = hub.call(Method::GET, "/v1/pty/sessions", json!({})).await;
    v["sessions"].as_array().cloned().unwrap_or_default()
}

fn registry_has(data: &Path, needle: &str) -> bool {
    std::fs::read_to_string(data.join("registry.json")).is_ok_and(|t| t.contains(needle))
}

async fn hub_health(hub: &HubProcess) -> Value {
    hub.call(Method::GET, "/health", json!({})).await
}

/// Asks for a host PTY session running bash: (status, reply).
async fn new_pty_session(hub: &HubProcess) -> (u16, Value) {
    hub.call_status(
        Method::POST,
        "/v1/pty/sessions",
        json!({"args": ["--norc"]}),
    )
    .await
}

/// Creates a tmux session running bash, with these more fields of the request (owner
/// identity, label...); returns its id.
async fn new_tmux_session(hub: &HubProcess, fields: Value) -> String {
    let mut body = json!({"backend": "tmux", "args": ["--norc", "--noprofile"]});
    for (key, value) in fields.as_object().unwrap() {
        body[key] = value.clone();
    }
    let v = hub.call(Method::POST, "/v1/pty/sessions", body).await;
    v["session_id"].as_str().expect("tmux session").to_string()
}

/// Makes the data dir `data` with these state files in it: (name, contents).
fn data_dir_with(data: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(data).unwrap();
    for (name, contents) in files {
        std::fs::write(data.join(name), contents).unwrap();
    }
}

/// A test's temp dir and a tmux socket of its own (`ah-{name}-...`), whose server is killed
/// when this drops.
struct Scratch {
    _tmux: TmuxServerGuard,
    socket: String,
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = format!("ah-{name}-{}-{}", std::process::id(), free_port());
        Scratch {
            _tmux: TmuxServerGuard(socket.clone()),
            socket,
            dir,
        }
    }

    /// `name` in the temp dir.
    fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_sessions_come_back_after_sigkill_with_their_owner_identity() {
    let scratch = Scratch::new("persist");
    let (data, socket) = (scratch.join("data"), scratch.socket.clone());
    let mut hub = serve(&data, &socket, &["--snapshots"]).await;

    let mut tmux_ids = Vec::new();
    for n in 1..=3 {
        let id = new_tmux_session(
            &hub,
            json!({"owner_agent_id": format!("worker-{n}"), "owner_role": "worker",
                   "label": format!("Worker {n}"), "cli_type": "shell"}),
        )
        .await;
        let v = hub.talk(&id, &format!("echo before-crash-{n}")).await;
        assert_eq!(v["exit_code"], 0, "{v}");
        tmux_ids.push(id);
    }
    // An ownership change made at run time must survive too.
    hub.call(
        Method::POST,
        "/v1/pty/update-ownership",
        json!({"session_id": tmux_ids[0], "owner_session_id": "leader-7", "label": "Renamed", "conversation_id": "conv-42"}),
    )
    .await;
    let v = hub
        .call(
            Method::POST,
            "/v1/pty/sessions",
            json!({"args": ["--norc", "--noprofile"], "label": "pty-1"}),
        )
        .await;
    let pty_id = v["session_id"].as_str().unwrap().to_string();
    hub.talk(&pty_id, "echo pty-marker-$((40+2))").await;
    let before: Vec<Value> = sessions(&hub).await;
    // The debounced write lands within about a second; the snapshot within two.
    assert!(
        wait_until(T, || async { registry_has(&data, "leader-7") }).await,
        "registry not written"
    );
    let snap = data.join("snapshots").join(format!("{pty_id}.bin"));
    assert!(
        wait_until(T, || async {
            std::fs::read_to_string(&snap).is_ok_and(|t| t.contains("pty-marker-42"))
        })
        .await,
        "no snapshot"
    );
    hub.kill9();

    for (n, name) in tmux_ids.iter().enumerate() {
        let _ = tmux(
            &socket,
            &[
                "send-keys",
                "-t",
                name,
                &format!("echo while-down-{}", n + 1),
                "Enter",
            ],
        );
    }
    let mut hub = serve(&data, &socket, &["--snapshots"]).await;
    let after = sessions(&hub).await;
    assert_eq!(
        after.len(),
        4,
        "nothing lost, nothing duplicated: {after:?}"
    );
    for (n, id) in tmux_ids.iter().enumerate() {
        let s = after
            .iter()
            .find(|s| s["id"] == json!(id))
            .expect("tmux session back");
        let old = before.iter().find(|s| s["id"] == json!(id)).unwrap();
        for key in OWNER_FIELDS.iter().chain(&["backend", "tmux_session"]) {
            assert_eq!(s[key], old[key], "{key} of {id}");
        }
        assert_eq!(s["alive"], true, "{s}");
        let out = read_all(&hub, id).await;
        let n = n + 1;
        assert!(out.contains(&format!("before-crash-{n}")), "{id}: {out}");
        let seen = wait_until(T, || async {
            read_all(&hub, id)
                .await
                .contains(&format!("while-down-{n}"))
        })
        .await;
        assert!(
            seen,
            "output made while the hub was down: {}",
            read_all(&hub, id).await
        );
    }
    assert_eq!(
        after
            .iter()
            .find(|s| s["id"] == json!(tmux_ids[0]))
            .unwrap()["owner_session_id"],
        "leader-7"
    );
    assert_eq!(
        after
            .iter()
            .find(|s| s["id"] == json!(tmux_ids[0]))
            .unwrap()["conversation_id"],
        "conv-42"
    );
    // The host PTY died with the hub: listed as exited, with the reason and its snapshot.
    let pty = after
        .iter()
        .find(|s| s["id"] == json!(pty_id))
        .expect("pty listed");
    assert_eq!(pty["alive"], false, "{pty}");
    assert!(
        pty["exit_reason"].as_str().unwrap().contains("hub stopped"),
        "{pty}"
    );
    assert_eq!(pty["label"], "pty-1");
    assert!(read_all(&hub, &pty_id).await.contains("pty-marker-42"));
    // Still steerable; routing by the restored identity works.
    let v = hub
        .call(
            Method::POST,
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": "worker-2", "data": "echo routed-after-restart"}),
        )
        .await;
    assert_eq!(v["resolved_session_id"], json!(tmux_ids[1]), "{v}");
    let v = hub
        .call(
            Method::POST,
            &format!("/v1/pty/sessions/{}/talk", tmux_ids[2]),
            json!({"command": "echo alive"}),
        )
        .await;
    assert_eq!(v["output"], "alive\n", "{v}");
    // New ids never collide with restored ones; the lifecycle log has the whole story.
    let (_, v) = new_pty_session(&hub).await;
    assert!(!before.iter().any(|s| s["id"] == v["session_id"]), "{v}");
    let log = std::fs::read_to_string(data.join("events.jsonl")).unwrap();
    for kind in ["session_created", "ownership_changed", "session_restored"] {
        assert!(
            log.contains(&format!("\"type\":\"{kind}\"")),
            "{kind} missing:\n{log}"
        );
    }
    // A second restart, this one graceful, changes nothing.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(hub.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = hub.child.wait();
    let hub = serve(&data, &socket, &[]).await;
    let again = sessions(&hub).await;
    assert_eq!(again.len(), 5, "{again:?}");
    assert_eq!(
        again.iter().filter(|s| s["alive"] == true).count(),
        3,
        "{again:?}"
    );
}

/// A read-only directory: a read-only tmpfs mount when we may mount, else chmod 555 when
/// that stops us (it does not stop root). None when neither works here.
struct ReadOnlyDir(std::path::PathBuf, bool);

impl ReadOnlyDir {
    fn make(path: &Path) -> Option<Self> {
        std::fs::create_dir_all(path).ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
            .arg(path)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o555)).ok()?;
        }
        let probe = path.join("probe");
        if std::fs::write(&probe, "x").is_ok() {
            let _ = std::fs::remove_file(&probe);
            return None;
        }
        Some(ReadOnlyDir(path.to_path_buf(), mounted))
    }
}

impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_state_files_and_a_read_only_data_dir_do_not_stop_the_hub() {
    let scratch = Scratch::new("persist");
    let socket = scratch.socket.clone();

    // A corrupt registry and a cut-short events log; tmux still runs a session.
    tmux(
        &socket,
        &["new-session", "-d", "-s", "survivor", "bash --norc"],
    );
    let data = scratch.join("corrupt");
    data_dir_with(
        &data,
        &[
            (
                "registry.json",
                "{\"schema_version\": 1, \"sessions\": [{\"id\"",
            ),
            (
                "events.jsonl",
                "{\"type\":\"session_created\"}\n{\"type\":\"sess",
            ),
        ],
    );
    let hub = serve(&data, &socket, &[]).await;
    let health = hub_health(&hub).await;
    let warnings = health["persistence"]["startup_warnings"].to_string();
    assert!(
        warnings.contains("set aside") && warnings.contains("not valid JSON"),
        "{health}"
    );
    assert!(warnings.contains("ended mid-line"), "{health}");
    let aside: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("registry.json.unusable-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "the corrupt file is kept aside");
    // Rebuilt from tmux: the session tmux still runs is adopted and usable.
    let list = sessions(&hub).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["tmux_session"], "survivor");
    let id = list[0]["id"].as_str().unwrap();
    let v = hub.talk(id, "echo rebuilt").await;
    assert_eq!(v["output"], "rebuilt\n", "{v}");
    assert!(
        wait_until(T, || async { registry_has(&data, "survivor") }).await,
        "registry rewritten"
    );
    let text = std::fs::read_to_string(data.join("registry.json")).unwrap();
    assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
    let log = std::fs::read_to_string(data.join("events.jsonl")).unwrap();
    assert!(
        log.contains("\n{\"type\":\"sess\n{"),
        "the cut line is closed off: {log}"
    );
    drop(hub);

    // A registry from a future schema is set aside too, with that reason.
    let future = scratch.join("future");
    data_dir_with(
        &future,
        &[(
            "registry.json",
            "{\"schema_version\": 99, \"sessions\": []}",
        )],
    );
    let hub = serve(&future, &socket, &[]).await;
    let health = hub_health(&hub).await;
    assert!(
        health["persistence"]["startup_warnings"]
            .to_string()
            .contains("newer than this hub"),
        "{health}"
    );
    drop(hub);

    // A read-only data dir: the hub serves, and says what it cannot write.
    let Some(ro) = ReadOnlyDir::make(&scratch.join("ro")) else {
        eprintln!("SKIPPED read-only part: cannot make a read-only directory here");
        return;
    };
    let _tmux_ro = TmuxServerGuard(format!("{socket}-ro"));
    // By default nothing that would go unaudited runs (#6: fail closed), with a clear error,
    // while everything that only reads is served.
    let hub = serve_with(&ro.0, &format!("{socket}-ro"), &[], &[RO_TOKEN]).await;
    let (status, v) = new_pty_session(&hub).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (503, Some("AUDIT_UNAVAILABLE")),
        "{v}"
    );
    let (status, v) = hub
        .call_status(Method::GET, "/v1/pty/sessions", json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    drop(hub);
    // With the audit log allowed to fail open, sessions start and run.
    let config = scratch.join("fail-open.toml");
    std::fs::write(&config, "[audit]\nfail_open = true\n").unwrap();
    let hub = serve_with(
        &ro.0,
        &format!("{socket}-ro"),
        &["--config", config.to_str().unwrap()],
        &[RO_TOKEN],
    )
    .await;
    let (_, v) = new_pty_session(&hub).await;
    let id = v["session_id"]
        .as_str()
        .expect("sessions still start")
        .to_string();
    let v = hub.talk(&id, "echo still-serving").await;
    assert_eq!(v["output"], "still-serving\n", "{v}");
    let said = wait_until(T, || async {
        hub_health(&hub).await["persistence"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot write the registry"))
    })
    .await;
    assert!(said, "{}", hub_health(&hub).await);
    let h = hub_health(&hub).await;
    assert!(
        h["persistence"]["startup_warnings"]
            .to_string()
            .contains("cannot open the events log"),
        "{h}"
    );
    drop(hub);
    drop(ro);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_external_sessions_come_back_and_are_health_checked() {
    let scratch = Scratch::new("persist");
    let (mut remote, _remote_tmux, [worker_a, _]) =
        crate::bridge::remote_hub(scratch.dir.path()).await;
    let (data, socket) = (scratch.join("local"), scratch.socket.clone());
    let mut hub = serve(&data, &socket, &[]).await;
    let v = hub
        .call(
            Method::POST,
            "/v1/pty/register",
            json!({"session_id": worker_a, "bridge_url": remote.base, "label": "Remote A",
                   "bridge_token": remote.owner_token,
                   "owner_agent_id": "remote-a", "owner_role": "leader"}),
        )
        .await;
    assert_eq!(v["created"], true, "{v}");
    assert!(wait_until(T, || async { registry_has(&data, "Remote A") }).await);
    hub.kill9();

    let hub2 = serve(&data, &socket, &[]).await;
    let path = format!("/v1/pty/sessions/{worker_a}");
    let healthy = wait_until(T, || async {
        hub2.call(Method::GET, &path, json!({})).await["session"]["external"]["healthy"] == true
    })
    .await;
    let s = hub2.call(Method::GET, &path, json!({})).await["session"].clone();
    assert!(healthy, "{s}");
    assert_eq!(
        (s["label"].as_str(), s["owner_role"].as_str()),
        (Some("Remote A"), Some("leader"))
    );
    assert_eq!(s["external"]["bridge_url"], json!(remote.base));
    let v = hub2
        .call(
            Method::POST,
            &format!("{path}/talk"),
            json!({"command": "echo across-restart"}),
        )
        .await;
    assert_eq!(v["output"], "across-restart\n", "{v}");
    drop(hub2);

    // With the bridge down at restart, the session is still listed, marked unhealthy.
    remote.kill9();
    hub = serve(&data, &socket, &[]).await;
    let unhealthy = wait_until(T, || async {
        let s = hub.call(Method::GET, &path, json!({})).await["session"].clone();
        s["external"]["healthy"] == false && s["external"]["last_error"].is_string()
    })
    .await;
    assert!(
        unhealthy,
        "{}",
        hub.call(Method::GET, &path, json!({})).await
    );
}

/// Two hubs on one machine, each with its own data dir and the default tmux socket, have a tmux
/// server each: a restarted hub finds its own tmux sessions again and never adopts the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubs_on_one_machine_keep_to_their_own_tmux_server() {
    let dir = tempfile::tempdir().unwrap();
    let start = |name: &str| {
        let data = dir.path().join(name);
        async move {
            let listen = format!("127.0.0.1:{}", free_port());
            let args = [
                "--listen",
                listen.as_str(),
                "--data-dir",
                data.to_str().unwrap(),
                "--shell",
                "bash",
            ];
            let hub = HubProcess::spawn(&args, &format!("http://{listen}"), &[("PS1", "$ ")]).await;
            let id = std::fs::read_to_string(data.join("hub_id")).expect("hub_id written");
            (hub, format!("agent-hub-{}", id.trim()))
        }
    };
    let (mut a, a_socket) = start("a").await;
    let _a_tmux = TmuxServerGuard(a_socket.clone());
    let (mut b, b_socket) = start("b").await;
    let _b_tmux = TmuxServerGuard(b_socket.clone());
    assert_ne!(a_socket, b_socket, "each hub has a socket of its own");

    let a_session = new_tmux_session(&a, json!({"label": "a-1"})).await;
    let listed = tmux(&a_socket, &["list-sessions", "-F", "#{session_name}"]);
    assert!(
        !listed.trim().is_empty(),
        "the session is on hub a's tmux server ({a_socket})"
    );

    // Hub b restarts: it adopts what its own tmux server has, which is nothing of a's.
    b.kill9();
    let (b, _) = start("b").await;
    let ids: Vec<Value> = sessions(&b).await.iter().map(|s| s["id"].clone()).collect();
    assert!(
        ids.is_empty(),
        "hub b adopted sessions it never made: {ids:?}"
    );

    // Hub a restarts and finds its session again.
    a.kill9();
    let (a, _) = start("a").await;
    let back = wait_until(T, || async {
        sessions(&a)
            .await
            .iter()
            .any(|s| s["id"] == a_session.as_str())
    })
    .await;
    assert!(
        back,
        "hub a did not find its own tmux session after a restart"
    );
}

/// The session `id` of a restarted hub; panics when it did not come back.
async fn session_back(hub: &HubProcess, id: &str) -> Value {
    let back = sessions(hub).await;
    back.iter()
        .find(|s| s["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} not back: {back:?}"))
}

/// What the API acknowledged survives a SIGKILL that comes right after the reply: a tmux
/// session's creation with its owner identity and label, and an ownership change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_changes_survive_a_sigkill_right_after_the_reply() {
    let scratch = Scratch::new("durable");
    let (data, socket) = (scratch.join("data"), scratch.socket.clone());
    let mut hub = serve(&data, &socket, &[]).await;
    let created = new_tmux_session(
        &hub,
        json!({"owner_agent_id": "worker-9", "owner_role": "worker", "label": "Durable"}),
    )
    .await;
    hub.kill9();

    let mut hub = serve(&data, &socket, &[]).await;
    let s = session_back(&hub, &created).await;
    assert_eq!(
        (s["owner_agent_id"].as_str(), s["label"].as_str()),
        (Some("worker-9"), Some("Durable")),
        "{s}"
    );
    let (status, v) = hub
        .call_status(
            Method::POST,
            "/v1/pty/update-ownership",
            json!({"session_id": created, "owner_session_id": "leader-3", "label": "Moved"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    hub.kill9();

    let hub = serve(&data, &socket, &[]).await;
    let s = session_back(&hub, &created).await;
    assert_eq!(
        (s["owner_session_id"].as_str(), s["label"].as_str()),
        (Some("leader-3"), Some("Moved")),
        "{s}"
    );
}

/// A graceful stop writes the registry's last word before the hub lets go of its tmux clients.
/// A client the hub detaches ends its reader with "tmux session closed" although the tmux
/// session lives on; on a busy machine those records landed before the daemon's last save, so
/// the next start wrote live sessions off (1 or 2 of 3 under two CPU hogs). Here the busy
/// machine's order is made on purpose: the detached session's record is awaited, then the
/// daemon's last save runs, and the file must still say the session is alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_never_saves_a_live_tmux_session_as_closed() {
    use agent_hub::daemon::Components;
    let components = Components {
        persistence: true,
        ..Components::default()
    };
    let hub = crate::support::TestHub::start_components(components, |_| {}).await;
    let _tmux = TmuxServerGuard(hub.tmux_socket.clone());
    let id = hub.create("tmux").await;
    hub.wait_output(&id, "$", T).await;

    // What `Daemon::shutdown` does, with the readers of the detached clients done first.
    hub.hub.shutdown().await;
    let session = hub.hub.get(&id).expect("listed");
    let exit = session
        .output()
        .wait_exit(T)
        .await
        .expect("the detach is recorded");
    assert_eq!(exit.reason, "tmux session closed");
    hub.hub.persistence().expect("persistence").flush().await;

    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(hub.data_dir().join("registry.json")).unwrap(),
    )
    .unwrap();
    let saved = file["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == json!(id))
        .unwrap_or_else(|| panic!("{id} not saved: {file}"));
    assert!(
        saved["exit"].is_null(),
        "a live session saved as ended: {saved}"
    );
    assert!(
        !tmux(&hub.tmux_socket, &["ls"]).trim().is_empty(),
        "the tmux session itself must live on"
    );
}
