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
/// the evidence naming a line of the screen, or its title (`STATE-NAME.title`, a title that has
/// just changed; without one, the program never set a title, long ago).
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
            if path.extension().is_some_and(|e| e == "title") {
                continue;
            }
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
            let title = std::fs::read_to_string(path.with_extension("title")).ok();
            // A `stale` screen has stood still for an hour, every row of it: a working
            // indicator on it is not alive. Elsewhere row ages are not known (alive).
            let stale = vec![Duration::from_secs(3600); rows.len()];
            let look = classify::Look {
                rows: &rows,
                row_still_for: if stem.contains("stale") { &stale } else { &[] },
                title: title.as_deref().map_or("", str::trim_end),
                screen_still_for: stable_for,
                // A `stale` title (a spinner left in it) has stood still as long.
                title_still_for: match title {
                    Some(_) if !stem.contains("stale") => Duration::from_millis(100),
                    _ => Duration::from_secs(3600),
                },
            };
            let got = classify::classify(&profile, &look);
            assert_eq!(got.state.as_str(), expected, "{name}/{stem}: {got:?}");
            if got.rule.starts_with("fallback") {
                assert_eq!(
                    expected, "unknown",
                    "{name}/{stem}: only by a rule: {got:?}"
                );
                assert!(got.evidence.is_empty());
            } else {
                let title_evidence = format!("title: {}", look.title);
                assert!(
                    got.evidence
                        .iter()
                        .all(|e| text.contains(e.trim()) || *e == title_evidence),
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

/// Every title in `tests/fixtures/titles/PROFILE.txt` (recorded from the real CLI), over the
/// recorded screen it names, reads as the state it names; a title rule's evidence is the title.
/// A spinner frame left standing (the CLI died) stops counting as work.
#[test]
fn recorded_titles_over_recorded_screens() {
    let set = ProfileSet::default();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut checked = 0;
    for name in ["codex", "claude-code"] {
        let profile = set.for_cli_type(Some(name));
        let table = std::fs::read_to_string(root.join(format!("titles/{name}.txt"))).unwrap();
        for line in table.lines().filter(|l| !l.starts_with('#')) {
            let [state, screen, title] = line.splitn(3, '\t').collect::<Vec<_>>()[..] else {
                panic!("{name}: not STATE<TAB>SCREEN<TAB>TITLE: {line:?}");
            };
            let path = root.join(format!("screens/{name}/{screen}.txt"));
            let p = parser(&std::fs::read_to_string(&path).unwrap(), 24);
            let rows = crate::activity::content_rows(p.screen(), &profile.masks);
            let look = |title_still_for| classify::Look {
                rows: &rows,
                row_still_for: &[],
                title,
                screen_still_for: Duration::ZERO,
                title_still_for,
            };
            let got = classify::classify(&profile, &look(Duration::from_millis(100)));
            assert_eq!(got.state.as_str(), state, "{name} {line:?}: {got:?}");
            let rule = profile.rules.iter().find(|r| r.name == got.rule);
            if rule.is_some_and(|r| r.on == profile::Source::Title) {
                assert_eq!(got.evidence, [format!("title: {title}")], "{line:?}");
            }
            let left_over = classify::classify(&profile, &look(Duration::from_secs(60)));
            assert_ne!(
                (left_over.state, got.state),
                (State::Working, State::Idle),
                "{name} {line:?}: a title left standing made it work: {left_over:?}"
            );
            if got.rule == "title-spinner" {
                assert_eq!(left_over.state, State::Idle, "{line:?}: {left_over:?}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
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
    w.observe_output(parser("step 1", 5).screen(), "", false, Some(t0), t0);
    tokio::time::advance(profile.stable_after + profile.dwell).await;
    w.observe_output(
        parser("step 1", 5).screen(),
        "",
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
    w.observe_output(screen.screen(), "", false, Some(printed), Instant::now());
    assert_eq!(w.state(), State::Idle, "{:?}", w.report(Instant::now()));
    assert!(w.report(Instant::now()).idle_for_ms >= 19_000);

    // A change that did just happen is a change: working until the screen is still again.
    let screen = parser("step 1\r\nstep 2\r\nstep 3", 5);
    w.observe_output(
        screen.screen(),
        "",
        false,
        Some(Instant::now()),
        Instant::now(),
    );
    tokio::time::advance(profile.dwell).await;
    w.observe_output(screen.screen(), "", false, None, Instant::now());
    assert_eq!(w.state(), State::Working);
    tokio::time::advance(profile.stable_after).await;
    w.observe_output(screen.screen(), "", false, None, Instant::now());
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

fn codex() -> Arc<profile::Profile> {
    ProfileSet::default().for_cli_type(Some("codex"))
}

/// Codex 0.169's composer, on screen while a reply streams in above it (recorded).
fn codex_streaming_screen() -> vt100::Parser {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/screens/codex/working-reply-streaming.txt");
    parser(&std::fs::read_to_string(path).unwrap(), 24)
}

/// Sleeps (in paused time) until each moment `next_due` names and looks again, until the
/// watch reads `idle`, in a few wakes; returns how long that took.
async fn sleep_until_idle(w: &mut Watch, look: impl Fn(&mut Watch)) -> Duration {
    let stopped = Instant::now();
    let mut wakes = 0;
    while w.state() != State::Idle {
        let due = w.next_due(Instant::now()).expect("a lapse is due");
        tokio::time::advance(due - Instant::now()).await;
        look(w);
        wakes += 1;
        assert!(wakes < 6, "{wakes} wakes");
    }
    Instant::now() - stopped
}

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

#[tokio::test(start_paused = true)]
async fn a_turning_title_spinner_is_working_and_its_end_is_idle_within_the_dwell() {
    let profile = codex();
    let screen = codex_streaming_screen();
    let mut w = Watch::new(profile.clone(), Instant::now());
    let look = |w: &mut Watch, title: &str| {
        w.observe_output(screen.screen(), title, false, None, Instant::now());
        w.state()
    };
    // Ready at start: idle by the composer.
    look(&mut w, "proj");
    tokio::time::advance(profile.dwell).await;
    assert_eq!(look(&mut w, "proj"), State::Idle);

    // A turn: a frame every 0.1 s for 3 s, the screen unchanged (a slow reply).
    for i in 0..30 {
        look(&mut w, &format!("{} Stand-in task | proj", SPINNER[i % 10]));
        tokio::time::advance(Duration::from_millis(100)).await;
    }
    assert_eq!(look(&mut w, "⠋ Stand-in task | proj"), State::Working);
    let r = w.report(Instant::now());
    assert_eq!(r.rule, "title-spinner");
    assert_eq!(r.evidence, ["title: ⠋ Stand-in task | proj"]);

    // One look that catches the title between two frames does not flip it.
    look(&mut w, "Stand-in task | proj");
    tokio::time::advance(Duration::from_millis(5)).await;
    look(&mut w, "⠙ Stand-in task | proj");
    tokio::time::advance(profile.dwell).await;
    assert_eq!(look(&mut w, "⠙ Stand-in task | proj"), State::Working);

    // The turn ends: the spinner leaves the title, idle after the dwell (well within 1 s).
    let ended = Instant::now();
    look(&mut w, "Stand-in task | proj");
    while look(&mut w, "Stand-in task | proj") != State::Idle {
        let due = w.next_due(Instant::now()).expect("the dwell is pending");
        tokio::time::advance(due - Instant::now()).await;
    }
    assert!(
        Instant::now() - ended <= profile.dwell,
        "{:?}",
        Instant::now() - ended
    );
    assert_eq!(w.report(Instant::now()).rule, "composer");
}

/// A spinner frame left in the title (a Codex that died mid-turn in a shell) stops counting
/// as work once it has not turned for the rule's `changing_ms`; `next_due` wakes for it.
#[tokio::test(start_paused = true)]
async fn a_spinner_left_standing_in_the_title_does_not_pin_working() {
    let profile = codex();
    let screen = codex_streaming_screen();
    let mut w = Watch::new(profile.clone(), Instant::now());
    // Five frames, the last `⠼ proj`, then it stands.
    for frame in &SPINNER[..5] {
        let title = format!("{frame} proj");
        w.observe_output(screen.screen(), &title, false, None, Instant::now());
        tokio::time::advance(Duration::from_millis(100)).await;
    }
    assert_eq!(w.state(), State::Working);
    let took = sleep_until_idle(&mut w, |w| {
        w.observe_output(screen.screen(), "⠼ proj", false, None, Instant::now())
    })
    .await;
    assert!(took <= Duration::from_millis(1000) + profile.dwell);
}

/// Codex shows its composer before it is ready and sets its first title once it is.
#[tokio::test(start_paused = true)]
async fn codex_is_working_until_it_sets_its_first_title() {
    let profile = codex();
    let screen = codex_streaming_screen();
    let mut w = Watch::new(profile.clone(), Instant::now());
    w.observe_output(screen.screen(), "", false, None, Instant::now());
    tokio::time::advance(Duration::from_secs(2)).await;
    w.observe_output(screen.screen(), "", false, None, Instant::now());
    assert_eq!(w.state(), State::Working);
    assert_eq!(w.report(Instant::now()).rule, "starting");
    w.observe_output(screen.screen(), "proj", false, None, Instant::now());
    tokio::time::advance(profile.dwell).await;
    w.observe_output(screen.screen(), "proj", false, None, Instant::now());
    assert_eq!(w.state(), State::Idle);
}

/// A spinner line above a prompt is work while it turns; left standing (the user typed while
/// it spun, so it was never overwritten) it stops counting after the profile's grace, woken
/// by `next_due` rather than by polling (#29: a `wait_state idle` timed out after 20 s).
#[tokio::test(start_paused = true)]
async fn a_spinner_line_left_standing_above_a_prompt_stops_counting_after_the_grace() {
    let profile = shell();
    let mut w = Watch::new(profile.clone(), Instant::now());
    for frame in &SPINNER[..5] {
        let screen = parser(&format!("{frame} Working… (esc to interrupt)\r\n\r\n> "), 6);
        w.observe(screen.screen(), false, Instant::now());
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(w.state(), State::Working, "turning at {frame}");
    }
    let standing = parser("⠴ Working… (esc to interrupt)\r\nhello\r\n> ", 6);
    w.observe(standing.screen(), false, Instant::now());
    let took = sleep_until_idle(&mut w, |w| {
        w.observe(standing.screen(), false, Instant::now())
    })
    .await;
    assert!(took >= profile.grace, "{took:?}");
    assert!(
        took <= profile.grace + profile.dwell + Duration::from_millis(600),
        "{took:?}"
    );
    assert_eq!(w.report(Instant::now()).rule, "prompt");
}

/// A hook's state is adopted at once, named by its source, with the screen's lines when the
/// screen agrees; when the screen reads otherwise for the profile's signal grace, the screen
/// wins and says over which signal (a CLI whose hook broke degrades, never freezes).
#[tokio::test(start_paused = true)]
async fn a_hook_leads_and_the_screen_overrules_it_after_the_grace() {
    let profile = shell();
    let grace = profile.signals.grace;
    assert_eq!(
        profile.signals.hook("blocked", None),
        Some(("blocked".into(), State::Blocked))
    );
    assert_eq!(profile.signals.hook("nope", Some("x")), None);
    let mut w = Watch::new(profile.clone(), Instant::now());
    let prompt = parser("$ ", 5);
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle);

    // The hook says blocked: at once, before any screen agrees.
    w.note_signal(State::Blocked, "hook:blocked".into(), Instant::now());
    assert_eq!(w.state(), State::Blocked);
    assert_eq!(w.report(Instant::now()).source, "hook:blocked");
    // The screen draws the question: they agree, and the report carries its line.
    tokio::time::advance(Duration::from_millis(200)).await;
    let asked = parser("$ rm -i f\r\nrm: remove regular file 'f'? (y/n) ", 5);
    w.observe(asked.screen(), false, Instant::now());
    let r = w.report(Instant::now());
    assert_eq!(
        (r.state, r.source.as_str()),
        (State::Blocked, "hook:blocked")
    );
    assert!(r.evidence[0].contains("(y/n)"), "{:?}", r.evidence);

    // The hook says working, but the screen shows the prompt and stays so: the hook holds
    // for the grace, then the screen wins and says so.
    tokio::time::advance(Duration::from_millis(200)).await;
    let done = parser("$ rm -i f\r\nrm: remove regular file 'f'? (y/n) y\r\n$ ", 5);
    w.observe(done.screen(), false, Instant::now());
    w.note_signal(State::Working, "hook:working".into(), Instant::now());
    let said = Instant::now();
    w.observe(done.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Working);
    tokio::time::advance(grace / 2).await;
    w.observe(done.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Working, "within the grace the hook holds");
    let took = sleep_until_idle(&mut w, |w| w.observe(done.screen(), false, Instant::now())).await;
    let overruled_after = Instant::now() - said;
    assert!(overruled_after >= grace, "{overruled_after:?} {took:?}");
    assert!(overruled_after <= grace + profile.dwell + Duration::from_millis(10));
    let r = w.report(Instant::now());
    assert_eq!(r.rule, "prompt");
    assert_eq!(
        r.source,
        "screen:rule prompt (over hook:working: the screen read idle for 5000 ms)"
    );
}

/// A question on the screen outranks any other signal at once (the CLI asks after saying it
/// works, and may say it asks only seconds later, or not at all); the later `blocked` signal
/// agrees with it and keeps the question's lines at once.
#[tokio::test(start_paused = true)]
async fn a_question_on_the_screen_outranks_any_other_signal_at_once() {
    let profile = shell();
    for (said, name) in [(State::Working, "working"), (State::Idle, "idle")] {
        let mut w = Watch::new(profile.clone(), Instant::now());
        let prompt = parser("$ ", 5);
        w.observe(prompt.screen(), false, Instant::now());
        w.note_signal(said, format!("hook:{name}"), Instant::now());
        tokio::time::advance(Duration::from_millis(100)).await;
        let asked = parser("$ rm -i f\r\nrm: remove regular file 'f'? (y/n) ", 5);
        w.observe(asked.screen(), false, Instant::now());
        tokio::time::advance(profile.dwell).await;
        w.observe(asked.screen(), false, Instant::now());
        let r = w.report(Instant::now());
        assert_eq!(r.state, State::Blocked, "{r:?}");
        assert_eq!(
            r.source,
            format!("screen:rule choices (over hook:{name}: a question on the screen)")
        );
        w.note_signal(State::Blocked, "hook:blocked".into(), Instant::now());
        let r = w.report(Instant::now());
        assert_eq!(r.source, "hook:blocked");
        assert!(r.evidence[0].contains("(y/n)"), "{:?}", r.evidence);
    }
}

/// While the agent's MCP connection to the hub is awaited, its prompt is not ready: `idle`
/// reads `working` (`mcp:connecting`) until the connection is up, or the wait runs out; other
/// states are not touched.
#[tokio::test(start_paused = true)]
async fn an_awaited_mcp_connection_holds_the_prompt_back() {
    let profile = shell();
    let within = Duration::from_secs(30);
    let prompt = parser("$ ", 5);
    let mut w = Watch::new(profile.clone(), Instant::now());
    w.expect_mcp(within, Instant::now());
    w.observe(prompt.screen(), false, Instant::now());
    let r = w.report(Instant::now());
    assert_eq!(
        (r.state, r.source.as_str()),
        (State::Working, "mcp:connecting")
    );
    assert!(w.mcp_pending(Instant::now()));
    let asked = parser("$ rm -i f\r\nrm: remove regular file 'f'? (y/n) ", 5);
    w.observe(asked.screen(), false, Instant::now());
    tokio::time::advance(profile.dwell).await;
    w.observe(asked.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Blocked, "a question is a question");
    w.observe(prompt.screen(), false, Instant::now());
    tokio::time::advance(profile.dwell).await;
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Working);
    w.note_mcp_ready();
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle);
    assert!(!w.mcp_pending(Instant::now()) && !w.mcp_missing());

    // Never connected: idle once the wait runs out, which the watch marks as due.
    let mut w = Watch::new(profile.clone(), Instant::now());
    w.expect_mcp(within, Instant::now());
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Working);
    let due = w.next_due(Instant::now()).unwrap();
    assert!(due <= Instant::now() + within, "{due:?}");
    tokio::time::advance(within).await;
    w.observe(prompt.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Idle);
    assert!(w.mcp_missing());
}

/// Input that submits ends an `idle` signal: the agent was given work, and a CLI that signals
/// only a turn's end (Codex's `notify`) says nothing when the next turn starts, so the screen
/// reads that turn without waiting out the grace.
#[tokio::test(start_paused = true)]
async fn input_that_submits_ends_an_idle_signal() {
    let profile = shell();
    let mut w = Watch::new(profile.clone(), Instant::now());
    let prompt = parser("$ ", 5);
    w.observe(prompt.screen(), false, Instant::now());
    w.note_signal(
        State::Idle,
        "hook:agent-turn-complete".into(),
        Instant::now(),
    );
    tokio::time::advance(Duration::from_millis(100)).await;
    w.note_input(true, Instant::now());
    tokio::time::advance(Duration::from_millis(50)).await;
    let working = parser("$ make\r\n⠋ Building...", 5);
    w.observe(working.screen(), false, Instant::now());
    tokio::time::advance(profile.dwell).await;
    w.observe(working.screen(), false, Instant::now());
    let r = w.report(Instant::now());
    assert_eq!(
        (r.state, r.source.as_str()),
        (State::Working, "screen:rule spinner")
    );
}

/// A status file says what the agent is now, a hook that something happened: overruled by the
/// screen, a hook's signal is gone, a status file's counts again once the screen agrees.
#[tokio::test(start_paused = true)]
async fn a_status_overruled_by_the_screen_counts_again_once_the_screen_agrees() {
    let profile = shell();
    let prompt = parser("$ ", 5);
    let asked = parser("$ rm -i f\r\nrm: remove regular file 'f'? (y/n) ", 5);
    for (status, source, then) in [
        (true, "status-file:waiting", "status-file:waiting"),
        (false, "hook:blocked", "screen:rule choices"),
    ] {
        let mut w = Watch::new(profile.clone(), Instant::now());
        match status {
            true => w.note_status(State::Blocked, source.into(), Instant::now()),
            false => w.note_signal(State::Blocked, source.into(), Instant::now()),
        }
        w.observe(prompt.screen(), false, Instant::now());
        assert_eq!(w.state(), State::Blocked, "{source}: within the grace");
        tokio::time::advance(profile.signals.grace + profile.dwell).await;
        w.observe(prompt.screen(), false, Instant::now());
        let r = w.report(Instant::now());
        assert_eq!(r.state, State::Idle, "{source}");
        assert!(r
            .source
            .starts_with(&format!("screen:rule prompt (over {source}")));
        w.observe(asked.screen(), false, Instant::now());
        tokio::time::advance(profile.dwell).await;
        w.observe(asked.screen(), false, Instant::now());
        let r = w.report(Instant::now());
        assert_eq!(r.state, State::Blocked, "{source}");
        assert!(r.source.starts_with(then), "{source}: {}", r.source);
    }
}

/// Input sets a status aside (the agent was given work; its CLI may not rewrite the file for a
/// short turn): the screen leads, and the status counts again once the screen agrees with it.
/// An `idle` hook signal is gone with the input.
#[tokio::test(start_paused = true)]
async fn input_sets_a_status_aside_until_the_screen_agrees_again() {
    let profile = shell();
    let prompt = parser("$ ", 5);
    let ran = parser("$ true\r\n$ ", 5);
    for (status, source, then) in [
        (true, "status-file:idle", "status-file:idle"),
        (false, "hook:idle", "screen:rule prompt"),
    ] {
        let mut w = Watch::new(profile.clone(), Instant::now());
        w.observe(prompt.screen(), false, Instant::now());
        match status {
            true => w.note_status(State::Idle, source.into(), Instant::now()),
            false => w.note_signal(State::Idle, source.into(), Instant::now()),
        }
        assert_eq!(w.report(Instant::now()).source, source);
        w.note_input(true, Instant::now());
        assert_eq!(w.state(), State::Working, "{source}");
        tokio::time::advance(Duration::from_millis(50)).await;
        let r = look_through_the_dwell(&mut w, &ran, profile.dwell).await;
        assert_eq!(
            (r.state, r.source.as_str()),
            (State::Idle, then),
            "{source}"
        );
    }
}

/// Looks at `screen` now, and again once `dwell` has passed: what the watch reports of a
/// screen that stays.
async fn look_through_the_dwell(
    w: &mut Watch,
    screen: &vt100::Parser,
    dwell: Duration,
) -> StateReport {
    w.observe(screen.screen(), false, Instant::now());
    tokio::time::advance(dwell).await;
    w.observe(screen.screen(), false, Instant::now());
    w.report(Instant::now())
}

fn claude() -> Arc<profile::Profile> {
    ProfileSet::default().for_cli_type(Some("claude"))
}

/// Claude Code's screen while it retries a 429, its status file saying `busy`.
fn claude_retrying(seconds: u32) -> vt100::Parser {
    let text = format!(
        "❯ say something\n\n✻ 429 Number of request tokens has exceeded y… · retrying in \
         {seconds}s · attempt 3/10\n\n{rule}\n❯ \n{rule}\n  ⏸ manual mode on · esc to interrupt",
        rule = "─".repeat(80)
    );
    parser(&text, 12)
}

/// While a retry of the 429 is in flight Claude Code shows `retrying…` instead of its
/// countdown: still limited (read as working, an idle policy could act between two tries).
#[tokio::test(start_paused = true)]
async fn a_retry_in_flight_is_still_limited() {
    let profile = claude();
    let mut w = Watch::new(profile.clone(), Instant::now());
    w.note_status(State::Working, "status-file:busy".into(), Instant::now());
    let text = format!(
        "❯ say something\n\n✻ 429 Number of request tokens has exceeded your p… · retrying… · \
         attempt 3/10\n\n{rule}\n❯ \n{rule}\n  ⏸ manual mode on · esc to interrupt",
        rule = "─".repeat(80)
    );
    let r = look_through_the_dwell(&mut w, &parser(&text, 12), profile.dwell).await;
    assert_eq!(
        (r.state, r.rule.as_str()),
        (State::Limited, "limit"),
        "{r:?}"
    );
}

/// A limit on the screen outranks the agent's own word at once, but a question: Claude Code's
/// status file says `busy` all through its retries of a 429 (and a CLI that stopped at a limit
/// says its turn ended). `until` is the retry's countdown, from the last look. Once the
/// screen works again, the status counts again.
#[tokio::test(start_paused = true)]
async fn a_limit_on_the_screen_outranks_a_busy_status_at_once() {
    let profile = claude();
    let mut w = Watch::new(profile.clone(), Instant::now());
    w.note_status(State::Working, "status-file:busy".into(), Instant::now());
    let working = parser(
        "❯ say something\n\n✻ Crafting…\n\n❯ \n  ⏸ manual mode on · esc to interrupt",
        12,
    );
    w.observe(working.screen(), false, Instant::now());
    assert_eq!(w.state(), State::Working);
    tokio::time::advance(Duration::from_millis(100)).await;
    let r = look_through_the_dwell(&mut w, &claude_retrying(18), profile.dwell).await;
    assert_eq!(
        (r.state, r.rule.as_str()),
        (State::Limited, "limit"),
        "{r:?}"
    );
    assert!(
        profile.dwell < profile.signals.grace,
        "at once, not after the grace"
    );
    let looked = crate::activity::wall_clock(Instant::now());
    assert_eq!(r.until, Some(looked + chrono::Duration::seconds(18)));
    assert_eq!(
        r.source,
        format!(
            "screen:rule limit (over status-file:busy: a limit on the screen); until {}",
            r.until.unwrap().to_rfc3339()
        )
    );
    assert!(
        r.evidence[0].contains("retrying in 18s"),
        "{:?}",
        r.evidence
    );
    // The countdown goes on: `until` stays put.
    tokio::time::advance(Duration::from_secs(1)).await;
    let later = claude_retrying(17);
    w.observe(later.screen(), false, Instant::now());
    assert_eq!(w.report(Instant::now()).until, r.until);

    // The API answers again: the spinner works, and the status counts again.
    tokio::time::advance(Duration::from_millis(100)).await;
    let r = look_through_the_dwell(&mut w, &working, profile.dwell).await;
    assert_eq!(
        (r.state, r.source.as_str()),
        (State::Working, "status-file:busy")
    );
    assert_eq!(r.until, None);
}

/// The generic limit rule reads any CLI's error about a limit on the bottom rows, only on rows
/// the profile's own rules do not read, and never an old error scrolled up.
#[test]
fn the_generic_limit_rule_reads_only_the_bottom_rows_no_rule_reads() {
    let shell = shell();
    let classify = |profile: &profile::Profile, text: &str| {
        let p = parser(text, 12);
        let rows = crate::activity::content_rows(p.screen(), &profile.masks);
        classify::classify(
            profile,
            &classify::Look {
                rows: &rows,
                row_still_for: &[],
                title: "",
                screen_still_for: Duration::from_secs(60),
                title_still_for: Duration::from_secs(60),
            },
        )
    };
    let got = classify(
        &shell,
        "$ agent\nError: 429 Too Many Requests. Retrying in 5s",
    );
    assert_eq!(
        (got.state, got.rule.as_str()),
        (State::Limited, "generic-limit")
    );
    // Its words typed at the prompt, or in a spinner line, are what the profile reads.
    let got = classify(&shell, "$ echo 'quota exceeded, error 429' $ ");
    assert_eq!(got.state, State::Idle, "{got:?}");
    let got = classify(&shell, "⠙ Fixing the rate limit error handling...");
    assert_eq!(got.state, State::Working, "{got:?}");
    // An error of long ago, with output since.
    let got = classify(&shell, "Error: quota exceeded\none\ntwo\nthree\n$ ");
    assert_eq!(got.state, State::Idle, "{got:?}");
    // A question outranks it.
    let got = classify(&shell, "Error: rate limit exceeded\nRetry now? [y/N] ");
    assert_eq!(got.state, State::Blocked, "{got:?}");
}
