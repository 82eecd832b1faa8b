//! What agents spent, as counters by agent, team and model: tokens by kind and dollars, caught
//! up when `/metrics` is scraped with the ledger's totals (which only grow).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::usage::tally::Total;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    agent: String,
    team: String,
    model: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    agent: String,
    team: String,
    model: String,
}

type DollarCounter = Counter<f64, std::sync::atomic::AtomicU64>;

pub(super) struct UsageCounters {
    tokens: Family<TokenLabels, Counter>,
    cost: Family<CostLabels, DollarCounter>,
}

impl UsageCounters {
    pub(super) fn register(r: &mut Registry) -> Self {
        let c = UsageCounters {
            tokens: Family::default(),
            cost: Family::default(),
        };
        super::register!(r,
            "usage_tokens" => c.tokens, "Tokens the agents' model calls used, from their CLIs' own records, by agent, team, model and kind (input, output, cache_read, cache_write)";
            "usage_cost_usd" => c.cost, "What the agents' model calls cost by the hub's price table (or as their CLI stated it), by agent, team and model; calls of an unpriced model count 0";
        );
        c
    }

    /// Brings the counters up to `totals`.
    pub(super) fn catch_up(&self, totals: &[Total]) {
        for t in totals {
            let model = t.model.clone().unwrap_or_default();
            let kinds = [
                ("input", t.tokens.input),
                ("output", t.tokens.output),
                ("cache_read", t.tokens.cache_read),
                ("cache_write", t.tokens.cache_write),
            ];
            for (kind, n) in kinds {
                let labels = TokenLabels {
                    agent: t.agent.clone(),
                    team: t.team.clone(),
                    model: model.clone(),
                    kind: kind.into(),
                };
                let counter = self.tokens.get_or_create(&labels);
                counter.inc_by(n.saturating_sub(counter.get()));
            }
            let labels = CostLabels {
                agent: t.agent.clone(),
                team: t.team.clone(),
                model,
            };
            let counter = self.cost.get_or_create(&labels);
            let more = t.cost_usd - counter.get();
            if more > 0.0 {
                counter.inc_by(more);
            }
        }
    }
}
