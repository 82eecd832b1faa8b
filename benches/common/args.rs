//! Command-line options after `--`, shared by both benchmarks: `--quick`, `--parts 1,3`, and
//! numeric flags. Run without `--bench` (as by `cargo test --all-targets`), a benchmark only
//! prints its skip line.

use anyhow::{anyhow, Result};

pub struct Args {
    args: Vec<String>,
}

impl Args {
    /// The process's arguments; `None` after printing the skip line when `--bench` is absent.
    pub fn from_env(bench: &str) -> Option<Self> {
        let args: Vec<String> = std::env::args().collect();
        if !args.iter().any(|a| a == "--bench") {
            println!("{bench} benchmark: skipped (run with cargo bench --bench {bench})");
            return None;
        }
        Some(Args { args })
    }

    pub fn flag(&self, name: &str) -> bool {
        self.args.iter().any(|a| a == name)
    }

    pub fn quick(&self) -> bool {
        self.flag("--quick")
    }

    /// The number after `flag`, or `default` when the flag is absent.
    pub fn number(&self, flag: &str, default: usize) -> Result<usize> {
        match self.args.iter().position(|a| a == flag) {
            None => Ok(default),
            Some(i) => self
                .args
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| anyhow!("{flag} needs a number")),
        }
    }

    /// The comma-separated numbers after `flag` (`20,50`), or `[default]` when it is absent.
    pub fn numbers(&self, flag: &str, default: usize) -> Result<Vec<usize>> {
        let Some(i) = self.args.iter().position(|a| a == flag) else {
            return Ok(vec![default]);
        };
        let list = self.args.get(i + 1).map(String::as_str).unwrap_or("");
        list.split(',')
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|_| anyhow!("{flag} takes numbers, e.g. 20,50 (got '{list}')"))
            })
            .collect()
    }

    /// Which of the numbered parts `1..=last` to run (`--parts 1,3`; default all).
    pub fn parts(&self, last: u8) -> Result<Vec<u8>> {
        let Some(i) = self.args.iter().position(|a| a == "--parts") else {
            return Ok((1..=last).collect());
        };
        let list = self.args.get(i + 1).map(String::as_str).unwrap_or("");
        list.split(',')
            .map(|p| match p.trim().parse::<u8>() {
                Ok(n) if (1..=last).contains(&n) => Ok(n),
                _ => Err(anyhow!(
                    "--parts takes numbers 1-{last}, e.g. 1,3 (got '{list}')"
                )),
            })
            .collect()
    }

    /// The options after `--`, as typed (for the header's command line).
    pub fn options(&self) -> Vec<String> {
        self.args
            .iter()
            .skip(1)
            .filter(|a| *a != "--bench")
            .cloned()
            .collect()
    }
}
