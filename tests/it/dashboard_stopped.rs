//! A container agent that is not running, in the dashboard (issue 40): a click on its row (or
//! Enter on it) shows its last screen, read-only and marked as stopped, with its start control;
//! starting it from there opens its live terminal once it is up. An agent that never ran says
//! so, with its start control. Headless Chromium on a hub with real containers; screenshots go
//! to `target/browser-artifacts/`. The last screen outlives a hub restart (the routes the panel
//! reads, on a `serve` process restarted on its data dir).

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::browser;
use crate::browser_support::Browser;
use crate::dashboard::{open_fleet, wait_row_state, wait_terminal_live, T};
use crate::docker_support::{agent_toml, hub_with_agents, ConfiguredHub};
use crate::hub_process::HubProcess;
use crate::support::{wait_until, TestHub};

const ARROW_DOWN: &str = "\u{E015}";
const ENTER: &str = "\u{E007}";
const ESCAPE: &str = "\u{E00C}";
/// An agent's start (a container, its terminal, the ready pattern) takes seconds, more on a
/// busy machine.
const START: Duration = Duration::from_secs(60);

/// The agent panel of `agent`, as a CSS selector.
fn panel(agent: &str) -> String {
    format!("#agent-panel .term-panel[data-agent=\"{agent}\"]")
}

/// Starts `agent` through the API; returns its session id.
async fn start(hub: &TestHub, agent: &str) -> String {
    let (status, v) = hub
        .post(&format!("/v1/agents/{agent}/start"), json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    v["agent"]["session_id"].as_str().unwrap().to_string()
}

/// Waits until the hub's screen of session `id` shows `text`.
async fn wait_hub_screen(hub: &TestHub, id: &str, text: &str) {
    let shown = wait_until(T, || async {
        let (_, v) = hub
            .post(
                &format!("/v1/pty/sessions/{id}/term_read"),
                json!({ "mode": "viewport" }),
            )
            .await;
        v["text"].as_str().is_some_and(|t| t.contains(text))
    })
    .await;
    assert!(shown, "session {id} never showed {text:?}");
}

/// Waits until the page's terminal of session `id` shows a line containing `text`.
async fn wait_page_screen(b: &Browser, id: &str, text: &str) {
    b.wait_js(
        &format!("terminal {id} shows {text:?}"),
        &format!(
            "return window.agentHub.terminals.get('{id}')?.screenLines().some(l => l.includes({}))",
            json!(text)
        ),
        T,
    )
    .await;
}

/// Starts counting the page's CSP violations (`window.cspViolations`).
async fn count_csp_violations(b: &Browser) {
    b.js(
        "window.cspViolations = []; document.addEventListener('securitypolicyviolation', e => window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`)); return 1",
        json!([]),
    )
    .await;
}

/// The text of the element `css` selects, or null.
async fn text_of(b: &Browser, css: &str) -> Value {
    b.js(
        "return document.querySelector(arguments[0])?.textContent ?? null",
        json!([css]),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_agent_shows_its_last_screen_and_starts_from_there() {
    crate::require_docker!();
    let b = browser!();
    let agents = format!("{}{}", agent_toml("web-s", ""), agent_toml("web-x", ""));
    let (hub, _guard) = hub_with_agents(&agents).await;

    // web-s ran, printed a marker and was stopped; web-x never ran.
    let old = start(&hub, "web-s").await;
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{old}/send_line"),
            json!({ "data": "echo last-words-$((6*7))" }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    wait_hub_screen(&hub, &old, "last-words-42").await;
    let (status, v) = hub.post("/v1/agents/web-s/stop", json!({})).await;
    assert_eq!(status, 200, "{v}");

    b.sign_in(&hub.base, &hub.owner_token).await;
    open_fleet(&b, &hub).await;
    wait_row_state(&b, "web-s", "exited").await;
    wait_row_state(&b, "web-x", "exited").await;
    count_csp_violations(&b).await;

    // A click on the stopped agent's row: its last screen, read-only, marked as stopped, with
    // why and its start control.
    b.click("tr[data-unit=\"web-s\"] td.name").await;
    let start_button = format!("{} .stopped-note button[data-op=\"start\"]", panel("web-s"));
    b.wait_js(
        "web-s's panel with its start control",
        &format!("return !!document.querySelector({})", json!(start_button)),
        T,
    )
    .await;
    wait_page_screen(&b, &old, "last-words-42").await;
    // xterm.js draws its rows at the next animation frame after the buffer holds the text.
    let rows = format!("{} .term-body .xterm-rows", panel("web-s"));
    b.wait_js(
        "the last screen drawn in the panel",
        &format!(
            "return !!document.querySelector({})?.textContent.includes('last-words-42')",
            json!(rows)
        ),
        T,
    )
    .await;
    let hash = b.js("return location.hash", json!([])).await;
    assert_eq!(hash, json!("#/agent/web-s"));
    let read_only = b
        .js(
            "return window.agentHub.terminals.get(arguments[0]).writable",
            json!([old]),
        )
        .await;
    assert_eq!(read_only, json!(false), "the last screen is read-only");
    let state = b
        .js(
            "return document.querySelector(arguments[0])?.dataset.state",
            json!([panel("web-s")]),
        )
        .await;
    assert_eq!(state, json!("stopped"));
    let note = text_of(&b, &format!("{} .stopped-note", panel("web-s"))).await;
    let note = note.as_str().unwrap_or_default().to_string();
    assert!(note.starts_with("stopped"), "{note}");
    assert!(note.contains("last screen, read-only"), "{note}");
    b.screenshot("stopped-agent").await;

    // Start from there: once it is up, the panel is its live terminal (a new session).
    b.click(&start_button).await;
    let hash = b
        .wait_js(
            "web-s's live terminal",
            "return location.hash.startsWith('#/grid/') && location.hash",
            START,
        )
        .await;
    let (_, v) = hub.get("/v1/agents/web-s").await;
    assert_eq!(v["agent"]["status"], "running", "{v}");
    let new = v["agent"]["session_id"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    assert_eq!(hash, json!(format!("#/grid/{new}")));
    wait_terminal_live(&b, &new).await;
    let writable = b
        .js(
            "return window.agentHub.terminals.get(arguments[0]).writable",
            json!([new]),
        )
        .await;
    assert_eq!(writable, json!(true), "the live terminal takes typing");
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{new}/send_line"),
            json!({ "data": "echo back-$((6*7))" }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    wait_page_screen(&b, &new, "back-42").await;
    b.screenshot("stopped-agent-started").await;

    // The agent that never ran (selected with the keys, opened with Enter) says so, with its
    // start control.
    b.js("document.activeElement.blur(); return 1", json!([]))
        .await;
    b.press(ESCAPE).await;
    b.wait_js(
        "back on the fleet",
        "return location.hash === '#/' && !document.getElementById('fleet').hidden",
        T,
    )
    .await;
    b.js("window.agentHub.app.fleet.select(''); return 1", json!([]))
        .await;
    b.press(&format!("{ARROW_DOWN}{ARROW_DOWN}")).await;
    let selected = b
        .js(
            "return document.querySelector('tr.unit.selected')?.dataset.unit",
            json!([]),
        )
        .await;
    assert_eq!(selected, json!("web-x"));
    b.press(ENTER).await;
    let never = b
        .wait_js(
            "web-x's panel",
            &format!(
                "return document.querySelector({})?.textContent",
                json!(format!("{} .term-body", panel("web-x")))
            ),
            T,
        )
        .await;
    assert_eq!(
        never,
        json!("web-x has never run: there is no screen to show.")
    );
    let ops = b
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(b => b.dataset.op)",
            json!([format!("{} button[data-op]", panel("web-x"))]),
        )
        .await;
    assert_eq!(ops, json!(["start"]));
    b.screenshot("never-ran-agent").await;

    let violations = b.js("return window.cspViolations", json!([])).await;
    assert_eq!(violations, json!([]), "the page's CSP holds");
}

/// Whether the hub's `registry.json` in `data` records the session `id` as ended.
fn saved_as_ended(data: &std::path::Path, id: &str) -> bool {
    let text = std::fs::read_to_string(data.join("registry.json")).unwrap_or_default();
    let file: Value = serde_json::from_str(&text).unwrap_or_default();
    let sessions = file["sessions"].as_array().cloned().unwrap_or_default();
    sessions
        .iter()
        .any(|s| s["id"] == id && !s["exit"].is_null())
}

/// What the panel of the stopped agent `agent` reads after a restart: the agent names its
/// ended session `old` again (once the Docker sync found its container stopped), the session is
/// listed ended, and its screen and stream show `marker`.
async fn last_screen_is_back(hub: &HubProcess, agent: &str, old: &str, marker: &str) {
    let named = wait_until(T, || async {
        let v = hub
            .call(Method::GET, &format!("/v1/agents/{agent}"), json!({}))
            .await;
        v["agent"]["session_id"] == old
    })
    .await;
    let v = hub
        .call(Method::GET, &format!("/v1/agents/{agent}"), json!({}))
        .await;
    assert!(named, "the agent does not name its last session again: {v}");
    let a = &v["agent"];
    assert_eq!(
        (&a["status"], &a["pty_attached"]),
        (&json!("stopped"), &json!(false)),
        "{v}"
    );
    let v = hub.call(Method::GET, "/v1/pty/sessions", json!({})).await;
    let listed = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == old);
    let listed = listed.unwrap_or_else(|| panic!("{old} is not listed: {v}"));
    assert_eq!(listed["alive"], false, "never alive again: {listed}");
    let v = hub
        .call(
            Method::POST,
            &format!("/v1/pty/sessions/{old}/term_read"),
            json!({ "mode": "viewport" }),
        )
        .await;
    let text = v["text"].as_str().unwrap_or_default();
    assert!(text.contains(marker), "its screen: {v}");
    // The panel's terminal reads the session's stream: it paints the same screen.
    let url = format!(
        "{}/v1/pty/sessions/{old}/stream",
        hub.base.replace("http://", "ws://")
    );
    let request = crate::support::ws_request(&url, &hub.owner_token);
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut painted = Vec::new();
    let deadline = tokio::time::Instant::now() + T;
    while !String::from_utf8_lossy(&painted).contains(marker) {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => painted.extend_from_slice(&b),
            Ok(Some(Ok(_))) => {}
            other => panic!(
                "the stream ended without {marker:?} ({other:?}): {:?}",
                String::from_utf8_lossy(&painted)
            ),
        }
    }
}

/// A stopped agent's last screen (what its panel shows) outlives the hub: after a graceful
/// restart and after a SIGKILL, the agent names its ended session again and the session shows
/// what it showed, never alive again; the agent's next start makes a new session in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_agents_last_screen_survives_hub_restarts() {
    crate::require_docker!();
    let hub = ConfiguredHub::new();
    hub.write_config(&format!("snapshots = true\n{}", agent_toml("last", "")));
    let mut process = hub.spawn().await;

    let v = process
        .call(Method::POST, "/v1/agents/last/start", json!({}))
        .await;
    let old = v["agent"]["session_id"]
        .as_str()
        .expect("started")
        .to_string();
    process
        .call(
            Method::POST,
            &format!("/v1/pty/sessions/{old}/send_line"),
            json!({ "data": "echo last-words-$((6*7))" }),
        )
        .await;
    let shown = wait_until(T, || async {
        let v = process
            .call(
                Method::POST,
                &format!("/v1/pty/sessions/{old}/term_read"),
                json!({ "mode": "viewport" }),
            )
            .await;
        v["text"]
            .as_str()
            .is_some_and(|t| t.contains("last-words-42"))
    })
    .await;
    assert!(shown, "the agent never printed its marker");
    let v = process
        .call(Method::POST, "/v1/agents/last/stop", json!({}))
        .await;
    assert_eq!(v["agent"]["status"], "stopped", "{v}");

    // A graceful restart.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(process.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = process.child.wait();
    let mut process = hub.spawn().await;
    last_screen_is_back(&process, "last", &old, "last-words-42").await;

    // A SIGKILL, once the restarted hub has written its registry and snapshot again.
    let snapshot = hub.data.join("snapshots").join(format!("{old}.bin"));
    let written = wait_until(T, || async {
        saved_as_ended(&hub.data, &old)
            && std::fs::read_to_string(&snapshot).is_ok_and(|t| t.contains("last-words-42"))
    })
    .await;
    assert!(written, "the ended session is not on disk");
    process.kill9();
    let process = hub.spawn().await;
    last_screen_is_back(&process, "last", &old, "last-words-42").await;

    // Its next start: a new session, the old one gone.
    let v = process
        .call(Method::POST, "/v1/agents/last/start", json!({}))
        .await;
    let new = v["agent"]["session_id"].as_str().expect("started");
    assert_ne!(new, old);
    let (status, _) = process
        .call_status(Method::GET, &format!("/v1/pty/sessions/{old}"), json!({}))
        .await;
    assert_eq!(
        status, 404,
        "the last screen is replaced by the new session"
    );
    process
        .call(Method::POST, "/v1/agents/last/stop", json!({}))
        .await;
}
