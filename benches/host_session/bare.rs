//! A program on a bare portable-pty PTY, written and read synchronously on one thread: the
//! baseline rows, the lowest figure any design can reach.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use anyhow::{anyhow, ensure, Result};
use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

use super::common::search::Search;
use super::shell_env;

/// The bare PTY's environment: what the hub would give the same program.
pub fn bare_env() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = ["PATH", "HOME", "USER", "LOGNAME"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    env.insert("TERM".into(), "xterm-256color".into());
    env.insert("LANG".into(), "C.UTF-8".into());
    env.extend(shell_env());
    env
}

pub struct BarePty {
    child: Box<dyn Child + Send + Sync>,
    reader: Box<dyn Read + Send>,
    writer: Box<dyn Write + Send>,
    _master: Box<dyn MasterPty + Send>,
    pub buf: Vec<u8>,
}

impl BarePty {
    pub fn spawn(program: &str, args: &[&str], cwd: &Path) -> Result<Self> {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 30,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| anyhow!("openpty: {e:#}"))?;
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.cwd(cwd);
        cmd.env_clear();
        for (k, v) in bare_env() {
            cmd.env(k, v);
        }
        let child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| anyhow!("spawn {program}: {e:#}"))?;
        drop(pair.slave);
        let reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| anyhow!("{e:#}"))?;
        let writer = pair.master.take_writer().map_err(|e| anyhow!("{e:#}"))?;
        Ok(BarePty {
            child,
            reader,
            writer,
            _master: pair.master,
            buf: Vec::new(),
        })
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes)?;
        self.writer.flush()?;
        Ok(())
    }

    /// One read into `chunk`; 0 at the end (Linux reports EIO once the program is gone).
    pub fn read_some(&mut self, chunk: &mut [u8]) -> usize {
        self.reader.read(chunk).unwrap_or(0)
    }

    /// Reads into `buf` until `needle` occurs at or after `from`; returns its position.
    pub fn wait_for(&mut self, needle: &[u8], from: usize) -> Result<usize> {
        let mut chunk = [0u8; 4096];
        let mut search = Search::new(needle, from);
        loop {
            if let Some(at) = search.found_in(&self.buf) {
                return Ok(at);
            }
            let n = self.read_some(&mut chunk);
            ensure!(n > 0, "the bare PTY program ended");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

impl Drop for BarePty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
