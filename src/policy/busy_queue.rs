//! Prompts that wait for their agent to be at rest: a sender that asks not to type into an
//! agent's work ([`Options::queue_while_working`], review notes do) has its prompt queued while
//! the agent is `working`, or behind prompts queued before it; every [`super::runner::TICK`]
//! the policy loop delivers the first queued prompt of each agent that is `idle`, one at a
//! time, in order. The queue is the one `on_limit = "wait"` uses ([`super::limit_queue`]), so
//! both kinds keep their order and survive a restart of the hub.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::task::TaskTracker;

use super::limits::{key_of, Queued};
use super::runner::PolicyRunner;
use crate::actor::Actor;
use crate::agent_state::State;
use crate::delivery::{By, DeliveryReport, Options, Receipt};
use crate::session::Session;

/// Whether a prompt asked to wait for rest must wait: the agent is working, or prompts wait
/// before it (it would overtake them). Pure.
pub fn must_wait(opts: &Options, state: State, queued_before: bool) -> bool {
    opts.queue_while_working && (state == State::Working || queued_before)
}

impl PolicyRunner {
    /// Queues `text` for `session` when [`must_wait`] says so: the receipt `queued`. None:
    /// deliver it now.
    pub fn queue_if_working(
        &self,
        session: &Session,
        actor: &Actor,
        text: &str,
        opts: Options,
    ) -> Option<DeliveryReport> {
        let key = key_of(session);
        let state = session.state_report().state;
        if !must_wait(&opts, state, self.engine.queues.has(&key)) {
            return None;
        }
        tracing::info!(
            session = session.id(),
            "prompt queued until the agent is idle"
        );
        Some(self.queue(&key, actor, text, opts, state, None))
    }

    /// Queues `text` for `key`; the receipt `queued`, with the state the agent was in and
    /// when it is expected to take prompts again, if known.
    pub(super) fn queue(
        &self,
        key: &str,
        actor: &Actor,
        text: &str,
        opts: Options,
        state_before: State,
        queued_until: Option<DateTime<Utc>>,
    ) -> DeliveryReport {
        self.engine.queues.push(
            key,
            Queued {
                text: text.to_string(),
                actor: actor.clone(),
                force: opts.force,
            },
        );
        DeliveryReport {
            receipt: Receipt::Queued,
            bracketed_paste: false,
            enters: 0,
            bytes_written: 0,
            state_before,
            queued_until,
        }
    }

    /// Delivers the first queued prompt of every live session that is `idle` now.
    pub(super) fn deliver_queued(&self, actions: &TaskTracker) {
        for session in self.sessions.list() {
            let key = key_of(&session);
            if self.engine.queues.has(&key) && session.state_report().state == State::Idle {
                self.deliver_first_queued(&key, &session, actions);
            }
        }
    }

    /// Types the first prompt queued for `key` into `session`, beside the loop, unless one of
    /// its prompts is being typed already.
    pub(super) fn deliver_first_queued(
        &self,
        key: &str,
        session: &Arc<Session>,
        actions: &TaskTracker,
    ) {
        let Some(q) = self.engine.queues.take(key) else {
            return;
        };
        let (session, runner, key) = (session.clone(), self.clone(), key.to_string());
        actions.spawn(async move {
            let opts = Options {
                force: q.force,
                ..Options::default()
            };
            let by = By::Caller(&q.actor);
            if let Err(e) = crate::delivery::submit(&session, by, &q.text, opts).await {
                tracing::warn!(session = session.id(), "queued prompt not delivered: {e}");
            }
            runner.engine.queues.typed(&key);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_waits_for_rest_only_when_asked_and_the_agent_works_or_others_wait() {
        let asked = Options {
            queue_while_working: true,
            ..Options::default()
        };
        let plain = Options::default();
        let cases = [
            (&asked, State::Working, false, true),
            (&asked, State::Idle, true, true),
            (&asked, State::Idle, false, false),
            (&asked, State::Blocked, false, false),
            (&asked, State::Unknown, false, false),
            (&plain, State::Working, false, false),
            (&plain, State::Idle, true, false),
        ];
        for (opts, state, queued, want) in cases {
            assert_eq!(must_wait(opts, state, queued), want, "{state:?} {queued}");
        }
    }
}
