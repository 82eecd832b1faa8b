//! What a new checkout gets besides its tracked files: the untracked files `include` and
//! `.worktreeinclude` name, and its submodules; and a checkout of a branch that exists.

use std::os::unix::fs::PermissionsExt;

use super::*;

/// An agent whose new checkouts get the files `include` names.
fn checkout_including<'a>(a: &'a Agent, include: &'a [String]) -> Checkout<'a> {
    Checkout {
        include,
        ..a.checkout()
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_new_checkout_gets_the_untracked_files_its_patterns_name_and_keeps_its_own() {
    let fx = fixture();
    let r = &fx.repo;
    write(
        &r.join(".gitignore"),
        ".env\nconfig/local.*\nsecret.key\nbuild/\n",
    );
    // Tracked on the agent's branch (made below): the user's untracked copy must not win.
    write(&r.join("keep/local.conf"), "from the branch\n");
    write(&r.join("env"), "a file on the branch\n");
    commit_all(r, "ignore local files");
    git(r, &["branch", "agent/inc"]);
    git(r, &["rm", "-q", "--cached", "keep/local.conf"]);
    git(r, &["rm", "-q", "env"]);
    git(
        r,
        &["commit", "-q", "-m", "untrack keep/local.conf, remove env"],
    );
    write(&r.join("keep/local.conf"), "the user's\n");
    // A directory where the branch has a file.
    write(&r.join("env/.env"), "IN_A_DIRECTORY=1\n");
    write(&r.join(".env"), "TOKEN=1\n");
    fs::set_permissions(r.join(".env"), fs::Permissions::from_mode(0o600)).unwrap();
    write(&r.join("api/.env"), "NESTED=1\n");
    write(&r.join("config/local.toml"), "debug = true\n");
    write(&r.join("config/other.toml"), "not named\n");
    write(&r.join("secret.key"), "k\n");
    write(&r.join("build/out.bin"), "not named\n");
    std::os::unix::fs::symlink("config/local.toml", r.join("local-link")).unwrap();
    write(
        &r.join(INCLUDE_FILE),
        "# more files for new checkouts\nsecret.key\n\nlocal-link\n",
    );

    let a = agent(&fx, "inc");
    let include = vec![".env".to_string(), "config/local.*".into(), "keep/*".into()];
    assert!(ensure(&checkout_including(&a, &include)).unwrap());
    let p = &a.path;
    assert_eq!(read(&p.join(".env")), "TOKEN=1\n");
    let mode = fs::metadata(p.join(".env")).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600, "its mode is kept");
    assert_eq!(
        read(&p.join("api/.env")),
        "NESTED=1\n",
        "`.env` at any depth"
    );
    assert_eq!(read(&p.join("config/local.toml")), "debug = true\n");
    assert_eq!(read(&p.join("secret.key")), "k\n", "from .worktreeinclude");
    assert_eq!(
        fs::read_link(p.join("local-link")).unwrap(),
        Path::new("config/local.toml"),
        "a link stays a link"
    );
    assert!(!p.join("config/other.toml").exists());
    assert!(!p.join("build").exists());
    assert_eq!(
        read(&p.join("keep/local.conf")),
        "from the branch\n",
        "a file the checkout has is not overwritten"
    );
    assert_eq!(read(&p.join("env")), "a file on the branch\n");
    // The copies are ignored there as in the user's work tree: nothing new to commit but the
    // link (which the repository does not ignore).
    assert_eq!(git(p, &["status", "--porcelain"]), "?? local-link");

    // Only a new checkout: an existing one is kept as it is.
    fs::remove_file(p.join(".env")).unwrap();
    assert!(!ensure(&checkout_including(&a, &include)).unwrap());
    assert!(!p.join(".env").exists());
}

/// A repository `lib` next to `app`, added to it as the submodule `lib` (`url = ../lib`).
fn with_a_submodule(fx: &Fixture) {
    let lib = fx.repo.parent().unwrap().join("lib");
    fs::create_dir(&lib).unwrap();
    git(&lib, &["init", "-q", "-b", "main"]);
    set_identity(&lib);
    write(&lib.join("lib.txt"), "the library\n");
    commit_all(&lib, "lib");
    git(
        &fx.repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            "../lib",
            "lib",
        ],
    );
    commit_all(&fx.repo, "add lib");
    // Another user's, as a user's repository is to a hub running as root.
    if fs::metadata(&lib).unwrap().uid() == 0 {
        let ok = Command::new("chown")
            .args(["-R", "1000:1000"])
            .arg(&lib)
            .status();
        assert!(ok.unwrap().success());
    }
}

#[test]
fn a_new_checkout_has_its_submodules() {
    let fx = fixture();
    with_a_submodule(&fx);
    let a = agent(&fx, "sub");
    assert!(ensure(&a.checkout()).unwrap());
    assert_eq!(read(&a.path.join("lib/lib.txt")), "the library\n");
    assert_eq!(git(&a.path, &["status", "--porcelain"]), "");
}

#[test]
fn local_submodules_of_a_gitmodules_the_base_does_not_have_are_refused_and_nothing_is_left() {
    let fx = fixture();
    with_a_submodule(&fx);
    // The agent's branch points the submodule somewhere else on the machine.
    let other = fx.repo.parent().unwrap().join("elsewhere");
    fs::create_dir(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    set_identity(&other);
    write(&other.join("private.txt"), "not for the agent\n");
    commit_all(&other, "private");
    git(&fx.repo, &["switch", "-q", "-c", "agent/sub"]);
    git(
        &fx.repo,
        &[
            "config",
            "-f",
            ".gitmodules",
            "submodule.lib.url",
            "../elsewhere",
        ],
    );
    commit_all(&fx.repo, "point lib elsewhere");
    git(&fx.repo, &["switch", "-q", "main"]);

    let a = agent(&fx, "sub");
    let e = ensure(&a.checkout()).unwrap_err();
    assert_eq!(e.code(), "GIT_FAILED", "{e}");
    assert!(
        e.to_string().contains("transport 'file' not allowed"),
        "{e}"
    );
    assert!(!a.path.exists(), "the half-made checkout is removed");
    assert!(!git(&fx.repo, &["worktree", "list"]).contains("agents/sub"));
}

#[test]
fn an_existing_branch_is_checked_out_with_its_commits_against_the_base() {
    let fx = fixture();
    git(&fx.repo, &["switch", "-q", "-c", "feature/x"]);
    write(&fx.repo.join("x.txt"), "x\n");
    let tip = commit_all(&fx.repo, "x");
    git(&fx.repo, &["switch", "-q", "main"]);
    let main = git(&fx.repo, &["rev-parse", "main"]);

    let a = Agent {
        branch: "feature/x".into(),
        ..agent(&fx, "fx")
    };
    assert!(ensure(&a.checkout()).unwrap());
    assert_eq!(git(&a.path, &["rev-parse", "HEAD"]), tip);
    assert_eq!(
        git(&a.path, &["symbolic-ref", "--short", "HEAD"]),
        "feature/x"
    );
    let c = changes(&a.checkout(), false).unwrap();
    assert_eq!((c.branch.as_str(), c.base.as_str()), ("feature/x", "main"));
    assert_eq!(c.merge_base, main);
    assert_eq!(c.commits.len(), 1);
    assert_eq!(c.committed[0].path, "x.txt");
}

#[test]
fn include_patterns_that_cannot_work_are_named() {
    for good in [
        ".env",
        "/.env",
        "config/local.*",
        "secrets/",
        "**/*.pem",
        "!keep.env",
    ] {
        assert_eq!(pattern_problem(good), None, "{good}");
    }
    for (bad, why) in [
        ("", "empty"),
        ("  ", "empty"),
        ("# .env", "comment"),
        ("../other/.env", "'..'"),
        ("a/../../b", "'..'"),
        ("a\nb", "line break"),
        ("/", "nothing"),
    ] {
        let problem = pattern_problem(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
        assert!(problem.contains(why), "{bad:?}: {problem}");
    }
}
