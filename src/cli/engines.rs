//! `agent-hub engines`: each Docker engine the agents name, as Docker describes it (health,
//! version, CPUs, memory left) with this hub's agents on it and their memory and CPU. Exit 1
//! when an engine does not answer.

use clap::Args;

use super::ops::{fail, print_json};
use super::ClientOpts;
use crate::protocol::{EngineAgent, EngineView};

#[derive(Debug, Args)]
pub struct EnginesArgs {
    #[command(flatten)]
    pub opts: ClientOpts,
}

pub async fn run(args: EnginesArgs) -> i32 {
    let opts = &args.opts;
    match opts.client().engines().await {
        Ok(v) => {
            if opts.json {
                print_json(&v);
            } else if v.engines.is_empty() {
                println!("no engines: no agent is defined ([agents.ID] in hub.toml)");
            } else {
                print!("{}", text(&v.engines));
            }
            i32::from(v.engines.iter().any(|e| !e.reachable))
        }
        Err(e) => fail(opts, &e),
    }
}

/// An engine's line, then a line per agent of this hub on it.
fn text(engines: &[EngineView]) -> String {
    let mut out = String::new();
    for e in engines {
        out.push_str(&engine_line(e));
        out.push('\n');
        for a in &e.agents {
            out.push_str(&format!("  {}\n", agent_line(a)));
        }
    }
    out
}

fn engine_line(e: &EngineView) -> String {
    if !e.reachable {
        let why = e.error.as_deref().unwrap_or("no answer");
        return format!("{}  UNREACHABLE: {why}", e.engine);
    }
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    format!(
        "{}  ok  docker {}  {} CPUs  memory {} of {} left  {} containers running  {} agents defined  hub binary {}",
        e.engine,
        or_dash(e.server_version.clone()),
        or_dash(e.cpus.map(|c| c.to_string())),
        or_dash(e.memory_left_bytes.map(bytes)),
        or_dash(e.memory_total_bytes.map(bytes)),
        or_dash(e.containers_running.map(|c| c.to_string())),
        e.agents_defined.len(),
        binaries(e)
    )
}

/// The hub builds the engine holds, this hub's marked.
fn binaries(e: &EngineView) -> String {
    match (e.hub_binaries.is_empty(), e.holds_this_build) {
        (true, _) => "none yet".into(),
        (false, Some(false)) => format!("{} (not this hub's)", e.hub_binaries.join(", ")),
        (false, _) => e.hub_binaries.join(", "),
    }
}

fn agent_line(a: &EngineAgent) -> String {
    if !a.running {
        return format!("{}  stopped", a.id);
    }
    let memory = match (a.memory_used_bytes, a.memory_limit_bytes) {
        (Some(u), Some(l)) => format!("memory {} of {}", bytes(u), bytes(l)),
        (Some(u), None) => format!("memory {}", bytes(u)),
        _ => "memory -".into(),
    };
    let cpu = a
        .cpu_percent
        .map_or("cpu -".into(), |c| format!("cpu {c:.1}%"));
    format!("{}  running  {memory}  {cpu}", a.id)
}

/// `512.0 MiB`, `7.6 GiB`.
fn bytes(n: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let mib = n as f64 / MIB;
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_read_as_lines_with_their_agents() {
        let up = EngineView {
            engine: "unix:///var/run/docker.sock".into(),
            reachable: true,
            server_version: Some("26.1.5".into()),
            cpus: Some(2),
            memory_total_bytes: Some(8 << 30),
            memory_left_bytes: Some(6 << 30),
            containers_running: Some(3),
            agents_defined: vec!["a".into(), "b".into()],
            hub_binaries: vec!["0.1.0-0a1b2c3d".into(), "0.1.0-ffff0000".into()],
            holds_this_build: Some(false),
            agents: vec![
                EngineAgent {
                    id: "a".into(),
                    running: true,
                    memory_used_bytes: Some(300 << 20),
                    memory_limit_bytes: Some(1 << 30),
                    cpu_percent: Some(12.5),
                },
                EngineAgent {
                    id: "b".into(),
                    ..EngineAgent::default()
                },
            ],
            ..EngineView::default()
        };
        let down = EngineView {
            engine: "tcp://10.0.0.9:2375".into(),
            error: Some("cannot connect".into()),
            ..EngineView::default()
        };
        assert_eq!(
            text(&[up, down]),
            "unix:///var/run/docker.sock  ok  docker 26.1.5  2 CPUs  memory 6.0 GiB of 8.0 GiB left  3 containers running  2 agents defined  hub binary 0.1.0-0a1b2c3d, 0.1.0-ffff0000 (not this hub's)\n\
             \x20 a  running  memory 300.0 MiB of 1.0 GiB  cpu 12.5%\n\
             \x20 b  stopped\n\
             tcp://10.0.0.9:2375  UNREACHABLE: cannot connect\n"
        );
    }
}
