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
    /// The records' format: `claude-transcript`, `codex-rollout`, `gemini-chat`,
    /// `aider-history` or `opencode-db`.
    pub records: records::Format,
    /// Their directory under where they are (its subdirectories included): `projects`; empty
    /// for that place itself.
    #[serde(default)]
    pub dir: String,
    /// Where `dir` is when not under the CLI's config dir: a data dir of its own (opencode's).
    pub data_dir: Option<DataDir>,
    /// `dir` is under the directory the CLI works in (Aider's repository).
    #[serde(default)]
    pub in_workdir: bool,
}

/// A directory of a CLI's own: the one `env` names, else `home` under its home (opencode's
/// `$XDG_DATA_HOME`, else `.local/share`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataDir {
    pub env: String,
    pub home: String,
}

/// Where a CLI's records are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Under<'a> {
    /// The config dir its status file or its hooks are in (`~/.claude`).
    ConfigDir,
    DataDir(&'a DataDir),
    Workdir,
}

impl UsageSpec {
    /// Where its `dir` is.
    pub fn under(&self) -> Under<'_> {
        match (&self.data_dir, self.in_workdir) {
            (Some(d), _) => Under::DataDir(d),
            (None, true) => Under::Workdir,
            (None, false) => Under::ConfigDir,
        }
    }
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
