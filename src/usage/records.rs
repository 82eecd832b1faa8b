//! The model calls in a CLI's own records, one line at a time (`docs/research/
//! cli-usage-records.md` says where each CLI keeps them and what their fields mean).
//!
//! A [`Reader`] reads one record file from its start and remembers what it has counted, so a
//! call written on several lines (Claude Code writes one line per content block, each with the
//! whole call's usage) or written again when it changes (Gemini CLI) is counted once: a line
//! that repeats a call yields only what it adds to it.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Call, Tokens};

/// The record formats the hub reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Claude Code's transcripts: `<config dir>/projects/<dir>/<session>.jsonl`.
    ClaudeTranscript,
    /// Codex's rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`.
    CodexRollout,
    /// Gemini CLI's chat logs: `~/.gemini/tmp/<project>/chats/session-*.jsonl`.
    GeminiChat,
    /// Aider's chat history: `.aider.chat.history.md` in the repository it works in.
    AiderHistory,
    /// opencode's database: `$XDG_DATA_HOME/opencode/opencode.db`, no lines: read by
    /// [`super::opencode`] (a [`Reader`] finds no call in any line of it).
    OpencodeDb,
}

impl Format {
    /// Whether a file of this name is one of its records.
    pub fn names(self, file_name: &str) -> bool {
        match self {
            Format::AiderHistory => file_name == AIDER_HISTORY,
            _ => file_name.ends_with(".jsonl"),
        }
    }

    /// How deep under the records' directory they are looked for (Codex: `YYYY/MM/DD/`);
    /// Aider's is in the directory itself (a repository: not walked).
    pub fn depth(self) -> usize {
        match self {
            Format::AiderHistory => 0,
            _ => 5,
        }
    }
}

/// The name of Aider's chat history.
const AIDER_HISTORY: &str = ".aider.chat.history.md";

/// The calls of one record file, read line by line.
#[derive(Debug)]
pub struct Reader {
    format: Format,
    /// The model the file's latest context names (Codex names it apart from its calls).
    model: Option<String>,
    /// What was counted of each call so far.
    counted: HashMap<String, Tokens>,
    /// Aider's history, read as text.
    aider: super::aider::History,
}

impl Reader {
    pub fn new(format: Format) -> Self {
        Reader {
            format,
            model: None,
            counted: HashMap::new(),
            aider: Default::default(),
        }
    }

    /// The call `line` records, as far as it was not counted before; none for any other line
    /// (or one that is not JSON: a line being written is read again once it is whole).
    pub fn line(&mut self, line: &str) -> Option<Call> {
        if self.format == Format::AiderHistory {
            return self.aider.line(line);
        }
        let record: Value = serde_json::from_str(line).ok()?;
        let mut call = match self.format {
            Format::ClaudeTranscript => claude(&record)?,
            Format::CodexRollout => self.codex(&record)?,
            Format::GeminiChat => gemini(&record)?,
            Format::AiderHistory | Format::OpencodeDb => return None,
        };
        let before = self.counted.insert(call.key.clone(), call.tokens);
        if let Some(before) = before {
            call.tokens = call.tokens.beyond(&before);
            if call.tokens == Tokens::default() {
                return None;
            }
        }
        Some(call)
    }

    fn codex(&mut self, record: &Value) -> Option<Call> {
        let payload = record.get("payload")?;
        match record.get("type")?.as_str()? {
            "turn_context" => {
                self.model = text(payload, "model");
                None
            }
            "token_usage_record" => {
                let usage = payload.get("usage")?;
                let cached = count(usage, "cached_input_tokens");
                let written = count(usage, "cache_write_input_tokens");
                Some(Call {
                    key: format!("codex:{}", ordinal_or_time(record)),
                    at: time(record),
                    model: self.model.clone(),
                    tokens: Tokens {
                        // OpenAI's input counts the cached tokens too.
                        input: count(usage, "input_tokens").saturating_sub(cached + written),
                        output: count(usage, "output_tokens"),
                        cache_read: cached,
                        cache_write: written,
                    },
                    stated_cost_usd: None,
                })
            }
            _ => None,
        }
    }
}

/// A Claude Code transcript line: an assistant message's usage, keyed by the API call
/// (`requestRef`, else `requestId`, else the message id). Error lines the CLI writes itself
/// (`isApiErrorMessage`, model `<synthetic>`) are no call.
fn claude(record: &Value) -> Option<Call> {
    if record.get("type")?.as_str()? != "assistant"
        || record.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let message = record.get("message")?;
    let usage = message.get("usage")?;
    let model = text(message, "model").filter(|m| m != "<synthetic>")?;
    let key = ["requestRef", "requestId"]
        .iter()
        .find_map(|k| text(record, k))
        .or_else(|| text(message, "id"))?;
    Some(Call {
        key: format!("claude:{key}"),
        at: time(record),
        model: Some(model),
        tokens: Tokens {
            input: count(usage, "input_tokens"),
            output: count(usage, "output_tokens"),
            cache_read: count(usage, "cache_read_input_tokens"),
            cache_write: count(usage, "cache_creation_input_tokens"),
        },
        stated_cost_usd: None,
    })
}

/// A Gemini CLI chat line: a model reply's `tokens`, keyed by the message id (a message is
/// appended again when it changes; the last copy holds its figures).
fn gemini(record: &Value) -> Option<Call> {
    if record.get("type")?.as_str()? != "gemini" {
        return None;
    }
    let tokens = record.get("tokens")?;
    let cached = count(tokens, "cached");
    Some(Call {
        key: format!("gemini:{}", text(record, "id")?),
        at: time(record),
        model: text(record, "model"),
        tokens: Tokens {
            // Gemini's prompt count includes the cached tokens.
            input: count(tokens, "input").saturating_sub(cached),
            output: count(tokens, "output") + count(tokens, "thoughts"),
            cache_read: cached,
            cache_write: 0,
        },
        stated_cost_usd: None,
    })
}

fn count(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(String::from)
}

fn time(record: &Value) -> Option<DateTime<Utc>> {
    let at = record.get("timestamp")?.as_str()?;
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// What names a Codex usage record in its file: its ordinal, else its time.
fn ordinal_or_time(record: &Value) -> String {
    match record.get("ordinal").and_then(Value::as_u64) {
        Some(n) => n.to_string(),
        None => text(record, "timestamp").unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Tokens {
        Tokens {
            input,
            output,
            cache_read,
            cache_write,
        }
    }

    fn claude_line(block: u32, request: &str) -> String {
        format!(
            r#"{{"type":"assistant","timestamp":"2026-11-27T01:11:49.5Z","requestRef":"{request}","apiBlockIndex":{block},"message":{{"id":"msg_standin","model":"claude-opus-5-5","usage":{{"input_tokens":1234,"cache_creation_input_tokens":89,"cache_read_input_tokens":567,"output_tokens":42}}}}}}"#
        )
    }

    #[test]
    fn claude_counts_a_call_once_across_its_content_blocks() {
        let mut r = Reader::new(Format::ClaudeTranscript);
        let first = r.line(&claude_line(0, "a")).unwrap();
        assert_eq!(first.tokens, tokens(1234, 42, 567, 89));
        assert_eq!(first.model.as_deref(), Some("claude-opus-5-5"));
        assert!(first.at.is_some());
        assert_eq!(r.line(&claude_line(1, "a")), None);
        // Another call with the same message id (the stand-in's) is another call.
        assert!(r.line(&claude_line(0, "b")).is_some());
    }

    #[test]
    fn claude_skips_what_is_no_call() {
        let mut r = Reader::new(Format::ClaudeTranscript);
        let synthetic = r#"{"type":"assistant","isApiErrorMessage":true,"requestRef":"x","message":{"id":"m","model":"<synthetic>","usage":{"input_tokens":0,"output_tokens":0}}}"#;
        assert_eq!(r.line(synthetic), None);
        assert_eq!(
            r.line(r#"{"type":"user","message":{"content":"hi"}}"#),
            None
        );
        assert_eq!(
            r.line(r#"{"type":"assistant","message":{"id":"m","model"#),
            None
        );
        assert_eq!(r.line("not json"), None);
    }

    #[test]
    fn codex_takes_the_model_from_its_context_and_the_cache_out_of_input() {
        let mut r = Reader::new(Format::CodexRollout);
        assert_eq!(
            r.line(r#"{"type":"turn_context","payload":{"model":"gpt-6.1-sol"}}"#),
            None
        );
        let usage = r#"{"timestamp":"2026-11-27T01:19:40Z","ordinal":11,"type":"token_usage_record","payload":{"usage":{"input_tokens":1234,"cached_input_tokens":567,"cache_write_input_tokens":89,"output_tokens":42,"reasoning_output_tokens":7,"total_tokens":1276}}}"#;
        let call = r.line(usage).unwrap();
        assert_eq!(call.tokens, tokens(578, 42, 567, 89));
        assert_eq!(call.model.as_deref(), Some("gpt-6.1-sol"));
        // The running totals are not calls of their own.
        let totals = r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":2468}}}}"#;
        assert_eq!(r.line(totals), None);
        assert_eq!(
            r.line(r#"{"type":"event_msg","payload":{"type":"token_count","info":null}}"#),
            None
        );
    }

    #[test]
    fn gemini_counts_what_a_message_appended_again_adds() {
        let mut r = Reader::new(Format::GeminiChat);
        let line = |output: u64| {
            format!(
                r#"{{"id":"24474776","timestamp":"2026-11-27T01:20:00Z","type":"gemini","tokens":{{"input":1234,"output":{output},"cached":567,"thoughts":7,"tool":0,"total":1283}},"model":"gemini-3.8-flash"}}"#
            )
        };
        assert_eq!(r.line(&line(42)).unwrap().tokens, tokens(667, 49, 567, 0));
        assert_eq!(r.line(&line(42)), None);
        assert_eq!(r.line(&line(50)).unwrap().tokens, tokens(0, 8, 0, 0));
        assert_eq!(r.line(r#"{"$set":{"lastUpdated":"x"}}"#), None);
        assert_eq!(r.line(r#"{"id":"u","type":"user","content":[]}"#), None);
    }

    #[test]
    fn opencode_has_no_lines() {
        let mut r = Reader::new(Format::OpencodeDb);
        let part = r#"{"type":"step-finish","tokens":{"input":1,"output":1,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0}"#;
        assert_eq!(r.line(part), None);
        let format: Format = serde_json::from_str(r#""opencode-db""#).unwrap();
        assert_eq!(format, Format::OpencodeDb);
    }
}
