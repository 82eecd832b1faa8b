//! What every agent spent, kept: the model calls read from each agent's own records
//! ([`crate::usage::files`]), counted into a [`Tally`] and appended to
//! `<data_dir>/usage/<agent>.jsonl`, read back at start. The figures belong to the agent's
//! history: they survive restarts of the hub and the removal of the agent's container (and of
//! the agent: its file stays).

mod follow;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::usage::files::ReadCall;
use crate::usage::price::PriceTable;
use crate::usage::tally::{Entry, Period, Summary, Tally};

pub use follow::Following;

/// The durable ledger of the hub's agents.
pub struct Ledger {
    /// `<data_dir>/usage`.
    dir: PathBuf,
    prices: PriceTable,
    tally: Mutex<Tally>,
    /// The directories followed now, with whose records they are.
    followed: Mutex<HashMap<PathBuf, String>>,
    /// Why the records of a host session are not counted, by session.
    unread: Mutex<HashMap<String, String>>,
}

impl Ledger {
    /// The ledger kept in `data_dir`, with what it counted before; `prices` price its calls.
    pub fn open(data_dir: &Path, prices: PriceTable) -> Self {
        let dir = data_dir.join("usage");
        let mut tally = Tally::default();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            let Some(agent) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
                continue;
            };
            load(&path, &agent, &mut tally);
        }
        Ledger {
            dir,
            prices,
            tally: Mutex::new(tally),
            followed: Mutex::default(),
            unread: Mutex::default(),
        }
    }

    /// How far each of `agent`'s record files was counted, by file.
    pub fn read_up_to(&self, agent: &str) -> HashMap<String, u64> {
        self.lock().read_up_to(agent)
    }

    /// Counts the calls `reads` of `agent` (of `team`), those past what was counted of their
    /// file, and keeps them on disk. Returns how many were new.
    pub fn record(&self, agent: &str, team: &str, reads: Vec<ReadCall>) -> usize {
        let now = chrono::Utc::now();
        let mut tally = self.lock();
        let mut lines = String::new();
        let mut added = 0;
        for read in reads {
            let entry = Entry::of(read.call, team, &read.file, read.end, now);
            let line = serde_json::to_string(&entry).unwrap_or_default();
            if tally.add(agent, entry) {
                lines.push_str(&line);
                lines.push('\n');
                added += 1;
            }
        }
        if !lines.is_empty() {
            if let Err(e) = self.append(agent, &lines) {
                tracing::warn!(agent, "usage kept in memory only: {e}");
            }
        }
        added
    }

    fn append(&self, agent: &str, lines: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{agent}.jsonl")))?;
        file.write_all(lines.as_bytes())
    }

    /// What `agent` spent in `period`.
    pub fn of_agent(&self, agent: &str, period: Period) -> Summary {
        self.lock().of_agent(agent, period, &self.prices)
    }

    /// What the agents `pick` picks (by id and team) spent in `period`.
    pub fn of_agents(&self, pick: impl Fn(&str, &str) -> bool, period: Period) -> Summary {
        self.lock().of_agents(pick, period, &self.prices)
    }

    /// All that was counted, by agent, team and model (all time).
    pub fn totals(&self) -> Vec<crate::usage::tally::Total> {
        self.lock().totals(&self.prices)
    }

    /// Keeps why the records of `session` (a host session's) are not counted.
    pub fn note_unread(&self, session: &str, why: String) {
        let mut unread = self.unread.lock().unwrap_or_else(|e| e.into_inner());
        unread.insert(session.to_string(), why);
    }

    /// Why the records of `session` are not counted, if it was said.
    pub fn unread(&self, session: &str) -> Option<String> {
        let unread = self.unread.lock().unwrap_or_else(|e| e.into_inner());
        unread.get(session).cloned()
    }

    /// The team of `agent`'s latest counted call.
    pub fn team_of(&self, agent: &str) -> Option<String> {
        self.lock().team_of(agent)
    }

    /// The agents with usage counted (removed ones included).
    pub fn agents(&self) -> Vec<String> {
        let mut agents: Vec<String> = self.lock().agents().map(String::from).collect();
        agents.sort();
        agents
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts the entries of one agent's file (a line that does not parse, say one cut short by
/// a crash, is skipped).
fn load(path: &Path, agent: &str, tally: &mut Tally) {
    let Ok(text) = std::fs::read_to_string(path) else {
        tracing::warn!("cannot read {}: its usage is not counted", path.display());
        return;
    };
    for line in text.lines() {
        if let Ok(entry) = serde_json::from_str::<Entry>(line) {
            tally.add(agent, entry);
        }
    }
}
