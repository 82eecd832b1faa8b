//! Budgets as policy (#41), on what the hub counted: a policy's budget of one agent and a
//! team's budget in hub.toml, judged against the usage the hub keeps in its data dir (written
//! there before it starts, as the hub keeps it). An exhausted `stop` budget refuses the agent's
//! start and deliveries with `BUDGET_EXHAUSTED` (naming the budget and when it renews, with a
//! Retry-After); a team's budget binds its agents together; the 80 % and 100 % events are sent
//! once and audited; a person (admin) sets, lifts and resets budgets at run time (audited), and
//! these changes survive a restart; bad budgets get a 400 naming the field. The real CLIs
//! crossing their budgets turn by turn are in `budget_real_cli.rs`.

use std::time::Duration;

use chrono::{Duration as Days, Utc};
use serde_json::{json, Value};

use crate::support::TestHub;
use agent_hub::daemon::Components;

const AGENTS: &str =
    "[[agents]]\nid = \"a1\"\nteam = \"core\"\nimage = \"img\"\npolicy = \"capped\"\n\
[[agents]]\nid = \"a2\"\nteam = \"core\"\nimage = \"img\"\npolicy = \"wake\"\n\
[teams.core]\nbudget = { usd = 0.7 }\n";

/// `capped`: 200 000 tokens a day, stop; `wake`: no budget of its own, start on a message.
fn policies(dir: &std::path::Path) {
    std::fs::write(
        dir.join("capped.toml"),
        "budget = { tokens = 200_000, per = \"day\" }\nbudget_action = \"stop\"\nstart_on_message = true\n",
    )
    .unwrap();
    std::fs::write(dir.join("wake.toml"), "start_on_message = true\n").unwrap();
}

async fn hub_on(data: &std::path::Path, policies: &std::path::Path) -> TestHub {
    let (data, policies) = (data.to_path_buf(), policies.to_path_buf());
    let components = Components {
        audit: true,
        policy_runner: true,
        ..Components::default()
    };
    TestHub::start_components(components, move |c| {
        let parsed = agent_hub::config::HubConfig::parse(AGENTS, "hub.toml").unwrap();
        c.agents = parsed.agents;
        c.teams = parsed.teams;
        c.data_dir = data;
        c.policies_dir = Some(policies);
    })
    .await
}

/// The budget of `name` in `GET /v1/budgets`, once `ready` holds of it (within 10 s).
async fn budget_when(hub: &TestHub, name: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, v) = hub.get("/v1/budgets").await;
        let found = v["budgets"]
            .as_array()
            .and_then(|all| all.iter().find(|b| b["name"] == name).cloned())
            .unwrap_or(Value::Null);
        if ready(&found) {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "budget of {name}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The audited hub events of type `action` (and of `agent`, if given).
async fn audited(hub: &TestHub, action: &str) -> Vec<Value> {
    let (status, v) = hub
        .get(&format!("/v1/pty-traffic/events?action={action}"))
        .await;
    assert_eq!(status, 200, "{v}");
    v["events"].as_array().cloned().unwrap_or_default()
}

fn refused(status: u16, v: &Value) -> bool {
    status == 429 && v["error_code"] == "BUDGET_EXHAUSTED"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_refuse_until_a_person_raises_or_lifts_them_and_survive_restarts() {
    let data = tempfile::tempdir().unwrap();
    let policy_dir = tempfile::tempdir().unwrap();
    crate::dashboard_usage::seed(data.path());
    policies(policy_dir.path());
    let hub = hub_on(data.path(), policy_dir.path()).await;

    // a1: 260 000 of 200 000 tokens today: exhausted, `stop` refuses starts and deliveries.
    let a1 = budget_when(&hub, "a1", |b| b["refusing"] == true).await;
    assert_eq!(a1["standing"]["spent_tokens"], 260_000, "{a1}");
    assert_eq!(a1["source"], "policy:capped", "{a1}");
    let tomorrow = (Utc::now() + Days::days(1))
        .format("%Y-%m-%dT00:00:00Z")
        .to_string();
    assert_eq!(a1["standing"]["renews_at"], tomorrow, "{a1}");
    // The team: $0.63 of $0.70 (90 %): warned, not refusing (`hold` by default).
    let core = budget_when(&hub, "core", |b| b["standing"]["level"] == "warned").await;
    assert_eq!(
        (&core["scope"], &core["refusing"]),
        (&json!("team"), &json!(false))
    );

    let resp = hub
        .http
        .post(format!("{}/v1/agents/a1/start", hub.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let retry_after: i64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((0..=86_400).contains(&retry_after), "{retry_after}");
    let (status, v) = (resp.status().as_u16(), resp.json::<Value>().await.unwrap());
    assert!(refused(status, &v), "{status} {v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("agent 'a1' has spent its budget")
            && message.contains("200000 tokens per day")
            && message.contains(&format!("renews at {tomorrow}")),
        "{message}"
    );
    assert_eq!(v["budget"]["name"], "a1", "{v}");
    let send = json!({"agent_id": "a1", "data": "more work"});
    let (status, v) = hub.post("/v1/pty/send_line_to_agent", send.clone()).await;
    assert!(
        refused(status, &v),
        "a start on a message is refused too: {status} {v}"
    );

    // The events, once each, audited with the hub as the actor.
    let exhausted = audited(&hub, "budget_exhausted").await;
    assert_eq!(exhausted.len(), 1, "{exhausted:?}");
    assert_eq!(exhausted[0]["agent_id"], "a1");
    assert_eq!(exhausted[0]["actor"], "hub");
    let warned = audited(&hub, "budget_warned").await;
    let warned_of = |name: &str| {
        warned
            .iter()
            .filter(|e| {
                e["command"]
                    .as_str()
                    .unwrap_or("")
                    .contains(&format!("\"name\":\"{name}\""))
            })
            .count()
    };
    assert_eq!((warned_of("a1"), warned_of("core")), (1, 1), "{warned:?}");

    // A person lowers the team's budget: a2 (no budget of its own) is refused for its team.
    let (status, v) = hub
        .request(
            reqwest::Method::PUT,
            "/v1/teams/core/budget",
            Some(json!({"usd": 0.5})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["budget"]["source"], &v["budget"]["refusing"]),
        (&json!("set"), &json!(true)),
        "{v}"
    );
    let (status, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": "a2", "data": "hi"}),
        )
        .await;
    assert!(refused(status, &v), "{status} {v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("team 'core' of agent 'a2'"),
        "{v}"
    );

    // Bad budgets: 400 naming the field; unknown teams and missing budgets: 404.
    let bad = [
        ("/v1/agents/a1/budget", json!({"usd": -1.0}), "usd"),
        (
            "/v1/agents/a1/budget",
            json!({"tokens": 5, "per": "month"}),
            "per",
        ),
        ("/v1/teams/core/budget", json!({"tokens": -5}), "tokens"),
        ("/v1/teams/core/budget", json!({}), "usd, tokens or both"),
    ];
    for (path, body, field) in bad {
        let (status, v) = hub
            .request(reqwest::Method::PUT, path, Some(body.clone()))
            .await;
        assert_eq!(
            (status, v["error_code"].as_str()),
            (400, Some("BAD_REQUEST")),
            "{body}: {v}"
        );
        assert!(
            v["message"].as_str().unwrap().contains(field),
            "{body}: {v}"
        );
    }
    let (status, v) = hub
        .request(
            reqwest::Method::PUT,
            "/v1/teams/nobody/budget",
            Some(json!({"usd": 1.0})),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (404, Some("TEAM_NOT_FOUND")),
        "{v}"
    );
    let (status, v) = hub.post("/v1/agents/a2/budget/lift", json!({})).await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (404, Some("NO_BUDGET")),
        "{v}"
    );

    // A person lifts a1's budget: its start is no longer refused for it.
    let (status, v) = hub.post("/v1/agents/a1/budget/lift", json!({})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["budget"]["lifted"], &v["budget"]["refusing"]),
        (&json!(true), &json!(false)),
        "{v}"
    );
    let (status, v) = hub.post("/v1/agents/a1/start", json!({})).await;
    assert!(!refused(status, &v), "{status} {v}");

    // Who changed what is on record.
    let done = |mut records: Vec<Value>| {
        records.retain(|r| r["success"] == true);
        records
    };
    let set = done(audited(&hub, "budget_set").await);
    let lift = done(audited(&hub, "budget_lift").await);
    assert_eq!((set.len(), lift.len()), (1, 1), "{set:?} {lift:?}");
    assert_eq!(set[0]["actor"], "owner", "{set:?}");

    // A restart keeps the changes, and sends no event again.
    drop(hub);
    let hub = hub_on(data.path(), policy_dir.path()).await;
    let core = budget_when(&hub, "core", |b| b["source"] == "set").await;
    assert_eq!(core["refusing"], true, "{core}");
    let a1 = budget_when(&hub, "a1", |b| b["lifted"] == true).await;
    assert_eq!(a1["refusing"], false, "{a1}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        audited(&hub, "budget_exhausted").await.len(),
        2,
        "a1's and core's, once each"
    );

    // The CLI lists them and resets the team's to hub.toml's.
    let cli = |args: &[&str]| crate::cli::run_ok(&hub.base, &hub.owner_token, args);
    let table = cli(&["budget"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("team core"))
        .unwrap_or_default();
    assert!(
        row.contains("$0.50 per day") && row.contains("refusing"),
        "{table}"
    );
    let mcp = crate::mcp::http_client_at(&hub.base, &hub.owner_token).await;
    let m = crate::mcp::ok(&mcp, "k_agents", json!({"action": "budgets"})).await;
    let names: Vec<&str> = m["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    assert_eq!(names, ["a1", "core"], "{m}");
    let reset: Value =
        serde_json::from_str(&cli(&["budget", "reset", "--team", "core", "--json"])).unwrap();
    assert_eq!(reset["budget"]["source"], "team", "{reset}");
    assert_eq!(reset["budget"]["budget"]["usd"], 0.7, "{reset}");
}

/// A bad budget in a policy file is refused at reload with the file's line and column.
#[tokio::test]
async fn a_bad_budget_in_a_policy_is_refused_at_its_place() {
    let policy_dir = tempfile::tempdir().unwrap();
    std::fs::write(policy_dir.path().join("ok.toml"), "idle_timeout_s = 60\n").unwrap();
    let dir = policy_dir.path().to_path_buf();
    let hub = TestHub::start_with(move |c| c.policies_dir = Some(dir)).await;
    let cases = [
        ("budget = { usd = 1.0 }\n\nbudget = 3\n", "bad.toml:3:"),
        (
            "idle_timeout_s = 5\nbudget = { usd = -2.0 }\n",
            "bad.toml:2:12",
        ),
        ("budget = { tokens = 10, per = \"month\" }\n", "bad.toml:1:"),
    ];
    for (text, at) in cases {
        std::fs::write(policy_dir.path().join("bad.toml"), text).unwrap();
        let (status, v) = hub.post("/v1/policies/reload", json!({})).await;
        assert_eq!(status, 400, "{text}: {v}");
        let message = v["message"].as_str().unwrap();
        assert!(message.contains(at), "{text}: {message}");
    }
}
