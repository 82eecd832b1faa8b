//! Doctor checks of the hub's outgoing webhooks (`GET /v1/notify`): one finding a webhook,
//! failing when its last try failed, a warning when it gave messages up but works again.

use super::{Finding, Status};
use crate::client::HubClient;
use crate::protocol::WebhookStatus;

const WHY: &str = "webhooks are how the hub reaches a person who is not looking at the dashboard: an agent's question, a finished turn, a crash";

/// One finding for each webhook of the hub at `client` (none when it has none, or when the
/// doctor has no credential that may read the hub: as for its host sessions).
pub async fn check(client: &HubClient) -> Vec<Finding> {
    match client.notify_status().await {
        Ok(reply) => reply.webhooks.iter().map(verdict).collect(),
        Err(e) if matches!(e.status, Some(401 | 403)) => Vec::new(),
        Err(e) => vec![Finding::problem(
            Status::Warn,
            "webhooks",
            format!("cannot read the hub's webhooks: {e}"),
            WHY,
            "use a token that may read the hub (an observer's or more)",
        )],
    }
}

fn verdict(w: &WebhookStatus) -> Finding {
    let check = format!("webhook {}", w.name);
    let counts = format!(
        "{} sent, {} tries failed, {} given up, {} dropped",
        w.sent, w.failed, w.dead, w.dropped
    );
    if w.failing() {
        let error = w.last_error.as_deref().unwrap_or("unknown error");
        return Finding::problem(
            Status::Fail,
            check,
            format!("failing: {error} ({counts})"),
            WHY,
            "check the receiver and the webhook's url and headers in hub.toml; `agent-hub notify test` tries it now",
        );
    }
    if w.dead > 0 || w.dropped > 0 {
        return Finding::problem(
            Status::Warn,
            check,
            format!("works now, but messages were lost ({counts})"),
            WHY,
            "`agent-hub notify --json` lists the dead letters",
        );
    }
    Finding::ok(check, counts, WHY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, Utc};

    fn status(sent_ago: Option<i64>, error_ago: Option<i64>, dead: u64) -> WebhookStatus {
        let now = Utc::now();
        WebhookStatus {
            index: 0,
            name: "ops".into(),
            format: "json".into(),
            events: vec![],
            teams: vec![],
            min_interval_s: 30,
            header_names: vec![],
            queued: 0,
            sent: 1,
            failed: 2,
            dead,
            dropped: 0,
            last_sent_at: sent_ago.map(|s| now - Duration::seconds(s)),
            last_error: error_ago.map(|_| "HTTP 500".into()),
            last_error_at: error_ago.map(|s| now - Duration::seconds(s)),
            dead_letters: vec![],
        }
    }

    #[test]
    fn a_webhook_is_failing_while_its_last_try_failed() {
        let cases = [
            (status(None, None, 0), Status::Ok),
            (status(Some(5), Some(10), 0), Status::Ok),
            (status(Some(10), Some(5), 0), Status::Fail),
            (status(None, Some(5), 1), Status::Fail),
            (status(Some(5), Some(10), 1), Status::Warn),
        ];
        for (w, want) in cases {
            let f = verdict(&w);
            assert_eq!(f.status, want, "{w:?}: {}", f.detail);
        }
        assert!(verdict(&status(None, Some(5), 1))
            .detail
            .contains("HTTP 500"));
    }
}
