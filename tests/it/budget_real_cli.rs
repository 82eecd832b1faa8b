//! Budgets crossed by a real CLI (#41): two real Claude Code container agents against model
//! stand-ins that report [`USED`] tokens per call, each under a budget of 4 500 tokens a day
//! (a call is 1 872 tokens: the second turn passes 80 %, the third crosses the budget). `held`
//! (`hold`) finishes that turn, is sent `budget_warned` and `budget_exhausted`, has its next
//! delivery refused with `BUDGET_EXHAUSTED`, and takes it once a person raises its budget;
//! `capped` (`stop`) runs until the turn that crosses its budget and is stopped then, and its
//! start is refused.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::docker_support::ConfiguredHub;
use crate::hub_process::HubProcess;
use crate::model_standin::{ModelStandIn, Usage};
use crate::real_cli::{cli, write_claude_config};
use crate::real_cli_docker::open_up;
use crate::require_docker;
use crate::support::wait_until;
use crate::usage::{claude_agent, turn_of, usage_of};

const USED: Usage = Usage {
    input: 1200,
    output: 34,
    cache_read: 560,
    cache_write: 78,
    reasoning: 0,
};
const CAP: u64 = 4500;

/// The agent `id` under `policy`, with its own stand-in and config dir.
async fn agent(id: &str, policy: &str, root: &std::path::Path) -> (String, ModelStandIn) {
    let standin = ModelStandIn::start_with_usage(USED).await;
    let files = root.join(id);
    write_claude_config(&files.join("claude"), "/work", false);
    std::fs::create_dir_all(files.join("work")).unwrap();
    open_up(&files);
    let lines = format!("team = \"core\"\npolicy = \"{policy}\"\n");
    (claude_agent(id, &lines, &standin, &files), standin)
}

async fn tokens_of(hub: &HubProcess, agent: &str) -> u64 {
    let t = &usage_of(hub, agent).await["usage"]["tokens"];
    ["input", "output", "cache_read", "cache_write"]
        .iter()
        .map(|k| t[k].as_u64().unwrap_or(0))
        .sum()
}

/// Waits until the hub has counted every call `standin` answered for `agent`; the tokens.
async fn all_counted(hub: &HubProcess, agent: &str, standin: &ModelStandIn) -> u64 {
    let want = standin.answered().len() as u64 * USED_TOTAL;
    let counted = wait_until(Duration::from_secs(20), || async {
        tokens_of(hub, agent).await == want
    })
    .await;
    let got = tokens_of(hub, agent).await;
    assert!(counted, "{agent}: {got} tokens counted, {want} answered");
    got
}

const USED_TOTAL: u64 = USED.input + USED.output + USED.cache_read + USED.cache_write;

async fn budget_of(hub: &HubProcess, agent: &str) -> Value {
    let (status, v) = hub
        .call_status(
            Method::GET,
            &format!("/v1/agents/{agent}/budget"),
            Value::Null,
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v["budget"].clone()
}

/// The audited `action` events of `agent`.
async fn events_of(hub: &HubProcess, action: &str, agent: &str) -> usize {
    let v = hub
        .call(
            Method::GET,
            &format!("/v1/pty-traffic/events?action={action}"),
            Value::Null,
        )
        .await;
    let events = v["events"].as_array().cloned().unwrap_or_default();
    events.iter().filter(|e| e["agent_id"] == agent).count()
}

async fn send(hub: &HubProcess, agent: &str, text: &str) -> (u16, Value) {
    hub.call_status(
        Method::POST,
        "/v1/pty/send_line_to_agent",
        json!({"agent_id": agent, "data": text}),
    )
    .await
}

/// `held`: turns until its budget is crossed (warned on the way), then refused, then raised.
async fn hold_until_raised(hub: &HubProcess, standin: &ModelStandIn) {
    let mut n = 0;
    while all_counted(hub, "held", standin).await < CAP {
        let before = all_counted(hub, "held", standin).await;
        turn_of(hub, "held", standin, &format!("held turn {n}")).await;
        n += 1;
        let after = all_counted(hub, "held", standin).await;
        if before * 10 < CAP * 8 && after * 10 >= CAP * 8 {
            let warned = wait_until(Duration::from_secs(5), || async {
                events_of(hub, "budget_warned", "held").await == 1
            })
            .await;
            assert!(warned, "no budget_warned at {after} of {CAP} tokens");
        }
    }
    let refusing = wait_until(Duration::from_secs(5), || async {
        budget_of(hub, "held").await["refusing"] == true
    })
    .await;
    assert!(refusing, "{}", budget_of(hub, "held").await);
    assert_eq!(events_of(hub, "budget_exhausted", "held").await, 1);
    let asked = standin.requests().len();
    let (status, v) = send(hub, "held", "one more, please").await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (429, Some("BUDGET_EXHAUSTED")),
        "{v}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("4500 tokens per day"),
        "{v}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(standin.requests().len(), asked, "nothing reached the model");

    // A person raises the budget: the next delivery goes through, and the turn is taken.
    let (status, v) = hub
        .call_status(
            Method::PUT,
            "/v1/agents/held/budget",
            json!({"tokens": 1_000_000, "per": "day"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["budget"]["refusing"], false, "{v}");
    turn_of(hub, "held", standin, "one more, please").await;
}

/// `capped`: runs until the turn that crosses its budget, and is stopped then.
async fn stopped_at_crossing(hub: &HubProcess, standin: &ModelStandIn) {
    let mut n = 0;
    loop {
        turn_of(hub, "capped", standin, &format!("capped turn {n}")).await;
        n += 1;
        let spent = all_counted(hub, "capped", standin).await;
        let status = || async {
            let a = hub
                .call(Method::GET, "/v1/agents/capped", Value::Null)
                .await;
            a["agent"]["status"].as_str().unwrap_or("").to_string()
        };
        if spent < CAP {
            // Two budget rounds: not stopped under its budget.
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert_eq!(status().await, "running", "stopped at {spent} of {CAP}");
            continue;
        }
        let stopped = wait_until(Duration::from_secs(30), || async {
            status().await == "stopped"
        })
        .await;
        assert!(stopped, "still {} at {spent} of {CAP}", status().await);
        break;
    }
    let (status, v) = hub
        .call_status(Method::POST, "/v1/agents/capped/start", json!({}))
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (429, Some("BUDGET_EXHAUSTED")),
        "{v}"
    );
    assert_eq!(events_of(hub, "budget_exhausted", "capped").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agents_are_held_or_stopped_at_the_turn_that_crosses_their_budget() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let root = tempfile::tempdir().unwrap();
    let policies = root.path().join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    for (name, action) in [("hold-4500", "hold"), ("stop-4500", "stop")] {
        let text =
            format!("budget = {{ tokens = {CAP}, per = \"day\" }}\nbudget_action = \"{action}\"\n");
        std::fs::write(policies.join(format!("{name}.toml")), text).unwrap();
    }
    let (held, held_standin) = agent("held", "hold-4500", root.path()).await;
    let (capped, capped_standin) = agent("capped", "stop-4500", root.path()).await;
    let setup = ConfiguredHub::new();
    setup.write_config(&format!(
        "policies_dir = '{}'\n{held}{capped}",
        policies.display()
    ));
    let hub = setup.spawn().await;
    for id in ["held", "capped"] {
        let (status, v) = hub
            .call_status(Method::POST, &format!("/v1/agents/{id}/start"), json!({}))
            .await;
        assert_eq!(status, 200, "{v}");
    }
    tokio::join!(
        hold_until_raised(&hub, &held_standin),
        stopped_at_crossing(&hub, &capped_standin)
    );
}
