//! The pure policy decision: given a policy, what a session looks like now and what the policy
//! already did, the one thing to do now and why. Each trigger acts at most once per period of
//! activity (`Memory` records the activity time it acted for), so a dry run or a slow stop is
//! never repeated every tick.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use super::{IdleAction, Policy, StuckAction, WarnTo};
use crate::agent_state::State;

/// What a session looks like to a policy.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub state: State,
    pub stuck: bool,
    pub last_activity_at: Instant,
    /// Input written by someone using the session (the hub's own warning line is not).
    pub last_input_at: Option<Instant>,
    pub started_at: Instant,
    pub label: Option<String>,
    pub role: Option<String>,
}

/// What a policy already did for a session: the activity time each trigger acted for.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    pub warned_for: Option<Instant>,
    pub idle_acted_for: Option<Instant>,
    pub stuck_acted_for: Option<Instant>,
    /// The start (of this run of the agent) that max_lifetime acted for.
    pub lifetime_acted_for: Option<Instant>,
    /// The usage or rate limit being waited out (`on_limit = "wait"`).
    pub limit: Option<LimitWait>,
}

/// A usage or rate limit being waited out (`on_limit = "wait"`, see `policy::limits`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitWait {
    /// When the agent was first seen limited.
    pub since: Instant,
    /// When the continue line was last sent.
    pub continued_at: Option<Instant>,
}

pub use crate::protocol::{PolicyAction as Action, PolicyTrigger as Trigger};

/// The decision and its reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub action: Action,
    /// The event type it is reported as (`policy_warned`, `policy_stopped`, ...), if any.
    pub event: Option<&'static str>,
    pub reason: String,
    /// What triggered it.
    pub trigger: Option<Trigger>,
    /// Milliseconds until the idle deadline, while the idle timer runs.
    pub idle_deadline_in_ms: Option<u64>,
    /// The activity time the verdict counted from (see [`effective_activity`]).
    #[serde(skip)]
    pub activity_at: Option<Instant>,
}

impl Verdict {
    fn nothing(reason: String, idle_deadline_in_ms: Option<u64>) -> Self {
        Verdict {
            action: Action::None,
            event: None,
            reason,
            trigger: None,
            idle_deadline_in_ms,
            activity_at: None,
        }
    }

    fn act(action: Action, trigger: Trigger, reason: String) -> Self {
        let event = match action {
            Action::Warn => "policy_warned",
            Action::Stop => "policy_stopped",
            Action::Restart => "policy_restarted",
            Action::Notify => "policy_notified",
            Action::Interrupt => "policy_interrupted",
            Action::Continue => "policy_continued",
            Action::None => "policy_none",
        };
        Verdict {
            action,
            event: Some(event),
            reason,
            trigger: Some(trigger),
            idle_deadline_in_ms: None,
            activity_at: None,
        }
    }

    /// Records in `memory` that this verdict was acted on (or reported, in a dry run).
    pub fn remember(&self, snap: &Snapshot, memory: &mut Memory) {
        let activity = self.activity_at.unwrap_or(snap.last_activity_at);
        match self.trigger {
            Some(Trigger::WarnBefore) => memory.warned_for = Some(activity),
            Some(Trigger::IdleTimeout) => memory.idle_acted_for = Some(activity),
            Some(Trigger::OnStuck) => memory.stuck_acted_for = Some(snap.last_activity_at),
            Some(Trigger::MaxLifetime) => memory.lifetime_acted_for = Some(snap.started_at),
            Some(Trigger::OnLimit) | None => {}
        }
    }
}

fn idle_action(a: IdleAction) -> Action {
    match a {
        IdleAction::Stop => Action::Stop,
        IdleAction::Notify => Action::Notify,
        IdleAction::Restart => Action::Restart,
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The activity the idle timer counts from. A warning line sent to the agent itself makes it
/// answer (screen changes), and that must not restart the timer, or an agent that replies to
/// each warning would be warned forever and never stopped: after such a warning only input
/// from someone using the session counts again.
pub fn effective_activity(policy: &Policy, snap: &Snapshot, memory: &Memory) -> Instant {
    let warns_agent = policy.warn_line.is_some() && policy.warn_to == WarnTo::Agent;
    match memory.warned_for {
        Some(warned_for)
            if warns_agent
                && snap.last_activity_at > warned_for
                && snap.last_input_at.is_none_or(|i| i <= warned_for) =>
        {
            warned_for
        }
        _ => snap.last_activity_at,
    }
}

/// What `policy` would do to a session looking like `snap` at `now`.
pub fn evaluate(policy: &Policy, snap: &Snapshot, memory: &Memory, now: Instant) -> Verdict {
    let activity = effective_activity(policy, snap, memory);
    let mut verdict = decide(policy, snap, activity, memory, now);
    verdict.activity_at = Some(activity);
    verdict
}

fn decide(
    policy: &Policy,
    snap: &Snapshot,
    activity: Instant,
    memory: &Memory,
    now: Instant,
) -> Verdict {
    if let Some(label) = snap
        .label
        .as_ref()
        .filter(|l| policy.exempt_labels.contains(l))
    {
        return Verdict::nothing(format!("exempt: label '{label}'"), None);
    }
    if let Some(role) = snap
        .role
        .as_ref()
        .filter(|r| policy.exempt_roles.contains(r))
    {
        return Verdict::nothing(format!("exempt: role '{role}'"), None);
    }
    if snap.state == State::Exited {
        return Verdict::nothing("not running".into(), None);
    }
    let alive_for = now.saturating_duration_since(snap.started_at);
    if let Some(max) = policy.max_lifetime_s.map(Duration::from_secs) {
        if alive_for >= max && memory.lifetime_acted_for != Some(snap.started_at) {
            return Verdict::act(
                idle_action(policy.max_lifetime_action),
                Trigger::MaxLifetime,
                format!(
                    "running for {} (max_lifetime {})",
                    secs(alive_for),
                    secs(max)
                ),
            );
        }
    }
    let idle_for = now.saturating_duration_since(activity);
    if let Some(action) = policy.on_stuck {
        if snap.stuck && memory.stuck_acted_for != Some(snap.last_activity_at) {
            let action = match action {
                StuckAction::Notify => Action::Notify,
                StuckAction::Interrupt => Action::Interrupt,
                StuckAction::Restart => Action::Restart,
            };
            return Verdict::act(
                action,
                Trigger::OnStuck,
                format!(
                    "stuck: working with no meaningful change for {}",
                    secs(idle_for)
                ),
            );
        }
    }
    let Some(timeout) = policy.idle_timeout_s.map(Duration::from_secs) else {
        return Verdict::nothing("no idle_timeout".into(), None);
    };
    if !policy.idle_states.contains(&snap.state) {
        return Verdict::nothing(
            format!("state {}: the idle timer does not run", snap.state.as_str()),
            None,
        );
    }
    let left = timeout.saturating_sub(idle_for);
    if left.is_zero() {
        if memory.idle_acted_for == Some(activity) {
            return Verdict::nothing(
                format!("idle for {}: already acted", secs(idle_for)),
                Some(0),
            );
        }
        return Verdict::act(
            idle_action(policy.idle_action),
            Trigger::IdleTimeout,
            format!(
                "{} for {} (idle_timeout {})",
                snap.state.as_str(),
                secs(idle_for),
                secs(timeout)
            ),
        );
    }
    if let Some(warn) = policy.warn_before_s.map(Duration::from_secs) {
        if left <= warn && memory.warned_for != Some(activity) {
            let mut v = Verdict::act(
                Action::Warn,
                Trigger::WarnBefore,
                format!(
                    "{} for {}: idle action '{}' in {}",
                    snap.state.as_str(),
                    secs(idle_for),
                    serde_json::to_value(policy.idle_action)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default(),
                    secs(left)
                ),
            );
            v.idle_deadline_in_ms = Some(left.as_millis() as u64);
            return v;
        }
    }
    Verdict::nothing(
        format!(
            "{} for {}; idle deadline in {}",
            snap.state.as_str(),
            secs(idle_for),
            secs(left)
        ),
        Some(left.as_millis() as u64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> Policy {
        super::super::parse_policy(text, "p.toml", "p").unwrap()
    }

    /// A session in `state`, last active at `active`, started at `started`.
    fn snapshot(state: State, active: Instant, started: Instant) -> Snapshot {
        Snapshot {
            state,
            stuck: false,
            last_activity_at: active,
            last_input_at: None,
            started_at: started,
            label: None,
            role: None,
        }
    }

    struct Case {
        what: &'static str,
        policy: &'static str,
        state: State,
        stuck: bool,
        /// Seconds since start of the last activity, and of now.
        active_at_s: u64,
        now_s: u64,
        label: Option<&'static str>,
        memory: fn(Instant) -> Memory,
        expect: Action,
        trigger: Option<Trigger>,
    }

    fn none(_: Instant) -> Memory {
        Memory::default()
    }

    /// The table runs on tokio's paused clock: instants are real `Instant`s moved by `advance`.
    #[tokio::test(start_paused = true)]
    async fn decisions_table() {
        const IDLE: &str = "idle_timeout_s = 60\nwarn_before_s = 10\n";
        let c = |what, policy, state, active_at_s, now_s, expect, trigger| Case {
            what,
            policy,
            state,
            stuck: false,
            active_at_s,
            now_s,
            label: None,
            memory: none,
            expect,
            trigger,
        };
        let cases = vec![
            c(
                "before the warning",
                IDLE,
                State::Idle,
                0,
                49,
                Action::None,
                None,
            ),
            c(
                "warning window",
                IDLE,
                State::Idle,
                0,
                50,
                Action::Warn,
                Some(Trigger::WarnBefore),
            ),
            c(
                "at the deadline",
                IDLE,
                State::Idle,
                0,
                60,
                Action::Stop,
                Some(Trigger::IdleTimeout),
            ),
            c(
                "activity moved the deadline",
                IDLE,
                State::Idle,
                30,
                60,
                Action::None,
                None,
            ),
            c(
                "working: no timer",
                IDLE,
                State::Working,
                0,
                600,
                Action::None,
                None,
            ),
            c(
                "limited: no timer, however long",
                IDLE,
                State::Limited,
                0,
                600,
                Action::None,
                None,
            ),
            c(
                "limited: no timer with blocked counted either",
                "idle_timeout_s = 5\nidle_states = [\"idle\", \"blocked\"]\n",
                State::Limited,
                0,
                60,
                Action::None,
                None,
            ),
            c(
                "blocked: no timer by default",
                IDLE,
                State::Blocked,
                0,
                600,
                Action::None,
                None,
            ),
            c(
                "blocked counts when configured",
                "idle_timeout_s = 60\nidle_states = [\"idle\", \"blocked\"]\n",
                State::Blocked,
                0,
                61,
                Action::Stop,
                Some(Trigger::IdleTimeout),
            ),
            c(
                "notify instead of stop",
                "idle_timeout_s = 60\nidle_action = \"notify\"\n",
                State::Idle,
                0,
                61,
                Action::Notify,
                Some(Trigger::IdleTimeout),
            ),
            c(
                "restart",
                "idle_timeout_s = 60\nidle_action = \"restart\"\n",
                State::Idle,
                0,
                61,
                Action::Restart,
                Some(Trigger::IdleTimeout),
            ),
            c(
                "max lifetime, even while working",
                "max_lifetime_s = 100\n",
                State::Working,
                99,
                100,
                Action::Stop,
                Some(Trigger::MaxLifetime),
            ),
            c(
                "max lifetime stops even when the idle action only notifies",
                "max_lifetime_s = 100\nidle_timeout_s = 5\nidle_action = \"notify\"\n",
                State::Working,
                99,
                100,
                Action::Stop,
                Some(Trigger::MaxLifetime),
            ),
            c(
                "max lifetime with its own action",
                "max_lifetime_s = 100\nmax_lifetime_action = \"restart\"\n",
                State::Idle,
                99,
                100,
                Action::Restart,
                Some(Trigger::MaxLifetime),
            ),
            c(
                "exited: nothing",
                IDLE,
                State::Exited,
                0,
                600,
                Action::None,
                None,
            ),
            c(
                "no idle timeout",
                "dry_run = true\n",
                State::Idle,
                0,
                6000,
                Action::None,
                None,
            ),
            Case {
                label: Some("keep"),
                ..c(
                    "exempt label",
                    "idle_timeout_s = 60\nexempt_labels = [\"keep\"]\n",
                    State::Idle,
                    0,
                    600,
                    Action::None,
                    None,
                )
            },
            Case {
                memory: |t| Memory {
                    warned_for: Some(t),
                    ..Memory::default()
                },
                ..c(
                    "warned once per idle period",
                    IDLE,
                    State::Idle,
                    0,
                    55,
                    Action::None,
                    None,
                )
            },
            Case {
                memory: |t| Memory {
                    idle_acted_for: Some(t),
                    ..Memory::default()
                },
                ..c("stopped once", IDLE, State::Idle, 0, 65, Action::None, None)
            },
            Case {
                // (here the last activity is the start, so the memory names this run)
                memory: |t| Memory {
                    lifetime_acted_for: Some(t),
                    ..Memory::default()
                },
                ..c(
                    "max lifetime acted once per run",
                    "max_lifetime_s = 100\n",
                    State::Working,
                    0,
                    100,
                    Action::None,
                    None,
                )
            },
            Case {
                stuck: true,
                ..c(
                    "stuck: interrupt",
                    "on_stuck = \"interrupt\"\n",
                    State::Working,
                    0,
                    300,
                    Action::Interrupt,
                    Some(Trigger::OnStuck),
                )
            },
            Case {
                stuck: true,
                memory: |t| Memory {
                    stuck_acted_for: Some(t),
                    ..Memory::default()
                },
                ..c(
                    "stuck handled once",
                    "on_stuck = \"notify\"\n",
                    State::Working,
                    0,
                    300,
                    Action::None,
                    None,
                )
            },
        ];
        for case in cases {
            let start = Instant::now();
            let p = policy(case.policy);
            let active = start + Duration::from_secs(case.active_at_s);
            let snap = Snapshot {
                stuck: case.stuck,
                label: case.label.map(String::from),
                ..snapshot(case.state, active, start)
            };
            let memory = (case.memory)(active);
            tokio::time::advance(Duration::from_secs(case.now_s)).await;
            let v = evaluate(&p, &snap, &memory, Instant::now());
            assert_eq!(
                (v.action, v.trigger),
                (case.expect, case.trigger),
                "{}: {v:?}",
                case.what
            );
            assert!(!v.reason.is_empty());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_dry_run_reports_each_step_once() {
        let p = policy("idle_timeout_s = 5\nwarn_before_s = 2\ndry_run = true\n");
        let start = Instant::now();
        let snap = snapshot(State::Idle, start, start);
        let mut memory = Memory::default();
        let mut seen = Vec::new();
        for _ in 0..20 {
            tokio::time::advance(Duration::from_millis(500)).await;
            let v = evaluate(&p, &snap, &memory, Instant::now());
            if let Some(event) = v.event {
                seen.push((event, Instant::now().duration_since(start).as_millis()));
                v.remember(&snap, &mut memory);
            }
        }
        assert_eq!(
            seen,
            vec![("policy_warned", 3000), ("policy_stopped", 5000)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_agents_answer_to_its_own_warning_does_not_restart_the_idle_timer() {
        let p = policy(
            "idle_timeout_s = 10\nwarn_before_s = 3\nwarn_line = \"stopping soon\"\nwarn_to = \"agent\"\n",
        );
        let start = Instant::now();
        let mut snap = snapshot(State::Idle, start, start);
        let mut memory = Memory::default();
        tokio::time::advance(Duration::from_secs(7)).await;
        let v = evaluate(&p, &snap, &memory, Instant::now());
        assert_eq!(v.action, Action::Warn, "{v:?}");
        v.remember(&snap, &mut memory);
        // The agent answers the warning: its screen changes at 8 s, then it is idle again.
        snap.last_activity_at = start + Duration::from_secs(8);
        tokio::time::advance(Duration::from_secs(1)).await;
        let v = evaluate(&p, &snap, &memory, Instant::now());
        assert_eq!(v.action, Action::None, "no second warning: {v:?}");
        tokio::time::advance(Duration::from_secs(2)).await;
        let v = evaluate(&p, &snap, &memory, Instant::now());
        assert_eq!(
            (v.action, v.trigger),
            (Action::Stop, Some(Trigger::IdleTimeout)),
            "stopped at the first deadline: {v:?}"
        );
        // Input from someone using the session does restart it.
        snap.last_input_at = Some(start + Duration::from_secs(8));
        let v = evaluate(&p, &snap, &memory, Instant::now());
        assert_eq!(v.action, Action::None, "{v:?}");
        // Warned to the leader, the agent's own activity counts as usual.
        let to_leader = policy(
            "idle_timeout_s = 10\nwarn_before_s = 3\nwarn_line = \"x\"\nwarn_to = \"leader\"\n",
        );
        snap.last_input_at = None;
        let v = evaluate(&to_leader, &snap, &memory, Instant::now());
        assert_eq!(v.action, Action::None, "{v:?}");
    }
}
