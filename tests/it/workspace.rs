//! A workspace per agent: two container agents on one host repository, each on a checkout of
//! its own (a git worktree on branch `agent/<id>`) mounted at its workdir. Real git in real
//! containers; the host repository is read with the host's git. And the workspace
//! definitions that cannot work are refused at load, at `hub.toml:LINE:COL`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::cli::BIN;
use crate::docker_support::{agent_toml, hub_with_agents};
use crate::require_docker;
use crate::support::TestHub;

/// Runs git in `dir`, panicking on failure; returns stdout.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "safe.directory=*",
            "-c",
            "user.name=Host",
            "-c",
            "user.email=h@x",
        ])
        .args(args)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository with one commit on `main`, owned by the agents' user (uid 1000 in the test
/// image), as a user's own repository is on a machine where they are uid 1000.
pub(crate) fn user_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("README.md"), "the app\n").unwrap();
    git(dir.path(), &["add", "README.md"]);
    git(dir.path(), &["commit", "-qm", "Start"]);
    git(dir.path(), &["config", "user.name", "Agent"]);
    git(dir.path(), &["config", "user.email", "agent@example.com"]);
    give_to_the_image_user(dir.path());
    dir
}

/// When the tests run as root: gives `dir` and all in it to uid 1000 (the test image's user),
/// as a user's own files are on a machine where they are uid 1000.
pub(crate) fn give_to_the_image_user(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata(dir).unwrap().uid() == 0 {
        let ok = Command::new("chown")
            .args(["-R", "1000:1000"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

pub(crate) async fn session_of(hub: &TestHub, agent: &str) -> String {
    let (status, v) = hub
        .post(&format!("/v1/agents/{agent}/start"), serde_json::json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    v["agent"]["session_id"].as_str().unwrap().to_string()
}

/// Has agent `me` commit `<me>.txt` (in its terminal, in its workspace).
pub(crate) async fn commit_a_file(hub: &TestHub, sid: &str, me: &str) {
    let line =
        format!("echo from {me} > {me}.txt && git add {me}.txt && git commit -qm 'Add {me}.txt'");
    run(hub, sid, &line).await;
}

pub(crate) async fn run(hub: &TestHub, sid: &str, command: &str) -> String {
    let v = hub.talk(sid, command).await;
    assert_eq!(v["exit_code"], 0, "{command}: {v}");
    v["output"].as_str().unwrap().to_string()
}

/// `agent-hub ARGS` against the test hub.
fn agent_hub_cli(hub: &TestHub, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .args(["--hub", &hub.base, "--token", &hub.owner_token])
        .output()
        .unwrap()
}

pub(crate) fn names(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["status"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_on_one_repository_commit_on_their_own_branches() {
    require_docker!();
    let repo = user_repo();
    let ws = format!(
        "workspace = {{ repo = \"{}\", base = \"main\" }}",
        repo.path().display()
    );
    let agents = format!(
        "{}{}",
        agent_toml("w1", &format!("{ws}\nteam = \"a\"")),
        agent_toml(
            "w2",
            &format!("{ws}\nteam = \"a\"\nowner_role = \"leader\"")
        ),
    );
    let (hub, _guard) = hub_with_agents(&agents).await;
    let (s1, s2) = (session_of(&hub, "w1").await, session_of(&hub, "w2").await);

    // git works in the container exactly as on the host: status, commit, log.
    for (sid, me) in [(&s1, "w1"), (&s2, "w2")] {
        let status = run(&hub, sid, "cd /workspace && git status --short --branch").await;
        assert!(status.starts_with(&format!("## agent/{me}")), "{status}");
        commit_a_file(&hub, sid, me).await;
        let log = run(&hub, sid, "git --no-pager log --format=%s").await;
        assert_eq!(log, format!("Add {me}.txt\nStart\n"));
    }
    // Neither checkout has the other's file, and an uncommitted file stays where it was made.
    run(&hub, &s1, "echo draft > notes.txt").await;
    assert_eq!(
        run(&hub, &s1, "ls -1").await,
        "README.md\nnotes.txt\nw1.txt\n"
    );
    assert_eq!(run(&hub, &s2, "ls -1").await, "README.md\nw2.txt\n");

    // The commits are on the branches of the user's repository, nothing copied back.
    for me in ["w1", "w2"] {
        let log = git(repo.path(), &["log", "--format=%s", &format!("agent/{me}")]);
        assert_eq!(log, format!("Add {me}.txt\nStart\n"));
    }
    assert_eq!(
        git(repo.path(), &["status", "--short"]),
        "",
        "the user's checkout is untouched"
    );

    // Its changes in view: committed and uncommitted apart.
    let (status, v) = hub.get("/v1/agents/w1/changes").await;
    assert_eq!(status, 200, "{v}");
    let c = &v["changes"];
    assert_eq!(
        (c["branch"].as_str(), c["base"].as_str()),
        (Some("agent/w1"), Some("main"))
    );
    assert_eq!(names(&c["committed"]), [("w1.txt".into(), "added".into())]);
    assert_eq!(c["committed"][0]["added"], 1);
    assert_eq!(c["commits"][0]["subject"], "Add w1.txt");
    assert_eq!(
        names(&c["uncommitted"]),
        [("notes.txt".into(), "untracked".into())]
    );
    assert!(c.get("diff").is_none(), "{c}");
    let (_, full) = hub.get("/v1/agents/w1/changes?full=true").await;
    let diff = &full["changes"]["diff"];
    assert!(
        diff["committed"].as_str().unwrap().contains("+from w1"),
        "{diff}"
    );
    assert!(
        diff["uncommitted"].as_str().unwrap().contains("+draft"),
        "{diff}"
    );

    // Through MCP (k_agents changes), and within a team's scope: the leader sees its worker's
    // changes, the worker not its leader's.
    let mcp = crate::mcp::http_client(&hub, &hub.owner_token).await;
    let v = crate::mcp::ok(
        &mcp,
        "k_agents",
        serde_json::json!({"action": "changes", "agent_id": "w2", "full": true}),
    )
    .await;
    assert_eq!(
        names(&v["changes"]["committed"]),
        [("w2.txt".into(), "added".into())]
    );
    assert!(
        v["changes"]["diff"]["committed"]
            .as_str()
            .unwrap()
            .contains("+from w2"),
        "{v}"
    );
    let token = |id: &str| {
        std::fs::read_to_string(hub.data_dir().join(format!("agents/{id}/token"))).unwrap()
    };
    let as_agent = |id: &str, path: &str| {
        let http = crate::support::authed_http(token(id).trim());
        let url = format!("{}{path}", hub.base);
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(as_agent("w2", "/v1/agents/w1/changes").await, 200);
    assert_eq!(as_agent("w1", "/v1/agents/w1/changes").await, 200);
    let refused = as_agent("w1", "/v1/agents/w2/changes").await;
    assert!(
        matches!(refused, 403 | 404),
        "a worker read its leader's changes: {refused}"
    );

    // The same from the command line.
    let out = agent_hub_cli(&hub, &["diff", "w2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("w2: branch agent/w2 at "), "{text}");
    assert!(
        text.contains("Add w2.txt") && text.contains("added     w2.txt"),
        "{text}"
    );
    assert!(text.contains("uncommitted: 0 files"), "{text}");

    // Removing a checkout: not while the agent runs, not with uncommitted changes (unless
    // forced); the branch stays.
    let (status, v) = hub.delete("/v1/agents/w1/workspace").await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("AGENT_RUNNING")),
        "{v}"
    );
    let (status, v) = hub.post("/v1/agents/w1/stop", serde_json::json!({})).await;
    assert_eq!(status, 200, "{v}");
    let out = agent_hub_cli(&hub, &["workspace", "remove", "w1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("uncommitted changes") && err.contains("notes.txt"),
        "{err}"
    );
    let (status, v) = hub.delete("/v1/agents/w1/workspace").await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("WORKSPACE_DIRTY")),
        "{v}"
    );
    assert_eq!(v["files"], serde_json::json!(["notes.txt"]), "{v}");
    let checkout = v["message"].as_str().unwrap().to_string();
    let (status, v) = hub.delete("/v1/agents/w1/workspace?force=true").await;
    assert_eq!(status, 200, "{v}");
    assert!(
        !Path::new(v["path"].as_str().unwrap()).exists(),
        "{checkout}"
    );
    assert_eq!(
        git(repo.path(), &["log", "--format=%s", "agent/w1"]),
        "Add w1.txt\nStart\n"
    );
    // The next start checks the branch out again.
    let s1 = session_of(&hub, "w1").await;
    assert_eq!(
        run(&hub, &s1, "cd /workspace && ls -1").await,
        "README.md\nw1.txt\n"
    );
    let (_, v) = hub.get("/v1/agents/w1").await;
    assert_eq!(v["agent"]["workspace"]["branch"], "agent/w1", "{v}");
    assert_eq!(v["agent"]["workspace"]["exists"], true, "{v}");
}

/// Loads `toml` as `hub.toml`; an error says `hub.toml:LINE:COL: ...`.
fn load(toml: &str) -> Result<agent_hub::config::HubConfig, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hub.toml");
    std::fs::write(&file, toml).unwrap();
    agent_hub::config::HubConfig::load(&file).map_err(|e| {
        e.to_string()
            .replace(&file.display().to_string(), "hub.toml")
    })
}

fn load_error(toml: &str) -> String {
    load(toml).expect_err("refused")
}

#[test]
fn workspaces_that_cannot_work_are_refused_at_load_with_their_place() {
    let repo = user_repo();
    let r = repo.path().display();
    let not_repo = tempfile::tempdir().unwrap();
    let agent = |id: &str, ws: &str| {
        format!("[[agents]]\nid = \"{id}\"\nimage = \"img\"\nworkspace = {ws}\n")
    };

    let e = load_error(&agent(
        "a",
        &format!("{{ repo = \"{}\" }}", not_repo.path().display()),
    ));
    let col = "workspace = { repo = ".len() + 1;
    assert!(e.starts_with(&format!("hub.toml:4:{col}: ")), "{e}");
    assert!(
        e.contains("workspace.repo") && e.contains("not a git repository"),
        "{e}"
    );

    let e = load_error(&agent(
        "a",
        &format!("{{ repo = \"{r}\", base = \"release\" }}"),
    ));
    let col = format!("{{ repo = \"{r}\", base = ").len() + 13;
    assert!(e.starts_with(&format!("hub.toml:4:{col}: ")), "{e}");
    assert!(e.contains("\"release\" names no commit"), "{e}");

    let e = load_error(&agent("a", "{ repo = \"relative/app\" }"));
    assert!(e.contains("must be an absolute path"), "{e}");

    let both = format!(
        "{}{}",
        agent("a", &format!("{{ repo = \"{r}\", branch = \"shared\" }}")),
        agent("b", &format!("{{ repo = \"{r}\", branch = \"shared\" }}"))
    );
    let e = load_error(&both);
    assert!(e.starts_with("hub.toml:8:"), "{e}");
    assert!(e.contains("already agent 'a''s workspace"), "{e}");

    // An agent on a remote engine clones its workspace over the hub's API: it needs hub_url.
    let remote = |extra: &str| {
        let ws = agent("a", &format!("{{ repo = \"{r}\" }}"));
        format!("{ws}docker_host = \"tcp://10.0.0.9:2375\"\n{extra}")
    };
    let e = load_error(&remote(""));
    assert!(
        e.starts_with("hub.toml:") && e.contains("set hub_url"),
        "{e}"
    );
    assert!(load(&remote("hub_url = \"http://10.0.0.1:8100\"\n")).is_ok());

    // A base not written is the branch the repository has checked out.
    let config = load(&agent("a", &format!("{{ repo = \"{r}\" }}"))).unwrap();
    let def = config.agent_defs().next().unwrap();
    assert_eq!(def.workspace_base().as_deref(), Some("main"));
    assert_eq!(def.workspace_branch().as_deref(), Some("agent/a"));
}

/// A repository with one commit on `main` that belongs to root (the hub's user here), with
/// its identity for commits set; `mode` is then given to it all (`a+rwX`, `go-w`).
fn root_repo(mode: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("README.md"), "the app\n").unwrap();
    git(dir.path(), &["add", "README.md"]);
    git(dir.path(), &["commit", "-qm", "Start"]);
    git(dir.path(), &["config", "user.name", "Agent"]);
    git(dir.path(), &["config", "user.email", "agent@example.com"]);
    let ok = Command::new("chmod")
        .args(["-R", mode])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(ok.success());
    dir
}

/// Whether this process is root (the repositories below must belong to root).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::tempdir().unwrap();
    std::fs::metadata(probe.path()).unwrap().uid() == 0
}

/// The user the test image runs as (`agent`).
fn image_user() -> String {
    let user = crate::docker_support::docker(&[
        "image",
        "inspect",
        "--format",
        "{{.Config.User}}",
        &crate::docker_support::test_image(),
    ]);
    user.trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_owned_repository_open_to_all_gives_a_checkout_the_agent_can_commit_in() {
    require_docker!();
    if !is_root() {
        eprintln!("SKIPPED: the hub must run as root to make a root-owned repository");
        return;
    }
    let repo = root_repo("a+rwX");
    let ws = format!(
        "workspace = {{ repo = \"{}\", base = \"main\" }}",
        repo.path().display()
    );
    let (hub, _guard) = hub_with_agents(&agent_toml("open", &ws)).await;
    let (status, v) = hub
        .post("/v1/agents/open/start", serde_json::json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    let container = v["agent"]["container_id"].as_str().unwrap().to_string();

    // As the image's user, in the container: a new file, a commit on the agent's branch.
    let user = image_user();
    let out = Command::new("docker")
        .args(["exec", "-u", &user, "-w", "/workspace", &container])
        .args([
            "sh",
            "-c",
            "echo x > f && git add f && git commit -qm 'Add f' && git status --short",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "as {user}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        git(repo.path(), &["log", "--format=%s", "agent/open"]),
        "Add f\nStart\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_owned_repository_the_agent_cannot_write_is_refused_before_its_container() {
    require_docker!();
    if !is_root() {
        eprintln!("SKIPPED: the hub must run as root to make a root-owned repository");
        return;
    }
    let repo = root_repo("go-w");
    let r = repo.path().display().to_string();
    let ws = format!("workspace = {{ repo = \"{r}\", base = \"main\" }}");
    let (hub, guard) = hub_with_agents(&agent_toml("shut", &ws)).await;
    let (status, v) = hub
        .post("/v1/agents/shut/start", serde_json::json!({}))
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (409, Some("WORKSPACE_NOT_WRITABLE")),
        "{v}"
    );
    let message = v["message"].as_str().unwrap();
    let user = image_user();
    for part in [
        r.as_str(),
        "root",
        &format!("'{user}'"),
        "chown -R",
        &format!("chmod -R a+rwX {r}"),
    ] {
        assert!(message.contains(part), "{part:?} not in: {message}");
    }
    let containers = crate::docker_support::docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label=agent-hub.hub={}", guard.0),
    ]);
    assert_eq!(containers.trim(), "", "a container was made");
    let checkout = hub.data_dir().join("agents/shut/workspace");
    assert!(!checkout.exists(), "a checkout was made");
    assert_eq!(git(repo.path(), &["branch", "--list", "agent/*"]), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_the_agent_cannot_write_is_reported_at_load() {
    require_docker!();
    if !is_root() {
        eprintln!("SKIPPED: the hub must run as root to make a root-owned repository");
        return;
    }
    let (shut, open) = (root_repo("go-w"), root_repo("a+rwX"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hub.toml");
    let agent = |id: &str, repo: &Path| {
        agent_toml(
            id,
            &format!(
                "workspace = {{ repo = \"{}\", base = \"main\" }}",
                repo.display()
            ),
        )
    };
    let toml = format!(
        "data_dir = \"{}\"\n{}{}",
        dir.path().join("data").display(),
        agent("open", open.path()),
        agent("shut", shut.path())
    );
    std::fs::write(&file, toml).unwrap();

    // doctor: the open repository is fine, the other fails with the fix.
    let out = Command::new(BIN)
        .args(["doctor", "--json", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let finding = |agent: &str| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| {
                let check = f["check"].as_str().unwrap();
                check.starts_with("workspace ") && check.ends_with(&format!("(agent {agent})"))
            })
            .unwrap_or_else(|| panic!("no workspace finding for {agent}: {report:#}"))
            .clone()
    };
    assert_eq!(finding("open")["status"], "ok", "{report:#}");
    let shut_finding = finding("shut");
    assert_eq!(shut_finding["status"], "fail", "{shut_finding:#}");
    let fix = shut_finding["fix"].as_str().unwrap();
    assert!(fix.contains("chmod -R a+rwX"), "{fix}");

    // The daemon's preflight refuses to start, at the agent's place in hub.toml.
    let config = agent_hub::config::HubConfig::load(&file).unwrap();
    let opts = agent_hub::daemon::DaemonOptions {
        listener: Some(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()),
        components: agent_hub::daemon::Components {
            preflight: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let refused = agent_hub::daemon::Daemon::start(config, opts).await;
    let Err(e) = refused else {
        panic!("the daemon started");
    };
    let text = e.to_string();
    let place = format!("{}:", file.display());
    assert!(text.starts_with(&place), "{text}");
    assert!(text.contains("agent 'shut': workspace: "), "{text}");
    assert!(text.contains(&shut.path().display().to_string()), "{text}");
    assert!(text.contains("chmod -R a+rwX"), "{text}");
}
