//! Aider's usage, which it keeps in no file of its own: the report it prints after each reply
//! (and copies into `.aider.chat.history.md`),
//!
//! ```text
//! Tokens: 1.3k sent, 89 cache write, 567 cache hit, 42 received.
//! Cost: $0.0048 message, $0.0048 session.
//! ```
//!
//! `Cost:` follows on the same line, or on the next when both cache counts are shown, and is
//! left out for a model Aider has no price for. Counts of 1,000 and more are rounded by Aider
//! (`1.3k`, `12k`): the figures are Aider's, as it shows them. Its cost is taken at its word.
//! Aider counts `sent` with the cache writes in it; they are taken out here.

use regex::Regex;
use std::sync::LazyLock;

use super::Tokens;

static REPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"Tokens: (?P<sent>[\d.]+k?) sent(?:, (?P<write>[\d.]+k?) cache write)?",
        r"(?:, (?P<hit>[\d.]+k?) cache hit)?, (?P<received>[\d.]+k?) received\.",
        r"(?:\s*Cost: \$(?P<cost>[\d.]+) message, \$[\d.]+ session\.)?",
    ))
    .expect("the report pattern compiles")
});

/// One reply's report: its tokens, and its cost when Aider states one.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    /// Where the report ends in the text it was found in.
    pub end: usize,
}

/// The reports in `text`, in order (a report whose `Cost:` line may still be coming is left
/// for a later look: call with the text up to the last whole line).
pub fn reports(text: &str) -> Vec<Report> {
    REPORT
        .captures_iter(text)
        .filter_map(|c| {
            let n = |name: &str| c.name(name).map_or(Some(0), |m| number(m.as_str()));
            let write = n("write")?;
            Some(Report {
                tokens: Tokens {
                    input: n("sent")?.saturating_sub(write),
                    output: n("received")?,
                    cache_read: n("hit")?,
                    cache_write: write,
                },
                cost_usd: c.name("cost").and_then(|m| m.as_str().parse().ok()),
                end: c.get(0).map_or(0, |m| m.end()),
            })
        })
        .collect()
}

/// `765`, `1.2k`, `12k`, as Aider prints them.
fn number(text: &str) -> Option<u64> {
    match text.strip_suffix('k') {
        Some(thousands) => thousands
            .parse::<f64>()
            .ok()
            .map(|v| (v * 1000.0).round() as u64),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_on_one_line_and_one_split_over_two() {
        let text = "Hi.\n\nTokens: 765 sent, 4 received. Cost: $0.0024 message, $0.0024 session.\n\
                    ok\nTokens: 1.3k sent, 89 cache write, 567 cache hit, 42 received.\n\
                    Cost: $0.0048 message, $0.0072 session.\n";
        let found = reports(text);
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].tokens,
            Tokens {
                input: 765,
                output: 4,
                ..Default::default()
            }
        );
        assert_eq!(found[0].cost_usd, Some(0.0024));
        assert_eq!(
            found[1].tokens,
            Tokens {
                input: 1211,
                output: 42,
                cache_read: 567,
                cache_write: 89
            }
        );
        assert_eq!(found[1].cost_usd, Some(0.0048));
        assert!(text[found[1].end..].trim().is_empty());
    }

    #[test]
    fn a_report_with_no_cost_and_rounded_counts() {
        let found = reports("Tokens: 12k sent, 1.5k received.\n");
        assert_eq!(found[0].tokens.input, 12_000);
        assert_eq!(found[0].tokens.output, 1_500);
        assert_eq!(found[0].cost_usd, None);
        assert!(reports("Tokens: many sent").is_empty());
    }
}
