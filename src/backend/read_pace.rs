//! When a stream reader reads again: when the stream is ready (at once), or, for a busy
//! session, on the process's shared ticks ([`crate::tick`]). Pure: the reader asks before and
//! tells after each read.
//!
//! A program printing line by line reaches the hub in many small chunks (tmux forwards each
//! read of the pane's terminal), and every chunk woke the hub's runtime, which on a small
//! machine costs more than the bytes themselves (#30: a fleet of agents printing a few kB ten
//! times a second). Once a run of reads (no gap longer than [`RUN_GAP`]) has brought
//! [`POLL_AFTER`] bytes, the stream is read on the shared ticks instead: whatever is there
//! then, in one read, with every other busy session in the same wake-up. It goes back to
//! reading on readiness after [`POLL_QUIET`] with nothing to read. The bytes wait in the pipe:
//! none is lost or reordered, and they arrive at most one tick later. Interactive use stays
//! immediate: a keystroke's echo, a prompt or a short command's output never makes a run that
//! long, and input ends a run (a leader's `talk`s back to back, a fast typist). A read that
//! filled its buffer (a flood) is followed at once, so throughput is not capped.

use std::time::Duration;

use tokio::time::Instant;

/// Reads closer together than this belong to one run.
const RUN_GAP: Duration = Duration::from_millis(20);
/// Bytes a run must have brought before the stream is read on ticks.
const POLL_AFTER: usize = 2048;
/// How long a stream read on ticks may have nothing before it is read on readiness again.
const POLL_QUIET: Duration = Duration::from_millis(300);

/// How to do the next read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait until the stream is ready.
    OnReady,
    /// Wait until this tick, then take what is there (if anything) without waiting more.
    At(Instant),
    /// Read again at once, taking what is there (a flood's next bytes).
    Now,
}

/// The reads of one stream so far.
#[derive(Debug, Default)]
pub struct ReadPace {
    /// When the last read that brought bytes was.
    last_data: Option<Instant>,
    /// Bytes of the current run.
    run_bytes: usize,
    /// The stream is read on ticks.
    polling: bool,
    /// The last read filled its buffer.
    full: bool,
}

impl ReadPace {
    /// How to do the next read, at `now`.
    pub fn next(&self, now: Instant) -> Next {
        match (self.polling, self.full) {
            (true, true) => Next::Now,
            (true, false) => Next::At(crate::tick::at_or_after(now + Duration::from_nanos(1))),
            (false, _) => Next::OnReady,
        }
    }

    /// Notes a read of `n` bytes (`full`: it filled the buffer) at `now`.
    pub fn after_read(&mut self, n: usize, full: bool, now: Instant) {
        // A run read on ticks goes on through their quiet ticks; one read on readiness ends
        // at its first gap.
        let gap = if self.polling { POLL_QUIET } else { RUN_GAP };
        let goes_on = self
            .last_data
            .is_some_and(|last| now.saturating_duration_since(last) <= gap);
        self.run_bytes = if goes_on {
            self.run_bytes.saturating_add(n)
        } else {
            n
        };
        self.last_data = Some(now);
        self.full = full;
        self.polling = self.run_bytes >= POLL_AFTER;
    }

    /// Notes a read on a tick that found nothing, at `now`; the stream goes back to being
    /// read on readiness once it has had nothing for [`POLL_QUIET`].
    pub fn after_nothing(&mut self, now: Instant) {
        self.full = false;
        let quiet = self
            .last_data
            .is_none_or(|last| now.saturating_duration_since(last) >= POLL_QUIET);
        if quiet {
            self.polling = false;
            self.run_bytes = 0;
        }
    }

    /// Input was written to the session: the run ends, and what answers it is read on
    /// readiness (a leader's quick `talk`s or a fast typist keep their latency).
    pub fn on_input(&mut self) {
        self.polling = false;
        self.full = false;
        self.run_bytes = 0;
    }

    /// How long the stream has had nothing to read, at `now`.
    pub fn quiet_for(&self, now: Instant) -> Duration {
        self.last_data
            .map_or(Duration::MAX, |last| now.saturating_duration_since(last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn interactive_reads_wait_for_the_stream() {
        let mut pace = ReadPace::default();
        let t0 = Instant::now();
        // An echo, a marker, a short output, a prompt: close together, but a small run.
        for (i, n) in [1, 40, 300, 60].into_iter().enumerate() {
            let at = t0 + ms(i as u64);
            pace.after_read(n, false, at);
            assert_eq!(pace.next(at), Next::OnReady);
        }
        // Another keystroke a moment later starts a new run.
        pace.after_read(1, false, t0 + ms(500));
        assert_eq!(pace.next(t0 + ms(500)), Next::OnReady);
    }

    #[test]
    fn a_long_run_of_small_reads_is_read_on_ticks_until_it_goes_quiet() {
        let mut pace = ReadPace::default();
        let t0 = Instant::now();
        let mut polled = Vec::new();
        for i in 0..8 {
            pace.after_read(400, false, t0 + ms(i));
            polled.push(matches!(pace.next(t0 + ms(i)), Next::At(_)));
        }
        // 400 bytes a read: the run reaches 2048 bytes at the sixth.
        assert_eq!(
            polled,
            [false, false, false, false, false, true, true, true]
        );
        let Next::At(tick) = pace.next(t0 + ms(7)) else {
            panic!("read on a tick");
        };
        assert!(tick > t0 + ms(7) && tick <= t0 + ms(7) + crate::tick::TICK);
        // Ticks with nothing: still on ticks until POLL_QUIET has passed.
        pace.after_nothing(t0 + ms(100));
        assert!(matches!(pace.next(t0 + ms(100)), Next::At(_)));
        // The next burst, 100 ms later, is still read on ticks.
        pace.after_read(500, false, t0 + ms(110));
        assert!(matches!(pace.next(t0 + ms(110)), Next::At(_)));
        pace.after_nothing(t0 + ms(110) + POLL_QUIET);
        assert_eq!(pace.next(t0 + ms(110) + POLL_QUIET), Next::OnReady);
        // Back on readiness, a small read does not bring the ticks back.
        pace.after_read(10, false, t0 + ms(900));
        assert_eq!(pace.next(t0 + ms(900)), Next::OnReady);
    }

    #[test]
    fn input_ends_a_busy_run() {
        let mut pace = ReadPace::default();
        let t0 = Instant::now();
        pace.after_read(4000, false, t0);
        assert!(matches!(pace.next(t0), Next::At(_)));
        pace.on_input();
        assert_eq!(pace.next(t0), Next::OnReady);
        // Answers to input, back to back, never make a run.
        for i in 1..50 {
            pace.on_input();
            pace.after_read(200, false, t0 + ms(i));
            assert_eq!(pace.next(t0 + ms(i)), Next::OnReady);
        }
    }

    #[test]
    fn a_flood_is_read_at_once() {
        let mut pace = ReadPace::default();
        let t0 = Instant::now();
        pace.after_read(4096, true, t0);
        assert_eq!(pace.next(t0), Next::Now);
        pace.after_read(8192, true, t0);
        assert_eq!(pace.next(t0), Next::Now);
        // Once it slows down (a read that did not fill the buffer), ticks.
        pace.after_read(100, false, t0 + ms(1));
        assert!(matches!(pace.next(t0 + ms(1)), Next::At(_)));
        assert_eq!(pace.quiet_for(t0 + ms(11)), ms(10));
    }
}
