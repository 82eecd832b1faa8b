//! Secret redaction, written once for every path output leaves the hub by: REST reads, talk,
//! term_read, the WebSocket stream (and so `attach`), task output and events, audit records,
//! and persisted snapshots. The ring keeps the raw bytes; redaction happens on the way out.
//!
//! A [`Redactor`] holds the built-in patterns ([`patterns`]) plus the literal values of
//! secrets the hub injected into environments (names that look secret: `*TOKEN*`, `*KEY*`,
//! `*SECRET*`, `*PASSWORD*`, and anything listed in `[redact] secrets`). Patterns run on the
//! visible text ([`visible`]), so escape sequences inside a secret do not hide it; each secret
//! becomes [`MARKER`], and escape sequences inside it are kept so the terminal state stays right.
//!
//! [`Redactor::redact_window`] redacts a piece of output given the output just before it, so
//! a secret that began earlier is still caught; [`stream::StreamRedactor`] builds on it for
//! byte streams, holding back only a trailing word that could still become a secret.

#[doc(hidden)]
pub mod corpus;
pub mod patterns;
pub mod stream;
pub mod visible;

use std::sync::{Arc, RwLock};

use regex::bytes::Regex;
use serde::Deserialize;

/// What a secret is replaced with.
pub const MARKER: &str = "[REDACTED]";
/// How much visible output before a piece is looked at to catch a secret that began earlier.
pub const CONTEXT_BYTES: usize = 4096;
/// Shortest literal secret value redacted (shorter values would hit ordinary words).
pub const MIN_LITERAL_LEN: usize = 6;
/// How many characters past a known prefix make a cut-off word count as a secret when a
/// stream must flush it before it is complete.
const PARTIAL_MIN_CHARS: usize = 4;

/// `[redact]` in `hub.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedactConfig {
    /// Literal secret values to redact wherever they appear.
    pub secrets: Vec<String>,
    /// Environment variable names whose values are secrets even if the name does not look it.
    pub secret_env: Vec<String>,
}

/// Whether an environment variable's name says its value is a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|w| upper.contains(w))
}

struct Compiled {
    name: &'static str,
    regex: Regex,
    secret_group: Option<usize>,
}

/// The pattern set and the literal secrets; shared by every output path of a hub.
pub struct Redactor {
    patterns: Vec<Compiled>,
    /// All patterns in one pass: most output has no secret, and then this is all it costs.
    any: regex::bytes::RegexSet,
    prefixes: Vec<&'static str>,
    hold_shapes: regex::bytes::RegexSet,
    value_context: Regex,
    literals: RwLock<Arc<Literals>>,
    /// Secrets replaced so far (a metric).
    redactions: prometheus_client::metrics::counter::Counter,
}

#[derive(Default)]
struct Literals {
    values: Vec<Vec<u8>>,
    regex: Option<Regex>,
}

impl Default for Redactor {
    fn default() -> Self {
        Self::new()
    }
}

impl Redactor {
    /// The built-in patterns and no literals.
    pub fn new() -> Self {
        let patterns = patterns::PATTERNS
            .iter()
            .map(|p| {
                let regex = Regex::new(&format!("(?-u){}", p.regex))
                    .unwrap_or_else(|e| panic!("built-in pattern {} is invalid: {e}", p.name));
                let secret_group = regex.capture_names().position(|n| n == Some("s"));
                Compiled {
                    name: p.name,
                    regex,
                    secret_group,
                }
            })
            .collect();
        let any = regex::bytes::RegexSet::new(
            patterns::PATTERNS
                .iter()
                .map(|p| format!("(?-u){}", p.regex)),
        )
        .unwrap_or_else(|e| panic!("built-in patterns are invalid: {e}"));
        let hold_shapes =
            regex::bytes::RegexSet::new(patterns::HOLD_SHAPES.iter().map(|p| format!("(?-u){p}")))
                .unwrap_or_else(|e| panic!("built-in hold shapes are invalid: {e}"));
        let value_context = Regex::new(&format!("(?-u){}", patterns::VALUE_CONTEXT))
            .unwrap_or_else(|e| panic!("built-in value context is invalid: {e}"));
        Redactor {
            value_context,
            hold_shapes,
            any,
            patterns,
            prefixes: patterns::PATTERNS
                .iter()
                .flat_map(|p| p.prefixes.iter().copied())
                .collect(),
            literals: RwLock::new(Arc::new(Literals::default())),
            redactions: Default::default(),
        }
    }

    /// The count of secrets replaced (for the hub's metrics).
    pub fn counter(&self) -> &prometheus_client::metrics::counter::Counter {
        &self.redactions
    }

    /// The names of the built-in patterns.
    pub fn pattern_names(&self) -> Vec<&'static str> {
        self.patterns.iter().map(|p| p.name).collect()
    }

    /// Adds literal secret values (shorter than [`MIN_LITERAL_LEN`] are ignored).
    pub fn add_literals<'a>(&self, values: impl IntoIterator<Item = &'a str>) {
        let mut guard = self.literals.write().unwrap_or_else(|e| e.into_inner());
        let mut all = guard.values.clone();
        let mut changed = false;
        for v in values {
            let v = v.trim();
            if v.len() >= MIN_LITERAL_LEN && !all.iter().any(|x| x == v.as_bytes()) {
                all.push(v.as_bytes().to_vec());
                changed = true;
            }
        }
        if !changed {
            return;
        }
        // Longest first, so a value that contains another is redacted whole.
        all.sort_by_key(|v| std::cmp::Reverse(v.len()));
        let alternation = all
            .iter()
            .map(|v| regex::escape(&String::from_utf8_lossy(v)))
            .collect::<Vec<_>>()
            .join("|");
        let regex = Regex::new(&alternation).ok();
        *guard = Arc::new(Literals { values: all, regex });
    }

    /// Adds the values of the secret-looking variables of an environment.
    pub fn add_env_secrets<'a>(
        &self,
        env: impl IntoIterator<Item = (&'a String, &'a String)>,
        also_secret: &[String],
    ) {
        let values: Vec<&str> = env
            .into_iter()
            .filter(|(k, _)| is_secret_name(k) || also_secret.contains(k))
            .map(|(_, v)| v.as_str())
            .collect();
        self.add_literals(values);
    }

    fn literals(&self) -> Arc<Literals> {
        self.literals
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Redacts a complete text (a JSON string, a record): its end is its end, so a trailing
    /// word is not taken for a cut-off secret (`http://host:port` stays readable).
    pub fn redact_str(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.redact_bytes(text.as_bytes())).into_owned()
    }

    /// Redacts complete output (for snapshots and whole replies): its end is an end, not a cut,
    /// so a trailing `scheme://host:port` stays.
    pub fn redact_bytes(&self, raw: &[u8]) -> Vec<u8> {
        self.redact_window(&[], raw, false)
    }

    /// Redacts a read of output that follows `before`. With `may_continue` (the program may be
    /// printing the rest right now), a trailing word that could be a secret's start is left
    /// out; returns the redacted bytes and how many raw bytes were held back.
    pub fn redact_read(
        self: &Arc<Self>,
        before: &[u8],
        piece: &[u8],
        may_continue: bool,
    ) -> (Vec<u8>, usize) {
        if !may_continue {
            return (self.redact_window(before, piece, true), 0);
        }
        let mut stream = stream::StreamRedactor::new(self.clone(), before);
        let out = stream.push(piece);
        (out, stream.held_bytes())
    }

    /// Redacts every string inside a JSON value, in place.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) if !s.is_empty() => *s = self.redact_str(s),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| self.redact_json(v)),
            _ => {}
        }
    }

    /// Redacts `piece`, the output that follows `before` (raw output, of which the last
    /// [`CONTEXT_BYTES`] are looked at). With `at_end`, `piece` may end inside a secret whose
    /// rest has not arrived: a trailing word that starts with a known prefix is redacted too.
    pub fn redact_window(&self, before: &[u8], piece: &[u8], at_end: bool) -> Vec<u8> {
        let before = &before[before.len().saturating_sub(CONTEXT_BYTES)..];
        let ctx = visible::project(before);
        let ctx_text: &[u8] = &ctx.text;
        let v = visible::project(piece);
        let mut text = Vec::with_capacity(ctx_text.len() + v.text.len());
        text.extend_from_slice(ctx_text);
        text.extend_from_slice(&v.text);
        let offset = ctx_text.len();
        let mut spans = self.secret_spans(&text);
        if at_end {
            if let Some(start) = self.partial_secret_start(&text) {
                spans.push((start, text.len()));
            }
        }
        // Into the piece's visible coordinates.
        let spans: Vec<(usize, usize)> = merge(
            spans
                .into_iter()
                .filter(|&(_, e)| e > offset)
                .map(|(s, e)| (s.saturating_sub(offset), e - offset))
                .collect(),
        );
        if !spans.is_empty() {
            self.redactions.inc_by(spans.len() as u64);
        }
        rebuild(piece, &v, &spans)
    }

    /// Visible-text spans `(start, end)` that are secrets.
    fn secret_spans(&self, text: &[u8]) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        // Most output has no secret: one forward scan says so, cheaper than the overlapping
        // search that tells which patterns matched (#17: a third of the hub's CPU in a flood).
        let matched = self.any.is_match(text).then(|| self.any.matches(text));
        for i in matched.iter().flat_map(|m| m.iter()) {
            let p = &self.patterns[i];
            for caps in p.regex.captures_iter(text) {
                let m = match p.secret_group {
                    Some(g) => caps.get(g),
                    None => caps.get(0),
                };
                if let Some(m) = m.filter(|m| !m.is_empty()) {
                    spans.push((m.start(), m.end()));
                }
            }
        }
        if let Some(re) = &self.literals().regex {
            spans.extend(re.find_iter(text).map(|m| (m.start(), m.end())));
        }
        spans
    }

    /// Where the trailing word of `text` starts, if it is a cut-off secret: it begins with a
    /// known prefix and has a few characters more, has the shape of a secret's first part,
    /// follows `Bearer` or `key =`, or is the start of a literal secret.
    fn partial_secret_start(&self, text: &[u8]) -> Option<usize> {
        let start = trailing_word_start(text);
        let word = &text[start..];
        if word.is_empty() {
            return None;
        }
        let prefixed = self
            .prefixes
            .iter()
            .any(|p| word.len() >= p.len() + PARTIAL_MIN_CHARS && word.starts_with(p.as_bytes()));
        // After `key:` a short word is more likely an answer ("y") than a cut-off secret, and
        // `scheme://host:1234` is an address (dev servers end on it), not `user:pass` cut
        // before its `@`: at most a 5-digit password could show.
        let shaped = (self.hold_shapes.is_match(word) && !is_host_port(word))
            || (word.len() >= PARTIAL_MIN_CHARS && self.follows_value_context(&text[..start]));
        let literal = word.len() >= 4 && self.is_literal_start(word);
        (prefixed || shaped || literal).then_some(start)
    }

    /// Whether `before` ends with text after which a word is a secret value.
    fn follows_value_context(&self, before: &[u8]) -> bool {
        self.value_context
            .is_match(&before[before.len().saturating_sub(64)..])
    }

    fn is_literal_start(&self, word: &[u8]) -> bool {
        self.literals()
            .values
            .iter()
            .any(|l| l.len() > word.len() && l.starts_with(word))
    }

    /// Whether a trailing `word` (after `before`) could still grow into a secret, so a
    /// stream should hold it until it is complete.
    pub(crate) fn could_become_secret(&self, before: &[u8], word: &[u8]) -> bool {
        if word.is_empty() {
            return false;
        }
        let prefix = self.prefixes.iter().any(|p| {
            let p = p.as_bytes();
            if word.len() <= p.len() {
                p.starts_with(word)
            } else {
                word.starts_with(p)
            }
        });
        prefix
            || self.hold_shapes.is_match(word)
            || self.follows_value_context(before)
            || self.is_literal_start(word)
    }
}

/// The retained raw output just before `offset` (up to [`CONTEXT_BYTES`]): the context a
/// piece of output starting at `offset` is redacted with.
pub fn output_before(output: &crate::output::Output, offset: u64) -> Vec<u8> {
    let from = offset.saturating_sub(CONTEXT_BYTES as u64);
    let mut chunk = output.read(Some(from), CONTEXT_BYTES);
    let keep = offset.saturating_sub(chunk.start_offset) as usize;
    chunk.bytes.truncate(keep.min(chunk.bytes.len()));
    chunk.bytes
}

/// Start of the run of non-whitespace bytes that ends `text`.
/// `scheme://host:port` with a numeric port of at most 5 digits and nothing after it.
fn is_host_port(word: &[u8]) -> bool {
    let Some(colon) = word.iter().rposition(|&b| b == b':') else {
        return false;
    };
    let port = &word[colon + 1..];
    (1..=5).contains(&port.len())
        && port.iter().all(u8::is_ascii_digit)
        && !word.contains(&b'@')
        && word[..colon].windows(3).any(|w| w == b"://")
}

pub(crate) fn trailing_word_start(text: &[u8]) -> usize {
    text.iter()
        .rposition(|b| b.is_ascii_whitespace())
        .map_or(0, |i| i + 1)
}

fn merge(mut spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    spans.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Writes `raw` with the visible bytes inside `spans` replaced by one [`MARKER`] per span;
/// escape sequences (and an unfinished one at the end) are kept as they are.
fn rebuild(raw: &[u8], v: &visible::Visible, spans: &[(usize, usize)]) -> Vec<u8> {
    if spans.is_empty() {
        return raw.to_vec();
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut span = spans.iter().peekable();
    let mut raw_pos = 0;
    for vi in 0..v.text.len() {
        let ri = v.raw_pos(vi);
        // Escape bytes between the previous visible byte and this one.
        out.extend_from_slice(&raw[raw_pos..ri]);
        raw_pos = ri + 1;
        while span.peek().is_some_and(|&&(_, e)| e <= vi) {
            span.next();
        }
        match span.peek() {
            Some(&&(s, _)) if s <= vi => {
                if vi == s || vi == 0 {
                    out.extend_from_slice(MARKER.as_bytes());
                }
            }
            _ => out.push(raw[ri]),
        }
    }
    out.extend_from_slice(&raw[raw_pos..]);
    out
}

#[cfg(test)]
mod tests;
