//! `GET /v1/engines` and `agent-hub engines` on the real engine: it is listed reachable with
//! Docker's own figures (version, CPUs, memory, and memory left less what a running agent's
//! limit reserves), the agents defined on it, and this hub's containers there with their memory
//! and CPU; an engine that cannot be reached is listed unreachable with why, at once, and
//! holds up no other.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cli::BIN;
use crate::docker_support::{agent_toml, hub_with_agents};
use crate::require_docker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engines_show_health_memory_and_the_agents_on_each() {
    require_docker!();
    let agents = format!(
        "{}{}",
        agent_toml("big", "memory = \"256m\""),
        agent_toml("far", "docker_host = \"tcp://127.0.0.1:9\"")
    );
    let (hub, _guard) = hub_with_agents(&agents).await;
    let (status, v) = hub.post("/v1/agents/big/start", json!({})).await;
    assert_eq!(status, 200, "{v}");

    let asked = Instant::now();
    let (status, v) = hub.get("/v1/engines").await;
    let took = asked.elapsed();
    assert_eq!(status, 200, "{v}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    let engines = v["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2, "{v}");
    let local: &Value = engines
        .iter()
        .find(|e| e["agents_defined"] == json!(["big"]))
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(local["reachable"], true, "{local}");
    assert!(
        local["server_version"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{local}"
    );
    assert!(local["cpus"].as_i64().unwrap() >= 1, "{local}");
    let total = local["memory_total_bytes"].as_u64().unwrap();
    let left = local["memory_left_bytes"].as_u64().unwrap();
    // The running agent's 256 MiB limit is reserved, whatever it uses.
    assert!(left <= total - (256 << 20), "{local}");
    assert!(
        local["containers_running"].as_i64().unwrap() >= 1,
        "{local}"
    );
    let big = &local["agents"][0];
    assert_eq!(big["id"], "big", "{local}");
    assert_eq!(big["running"], true, "{local}");
    assert_eq!(big["memory_limit_bytes"], 256 << 20, "{local}");
    let used = big["memory_used_bytes"].as_u64().unwrap();
    assert!(used > 0 && used < 256 << 20, "{local}");
    assert!(
        big["cpu_percent"].as_f64().is_some_and(|c| c >= 0.0),
        "{local}"
    );

    let far = engines
        .iter()
        .find(|e| e["engine"] == "tcp://127.0.0.1:9")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(far["reachable"], false, "{far}");
    assert_eq!(far["agents_defined"], json!(["far"]), "{far}");
    assert!(
        far["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{far}"
    );

    // The CLI: a line per engine, a line per agent; exit 1 since one engine is unreachable.
    let out = tokio::process::Command::new(BIN)
        .args(["engines", "--hub", &hub.base])
        .env("AGENT_HUB_DATA_DIR", hub.data_dir())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("tcp://127.0.0.1:9  UNREACHABLE:"), "{text}");
    assert!(text.contains("  big  running  memory "), "{text}");
    assert!(text.contains("of 256.0 MiB  cpu "), "{text}");
    let out = tokio::process::Command::new(BIN)
        .args(["engines", "--json", "--hub", &hub.base])
        .env("AGENT_HUB_DATA_DIR", hub.data_dir())
        .output()
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["engines"].as_array().map(Vec::len), Some(2), "{v}");
    let (status, v) = hub.post("/v1/agents/big/stop", json!({})).await;
    assert_eq!(status, 200, "{v}");
}
