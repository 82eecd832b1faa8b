//! MCP benchmark: what the MCP layer adds over the same REST call, and how fast `agent-hub mcp`
//! answers after it starts.
//!
//! Run with `cargo bench --bench mcp` (`-- --quick` for fewer iterations). `cargo test
//! --all-targets` also runs this binary, without `--bench`: it then prints one line and exits.
//!
//! One process serves a hub in-process on 127.0.0.1:0 (with an API token, as a hub reachable by
//! agents has) and one host PTY session (`bash --norc`). It measures, interleaved per sample so
//! drift hits every row alike:
//! 1. `read` (the most recent 4 KiB): REST `GET .../read` through the CLI's client; MCP
//!    `k_pty read` through `agent-hub mcp` (stdio, the release binary as a child process) and
//!    through `/mcp` (streamable HTTP), both with rmcp's client;
//! 2. `talk` of `true` (its exit code back), the same three ways;
//! 3. `agent-hub mcp` start-up: spawn to the `initialize` reply, and to the first tool answer
//!    (`k_pty list`, which reaches the hub).
//!
//! Target: MCP adds at most 1 ms at p50 over REST; start-up to the first answer under 50 ms.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_hub::client::HubClient;
use agent_hub::config::HubConfig;
use anyhow::{bail, ensure, Context, Result};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

#[path = "common/mod.rs"]
mod common;

use common::hub::HubUnderTest;
use common::report::verdict;
use common::stats::stats;

const SKIPPED: &str = "mcp benchmark: skipped (run with cargo bench --bench mcp)";
const BIN: &str = env!("CARGO_BIN_EXE_agent-hub");
const TOKEN: &str = "bench-token-0123456789abcdef";
/// MCP may add at most this much to the REST call's p50.
const OVERHEAD_TARGET_MS: f64 = 1.0;
/// `agent-hub mcp` must give its first tool answer within this long of being spawned.
const STARTUP_TARGET_MS: f64 = 50.0;

type Client = RunningService<RoleClient, ()>;

struct Plan {
    samples: usize,
    startups: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("{SKIPPED}");
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let plan = Plan {
        samples: if quick { 100 } else { 1000 },
        startups: if quick { 10 } else { 40 },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Err(e) = runtime.block_on(run(&plan)) {
        eprintln!("mcp benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

/// The three ways to make one call.
#[derive(Clone, Copy)]
enum Way {
    Rest,
    Stdio,
    Http,
}

const WAYS: [Way; 3] = [Way::Rest, Way::Stdio, Way::Http];

impl Way {
    fn label(self) -> &'static str {
        match self {
            Way::Rest => "REST (HubClient)",
            Way::Stdio => "MCP stdio (agent-hub mcp)",
            Way::Http => "MCP streamable HTTP (/mcp)",
        }
    }
}

struct Clients {
    rest: HubClient,
    stdio: Client,
    http: Client,
}

impl Clients {
    /// One `k_pty` call (or its REST twin); the reply must be `ok`.
    async fn call(&self, way: Way, session: &str, args: Value) -> Result<Value> {
        let client = match way {
            Way::Rest => {
                let (method, path, body) = rest_twin(session, &args);
                return self
                    .rest
                    .call(method, &path, body.as_ref())
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"));
            }
            Way::Stdio => &self.stdio,
            Way::Http => &self.http,
        };
        let mut args = args;
        args["session_id"] = json!(session);
        let params = CallToolRequestParams::new("k_pty")
            .with_arguments(args.as_object().cloned().unwrap_or_default());
        let result = client.call_tool(params).await?;
        let body = result.structured_content.unwrap_or_default();
        ensure!(result.is_error != Some(true), "tool error: {body}");
        Ok(body)
    }
}

/// The REST request the MCP action makes (written out here, so the benchmark does not
/// measure the MCP layer against itself).
fn rest_twin(session: &str, args: &Value) -> (reqwest::Method, String, Option<Value>) {
    match args["action"].as_str() {
        Some("read") => (
            reqwest::Method::GET,
            format!("/v1/pty/sessions/{session}/read?max_bytes=4096"),
            None,
        ),
        _ => (
            reqwest::Method::POST,
            format!("/v1/pty/sessions/{session}/talk"),
            Some(json!({ "command": args["command"] })),
        ),
    }
}

async fn run(plan: &Plan) -> Result<()> {
    let data_dir = tempfile::tempdir()?;
    let toml = format!("[[tokens]]\nname = \"bench\"\ntoken = \"{TOKEN}\"\nrole = \"operator\"\n");
    let tokens = HubConfig::parse(&toml, "bench.toml")
        .map_err(anyhow::Error::msg)?
        .tokens;
    let tmux_socket = format!("ah-bench-mcp-{}", std::process::id());
    let config = HubConfig {
        data_dir: data_dir.path().to_path_buf(),
        tmux_socket: tmux_socket.clone(),
        tokens,
        ..HubConfig::default()
    };
    let hut = HubUnderTest::start(config).await?;
    let base = hut.client.base().to_string();

    let rest = HubClient::new(&base).with_token(Some(TOKEN.into()));
    let created: agent_hub::protocol::SessionCreatedReply = rest
        .call(
            reqwest::Method::POST,
            "/v1/pty/sessions",
            Some(
                &json!({"shell": "bash", "args": ["--norc", "--noprofile"], "env": {"PS1": "$ "}}),
            ),
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let session = created.session_id;

    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("mcp")
        .env("AGENT_HUB_URL", &base)
        .env("AGENT_HUB_TOKEN", TOKEN);
    let stdio = ().serve(TokioChildProcess::new(cmd)?).await?;
    let http = ()
        .serve(StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(TOKEN),
        ))
        .await?;
    let clients = Clients { rest, stdio, http };

    println!(
        "# MCP benchmark ({} samples per row, interleaved)\n",
        plan.samples
    );
    println!("| call | way | n | p50 ms | p99 ms | min ms | max ms | MCP - REST at p50 | target | result |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut pass = true;
    for (name, args) in [
        ("read 4 KiB", json!({"action": "read", "max_bytes": 4096})),
        ("talk `true`", json!({"action": "talk", "command": "true"})),
    ] {
        // Warm-up: connections, the shell's first prompt.
        for way in WAYS {
            for _ in 0..10 {
                clients.call(way, &session, args.clone()).await?;
            }
        }
        let mut samples: [Vec<Duration>; 3] = Default::default();
        for _ in 0..plan.samples {
            for (i, way) in WAYS.into_iter().enumerate() {
                let started = Instant::now();
                let reply = clients.call(way, &session, args.clone()).await?;
                samples[i].push(started.elapsed());
                ensure!(reply["ok"] == true, "{reply}");
            }
        }
        let rest_p50 = stats(&samples[0]).p50_ms;
        for (i, way) in WAYS.into_iter().enumerate() {
            let s = stats(&samples[i]);
            let (added, target, result) = match way {
                Way::Rest => ("-".to_string(), "-".to_string(), "-"),
                _ => {
                    let added = s.p50_ms - rest_p50;
                    let ok = added <= OVERHEAD_TARGET_MS;
                    pass &= ok;
                    (
                        format!("{added:+.3}"),
                        format!("<= {OVERHEAD_TARGET_MS} ms"),
                        verdict(ok),
                    )
                }
            };
            println!(
                "| {name} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {added} | {target} | {result} |",
                way.label(),
                s.n,
                s.p50_ms,
                s.p99_ms,
                s.min_ms,
                s.max_ms
            );
        }
    }

    let (init, first) = startup(plan.startups, &base)?;
    let (si, sf) = (stats(&init), stats(&first));
    let ok = sf.p50_ms < STARTUP_TARGET_MS;
    pass &= ok;
    println!(
        "\n| agent-hub mcp start-up | n | p50 ms | p99 ms | min ms | max ms | target | result |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| spawn -> initialize reply | {} | {:.1} | {:.1} | {:.1} | {:.1} | - | - |",
        si.n, si.p50_ms, si.p99_ms, si.min_ms, si.max_ms
    );
    println!(
        "| spawn -> first tool answer (k_pty list) | {} | {:.1} | {:.1} | {:.1} | {:.1} | < {STARTUP_TARGET_MS} ms | {} |",
        sf.n, sf.p50_ms, sf.p99_ms, sf.min_ms, sf.max_ms, verdict(ok)
    );

    clients.stdio.cancel().await?;
    clients.http.cancel().await?;
    hut.stop().await;
    let _ = Command::new("tmux")
        .args(["-L", &tmux_socket, "kill-server"])
        .stderr(Stdio::null())
        .status();
    if !pass {
        bail!("a target was missed");
    }
    Ok(())
}

/// Spawns `agent-hub mcp` `n` times and times, from the spawn, the `initialize` reply and the
/// first `tools/call` reply (a plain JSON-RPC exchange over the pipes, as an agent CLI does).
fn startup(n: usize, base: &str) -> Result<(Vec<Duration>, Vec<Duration>)> {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "k_pty", "arguments": {"action": "list"}}});
    let (mut init, mut first) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let started = Instant::now();
        let mut child = Command::new(BIN)
            .arg("mcp")
            .env("AGENT_HUB_URL", base)
            .env("AGENT_HUB_TOKEN", TOKEN)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut stdin = child.stdin.take().context("stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().context("stdout")?);
        writeln!(stdin, "{initialize}")?;
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        init.push(started.elapsed());
        ensure!(line.contains("\"id\":1"), "initialize reply: {line}");
        writeln!(stdin, "{initialized}\n{list}")?;
        line.clear();
        stdout.read_line(&mut line)?;
        first.push(started.elapsed());
        ensure!(line.contains("\"ok\":true"), "list reply: {line}");
        drop(stdin);
        child.wait()?;
    }
    Ok((init, first))
}
