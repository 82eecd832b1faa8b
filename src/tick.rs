//! A grid of ticks shared by the whole process: periodic work of many sessions (a busy
//! session's pipe reads, its screen looks) is put on the same instants, so one wake-up of the
//! runtime serves them all. On a small machine a wake-up costs more than the work it wakes for
//! (#30: a fleet of 20 busy agents made the hub's threads switch ~1,700 times a second).

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// The grid's step: how late a busy session's bytes may reach the hub. It must stay well
/// below the redacting stream's idle flush (`redact::stream::FLUSH_AFTER`, 20 ms), which
/// takes a pause that long for the end of the output: a 25 ms tick cost a fleet of 20 busy
/// agents a quarter less CPU, but made redacted viewers of a flood flush (and redact) words
/// cut off at a chunk's end before their rest came (docs/benchmarks.md, session 17).
pub const TICK: Duration = Duration::from_millis(10);

/// The first tick at or after `t`.
pub fn at_or_after(t: Instant) -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    align_up(*ORIGIN.get_or_init(Instant::now), t, TICK)
}

/// The first instant `origin + k * step` (k ≥ 0) at or after `t`; `t` itself before `origin`.
fn align_up(origin: Instant, t: Instant, step: Duration) -> Instant {
    let Some(since) = t.checked_duration_since(origin) else {
        return t;
    };
    let step_ns = step.as_nanos().max(1);
    let steps = since.as_nanos().div_ceil(step_ns);
    let offset = u64::try_from(steps * step_ns).unwrap_or(u64::MAX);
    origin + Duration::from_nanos(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_go_up_to_the_next_tick_of_one_grid() {
        let o = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(align_up(o, o, ms(10)), o);
        assert_eq!(align_up(o, o + ms(1), ms(10)), o + ms(10));
        assert_eq!(align_up(o, o + ms(10), ms(10)), o + ms(10));
        assert_eq!(align_up(o, o + ms(23), ms(10)), o + ms(30));
        // Two sessions' instants in the same step meet on one tick.
        assert_eq!(
            align_up(o, o + ms(41), ms(10)),
            align_up(o, o + ms(49), ms(10))
        );
        let before = o.checked_sub(ms(5)).unwrap_or(o);
        assert_eq!(align_up(o, before, ms(10)), before);
        assert!(at_or_after(o) >= o);
    }

    #[test]
    fn a_busy_sessions_next_bytes_come_well_before_a_redacted_viewer_flushes_its_held_word() {
        // A redacting stream sends a held word (redacted if it looks like a cut-off secret)
        // after FLUSH_AFTER with nothing new; a busy session's next bytes come within a tick
        // (plus the runtime's lateness), so the tick must leave room below it.
        let flush = crate::redact::stream::FLUSH_AFTER;
        assert!(TICK * 2 <= flush, "tick {TICK:?}, flush after {flush:?}");
    }
}
