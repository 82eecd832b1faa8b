//! The dashboard survives the hub restarting: a real `agent-hub serve` process is stopped and
//! started again on the same port and data dir while a page is open; the fleet view and an
//! open terminal say so while the hub is away, reconnect by themselves, and the terminal shows
//! what the session prints after the restart.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::browser;
use crate::dashboard::{page_screen, wait_terminal_live};
use crate::hub_process::{free_port, HubProcess};
use crate::support::{wait_until, TmuxServerGuard};

const T: Duration = Duration::from_secs(20);

fn page_live() -> &'static str {
    "return document.body.dataset.live"
}

fn terminal_status(id: &str) -> String {
    format!("return window.agentHub.terminals.get('{id}')?.el.dataset.status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_reconnects_by_itself_when_the_hub_restarts() {
    let b = browser!();
    let data = tempfile::tempdir().unwrap();
    let socket = format!("ah-test-dash-restart-{}", std::process::id());
    let _tmux = TmuxServerGuard(socket.clone());
    let listen = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{listen}");
    let data_dir = data.path().to_str().unwrap().to_string();
    let args = [
        "--listen",
        listen.as_str(),
        "--data-dir",
        data_dir.as_str(),
        "--tmux-socket",
        socket.as_str(),
    ];
    let env = [("PS1", "$ ")];
    let mut hub = HubProcess::spawn(&args, &base, &env).await;
    let created = hub
        .call(
            Method::POST,
            "/v1/pty/sessions",
            json!({"backend": "tmux", "shell": "bash", "args": ["--norc", "--noprofile"], "label": "survivor"}),
        )
        .await;
    let id = created["session_id"]
        .as_str()
        .expect("session_id")
        .to_string();
    hub.talk(&id, "echo before-restart").await;

    b.sign_in(&base, &hub.owner_token).await;
    b.goto(&format!("{base}/#/grid/{id}")).await;
    b.wait_js("page live", &format!("{} === 'yes'", page_live()), T)
        .await;
    wait_terminal_live(&b, &id).await;

    hub.kill9();
    b.wait_js(
        "page and terminal notice the hub is gone",
        &format!(
            "const t = (() => {{ {} }})(); return document.body.dataset.live === 'no' && t === 'reconnecting'",
            terminal_status(&id)
        ),
        T,
    )
    .await;

    let hub = HubProcess::spawn(&args, &base, &env).await;
    let listed = hub.call(Method::GET, "/v1/pty/sessions", json!({})).await;
    assert!(
        listed["sessions"]
            .as_array()
            .is_some_and(|l| l.iter().any(|s| s["id"] == id.as_str())),
        "the session {id} is not back after the restart: {listed}"
    );
    b.wait_js("page live again", &format!("{} === 'yes'", page_live()), T)
        .await;
    wait_terminal_live(&b, &id).await;
    let reply = hub.talk(&id, "echo after-restart").await;
    assert_eq!(reply["output"], "after-restart\n", "{reply}");
    let shown = wait_until(T, || async {
        page_screen(&b, &id)
            .await
            .iter()
            .any(|l| l.contains("after-restart") && !l.contains("echo"))
    })
    .await;
    assert!(
        shown,
        "the reconnected terminal does not show the output printed after the restart: {:?}",
        page_screen(&b, &id).await
    );
    // The fleet view lists the session again under its label.
    b.goto(&format!("{base}/")).await;
    b.wait_js(
        "the session is listed after the restart",
        &format!("return !!document.querySelector('[data-unit=\"{id}\"]')"),
        T,
    )
    .await;
    b.screenshot("dashboard-after-restart").await;
}
