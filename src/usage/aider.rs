//! Aider's usage, which it keeps in no record of its own: the report it prints after each
//! reply, and copies into its chat history (`.aider.chat.history.md`, read by [`History`]),
//!
//! ```text
//! Tokens: 2.0k sent, 78 cache write, 560 cache hit, 34 received.
//! Cost: $0.0067 message, $0.02 session.
//! ```
//!
//! `Cost:` follows on the same line, or on the next when both cache counts are shown, and is
//! left out for a model Aider has no price for. Counts of 1,000 and more are rounded by Aider
//! (`1.3k`, `12k`): the figures are Aider's, as it shows them. Its cost is taken at its word
//! (where LiteLLM prices nothing, Aider's own formula charges the whole prompt count at the
//! input price and the cache counts on top of it: more than the tokens cost at their prices).
//!
//! Aider's figures are the server's only when it does not stream (`--no-stream`); a streamed
//! reply's are Aider's own estimate. Its `sent` is the server's prompt count plus the cache
//! writes once more: the prompt count counts the cached tokens, read and written (OpenAI's
//! meaning, and LiteLLM's for Claude), but Aider takes it for Anthropic's input, which counts
//! neither. Both cache counts are taken out of `sent` here, the writes twice. Aider shows the
//! cache counts of a server that sends Anthropic's fields (`cache_read_input_tokens`,
//! `cache_creation_input_tokens`) or DeepSeek's (`prompt_cache_hit_tokens`), not OpenAI's own
//! (`prompt_tokens_details.cached_tokens`): the cached tokens of such a server are input here.

use regex::Regex;
use std::sync::LazyLock;

use super::{Call, Tokens};

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
            let hit = n("hit")?;
            Some(Report {
                tokens: Tokens {
                    input: n("sent")?.saturating_sub(hit + 2 * write),
                    output: n("received")?,
                    cache_read: hit,
                    cache_write: write,
                },
                cost_usd: c.name("cost").and_then(|m| m.as_str().parse().ok()),
                end: c.get(0).map_or(0, |m| m.end()),
            })
        })
        .collect()
}

/// The model of Aider's announcement (`Model: openai/x with whole edit format`, `Main model:
/// …` when it has a weak model of another name).
static MODEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:Main model|Model): (?P<name>\S+) with ").expect("the model pattern compiles")
});

/// Aider's chat history (`.aider.chat.history.md` in the repository it works in), read line
/// by line: each report becomes a call of the model the session's latest announcement names.
/// Aider writes a report in one piece, so a `Cost:` on a line of its own arrives with its
/// `Tokens:` line; a report whose `Cost:` may follow (both cache counts and no cost) waits for
/// the next line, which an unpriced model's report never has: its call is counted with Aider's
/// next line.
#[derive(Debug, Default)]
pub struct History {
    model: Option<String>,
    /// A report that may go on with a `Cost:` line.
    pending: Option<String>,
    /// The reports read so far (each call's key).
    read: u64,
}

impl History {
    /// The call a line ends, if any.
    pub fn line(&mut self, line: &str) -> Option<Call> {
        let text = line.strip_prefix("> ").unwrap_or(line).trim_end();
        if let Some(m) = MODEL.captures(text) {
            self.model = Some(api_name(&m["name"]).to_string());
        }
        match self.pending.take() {
            Some(report) if text.starts_with("Cost:") => self.call(&format!("{report}\n{text}")),
            Some(report) => {
                self.hold(text);
                self.call(&report)
            }
            None if self.hold(text) => None,
            None => self.call(text),
        }
    }

    /// Keeps `text` for the next line when it is a report that may go on there.
    fn hold(&mut self, text: &str) -> bool {
        let may_go_on = text.starts_with("Tokens:")
            && text.contains(" cache write,")
            && text.contains(" cache hit,")
            && !text.contains("Cost:");
        if may_go_on {
            self.pending = Some(text.to_string());
        }
        may_go_on
    }

    /// The call of the report `text` holds (none when it holds none).
    fn call(&mut self, text: &str) -> Option<Call> {
        if !text.starts_with("Tokens:") {
            return None;
        }
        let report = reports(text).into_iter().next()?;
        self.read += 1;
        Some(Call {
            key: format!("aider:{}", self.read),
            at: None,
            model: self.model.clone(),
            tokens: report.tokens,
            stated_cost_usd: report.cost_usd,
        })
    }
}

/// The model as its API knows it: Aider's (LiteLLM's) name without its provider
/// (`openai/gpt-4o`: `gpt-4o`; `openrouter/anthropic/claude-x`: `anthropic/claude-x`).
fn api_name(name: &str) -> &str {
    name.split_once('/').map_or(name, |(_, model)| model)
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
                    ok\nTokens: 2.0k sent, 78 cache write, 560 cache hit, 34 received.\n\
                    Cost: $0.0067 message, $0.0091 session.\n";
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
        // 2,000 sent: 1,284 input, 560 read, 78 written (counted twice).
        assert_eq!(
            found[1].tokens,
            Tokens {
                input: 1284,
                output: 34,
                cache_read: 560,
                cache_write: 78
            }
        );
        assert_eq!(found[1].cost_usd, Some(0.0067));
        assert!(text[found[1].end..].trim().is_empty());
    }

    #[test]
    fn a_cache_hit_alone_is_taken_out_of_what_was_sent() {
        // DeepSeek's `prompt_cache_hit_tokens`: a part of the prompt count, no cache write.
        let found = reports("Tokens: 900 sent, 300 cache hit, 20 received.\n");
        assert_eq!(
            found[0].tokens,
            Tokens {
                input: 600,
                output: 20,
                cache_read: 300,
                cache_write: 0
            }
        );
    }

    /// Lines as Aider appends them to its chat history.
    const HISTORY: &str = "\n# aider chat started at 2026-11-27 10:00:00\n\n\
        > Aider v0.86.2  \n> Model: openai/standin-model with whole edit format  \n\
        > Git repo: .git with 1 files  \n\n#### say something  \n\nHi.\n\n\
        > Tokens: 765 sent, 4 received. Cost: $0.0024 message, $0.0024 session.  \n\n\
        #### please run a tool  \n\n\
        > Tokens: 2.0k sent, 78 cache write, 560 cache hit, 34 received.\n\
        Cost: $0.0067 message, $0.0091 session.  \n\n\
        > Tokens: 2.0k sent, 78 cache write, 560 cache hit, 34 received.  \n\n\
        > /model x  \n";

    #[test]
    fn the_history_gives_each_report_as_a_call_of_the_announced_model() {
        let mut history = History::default();
        let calls: Vec<Call> = HISTORY.lines().filter_map(|l| history.line(l)).collect();
        assert_eq!(calls.len(), 3, "{calls:#?}");
        assert!(calls
            .iter()
            .all(|c| c.model.as_deref() == Some("standin-model")));
        assert_eq!(calls[0].tokens.input, 765);
        assert_eq!(calls[0].stated_cost_usd, Some(0.0024));
        // The cost on a line of its own belongs to its report.
        assert_eq!(calls[1].tokens.cache_write, 78);
        assert_eq!(calls[1].stated_cost_usd, Some(0.0067));
        // An unpriced report that may have gone on: counted with the line after it.
        assert_eq!(calls[2].tokens.input, 1284);
        assert_eq!(calls[2].stated_cost_usd, None);
        let keys: Vec<&str> = calls.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["aider:1", "aider:2", "aider:3"]);
    }

    #[test]
    fn models_are_named_as_their_api_names_them() {
        assert_eq!(api_name("openai/gpt-4o"), "gpt-4o");
        assert_eq!(
            api_name("openrouter/anthropic/claude-x"),
            "anthropic/claude-x"
        );
        assert_eq!(api_name("gpt-4o"), "gpt-4o");
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
