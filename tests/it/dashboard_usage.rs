//! What agents spent, in the dashboard (#41): each container agent's row shows what it spent
//! today (dollars and tokens, from the hub's usage figures), an agent whose CLI keeps no
//! records the hub reads shows a dash with the reason, the header shows the fleet's total for
//! today, and the agent's panel its own. Headless Chromium on a hub whose ledger holds calls of
//! today and of two days ago (written to its data dir before it starts, as the hub keeps them).

use chrono::{Duration as Days, Utc};
use serde_json::json;

use crate::browser;
use crate::dashboard::{open_fleet, T};
use crate::support::TestHub;

const AGENTS: &str =
    "[[agents]]\nid = \"a1\"\nteam = \"core\"\nimage = \"img\"\ncli_type = \"claude\"\n\
[[agents]]\nid = \"ai\"\nteam = \"core\"\nimage = \"img\"\ncli_type = \"aider\"\n";

/// `a1`'s calls of claude-sonnet-4-5 ($3 input, $15 output, $0.30 cache read per million):
/// today $0.45 and $0.18, 260 000 tokens; two days ago $3, not today's.
pub fn seed(data: &std::path::Path) {
    let line = |at: chrono::DateTime<Utc>, input: u64, output: u64, cache_read: u64, end: u64| {
        json!({"at": at, "team": "core", "model": "claude-sonnet-4-5",
               "tokens": {"input": input, "output": output, "cache_read": cache_read, "cache_write": 0},
               "file": "p/s.jsonl", "end": end})
        .to_string()
    };
    let now = Utc::now();
    let lines = [
        line(now - Days::days(2), 1_000_000, 0, 0, 10),
        line(now, 100_000, 10_000, 0, 20),
        line(now, 50_000, 0, 100_000, 30),
    ];
    std::fs::create_dir_all(data.join("usage")).unwrap();
    std::fs::write(data.join("usage/a1.jsonl"), lines.join("\n") + "\n").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_shows_what_each_agent_spent_today_and_the_total() {
    let b = browser!();
    let data = tempfile::tempdir().unwrap();
    seed(data.path());
    let dir = data.path().to_path_buf();
    let hub = TestHub::start_with(|c| {
        c.data_dir = dir;
        c.agents = agent_hub::config::HubConfig::parse(AGENTS, "test")
            .unwrap()
            .agents;
    })
    .await;
    b.sign_in(&hub.base, &hub.owner_token).await;
    open_fleet(&b, &hub).await;

    let spent = "$0.63 · 260.0k tok";
    let row = b
        .wait_js(
            "a1's spend today",
            &format!("const t = document.querySelector('tr[data-unit=\"a1\"] td.spend')?.textContent; return t === '{spent}' && t"),
            T,
        )
        .await;
    assert_eq!(row, spent);
    let header = b
        .js(
            "return document.getElementById('spend').textContent",
            json!([]),
        )
        .await;
    assert_eq!(header, format!("{spent} today"));
    let dash = b
        .js(
            "const s = document.querySelector('tr[data-unit=\"ai\"] td.spend span'); return [s.textContent, s.title]",
            json!([]),
        )
        .await;
    assert_eq!(dash[0], "—", "{dash}");
    assert!(
        dash[1].as_str().unwrap().contains("names no workdir"),
        "{dash}"
    );

    // The agent's panel (it never ran: its start control and what it spent).
    b.click("tr[data-unit=\"a1\"] td.name").await;
    let panel = b
        .wait_js(
            "a1's panel spend",
            "return document.querySelector('[data-spend-for=\"a1\"]')?.textContent",
            T,
        )
        .await;
    assert_eq!(panel, format!("today {spent}"));
    b.screenshot("dashboard-usage").await;
}
