//! Agents show their work (#44): an agent in a real container commits on its branch, its turn
//! ends (its own `idle` hook, posted with its credential as `agent-hub hook` posts it), and
//! `GET /v1/agents` shows it a commit ahead that merges cleanly; a conflicting commit on the
//! base, asked for afresh, shows it conflicting with the file, published as `work_changed`;
//! `agent-hub agents` says so, and the dashboard's fleet in headless Chromium shows the commits
//! ahead and sorts the rows by them.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::browser;
use crate::browser_support::Browser;
use crate::cli::BIN;
use crate::dashboard::{open_fleet, T};
use crate::docker_support::{agent_toml, hub_with_agents};
use crate::support::{wait_until, ws_request, TestHub, Ws};
use crate::workspace::{git, run, session_of, user_repo};

/// How long a turn's end may take to show (a git process or seven on a busy machine).
const SHOWN: Duration = Duration::from_secs(20);

/// The agent `id` as `GET /v1/agents` lists it.
async fn listed(hub: &TestHub, id: &str) -> Value {
    let (status, v) = hub.get("/v1/agents").await;
    assert_eq!(status, 200, "{v}");
    let agents = v["agents"].as_array().expect("agents");
    agents.iter().find(|a| a["id"] == id).cloned().expect(id)
}

/// Waits until `GET /v1/agents` shows `id`'s work as `wanted` says; the work.
async fn wait_work(hub: &TestHub, id: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let shown = wait_until(SHOWN, || async { wanted(&listed(hub, id).await["work"]) }).await;
    let work = listed(hub, id).await["work"].clone();
    assert!(shown, "{id}'s work never showed as wanted: {work}");
    work
}

/// Posts the hook `event` for agent `id` with its own credential, as `agent-hub hook` does.
async fn hook(hub: &TestHub, id: &str, event: &str) -> Value {
    let token = std::fs::read_to_string(hub.data_dir().join(format!("agents/{id}/token")))
        .expect("the agent's credential");
    let reply = crate::support::authed_http(token.trim())
        .post(format!("{}/v1/agents/{id}/hook", hub.base))
        .json(&json!({ "event": event }))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    reply.json().await.unwrap()
}

/// Reads `/v1/events` until a `work_changed` of `id` for which `wanted` holds.
async fn next_work_changed(ws: &mut Ws, id: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    tokio::time::timeout(SHOWN, async {
        loop {
            let msg = ws.next().await.expect("a frame").expect("a good frame");
            let Ok(text) = msg.to_text() else { continue };
            let Ok(event) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            if event["type"] == "work_changed" && event["agentId"] == id && wanted(&event) {
                return event;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no work_changed of {id} as wanted within {SHOWN:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_s_end_shows_the_agent_s_work_and_the_fleet_sorts_by_it() {
    crate::require_docker!();
    let repo = user_repo();
    let ws = format!(
        "workspace = {{ repo = \"{}\", base = \"main\" }}",
        repo.path().display()
    );
    // By name `wa` comes first; by commits ahead `wb` will.
    let agents = format!("{}{}", agent_toml("wa", &ws), agent_toml("wb", &ws));
    let (hub, _guard) = hub_with_agents(&agents).await;
    assert!(listed(&hub, "wb").await["work"].is_null());
    session_of(&hub, "wa").await;
    let sid = session_of(&hub, "wb").await;

    // Computed at the start: nothing done yet.
    let work = wait_work(&hub, "wb", |w| w["ahead"] == 0).await;
    assert_eq!(
        (&work["behind"], &work["files"], &work["merges_cleanly"]),
        (&json!(0), &json!(0), &json!(true)),
        "{work}"
    );
    assert!(work.get("conflicts").is_none(), "{work}");
    wait_work(&hub, "wa", |w| w["ahead"] == 0).await;

    // A turn: the agent says it works, commits, and says its turn ended.
    let v = hook(&hub, "wb", "working").await;
    assert_eq!(v["state"], "working", "{v}");
    let line =
        "cd /workspace && echo from wb > wb.txt && git add wb.txt && git commit -qm 'Add wb.txt'";
    run(&hub, &sid, line).await;
    let v = hook(&hub, "wb", "idle").await;
    assert_eq!(v["state"], "idle", "{v}");
    let work = wait_work(&hub, "wb", |w| w["ahead"] == 1).await;
    assert_eq!(
        (&work["behind"], &work["files"], &work["merges_cleanly"]),
        (&json!(0), &json!(1), &json!(true)),
        "{work}"
    );
    let (_, one) = hub.get("/v1/agents/wb").await;
    assert_eq!(one["agent"]["work"], work, "{one}");

    // The base gets a commit of its own on the same file: asked afresh, the branch conflicts
    // with it, and the change is published.
    let events_url = format!("{}/v1/events", hub.base.replace("http://", "ws://"));
    let (mut events, _) =
        tokio_tungstenite::connect_async(ws_request(&events_url, &hub.owner_token))
            .await
            .expect("events");
    std::fs::write(repo.path().join("wb.txt"), "from main\n").unwrap();
    git(repo.path(), &["add", "wb.txt"]);
    git(repo.path(), &["commit", "-qm", "wb.txt on main"]);
    let main_before = git(repo.path(), &["rev-parse", "main", "agent/wb"]);
    let (status, v) = hub.get("/v1/agents/wb/work").await;
    assert_eq!(status, 200, "{v}");
    let fresh = &v["work"];
    assert_eq!(
        (&fresh["ahead"], &fresh["behind"], &fresh["merges_cleanly"]),
        (&json!(1), &json!(1), &json!(false)),
        "{v}"
    );
    assert_eq!(fresh["conflicts"], json!(["wb.txt"]), "{v}");
    assert_eq!(listed(&hub, "wb").await["work"], *fresh);
    let event =
        next_work_changed(&mut events, "wb", |e| e["work"]["merges_cleanly"] == false).await;
    assert_eq!(event["work"]["conflicts"], json!(["wb.txt"]), "{event}");
    assert_eq!(
        git(repo.path(), &["rev-parse", "main", "agent/wb"]),
        main_before,
        "computing the summary moved a branch"
    );
    assert_eq!(git(repo.path(), &["status", "--porcelain"]), "");

    // An unknown agent.
    let (status, v) = hub.get("/v1/agents/nobody/work").await;
    assert_eq!(
        (status, &v["error_code"]),
        (404, &json!("AGENT_NOT_FOUND")),
        "{v}"
    );

    // The command line's list says it in a line under the agent.
    let out = std::process::Command::new(BIN)
        .args(["agents", "--hub", &hub.base, "--token", &hub.owner_token])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("  work: 1 ahead, 1 behind · 1 file · conflicts: wb.txt"),
        "{text}"
    );
    assert!(
        text.contains("  work: 0 ahead · 0 files · merges cleanly"),
        "{text}"
    );

    let b = browser!();
    fleet_shows_and_sorts_by_work(&b, &hub).await;
}

/// The fleet's rows show each agent's work, and a click on the "work" header orders them by
/// commits ahead (`wb` first), another by name again.
async fn fleet_shows_and_sorts_by_work(b: &Browser, hub: &TestHub) {
    b.sign_in(&hub.base, &hub.owner_token).await;
    open_fleet(b, hub).await;
    let cell = |id: &str| {
        format!("return document.querySelector('tr[data-unit=\"{id}\"] td.work')?.textContent")
    };
    let wb = b
        .wait_js(
            "wb's work shown",
            &format!(
                "const t = (() => {{ {} }})(); return t && t.includes('1 ahead') && t",
                cell("wb")
            ),
            T,
        )
        .await;
    assert_eq!(wb, "1 ahead · 1 file · conflicts: 1 file", "{wb}");
    let title = b
        .js(
            "return document.querySelector('tr[data-unit=\"wb\"] td.work .conflict').title",
            json!([]),
        )
        .await;
    assert!(title.as_str().unwrap().contains("wb.txt"), "{title}");
    let wa = b.js(&cell("wa"), json!([])).await;
    assert_eq!(wa, "0 ahead · 0 files · merges cleanly");

    let order =
        "return [...document.querySelectorAll('tr.unit')].map(r => r.dataset.unit).join(',')";
    assert_eq!(b.js(order, json!([])).await, "wa,wb");
    b.click("th button.sort[data-sort=\"ahead\"]").await;
    b.wait_js(
        "sorted by commits ahead",
        &format!("{order} === 'wb,wa'"),
        T,
    )
    .await;
    let sort = b
        .js(
            "return document.querySelector('th[aria-sort]').getAttribute('aria-sort')",
            json!([]),
        )
        .await;
    assert_eq!(sort, "descending");
    b.screenshot("work-sorted-by-ahead").await;
    b.click("th button.sort[data-sort=\"ahead\"]").await;
    b.wait_js("sorted by name again", &format!("{order} === 'wa,wb'"), T)
        .await;
}
