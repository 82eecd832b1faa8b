//! When a stream reader reads again: at once, or after a short wait that lets a busy
//! session's small writes gather into one read. Pure: the reader asks after each read.
//!
//! A program printing line by line reaches the hub in many small chunks (tmux forwards each
//! read of the pane's terminal), and every chunk costs a wake-up of the hub's runtime, which
//! on a small machine costs more than the bytes themselves (#30: a fleet of agents printing a
//! few kB ten times a second). Once a run of reads (no gap longer than [`RUN_GAP`]) has
//! brought [`GATHER_AFTER`] bytes, a small read is followed by a wait of [`GATHER_WAIT`]
//! before the next: the bytes wait in the pipe, none is lost or reordered, and they arrive
//! at most that much later. Interactive use stays immediate: a keystroke's echo, a prompt or a
//! short command's output never makes a run that long. A read that filled its buffer, or
//! brought [`FLOOD_READ`] bytes (a flood), is followed at once, so throughput is not capped.

use std::time::Duration;

use tokio::time::Instant;

/// Reads closer together than this belong to one run.
const RUN_GAP: Duration = Duration::from_millis(20);
/// Bytes a run must have brought before its reads wait.
const GATHER_AFTER: usize = 2048;
/// How long a read waits before the next, within a long run.
const GATHER_WAIT: Duration = Duration::from_millis(4);
/// A read of at least this much is a flood: read again at once.
const FLOOD_READ: usize = 16 * 1024;

/// The reads of one stream so far.
#[derive(Debug, Default)]
pub struct ReadPace {
    last_read: Option<Instant>,
    run_bytes: usize,
}

impl ReadPace {
    /// Notes a read of `n` bytes at `now` (`full`: it filled the buffer); returns how long to
    /// wait before reading again.
    pub fn after_read(&mut self, n: usize, full: bool, now: Instant) -> Option<Duration> {
        let continues = self
            .last_read
            .is_some_and(|last| now.saturating_duration_since(last) <= RUN_GAP);
        self.run_bytes = if continues {
            self.run_bytes.saturating_add(n)
        } else {
            n
        };
        self.last_read = Some(now);
        (self.run_bytes >= GATHER_AFTER && n < FLOOD_READ && !full).then_some(GATHER_WAIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn interactive_reads_never_wait() {
        let mut pace = ReadPace::default();
        let t0 = Instant::now();
        // An echo, a marker, a short output, a prompt: close together, but a small run.
        for (i, n) in [1, 40, 300, 60].into_iter().enumerate() {
            assert_eq!(pace.after_read(n, false, t0 + ms(i as u64)), None);
        }
        // Another keystroke a moment later starts a new run.
        assert_eq!(pace.after_read(1, false, t0 + ms(500)), None);
    }

    #[test]
    fn a_long_run_of_small_reads_gathers() {
        let mut pace = ReadPace::default();
        let t0 = Instant::now();
        let waits: Vec<_> = (0..8)
            .map(|i| pace.after_read(400, false, t0 + ms(i)))
            .collect();
        // 400 bytes a read: the run reaches 2048 bytes at the sixth.
        assert_eq!(waits[..5], [None; 5]);
        assert_eq!(waits[5..], [Some(GATHER_WAIT); 3]);
        // A gap longer than RUN_GAP ends the run.
        assert_eq!(
            pace.after_read(400, false, t0 + ms(7) + RUN_GAP + ms(1)),
            None
        );
    }

    #[test]
    fn a_flood_is_read_at_once() {
        let mut pace = ReadPace::default();
        let t0 = Instant::now();
        // The buffer grows while reads fill it (4, 8 kB...), then reads are large.
        assert_eq!(pace.after_read(4096, true, t0), None);
        assert_eq!(pace.after_read(8192, true, t0 + ms(1)), None);
        for i in 2..5 {
            assert_eq!(pace.after_read(FLOOD_READ, false, t0 + ms(i)), None);
        }
        // A small read inside the flood's run waits: the flood is slowing down.
        assert_eq!(pace.after_read(100, false, t0 + ms(5)), Some(GATHER_WAIT));
    }
}
