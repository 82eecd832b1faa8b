//! [`summary`] on real repositories: ahead, behind, files, clean and conflicting merges, for a
//! checkout and for a pushed branch.

use super::*;
use crate::workspace::summary::parse_counts;

fn summary_of(a: &Agent) -> WorkSummary {
    summary(Work::Checkout(&a.checkout())).unwrap()
}

#[test]
fn a_new_checkout_has_no_work_and_merges_cleanly() {
    let fx = fixture();
    let a = agent(&fx, "a");
    ensure(&a.checkout()).unwrap();
    let s = summary_of(&a);
    assert_eq!(
        (s.ahead, s.behind, s.files, s.merges_cleanly),
        (0, 0, 0, true),
        "{s:?}"
    );
    assert!(s.conflicts.is_empty());
}

#[test]
fn ahead_behind_and_files_count_commits_and_uncommitted_files_once() {
    let fx = fixture();
    let a = worked_checkout(&fx);
    // Two commits (.gitignore, README, src/lib.rs, with space.txt), src/lib.rs changed again
    // and an untracked file; the ignored debug.log is not counted.
    let s = summary_of(&a);
    assert_eq!((s.ahead, s.behind, s.files), (2, 0, 5), "{s:?}");
    assert!(s.merges_cleanly && s.conflicts.is_empty(), "{s:?}");

    // The base moves on in a file the agent did not touch: behind, still clean.
    write(&fx.repo.join("LICENSE"), "Apache\n");
    commit_all(&fx.repo, "relicense");
    let s = summary_of(&a);
    assert_eq!((s.ahead, s.behind, s.files), (2, 1, 5), "{s:?}");
    assert!(s.merges_cleanly, "{s:?}");
}

#[test]
fn a_conflicting_base_names_the_files_and_changes_nothing() {
    let fx = fixture();
    let a = agent(&fx, "a");
    checkout_with_a_commit(&a);
    write(&fx.repo.join("feature.txt"), "the base's own\n");
    write(&fx.repo.join("README"), "one\ntwo\nthree\n");
    commit_all(&fx.repo, "feature on main");
    let refs = git(&fx.repo, &["show-ref"]);
    let status = git(&a.path, &["status", "--porcelain"]);

    let s = summary_of(&a);
    assert_eq!((s.ahead, s.behind, s.files), (1, 1, 1), "{s:?}");
    assert!(!s.merges_cleanly, "{s:?}");
    assert_eq!(s.conflicts, ["feature.txt"]);
    assert_eq!(git(&fx.repo, &["show-ref"]), refs);
    assert_eq!(git(&a.path, &["status", "--porcelain"]), status);

    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["conflicts"], serde_json::json!(["feature.txt"]));
    let never_made = agent(&fx, "b");
    let missing = summary(Work::Checkout(&never_made.checkout())).unwrap_err();
    assert_eq!(missing.code(), "WORKSPACE_MISSING");
}

#[test]
fn a_pushed_branch_is_read_in_the_repository_without_a_checkout() {
    let fx = fixture();
    git(&fx.repo, &["switch", "-q", "-c", "agent/r"]);
    write(&fx.repo.join("remote.txt"), "pushed\n");
    commit_all(&fx.repo, "pushed work");
    git(&fx.repo, &["switch", "-q", "main"]);
    // Uncommitted files of the user's own checkout are not the agent's.
    write(&fx.repo.join("scratch.txt"), "mine\n");
    let b = Branch {
        repo: &fx.repo,
        base: "main",
        branch: "agent/r",
    };
    let s = summary(Work::Pushed(&b)).unwrap();
    assert_eq!((s.ahead, s.behind, s.files), (1, 0, 1), "{s:?}");
    assert!(s.merges_cleanly);
    let json = serde_json::to_value(&s).unwrap();
    assert!(json.get("conflicts").is_none(), "{json}");

    let missing = Branch {
        branch: "agent/none",
        ..b
    };
    assert_eq!(
        summary(Work::Pushed(&missing)).unwrap_err().code(),
        "GIT_FAILED"
    );
    let no_base = Branch { base: "nope", ..b };
    assert_eq!(
        summary(Work::Pushed(&no_base)).unwrap_err().code(),
        "WORKSPACE_NO_BASE"
    );
}

#[test]
fn counts_and_sameness_ignore_what_does_not_matter() {
    assert_eq!(parse_counts("3\t5"), (3, 5));
    assert_eq!(parse_counts("0\t0\n"), (0, 0));
    assert_eq!(parse_counts(""), (0, 0));
    assert_eq!(parse_counts("x\t2"), (0, 2));
    let s = WorkSummary {
        ahead: 1,
        behind: 0,
        files: 2,
        merges_cleanly: true,
        conflicts: Vec::new(),
        checked_at: chrono::Utc::now(),
    };
    let later = WorkSummary {
        checked_at: s.checked_at + chrono::Duration::seconds(5),
        ..s.clone()
    };
    assert!(s.same_work(&later));
    assert!(!s.same_work(&WorkSummary { ahead: 2, ..later }));
}
