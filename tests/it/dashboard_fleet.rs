//! The dashboard for operators (#32): the preview stream (`GET /v1/previews`) on its own (who
//! may open it, what it sends, redaction), and in headless Chromium: rows with live previews
//! that open their terminal (titled by label), the keyboard, the grid that fills itself with
//! the blocked and working agents, a notification, title and favicon count for a blocked agent
//! whose click opens it with its question, the audit tail as sentences, and the 100-session
//! page measured (time to live, longest main-thread task while 20 sessions print, the hub's CPU
//! for the preview stream). Screenshots go to `target/browser-artifacts/`.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::auth::{hub_with_tokens, OBSERVER, OPERATOR};
use crate::browser;
use crate::browser_support::Browser;
use crate::dashboard::{open_fleet, row_state, wait_row_state, wait_terminal_live, T};
use crate::policy_support::*;
use crate::support::{ws_request, TestHub, Ws};

const ARROW_DOWN: &str = "\u{E015}";
const ENTER: &str = "\u{E007}";
const ESCAPE: &str = "\u{E00C}";

/// Opens `/v1/previews` with `token`.
async fn previews(hub: &TestHub, token: &str, query: &str) -> Ws {
    let url = format!(
        "{}/v1/previews{query}",
        hub.base.replace("http://", "ws://")
    );
    tokio_tungstenite::connect_async(ws_request(&url, token))
        .await
        .expect("previews connect")
        .0
}

/// Reads `previews` frames until one holds a preview of `id` for which `wanted` holds; returns
/// that preview's lines. Panics after `within`.
async fn next_preview(ws: &mut Ws, id: &str, wanted: impl Fn(&[String]) -> bool) -> Vec<String> {
    tokio::time::timeout(T, async {
        loop {
            let msg = ws.next().await.expect("a frame").expect("a good frame");
            let Ok(text) = msg.to_text() else { continue };
            let frame: Value = serde_json::from_str(text).expect("JSON frame");
            assert_eq!(frame["type"], "previews", "{frame}");
            let Some(lines) = frame["previews"][id].as_array() else {
                continue;
            };
            let lines: Vec<String> = lines
                .iter()
                .map(|l| l.as_str().unwrap().to_string())
                .collect();
            if wanted(&lines) {
                return lines;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no preview of {id} as wanted within {T:?}"))
}

/// The session ids of the first `previews` frame.
async fn first_frame_ids(ws: &mut Ws) -> Vec<String> {
    let msg = tokio::time::timeout(T, ws.next())
        .await
        .expect("a first frame")
        .unwrap()
        .unwrap();
    let frame: Value = serde_json::from_str(msg.to_text().unwrap()).unwrap();
    let mut ids: Vec<String> = frame["previews"]
        .as_object()
        .expect("previews")
        .keys()
        .cloned()
        .collect();
    ids.sort();
    ids
}

/// `method path` (with `body` unless null) as the operator; the reply.
async fn as_operator(hub: &TestHub, method: &str, path: &str, body: Value) -> Value {
    let body = (!body.is_null()).then_some(body);
    let (status, v) = crate::auth::call_as(hub, method, path, body, Some(OPERATOR), None).await;
    assert_eq!(status, 200, "{method} {path}: {v}");
    v
}

/// The observer's `term_read` of the last 3 lines of session `id`.
async fn tail_as_observer(hub: &TestHub, id: &str) -> Value {
    let path = format!("/v1/pty/sessions/{id}/term_read");
    let body = json!({ "mode": "tail", "max_lines": 3 });
    crate::auth::call_as(hub, "POST", &path, Some(body), Some(OBSERVER), None)
        .await
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_stream_is_authorised_scoped_live_and_redacted() {
    let hub = hub_with_tokens().await;
    let (status, v) = crate::auth::call_as(
        &hub,
        "POST",
        "/v1/pty/sessions",
        Some(json!({ "shell": "bash", "args": ["--norc", "--noprofile"], "label": "worker-1" })),
        Some(OPERATOR),
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let url = format!("{}/v1/previews", hub.base.replace("http://", "ws://"));

    // No token: refused before the upgrade.
    let err = tokio_tungstenite::connect_async(url.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");
    // Out of range: refused.
    let err = tokio_tungstenite::connect_async(ws_request(&format!("{url}?lines=0"), OBSERVER))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("400"), "{err}");

    // An observer may watch; a line printed shows within a second.
    let mut ws = previews(&hub, OBSERVER, "").await;
    let printed = Instant::now();
    as_operator(
        &hub,
        "POST",
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": "echo preview-$((6*7))" }),
    )
    .await;
    let lines = next_preview(&mut ws, &id, |l| l.iter().any(|x| x == "preview-42")).await;
    let shown = printed.elapsed();
    assert!(lines.len() <= 3, "three lines at most: {lines:?}");
    assert!(shown < Duration::from_secs(1), "shown after {shown:?}");
    // As term_read renders it.
    let read = tail_as_observer(&hub, &id).await;
    let tail: Vec<&str> = read["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.last().map(String::as_str), tail.last().copied());

    // A secret printed is redacted, as term_read's reply is.
    as_operator(
        &hub,
        "POST",
        &format!("/v1/pty/sessions/{id}/send_line"),
        json!({ "data": "x=aB3; echo token=ghp_$x$x$x$x$x$x$x$x$x$x$x$x end" }),
    )
    .await;
    let lines = next_preview(&mut ws, &id, |l| l.iter().any(|x| x.starts_with("token="))).await;
    let joined = lines.join("\n");
    assert!(!joined.contains("aB3aB3"), "{joined}");
    assert!(joined.contains("[REDACTED]"), "{joined}");
    let read = tail_as_observer(&hub, &id).await;
    let redacted_line = lines.iter().find(|x| x.starts_with("token=")).unwrap();
    assert!(
        read["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str() == Some(redacted_line.as_str())),
        "the same line as term_read's: {redacted_line} / {read}"
    );

    // A session that ends is sent as removed.
    as_operator(
        &hub,
        "DELETE",
        &format!("/v1/pty/sessions/{id}"),
        Value::Null,
    )
    .await;
    let gone = tokio::time::timeout(T, async {
        loop {
            let msg = ws.next().await.unwrap().unwrap();
            let frame: Value = serde_json::from_str(msg.to_text().unwrap()).unwrap();
            if frame["removed"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x == id.as_str()))
            {
                return;
            }
        }
    })
    .await;
    assert!(gone.is_ok(), "the killed session was not sent as removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_of_an_agent_credential_are_its_teams() {
    let crate::scope::Fleet {
        hub,
        lead,
        w1,
        sessions,
    } = crate::scope::fleet().await;
    // A worker sees its own session; a leader its team's; the owner every session.
    for (token, want) in [
        (&w1, vec!["w1"]),
        (&lead, vec!["lead", "w1", "w2"]),
        (&hub.owner_token, vec!["lead", "w1", "w2", "wb"]),
    ] {
        let mut want: Vec<String> = want.iter().map(|a| sessions[a].clone()).collect();
        want.sort();
        let mut ws = previews(&hub, token, "").await;
        assert_eq!(first_frame_ids(&mut ws).await, want);
    }
    // Output of a session out of sight never reaches the worker.
    let mut ws = previews(&hub, &w1, "").await;
    first_frame_ids(&mut ws).await;
    send_line(&hub, &sessions["wb"], "echo other-team").await;
    send_line(&hub, &sessions["w1"], "echo own-team").await;
    let mut seen = Vec::new();
    let own = tokio::time::timeout(T, async {
        loop {
            let msg = ws.next().await.unwrap().unwrap();
            let frame: Value = serde_json::from_str(msg.to_text().unwrap()).unwrap();
            for key in frame["previews"].as_object().unwrap().keys() {
                seen.push(key.clone());
            }
            if frame["previews"][&sessions["w1"]]
                .as_array()
                .is_some_and(|l| l.iter().any(|x| x == "own-team"))
            {
                return;
            }
        }
    })
    .await;
    assert!(own.is_ok(), "the worker's own output was not previewed");
    assert!(!seen.contains(&sessions["wb"]), "{seen:?}");
}

/// A host shell labelled `label`; its id.
async fn labelled(hub: &TestHub, label: &str) -> String {
    hub.create_with(json!({ "backend": "pty", "label": label }))
        .await
}

/// A hub the page is signed in to, with a host shell labelled `worker-1`; and its id.
async fn hub_with_worker_1(b: &Browser) -> (TestHub, String) {
    let hub = TestHub::start().await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    let id = labelled(&hub, "worker-1").await;
    (hub, id)
}

/// Types `line` into session `id` (and Enter).
async fn send_line(hub: &TestHub, id: &str, line: &str) {
    let (status, v) = hub
        .post(
            &format!("/v1/pty/sessions/{id}/send_line"),
            json!({ "data": line }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

/// Waits until the fleet row of session `id` previews a line that contains `text`.
async fn wait_preview(b: &Browser, id: &str, text: &str) {
    b.wait_js(
        &format!("{id} previews {text:?}"),
        &format!(
            "return (document.querySelector('[data-preview=\"{id}\"]')?.textContent || '').split('\\n').some(l => l.includes({}))",
            json!(text)
        ),
        T,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_show_live_previews_and_open_their_terminal_by_click_and_keyboard() {
    let b = browser!();
    let (hub, id) = hub_with_worker_1(&b).await;
    let other = labelled(&hub, "worker-2").await;
    open_fleet(&b, &hub).await;
    b.wait_js(
        "worker-1 listed",
        &format!("{} !== undefined", row_state(&id)),
        T,
    )
    .await;

    // A line printed shows in the row's preview within a second.
    let printed = Instant::now();
    send_line(&hub, &id, "echo preview-$((6*7))").await;
    wait_preview(&b, &id, "preview-42").await;
    let shown = printed.elapsed();
    eprintln!(
        "figure: a printed line shown in the fleet row's preview {} ms after send_line",
        shown.as_millis()
    );
    assert!(shown < Duration::from_secs(1), "preview after {shown:?}");
    send_line(&hub, &other, "printf 'second %s\\n' a b c").await;
    wait_preview(&b, &other, "second c").await;
    b.screenshot("fleet-previews").await;

    // A click on the row opens the terminal, titled by the label with the id in small print.
    b.click(&format!("tr[data-unit=\"{id}\"] td.name")).await;
    wait_terminal_live(&b, &id).await;
    let hash = b.js("return location.hash", json!([])).await;
    assert_eq!(hash, json!(format!("#/grid/{id}")));
    let title = b
        .js(
            "const t = document.querySelector('.term-panel .term-title .title'); return [t.querySelector('.name').textContent, t.querySelector('.id').textContent]",
            json!([]),
        )
        .await;
    assert_eq!(title, json!(["worker-1", id]));

    // Esc (outside the terminal) goes back to the fleet; `/` focuses the filter; arrows move
    // the selection and Enter opens it.
    b.js("document.activeElement.blur(); return 1", json!([]))
        .await;
    b.press(ESCAPE).await;
    b.wait_js(
        "back on the fleet",
        "return location.hash === '#/' && !document.getElementById('fleet').hidden",
        T,
    )
    .await;
    b.press("/").await;
    let focused = b.js("return document.activeElement.id", json!([])).await;
    assert_eq!(focused, json!("filter-text"));
    b.press(ESCAPE).await;
    let selected = b
        .js(
            "window.agentHub.app.fleet.select(''); return document.querySelectorAll('tr.unit.selected').length",
            json!([]),
        )
        .await;
    assert_eq!(selected, json!(0));
    let rows = b
        .js(
            "return [...document.querySelectorAll('tr.unit')].map(r => r.dataset.session)",
            json!([]),
        )
        .await;
    b.press(&format!("{ARROW_DOWN}{ARROW_DOWN}")).await;
    let selected = b
        .js(
            "return document.querySelector('tr.unit.selected')?.dataset.session",
            json!([]),
        )
        .await;
    assert_eq!(selected, rows[1], "two arrows down select the second row");
    b.press(ENTER).await;
    let second = rows[1].as_str().unwrap();
    wait_terminal_live(&b, second).await;
    let hash = b.js("return location.hash", json!([])).await;
    assert_eq!(hash, json!(format!("#/grid/{second}")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grid_fills_itself_with_blocked_then_working_agents() {
    let b = browser!();
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    let fake = |label: &str| {
        json!({
            "backend": "pty", "shell": "bash", "args": [fake_agent()], "cli_type": "fake",
            "label": label,
        })
    };
    let working = hub.create_with(fake("busy-1")).await;
    let blocked = hub.create_with(fake("asks-1")).await;
    let idle = hub.create_with(fake("idle-1")).await;
    for id in [&working, &blocked, &idle] {
        wait_state(&hub, id, "idle", T).await;
    }
    submit(&hub, &working, "work 60", false).await;
    submit(&hub, &blocked, "ask", false).await;
    wait_state(&hub, &working, "working", T).await;
    wait_state(&hub, &blocked, "blocked", T).await;

    // Nothing ticked: the grid shows the blocked agent, then the working one; not the idle one.
    b.goto(&format!("{}/#/grid", hub.base)).await;
    let panels = b
        .wait_js(
            "the grid filled itself",
            "const p = [...document.querySelectorAll('.term-panel')].map(e => e.dataset.session); return p.length === 2 && p",
            T,
        )
        .await;
    assert_eq!(panels, json!([blocked, working]));
    for id in [&blocked, &working] {
        wait_terminal_live(&b, id).await;
    }
    let titles = b
        .js(
            "return [...document.querySelectorAll('.term-panel .title .name')].map(e => e.textContent)",
            json!([]),
        )
        .await;
    assert_eq!(titles, json!(["asks-1", "busy-1"]));
    // The blocked agent's panel carries its question and answers.
    b.wait_js(
        "the question above the blocked terminal",
        &format!("return document.querySelector('.term-panel[data-session=\"{blocked}\"] .term-info button.choice') !== null"),
        T,
    )
    .await;
    b.screenshot("grid-busy").await;

    // Ticking still works: the ticked idle agent's grid.
    open_fleet(&b, &hub).await;
    b.click(&format!("tr[data-unit=\"{idle}\"] input[type=checkbox]"))
        .await;
    b.click("#open-grid").await;
    wait_terminal_live(&b, &idle).await;
    let panels = b
        .js(
            "return [...document.querySelectorAll('.term-panel')].map(e => e.dataset.session)",
            json!([]),
        )
        .await;
    assert_eq!(panels, json!([idle]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_agent_is_told_and_its_notification_opens_its_question() {
    let b = browser!();
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    // The person allowed notifications (granted through the DevTools protocol).
    b.cdp(
        "Browser.grantPermissions",
        json!({ "origin": hub.base, "permissions": ["notifications"] }),
    )
    .await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    let id = hub
        .create_with(json!({
            "backend": "pty", "shell": "bash", "args": [fake_agent()], "cli_type": "fake",
            "label": "fake-1",
        }))
        .await;
    wait_state(&hub, &id, "idle", T).await;
    open_fleet(&b, &hub).await;
    wait_row_state(&b, &id, "idle").await;
    let permission = b
        .js(
            "return [Notification.permission, document.getElementById('notify').hidden, document.title]",
            json!([]),
        )
        .await;
    assert_eq!(
        permission,
        json!(["granted", true, "agent-hub"]),
        "allowed: no button to ask"
    );

    submit(&hub, &id, "ask", false).await;
    let told = b
        .wait_js(
            "a notification",
            "const n = window.agentHub.notifications[0]; return n && [n.title, n.body]",
            T,
        )
        .await;
    assert_eq!(
        told,
        json!(["fake-1 is blocked", "Allow write to main.rs? [y/n]"])
    );
    let counted = b
        .js(
            "const f = document.getElementById('favicon'); return [document.title, f.dataset.blocked, f.href.startsWith('data:image/png')]",
            json!([]),
        )
        .await;
    assert_eq!(counted, json!(["(1) agent-hub", "1", true]));

    // The notification's click opens that agent with its question and the answers.
    b.js(
        "window.agentHub.notifications[0].onclick(); return 1",
        json!([]),
    )
    .await;
    wait_terminal_live(&b, &id).await;
    let question = b
        .wait_js(
            "the question in the agent's panel",
            &format!("return document.querySelector('.term-panel[data-session=\"{id}\"] .term-info')?.innerText"),
            T,
        )
        .await;
    let question = question.as_str().unwrap();
    assert!(
        question.contains("Allow write to main.rs? [y/n]") && question.contains("yes"),
        "{question}"
    );
    b.screenshot("blocked-agent").await;
    b.click(&format!(
        ".term-panel[data-session=\"{id}\"] .term-info button.choice[data-keys=\"y Enter\"]"
    ))
    .await;
    hub.wait_output(&id, "answered: y", T).await;
    b.wait_js(
        "the count gone",
        "return document.title === 'agent-hub' && document.getElementById('favicon').dataset.blocked === '0'",
        T,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_tail_tells_who_did_what_to_which_agent() {
    let b = browser!();
    let (hub, id) = hub_with_worker_1(&b).await;
    open_fleet(&b, &hub).await;
    send_line(&hub, &id, "echo audited").await;
    let said = b
        .wait_js(
            "a sentence in the audit tail",
            "return [...document.querySelectorAll('#audit li[data-action=\"send_line\"]')].map(l => l.textContent)[0]",
            T,
        )
        .await;
    let said = said.as_str().unwrap();
    let time =
        regex::Regex::new(r"^\d\d:\d\d:\d\d owner sent a line to worker-1: echo audited$").unwrap();
    assert!(time.is_match(said), "{said}");
    // The time's first digit is inside the panel, not cut at its left edge.
    let inside = b
        .js(
            "const li = document.querySelector('#audit li'); const t = li.querySelector('time'); return t.getBoundingClientRect().left >= li.closest('.panel').getBoundingClientRect().left + 4",
            json!([]),
        )
        .await;
    assert_eq!(inside, json!(true));
    b.screenshot("audit-tail").await;
}

/// The page is live with 100 rows, each with its preview.
const LIVE_100: &str = "return document.body.dataset.live === 'yes' && document.querySelectorAll('tr[data-unit]').length === 100 && [...document.querySelectorAll('pre.preview')].filter(p => p.textContent !== '').length === 100";

/// CPU seconds this process (the in-process hub, and the test's own small part) has used.
fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    let hz = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(100.0);
    ticks / hz
}

/// Measured: 100 host sessions on the fleet page with previews: time to drawn and live, the
/// longest main-thread task while 20 of them print, and the hub's CPU for the preview stream
/// (the same printing with and without the page open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measured_fleet_page_with_100_sessions_and_previews() {
    const N: usize = 100;
    const PRINTING: usize = 20;
    const WINDOW: Duration = Duration::from_secs(5);
    // Preview sockets at once in the third window: each renders for itself, so their cost
    // stands out of the measurement's noise.
    const SOCKETS: usize = 10;
    let b = browser!();
    let hub = TestHub::start().await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    let mut ids = Vec::new();
    for i in 0..N {
        ids.push(labelled(&hub, &format!("agent-{i:03}")).await);
    }
    for id in &ids {
        send_line(&hub, id, &format!("echo ready-{}", &id[4..])).await;
    }
    // Long tasks are observed from the page's first script on (the observer is installed
    // before any of the page's own scripts run).
    b.cdp(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": "window.__long = []; new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push([e.startTime, e.duration]); }).observe({ type: 'longtask', buffered: true });" }),
    )
    .await;
    // Twice: a cold browser, then a reload.
    let mut live = Vec::new();
    for _ in 0..2 {
        let started = Instant::now();
        b.goto(&format!("{}/", hub.base)).await;
        b.wait_js("100 rows with their previews, live", LIVE_100, T)
            .await;
        live.push(started.elapsed());
    }
    let load_long = b
        .js(
            "return window.__long.reduce((m, e) => Math.max(m, e[1]), 0)",
            json!([]),
        )
        .await;
    let render_stats = b
        .js("return window.agentHub.app.fleet.stats", json!([]))
        .await;

    // 20 sessions print 20 lines a second each. Three rounds of three windows: the page open
    // (its long tasks observed), no client at all, and only preview sockets (what the preview
    // stream costs the hub, apart from the page's other streams).
    let printers: Vec<&String> = ids.iter().take(PRINTING).collect();
    for id in &printers {
        send_line(&hub, id, "while :; do echo tick-$RANDOM; sleep 0.05; done").await;
    }
    let mut cpu = [Vec::new(), Vec::new(), Vec::new()];
    let (mut long_tasks, mut longest_ms, mut changes, mut window_ms) = (0, 0.0f64, 0, 0.0);
    let (mut renders, mut longest_render_ms) = (0, 0.0f64);
    for round in 0..3 {
        if round > 0 {
            b.goto(&format!("{}/", hub.base)).await;
            b.wait_js("the page live again", LIVE_100, T).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let from = b
            .js("window.agentHub.app.fleet.stats = { renders: 0, longestRenderMs: 0 }; window.__long = []; window.__changes = 0; new MutationObserver((m) => window.__changes += m.length).observe(document.getElementById('fleet-list'), { subtree: true, characterData: true, childList: true }); return performance.now()", json!([]))
            .await;
        cpu[0].push(cpu_over(WINDOW).await);
        let during = b
            .js(
                "return [window.__long.length, window.__long.reduce((m, e) => Math.max(m, e[1]), 0), window.__changes, performance.now(), window.agentHub.app.fleet.stats]",
                json!([]),
            )
            .await;
        long_tasks += during[0].as_u64().unwrap();
        longest_ms = longest_ms.max(during[1].as_f64().unwrap());
        changes += during[2].as_u64().unwrap();
        window_ms += during[3].as_f64().unwrap() - from.as_f64().unwrap();
        renders += during[4]["renders"].as_u64().unwrap();
        longest_render_ms = longest_render_ms.max(during[4]["longestRenderMs"].as_f64().unwrap());
        b.goto("about:blank").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        cpu[1].push(cpu_over(WINDOW).await);
        let mut readers = Vec::new();
        for _ in 0..SOCKETS {
            let mut ws = previews(&hub, &hub.owner_token, "").await;
            readers.push(tokio::spawn(async move {
                while let Some(Ok(_)) = ws.next().await {}
            }));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        cpu[2].push(cpu_over(WINDOW).await);
        readers.iter().for_each(tokio::task::JoinHandle::abort);
    }
    for id in &printers {
        hub.post(
            &format!("/v1/pty/sessions/{id}/keys"),
            json!({ "keys": ["C-c"] }),
        )
        .await;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let [open, idle, socket] = cpu.each_mut().map(median);
    eprintln!(
        "figure: fleet page with {N} sessions and their previews drawn and live in {} ms cold, {} ms on a reload; longest task while loading {:.0} ms; first render of the rows {:.0} ms",
        live[0].as_millis(),
        live[1].as_millis(),
        load_long.as_f64().unwrap_or(0.0),
        render_stats["longestRenderMs"].as_f64().unwrap_or(0.0),
    );
    eprintln!(
        "figure: while {PRINTING} sessions print (20 lines/s each), {:.1} s of the page open: {long_tasks} long tasks, the longest {longest_ms:.0} ms; {changes} DOM changes in the fleet list; {renders} fleet renders, the longest {longest_render_ms:.0} ms",
        window_ms / 1000.0,
    );
    eprintln!(
        "figure: hub process CPU per {:.0} s of that printing (median of 3): {open:.2} s with the page open, {idle:.2} s with no client, {socket:.2} s with {SOCKETS} preview sockets: one preview stream costs {:.2} % of a core",
        WINDOW.as_secs_f64(),
        (socket - idle) / SOCKETS as f64 / WINDOW.as_secs_f64() * 100.0,
    );
    // The previews moved while the sessions printed (the figures are of a live page).
    assert!(
        changes >= PRINTING as u64,
        "the previews did not follow the printing: {changes} changes"
    );
}

/// CPU seconds this process used over `window` (the in-process hub, and the test's own part).
async fn cpu_over(window: Duration) -> f64 {
    let before = process_cpu_s();
    tokio::time::sleep(window).await;
    process_cpu_s() - before
}
