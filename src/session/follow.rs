//! The background screen follower: a task per session that looks at the screen (catching the
//! emulator up, answering terminal queries, updating the agent state) when the output moves,
//! input arrives, or the state can change; and how often it may look, a pure decision.
//!
//! A session that keeps printing is looked at less often (once per [`busy_look_interval`]):
//! each look then catches up a larger step, in which the screen can skip the lines that
//! scrolled away (`crate::screen`), and a busy fleet costs fewer wake-ups and classifications.
//! Readers of the screen (`term_read`, `wait_state`, policy deadlines) always catch up first,
//! so the pace only bounds how late the follower's own state reports may be: a state change
//! that is due with no output, and input, still wake it at once.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Session;

/// How often the follower looks at most while output starts moving.
const SCREEN_FOLLOW_INTERVAL: Duration = Duration::from_millis(20);
/// Bounds of how often it looks once the output has kept moving for [`BUSY_AFTER`].
const BUSY_LOOK_MIN: Duration = Duration::from_millis(100);
const BUSY_LOOK_MAX: Duration = Duration::from_secs(1);
const BUSY_AFTER: Duration = Duration::from_millis(200);
/// Output that came within this of the follower's pause ending continues a busy stretch: a
/// program printing a burst every few hundred milliseconds is as busy, at the busy pace, as
/// one printing all the time. (At 150 ms, 50 agents printing a burst every ~200 ms on a
/// saturated machine kept starting new stretches, each looked at every 20 ms for a while:
/// ~20 % more looks and CPU, #30.)
const BUSY_GAP: Duration = Duration::from_millis(400);
/// The longest a quiet session's screen goes without a look. A look is due sooner whenever the
/// agent state could change with no new output or input ([`crate::agent_state::Watch::next_due`]);
/// this only bounds the wait where nothing is due (100 idle sessions: 20 looks a second).
const QUIET_LOOK_INTERVAL: Duration = Duration::from_secs(5);

/// Looks taken by every session's follower since the process started.
static LOOKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many looks at their screens the followers of all sessions have taken so far (the
/// busy-fleet benchmark reports their rate).
pub fn screen_looks() -> u64 {
    LOOKS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Since when the output has kept moving, after a look at `now` that found it `moved` since
/// the previous look, whose pause ended at `ready_at` (a busy stretch that started at
/// `since`, if any). The stretch goes on when output was there, or came soon, once the
/// follower was ready for it, however long its pause was.
fn busy_since(
    moved: bool,
    since: Option<Instant>,
    ready_at: Instant,
    now: Instant,
) -> Option<Instant> {
    match (moved, since) {
        (false, _) => None,
        (true, Some(since)) if now.saturating_duration_since(ready_at) <= BUSY_GAP => Some(since),
        (true, _) => Some(now),
    }
}

/// How often a busy session is looked at, for a profile that adopts a reading once it has
/// held for `dwell`: once a dwell, so a reading that shows up while the output keeps moving is
/// seen, and adopted, at most one dwell late (the profiles' own times are a dwell and more).
/// Changes due with no output (a screen settling once the output stops) are looked for when
/// due, whatever this interval.
pub(super) fn busy_look_interval(dwell: Duration) -> Duration {
    dwell.clamp(BUSY_LOOK_MIN, BUSY_LOOK_MAX)
}

/// The shortest pause after a look that took `took`: at least 20 times the look's own cost
/// (during a flood, emulation takes at most ~5% of a core, which a busy agent's own program
/// would otherwise lose on a small machine, #17).
fn least_pause(took: Duration) -> Duration {
    SCREEN_FOLLOW_INTERVAL.max(took * 20)
}

/// When the pause after a look that began at `began` and took `took` ends, with the output
/// busy for `busy_for` and the next state change due at `look_by`: the busy `interval` once it
/// has been busy a while, cut short by a due change, never below [`least_pause`].
fn pause_until(
    began: Instant,
    took: Duration,
    busy_for: Duration,
    look_by: Instant,
    interval: Duration,
) -> Instant {
    let least = least_pause(took);
    if busy_for < BUSY_AFTER {
        return began + least;
    }
    let busy = began + interval.max(least);
    busy.min(look_by.max(began + least))
}

/// Keeps the emulator close to the output so screen reads rarely have much to catch up on,
/// and the agent state current.
pub(super) async fn follow_screen(session: std::sync::Weak<Session>, cancel: CancellationToken) {
    let Some((mut progress, mut inputs)) = session
        .upgrade()
        .map(|s| (s.output.watch_progress(), s.inputs.subscribe()))
    else {
        return;
    };
    let mut seen_end = 0;
    let mut busy: Option<Instant> = None;
    let mut ready_at = Instant::now();
    // Catch up first: output that arrived before the subscription (a program's start-up
    // query, say) would otherwise wait for a change that may never come.
    loop {
        let began = Instant::now();
        LOOKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (look_by, end, interval) = match session.upgrade() {
            Some(s) => {
                s.answer_queries().await;
                let now = s.observe_screen();
                let quiet = now + QUIET_LOOK_INTERVAL;
                let watch = s.lock_watch();
                let due = watch.next_due(now);
                (
                    due.map_or(quiet, |due| due.min(quiet)),
                    s.output.end_offset(),
                    busy_look_interval(watch.profile().dwell),
                )
            }
            None => return,
        };
        busy = busy_since(end != seen_end, busy, ready_at, began);
        seen_end = end;
        let busy_for = busy.map_or(Duration::ZERO, |since| began.duration_since(since));
        let took = began.elapsed();
        let mut pause = pause_until(began, took, busy_for, look_by, interval);
        if busy_for >= BUSY_AFTER {
            // Busy sessions' looks share the process's ticks (and their wake-ups).
            pause = crate::tick::at_or_after(pause);
        }
        // A busy session's pause ends early when the state is due to change or input arrives
        // (input turns the state `working` before any output, and starts its hold).
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep_until(pause) => {}
            changed = inputs.changed() => match changed {
                Ok(()) => {
                    tokio::time::sleep_until(began + least_pause(took)).await;
                    ready_at = Instant::now();
                    continue;
                }
                Err(_) => return,
            },
        }
        ready_at = Instant::now();
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = progress.changed() => if changed.is_err() { return },
            changed = inputs.changed() => if changed.is_err() { return },
            // A state can change with no output (a quiet screen settles into `idle` after the
            // profile's dwell): look again the moment it can, so the change is reported in
            // time, and not before.
            _ = tokio::time::sleep_until(look_by) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn output_that_keeps_moving_is_busy_from_its_first_look() {
        let t0 = Instant::now();
        let first = busy_since(true, None, t0, t0 + ms(500));
        assert_eq!(first, Some(t0 + ms(500)));
        // Moving again soon after: the same stretch.
        let again = busy_since(true, first, t0 + ms(500), t0 + ms(600));
        assert_eq!(again, first);
        // However long the (busy) pause was: output that was there when it ended goes on.
        assert_eq!(busy_since(true, again, t0 + ms(900), t0 + ms(900)), first);
        // A look that found nothing new ends it.
        assert_eq!(busy_since(false, again, t0 + ms(600), t0 + ms(620)), None);
        // So does output that came more than the gap after the follower was ready for it:
        // it starts a new stretch.
        let later = t0 + ms(600) + BUSY_GAP + ms(1);
        assert_eq!(busy_since(true, again, t0 + ms(600), later), Some(later));
    }

    #[test]
    fn a_program_printing_a_burst_every_quarter_second_stays_busy() {
        let t0 = Instant::now();
        let since = Some(t0);
        let mut ready_at = t0;
        for burst in 1..=8 {
            // Each burst comes 250 ms after the follower was ready for it.
            let look = ready_at + ms(250);
            assert_eq!(
                busy_since(true, since, ready_at, look),
                since,
                "burst {burst}"
            );
            ready_at = look + ms(300);
        }
    }

    #[test]
    fn a_session_busy_for_a_while_is_looked_at_less_often() {
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(5);
        let zero = Duration::ZERO;
        let every = ms(300);
        assert_eq!(
            pause_until(t0, zero, zero, far, every),
            t0 + SCREEN_FOLLOW_INTERVAL
        );
        assert_eq!(
            pause_until(t0, zero, BUSY_AFTER - ms(1), far, every),
            t0 + SCREEN_FOLLOW_INTERVAL
        );
        assert_eq!(pause_until(t0, zero, BUSY_AFTER, far, every), t0 + every);
        // A state change due sooner cuts the busy pause short, down to the least pause.
        assert_eq!(
            pause_until(t0, zero, BUSY_AFTER, t0 + ms(50), every),
            t0 + ms(50)
        );
        assert_eq!(
            pause_until(t0, zero, BUSY_AFTER, t0 + ms(5), every),
            t0 + SCREEN_FOLLOW_INTERVAL
        );
        // An expensive look (a flood) waits 20 times its cost, due change or not.
        assert_eq!(pause_until(t0, ms(10), zero, t0, every), t0 + ms(200));
        assert_eq!(
            pause_until(t0, ms(10), BUSY_AFTER, t0 + ms(50), every),
            t0 + ms(200)
        );
        assert_eq!(pause_until(t0, ms(2), BUSY_AFTER, far, every), t0 + every);
    }

    #[test]
    fn a_busy_session_is_looked_at_once_a_dwell_within_bounds() {
        assert_eq!(busy_look_interval(ms(300)), ms(300));
        assert_eq!(busy_look_interval(ms(0)), BUSY_LOOK_MIN);
        assert_eq!(busy_look_interval(ms(20_000)), BUSY_LOOK_MAX);
    }
}
