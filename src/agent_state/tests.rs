//! Profiles against recorded screens, and the watch's hysteresis on a paused clock.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::profile::ProfileSet;
use super::*;

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap()
}

fn parser(text: &str, rows: u16) -> vt100::Parser {
    let mut p = vt100::Parser::new(nz(rows), nz(80), 0);
    p.process(text.replace('\n', "\r\n").as_bytes());
    p
}

/// Every screen in `tests/fixtures/screens/PROFILE/STATE-NAME.txt` classifies as STATE, with
/// the evidence naming a line of the screen.
#[test]
fn shipped_profiles_classify_their_test_screens() {
    let set = ProfileSet::default();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/screens");
    let mut checked = 0;
    for profile_dir in std::fs::read_dir(&root).unwrap() {
        let profile_dir = profile_dir.unwrap().path();
        let name = profile_dir
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let profile = set.for_cli_type(Some(&name));
        assert_eq!(profile.name, name, "a profile per fixture directory");
        let mut states = std::collections::HashSet::new();
        for file in std::fs::read_dir(&profile_dir).unwrap() {
            let path = file.unwrap().path();
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            let expected = stem.split('-').next().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            let p = parser(&text, 24);
            let rows = crate::activity::content_rows(p.screen(), &profile.masks);
            // Screens of a known state must be read by a rule: classify them as still for no
            // longer than the rules need, so no stability fallback can stand in (the check
            // below). `unknown-*` screens are the fallback's.
            let stable_for = if expected == "unknown" {
                Duration::from_secs(3600)
            } else {
                profile
                    .rules
                    .iter()
                    .map(|r| r.stable)
                    .max()
                    .unwrap_or_default()
            };
            let got = classify::classify(&profile, &rows, stable_for);
            assert_eq!(got.state.as_str(), expected, "{name}/{stem}: {got:?}");
            if got.rule.starts_with("fallback") {
                assert_eq!(
                    expected, "unknown",
                    "{name}/{stem}: only by a rule: {got:?}"
                );
                assert!(got.evidence.is_empty());
            } else {
                assert!(
                    got.evidence.iter().all(|e| text.contains(e.trim())),
                    "{name}/{stem}: evidence {:?}",
                    got.evidence
                );
            }
            states.insert(expected.to_string());
            checked += 1;
        }
        for state in ["idle", "working", "blocked"] {
            if name != "shell" || state != "working" {
                assert!(states.contains(state), "{name} has a {state} screen");
            }
        }
    }
    assert!(checked >= 12, "{checked}");
}

fn shell() -> Arc<profile::Profile> {
    ProfileSet::default().for_cli_type(Some("shell"))
}

#[tokio::test(start_paused = true)]
async fn input_holds_working_until_the_screen_answers_and_states_do_not_flap() {
    let profile = shell();
    let mut w = Watch::new(profile.clone(), Instant::now());
    let prompt = parser("$ ", 5);
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle, "from unknown, at once");

    // We send a line: working, although the prompt is still on screen.
    w.note_input(true, Instant::now());
    tokio::time::advance(Duration::from_millis(100)).await;
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Working);
    assert_eq!(w.report(Instant::now()).rule, "input:sent");

    // The command prints, then the prompt comes back: idle only after the dwell.
    tokio::time::advance(Duration::from_millis(100)).await;
    let done = parser("$ ls\r\nfile\r\n$ ", 5);
    w.observe(done.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Working, "not before the dwell");
    tokio::time::advance(profile.dwell).await;
    w.observe(done.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle);
    assert_eq!(w.report(Instant::now()).evidence, vec!["$"]);

    // A one-off redraw that briefly shows something else does not flip the state.
    let busy = parser("$ ls\r\nfile\r\nmore output", 5);
    w.observe(busy.screen(), false, Instant::now());
    tokio::time::advance(Duration::from_millis(50)).await;
    w.observe(done.screen(), false, Instant::now());
    tokio::time::advance(profile.dwell * 2).await;
    w.observe(done.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle);

    // Input that the program never answers stops holding after input_hold.
    w.note_input(true, Instant::now());
    tokio::time::advance(profile.input_hold + Duration::from_millis(10)).await;
    w.observe(done.screen(), false, Instant::now());
    tokio::time::advance(profile.dwell).await;
    w.observe(done.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle);

    w.observe(done.screen(), true, Instant::now());
    assert_eq!(w.state(), State::Exited);
}

#[tokio::test(start_paused = true)]
async fn working_without_change_becomes_stuck() {
    let mut profile = (*ProfileSet::default().for_cli_type(Some("claude-code"))).clone();
    profile.stuck_after = Duration::from_secs(5);
    let mut w = Watch::new(Arc::new(profile), Instant::now());
    for i in 0..8 {
        let glyph = ["✻", "✶", "✳", "✢"][i % 4];
        let s = parser(
            &format!("> task\n\n{glyph} Thinking… ({i}s · esc to interrupt)\n"),
            8,
        );
        w.observe(s.screen(), false, Instant::now());
        assert_eq!(w.state(), State::Working);
        assert_eq!(w.stuck(Instant::now()), i >= 5, "after {i} s");
        tokio::time::advance(Duration::from_secs(1)).await;
    }
}

/// A profile whose rules never match the test screens: only the stability fallback decides.
fn fallback_only() -> Arc<profile::Profile> {
    let mut p = (*ProfileSet::default().for_cli_type(Some("claude-code"))).clone();
    p.rules.clear();
    Arc::new(p)
}

#[tokio::test(start_paused = true)]
async fn a_still_screen_is_stable_after_the_delay_at_the_first_look_however_late() {
    let profile = fallback_only();
    let mut w = Watch::new(profile.clone(), Instant::now());
    let out = parser("compiling...\r\nstep 1", 5);
    w.observe(out.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Working);
    assert_eq!(w.report(Instant::now()).rule, "fallback:changing");
    // Nothing happens and nobody looks; one look after the delay sees the stable state.
    tokio::time::advance(profile.stable_after + Duration::from_secs(7)).await;
    w.observe(out.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle, "{:?}", w.report(Instant::now()));
    assert_eq!(w.report(Instant::now()).rule, "fallback:stable");
}

#[tokio::test(start_paused = true)]
async fn a_change_first_seen_late_is_dated_by_the_output_that_made_it() {
    let profile = fallback_only();
    let t0 = Instant::now();
    let mut w = Watch::new(profile.clone(), t0);
    w.observe_output(parser("step 1", 5).screen(), false, Some(t0), t0);
    tokio::time::advance(profile.stable_after + profile.dwell).await;
    w.observe_output(
        parser("step 1", 5).screen(),
        false,
        Some(t0),
        Instant::now(),
    );
    assert_eq!(w.state(), State::Idle);

    // The program prints once more and then nothing; the next look is 19 s later.
    tokio::time::advance(Duration::from_secs(1)).await;
    let printed = Instant::now();
    tokio::time::advance(Duration::from_secs(19)).await;
    let screen = parser("step 1\r\nstep 2", 5);
    w.observe_output(screen.screen(), false, Some(printed), Instant::now());
    assert_eq!(w.state(), State::Idle, "{:?}", w.report(Instant::now()));
    assert!(w.report(Instant::now()).idle_for_ms >= 19_000);

    // A change that did just happen is a change: working until the screen is still again.
    let screen = parser("step 1\r\nstep 2\r\nstep 3", 5);
    w.observe_output(screen.screen(), false, Some(Instant::now()), Instant::now());
    tokio::time::advance(profile.dwell).await;
    w.observe_output(screen.screen(), false, None, Instant::now());
    assert_eq!(w.state(), State::Working);
    tokio::time::advance(profile.stable_after).await;
    w.observe_output(screen.screen(), false, None, Instant::now());
    assert_eq!(w.state(), State::Idle);
}

/// Sleeping until `next_due` and looking again is enough to see every change that needs no new
/// output: the hold after unanswered input ends, then the dwell, then idle; with nothing
/// pending there is nothing to wake for.
#[tokio::test(start_paused = true)]
async fn next_due_wakes_a_waiter_exactly_when_the_state_can_change() {
    let profile = shell();
    let mut w = Watch::new(profile.clone(), Instant::now());
    let prompt = parser("$ ", 5);
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle);

    let sent = Instant::now();
    w.note_input(true, sent);
    assert_eq!(w.state(), State::Working);
    let mut wakes = 0;
    while w.state() != State::Idle {
        let due = w.next_due(Instant::now()).expect("something is pending");
        assert!(due > Instant::now());
        tokio::time::advance(due - Instant::now()).await;
        w.observe(prompt.screen(), false, Instant::now());
        wakes += 1;
        assert!(wakes < 10, "{wakes} wakes");
    }
    assert!(Instant::now() - sent >= profile.input_hold);

    // Still at the prompt long after: nothing can change without output or input.
    tokio::time::advance(profile.stable_after + profile.dwell).await;
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.next_due(Instant::now()), None);
}
