//! The price table: dollars per million tokens of each kind, by model name or prefix.
//!
//! The hub ships the public list prices of the models its shipped profiles use
//! (`src/usage/prices.toml`, compiled in, with the date they were taken); `[prices."MODEL"]` tables of
//! hub.toml add models or replace shipped ones. A model matches the key equal to its name,
//! else the longest key its name starts with (`claude-sonnet-4-5` prices
//! `claude-sonnet-4-5-20250929`). A model no key matches has no cost (`None`), never a
//! made-up one; so has a call with cache tokens whose entry states no cache price.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::LazyLock;

use serde::Deserialize;
use toml::Spanned;

use super::Tokens;
use crate::toml_file::TomlFileError;

/// The table shipped with the hub.
pub const SHIPPED: &str = include_str!("prices.toml");

/// Dollars per million tokens of one model (or family of models).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

impl Price {
    /// What `tokens` cost, in dollars; none when they include a kind this price does not state.
    pub fn cost(&self, tokens: &Tokens) -> Option<f64> {
        let part = |count: u64, per_million: Option<f64>| match (count, per_million) {
            (0, _) => Some(0.0),
            (n, Some(p)) => Some(n as f64 * p / 1e6),
            (_, None) => None,
        };
        Some(
            part(tokens.input, Some(self.input))?
                + part(tokens.output, Some(self.output))?
                + part(tokens.cache_read, self.cache_read)?
                + part(tokens.cache_write, self.cache_write)?,
        )
    }
}

/// One `[prices."MODEL"]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceEntry {
    input: Spanned<f64>,
    output: Spanned<f64>,
    cache_read: Option<Spanned<f64>>,
    cache_write: Option<Spanned<f64>>,
}

impl PriceEntry {
    /// The price, or the field that cannot be one and why.
    fn price(&self) -> Result<Price, (Range<usize>, String)> {
        let check = |name: &str, v: &Spanned<f64>| {
            let value = *v.get_ref();
            match value.is_finite() && value >= 0.0 {
                true => Ok(value),
                false => Err((
                    v.span(),
                    format!("{name} must be a price in dollars per million tokens, 0 or more, not {value}"),
                )),
            }
        };
        Ok(Price {
            input: check("input", &self.input)?,
            output: check("output", &self.output)?,
            cache_read: self
                .cache_read
                .as_ref()
                .map(|v| check("cache_read", v))
                .transpose()?,
            cache_write: self
                .cache_write
                .as_ref()
                .map(|v| check("cache_write", v))
                .transpose()?,
        })
    }
}

/// `[prices]` tables as written, keyed by model name or prefix.
pub type PriceEntries = BTreeMap<String, Spanned<PriceEntry>>;

/// The shipped file: when its prices were taken, and the prices.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShippedFile {
    taken: String,
    prices: PriceEntries,
}

/// Prices by model name or prefix.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
    /// When the shipped prices were taken (`src/usage/prices.toml`).
    pub shipped_taken: String,
}

impl PriceTable {
    /// The shipped table with `entries` (from `text`, read from `origin`) added over it.
    pub fn with(entries: &PriceEntries, text: &str, origin: &str) -> Result<Self, TomlFileError> {
        let mut table = Self::shipped();
        table.add(entries, text, origin)?;
        Ok(table)
    }

    /// The table shipped with the hub (read once).
    pub fn shipped() -> Self {
        static TABLE: LazyLock<PriceTable> = LazyLock::new(|| {
            let file: ShippedFile = toml::from_str(SHIPPED).expect("src/usage/prices.toml parses");
            let mut table = PriceTable {
                prices: BTreeMap::new(),
                shipped_taken: file.taken,
            };
            table
                .add(&file.prices, SHIPPED, "src/usage/prices.toml")
                .expect("src/usage/prices.toml holds prices");
            table
        });
        TABLE.clone()
    }

    fn add(
        &mut self,
        entries: &PriceEntries,
        text: &str,
        origin: &str,
    ) -> Result<(), TomlFileError> {
        for (model, entry) in entries {
            if model.trim().is_empty() {
                let message =
                    "a price needs a model name or prefix: [prices.\"claude-sonnet-4-5\"]";
                return Err(TomlFileError::invalid(
                    text,
                    origin,
                    Some(entry.span()),
                    message,
                ));
            }
            let price = entry.get_ref().price().map_err(|(span, message)| {
                TomlFileError::invalid(text, origin, Some(span), message)
            })?;
            self.prices.insert(model.clone(), price);
        }
        Ok(())
    }

    /// The price of `model`: its own key, else the most specific key that matches it.
    pub fn price(&self, model: &str) -> Option<(&str, &Price)> {
        self.prices
            .iter()
            .filter_map(|(key, price)| Some((specificity(key, model)?, key.as_str(), price)))
            .max_by_key(|(rank, _, _)| *rank)
            .map(|(_, key, price)| (key, price))
    }

    /// What `tokens` of `model` cost, in dollars; none for a model the table does not price.
    pub fn cost(&self, model: Option<&str>, tokens: &Tokens) -> Option<f64> {
        self.price(model?)?.1.cost(tokens)
    }
}

/// How closely `key` names `model` (higher is closer), or `None` when it does not price it:
/// the same name; the name and a date (`-20250929`, `-2024-08-06`); a prefix written `NAME*`.
fn specificity(key: &str, model: &str) -> Option<(u8, usize)> {
    if key == model {
        return Some((2, key.len()));
    }
    if let Some(prefix) = key.strip_suffix('*') {
        return model.starts_with(prefix).then_some((0, prefix.len()));
    }
    let date = model.strip_prefix(key)?.strip_prefix('-')?;
    let dated = !date.is_empty() && date.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    dated.then_some((1, key.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Hub {
        #[serde(default)]
        prices: PriceEntries,
    }

    fn table(text: &str) -> Result<PriceTable, String> {
        let hub: Hub = toml::from_str(text)
            .map_err(|e| TomlFileError::syntax(text, "hub.toml", e).to_string())?;
        PriceTable::with(&hub.prices, text, "hub.toml").map_err(|e| e.to_string())
    }

    const TOKENS: Tokens = Tokens {
        input: 1_000_000,
        output: 100_000,
        cache_read: 2_000_000,
        cache_write: 10_000,
    };

    #[test]
    fn a_key_prices_its_model_its_dated_snapshots_or_what_its_star_covers() {
        let t = table(
            "[prices.\"m\"]\ninput = 1.0\noutput = 2.0\n[prices.\"m-large*\"]\ninput = 10.0\noutput = 20.0\n",
        )
        .unwrap();
        assert_eq!(t.price("m").unwrap().0, "m");
        assert_eq!(t.price("m-20250929").unwrap().0, "m");
        assert_eq!(t.price("m-2024-08-06").unwrap().0, "m");
        assert_eq!(t.price("m-large-preview").unwrap().0, "m-large*");
        assert_eq!(t.price("m-large").unwrap().0, "m-large*");
        // Another model whose name starts with a key's is not that key's.
        assert!(t.price("m-small").is_none());
        assert!(t.price("m-").is_none());
        assert!(t.price("other").is_none());
        assert_eq!(t.cost(Some("other"), &TOKENS), None);
        assert_eq!(t.cost(None, &TOKENS), None);
    }

    #[test]
    fn a_cost_is_each_kind_at_its_price() {
        let t = table(
            "[prices.\"m\"]\ninput = 3.0\noutput = 15.0\ncache_read = 0.3\ncache_write = 3.75\n",
        )
        .unwrap();
        let cost = t.cost(Some("m"), &TOKENS).unwrap();
        // 3.00 + 1.50 + 0.60 + 0.0375
        assert!((cost - 5.1375).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn cache_tokens_without_a_cache_price_have_no_cost() {
        let t = table("[prices.\"m\"]\ninput = 3.0\noutput = 15.0\n").unwrap();
        assert_eq!(t.cost(Some("m"), &TOKENS), None);
        let plain = Tokens {
            input: 1_000_000,
            output: 0,
            ..Default::default()
        };
        assert_eq!(t.cost(Some("m"), &plain), Some(3.0));
    }

    #[test]
    fn hub_toml_replaces_a_shipped_price() {
        let shipped = PriceTable::shipped();
        let (key, _) = shipped
            .prices
            .iter()
            .next()
            .map(|(k, p)| (k.clone(), *p))
            .unwrap();
        let t = table(&format!("[prices.\"{key}\"]\ninput = 0.5\noutput = 0.5\n")).unwrap();
        assert_eq!(t.price(&key).unwrap().1.input, 0.5);
        assert!(!shipped.shipped_taken.is_empty());
    }

    #[test]
    fn bad_prices_are_refused_at_their_place() {
        let e = table("[prices.\"m\"]\ninput = 3.0\n").unwrap_err();
        assert!(
            e.starts_with("hub.toml:1:1: ") && e.contains("missing field `output`"),
            "{e}"
        );
        let e = table("[prices.\"m\"]\ninput = -1.0\noutput = 2.0\n").unwrap_err();
        assert!(e.starts_with("hub.toml:2:9: input must be a price"), "{e}");
        let e = table("[prices.\"m\"]\ninput = 1.0\noutput = 2.0\ncache_read = nan\n").unwrap_err();
        assert!(e.starts_with("hub.toml:4:14: cache_read must be"), "{e}");
        let e = table("[prices.\"m\"]\ninput = 1.0\noutput = 2.0\nextra = 1\n").unwrap_err();
        assert!(e.contains("unknown field `extra`"), "{e}");
    }

    #[test]
    fn the_shipped_table_prices_the_shipped_profiles_default_models() {
        let t = PriceTable::shipped();
        for model in [
            "claude-opus-5-5",
            "claude-sonnet-5-5",
            "claude-sonnet-4-5-20250929",
            "gemini-3.8-flash",
            "gemini-3.1-pro-preview",
            "gpt-4o",
        ] {
            assert!(t.price(model).is_some(), "{model} has no shipped price");
        }
    }
}
