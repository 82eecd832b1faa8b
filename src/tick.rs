//! A grid of ticks shared by the whole process: periodic work of many sessions (a busy
//! session's pipe reads, its screen looks) is put on the same instants, so one wake-up of the
//! runtime serves them all. On a small machine a wake-up costs more than the work it wakes for
//! (#30: a fleet of 20 busy agents made the hub's threads switch ~1,700 times a second).

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// The grid's step: how late a busy session's bytes may reach the hub (below a frame of
/// 30 frames a second). 25 ms costs a fleet of 20 busy agents a quarter less CPU than 10 ms
/// did, and 50 ms saves no more (docs/benchmarks.md, "Two windows and a coarser tick").
pub const TICK: Duration = Duration::from_millis(25);

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
}
