//! The dashboard on a phone (headless Chromium as a 390 × 844 touch screen, see
//! `browser_support`): the fleet is one column of cards with the blocked agent first, its
//! question and a large button per answer; a real tap on "yes" answers it through the hub
//! (audited, with a receipt the page shows) and the agent moves on; a tap on the card opens its
//! terminal and the Fleet tab leads back. The page is installable: its manifest is valid, its
//! icons load, and its service worker installs with the whole page as its scope and keeps the
//! page's files but no API reply. A screenshot of each phone view is saved under
//! `target/browser-artifacts/`.
//!
//! The agent is the scripted fake agent TUI (tests/fixtures/fake-agent.sh) asking
//! "Allow write to main.rs? [y/n]", whose answers the hub reads as the choices yes and no; and
//! the real Claude Code (pinned, against the suite's model stand-in) asking its permission
//! question "Do you want to proceed?", answered with a tap on "Yes".

use serde_json::{json, Value};

use crate::browser;
use crate::browser_support::Browser;
use crate::dashboard::{open_fleet, wait_row_state, wait_terminal_live, T};
use crate::model_standin::{ModelStandIn, AFTER_TOOL};
use crate::policy_support::*;
use crate::real_cli::{cli, hub_without_status_file, session_request, Home, RealCli, T as RT};
use crate::support::{wait_until, TestHub};

/// Makes the tab a phone: 390 × 844 CSS pixels at 3× (an iPhone 14's screen), a mobile
/// viewport, and touch input.
pub(crate) async fn phone(b: &Browser) {
    b.cdp(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": true }),
    )
    .await;
    b.cdp(
        "Emulation.setTouchEmulationEnabled",
        json!({ "enabled": true, "maxTouchPoints": 5 }),
    )
    .await;
}

/// A real tap (touch start and end, through Chromium's input pipeline) on the centre of the
/// element `css` selects, scrolled into view first.
pub(crate) async fn tap(b: &Browser, css: &str) {
    let at = b
        .js(
            "const el = document.querySelector(arguments[0]);
             if (!el) return null;
             el.scrollIntoView({ block: 'center' });
             const r = el.getBoundingClientRect();
             return [r.x + r.width / 2, r.y + r.height / 2];",
            json!([css]),
        )
        .await;
    let (x, y) = match (at[0].as_f64(), at[1].as_f64()) {
        (Some(x), Some(y)) => (x, y),
        _ => panic!("nothing to tap: {css}"),
    };
    let point = json!([{ "x": x, "y": y, "radiusX": 4, "radiusY": 4, "force": 1 }]);
    b.cdp(
        "Input.dispatchTouchEvent",
        json!({ "type": "touchStart", "touchPoints": point }),
    )
    .await;
    b.cdp(
        "Input.dispatchTouchEvent",
        json!({ "type": "touchEnd", "touchPoints": [] }),
    )
    .await;
}

/// A fake agent session labelled `label`.
async fn fake(hub: &TestHub, label: &str) -> String {
    hub.create_with(json!({
        "backend": "pty", "shell": "bash", "args": [fake_agent()], "cli_type": "fake",
        "label": label,
    }))
    .await
}

/// The cards in order: `[unit, state, height of each choice button, width of the card, width
/// of each choice button]`.
async fn cards(b: &Browser) -> Vec<Value> {
    let v = b
        .js(
            "return [...document.querySelectorAll('#fleet-list .card')].map((c) => [
               c.dataset.unit, c.dataset.state,
               [...c.querySelectorAll('button.choice')].map((x) => x.getBoundingClientRect().height),
               c.getBoundingClientRect().width,
               [...c.querySelectorAll('button.choice')].map((x) => x.getBoundingClientRect().width),
             ])",
            json!([]),
        )
        .await;
    v.as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_phone_the_blocked_agent_is_first_and_a_tap_answers_it() {
    let b = browser!();
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, "").await;
    // Named so that the blocked one would come last in name order.
    let idle = fake(&hub, "a-idle").await;
    let shell = hub.create("pty").await;
    let asking = fake(&hub, "z-asking").await;
    wait_state(&hub, &idle, "idle", T).await;
    wait_state(&hub, &asking, "idle", T).await;
    let (status, v) = submit(&hub, &asking, "ask", false).await;
    assert_eq!(status, 200, "{v}");
    let blocked = wait_state(&hub, &asking, "blocked", T).await;
    assert_eq!(blocked["choices"][0]["label"], "yes", "{blocked}");

    phone(&b).await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    open_fleet(&b, &hub).await;
    wait_row_state(&b, &asking, "blocked").await;
    b.wait_js(
        "the question on the blocked card",
        &format!("return document.querySelector('.card[data-unit=\"{asking}\"] .question button.choice')"),
        T,
    )
    .await;
    let viewport = b
        .js(
            "return [innerWidth, innerHeight, document.documentElement.scrollWidth, \
             matchMedia('(pointer: coarse)').matches]",
            json!([]),
        )
        .await;
    assert_eq!(
        viewport,
        json!([390, 844, 390, true]),
        "a phone's viewport, no sideways scroll"
    );
    assert_eq!(
        b.js(
            "return document.querySelectorAll('#fleet-list table').length",
            json!([])
        )
        .await,
        json!(0),
        "no table on a phone"
    );

    // One column: the blocked agent first, then the others by name, each card full width.
    let shown = cards(&b).await;
    let order: Vec<&str> = shown.iter().map(|c| c[0].as_str().unwrap()).collect();
    assert_eq!(
        order,
        [asking.as_str(), idle.as_str(), shell.as_str()],
        "{shown:?}"
    );
    assert_eq!(shown[0][1], "blocked", "{shown:?}");
    for c in &shown {
        let width = c[3].as_f64().unwrap();
        assert!(
            width > 350.0 && width <= 390.0,
            "a card {width} px wide: {shown:?}"
        );
    }
    let (heights, widths) = (
        shown[0][2].as_array().unwrap(),
        shown[0][4].as_array().unwrap(),
    );
    assert_eq!(heights.len(), 2, "a button per answer: {shown:?}");
    for (h, w) in heights.iter().zip(widths) {
        let (h, w) = (h.as_f64().unwrap(), w.as_f64().unwrap());
        assert!(h >= 44.0, "a choice button {h} px tall");
        assert!(
            w >= shown[0][3].as_f64().unwrap() - 30.0,
            "a choice button {w} px wide"
        );
    }
    let card = b
        .js(
            &format!("return document.querySelector('.card[data-unit=\"{asking}\"]').innerText"),
            json!([]),
        )
        .await;
    let card = card.as_str().unwrap();
    assert!(card.contains("z-asking"), "{card}");
    assert!(card.contains("Allow write to main.rs? [y/n]"), "{card}");
    b.screenshot("phone-fleet").await;

    // A real tap on "yes": the agent takes the answer and moves on, and the card shows the
    // hub's receipt.
    b.js(
        "window.__tapped = [];
         document.addEventListener('touchend', (e) => window.__tapped.push(e.target.closest('button')?.dataset.keys), true);
         return 1",
        json!([]),
    )
    .await;
    let yes = format!(".card[data-unit=\"{asking}\"] button.choice[data-keys=\"y Enter\"]");
    assert_eq!(
        b.js(
            &format!("return document.querySelector('{yes}')?.textContent"),
            json!([])
        )
        .await,
        json!("yes")
    );
    tap(&b, &yes).await;
    hub.wait_output(&asking, "answered: y", T).await;
    wait_state(&hub, &asking, "idle", T).await;
    assert_eq!(
        b.js("return window.__tapped", json!([])).await,
        json!(["y Enter"]),
        "the answer came from a touch"
    );
    let receipt = b
        .wait_js(
            "the receipt shown",
            &format!(
                "const r = document.querySelector('.card[data-unit=\"{asking}\"] [data-receipt-for=\"{asking}\"]');
                 return r && [r.dataset.receipt, r.innerText]"
            ),
            T,
        )
        .await;
    assert_eq!(receipt[0], "submitted", "{receipt}");
    let text = receipt[1].as_str().unwrap();
    assert!(text.contains("\"yes\" delivered"), "{text}");
    wait_row_state(&b, &asking, "idle").await;
    assert!(
        b.js(
            &format!("return document.querySelector('.card[data-unit=\"{asking}\"] .question')"),
            json!([])
        )
        .await
        .is_null(),
        "the question left the card"
    );
    b.screenshot("phone-answered").await;

    // The answer is in the audit log as any caller's keys: who, which session, what.
    let audited = wait_until(T, || async {
        let (_, v) = hub
            .get(&format!(
                "/v1/pty-traffic/events?action=keys&session_id={asking}"
            ))
            .await;
        v["events"].as_array().is_some_and(|e| {
            e.len() == 1
                && e[0]["success"] == true
                && e[0]["command"].as_str().unwrap_or("").contains("\"y\"")
        })
    })
    .await;
    let (_, events) = hub.get("/v1/pty-traffic/events?action=keys").await;
    assert!(audited, "the answer is not audited: {events}");

    // The terminal is one tap away, and the Fleet tab leads back.
    tap(
        &b,
        &format!(".card[data-unit=\"{asking}\"] .card-head .name"),
    )
    .await;
    wait_terminal_live(&b, &asking).await;
    let panel = b
        .js(
            &format!(
                "const p = document.querySelector('.term-panel[data-session=\"{asking}\"]').getBoundingClientRect();
                 return [location.hash, p.width, document.getElementById('fleet').hidden]"
            ),
            json!([]),
        )
        .await;
    assert_eq!(panel[0], format!("#/grid/{asking}"), "{panel}");
    let width = panel[1].as_f64().unwrap();
    assert!(
        width > 350.0 && width <= 390.0,
        "the terminal {width} px wide"
    );
    assert_eq!(panel[2], true, "{panel}");
    b.screenshot("phone-terminal").await;
    tap(&b, "#nav-fleet").await;
    b.wait_js(
        "back at the fleet",
        "return !document.getElementById('fleet').hidden && document.querySelector('#fleet-list .card')",
        T,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_is_installable_and_its_worker_keeps_no_api_data() {
    let b = browser!();
    let hub = TestHub::start().await;
    let http = reqwest::Client::new();

    // The manifest: served without a token, as its type, with what an install needs.
    let res = http
        .get(format!("{}/web/manifest.webmanifest", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/manifest+json");
    let manifest: Value = res.json().await.expect("the manifest is JSON");
    assert_eq!(manifest["name"], "agent-hub", "{manifest}");
    assert_eq!(manifest["short_name"], "agent-hub", "{manifest}");
    assert_eq!(manifest["start_url"], "/", "{manifest}");
    assert_eq!(manifest["display"], "standalone", "{manifest}");
    let icons = manifest["icons"].as_array().expect("icons");
    let mut sizes = Vec::new();
    for icon in icons {
        assert_eq!(icon["type"], "image/png", "{icon}");
        let res = http
            .get(format!("{}{}", hub.base, icon["src"].as_str().unwrap()))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{icon}");
        assert_eq!(res.headers()["content-type"], "image/png", "{icon}");
        let png = res.bytes().await.unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{icon}");
        let (w, h) = (
            u32::from_be_bytes(png[16..20].try_into().unwrap()),
            u32::from_be_bytes(png[20..24].try_into().unwrap()),
        );
        assert_eq!(format!("{w}x{h}"), icon["sizes"], "{icon}");
        sizes.push(w);
    }
    sizes.sort();
    assert_eq!(sizes, [192, 512]);

    // The service worker is served at the root, under the same policy as the page; the page's
    // policy admits it and the manifest.
    let res = http
        .get(format!("{}/sw.js", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    let res = http.get(format!("{}/", hub.base)).send().await.unwrap();
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("worker-src 'self'") && csp.contains("manifest-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe"), "{csp}");

    // In the browser: the page links the manifest, and the worker installs and activates with
    // the whole hub as its scope.
    phone(&b).await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    open_fleet(&b, &hub).await;
    let link = b
        .js(
            "return document.querySelector('link[rel=manifest]')?.href",
            json!([]),
        )
        .await;
    assert_eq!(
        link,
        json!(format!("{}/web/manifest.webmanifest", hub.base))
    );
    let worker = b
        .wait_js(
            "the service worker active",
            "navigator.serviceWorker.ready.then((r) => (window.__sw = [r.scope, r.active?.state, r.active?.scriptURL]));
             return window.__sw?.[1] === 'activated' && window.__sw",
            T,
        )
        .await;
    assert_eq!(
        worker,
        json!([
            format!("{}/", hub.base),
            "activated",
            format!("{}/sw.js", hub.base)
        ])
    );

    // Loaded again, the page is the worker's: its API calls pass through it (one more is made
    // here), and the worker's caches hold the page's files and no API reply.
    b.goto(&format!("{}/", hub.base)).await;
    open_fleet(&b, &hub).await;
    b.wait_js(
        "the page controlled by the worker",
        "return navigator.serviceWorker.controller?.state === 'activated'",
        T,
    )
    .await;
    let whoami = b
        .wait_js(
            "an API call from the controlled page",
            "fetch('/v1/whoami', { headers: { Authorization: `Bearer ${sessionStorage.getItem('agent-hub.token')}` } })
               .then((r) => r.json()).then((v) => (window.__whoami = v));
             return window.__whoami",
            T,
        )
        .await;
    assert_eq!(whoami["ok"], true, "{whoami}");
    let cached = b
        .wait_js(
            "the worker's caches listed",
            "(async () => {
               const urls = [];
               for (const name of await caches.keys()) {
                 for (const req of await (await caches.open(name)).keys()) urls.push(req.url);
               }
               window.__cached = urls;
             })();
             return window.__cached",
            T,
        )
        .await;
    let urls: Vec<&str> = cached
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    for want in [
        "/",
        "/web/app.js",
        "/web/fleet.js",
        "/web/app.css",
        "/web/icon-192.png",
    ] {
        let url = format!("{}{want}", hub.base);
        assert!(urls.contains(&url.as_str()), "{want} not kept: {urls:?}");
    }
    let kept_api: Vec<&&str> = urls.iter().filter(|u| u.contains("/v1/")).collect();
    assert!(kept_api.is_empty(), "API replies kept: {kept_api:?}");
    b.screenshot("phone-installed").await;
}

/// The same tap on the real Claude Code (pinned, in a host tmux session, against the suite's
/// model stand-in): its permission question is the first card with a button per choice, and a
/// tap on "Yes" runs the tool: the CLI moves on and the card shows the receipt. Skips, saying
/// so, when the CLIs are not installed (a failure with `AGENT_HUB_REAL_CLI_TESTS=required`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_phone_a_tap_on_yes_answers_real_claude_code() {
    let Some(claude) = cli("claude") else { return };
    let b = browser!();
    let standin = ModelStandIn::start().await;
    let (_policies, hub) = hub_without_status_file().await;
    let home = Home::new();
    let env = home.claude_env(&standin, false);
    let request = session_request(&claude, "claude", &home, env);
    let run = RealCli::launch(&hub, home, request, None).await;
    run.claude_prompt().await;
    run.submit("please run a tool").await;
    assert!(
        run.shows("Do you want to proceed?", RT).await,
        "{}",
        run.pane()
    );
    let blocked = run.wait_state("blocked").await;
    // The whole menu from the screen, not only the line the rule matched (its highlighted
    // choice): every choice, the question's own words apart.
    assert_eq!(blocked["choices"][0]["label"], "Yes", "{blocked}");
    assert!(
        blocked["choices"].as_array().unwrap().len() >= 3,
        "{blocked}"
    );
    assert_eq!(
        blocked["choices"].as_array().unwrap().last().unwrap()["label"],
        "No",
        "{blocked}"
    );
    let id = run.id.clone();

    phone(&b).await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    open_fleet(&b, &hub).await;
    wait_row_state(&b, &id, "blocked").await;
    let yes = format!(".card[data-unit=\"{id}\"] button.choice[data-keys=\"1\"]");
    b.wait_js(
        "the Yes button",
        &format!("return document.querySelector('{yes}')?.textContent"),
        T,
    )
    .await;
    let shown = cards(&b).await;
    assert_eq!(shown[0][0], json!(id), "{shown:?}");
    // A button per choice of Claude Code's menu, each a thumb's height.
    let heights = shown[0][2].as_array().unwrap();
    assert_eq!(
        heights.len(),
        blocked["choices"].as_array().unwrap().len(),
        "{shown:?} {blocked}"
    );
    assert!(
        heights.iter().all(|h| h.as_f64().unwrap() >= 44.0),
        "{shown:?}"
    );
    let question = b
        .js(
            &format!(
                "return document.querySelector('.card[data-unit=\"{id}\"] .question .q').innerText"
            ),
            json!([]),
        )
        .await;
    // The question as the hub reads it from the screen: its words, its choices apart.
    assert_eq!(question, blocked["question"], "{blocked}");
    assert!(
        question
            .as_str()
            .unwrap()
            .contains("Do you want to proceed?"),
        "{question}"
    );
    assert!(!question.as_str().unwrap().contains("1. Yes"), "{question}");
    assert_eq!(
        b.js(
            &format!("return document.querySelector('{yes}').textContent"),
            json!([])
        )
        .await,
        json!("Yes")
    );
    b.screenshot("phone-claude-code").await;

    tap(&b, &yes).await;
    assert!(
        run.shows(AFTER_TOOL, RT).await,
        "the tool did not run: {}",
        run.pane()
    );
    let moved_on = wait_until(RT, || async { run.state().await["state"] != "blocked" }).await;
    assert!(moved_on, "still blocked: {}", run.state().await);
    let receipt = b
        .wait_js(
            "the receipt shown",
            &format!("const r = document.querySelector('[data-receipt-for=\"{id}\"]'); return r && [r.dataset.receipt, r.innerText]"),
            T,
        )
        .await;
    assert_eq!(receipt[0], "submitted", "{receipt}");
    assert!(
        receipt[1].as_str().unwrap().contains("\"Yes\" delivered"),
        "{receipt}"
    );
    b.screenshot("phone-claude-code-answered").await;
}
