//! `[teams.NAME]` in hub.toml: what a team has of its own. Its budget, which binds all of the
//! team's agents together (their spending is summed against it), and the engines its agents may
//! be placed on when they name none.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::TomlFileError;
pub use crate::usage::budget::{Budget, BudgetAction};

/// One `[teams.NAME]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamConfig {
    /// What the team's agents may spend together (`docs/usage.md#budgets`).
    pub budget: Option<Spanned<Budget>>,
    /// What an exhausted team budget does to each of its agents: `hold` (default), `stop` or
    /// `notify`.
    #[serde(default)]
    pub budget_action: BudgetAction,
    /// The `docker_hosts` of each of its agents that names no engine of its own.
    #[serde(default)]
    pub docker_hosts: Vec<String>,
}

impl TeamConfig {
    /// The team's budget, if it has one.
    pub fn budget(&self) -> Option<Budget> {
        self.budget.as_ref().map(|b| *b.get_ref())
    }
}

/// `[teams]` as written, by team name.
pub type Teams = BTreeMap<String, Spanned<TeamConfig>>;

/// Checks each team's budget and engines; an error names its place in `text` (read from
/// `origin`).
pub fn check(teams: &Teams, text: &str, origin: &str) -> Result<(), TomlFileError> {
    for (name, team) in teams {
        if let Err(bad) = super::agent::check_hosts(&team.get_ref().docker_hosts) {
            let at = super::field_span(text, team.span(), "docker_hosts");
            let message = format!("teams.{name}.docker_hosts: {bad}");
            return Err(TomlFileError::invalid(text, origin, Some(at), &message));
        }
        let Some(budget) = &team.get_ref().budget else {
            continue;
        };
        if let Err(bad) = budget.get_ref().check() {
            let span = budget.span();
            let at = match bad.field {
                "budget" => span,
                key => super::key_in(text, span.clone(), key).unwrap_or(span),
            };
            let message = format!("teams.{name}.budget: {}", bad.message);
            return Err(TomlFileError::invalid(text, origin, Some(at), &message));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::HubConfig;

    #[test]
    fn team_budgets_are_read_and_bad_ones_refused_at_their_place() {
        let ok = "[teams.red]\nbudget = { usd = 2.5, per = \"week\" }\nbudget_action = \"stop\"\n";
        let config = HubConfig::parse(ok, "hub.toml").unwrap();
        let red = config.teams["red"].get_ref();
        assert_eq!(red.budget().unwrap().usd, Some(2.5));
        assert_eq!(red.budget_action, super::BudgetAction::Stop);
        let bad = [
            (
                "[teams.red]\nbudget = { usd = -2.5 }\n",
                "hub.toml:2:12",
                "usd",
            ),
            (
                "[teams.red]\n\nbudget = { tokens = -1 }\n",
                "hub.toml:3:12",
                "tokens",
            ),
            (
                "[teams.red]\nbudget = { usd = 1.0, per = \"month\" }\n",
                "hub.toml:2:",
                "month",
            ),
            (
                "[teams.red]\nbudget = {}\n",
                "hub.toml:2:10",
                "usd, tokens or both",
            ),
            ("[teams.red]\nbudgett = {}\n", "hub.toml:2:", "budgett"),
            (
                "[teams.red]\n\ndocker_hosts = [\"tcp://a:1\", \"tcp://a:1\"]\n",
                "hub.toml:3:1",
                "teams.red.docker_hosts: tcp://a:1 is named twice",
            ),
        ];
        for (text, at, says) in bad {
            let e = HubConfig::parse(text, "hub.toml").unwrap_err().to_string();
            assert!(e.starts_with(at) && e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn a_teams_docker_hosts_are_those_of_its_agents_that_name_no_engine() {
        let text = "[teams.red]\ndocker_hosts = [\"tcp://a:1\", \"tcp://b:1\"]\n\
                    [teams.default]\ndocker_hosts = [\"tcp://d:1\"]\n\
                    [[agents]]\nid = \"r\"\nimage = \"i\"\nteam = \"red\"\n\
                    [[agents]]\nid = \"own\"\nimage = \"i\"\nteam = \"red\"\ndocker_host = \"tcp://c:1\"\n\
                    [[agents]]\nid = \"list\"\nimage = \"i\"\nteam = \"red\"\ndocker_hosts = [\"tcp://e:1\"]\n\
                    [[agents]]\nid = \"nobody\"\nimage = \"i\"\n";
        let config = HubConfig::parse(text, "hub.toml").unwrap();
        let engines: Vec<(String, Vec<String>)> = config
            .agent_defs()
            .map(|d| {
                let engines = d.engines().into_iter().map(String::from).collect();
                (d.id.clone(), engines)
            })
            .collect();
        assert_eq!(
            engines,
            [
                (
                    "r".to_string(),
                    vec!["tcp://a:1".to_string(), "tcp://b:1".into()]
                ),
                ("own".into(), vec!["tcp://c:1".into()]),
                ("list".into(), vec!["tcp://e:1".into()]),
                ("nobody".into(), vec!["tcp://d:1".into()]),
            ]
        );
        // Both in one definition: refused at load, at the agent.
        let both = "[[agents]]\nid = \"x\"\nimage = \"i\"\ndocker_host = \"tcp://c:1\"\n\
                    docker_hosts = [\"tcp://a:1\"]\n";
        let e = HubConfig::parse(both, "hub.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("hub.toml:5:1: agent 'x': docker_hosts: ") && e.contains("one of them"),
            "{e}"
        );
    }
}
