//! What agents spend, read from the agents' own records (never from their model traffic): the
//! token counts of each model call a CLI records ([`records`]), priced by a table of dollars
//! per million tokens ([`price`]). Pure: the loops that find and follow the files are above.
//!
//! Token kinds follow Anthropic's meaning, whatever a CLI writes: `input` counts neither cache
//! reads nor cache writes, each of which is counted apart. A CLI whose input includes its
//! cached tokens (Codex, Gemini CLI, Aider) has them taken out when read. What each CLI records, and
//! where, is in `docs/research/cli-usage-records.md`.

pub mod aider;
pub mod budget;
pub mod files;
pub mod opencode;
pub mod price;
pub mod records;
pub mod tally;

use std::ops::AddAssign;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Tokens of one call, or a sum of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Tokens {
    /// Input not read from or written to a cache.
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    /// All four kinds together.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }

    /// What `self` has beyond `earlier`, kind by kind (none where it has less).
    pub fn beyond(&self, earlier: &Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_sub(earlier.input),
            output: self.output.saturating_sub(earlier.output),
            cache_read: self.cache_read.saturating_sub(earlier.cache_read),
            cache_write: self.cache_write.saturating_sub(earlier.cache_write),
        }
    }
}

impl AddAssign for Tokens {
    fn add_assign(&mut self, other: Tokens) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
    }
}

/// `[usage]` of a profile: where and how the CLI records what each model call used.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageSpec {
    /// The records' format: `claude-transcript`, `codex-rollout` or `gemini-chat`.
    pub records: records::Format,
    /// Their directory under the CLI's config dir (its subdirectories included): `projects`.
    pub dir: String,
}

/// One model call as a CLI recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// What names the call in its record (a repeated line of the same call has the same key).
    pub key: String,
    /// When the CLI recorded it, if it says.
    pub at: Option<DateTime<Utc>>,
    /// The model that answered, if the record names it.
    pub model: Option<String>,
    pub tokens: Tokens,
    /// The cost the CLI itself states (Aider), taken at its word; else none (the price table
    /// decides).
    pub stated_cost_usd: Option<f64>,
}
