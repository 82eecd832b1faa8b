//! The background screen follower: a task per session that looks at the screen (catching the
//! emulator up, answering terminal queries, updating the agent state) when the output moves,
//! input arrives, or the state can change; and how often it may look, a pure decision.
//!
//! A session that keeps printing is looked at less often ([`BUSY_LOOK_INTERVAL`]): each look
//! then catches up a larger step, in which the screen can skip the lines that scrolled away
//! (`crate::screen`), and a busy fleet costs fewer wake-ups and classifications. Readers of the
//! screen (`term_read`, `wait_state`, policy deadlines) always catch up first, so the pace only
//! bounds how late the follower's own state reports may be: a state change that is due with
//! no output, and input, still wake it at once.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Session;

/// How often the follower looks at most while output starts moving.
const SCREEN_FOLLOW_INTERVAL: Duration = Duration::from_millis(20);
/// How often it looks at most once the output has kept moving for [`BUSY_AFTER`].
const BUSY_LOOK_INTERVAL: Duration = Duration::from_millis(100);
const BUSY_AFTER: Duration = Duration::from_millis(200);
/// Output that moved again within this of the previous look continues a busy stretch.
const BUSY_GAP: Duration = Duration::from_millis(150);
/// The longest a quiet session's screen goes without a look. A look is due sooner whenever the
/// agent state could change with no new output or input ([`crate::agent_state::Watch::next_due`]);
/// this only bounds the wait where nothing is due (100 idle sessions: 20 looks a second).
const QUIET_LOOK_INTERVAL: Duration = Duration::from_secs(5);

/// Since when the output has kept moving, after a look that found it `moved` since the
/// previous look at `previous_look` (a busy stretch that started at `since`, if any).
fn busy_since(
    moved: bool,
    since: Option<Instant>,
    previous_look: Instant,
    now: Instant,
) -> Option<Instant> {
    match (moved, since) {
        (false, _) => None,
        (true, Some(since)) if now.duration_since(previous_look) <= BUSY_GAP => Some(since),
        (true, _) => Some(now),
    }
}

/// The shortest pause after a look that took `took`: at least 20 times the look's own cost
/// (during a flood, emulation takes at most ~5% of a core, which a busy agent's own program
/// would otherwise lose on a small machine, #17).
fn least_pause(took: Duration) -> Duration {
    SCREEN_FOLLOW_INTERVAL.max(took * 20)
}

/// When the pause after a look that began at `began` and took `took` ends, with the output
/// busy for `busy_for` and the next state change due at `look_by`: the busy interval once it
/// has been busy a while, cut short by a due change, never below [`least_pause`].
fn pause_until(began: Instant, took: Duration, busy_for: Duration, look_by: Instant) -> Instant {
    let least = least_pause(took);
    if busy_for < BUSY_AFTER {
        return began + least;
    }
    let busy = began + BUSY_LOOK_INTERVAL.max(least);
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
    let mut previous_look = Instant::now();
    // Catch up first: output that arrived before the subscription (a program's start-up
    // query, say) would otherwise wait for a change that may never come.
    loop {
        let began = Instant::now();
        let (look_by, end) = match session.upgrade() {
            Some(s) => {
                s.answer_queries().await;
                let now = s.observe_screen();
                let quiet = now + QUIET_LOOK_INTERVAL;
                let due = s.lock_watch().next_due(now);
                (
                    due.map_or(quiet, |due| due.min(quiet)),
                    s.output.end_offset(),
                )
            }
            None => return,
        };
        busy = busy_since(end != seen_end, busy, previous_look, began);
        (seen_end, previous_look) = (end, began);
        let busy_for = busy.map_or(Duration::ZERO, |since| began.duration_since(since));
        let took = began.elapsed();
        // A busy session's pause ends early when the state is due to change or input arrives
        // (input turns the state `working` before any output, and starts its hold).
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep_until(pause_until(began, took, busy_for, look_by)) => {}
            changed = inputs.changed() => match changed {
                Ok(()) => {
                    tokio::time::sleep_until(began + least_pause(took)).await;
                    continue;
                }
                Err(_) => return,
            },
        }
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
        // A look that found nothing new ends it.
        assert_eq!(busy_since(false, again, t0 + ms(600), t0 + ms(620)), None);
        // So does a pause longer than the gap: output after it starts a new stretch.
        let later = t0 + ms(600) + BUSY_GAP + ms(1);
        assert_eq!(busy_since(true, again, t0 + ms(600), later), Some(later));
    }

    #[test]
    fn a_session_busy_for_a_while_is_looked_at_less_often() {
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(5);
        let zero = Duration::ZERO;
        assert_eq!(
            pause_until(t0, zero, zero, far),
            t0 + SCREEN_FOLLOW_INTERVAL
        );
        assert_eq!(
            pause_until(t0, zero, BUSY_AFTER - ms(1), far),
            t0 + SCREEN_FOLLOW_INTERVAL
        );
        assert_eq!(
            pause_until(t0, zero, BUSY_AFTER, far),
            t0 + BUSY_LOOK_INTERVAL
        );
        // A state change due sooner cuts the busy pause short, down to the least pause.
        assert_eq!(pause_until(t0, zero, BUSY_AFTER, t0 + ms(50)), t0 + ms(50));
        assert_eq!(
            pause_until(t0, zero, BUSY_AFTER, t0 + ms(5)),
            t0 + SCREEN_FOLLOW_INTERVAL
        );
        // An expensive look (a flood) waits 20 times its cost, due change or not.
        assert_eq!(pause_until(t0, ms(10), zero, t0), t0 + ms(200));
        assert_eq!(
            pause_until(t0, ms(10), BUSY_AFTER, t0 + ms(50)),
            t0 + ms(200)
        );
        assert_eq!(
            pause_until(t0, ms(2), BUSY_AFTER, far),
            t0 + BUSY_LOOK_INTERVAL
        );
    }
}
