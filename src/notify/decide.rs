//! The notifier's decisions, pure: which hub event makes which message ([`decide`], with the
//! [`History`] of the sessions' states), and whether a webhook takes it ([`admit`]: its
//! events, its teams and its `min_interval_s`).

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::message::{human_duration, link, AgentRef, Message};
use crate::agent_state::question::Choice;
use crate::agent_state::State;
use crate::config::notify::{NotifyConfig, NotifyEvent};
use crate::protocol::{BudgetEvent, EventKind, HubEvent, PolicyEvent};

/// What the hub knows of an event's agent when the notifier handles it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// Label and team filled in (the ids come from the event).
    pub agent: AgentRef,
    /// The question and its choices, while the agent is blocked on it.
    pub question: Option<(String, Vec<Choice>)>,
    /// The last non-blank lines of the screen, redacted.
    pub last_lines: Vec<String>,
    /// When input was last written to the session.
    pub last_input_at: Option<DateTime<Utc>>,
    /// The session runs an agent (a container agent's, or one read by an agent's profile), not
    /// a plain shell or a task: only an agent's states are told of.
    pub agent_session: bool,
}

/// What the notifier remembers of each session, by session id.
#[derive(Debug, Default)]
pub struct History {
    /// Since when each session is in its current state.
    state_since: HashMap<String, DateTime<Utc>>,
    /// The input each session's last finished turn answered (a turn is told of once).
    turn_input: HashMap<String, DateTime<Utc>>,
}

/// Whether the notifier needs to know more of `event`'s agent (its [`Facts`]) to decide.
pub fn needs_facts(event: &HubEvent) -> bool {
    use EventKind::*;
    match &event.kind {
        SessionStateChanged { state, .. } => !matches!(state, State::Working | State::Unknown),
        _ => matches!(
            &event.kind,
            AgentExited(_)
                | AgentStartFailed(_)
                | PolicyStopped(_)
                | PolicyNotified(_)
                | BudgetExhausted(_)
                | BudgetWarned(_)
        ),
    }
}

/// The message `event` makes, if any; every state change is remembered in `history`.
/// `dashboard` is where links point.
pub fn decide(
    event: &HubEvent,
    facts: &Facts,
    history: &mut History,
    dashboard: &str,
) -> Option<Message> {
    use EventKind::*;
    let draft = match &event.kind {
        SessionStateChanged {
            session_id,
            agent_id,
            state,
            previous,
            since,
            ..
        } => {
            let change = Change {
                session_id,
                host_session: agent_id.is_none(),
                state: *state,
                previous: *previous,
                since: *since,
            };
            state_change(&change, facts, history)?
        }
        AgentExited(a) => Draft::new(NotifyEvent::Exited, "exited on its own").detail(&a.detail),
        AgentStartFailed(a) => {
            Draft::new(NotifyEvent::StartFailed, "could not start").detail(&a.detail)
        }
        PolicyStopped(p) if !p.dry_run => policy(NotifyEvent::PolicyStopped, "was stopped", p),
        PolicyNotified(p) if !p.dry_run => policy(NotifyEvent::PolicyNotified, "needs you", p),
        BudgetExhausted(b) => budget(NotifyEvent::BudgetExhausted, "spent its budget", b),
        BudgetWarned(b) => budget(NotifyEvent::BudgetWarned, "spent 80 % of its budget", b),
        _ => return None,
    };
    Some(draft.finish(event, facts, dashboard))
}

/// A session's state change, as [`decide`] reads it.
struct Change<'a> {
    session_id: &'a str,
    /// A host session (no container agent: its exit is told here, a container's by
    /// `agent_exited`, which a stop on request does not publish).
    host_session: bool,
    state: State,
    previous: State,
    since: DateTime<Utc>,
}

fn state_change(change: &Change, facts: &Facts, history: &mut History) -> Option<Draft> {
    let before = history
        .state_since
        .insert(change.session_id.to_string(), change.since);
    let for_ms = before.map(|t| (change.since - t).num_milliseconds().max(0) as u64);
    let after = |what: &str| match (for_ms, change.previous) {
        // Under a second of work is the hold after input, not work worth naming.
        (Some(ms), State::Working) if ms >= 1000 => {
            format!("{what} after {} of work", human_duration(ms))
        }
        _ => what.to_string(),
    };
    if !facts.agent_session {
        return None;
    }
    let mut draft = match change.state {
        State::Blocked => {
            let mut d = Draft::new(NotifyEvent::Blocked, &after("asks a question"));
            d.question = facts.question.clone();
            d
        }
        State::Limited => Draft::new(NotifyEvent::Limited, &after("is held by a usage limit")),
        State::Exited if change.host_session => Draft::new(NotifyEvent::Exited, "exited"),
        State::Idle if change.previous == State::Working => {
            let input = facts.last_input_at?;
            let told = history
                .turn_input
                .insert(change.session_id.to_string(), input);
            if told == Some(input) {
                return None;
            }
            Draft::new(NotifyEvent::TurnFinished, &after("finished its turn"))
        }
        _ => return None,
    };
    draft.since = Some(change.since);
    draft.for_ms = for_ms;
    Some(draft)
}

fn policy(kind: NotifyEvent, what: &str, p: &PolicyEvent) -> Draft {
    let mut d = Draft::new(
        kind,
        &format!(
            "{what} by policy {} after {} idle",
            p.policy,
            human_duration(p.idle_for_ms)
        ),
    )
    .detail(&p.reason);
    d.for_ms = Some(p.idle_for_ms);
    d
}

fn budget(kind: NotifyEvent, what: &str, b: &BudgetEvent) -> Draft {
    let mut spent = format!("${:.2}", b.spent_usd);
    if let Some(cap) = b.budget_usd {
        spent.push_str(&format!(" of ${cap:.2}"));
    }
    let whose = match &b.team {
        Some(team) if b.agent_id.is_none() => format!("team {team} "),
        _ => String::new(),
    };
    let mut d = Draft::new(kind, &format!("{whose}{what} ({spent})"))
        .detail(&format!("budget action: {:?}", b.action).to_lowercase());
    d.team = b.team.clone();
    d
}

/// A message before the agent and the link are put in.
struct Draft {
    kind: NotifyEvent,
    what: String,
    since: Option<DateTime<Utc>>,
    for_ms: Option<u64>,
    question: Option<(String, Vec<Choice>)>,
    detail: Option<String>,
    /// The team the event names (a team's budget), over the agent's.
    team: Option<String>,
}

impl Draft {
    fn new(kind: NotifyEvent, what: &str) -> Self {
        Draft {
            kind,
            what: what.to_string(),
            since: None,
            for_ms: None,
            question: None,
            detail: None,
            team: None,
        }
    }

    fn detail(mut self, detail: &str) -> Self {
        self.detail = (!detail.trim().is_empty()).then(|| detail.to_string());
        self
    }

    fn finish(self, event: &HubEvent, facts: &Facts, dashboard: &str) -> Message {
        let session_id = event.kind.session_id().map(String::from);
        let agent_id = event.kind.agent_id().map(String::from);
        let mut agent = facts.agent.clone();
        agent.id = agent_id
            .clone()
            .or(session_id.clone())
            .or(self.team.clone())
            .unwrap_or_default();
        agent.session_id = session_id.clone().or(agent.session_id);
        agent.team = self.team.or(agent.team);
        let (question, choices) = self.question.unzip();
        Message {
            event: self.kind,
            link: link(dashboard, agent_id.as_deref(), agent.session_id.as_deref()),
            agent,
            what: self.what,
            at: event.at,
            since: self.since,
            for_ms: self.for_ms,
            question,
            choices: choices.unwrap_or_default(),
            last_lines: facts.last_lines.clone(),
            detail: self.detail,
            answers: Vec::new(),
        }
    }
}

/// Whether `message` tells of a question not yet read from the screen (the agent's own signal
/// said `blocked` first): worth a short wait for the screen.
pub fn awaits_question(message: &Message) -> bool {
    message.event == NotifyEvent::Blocked
        && message.question.is_none()
        && message.agent.session_id.is_some()
}

/// When each agent was last told of each kind of event, for one webhook.
pub type Sent = HashMap<(String, NotifyEvent), DateTime<Utc>>;

/// Whether `hook` takes `message` at `now`: it names the event, the agent is of one of its
/// teams, and the agent was not told of the same kind within `min_interval_s` (then the
/// message is remembered in `sent`). A test message always passes.
pub fn admit(hook: &NotifyConfig, message: &Message, sent: &mut Sent, now: DateTime<Utc>) -> bool {
    if message.event == NotifyEvent::Test {
        return true;
    }
    if !hook.events.contains(&message.event) {
        return false;
    }
    let team_ok = hook.teams.is_empty()
        || message
            .agent
            .team
            .as_ref()
            .is_some_and(|t| hook.teams.contains(t));
    if !team_ok {
        return false;
    }
    let key = (message.agent.id.clone(), message.event);
    let interval = chrono::Duration::seconds(hook.min_interval_s.min(i64::MAX as u64) as i64);
    if sent.get(&key).is_some_and(|last| now - *last < interval) {
        return false;
    }
    sent.insert(key, now);
    true
}

#[cfg(test)]
mod tests;
