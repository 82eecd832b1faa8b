//! Landing an agent's branch: merge, squash, rebase and ff-only into the base, update, continue
//! from the base and push, against real repositories; and the pure parts (conflict hunks, the
//! squash message).

use super::*;
use crate::workspace::conflicts::hunks;
use crate::workspace::land::squash_message;

impl Agent {
    fn branch(&self) -> Branch<'_> {
        Branch {
            repo: &self.repo,
            base: "main",
            branch: &self.branch,
        }
    }
}

/// Commits `file` with `text` on main in the repository's own work tree.
fn main_commit(fx: &Fixture, file: &str, text: &str) -> String {
    write(&fx.repo.join(file), text);
    commit_all(&fx.repo, &format!("main changes {file}"))
}

fn subjects(dir: &Path, rev: &str) -> Vec<String> {
    git(dir, &["log", "--format=%s", rev])
        .lines()
        .map(String::from)
        .collect()
}

/// Everything a failed landing must leave as it was: refs, the repository's index and status,
/// and the bytes of the given files.
fn snapshot(fx: &Fixture, a: &Agent, files: &[PathBuf]) -> (String, Vec<u8>, String, Vec<Vec<u8>>) {
    (
        git(&fx.repo, &["show-ref"]),
        index_bytes(&fx.repo),
        git(&fx.repo, &["status", "--porcelain"]) + &git(&a.path, &["status", "--porcelain"]),
        files.iter().map(|f| fs::read(f).unwrap()).collect(),
    )
}

#[test]
fn hunks_are_the_marked_regions_markers_included() {
    let text =
        "a\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\nb\n<<<<<<< o\n1\n=======\n2\n>>>>>>> t\n";
    assert_eq!(
        hunks(text),
        vec![
            "<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n".to_string(),
            "<<<<<<< o\n1\n=======\n2\n>>>>>>> t\n".to_string()
        ]
    );
    assert!(hunks("no conflict\n").is_empty());
    assert!(hunks("<<<<<<< never closed\nx\n").is_empty());
}

#[test]
fn a_squash_message_is_the_subject_or_every_subject_oldest_first() {
    let c = |s: &str| Commit {
        sha: "0".into(),
        subject: s.into(),
    };
    assert_eq!(squash_message("agent/a", &[c("only")]), "only");
    assert_eq!(
        squash_message("agent/a", &[c("second"), c("first")]),
        "Squash branch 'agent/a'\n\n* first\n* second\n"
    );
}

#[test]
fn ff_only_fast_forwards_main_and_its_checked_out_work_tree() {
    let fx = fixture();
    let a = agent(&fx, "a");
    let tip = checkout_with_a_commit(&a);
    let landed = land(&a.branch(), LandMode::FfOnly, None).unwrap();
    assert_eq!(landed.after, tip);
    assert_eq!(git(&fx.repo, &["rev-parse", "main"]), tip);
    assert_eq!(
        landed.worktree.as_deref(),
        Some(fx.repo.canonicalize().unwrap().as_path())
    );
    assert_eq!(
        fs::read_to_string(fx.repo.join("feature.txt")).unwrap(),
        "done\n"
    );
    assert_eq!(git(&fx.repo, &["status", "--porcelain"]), "");
    assert_eq!(subjects(&fx.repo, "main"), ["agent work", "initial"]);
    assert_eq!(
        landed.files,
        vec![change("feature.txt", Some(1), Some(0), "added")]
    );
}

#[test]
fn ff_only_is_refused_when_main_moved_and_nothing_changes() {
    let fx = fixture();
    let a = agent(&fx, "a");
    checkout_with_a_commit(&a);
    main_commit(&fx, "MAIN", "m\n");
    let before = git(&fx.repo, &["show-ref"]);
    let e = land(&a.branch(), LandMode::FfOnly, None).unwrap_err();
    assert_eq!(e.code(), "NOT_FAST_FORWARD");
    assert_eq!(git(&fx.repo, &["show-ref"]), before);
    let seen = preview(&a.branch(), LandMode::FfOnly).unwrap();
    assert!(!seen.lands && seen.conflicts.is_empty(), "{seen:?}");
}

#[test]
fn merge_squash_and_rebase_land_the_agents_commits_on_a_main_that_moved() {
    for mode in [LandMode::Merge, LandMode::Squash, LandMode::Rebase] {
        let fx = fixture();
        let a = agent(&fx, "a");
        checkout_with_a_commit(&a);
        write(&a.path.join("more.txt"), "more\n");
        commit_all(&a.path, "agent more");
        main_commit(&fx, "MAIN", "m\n");
        let before = git(&fx.repo, &["rev-parse", "main"]);

        let seen = preview(&a.branch(), mode).unwrap();
        assert!(
            seen.lands && seen.conflicts.is_empty(),
            "{mode:?}: {seen:?}"
        );
        assert_eq!(seen.commits.len(), 2, "{mode:?}");
        assert_eq!(
            git(&fx.repo, &["rev-parse", "main"]),
            before,
            "a preview moves nothing"
        );

        let landed = land(&a.branch(), mode, None).unwrap();
        assert_eq!(landed.before, before);
        let log = subjects(&fx.repo, "main");
        let want: &[&str] = match mode {
            LandMode::Merge => &[
                "Merge branch 'agent/a'",
                "main changes MAIN",
                "agent more",
                "agent work",
                "initial",
            ],
            LandMode::Squash => &["Squash branch 'agent/a'", "main changes MAIN", "initial"],
            _ => &["agent more", "agent work", "main changes MAIN", "initial"],
        };
        let mut log_sorted = log.clone();
        let mut want_sorted: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        if mode == LandMode::Merge {
            // The merge's parents are listed by date: compare as sets, the merge first.
            assert_eq!(log[0], want[0]);
            log_sorted.sort();
            want_sorted.sort();
        }
        assert_eq!(log_sorted, want_sorted, "{mode:?}");
        let parents = git(&fx.repo, &["rev-list", "--parents", "-n1", "main"]);
        let want_parents = if mode == LandMode::Merge { 3 } else { 2 };
        assert_eq!(
            parents.split(' ').count(),
            want_parents,
            "{mode:?}: {parents}"
        );
        for file in ["feature.txt", "more.txt", "MAIN"] {
            assert!(
                fx.repo.join(file).exists(),
                "{mode:?}: {file} not in the work tree"
            );
        }
        assert_eq!(git(&fx.repo, &["status", "--porcelain"]), "", "{mode:?}");
        let paths: Vec<_> = landed.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["feature.txt", "more.txt"], "{mode:?}");
        if mode == LandMode::Rebase {
            let author = git(&fx.repo, &["log", "-1", "--format=%an <%ae>", "main"]);
            assert_eq!(author, "Test <test@example.com>");
        }
    }
}

#[test]
fn a_conflict_changes_nothing_anywhere_and_names_the_files_and_hunks() {
    for mode in [LandMode::Merge, LandMode::Squash, LandMode::Rebase] {
        let fx = fixture();
        let a = agent(&fx, "a");
        ensure(&a.checkout()).unwrap();
        set_identity(&a.path);
        write(&a.path.join("README"), "one\nTWO from the agent\n");
        commit_all(&a.path, "agent README");
        main_commit(&fx, "README", "one\nTWO from main\n");
        let files = [fx.repo.join("README"), a.path.join("README")];
        let before = snapshot(&fx, &a, &files);

        let e = land(&a.branch(), mode, None).unwrap_err();
        assert_eq!(e.code(), "MERGE_CONFLICT", "{mode:?}: {e}");
        let WorkspaceError::Conflicts { conflicts, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].path, "README");
        let hunk = &conflicts[0].hunks[0];
        assert!(
            hunk.contains("TWO from main") && hunk.contains("TWO from the agent"),
            "{hunk}"
        );
        assert_eq!(snapshot(&fx, &a, &files), before, "{mode:?}");
        let seen = preview(&a.branch(), mode).unwrap();
        assert_eq!(seen.conflicts, ["README"], "{mode:?}");
    }
}

#[test]
fn a_dirty_base_work_tree_is_refused_naming_its_files() {
    let fx = fixture();
    let a = agent(&fx, "a");
    checkout_with_a_commit(&a);
    write(&fx.repo.join("scratch.txt"), "mine\n");
    write(&fx.repo.join("README"), "one\ntwo\nedited\n");
    let before = git(&fx.repo, &["show-ref"]);
    let e = land(&a.branch(), LandMode::Merge, None).unwrap_err();
    assert_eq!(e.code(), "BASE_DIRTY");
    let WorkspaceError::BaseDirty { files, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(files, &["README", "scratch.txt"]);
    assert_eq!(git(&fx.repo, &["show-ref"]), before);
    assert_eq!(
        fs::read_to_string(fx.repo.join("README")).unwrap(),
        "one\ntwo\nedited\n"
    );
}

#[test]
fn a_base_checked_out_nowhere_only_has_its_ref_moved() {
    let fx = fixture();
    let a = agent(&fx, "a");
    let tip = checkout_with_a_commit(&a);
    git(&fx.repo, &["switch", "-q", "-c", "elsewhere"]);
    write(&fx.repo.join("untracked-here"), "x\n");
    let landed = land(&a.branch(), LandMode::Merge, None).unwrap();
    assert_eq!(landed.worktree, None);
    assert_eq!(git(&fx.repo, &["rev-parse", "main"]), tip);
    assert!(!fx.repo.join("feature.txt").exists());
}

#[test]
fn a_branch_with_nothing_new_is_nothing_to_merge() {
    let fx = fixture();
    let a = agent(&fx, "a");
    ensure(&a.checkout()).unwrap();
    let e = land(&a.branch(), LandMode::Merge, None).unwrap_err();
    assert_eq!(e.code(), "NOTHING_TO_MERGE");
    let seen = preview(&a.branch(), LandMode::Merge).unwrap();
    assert!(seen.commits.is_empty() && seen.files.is_empty(), "{seen:?}");
}

#[test]
fn a_tag_base_is_not_a_branch() {
    let fx = fixture();
    let a = agent(&fx, "a");
    checkout_with_a_commit(&a);
    git(&fx.repo, &["tag", "v1", "main"]);
    let b = Branch {
        base: "v1",
        ..a.branch()
    };
    assert_eq!(
        land(&b, LandMode::Merge, None).unwrap_err().code(),
        "BASE_NOT_A_BRANCH"
    );
}

#[test]
fn continue_from_base_moves_the_branch_and_its_checkout_to_the_new_base() {
    let fx = fixture();
    let a = agent(&fx, "a");
    checkout_with_a_commit(&a);
    main_commit(&fx, "MAIN", "m\n");
    let landed = land(&a.branch(), LandMode::Squash, Some("Land a")).unwrap();
    assert_eq!(subjects(&fx.repo, "main")[0], "Land a");
    let moved = continue_from_base(&a.branch()).unwrap();
    assert_eq!(moved.after, landed.after);
    assert_eq!(git(&a.path, &["rev-parse", "HEAD"]), landed.after);
    assert!(a.path.join("MAIN").exists());
    assert_eq!(git(&a.path, &["status", "--porcelain"]), "");
}

#[test]
fn check_branch_clean_refuses_a_dirty_checkout() {
    let fx = fixture();
    let a = agent(&fx, "a");
    checkout_with_a_commit(&a);
    write(&a.path.join("draft.txt"), "wip\n");
    let e = check_branch_clean(&a.branch()).unwrap_err();
    assert_eq!(e.code(), "WORKSPACE_DIRTY");
}

#[test]
fn update_merges_or_rebases_the_base_into_the_branch() {
    for rebase in [false, true] {
        let fx = fixture();
        let a = agent(&fx, "a");
        checkout_with_a_commit(&a);
        main_commit(&fx, "MAIN", "m\n");
        let updated = update(&a.branch(), rebase).unwrap();
        assert_ne!(updated.before, updated.after);
        assert!(updated.worktree.is_some());
        assert!(a.path.join("MAIN").exists() && a.path.join("feature.txt").exists());
        assert_eq!(git(&a.path, &["status", "--porcelain"]), "");
        let head = subjects(&a.path, "HEAD");
        match rebase {
            true => assert_eq!(head, ["agent work", "main changes MAIN", "initial"]),
            false => assert_eq!(head[0], "Merge branch 'main' into agent/a"),
        }
        // Already up to date: nothing moves.
        let again = update(&a.branch(), rebase).unwrap();
        assert_eq!(again.before, again.after);
    }
}

#[test]
fn update_with_a_conflict_or_a_dirty_checkout_leaves_the_branch_as_it_was() {
    let fx = fixture();
    let a = agent(&fx, "a");
    ensure(&a.checkout()).unwrap();
    set_identity(&a.path);
    write(&a.path.join("README"), "one\nTWO from the agent\n");
    commit_all(&a.path, "agent README");
    main_commit(&fx, "README", "one\nTWO from main\n");
    let files = [fx.repo.join("README"), a.path.join("README")];
    let before = snapshot(&fx, &a, &files);
    for rebase in [false, true] {
        let e = update(&a.branch(), rebase).unwrap_err();
        assert_eq!(e.code(), "MERGE_CONFLICT", "rebase {rebase}");
        assert_eq!(snapshot(&fx, &a, &files), before, "rebase {rebase}");
    }
    write(&a.path.join("draft.txt"), "wip\n");
    assert_eq!(
        update(&a.branch(), false).unwrap_err().code(),
        "WORKSPACE_DIRTY"
    );
}

#[test]
fn push_puts_the_branch_on_the_remote_and_names_unknown_remotes() {
    let fx = fixture();
    let a = agent(&fx, "a");
    let tip = checkout_with_a_commit(&a);
    let bare = fx.data.join("origin.git");
    fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare"]);
    git(
        &fx.repo,
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    let pushed = push(&a.branch(), "origin").unwrap();
    assert_eq!(pushed.sha, tip);
    assert_eq!(pushed.url, bare.to_str().unwrap());
    assert_eq!(git(&bare, &["rev-parse", "refs/heads/agent/a"]), tip);
    assert_eq!(
        push(&a.branch(), "upstream").unwrap_err().code(),
        "NO_SUCH_REMOTE"
    );
    assert_eq!(
        push(&a.branch(), "--mirror").unwrap_err().code(),
        "NO_SUCH_REMOTE"
    );
    git(
        &fx.repo,
        &["remote", "add", "gone", "/nonexistent/repo.git"],
    );
    assert_eq!(push(&a.branch(), "gone").unwrap_err().code(), "PUSH_FAILED");
}
