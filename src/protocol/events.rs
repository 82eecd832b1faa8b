//! Hub events: what `/v1/events` carries, the audit recorder and the lifecycle log read, and
//! the dashboard follows. One casing rule: the event `type` is snake_case, every field name is
//! camelCase (as the task events of the original specification: `task_started {taskId, name,
//! startedAt}`). Every event carries `at`, when the hub published it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PolicyAction, PolicyTrigger, SessionBackend, TaskState};
use crate::agent_state::State;
use crate::session::Owner;

/// One event of the hub's bus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HubEvent {
    /// When the hub published it.
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl HubEvent {
    /// An event published now.
    pub fn now(kind: EventKind) -> Self {
        HubEvent {
            at: Utc::now(),
            kind,
        }
    }

    /// The event's `type` (`session_created`, `policy_stopped`, ...).
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }
}

/// What happened, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum EventKind {
    /// A session was created by a request (or a task, or an agent start).
    SessionCreated(SessionAdded),
    /// A session was brought back after a restart (persistence or adoption).
    SessionRestored(SessionAdded),
    SessionKilled {
        session_id: String,
    },
    /// The agent state of a session changed (`working` → `idle`, ...).
    SessionStateChanged {
        session_id: String,
        agent_id: Option<String>,
        #[schema(value_type = String)]
        state: State,
        #[schema(value_type = String)]
        previous: State,
        since: DateTime<Utc>,
        /// The profile rule that decided the new state.
        rule: String,
        /// When the limit ends, where the screen says (`limited` only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<DateTime<Utc>>,
    },
    OwnershipChanged {
        session_id: String,
        owner: Owner,
    },
    /// A session of another hub (a bridge) was registered.
    SessionRegistered {
        session_id: String,
        bridge_url: String,
        owner: Owner,
    },
    SessionUnregistered {
        session_id: String,
        forced: bool,
    },
    RegistryReset {
        /// Ids of the external sessions unregistered.
        unregistered: Vec<String>,
        /// Ids of the exited sessions forgotten.
        forgotten_exited: Vec<String>,
    },
    AgentStarting(AgentEvent),
    AgentStarted(AgentEvent),
    AgentStartFailed(AgentEvent),
    AgentStopping(AgentEvent),
    AgentStopped(AgentEvent),
    /// The agent's container ended without the hub asking.
    AgentExited(AgentEvent),
    /// A running container was found again (after a hub restart) and re-attached.
    AgentAttached(AgentEvent),
    AgentAttachFailed(AgentEvent),
    /// An agent's work summary changed (computed at a turn's end, a start, a stop, or on
    /// request); `work` is what `GET /v1/agents` now shows for it (null: its checkout is gone).
    WorkChanged {
        agent_id: String,
        work: Option<crate::workspace::WorkSummary>,
    },
    PolicyWarned(PolicyEvent),
    PolicyStopped(PolicyEvent),
    PolicyRestarted(PolicyEvent),
    PolicyNotified(PolicyEvent),
    PolicyInterrupted(PolicyEvent),
    /// `on_limit = "wait"` sent the profile's continue line: the agent's limit is over.
    PolicyContinued(PolicyEvent),
    /// A policy's action could not be carried out.
    PolicyActionFailed {
        agent_id: Option<String>,
        session_id: String,
        policy: String,
        action: PolicyAction,
        reason: String,
        dry_run: bool,
    },
    /// `start_on_message` started a stopped agent for a line sent to it.
    PolicyStarted {
        agent_id: String,
        policy: Option<String>,
        reason: String,
        dry_run: bool,
    },
    /// A budget reached 80 % of a cap in its period (sent once per period).
    BudgetWarned(BudgetEvent),
    /// A budget reached a cap in its period (sent once per period): its `action` is taken.
    BudgetExhausted(BudgetEvent),
    PoliciesReloaded {
        policies: Vec<String>,
        profiles: Vec<String>,
    },
    PoliciesReloadFailed {
        reason: String,
    },
    /// A webhook message was given up after its retries (kept in the webhook's dead letters).
    NotifyGaveUp {
        /// The webhook's name (`[[notify]]` `name`, else `notify[N] HOST`).
        webhook: String,
        /// What the message told of (`blocked`, `turn_finished`, ...).
        event: String,
        agent_id: Option<String>,
        session_id: Option<String>,
        attempts: u32,
        reason: String,
    },
    TaskStarted {
        task_id: String,
        name: String,
        started_at: DateTime<Utc>,
        session_id: Option<String>,
    },
    /// Output of a task, in order (redacted).
    TaskLog {
        task_id: String,
        chunk: String,
        /// `stdout` or `stderr` for piped tasks; absent for PTY tasks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<String>,
        /// Output the hub could not keep up with, dropped before this chunk.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dropped_bytes: Option<u64>,
    },
    TaskFinished {
        task_id: String,
        state: TaskState,
        exit_code: Option<i32>,
        duration_ms: u64,
    },
}

/// A session joining the registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionAdded {
    pub session_id: String,
    pub backend: SessionBackend,
    /// `host`, `container` or `external`.
    pub source: String,
    pub agent_id: Option<String>,
    pub owner: Owner,
}

/// A step in a container agent's life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentEvent {
    pub agent_id: String,
    pub detail: String,
}

/// A budget crossing a threshold: whose, which budget, what was spent, when it renews.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetEvent {
    pub scope: super::usage::BudgetScope,
    /// The agent's id, or the team's name.
    pub name: String,
    /// The agent, for an agent's budget.
    pub agent_id: Option<String>,
    /// The team, for a team's budget.
    pub team: Option<String>,
    /// `policy:NAME`, `team` or `set`.
    pub source: String,
    pub budget_usd: Option<f64>,
    pub budget_tokens: Option<i64>,
    pub per: super::usage::Per,
    pub action: super::usage::BudgetAction,
    /// The larger of spent/cap for dollars and tokens.
    pub used: f64,
    pub spent_usd: f64,
    pub spent_tokens: u64,
    /// When the budget renews; `null` for a `total` budget.
    pub renews_at: Option<DateTime<Utc>>,
}

impl BudgetEvent {
    /// The event for `view`.
    pub fn of(view: &super::usage::BudgetView) -> Self {
        let agent = view.scope == super::usage::BudgetScope::Agent;
        BudgetEvent {
            scope: view.scope,
            name: view.name.clone(),
            agent_id: agent.then(|| view.name.clone()),
            team: (!agent).then(|| view.name.clone()),
            source: view.source.clone(),
            budget_usd: view.budget.usd,
            budget_tokens: view.budget.tokens,
            per: view.budget.per,
            action: view.action,
            used: view.standing.used,
            spent_usd: view.standing.spent_usd,
            spent_tokens: view.standing.spent_tokens,
            renews_at: view.standing.renews_at,
        }
    }
}

/// A policy acting on a session (or saying what it would do, with `dryRun`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEvent {
    pub agent_id: Option<String>,
    pub session_id: String,
    pub policy: String,
    pub action: PolicyAction,
    pub trigger: Option<PolicyTrigger>,
    pub reason: String,
    #[schema(value_type = String)]
    pub state: State,
    pub idle_for_ms: u64,
    pub dry_run: bool,
}

impl EventKind {
    /// The event for a policy verdict's action (`None` for no action).
    pub fn policy(action: PolicyAction, event: PolicyEvent) -> Option<Self> {
        Some(match action {
            PolicyAction::Warn => EventKind::PolicyWarned(event),
            PolicyAction::Stop => EventKind::PolicyStopped(event),
            PolicyAction::Restart => EventKind::PolicyRestarted(event),
            PolicyAction::Notify => EventKind::PolicyNotified(event),
            PolicyAction::Interrupt => EventKind::PolicyInterrupted(event),
            PolicyAction::Continue => EventKind::PolicyContinued(event),
            PolicyAction::None => return None,
        })
    }

    /// The `type` tag.
    pub fn type_name(&self) -> &'static str {
        use EventKind::*;
        match self {
            SessionCreated(_) => "session_created",
            SessionRestored(_) => "session_restored",
            SessionKilled { .. } => "session_killed",
            SessionStateChanged { .. } => "session_state_changed",
            OwnershipChanged { .. } => "ownership_changed",
            SessionRegistered { .. } => "session_registered",
            SessionUnregistered { .. } => "session_unregistered",
            RegistryReset { .. } => "registry_reset",
            AgentStarting(_) => "agent_starting",
            AgentStarted(_) => "agent_started",
            AgentStartFailed(_) => "agent_start_failed",
            AgentStopping(_) => "agent_stopping",
            AgentStopped(_) => "agent_stopped",
            AgentExited(_) => "agent_exited",
            AgentAttached(_) => "agent_attached",
            AgentAttachFailed(_) => "agent_attach_failed",
            WorkChanged { .. } => "work_changed",
            PolicyWarned(_) => "policy_warned",
            PolicyStopped(_) => "policy_stopped",
            PolicyRestarted(_) => "policy_restarted",
            PolicyNotified(_) => "policy_notified",
            PolicyInterrupted(_) => "policy_interrupted",
            PolicyContinued(_) => "policy_continued",
            PolicyActionFailed { .. } => "policy_action_failed",
            PolicyStarted { .. } => "policy_started",
            BudgetWarned(_) => "budget_warned",
            BudgetExhausted(_) => "budget_exhausted",
            PoliciesReloaded { .. } => "policies_reloaded",
            PoliciesReloadFailed { .. } => "policies_reload_failed",
            NotifyGaveUp { .. } => "notify_gave_up",
            TaskStarted { .. } => "task_started",
            TaskLog { .. } => "task_log",
            TaskFinished { .. } => "task_finished",
        }
    }

    /// The session the event is about, if any.
    pub fn session_id(&self) -> Option<&str> {
        use EventKind::*;
        match self {
            SessionCreated(a) | SessionRestored(a) => Some(&a.session_id),
            SessionKilled { session_id }
            | SessionStateChanged { session_id, .. }
            | OwnershipChanged { session_id, .. }
            | SessionRegistered { session_id, .. }
            | SessionUnregistered { session_id, .. }
            | PolicyActionFailed { session_id, .. } => Some(session_id),
            PolicyWarned(p) | PolicyStopped(p) | PolicyRestarted(p) | PolicyNotified(p)
            | PolicyInterrupted(p) | PolicyContinued(p) => Some(&p.session_id),
            TaskStarted { session_id, .. } | NotifyGaveUp { session_id, .. } => {
                session_id.as_deref()
            }
            _ => None,
        }
    }

    /// The container agent the event is about, if any.
    pub fn agent_id(&self) -> Option<&str> {
        use EventKind::*;
        match self {
            SessionCreated(a) | SessionRestored(a) => a.agent_id.as_deref(),
            SessionStateChanged { agent_id, .. } | PolicyActionFailed { agent_id, .. } => {
                agent_id.as_deref()
            }
            AgentStarting(a) | AgentStarted(a) | AgentStartFailed(a) | AgentStopping(a)
            | AgentStopped(a) | AgentExited(a) | AgentAttached(a) | AgentAttachFailed(a) => {
                Some(&a.agent_id)
            }
            PolicyWarned(p) | PolicyStopped(p) | PolicyRestarted(p) | PolicyNotified(p)
            | PolicyInterrupted(p) | PolicyContinued(p) => p.agent_id.as_deref(),
            PolicyStarted { agent_id, .. } | WorkChanged { agent_id, .. } => Some(agent_id),
            BudgetWarned(b) | BudgetExhausted(b) => b.agent_id.as_deref(),
            NotifyGaveUp { agent_id, .. } => agent_id.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind) -> serde_json::Value {
        serde_json::to_value(HubEvent::now(kind)).unwrap()
    }

    #[test]
    fn every_field_is_camel_case_and_the_type_is_the_tag() {
        let v = event(EventKind::TaskFinished {
            task_id: "t1".into(),
            state: TaskState::Success,
            exit_code: Some(0),
            duration_ms: 12,
        });
        assert_eq!(v["type"], "task_finished");
        assert_eq!(v["taskId"], "t1");
        assert_eq!(v["exitCode"], 0);
        assert_eq!(v["durationMs"], 12);
        assert!(v["at"].is_string());
        let v = event(EventKind::AgentStarted(AgentEvent {
            agent_id: "a".into(),
            detail: "running".into(),
        }));
        assert_eq!(
            (v["type"].as_str(), v["agentId"].as_str()),
            (Some("agent_started"), Some("a"))
        );
        let v = event(EventKind::SessionKilled {
            session_id: "pty_1".into(),
        });
        assert_eq!(v["sessionId"], "pty_1");
    }

    #[test]
    fn type_name_is_the_serialized_tag_and_events_read_back() {
        let kinds = [
            EventKind::PoliciesReloadFailed { reason: "x".into() },
            EventKind::PolicyStopped(PolicyEvent {
                agent_id: Some("a".into()),
                session_id: "s".into(),
                policy: "p".into(),
                action: PolicyAction::Stop,
                trigger: Some(PolicyTrigger::IdleTimeout),
                reason: "idle".into(),
                state: State::Idle,
                idle_for_ms: 5,
                dry_run: false,
            }),
            EventKind::TaskLog {
                task_id: "t".into(),
                chunk: "out".into(),
                stream: None,
                dropped_bytes: Some(3),
            },
        ];
        for kind in kinds {
            let e = HubEvent::now(kind);
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(v["type"], e.type_name());
            let back: HubEvent = serde_json::from_value(v).unwrap();
            assert_eq!(back, e);
        }
    }

    #[test]
    fn a_verdict_without_action_is_no_event() {
        let p = PolicyEvent {
            agent_id: None,
            session_id: "s".into(),
            policy: "p".into(),
            action: PolicyAction::None,
            trigger: None,
            reason: String::new(),
            state: State::Idle,
            idle_for_ms: 0,
            dry_run: true,
        };
        assert!(EventKind::policy(PolicyAction::None, p.clone()).is_none());
        let warned = EventKind::policy(PolicyAction::Warn, p).unwrap();
        assert_eq!(warned.type_name(), "policy_warned");
        assert_eq!(warned.session_id(), Some("s"));
    }
}
