use chrono::{Duration, TimeZone};

use super::*;
use crate::protocol::{AgentEvent, PolicyAction};

fn t(s: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
}

fn change(state: State, previous: State, at: i64) -> HubEvent {
    HubEvent {
        at: t(at),
        kind: EventKind::SessionStateChanged {
            session_id: "pty_1".into(),
            agent_id: None,
            state,
            previous,
            since: t(at),
            rule: "r".into(),
            until: None,
        },
    }
}

fn facts() -> Facts {
    Facts {
        agent: AgentRef {
            label: Some("builder".into()),
            team: Some("red".into()),
            ..AgentRef::default()
        },
        question: Some((
            "Allow write to main.rs? [y/n]".into(),
            vec![Choice {
                label: "yes".into(),
                keys: vec!["y".into(), "Enter".into()],
            }],
        )),
        last_lines: vec!["done: 1".into(), "fake>".into()],
        last_input_at: Some(t(5)),
        agent_session: true,
    }
}

fn hook(toml: &str) -> NotifyConfig {
    let c = crate::config::HubConfig::parse(
        &format!("[[notify]]\nurl = \"http://127.0.0.1:9/\"\n{toml}"),
        "hub.toml",
    )
    .unwrap();
    c.notify[0].clone()
}

#[test]
fn a_question_names_the_agent_its_choices_and_how_long_it_worked() {
    let mut h = History::default();
    let f = facts();
    assert_eq!(
        decide(
            &change(State::Working, State::Idle, 10),
            &f,
            &mut h,
            "http://hub"
        ),
        None
    );
    let m = decide(
        &change(State::Blocked, State::Working, 75),
        &f,
        &mut h,
        "http://hub",
    )
    .unwrap();
    assert_eq!(m.event, NotifyEvent::Blocked);
    assert_eq!(m.what, "asks a question after 1m 5s of work");
    assert_eq!(m.for_ms, Some(65_000));
    assert_eq!(m.question.as_deref(), Some("Allow write to main.rs? [y/n]"));
    assert_eq!(m.choices.len(), 1);
    assert_eq!(
        (m.agent.id.as_str(), m.agent.team.as_deref(), m.agent.name()),
        ("pty_1", Some("red"), "builder")
    );
    assert_eq!(m.link, "http://hub/#/grid/pty_1");
    assert_eq!(m.title(), "builder: asks a question after 1m 5s of work");
}

#[test]
fn a_turn_finishes_once_per_input_and_only_from_working() {
    let mut h = History::default();
    let f = facts();
    let idle = |h: &mut History, f: &Facts, prev, at| {
        decide(&change(State::Idle, prev, at), f, h, "http://hub").map(|m| m.event)
    };
    assert_eq!(
        idle(&mut h, &f, State::Unknown, 1),
        None,
        "not from working"
    );
    assert_eq!(
        idle(&mut h, &f, State::Working, 20),
        Some(NotifyEvent::TurnFinished)
    );
    assert_eq!(idle(&mut h, &f, State::Working, 30), None, "same input");
    let later = Facts {
        last_input_at: Some(t(40)),
        ..f.clone()
    };
    assert_eq!(
        idle(&mut h, &later, State::Working, 50),
        Some(NotifyEvent::TurnFinished)
    );
    let never_typed = Facts {
        last_input_at: None,
        ..f
    };
    assert_eq!(
        idle(&mut History::default(), &never_typed, State::Working, 1),
        None
    );
}

#[test]
fn events_become_messages_of_their_kind() {
    let agent = |detail: &str| AgentEvent {
        agent_id: "a1".into(),
        detail: detail.into(),
    };
    let policy = |dry_run| PolicyEvent {
        agent_id: Some("a1".into()),
        session_id: "docker_1".into(),
        policy: "fast-idle".into(),
        action: PolicyAction::Stop,
        trigger: None,
        reason: "idle for 3s".into(),
        state: State::Idle,
        idle_for_ms: 3000,
        dry_run,
    };
    let cases = [
        (
            EventKind::AgentExited(agent("exit 137")),
            Some((NotifyEvent::Exited, "exited on its own")),
        ),
        (
            EventKind::AgentStartFailed(agent("no image")),
            Some((NotifyEvent::StartFailed, "could not start")),
        ),
        (
            EventKind::PolicyStopped(policy(false)),
            Some((
                NotifyEvent::PolicyStopped,
                "was stopped by policy fast-idle after 3s idle",
            )),
        ),
        (EventKind::PolicyStopped(policy(true)), None),
        (EventKind::AgentStarted(agent("ok")), None),
        (
            EventKind::SessionKilled {
                session_id: "s".into(),
            },
            None,
        ),
    ];
    for (kind, want) in cases {
        let event = HubEvent { at: t(0), kind };
        let got = decide(
            &event,
            &Facts::default(),
            &mut History::default(),
            "http://h",
        );
        assert_eq!(
            got.as_ref().map(|m| (m.event, m.what.as_str())),
            want,
            "{event:?}"
        );
    }
    let exited = HubEvent {
        at: t(0),
        kind: EventKind::AgentExited(agent("exit 137")),
    };
    let m = decide(
        &exited,
        &Facts::default(),
        &mut History::default(),
        "http://h",
    )
    .unwrap();
    assert_eq!(m.link, "http://h/#/agent/a1");
    assert_eq!(m.detail.as_deref(), Some("exit 137"));
}

#[test]
fn a_container_session_exit_is_left_to_the_agent_event() {
    let mut event = change(State::Exited, State::Idle, 1);
    if let EventKind::SessionStateChanged { agent_id, .. } = &mut event.kind {
        *agent_id = Some("a1".into());
    }
    assert_eq!(
        decide(&event, &Facts::default(), &mut History::default(), "h"),
        None
    );
    let host = change(State::Exited, State::Idle, 1);
    let agent = Facts {
        agent_session: true,
        ..Facts::default()
    };
    let m = decide(&host, &agent, &mut History::default(), "h").unwrap();
    assert_eq!(m.event, NotifyEvent::Exited);
}

#[test]
fn a_plain_shell_is_no_agent_to_tell_of() {
    let shell = Facts {
        agent_session: false,
        ..facts()
    };
    let mut h = History::default();
    for (state, previous) in [
        (State::Blocked, State::Working),
        (State::Idle, State::Working),
        (State::Exited, State::Idle),
    ] {
        assert_eq!(
            decide(&change(state, previous, 1), &shell, &mut h, "h"),
            None
        );
    }
}

#[test]
fn a_webhook_takes_its_events_and_teams_at_most_once_per_interval() {
    let mut h = History::default();
    let m = decide(
        &change(State::Blocked, State::Working, 1),
        &facts(),
        &mut h,
        "h",
    )
    .unwrap();
    let cases = [
        ("", true),
        ("events = [\"blocked\"]\n", true),
        ("events = [\"limited\"]\n", false),
        ("teams = [\"red\"]\n", true),
        ("teams = [\"blue\"]\n", false),
    ];
    for (toml, want) in cases {
        assert_eq!(
            admit(&hook(toml), &m, &mut Sent::new(), t(0)),
            want,
            "{toml}"
        );
    }
    let hook = hook("min_interval_s = 30\n");
    let mut sent = Sent::new();
    let admitted: Vec<bool> = [0, 10, 29, 30, 31, 59, 61]
        .iter()
        .map(|s| admit(&hook, &m, &mut sent, t(0) + Duration::seconds(*s)))
        .collect();
    assert_eq!(admitted, [true, false, false, true, false, false, true]);
    let mut other = m.clone();
    other.agent.id = "pty_2".into();
    assert!(admit(&hook, &other, &mut sent, t(31)), "another agent");
}

#[test]
fn a_question_not_yet_on_the_screen_is_waited_for() {
    let mut h = History::default();
    let unread = Facts {
        question: None,
        ..facts()
    };
    let m = decide(
        &change(State::Blocked, State::Working, 1),
        &unread,
        &mut h,
        "h",
    )
    .unwrap();
    assert!(awaits_question(&m));
    let read = decide(
        &change(State::Blocked, State::Idle, 2),
        &facts(),
        &mut h,
        "h",
    )
    .unwrap();
    assert!(!awaits_question(&read));
    let mut no_session = m.clone();
    no_session.agent.session_id = None;
    assert!(!awaits_question(&no_session));
}
