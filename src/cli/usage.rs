//! `agent-hub usage [AGENT]`: what agents spent (tokens by kind, dollars), read by the hub
//! from their CLIs' own records, for a period: one agent by model, or every agent you may see
//! with each team's and the fleet's totals.

use chrono::{DateTime, Utc};
use clap::Args;

use super::ops::{fail, print_json};
use super::ClientOpts;
use crate::protocol::{AgentUsage, FleetUsageQuery, NamedPeriod, Summary};

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// One agent's figures, by model; without it, every agent you may see.
    pub agent: Option<String>,
    /// Only this team's agents.
    #[arg(long, conflicts_with = "agent")]
    pub team: Option<String>,
    /// From this time on (RFC 3339: 2026-11-27T00:00:00Z).
    #[arg(long)]
    pub since: Option<DateTime<Utc>>,
    /// Up to this time (RFC 3339), excluded.
    #[arg(long)]
    pub until: Option<DateTime<Utc>>,
    /// `today` or `week`: from 00:00 UTC today, from Monday 00:00 UTC (with --since, the
    /// later start).
    #[arg(long, value_parser = parse_period)]
    pub period: Option<NamedPeriod>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

fn parse_period(text: &str) -> Result<NamedPeriod, String> {
    match text {
        "today" => Ok(NamedPeriod::Today),
        "week" => Ok(NamedPeriod::Week),
        _ => Err("today or week".into()),
    }
}

pub async fn run(args: UsageArgs) -> i32 {
    let q = FleetUsageQuery {
        since: args.since,
        until: args.until,
        period: args.period,
        team: args.team.clone(),
    };
    let client = args.opts.client();
    let printed = match &args.agent {
        Some(id) => client.agent_usage(id, &q.period()).await.map(|v| {
            if args.opts.json {
                print_json(&v)
            } else {
                print!("{}", agent_table(&v.agent))
            }
        }),
        None => client.usage(&q).await.map(|v| {
            if args.opts.json {
                print_json(&v)
            } else {
                print!("{}", fleet_table(&v.agents, &v.total))
            }
        }),
    };
    match printed {
        Ok(()) => 0,
        Err(e) => fail(&args.opts, &e),
    }
}

const HEADER: [&str; 7] = [
    "CALLS",
    "INPUT",
    "OUTPUT",
    "CACHE READ",
    "CACHE WRITE",
    "COST",
    "",
];

/// One agent, a row per model.
fn agent_table(a: &AgentUsage) -> String {
    let Some(usage) = &a.usage else {
        return format!(
            "{} (team {}): usage not known: {}\n",
            a.agent_id,
            a.team,
            a.reason.as_deref().unwrap_or("no reason given")
        );
    };
    let mut rows = vec![row("MODEL", HEADER.map(String::from))];
    for m in &usage.by_model {
        let model = m.model.as_deref().unwrap_or("(not named)");
        rows.push(row(model, figures(m.calls, &m.tokens, m.cost_usd)));
    }
    rows.push(total_row(usage));
    format!("{} (team {})\n{}", a.agent_id, a.team, columns(&rows))
}

/// Every agent, a row each, and the total.
fn fleet_table(agents: &[AgentUsage], total: &Summary) -> String {
    let mut rows = vec![{
        let mut r = row("AGENT", HEADER.map(String::from));
        r.insert(1, "TEAM".into());
        r
    }];
    for a in agents {
        let mut r = match &a.usage {
            Some(u) => row(&a.agent_id, figures(u.calls, &u.tokens, Some(u.cost_usd))),
            None => row(&a.agent_id, not_known(a.reason.as_deref())),
        };
        r.insert(1, a.team.clone());
        rows.push(r);
    }
    let mut t = total_row(total);
    t.insert(1, String::new());
    rows.push(t);
    columns(&rows)
}

fn total_row(s: &Summary) -> Vec<String> {
    let mut figures = figures(s.calls, &s.tokens, Some(s.cost_usd));
    if !s.cost_complete {
        figures[6] = "(models without a price left out)".into();
    }
    row("TOTAL", figures)
}

fn figures(calls: u64, t: &crate::protocol::Tokens, cost: Option<f64>) -> [String; 7] {
    [
        calls.to_string(),
        t.input.to_string(),
        t.output.to_string(),
        t.cache_read.to_string(),
        t.cache_write.to_string(),
        cost.map_or("-".into(), |c| format!("${c:.2}")),
        String::new(),
    ]
}

fn not_known(reason: Option<&str>) -> [String; 7] {
    let mut f: [String; 7] = Default::default();
    f[6] = format!("not known: {}", reason.unwrap_or("no reason given"));
    f
}

fn row(first: &str, rest: [String; 7]) -> Vec<String> {
    std::iter::once(first.to_string()).chain(rest).collect()
}

/// The rows in columns as wide as their widest cell, two spaces apart.
pub(super) fn columns(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..cols).map(width).collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| format!("{s:<w$}", w = widths[c]))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ModelSummary, Tokens};

    fn tokens(input: u64, output: u64) -> Tokens {
        Tokens {
            input,
            output,
            ..Tokens::default()
        }
    }

    #[test]
    fn the_fleet_table_has_a_row_per_agent_and_says_what_is_not_known() {
        let used = Summary {
            calls: 2,
            tokens: tokens(1200, 34),
            cost_usd: 0.0123,
            cost_complete: true,
            by_model: vec![],
        };
        let agents = vec![
            AgentUsage {
                agent_id: "alpha".into(),
                team: "core".into(),
                usage: Some(used.clone()),
                reason: None,
            },
            AgentUsage {
                agent_id: "beta".into(),
                team: "docs".into(),
                usage: None,
                reason: Some("the aider profile names no usage records".into()),
            },
        ];
        let text = fleet_table(&agents, &used);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("AGENT  TEAM  CALLS  INPUT  OUTPUT"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("alpha  core  2      1200   34"),
            "{text}"
        );
        assert!(lines[1].ends_with("$0.01"), "{text}");
        assert!(lines[2].contains("not known: the aider profile"), "{text}");
        assert!(lines[3].starts_with("TOTAL"), "{text}");
    }

    #[test]
    fn an_agent_table_has_a_row_per_model_and_marks_an_unpriced_one() {
        let a = AgentUsage {
            agent_id: "alpha".into(),
            team: "core".into(),
            usage: Some(Summary {
                calls: 2,
                tokens: tokens(2, 2),
                cost_usd: 0.5,
                cost_complete: false,
                by_model: vec![
                    ModelSummary {
                        model: Some("claude-x".into()),
                        calls: 1,
                        tokens: tokens(1, 1),
                        cost_usd: Some(0.5),
                    },
                    ModelSummary {
                        model: Some("mystery".into()),
                        calls: 1,
                        tokens: tokens(1, 1),
                        cost_usd: None,
                    },
                ],
            }),
            reason: None,
        };
        let text = agent_table(&a);
        assert!(text.starts_with("alpha (team core)\nMODEL"), "{text}");
        assert!(
            text.contains("claude-x  1      1      1       0           0            $0.50"),
            "{text}"
        );
        assert!(
            text.contains("mystery   1      1      1       0           0            -"),
            "{text}"
        );
        assert!(text.contains("(models without a price left out)"), "{text}");
    }
}
