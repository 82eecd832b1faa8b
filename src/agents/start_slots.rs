//! How many agent starts of one Docker engine do their Docker work at once (`hub.toml`
//! `agent_start_concurrency`). A start takes a slot of its engine before its first Docker call
//! and gives it back once its terminal is attached, before it waits for the agent's program to
//! be ready: an engine handed a hundred creates, starts and tmux execs at once finishes them
//! all at about the same late moment, while a few at a time, first come first served, bring
//! agents up one after the other (see docs/benchmarks.md, "Fleet start (#30)").

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The start slots of every engine, `limit` each.
pub struct StartSlots {
    limit: usize,
    by_endpoint: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A start's slot on its engine, given back when dropped.
pub struct StartSlot {
    /// `None` only if the semaphore were closed, which it never is: the start goes on then.
    _permit: Option<OwnedSemaphorePermit>,
}

impl StartSlots {
    /// `limit` starts per engine at once (at least one).
    pub fn new(limit: usize) -> Self {
        StartSlots {
            limit: limit.clamp(1, Semaphore::MAX_PERMITS),
            by_endpoint: Mutex::default(),
        }
    }

    fn semaphore(&self, endpoint: &str) -> Arc<Semaphore> {
        let mut map = self.by_endpoint.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(endpoint.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.limit)))
            .clone()
    }

    /// Waits for a slot on `endpoint` ("" = the local default engine); slots are handed out
    /// in the order they were asked for.
    pub async fn take(&self, endpoint: &str) -> StartSlot {
        let permit = self.semaphore(endpoint).acquire_owned().await.ok();
        StartSlot { _permit: permit }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn try_take(slots: &StartSlots, endpoint: &str) -> Option<StartSlot> {
        tokio::time::timeout(Duration::from_millis(20), slots.take(endpoint))
            .await
            .ok()
    }

    #[tokio::test(start_paused = true)]
    async fn an_engine_has_limit_slots_and_a_dropped_slot_is_free_again() {
        let slots = StartSlots::new(2);
        let a = try_take(&slots, "").await.expect("first slot");
        let _b = try_take(&slots, "").await.expect("second slot");
        assert!(try_take(&slots, "").await.is_none(), "a third start waits");
        drop(a);
        assert!(
            try_take(&slots, "").await.is_some(),
            "a freed slot is taken"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn engines_have_slots_of_their_own() {
        let slots = StartSlots::new(1);
        let _local = try_take(&slots, "").await.expect("local slot");
        let far = try_take(&slots, "tcp://far:2375").await;
        assert!(
            far.is_some(),
            "another engine is not held up by the local one"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn slots_go_to_waiting_starts_in_the_order_they_asked() {
        let slots = Arc::new(StartSlots::new(1));
        let first = slots.take("").await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for i in 0..3 {
            let (slots, order) = (slots.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _slot = slots.take("").await;
                order.lock().unwrap().push(i);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }));
            // Each asks after the one before.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(first);
        for w in waiting {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert!(try_take(&slots, "").await.is_some(), "every slot came back");
    }

    #[test]
    fn a_limit_of_zero_still_lets_one_start_through() {
        assert_eq!(StartSlots::new(0).limit, 1);
    }
}
