//! Prometheus metrics (`GET /metrics`, OpenMetrics text from `prometheus-client`): one
//! [`Metrics`] handle per hub, held next to the hub's other handles, with a cheap method per
//! thing counted. Counters on hot paths are atomics handed out once (per session, per
//! viewer), so the output path never looks up a label or takes a lock per chunk. Gauges that
//! describe the hub's state (sessions, agents, agent states, engines) are filled in when
//! scraped ([`scrape`]) from the sessions and agent statuses `api::metrics` hands over, so
//! they cannot drift from them.

mod scrape;
mod usage;

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Latency buckets for API requests and audit writes: 0.5 ms to ~16 s.
fn fast_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Duration buckets for agent starts and stops: 50 ms to ~100 s.
fn slow_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 12))
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InputLabels {
    kind: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    action: String,
    dry_run: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentOpLabels {
    op: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: String,
}

/// The audit log's own meters; the log owns them (it is opened before the hub's metrics
/// exist) and [`Metrics::new`] registers them.
#[derive(Clone)]
pub struct AuditMeters {
    /// Seconds from handing a record to the writer until it is on disk.
    pub write_seconds: Histogram,
    /// Writes that failed (the log unavailable).
    pub failures: Counter,
}

impl Default for AuditMeters {
    fn default() -> Self {
        AuditMeters {
            write_seconds: fast_buckets(),
            failures: Counter::default(),
        }
    }
}

/// The hub's metrics (cheap to clone).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    output_bytes: Family<SourceLabels, Counter>,
    sent_bytes: Family<SourceLabels, Counter>,
    viewers: Gauge,
    resyncs: Counter,
    dropped_bytes: Counter,
    input_ops: Family<InputLabels, Counter>,
    policy_actions: Family<PolicyLabels, Counter>,
    agent_ops: HistogramFamily<AgentOpLabels>,
    api_requests: HistogramFamily<RouteLabels>,
    api_errors: Family<CodeLabels, Counter>,
    notify: Family<WebhookLabels, Counter>,
    scraped: scrape::StateGauges,
    usage: usage::UsageCounters,
}

/// Registers each metric under its name with its help text: one table a registry, one line a
/// metric (`"name" => metric, "help";`).
macro_rules! register {
    ($registry:expr, $($name:literal => $metric:expr, $help:literal;)*) => {
        $( $registry.register($name, $help, $metric.clone()); )*
    };
}
pub(crate) use register;

impl Metrics {
    /// Registers every metric; `redactions` and `audit` belong to the redactor and the audit
    /// log, which count on their own.
    pub fn new(
        redactions: &Counter,
        guard_refusals: &crate::guard::Refusals,
        audit: &AuditMeters,
    ) -> Self {
        let mut registry = Registry::with_prefix("agent_hub");
        let output_bytes = Family::default();
        let sent_bytes = Family::default();
        let viewers = Gauge::default();
        let resyncs = Counter::default();
        let dropped_bytes = Counter::default();
        let input_ops = Family::default();
        let policy_actions = Family::default();
        let agent_ops: HistogramFamily<AgentOpLabels> =
            Family::new_with_constructor(slow_buckets as fn() -> Histogram);
        let api_requests: HistogramFamily<RouteLabels> =
            Family::new_with_constructor(fast_buckets as fn() -> Histogram);
        let api_errors = Family::default();
        let notify = Family::default();
        let r = &mut registry;
        register!(r,
            "output_bytes" => output_bytes, "Output bytes ingested from terminals, by session source";
            "stream_sent_bytes" => sent_bytes, "Output bytes sent to WebSocket subscribers, by session source";
            "stream_viewers" => viewers, "WebSocket output streams open now";
            "stream_resyncs" => resyncs, "Times a WebSocket subscriber fell behind and resynchronised from the scrollback";
            "stream_dropped_bytes" => dropped_bytes, "Output bytes a resynchronising subscriber never received";
            "input_operations" => input_ops, "Input operations (send_line, keys, talk, signal, ws_input, ...) by outcome: ok or the error code";
            "guard_refusals" => guard_refusals, "Inputs the command guard refused, by pattern";
            "redactions" => redactions, "Secrets replaced in output and replies";
            "policy_actions" => policy_actions, "Policy actions decided, by action (dry_run: decided but not applied)";
            "agent_operation_duration_seconds" => agent_ops, "Agent starts and stops (op) and how long they took, by outcome";
            "audit_write_duration_seconds" => audit.write_seconds, "Time for one audit record to reach the disk";
            "audit_write_failures" => audit.failures, "Audit writes that failed (operations are refused with AUDIT_UNAVAILABLE unless audit.fail_open)";
            "api_request_duration_seconds" => api_requests, "API request latency by method, route and status";
            "api_errors" => api_errors, "API error replies by error code (AUDIT_UNAVAILABLE, PTY_COMMAND_BLOCKED, ...)";
            "notify_messages" => notify, "Webhook messages by webhook and outcome: sent, failed (an attempt that will be retried), dead (given up after its retries) or dropped (its queue was full)";
        );
        let scraped = scrape::StateGauges::register(r);
        let usage = usage::UsageCounters::register(r);
        Metrics {
            inner: Arc::new(Inner {
                registry,
                output_bytes,
                sent_bytes,
                viewers,
                resyncs,
                dropped_bytes,
                input_ops,
                policy_actions,
                agent_ops,
                api_requests,
                api_errors,
                notify,
                scraped,
                usage,
            }),
        }
    }

    /// The counter of output bytes ingested from sessions of `source` (look it up once per
    /// session and keep it).
    pub fn output_bytes(&self, source: &str) -> Counter {
        self.inner.output_bytes.get_or_create_owned(&SourceLabels {
            source: source.into(),
        })
    }

    /// Meters for one WebSocket stream of a session of `source`; it counts as a viewer
    /// until dropped.
    pub fn stream(&self, source: &str) -> StreamMeter {
        self.inner.viewers.inc();
        StreamMeter {
            sent: self.inner.sent_bytes.get_or_create_owned(&SourceLabels {
                source: source.into(),
            }),
            resyncs: self.inner.resyncs.clone(),
            dropped: self.inner.dropped_bytes.clone(),
            viewers: self.inner.viewers.clone(),
        }
    }

    /// One input operation of `kind`; `outcome` is `ok` or an error code.
    pub fn input_op(&self, kind: &str, outcome: &str) {
        self.inner
            .input_ops
            .get_or_create(&InputLabels {
                kind: kind.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    /// A policy decided `action`.
    pub fn policy_action(&self, action: &str, dry_run: bool) {
        self.inner
            .policy_actions
            .get_or_create(&PolicyLabels {
                action: action.into(),
                dry_run: dry_run.to_string(),
            })
            .inc();
    }

    /// An agent `op` (`start`, `stop`) that began at `started` ended, well or not.
    pub fn agent_op(&self, op: &str, ok: bool, started: Instant) {
        self.inner
            .agent_ops
            .get_or_create(&AgentOpLabels {
                op: op.into(),
                outcome: if ok { "ok" } else { "error" }.into(),
            })
            .observe(started.elapsed().as_secs_f64());
    }

    /// Whether the Docker engine at `endpoint` answers (its events stream is connected).
    pub fn engine_reachable(&self, endpoint: &str, up: bool) {
        self.inner.scraped.engine_reachable(endpoint, up);
    }

    /// One API request: its route template, status, error code (if any) and latency.
    pub fn api_request(
        &self,
        method: &str,
        route: &str,
        status: u16,
        error_code: Option<&str>,
        took: Duration,
    ) {
        self.inner
            .api_requests
            .get_or_create(&RouteLabels {
                method: method.into(),
                route: route.into(),
                status: status.to_string(),
            })
            .observe(took.as_secs_f64());
        if let Some(code) = error_code {
            self.inner
                .api_errors
                .get_or_create(&CodeLabels { code: code.into() })
                .inc();
        }
    }
}

impl Metrics {
    /// A webhook message's `outcome` (`sent`, `failed`, `dead`, `dropped`) at `webhook`.
    pub fn notify(&self, webhook: &str, outcome: &str) {
        self.inner
            .notify
            .get_or_create(&WebhookLabels {
                webhook: webhook.into(),
                outcome: outcome.into(),
            })
            .inc();
    }
}

/// The meters one WebSocket stream uses; counts as a viewer while it lives.
pub struct StreamMeter {
    sent: Counter,
    resyncs: Counter,
    dropped: Counter,
    viewers: Gauge,
}

impl StreamMeter {
    /// `n` output bytes went to the subscriber.
    pub fn sent(&self, n: usize) {
        self.sent.inc_by(n as u64);
    }

    /// The subscriber fell behind and lost `dropped` bytes.
    pub fn resync(&self, dropped: u64) {
        self.resyncs.inc();
        self.dropped.inc_by(dropped);
    }
}

impl Drop for StreamMeter {
    fn drop(&mut self) {
        self.viewers.dec();
    }
}
