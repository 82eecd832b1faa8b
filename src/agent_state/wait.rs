//! What a `wait_state` caller waits for: a set of states (`idle`, `blocked`, `limited`,
//! `working`, `exited`, `unknown`) and `stuck`, parsed from `idle,blocked`, and whether a report is one of
//! them. Pure; `Session::wait_state` is the loop that waits.

use super::{AgentStateError, State, StateReport};

/// Every name `wait` accepts, for messages and `help`.
pub const WAITABLE: [&str; 7] = [
    "idle", "blocked", "limited", "working", "stuck", "exited", "unknown",
];

/// The states a caller waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    states: Vec<State>,
    stuck: bool,
}

impl Wanted {
    /// Parses a comma-separated list (`idle,blocked`); at least one name, each known.
    pub fn parse(list: &str) -> Result<Self, AgentStateError> {
        let mut wanted = Wanted::default();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let state = match name {
                "idle" => State::Idle,
                "blocked" => State::Blocked,
                "limited" => State::Limited,
                "working" => State::Working,
                "exited" => State::Exited,
                "unknown" => State::Unknown,
                "stuck" => {
                    wanted.stuck = true;
                    continue;
                }
                other => {
                    return Err(AgentStateError::UnknownWaitState {
                        name: other.to_string(),
                    })
                }
            };
            if !wanted.states.contains(&state) {
                wanted.states.push(state);
            }
        }
        if wanted.states.is_empty() && !wanted.stuck {
            return Err(AgentStateError::NoWaitState);
        }
        Ok(wanted)
    }

    /// Whether `report` is one of the wanted states (`stuck` counts as its own state).
    pub fn reached(&self, report: &StateReport) -> bool {
        self.states.contains(&report.state) || (self.stuck && report.stuck)
    }

    /// Whether the wait is over for good with `report`: reached, or the program exited (an
    /// exited session never changes again).
    pub fn settled(&self, report: &StateReport) -> bool {
        self.reached(report) || report.state == State::Exited
    }

    /// Whether `exited` is among the wanted states.
    pub fn wants(&self, state: State) -> bool {
        self.states.contains(&state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(state: State, stuck: bool) -> StateReport {
        let now = chrono::Utc::now();
        StateReport {
            state,
            since: now,
            stuck,
            rule: String::new(),
            source: String::new(),
            evidence: Vec::new(),
            profile: "shell".into(),
            profile_checked_with: Vec::new(),
            last_activity_at: now,
            idle_for_ms: 0,
            until: None,
        }
    }

    #[test]
    fn parses_lists_and_refuses_unknown_names() {
        let w = Wanted::parse("idle, blocked,idle").unwrap();
        assert_eq!(w.states, vec![State::Idle, State::Blocked]);
        assert!(!w.stuck);
        assert!(Wanted::parse("stuck").unwrap().stuck);
        assert_eq!(
            Wanted::parse("limited").unwrap().states,
            vec![State::Limited]
        );
        assert!(Wanted::parse("")
            .unwrap_err()
            .to_string()
            .contains("at least one"));
        assert!(Wanted::parse(" , ").is_err());
        let e = Wanted::parse("idle,sleeping").unwrap_err().to_string();
        assert!(e.contains("'sleeping'") && e.contains("blocked"), "{e}");
    }

    #[test]
    fn reached_and_settled_table() {
        let idle_or_stuck = Wanted::parse("idle,stuck").unwrap();
        let table = [
            (State::Idle, false, true, true),
            (State::Working, false, false, false),
            (State::Working, true, true, true),
            (State::Blocked, false, false, false),
            (State::Limited, false, false, false),
            (State::Exited, false, false, true),
        ];
        for (state, stuck, reached, settled) in table {
            let r = report(state, stuck);
            assert_eq!(idle_or_stuck.reached(&r), reached, "{state:?} {stuck}");
            assert_eq!(idle_or_stuck.settled(&r), settled, "{state:?} {stuck}");
        }
        assert!(Wanted::parse("exited")
            .unwrap()
            .reached(&report(State::Exited, false)));
    }
}
