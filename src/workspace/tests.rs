//! The workspace functions against real git repositories in temporary directories.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::changes::{parse_name_status, parse_numstat, parse_status};
use super::worktree::{parse_list, Worktree};
use super::*;

/// Runs git in `dir` (as the tests' own user, not through the module); its trimmed output.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "safe.directory=*"])
        .args(args)
        .env("LC_ALL", "C")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A repository `app` on `main` with one commit (README, two lines; LICENSE, one line), and a
/// data dir for checkouts.
struct Fixture {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    data: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("app");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    set_identity(&repo);
    write(&repo.join("README"), "one\ntwo\n");
    write(&repo.join("LICENSE"), "MIT\n");
    commit_all(&repo, "initial");
    let data = tmp.path().join("data");
    Fixture {
        _tmp: tmp,
        repo,
        data,
    }
}

fn set_identity(repo: &Path) {
    git(repo, &["config", "user.name", "Test"]);
    git(repo, &["config", "user.email", "test@example.com"]);
    git(repo, &["config", "commit.gpgsign", "false"]);
}

fn commit_all(dir: &Path, subject: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", subject]);
    git(dir, &["rev-parse", "HEAD"])
}

/// An agent's checkout settings, owned.
struct Agent {
    repo: PathBuf,
    branch: String,
    path: PathBuf,
}

impl Agent {
    fn checkout(&self) -> Checkout<'_> {
        Checkout {
            repo: &self.repo,
            base: "main",
            branch: &self.branch,
            path: &self.path,
        }
    }
}

fn agent(fx: &Fixture, id: &str) -> Agent {
    Agent {
        repo: fx.repo.clone(),
        branch: format!("agent/{id}"),
        path: fx.data.join("agents").join(id).join("workspace"),
    }
}

/// Makes the agent's checkout and commits `feature.txt` in it; returns the commit.
fn checkout_with_a_commit(a: &Agent) -> String {
    ensure(&a.checkout()).unwrap();
    set_identity(&a.path);
    write(&a.path.join("feature.txt"), "done\n");
    commit_all(&a.path, "agent work")
}

fn change(path: &str, added: Option<u64>, removed: Option<u64>, status: &str) -> FileChange {
    FileChange {
        path: path.into(),
        added,
        removed,
        status: status.into(),
    }
}

fn index_bytes(checkout: &Path) -> Vec<u8> {
    let index = git(checkout, &["rev-parse", "--git-path", "index"]);
    fs::read(checkout.join(index)).unwrap()
}

#[test]
fn check_refuses_a_directory_that_is_not_a_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let err = check(tmp.path(), "main").unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_NOT_A_REPO", "{err}");
    let err = check(&tmp.path().join("missing"), "main").unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_NOT_A_REPO", "{err}");
    assert!(err.to_string().contains("no such directory"), "{err}");
}

#[test]
fn check_refuses_a_bare_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("app.git");
    git(
        tmp.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    let err = check(&bare, "main").unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_NOT_A_REPO", "{err}");
    assert!(err.to_string().contains("it is a bare repository"), "{err}");
}

#[test]
fn check_refuses_a_base_that_names_no_commit() {
    let fx = fixture();
    for base in ["nope", "-h", ""] {
        let err = check(&fx.repo, base).unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_NO_BASE", "{base}: {err}");
    }
}

#[test]
fn check_accepts_a_repository_from_any_of_its_directories() {
    let fx = fixture();
    let sub = fx.repo.join("src");
    fs::create_dir(&sub).unwrap();
    let sha = git(&fx.repo, &["rev-parse", "HEAD"]);
    for base in ["main", sha.as_str(), "HEAD~0"] {
        let found = check(&sub, base).unwrap();
        assert_eq!(found.toplevel, fx.repo.canonicalize().unwrap());
        assert_eq!(
            found.common_dir,
            fx.repo.join(".git").canonicalize().unwrap()
        );
    }
}

#[test]
fn valid_branch_name_accepts_branch_names_and_refuses_others() {
    for good in ["agent/a", "feature/x-1", "main"] {
        assert!(valid_branch_name(good), "{good}");
    }
    for bad in ["", "-x", "a..b", "a b", "x.lock", "@{-1}", "a/", "a~1"] {
        assert!(!valid_branch_name(bad), "{bad:?}");
    }
}

#[test]
fn ensure_creates_the_branch_from_base_and_is_idempotent() {
    let fx = fixture();
    let a = agent(&fx, "a");
    assert!(ensure(&a.checkout()).unwrap());
    assert_eq!(
        fs::read_to_string(a.path.join("README")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(
        git(&fx.repo, &["rev-parse", "agent/a"]),
        git(&fx.repo, &["rev-parse", "main"])
    );
    assert_eq!(
        git(&a.path, &["symbolic-ref", "HEAD"]),
        "refs/heads/agent/a"
    );

    write(&a.path.join("notes.txt"), "draft\n");
    write(&a.path.join("README"), "changed\n");
    assert!(!ensure(&a.checkout()).unwrap());
    assert_eq!(
        fs::read_to_string(a.path.join("notes.txt")).unwrap(),
        "draft\n"
    );
    assert_eq!(
        fs::read_to_string(a.path.join("README")).unwrap(),
        "changed\n"
    );
}

#[test]
fn ensure_checks_out_an_existing_branch_as_it_is() {
    let fx = fixture();
    git(&fx.repo, &["branch", "agent/a"]);
    let old = git(&fx.repo, &["rev-parse", "agent/a"]);
    write(&fx.repo.join("later.txt"), "later\n");
    commit_all(&fx.repo, "later on main");
    let a = agent(&fx, "a");
    assert!(ensure(&a.checkout()).unwrap());
    assert_eq!(git(&a.path, &["rev-parse", "HEAD"]), old);
    assert_eq!(
        git(&a.path, &["symbolic-ref", "HEAD"]),
        "refs/heads/agent/a"
    );
    assert!(!a.path.join("later.txt").exists());
}

#[test]
fn two_checkouts_do_not_see_each_others_files() {
    let fx = fixture();
    let (a, b) = (agent(&fx, "a"), agent(&fx, "b"));
    assert!(ensure(&a.checkout()).unwrap());
    assert!(ensure(&b.checkout()).unwrap());
    write(&a.path.join("only-a.txt"), "a\n");
    assert!(!b.path.join("only-a.txt").exists());
    assert!(dirty_files(&b.path).unwrap().is_empty());
    assert_eq!(dirty_files(&a.path).unwrap(), ["only-a.txt"]);
    assert!(dirty_files(&fx.repo).unwrap().is_empty());
}

/// Agents on one repository starting at once: each `git worktree list` of one start must not
/// read another's half-made entry ("failed to read .git/worktrees/.../commondir").
#[test]
fn checkouts_made_at_once_on_one_repository_all_succeed() {
    let fx = fixture();
    let agents: Vec<Agent> = (0..16).map(|n| agent(&fx, &format!("a{n}"))).collect();
    std::thread::scope(|s| {
        let made: Vec<_> = agents
            .iter()
            .map(|a| s.spawn(move || ensure(&a.checkout())))
            .collect();
        for (n, m) in made.into_iter().enumerate() {
            let made = m.join().unwrap();
            assert!(matches!(made, Ok(true)), "a{n}: {made:?}");
        }
    });
    let listed = git(&fx.repo, &["worktree", "list"]);
    assert_eq!(listed.lines().count(), 17, "{listed}");
}

#[test]
fn a_commit_in_the_checkout_lands_on_the_branch_in_the_repository() {
    let fx = fixture();
    let a = agent(&fx, "a");
    ensure(&a.checkout()).unwrap();
    let main = git(&fx.repo, &["rev-parse", "main"]);
    set_identity(&a.path);
    write(&a.path.join("feature.txt"), "done\n");
    let sha = commit_all(&a.path, "agent work");
    assert_eq!(
        git(&fx.repo, &["log", "-1", "--format=%H %s", "agent/a"]),
        format!("{sha} agent work")
    );
    assert_eq!(git(&fx.repo, &["rev-parse", "main"]), main);
    assert!(!fx.repo.join("feature.txt").exists());
}

#[test]
fn ensure_refuses_a_branch_checked_out_elsewhere() {
    let fx = fixture();
    let a = agent(&fx, "a");
    ensure(&a.checkout()).unwrap();
    let mut other = agent(&fx, "b");
    other.branch = "agent/a".into();
    let err = ensure(&other.checkout()).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_BRANCH_IN_USE", "{err}");
    match err {
        WorkspaceError::BranchCheckedOutElsewhere { branch, path } => {
            assert_eq!(branch, "agent/a");
            assert_eq!(path.canonicalize().unwrap(), a.path.canonicalize().unwrap());
        }
        other => panic!("{other:?}"),
    }
    assert!(!other.path.exists());

    other.branch = "main".into();
    let err = ensure(&other.checkout()).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_BRANCH_IN_USE", "{err}");
}

#[test]
fn ensure_uses_an_empty_directory_and_refuses_one_with_files() {
    let fx = fixture();
    let a = agent(&fx, "a");
    fs::create_dir_all(&a.path).unwrap();
    assert!(ensure(&a.checkout()).unwrap());
    assert!(a.path.join("README").exists());

    let b = agent(&fx, "b");
    write(&b.path.join("mine.txt"), "keep\n");
    let err = ensure(&b.checkout()).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_PATH_IN_USE", "{err}");
    assert_eq!(
        fs::read_to_string(b.path.join("mine.txt")).unwrap(),
        "keep\n"
    );
    assert!(git(&fx.repo, &["branch", "--list", "agent/b"]).is_empty());
}

#[test]
fn ensure_recreates_a_checkout_deleted_by_hand_with_its_commits() {
    let fx = fixture();
    let a = agent(&fx, "a");
    let sha = checkout_with_a_commit(&a);
    fs::remove_dir_all(&a.path).unwrap();
    assert!(ensure(&a.checkout()).unwrap());
    assert_eq!(git(&a.path, &["rev-parse", "HEAD"]), sha);
    assert!(a.path.join("feature.txt").exists());
}

#[test]
fn ensure_refuses_a_checkout_switched_to_another_branch_and_keeps_a_detached_one() {
    let fx = fixture();
    let a = agent(&fx, "a");
    ensure(&a.checkout()).unwrap();
    git(&a.path, &["switch", "-q", "-c", "other"]);
    let err = ensure(&a.checkout()).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_PATH_IN_USE", "{err}");
    assert!(err.to_string().contains("\"other\""), "{err}");

    git(&a.path, &["switch", "-q", "--detach"]);
    assert!(!ensure(&a.checkout()).unwrap());
    assert_eq!(git(&a.path, &["rev-parse", "--abbrev-ref", "HEAD"]), "HEAD");
}

/// Every file and directory under `dir` owned by `uid` (links not followed).
fn owned_by(dir: &Path, uid: u32) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let meta = fs::symlink_metadata(dir).unwrap();
    if meta.uid() == uid {
        found.push(dir.to_path_buf());
    }
    if meta.is_dir() {
        for entry in fs::read_dir(dir).unwrap() {
            found.extend(owned_by(&entry.unwrap().path(), uid));
        }
    }
    found
}

#[test]
fn ensure_as_root_gives_what_it_creates_to_the_repository_owner() {
    let fx = fixture();
    if fs::metadata(&fx.repo).unwrap().uid() != 0 {
        eprintln!("skipped: not running as root");
        return;
    }
    let status = Command::new("chown")
        .args(["-R", "4242:4343"])
        .arg(&fx.repo)
        .status()
        .unwrap();
    assert!(status.success());
    let a = agent(&fx, "a");
    assert!(ensure(&a.checkout()).unwrap());
    assert!(
        owned_by(&a.path, 0).is_empty(),
        "{:?}",
        owned_by(&a.path, 0)
    );
    let meta = fs::metadata(a.path.join("README")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (4242, 4343));
    let git_dir = fx.repo.join(".git");
    assert!(
        owned_by(&git_dir, 0).is_empty(),
        "{:?}",
        owned_by(&git_dir, 0)
    );
    let ref_file = fs::metadata(git_dir.join("refs/heads/agent/a")).unwrap();
    assert_eq!((ref_file.uid(), ref_file.gid()), (4242, 4343));
}

/// A checkout with two commits and uncommitted work: see the assertions.
fn worked_checkout(fx: &Fixture) -> Agent {
    let a = agent(fx, "a");
    ensure(&a.checkout()).unwrap();
    set_identity(&a.path);
    write(&a.path.join(".gitignore"), "*.log\n");
    write(&a.path.join("src/lib.rs"), "lib 1\nlib 2\nlib 3\n");
    write(&a.path.join("README"), "one\nthree\n");
    commit_all(&a.path, "add lib");
    write(&a.path.join("with space.txt"), "s1\ns2\n");
    commit_all(&a.path, "add spaced");
    write(
        &a.path.join("notes new.txt"),
        "note 1\nnote 2\nnote 3\nnote 4\n",
    );
    write(&a.path.join("src/lib.rs"), "lib 1\nlib 2\nlib 3\nlib 4\n");
    write(&a.path.join("debug.log"), "ignored\n");
    a
}

#[test]
fn changes_reports_committed_and_untracked_files_apart() {
    let fx = fixture();
    let a = worked_checkout(&fx);
    let index = index_bytes(&a.path);
    let found = changes(&a.checkout(), false).unwrap();
    assert_eq!(found.branch, "agent/a");
    assert_eq!(found.base, "main");
    assert_eq!(found.head, git(&a.path, &["rev-parse", "HEAD"]));
    assert_eq!(found.merge_base, git(&fx.repo, &["rev-parse", "main"]));
    let commits: Vec<_> = found.commits.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(commits, ["add spaced", "add lib"]);
    assert_eq!(found.commits[0].sha, found.head);
    assert_eq!(
        found.committed,
        [
            change(".gitignore", Some(1), Some(0), "added"),
            change("README", Some(1), Some(1), "modified"),
            change("src/lib.rs", Some(3), Some(0), "added"),
            change("with space.txt", Some(2), Some(0), "added"),
        ]
    );
    assert_eq!(
        found.uncommitted,
        [
            change("notes new.txt", Some(4), Some(0), "untracked"),
            change("src/lib.rs", Some(1), Some(0), "modified"),
        ]
    );
    assert_eq!(found.diff, None);
    assert_eq!(index_bytes(&a.path), index, "the agent's index was written");
    assert!(git(&a.path, &["status", "--porcelain"]).contains("?? \"notes new.txt\""));
}

#[test]
fn changes_full_diff_has_the_committed_and_the_untracked_lines() {
    let fx = fixture();
    let a = worked_checkout(&fx);
    let index = index_bytes(&a.path);
    let diff = changes(&a.checkout(), true).unwrap().diff.unwrap();
    for line in ["+lib 3", "+s2", "-two", "+three", "b/with space.txt"] {
        assert!(
            diff.committed.contains(line),
            "{line:?} in\n{}",
            diff.committed
        );
    }
    assert!(!diff.committed.contains("note 1"));
    for line in ["+note 4", "b/notes new.txt", "new file mode", "+lib 4"] {
        assert!(
            diff.uncommitted.contains(line),
            "{line:?} in\n{}",
            diff.uncommitted
        );
    }
    assert!(!diff.uncommitted.contains("ignored"));
    assert!(!diff.uncommitted.contains("+s2"));
    assert_eq!(index_bytes(&a.path), index, "the agent's index was written");
}

#[test]
fn changes_reports_renamed_deleted_and_binary_files() {
    let fx = fixture();
    let a = agent(&fx, "a");
    ensure(&a.checkout()).unwrap();
    set_identity(&a.path);
    git(&a.path, &["mv", "README", "README.md"]);
    fs::write(a.path.join("logo.bin"), b"\x00\x01\x02binary").unwrap();
    commit_all(&a.path, "rename and logo");
    fs::remove_file(a.path.join("LICENSE")).unwrap();
    fs::write(a.path.join("data.bin"), b"\x00\xffdata").unwrap();
    let found = changes(&a.checkout(), false).unwrap();
    assert_eq!(
        found.committed,
        [
            change("README.md", Some(0), Some(0), "renamed"),
            change("logo.bin", None, None, "added"),
        ]
    );
    assert_eq!(
        found.uncommitted,
        [
            change("LICENSE", Some(0), Some(1), "deleted"),
            change("data.bin", None, None, "untracked"),
        ]
    );
}

#[test]
fn dirty_files_lists_changed_and_untracked_files_not_ignored_ones() {
    let fx = fixture();
    let a = worked_checkout(&fx);
    write(&a.path.join("new dir/inner.txt"), "x\n");
    git(&a.path, &["mv", "with space.txt", "moved.txt"]);
    let mut files = dirty_files(&a.path).unwrap();
    files.sort();
    assert_eq!(
        files,
        [
            "moved.txt",
            "new dir/inner.txt",
            "notes new.txt",
            "src/lib.rs"
        ]
    );
}

#[test]
fn changes_and_dirty_files_need_a_checkout() {
    let fx = fixture();
    let a = agent(&fx, "a");
    assert_eq!(
        dirty_files(&a.path).unwrap_err().code(),
        "WORKSPACE_MISSING"
    );
    assert_eq!(
        changes(&a.checkout(), false).unwrap_err().code(),
        "WORKSPACE_MISSING"
    );
}

#[test]
fn remove_refuses_a_dirty_checkout_unless_forced_and_keeps_the_branch() {
    let fx = fixture();
    let a = agent(&fx, "a");
    let sha = checkout_with_a_commit(&a);
    write(&a.path.join("wip file.txt"), "unsaved\n");

    let err = remove(&a.checkout(), false).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_DIRTY", "{err}");
    assert!(err.to_string().contains("wip file.txt"), "{err}");
    match &err {
        WorkspaceError::Dirty { files, .. } => assert_eq!(files, &["wip file.txt"]),
        other => panic!("{other:?}"),
    }
    assert!(a.path.join("wip file.txt").exists());

    remove(&a.checkout(), true).unwrap();
    assert!(!a.path.exists());
    assert_eq!(git(&fx.repo, &["rev-parse", "agent/a"]), sha);
    let listed = git(&fx.repo, &["worktree", "list", "--porcelain"]);
    assert!(!listed.contains("agent/a"), "{listed}");

    let err = remove(&a.checkout(), false).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_MISSING", "{err}");
}

#[test]
fn remove_deletes_a_clean_checkout_which_ensure_brings_back() {
    let fx = fixture();
    let a = agent(&fx, "a");
    ensure(&a.checkout()).unwrap();
    write(&a.path.join("build.log"), "ignored files do not count\n");
    write(&a.path.join(".gitignore"), "*.log\n");
    set_identity(&a.path);
    let sha = commit_all(&a.path, "ignore logs");
    remove(&a.checkout(), false).unwrap();
    assert!(!a.path.exists());
    assert!(ensure(&a.checkout()).unwrap());
    assert_eq!(git(&a.path, &["rev-parse", "HEAD"]), sha);
}

#[test]
fn parse_list_reads_branches_detached_and_bare_entries() {
    let text = "worktree /srv/app\nHEAD 1111\nbranch refs/heads/main\n\n\
                worktree /data/agents/a/workspace\nHEAD 2222\nbranch refs/heads/agent/a\n\n\
                worktree /data/agents/b/workspace\nHEAD 3333\ndetached\nlocked\n\n";
    let entry = |path: &str, branch: Option<&str>| Worktree {
        path: path.into(),
        branch: branch.map(Into::into),
    };
    assert_eq!(
        parse_list(text),
        [
            entry("/srv/app", Some("main")),
            entry("/data/agents/a/workspace", Some("agent/a")),
            entry("/data/agents/b/workspace", None),
        ]
    );
    assert_eq!(
        parse_list("worktree /srv/app.git\nbare\n"),
        [entry("/srv/app.git", None)]
    );
}

#[test]
fn parsers_read_renames_binaries_and_spaces_in_z_output() {
    let numstat = b"1\t2\ta b.txt\x00-\t-\tlogo.bin\x000\t0\t\x00old name\x00new name\x00";
    let counts = parse_numstat(numstat);
    assert_eq!(counts["a b.txt"], (Some(1), Some(2)));
    assert_eq!(counts["logo.bin"], (None, None));
    assert_eq!(counts["new name"], (Some(0), Some(0)));
    assert_eq!(counts.len(), 3);

    let statuses = b"M\x00a b.txt\x00R100\x00old name\x00new name\x00D\x00gone\x00T\x00link\x00";
    assert_eq!(
        parse_name_status(statuses),
        [
            ("modified", "a b.txt".to_string()),
            ("renamed", "new name".to_string()),
            ("deleted", "gone".to_string()),
            ("modified", "link".to_string()),
        ]
    );

    let status = b" M a b.txt\x00R  new\x00old\x00?? x y\x00";
    assert_eq!(parse_status(status), ["a b.txt", "new", "x y"]);
}

#[test]
fn error_codes_are_stable() {
    let path = PathBuf::from("/x");
    let cases = [
        (
            WorkspaceError::NotARepo {
                path: path.clone(),
                detail: String::new(),
            },
            "WORKSPACE_NOT_A_REPO",
        ),
        (
            WorkspaceError::NoSuchBase {
                repo: path.clone(),
                base: "b".into(),
            },
            "WORKSPACE_NO_BASE",
        ),
        (
            WorkspaceError::BranchCheckedOutElsewhere {
                branch: "b".into(),
                path: path.clone(),
            },
            "WORKSPACE_BRANCH_IN_USE",
        ),
        (
            WorkspaceError::Dirty {
                path: path.clone(),
                files: vec![],
            },
            "WORKSPACE_DIRTY",
        ),
        (
            WorkspaceError::WorkspaceMissing { path: path.clone() },
            "WORKSPACE_MISSING",
        ),
        (
            WorkspaceError::PathInUse {
                path,
                detail: String::new(),
            },
            "WORKSPACE_PATH_IN_USE",
        ),
        (
            WorkspaceError::NotWritable {
                path: "/x".into(),
                reason: String::new(),
                fix: String::new(),
            },
            "WORKSPACE_NOT_WRITABLE",
        ),
        (
            WorkspaceError::Git {
                args: String::new(),
                stderr: String::new(),
            },
            "GIT_FAILED",
        ),
    ];
    for (err, code) in cases {
        assert_eq!(err.code(), code, "{err}");
    }
}

#[test]
fn dirty_lists_at_most_ten_files_in_its_message() {
    let files: Vec<String> = (0..12).map(|n| format!("f{n}")).collect();
    let err = WorkspaceError::Dirty {
        path: "/x".into(),
        files,
    };
    let text = err.to_string();
    assert!(text.contains("f9 and 2 more"), "{text}");
    assert!(!text.contains("f10"), "{text}");
}

#[test]
fn a_prune_where_the_checkout_is_not_seen_keeps_it() {
    let fx = fixture();
    let a = agent(&fx, "a");
    let sha = checkout_with_a_commit(&a);
    // Another agent's container sees the repository's git directory, not this checkout: its
    // `git worktree prune` finds the checkout's path missing.
    let aside = fx.data.join("aside");
    fs::rename(&a.path, &aside).unwrap();
    git(&fx.repo, &["worktree", "prune"]);
    fs::rename(&aside, &a.path).unwrap();
    assert_eq!(
        git(&a.path, &["rev-parse", "HEAD"]),
        sha,
        "the checkout still works"
    );
    assert!(!ensure(&a.checkout()).unwrap(), "kept as it is");

    // Deleted by hand: the next ensure checks the branch out again.
    fs::remove_dir_all(&a.path).unwrap();
    assert!(ensure(&a.checkout()).unwrap());
    assert_eq!(git(&a.path, &["rev-parse", "HEAD"]), sha);
    remove(&a.checkout(), false).unwrap();
    assert!(!a.path.exists());
    assert!(git(&fx.repo, &["worktree", "list"]).lines().count() == 1);
}

#[test]
fn an_image_user_is_read_as_docker_reads_it() {
    for (text, shown) in [
        ("", "root"),
        ("root", "root"),
        ("0", "0"),
        ("agent", "agent"),
        ("1000", "1000"),
        ("1000:1000", "1000:1000"),
        ("agent:staff", "agent:staff"),
    ] {
        assert_eq!(AgentUser::parse(text).to_string(), shown, "{text:?}");
    }
}

/// Who may write what: the image's user against the owner and mode of the repository's git
/// directory.
#[test]
fn the_agent_works_where_the_repository_lets_its_user_write() {
    use super::access::{decide, RepoMode};
    const AS_MADE: Option<Access> = Some(Access::AsMade);
    const REFUSED: Option<Access> = None;
    let open = |bits| Some(Access::Open(bits));
    let repo = |uid, gid, mode| RepoMode { uid, gid, mode };
    let cases = [
        // Root in the container writes anything.
        ("", repo(0, 0, 0o755), AS_MADE),
        ("root", repo(1000, 1000, 0o700), AS_MADE),
        ("0:0", repo(0, 0, 0o755), AS_MADE),
        // The reported case: root's repository open to all, the image's user uid 1000.
        ("agent", repo(0, 0, 0o777), open(0o077)),
        ("1000", repo(0, 0, 0o777), open(0o077)),
        ("1000:1000", repo(0, 0, 0o757), open(0o057)),
        // Root's repository only root may write: refused before anything is made.
        ("agent", repo(0, 0, 0o755), REFUSED),
        ("1000:1000", repo(0, 0, 0o755), REFUSED),
        // Group-writable: its group works, another group is refused, an unknown one is tried.
        ("1000:50", repo(0, 50, 0o775), open(0o075)),
        ("1000:1000", repo(0, 50, 0o775), REFUSED),
        ("agent", repo(0, 50, 0o775), open(0o075)),
        ("agent:staff", repo(0, 50, 0o775), open(0o075)),
        ("1000:root", repo(0, 0, 0o775), open(0o075)),
        // The owner writes its own repository as made.
        ("1000", repo(1000, 1000, 0o755), AS_MADE),
        ("1000:1000", repo(1000, 1000, 0o700), AS_MADE),
        // Another user's repository: refused unless open.
        ("1001", repo(1000, 1000, 0o755), REFUSED),
        ("1001", repo(1000, 1000, 0o777), open(0o077)),
        // A named user may be the owner of a repository that is not root's: as made, or
        // opened when the repository is open anyway.
        ("agent", repo(1000, 1000, 0o755), AS_MADE),
        ("agent", repo(1000, 1000, 0o777), open(0o077)),
    ];
    for (user, mode, want) in cases {
        assert_eq!(
            decide(mode, &AgentUser::parse(user)),
            want,
            "{user:?} on {mode:?}"
        );
    }
}

/// The repository's bits for group and others added: `rw`, and `x` on directories and on
/// files something may execute; never one taken away.
#[test]
fn opening_adds_the_repository_bits_and_x_only_where_it_belongs() {
    use super::open::widened;
    let cases = [
        (0o644, false, 0o077, 0o666),
        (0o755, false, 0o077, 0o777),
        (0o700, false, 0o077, 0o777),
        (0o755, true, 0o077, 0o777),
        (0o644, false, 0o075, 0o664),
        (0o755, true, 0o075, 0o775),
        (0o600, false, 0o057, 0o646),
        (0o666, false, 0o000, 0o666),
        (0o4755, false, 0o077, 0o4777),
    ];
    for (mode, is_dir, bits, want) in cases {
        assert_eq!(
            widened(mode, is_dir, bits),
            want,
            "{mode:o} dir={is_dir} bits={bits:o}"
        );
    }
}

/// Every file and directory under `dir` (links not followed) whose mode lacks `bits`.
fn lacking(dir: &Path, bits: u32) -> Vec<(PathBuf, u32)> {
    let mut found = Vec::new();
    let meta = fs::symlink_metadata(dir).unwrap();
    if meta.mode() & bits != bits {
        found.push((dir.to_path_buf(), meta.mode() & 0o7777));
    }
    if meta.is_dir() {
        for entry in fs::read_dir(dir).unwrap() {
            found.extend(lacking(&entry.unwrap().path(), bits));
        }
    }
    found
}

fn chmod(path: &Path, mode: &str) {
    let ok = Command::new("chmod")
        .args(["-R", mode])
        .arg(path)
        .status()
        .unwrap();
    assert!(ok.success());
}

/// A user that is not the fixture repository's owner (nor root).
fn another_user(fx: &Fixture) -> AgentUser {
    let owner = fs::metadata(fx.repo.join(".git")).unwrap().uid();
    AgentUser::parse(&format!("{}", owner.max(999) + 1))
}

#[test]
fn a_repository_open_to_all_gives_a_checkout_open_to_all() {
    let fx = fixture();
    chmod(&fx.repo, "a+rwX");
    let a = agent(&fx, "a");
    let repo = prepare(&a.checkout(), &another_user(&fx), "img").unwrap();
    assert_eq!(
        repo.common_dir,
        fx.repo.join(".git").canonicalize().unwrap()
    );
    let git_dir = fx.repo.join(".git");
    // Files rw for all, directories rwx: the checkout, its admin dir, the branch's ref and
    // reflog and the directories made for them.
    for dir in [
        a.path.clone(),
        git_dir.join("worktrees/workspace"),
        git_dir.join("refs/heads/agent"),
        git_dir.join("logs/refs/heads/agent"),
    ] {
        assert!(dir.exists(), "{}", dir.display());
        assert_eq!(lacking(&dir, 0o666), [], "{}", dir.display());
    }
    let mode = |p: &Path| fs::metadata(p).unwrap().mode() & 0o777;
    assert_eq!(mode(&a.path.join("README")), 0o666);
    assert_eq!(mode(&git_dir.join("refs/heads/agent")), 0o777);

    // A checkout kept from before is opened at the next start.
    chmod(&a.path, "go-w");
    assert_ne!(lacking(&a.path, 0o666), []);
    prepare(&a.checkout(), &another_user(&fx), "img").unwrap();
    assert_eq!(lacking(&a.path, 0o666), []);
}

#[test]
fn a_repository_the_agent_cannot_write_is_refused_before_anything_is_made() {
    let fx = fixture();
    chmod(&fx.repo, "go-w");
    let a = agent(&fx, "a");
    let user = another_user(&fx);
    let err = prepare(&a.checkout(), &user, "agent-hub/agent").unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_NOT_WRITABLE", "{err}");
    let text = err.to_string();
    let repo = fx.repo.canonicalize().unwrap().display().to_string();
    for part in [
        format!("user '{user}' (image agent-hub/agent)"),
        format!("cannot write {repo}"),
        "mode 755".into(),
        format!("chown -R {user} {repo}"),
        format!("chmod -R a+rwX {repo}"),
        "image whose user is root".into(),
    ] {
        assert!(text.contains(&part), "{part:?} not in: {text}");
    }
    assert!(!a.path.exists(), "no checkout");
    assert_eq!(git(&fx.repo, &["branch", "--list", "agent/*"]), "");

    // Its owner (and root) work in it as made.
    let owner = fs::metadata(fx.repo.join(".git")).unwrap().uid();
    let as_owner = prepare(&a.checkout(), &AgentUser::parse(&owner.to_string()), "img");
    assert!(as_owner.is_ok(), "{as_owner:?}");
    let mode = fs::metadata(a.path.join("README")).unwrap().mode() & 0o777;
    assert_eq!(mode & 0o022, 0, "not opened: {mode:o}");
}

#[test]
fn a_named_user_is_told_how_to_find_its_ids() {
    let fx = fixture();
    chmod(&fx.repo, "go-w");
    if fs::metadata(fx.repo.join(".git")).unwrap().uid() != 0 {
        eprintln!("skipped: not running as root (a named user may own the repository)");
        return;
    }
    let a = agent(&fx, "a");
    let err = prepare(&a.checkout(), &AgentUser::parse("agent"), "img").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("belongs to root (group 0, mode 755)")
            && text.contains("`docker run --rm --entrypoint id img`"),
        "{text}"
    );
}

/// `merge_tree` says whether a branch merges cleanly and names the conflicting files, and
/// touches no ref, index or work tree.
#[test]
fn merge_tree_names_conflicts_without_touching_anything() {
    let f = fixture();
    git(&f.repo, &["switch", "-q", "-c", "clean"]);
    write(&f.repo.join("NEW"), "new\n");
    commit_all(&f.repo, "adds NEW");
    git(&f.repo, &["switch", "-q", "-c", "clash", "main"]);
    write(&f.repo.join("README"), "one\nTWO from clash\n");
    commit_all(&f.repo, "README on clash");
    git(&f.repo, &["switch", "-q", "main"]);
    write(&f.repo.join("README"), "one\nTWO from main\n");
    commit_all(&f.repo, "README on main");
    let before = git(&f.repo, &["show-ref"]);
    let status = git(&f.repo, &["status", "--porcelain"]);

    let clean = merge_tree(&f.repo, "main", "clean").unwrap();
    assert!(clean.is_clean(), "{clean:?}");
    let files = git(&f.repo, &["ls-tree", "--name-only", &clean.tree]);
    assert_eq!(files, "LICENSE\nNEW\nREADME");

    let clash = merge_tree(&f.repo, "main", "clash").unwrap();
    assert_eq!(clash.conflicts, vec!["README".to_string()]);
    let merged = git(&f.repo, &["show", &format!("{}:README", clash.tree)]);
    assert!(
        merged.contains("<<<<<<<") && merged.contains("TWO from clash"),
        "{merged}"
    );

    assert_eq!(git(&f.repo, &["show-ref"]), before);
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), status);
    let bad = merge_tree(&f.repo, "main", "no-such-branch").unwrap_err();
    assert_eq!(bad.code(), "GIT_FAILED");
}

mod land;
