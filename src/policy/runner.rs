//! The one policy loop: every [`TICK`] it looks at each session that has a policy, asks
//! [`super::evaluate`] what to do, reports the decision as an event (`policy_warned`,
//! `policy_stopped`, ..., with the reason and `dry_run`), and applies it unless the policy is a
//! dry run. Actions that take time (stopping a container) run beside the loop, never in it.
//! [`PolicyRunner::check`] is the same evaluation without acting (`agent-hub policy check`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::{Action, Policy, PolicyError, Snapshot, Verdict, WarnTo};
use crate::agent_state::StateReport;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agents::Agents;
use crate::config::HubConfig;
use crate::event_bus::EventSink;
use crate::protocol::{EventKind, PolicyEvent};
use crate::registry::{Registry, SessionRegistry};
use crate::session::Session;

/// How often the loop evaluates: well inside the promised 1 s accuracy.
pub const TICK: Duration = Duration::from_millis(250);

/// How often budgets are judged (`budget_check`): the ledger reads the agents' records once a
/// second.
pub const BUDGET_TICK: Duration = Duration::from_secs(1);

/// One session under a policy, as the loop sees it.
struct Unit {
    /// The agent id for container agents, else the session id: what memory is kept by.
    key: String,
    session: Arc<Session>,
    policy: Policy,
    snapshot: Snapshot,
    report: StateReport,
}

pub use crate::protocol::CheckRow;

/// The policy runner component: the sessions and agents it watches and acts on, the policies,
/// and where it reports. Cheap to clone.
#[derive(Clone)]
pub struct PolicyRunner {
    pub sessions: Arc<Registry>,
    pub agents: Arc<Agents>,
    pub engine: Arc<super::Engine>,
    pub events: EventSink,
    pub metrics: crate::metrics::Metrics,
    /// A line sent to an agent passes it before the agent is started for it.
    pub guard: Arc<crate::guard::Guard>,
    /// Where the policies are loaded from (see [`PolicyRunner::reload`]).
    pub config: Arc<HubConfig>,
    /// The budgets in force and their run-time changes.
    pub budgets: Arc<super::budgets::Budgets>,
    /// What each agent spent, for the budgets.
    pub ledger: Arc<crate::ledger::Ledger>,
}

impl PolicyRunner {
    /// Starts the loop on `tracker`; it ends when `closing` is cancelled. Actions that take
    /// time run beside it, on the same tracker.
    pub fn start(self, tracker: &TaskTracker, closing: CancellationToken) {
        let actions = tracker.clone();
        tracker.spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut budget_tick = tokio::time::interval(BUDGET_TICK);
            budget_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = closing.cancelled() => return,
                    _ = tick.tick() => self.run_once(&actions).await,
                    _ = budget_tick.tick() => self.check_budgets(&actions).await,
                }
            }
        });
    }

    /// Gives every session its profile again (after a reload) and returns those under a policy.
    fn units(&self) -> Vec<Unit> {
        let engine = &self.engine;
        let mut out = Vec::new();
        for session in self.sessions.list() {
            let owner = session.owner();
            session.set_profile(engine.profile_for(owner.cli_type.as_deref()));
            let Some(policy) = session
                .spec()
                .policy
                .as_deref()
                .and_then(|p| engine.policy(p))
            else {
                continue;
            };
            let report = session.state_report();
            let snapshot = Snapshot {
                state: report.state,
                stuck: report.stuck,
                last_activity_at: session.last_activity_instant(),
                last_input_at: session.last_input_instant(),
                started_at: session.started_at(),
                label: owner.label.clone(),
                role: owner.owner_role.clone(),
            };
            let key = session
                .spec()
                .agent_id
                .clone()
                .unwrap_or_else(|| session.id().to_string());
            out.push(Unit {
                key,
                session,
                policy,
                snapshot,
                report,
            });
        }
        // An agent that was restarted has an old, exited session too: the live one counts.
        out.sort_by_key(|u| {
            (
                u.key.clone(),
                u.report.state == crate::agent_state::State::Exited,
            )
        });
        out.dedup_by(|later, earlier| later.key == earlier.key);
        out
    }

    /// One evaluation of every session under a policy, acting on the verdicts (actions run on
    /// `actions`).
    pub async fn run_once(&self, actions: &TaskTracker) {
        let now = Instant::now();
        let units = self.units();
        self.engine
            .retain_memory(&units.iter().map(|u| u.key.clone()).collect());
        // Prompts waiting for rest go to any session, under a policy or not.
        self.deliver_queued(actions);
        for unit in units {
            let mut memory = self.engine.memory(&unit.key);
            let limit_before = memory.limit;
            self.wait_out_limit(
                &unit.key,
                &unit.session,
                &unit.policy,
                &unit.report,
                &mut memory.limit,
                actions,
            );
            if memory.limit != limit_before {
                self.engine.set_memory(&unit.key, memory.clone());
            }
            let verdict = super::evaluate(&unit.policy, &unit.snapshot, &memory, now);
            let Some(event) = verdict.event else { continue };
            verdict.remember(&unit.snapshot, &mut memory);
            self.engine.set_memory(&unit.key, memory);
            let agent_id = unit.session.spec().agent_id.clone();
            tracing::info!(
                session = unit.session.id(),
                policy = %unit.policy.name,
                dry_run = unit.policy.dry_run,
                "{event}: {}",
                verdict.reason
            );
            let acted = PolicyEvent {
                agent_id,
                session_id: unit.session.id().to_string(),
                policy: unit.policy.name.clone(),
                action: verdict.action,
                trigger: verdict.trigger,
                reason: verdict.reason.clone(),
                state: unit.report.state,
                idle_for_ms: now
                    .saturating_duration_since(unit.snapshot.last_activity_at)
                    .as_millis() as u64,
                dry_run: unit.policy.dry_run,
            };
            if let Some(kind) = EventKind::policy(verdict.action, acted) {
                self.events.emit(kind);
            }
            let action = json!(verdict.action);
            self.metrics
                .policy_action(action.as_str().unwrap_or("unknown"), unit.policy.dry_run);
            if !unit.policy.dry_run {
                actions.spawn(self.clone().apply(unit, verdict));
            }
        }
    }

    async fn apply(self, unit: Unit, verdict: Verdict) {
        let session = &unit.session;
        let agent = session.spec().agent_id.clone();
        let stops = matches!(verdict.action, Action::Stop | Action::Restart);
        if stops && session.last_input_instant() != unit.snapshot.last_input_at {
            // Someone sent the agent something since the decision (a prompt delivered in the
            // meantime): it is no longer idle, and the next tick decides again.
            return;
        }
        let result: Result<(), PolicyError> = match verdict.action {
            Action::None | Action::Notify | Action::Continue => Ok(()),
            Action::Warn => match (&unit.policy.warn_line, unit.policy.warn_to) {
                (None, _) => Ok(()),
                (Some(line), WarnTo::Agent) => deliver(session, line).await,
                (Some(line), WarnTo::Leader) => match session.owner().owner_session_id {
                    Some(leader) => match self.sessions.session(&leader) {
                        Some(s) => deliver(&s, line).await,
                        None => Err(PolicyError::LeaderGone { leader }),
                    },
                    None => Err(PolicyError::NoLeader),
                },
            },
            Action::Stop => match &agent {
                Some(id) => self.agents.stop(id).await.map(|_| ()).map_err(Into::into),
                None => match self.sessions.kill(session.id()).await {
                    Ok((_, result)) => result.map_err(Into::into),
                    Err(e) => Err(e.into()),
                },
            },
            Action::Restart => match &agent {
                Some(id) => self
                    .agents
                    .restart(id, false)
                    .await
                    .map(|_| ())
                    .map_err(Into::into),
                None => Err(PolicyError::HostRestart),
            },
            Action::Interrupt => session
                .send_unchecked(session.profile().interrupt_bytes.clone())
                .await
                .map_err(Into::into),
        };
        if let Err(e) = result {
            tracing::warn!(session = session.id(), "policy action failed: {e}");
            self.events.emit(EventKind::PolicyActionFailed {
                agent_id: agent.clone(),
                session_id: session.id().to_string(),
                policy: unit.policy.name.clone(),
                action: verdict.action,
                reason: e.to_string(),
                dry_run: false,
            });
        }
    }
}

async fn deliver(session: &Session, line: &str) -> Result<(), PolicyError> {
    let opts = crate::delivery::Options::default();
    crate::delivery::submit(session, crate::delivery::By::Hub, line, opts).await?;
    Ok(())
}

impl PolicyRunner {
    /// What every policy would do now, and why (nothing is done). `agent` narrows it to one agent
    /// or session id.
    pub fn check(&self, agent: Option<&str>) -> Vec<CheckRow> {
        let now = Instant::now();
        let mut rows: Vec<CheckRow> = self
            .units()
            .into_iter()
            .map(|u| {
                let memory = self.engine.memory(&u.key);
                let v = super::evaluate(&u.policy, &u.snapshot, &memory, now);
                CheckRow {
                    agent_id: u.session.spec().agent_id.clone(),
                    session_id: Some(u.session.id().to_string()),
                    policy: u.policy.name.clone(),
                    dry_run: u.policy.dry_run,
                    state: Some(u.report.state),
                    stuck: u.report.stuck,
                    idle_for_ms: Some(u.report.idle_for_ms),
                    would: v.action,
                    event: v.event.map(String::from),
                    reason: v.reason,
                    idle_deadline_in_ms: v.idle_deadline_in_ms,
                    start_on_message: u.policy.start_on_message,
                    profile: Some(u.report.profile.clone()),
                    profile_checked_with: u.report.profile_checked_with.clone(),
                    rule: Some(u.report.rule.clone()),
                    evidence: u.report.evidence.clone(),
                }
            })
            .collect();
        // Agents under a policy with no live terminal.
        for def in self.agents.defs() {
            let Some(policy) = def.policy.as_deref().and_then(|p| self.engine.policy(p)) else {
                continue;
            };
            if rows.iter().any(|r| r.agent_id.as_deref() == Some(&def.id)) {
                continue;
            }
            rows.push(CheckRow {
                agent_id: Some(def.id.clone()),
                session_id: None,
                policy: policy.name.clone(),
                dry_run: policy.dry_run,
                state: None,
                stuck: false,
                idle_for_ms: None,
                would: Action::None,
                event: None,
                reason: "not running".into(),
                idle_deadline_in_ms: None,
                start_on_message: policy.start_on_message,
                profile: None,
                profile_checked_with: Vec::new(),
                rule: None,
                evidence: Vec::new(),
            });
        }
        rows.retain(|r| {
            agent.is_none_or(|a| {
                r.agent_id.as_deref() == Some(a) || r.session_id.as_deref() == Some(a)
            })
        });
        rows
    }

    /// Reloads policies and profiles from disk (SIGHUP, `POST /v1/policies/reload`) and gives every
    /// session its profile again. On error the old set stays in force.
    pub fn reload(&self) -> crate::error::HubResult<Arc<super::Loaded>> {
        match self.engine.reload(&self.config) {
            Ok(loaded) => {
                for session in self.sessions.list() {
                    let cli_type = session.owner().cli_type;
                    session.set_profile(loaded.profiles.for_cli_type(cli_type.as_deref()));
                }
                self.events.emit(EventKind::PoliciesReloaded {
                    policies: loaded.policies.keys().cloned().collect(),
                    profiles: loaded.profiles.names(),
                });
                Ok(loaded)
            }
            Err(e) => {
                let message = e.to_string();
                self.events.emit(EventKind::PoliciesReloadFailed {
                    reason: message.clone(),
                });
                Err(crate::error::HubError::PolicyInvalid { message })
            }
        }
    }
}
