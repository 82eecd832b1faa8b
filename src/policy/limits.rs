//! Waiting out a usage or rate limit (`on_limit = "wait"`): while an agent is `limited`, the
//! prompts delivered to it are queued (the receipt says `queued`), not typed into its error
//! screen; once the limit is over (its `until` passed, with [`MARGIN`] for the CLI's own retry,
//! or `limit_retry_s` after it was seen when no reset time is shown) the profile's continue
//! line is sent, and again every `limit_retry_s` until the agent is at rest (`idle`) again;
//! then the queued prompts are delivered in order, each once, one at a time.
//!
//! [`step`] is the pure decision; [`PolicyRunner::wait_out_limit`] acts on it from the policy
//! loop, and [`PolicyRunner::queue_if_limited`] takes a delivery made meanwhile.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::evaluate::LimitWait;
pub use super::limit_queue::{Queued, Queues};
use super::runner::PolicyRunner;
use super::{OnLimit, Policy};
use crate::actor::Actor;
use crate::agent_state::{State, StateReport};
use crate::delivery::{By, DeliveryReport, Options};
use crate::protocol::{EventKind, PolicyAction, PolicyEvent, PolicyTrigger};
use crate::session::Session;

/// How long after a stated reset time the continue line goes: a CLI that retries by itself at
/// that time shows it is at work again by then.
pub const MARGIN: Duration = Duration::from_secs(2);

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Send the continue line.
    Continue,
    /// Deliver the first queued prompt.
    Deliver,
}

/// The decision for an agent in `state`, whose limit ends in `until_in` (none: no reset time
/// on the screen; zero: passed), waited out per `wait`, with prompts `queued` or not.
pub fn step(
    state: State,
    until_in: Option<Duration>,
    retry: Duration,
    wait: &mut Option<LimitWait>,
    queued: bool,
    now: Instant,
) -> Step {
    if state != State::Limited {
        // The limit is over once the agent is at rest: working on the continue line (or on a
        // retry of its own) and then limited again is the same limit.
        if state == State::Idle {
            *wait = None;
        }
        return match queued && state == State::Idle {
            true => Step::Deliver,
            false => Step::Nothing,
        };
    }
    let w = wait.get_or_insert(LimitWait {
        since: now,
        continued_at: None,
    });
    let due = match (w.continued_at, until_in) {
        (Some(sent), _) => now >= sent + retry,
        (None, Some(left)) => left.is_zero(),
        (None, None) => now >= w.since + retry,
    };
    if due {
        w.continued_at = Some(now);
        return Step::Continue;
    }
    Step::Nothing
}

/// How long until `until`, from `now` (zero once passed, with [`MARGIN`]).
pub fn until_in(until: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<Duration> {
    let left = until? + chrono::Duration::from_std(MARGIN).ok()? - now;
    Some(left.to_std().unwrap_or(Duration::ZERO))
}

/// A prompt delivered while its agent was limited.
/// The policy loop's key of a session (the agent id, else the session id).
pub fn key_of(session: &Session) -> String {
    session
        .spec()
        .agent_id
        .clone()
        .unwrap_or_else(|| session.id().to_string())
}

impl PolicyRunner {
    /// Queues `text` for `session` when its policy waits out limits and it is `limited` now:
    /// the receipt `queued`, with when the limit is expected to end. None: deliver it now.
    pub fn queue_if_limited(
        &self,
        session: &Session,
        actor: &Actor,
        text: &str,
        opts: Options,
    ) -> Option<DeliveryReport> {
        let waits = session
            .spec()
            .policy
            .as_deref()
            .and_then(|p| self.engine.policy(p))
            .is_some_and(|p| p.on_limit == Some(OnLimit::Wait) && !p.dry_run);
        let report = session.state_report();
        if !waits || report.state != State::Limited {
            return None;
        }
        let key = key_of(session);
        Some(self.queue(&key, actor, text, opts, State::Limited, report.until))
    }

    /// One look at a unit under `on_limit = "wait"`: the continue line when due, the first
    /// queued prompt once the agent is at rest.
    pub(super) fn wait_out_limit(
        &self,
        key: &str,
        session: &std::sync::Arc<Session>,
        policy: &Policy,
        report: &StateReport,
        wait: &mut Option<LimitWait>,
        actions: &TaskTracker,
    ) {
        if policy.on_limit != Some(OnLimit::Wait) || policy.dry_run {
            return;
        }
        let retry = Duration::from_secs(
            policy
                .limit_retry_s
                .unwrap_or(crate::config::policy::DEFAULT_LIMIT_RETRY_S),
        );
        let left = until_in(report.until, Utc::now());
        let queued = self.engine.queues.has(key);
        match step(report.state, left, retry, wait, queued, Instant::now()) {
            Step::Nothing => {}
            Step::Continue => {
                let line = session.profile().continue_line.clone();
                self.events.emit(EventKind::PolicyContinued(PolicyEvent {
                    agent_id: session.spec().agent_id.clone(),
                    session_id: session.id().to_string(),
                    policy: policy.name.clone(),
                    action: PolicyAction::Continue,
                    trigger: Some(PolicyTrigger::OnLimit),
                    reason: match report.until {
                        Some(t) => format!("the limit ended at {}", t.format("%H:%M:%S UTC")),
                        None => {
                            format!("no reset time shown; {} s after the limit", retry.as_secs())
                        }
                    },
                    state: report.state,
                    idle_for_ms: report.idle_for_ms,
                    dry_run: false,
                }));
                let session = session.clone();
                actions.spawn(async move {
                    let opts = Options::default();
                    if let Err(e) = crate::delivery::submit(&session, By::Hub, &line, opts).await {
                        tracing::warn!(session = session.id(), "continue line not sent: {e}");
                    }
                });
            }
            Step::Deliver => self.deliver_first_queued(key, session, actions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RETRY: Duration = Duration::from_secs(60);

    #[test]
    fn the_continue_line_waits_for_the_reset_or_the_retry_and_repeats_while_limited() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut wait = None;
        let later = Some(Duration::from_secs(30));
        // A stated reset 30 s away: nothing until it has passed.
        assert_eq!(
            step(State::Limited, later, RETRY, &mut wait, false, at(0)),
            Step::Nothing
        );
        let passed = Some(Duration::ZERO);
        assert_eq!(
            step(State::Limited, passed, RETRY, &mut wait, false, at(31)),
            Step::Continue
        );
        // Still limited: again only after the retry.
        assert_eq!(
            step(State::Limited, passed, RETRY, &mut wait, false, at(60)),
            Step::Nothing
        );
        assert_eq!(
            step(State::Limited, passed, RETRY, &mut wait, false, at(91)),
            Step::Continue
        );
        // No reset time: the retry after the limit was seen.
        let mut wait = None;
        assert_eq!(
            step(State::Limited, None, RETRY, &mut wait, false, at(0)),
            Step::Nothing
        );
        assert_eq!(
            step(State::Limited, None, RETRY, &mut wait, false, at(59)),
            Step::Nothing
        );
        assert_eq!(
            step(State::Limited, None, RETRY, &mut wait, false, at(60)),
            Step::Continue
        );
    }

    #[test]
    fn queued_prompts_go_once_the_agent_is_idle_and_not_limited() {
        let now = Instant::now();
        let mut wait = None;
        assert_eq!(
            step(State::Limited, None, RETRY, &mut wait, true, now),
            Step::Nothing
        );
        assert_eq!(
            step(State::Working, None, RETRY, &mut wait, true, now),
            Step::Nothing
        );
        assert!(wait.is_some(), "not over while it works");
        assert_eq!(
            step(State::Blocked, None, RETRY, &mut wait, true, now),
            Step::Nothing
        );
        assert_eq!(
            step(State::Idle, None, RETRY, &mut wait, true, now),
            Step::Deliver
        );
        assert_eq!(
            step(State::Idle, None, RETRY, &mut wait, false, now),
            Step::Nothing
        );
    }

    #[test]
    fn one_queued_prompt_is_typed_at_a_time_in_order() {
        let queues = Queues::default();
        let actor = Actor::default();
        for text in ["one", "two"] {
            let q = Queued {
                text: text.into(),
                actor: actor.clone(),
                force: false,
            };
            queues.push("a", q);
        }
        assert_eq!(queues.take("a").unwrap().text, "one");
        assert!(queues.take("a").is_none(), "'one' is still being typed");
        assert!(queues.has("a"));
        queues.typed("a");
        assert_eq!(queues.take("a").unwrap().text, "two");
        queues.typed("a");
        assert!(queues.take("a").is_none() && !queues.has("a"));
    }

    #[test]
    fn until_counts_the_margin_and_is_zero_once_passed() {
        let now: DateTime<Utc> = "2026-11-27T10:00:00Z".parse().unwrap();
        let until = Some(now + chrono::Duration::seconds(10));
        assert_eq!(until_in(until, now), Some(Duration::from_secs(12)));
        let past = Some(now - chrono::Duration::seconds(10));
        assert_eq!(until_in(past, now), Some(Duration::ZERO));
        assert_eq!(until_in(None, now), None);
    }
}
