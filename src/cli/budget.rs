//! `agent-hub budget`: the budgets in force (each agent's policy's, each team's) and where
//! each stands; `set`, `lift` and `reset` change one at run time (an admin's token; audited).

use clap::{Args, Subcommand};

use super::ops::{fail, print_json};
use super::ClientOpts;
use crate::client::BudgetChange;
use crate::http_client::encode;
use crate::protocol::{Budget, BudgetView, Per};

#[derive(Debug, Args)]
pub struct BudgetArgs {
    #[command(subcommand)]
    pub command: Option<BudgetCommand>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Whose budget: an agent's, or (with --team) a team's.
#[derive(Debug, Args)]
pub struct Whose {
    /// The agent's id.
    #[arg(required_unless_present = "team", conflicts_with = "team")]
    pub agent: Option<String>,
    /// A team's budget (all its agents' spending together) instead of an agent's.
    #[arg(long)]
    pub team: Option<String>,
}

impl Whose {
    fn path(&self) -> String {
        match (&self.agent, &self.team) {
            (_, Some(team)) => format!("teams/{}", encode(team)),
            (Some(agent), None) => format!("agents/{}", encode(agent)),
            (None, None) => unreachable!("clap requires an agent or --team"),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum BudgetCommand {
    /// Set a budget in place of the written one (the policy's, or hub.toml's for a team) until
    /// `reset`; its 80 % and 100 % events are sent afresh. Give --usd, --tokens or both.
    Set {
        #[command(flatten)]
        whose: Whose,
        /// Dollars per period.
        #[arg(long, required_unless_present = "tokens")]
        usd: Option<f64>,
        /// Tokens per period (input, output, cache read and cache write together).
        #[arg(long)]
        tokens: Option<i64>,
        /// The period it renews by: hour, day, week or total (never renews).
        #[arg(long, default_value = "day", value_parser = parse_per)]
        per: Per,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Lift an exhausted budget until it renews (a total budget: until reset): nothing is
    /// refused or stopped meanwhile.
    Lift {
        #[command(flatten)]
        whose: Whose,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Drop the run-time changes: the written budget is in force again, not lifted.
    Reset {
        #[command(flatten)]
        whose: Whose,
        #[command(flatten)]
        opts: ClientOpts,
    },
}

fn parse_per(text: &str) -> Result<Per, String> {
    serde_json::from_value(serde_json::json!(text)).map_err(|_| "hour, day, week or total".into())
}

pub async fn run(args: BudgetArgs) -> i32 {
    let (whose, change, opts) = match args.command {
        None => return list(&args.opts).await,
        Some(BudgetCommand::Set {
            whose,
            usd,
            tokens,
            per,
            opts,
        }) => (whose, BudgetChange::Set(Budget { usd, tokens, per }), opts),
        Some(BudgetCommand::Lift { whose, opts }) => (whose, BudgetChange::Lift, opts),
        Some(BudgetCommand::Reset { whose, opts }) => (whose, BudgetChange::Reset, opts),
    };
    match opts.client().change_budget(&whose.path(), change).await {
        Ok(v) if opts.json => {
            print_json(&v);
            0
        }
        Ok(v) => {
            match &v.budget {
                Some(b) => print!("{}", table(std::slice::from_ref(b))),
                None => println!("no budget in force"),
            }
            0
        }
        Err(e) => fail(&opts, &e),
    }
}

async fn list(opts: &ClientOpts) -> i32 {
    match opts.client().budgets().await {
        Ok(v) if opts.json => {
            print_json(&v);
            0
        }
        Ok(v) if v.budgets.is_empty() => {
            println!("no budgets (a policy's `budget`, or [teams.NAME] budget in hub.toml)");
            0
        }
        Ok(v) => {
            print!("{}", table(&v.budgets));
            0
        }
        Err(e) => fail(opts, &e),
    }
}

/// One row per budget: whose, the caps, what was spent, the action and the state of it.
fn table(views: &[BudgetView]) -> String {
    let mut rows = vec![[
        "WHOSE", "BUDGET", "SOURCE", "SPENT", "USED", "ACTION", "NOW", "RENEWS",
    ]
    .map(String::from)
    .to_vec()];
    for v in views {
        let whose = match v.scope {
            crate::protocol::BudgetScope::Agent => v.name.clone(),
            crate::protocol::BudgetScope::Team => format!("team {}", v.name),
        };
        let now = match (v.refusing, v.lifted, v.standing.level) {
            (true, _, _) => "refusing",
            (_, true, _) => "lifted",
            (_, _, crate::protocol::BudgetLevel::Exhausted) => "exhausted",
            (_, _, crate::protocol::BudgetLevel::Warned) => "over 80 %",
            _ => "ok",
        };
        let action = serde_json::to_value(v.action).unwrap_or_default();
        rows.push(vec![
            whose,
            crate::policy::budgets::caps(&v.budget),
            v.source.clone(),
            format!(
                "${:.2}, {} tokens",
                v.standing.spent_usd, v.standing.spent_tokens
            ),
            format!("{:.0} %", v.standing.used * 100.0),
            action.as_str().unwrap_or("?").to_string(),
            now.to_string(),
            v.standing.renews_at.map_or("never".into(), |t| {
                t.format("%Y-%m-%d %H:%M UTC").to_string()
            }),
        ]);
    }
    super::usage::columns(&rows)
}
