//! The agents' work summaries ([`super::super::work`]) on a real repository under the fake
//! container runtime: kept between computations, published only when they change, `null`
//! without a checkout; computed by the bus follower at the hub's start and at a turn's end.

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::*;
use crate::workspace::WorkSummary;

/// Runs git in `dir` as the tests' user.
fn git(dir: &std::path::Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "safe.directory=*",
            "-c",
            "user.name=U",
            "-c",
            "user.email=u@x",
        ])
        .args(args)
        .status()
        .unwrap();
    assert!(ok.success(), "git {args:?}");
}

/// The `work` of the `work_changed` events published since the last look.
fn work_changes(rx: &mut tokio::sync::broadcast::Receiver<HubEvent>) -> Vec<Option<u32>> {
    std::iter::from_fn(|| rx.try_recv().ok())
        .filter_map(|e| match e.kind {
            EventKind::WorkChanged { work, .. } => Some(work.map(|w| w.ahead)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_work_summary_is_kept_and_published_only_when_it_changes() {
    let repo = user_repo();
    let toml = format!(
        "workspace = {{ repo = \"{}\", base = \"main\" }}\n",
        repo.path().display()
    );
    let mut f = fixture(&toml, FakeContainers::with_image("img"));
    // No checkout yet: nothing to read, nothing published.
    assert_eq!(f.agents.refresh_work("a1").await.unwrap(), None);
    assert!(f.agents.info("a1").unwrap().work.is_none());
    f.agents.start("a1", false).await.unwrap();
    let _ = event_types(&mut f.events);

    let work = f
        .agents
        .refresh_work("a1")
        .await
        .unwrap()
        .expect("a summary");
    assert_eq!((work.ahead, work.files, work.merges_cleanly), (0, 0, true));
    assert_eq!(work_changes(&mut f.events), [Some(0)]);
    // The same again: kept (with its new time), not published.
    let again = f.agents.refresh_work("a1").await.unwrap().unwrap();
    assert!(again.same_work(&work));
    assert_eq!(work_changes(&mut f.events), []);
    assert_eq!(f.agents.info("a1").unwrap().work, Some(again));

    // A commit and a file not committed: the list shows them once computed, not before.
    let checkout = f.data.path().join("agents/a1/workspace");
    std::fs::write(checkout.join("a.txt"), "a\n").unwrap();
    git(&checkout, &["add", "a.txt"]);
    git(&checkout, &["commit", "-qm", "a"]);
    std::fs::write(checkout.join("draft.txt"), "d\n").unwrap();
    assert_eq!(f.agents.info("a1").unwrap().work.unwrap().ahead, 0);
    let work = f.agents.refresh_work("a1").await.unwrap().unwrap();
    assert_eq!((work.ahead, work.files), (1, 2));
    assert_eq!(f.agents.info("a1").unwrap().work, Some(work));
    assert_eq!(work_changes(&mut f.events), [Some(1)]);

    // Its checkout removed: no summary, and that is published.
    f.agents.stop("a1").await.unwrap();
    f.agents.remove_workspace("a1", true).await.unwrap();
    assert!(f.agents.info("a1").unwrap().work.is_none());
    assert_eq!(work_changes(&mut f.events), [None]);
}

#[tokio::test]
async fn an_agent_without_a_workspace_has_no_work_to_compute() {
    let f = fixture("", FakeContainers::with_image("img"));
    let err = f.agents.refresh_work("a1").await.unwrap_err();
    assert_eq!(err.code(), "NO_WORKSPACE");
    let err = f.agents.refresh_work("nobody").await.unwrap_err();
    assert_eq!(err.code(), "AGENT_NOT_FOUND");
}

/// Waits (at most 10 s) until `a1`'s work is as `wanted` says.
async fn wait_work(agents: &Agents, wanted: impl Fn(Option<&WorkSummary>) -> bool) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !wanted(agents.info("a1").unwrap().work.as_ref()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            agents.info("a1").unwrap().work
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follower_computes_every_checkout_at_its_start_and_again_when_a_turn_ends() {
    let repo = user_repo();
    let toml = format!(
        "workspace = {{ repo = \"{}\", base = \"main\" }}\n",
        repo.path().display()
    );
    let f = fixture(&toml, FakeContainers::with_image("img"));
    f.agents.start("a1", false).await.unwrap();
    let checkout = f.data.path().join("agents/a1/workspace");
    std::fs::write(checkout.join("a.txt"), "a\n").unwrap();
    git(&checkout, &["add", "a.txt"]);
    git(&checkout, &["commit", "-qm", "a"]);
    assert!(f.agents.info("a1").unwrap().work.is_none());

    // At the hub's start, every agent with a workspace is computed once.
    let agents = Arc::new(f.agents);
    let events = agents.handles.events.clone();
    let (tracker, closing) = (TaskTracker::new(), CancellationToken::new());
    super::super::work::start(agents.clone(), &events, &tracker, closing.clone());
    wait_work(&agents, |w| w.is_some_and(|w| w.ahead == 1)).await;

    // A turn's end (its state going idle) computes it again.
    std::fs::write(checkout.join("b.txt"), "b\n").unwrap();
    git(&checkout, &["add", "b.txt"]);
    git(&checkout, &["commit", "-qm", "b"]);
    events.emit(EventKind::SessionStateChanged {
        session_id: "s".into(),
        agent_id: Some("a1".into()),
        state: crate::agent_state::State::Idle,
        previous: crate::agent_state::State::Working,
        since: chrono::Utc::now(),
        rule: "hook".into(),
        until: None,
    });
    wait_work(&agents, |w| w.is_some_and(|w| w.ahead == 2)).await;
    closing.cancel();
    tracker.close();
    tracker.wait().await;
}
