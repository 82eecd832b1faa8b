//! Workspaces that fit real repositories: a new checkout gets the untracked files its
//! `include` and the repository's `.worktreeinclude` name, and its submodules; its `setup`
//! commands run in the agent's container, as its user, once, before its program starts; a
//! failing one fails the start with its output. Real git repositories, real containers. And
//! the fields that cannot work are refused at load, at `hub.toml:LINE:COL`.

use crate::docker_support::{hub_with_agents, test_image};
use crate::require_docker;
use crate::workspace::{git, give_to_the_image_user};
use std::path::Path;

/// The user's repository: `main` with a README, a `.gitignore` of `.env` and `config/local.*`,
/// the submodule `lib` (a repository next to it, `url = ../lib`); untracked in its work tree
/// `.env`, `config/local.toml` and `secret.key` (named by its `.worktreeinclude`). Owned by
/// uid 1000 (the test image's user) when the test runs as root.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (app, lib) = (dir.path().join("app"), dir.path().join("lib"));
    for repo in [&app, &lib] {
        std::fs::create_dir(repo).unwrap();
        git(repo, &["init", "-q", "-b", "main"]);
    }
    std::fs::write(lib.join("lib.txt"), "the library\n").unwrap();
    git(&lib, &["add", "lib.txt"]);
    git(&lib, &["commit", "-qm", "lib"]);
    std::fs::write(app.join("README.md"), "the app\n").unwrap();
    std::fs::write(app.join(".gitignore"), ".env\nconfig/local.*\nsecret.key\n").unwrap();
    let add_lib = ["-c", "protocol.file.allow=always", "submodule", "add", "-q"];
    git(&app, &[&add_lib[..], &["../lib", "lib"]].concat());
    git(&app, &["add", "-A"]);
    git(&app, &["commit", "-qm", "Start"]);
    std::fs::write(app.join(".env"), "TOKEN=1\n").unwrap();
    std::fs::create_dir(app.join("config")).unwrap();
    std::fs::write(app.join("config/local.toml"), "debug = true\n").unwrap();
    std::fs::write(app.join("secret.key"), "k\n").unwrap();
    std::fs::write(
        app.join(".worktreeinclude"),
        "# for new checkouts\nsecret.key\n",
    )
    .unwrap();
    give_to_the_image_user(dir.path());
    dir
}

/// An agent whose program first writes when it started (ns) to `.program-started` in its
/// checkout, with a workspace `{ repo, <workspace> }` of `repo`.
fn agent(id: &str, repo: &Path, workspace: &str) -> String {
    format!(
        "[[agents]]\nid = \"{id}\"\nimage = \"{}\"\n\
         command = [\"sh\", \"-c\", \"date +%s%N > .program-started; exec bash --norc --noprofile\"]\n\
         network = \"none\"\nready_pattern = '[$#] *$'\nready_timeout = 20\nstop_grace = 2\n\
         workspace = {{ repo = \"{}\", {workspace} }}\n",
        test_image(),
        repo.display()
    )
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_checkout_has_its_files_and_submodules_and_its_setup_ran_once_before_the_program() {
    require_docker!();
    let dir = project();
    let repo = dir.path().join("app");
    // The setup sees the files and the submodule, records its user and when it ran, and takes
    // a moment: a program started before it ended would have written its time first. s1's
    // program is started by the image's entrypoint, s2's by the hub.
    let setup = r#"echo "$(id -u) $(date +%s%N)" >> .setup-runs; test -f .env && test -f secret.key && test -f lib/lib.txt && echo setup saw the checkout; sleep 1"#;
    let ws = format!("include = [\".env\", \"config/local.*\"], setup = ['{setup}']");
    let agents = format!(
        "{}{}",
        agent("s1", &repo, &ws),
        agent("s2", &repo, &ws)
            .replace("stop_grace = 2\n", "stop_grace = 2\nstart_tmux = \"hub\"\n")
    );
    let (hub, _guard) = hub_with_agents(&agents).await;
    for id in ["s1", "s2"] {
        set_up_once_before_the_program(&hub, id).await;
    }
}

/// Starts `id` twice: its checkout has the files and the submodule, its setup ran at the first
/// start only, as uid 1000, before its program.
async fn set_up_once_before_the_program(hub: &crate::support::TestHub, id: &str) {
    let (status, v) = hub
        .post(&format!("/v1/agents/{id}/start"), serde_json::json!({}))
        .await;
    assert_eq!(status, 200, "{v}");

    let checkout = hub.data_dir().join(format!("agents/{id}/workspace"));
    let read = |name: &str| std::fs::read_to_string(checkout.join(name)).unwrap_or_default();
    assert_eq!(read(".env"), "TOKEN=1\n");
    assert_eq!(read("config/local.toml"), "debug = true\n");
    assert_eq!(read("secret.key"), "k\n", "named by .worktreeinclude");
    assert_eq!(read("lib/lib.txt"), "the library\n", "the submodule");
    // The copies belong to the repository's owner, as the rest of the checkout.
    use std::os::unix::fs::MetadataExt;
    let uid = |path: &Path| std::fs::symlink_metadata(path).unwrap().uid();
    let owner = uid(&checkout.join("README.md"));
    for copied in [
        ".env",
        "config",
        "config/local.toml",
        "secret.key",
        "lib/lib.txt",
    ] {
        assert_eq!(uid(&checkout.join(copied)), owner, "{copied}");
    }

    let runs = lines(&checkout.join(".setup-runs"));
    assert_eq!(runs.len(), 1, "{id}: {runs:?}");
    let (uid, setup_at) = runs[0].split_once(' ').unwrap();
    assert_eq!(uid, "1000", "as the image's user");
    let program_at = read(".program-started");
    let ns = |s: &str| s.trim().parse::<u128>().unwrap();
    assert!(
        ns(setup_at) + 1_000_000_000 <= ns(&program_at),
        "{id}: the program started after the setup ended: {setup_at} {program_at}"
    );
    let log = hub.data_dir().join(format!("agents/{id}/setup.log"));
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("setup saw the checkout"), "{log}");

    // The next start does not run it again.
    let (status, v) = hub
        .post(&format!("/v1/agents/{id}/stop"), serde_json::json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = hub
        .post(&format!("/v1/agents/{id}/start"), serde_json::json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(lines(&checkout.join(".setup-runs")).len(), 1);
    assert!(
        ns(&read(".program-started")) > ns(&program_at),
        "{id}: the program ran again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_setup_fails_the_start_with_its_last_lines_and_runs_again_at_the_next() {
    require_docker!();
    let dir = project();
    let repo = dir.path().join("app");
    let setup = "echo try >> .tries; for i in $(seq 1 30); do echo line $i; done; exit 3";
    let ws = format!("setup = ['true', '{setup}']");
    let (hub, _guard) = hub_with_agents(&agent("bad", &repo, &ws)).await;
    let checkout = hub.data_dir().join("agents/bad/workspace");
    for tries in 1..=2 {
        let (status, v) = hub
            .post("/v1/agents/bad/start", serde_json::json!({}))
            .await;
        assert_eq!(
            (status, v["error_code"].as_str()),
            (409, Some("WORKSPACE_SETUP_FAILED")),
            "{v}"
        );
        let message = v["message"].as_str().unwrap();
        for part in [setup, "exit code 3", "line 11\n", "line 30"] {
            assert!(message.contains(part), "{part:?} in {message}");
        }
        assert!(
            !message.contains("line 10\n"),
            "only the last 20 lines: {message}"
        );
        assert_eq!(lines(&checkout.join(".tries")).len(), tries, "it ran again");
        assert!(
            !checkout.join(".program-started").exists(),
            "the program did not start"
        );
        let (_, info) = hub.get("/v1/agents/bad").await;
        assert_eq!(info["agent"]["status"], "failed", "{info}");
        let pending = hub.data_dir().join("agents/bad/setup-pending");
        assert_eq!(
            std::fs::read_to_string(pending).unwrap(),
            "",
            "the entrypoint's wait is over once the container is stopped"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_remote_engine_the_setup_runs_in_the_clone_once_before_the_program() {
    require_docker!();
    let Some(rig) = crate::docker_support::remote_engine() else {
        return;
    };
    let dir = project();
    let repo = dir.path().join("app");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hub_url = format!("http://{}", listener.local_addr().unwrap());
    let setup = r#"echo "$(id -u) $(date +%s%N)" >> .setup-runs; sleep 1"#;
    let toml = agent("r1", &repo, &format!("setup = ['{setup}']")).replace(
        "network = \"none\"",
        &format!(
            "network = \"host\"\ndocker_host = \"{}\"\nhub_url = \"{hub_url}\"",
            rig.endpoint
        ),
    );
    let (hub, _guard) =
        crate::docker_support::hub_with_agents_on(listener, &rig.endpoint, &toml).await;
    // The clone is on the engine: read through the agent's terminal.
    let read = |sid: String, file: &'static str| {
        let hub = &hub;
        async move { crate::workspace::run(hub, &sid, &format!("cat /workspace/{file}")).await }
    };
    let sid = crate::workspace::session_of(&hub, "r1").await;
    let runs = read(sid.clone(), ".setup-runs").await;
    let (uid, setup_at) = runs.trim().split_once(' ').unwrap();
    assert_eq!(uid, "1000", "{runs}");
    let program_at = read(sid, ".program-started").await;
    let ns = |s: &str| s.trim().parse::<u128>().unwrap();
    assert!(
        ns(setup_at) + 1_000_000_000 <= ns(&program_at),
        "the program started after the setup ended: {setup_at} {program_at}"
    );

    let (status, v) = hub.post("/v1/agents/r1/stop", serde_json::json!({})).await;
    assert_eq!(status, 200, "{v}");
    let sid = crate::workspace::session_of(&hub, "r1").await;
    assert_eq!(read(sid.clone(), ".setup-runs").await.lines().count(), 1);
    assert!(ns(&read(sid, ".program-started").await) > ns(&program_at));
}

fn load_error(toml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hub.toml");
    std::fs::write(&file, toml).unwrap();
    let e = agent_hub::config::HubConfig::load(&file).expect_err("refused");
    e.to_string()
        .replace(&file.display().to_string(), "hub.toml")
}

#[test]
fn include_patterns_and_setup_commands_that_cannot_work_are_refused_at_load() {
    let dir = project();
    let repo = dir.path().join("app");
    let agent = |ws: &str, extra: &str| {
        format!(
            "[[agents]]\nid = \"a\"\nimage = \"img\"\n{extra}workspace = {{ repo = \"{}\", {ws} }}\n",
            repo.display()
        )
    };
    let line = |extra: &str| 4 + extra.lines().count();
    let prefix = format!("workspace = {{ repo = \"{}\", ", repo.display());
    for (ws, col_in_ws, says) in [
        ("include = [\".env\", \"../x\"]", 20, "'..' component"),
        ("include = [\"\"]", 12, "it is empty"),
        ("include = [\"# x\"]", 12, "comment"),
        ("setup = [\"npm ci\", \" \"]", 20, "setup command is empty"),
    ] {
        let e = load_error(&agent(ws, ""));
        let col = prefix.len() + col_in_ws;
        assert!(
            e.starts_with(&format!("hub.toml:{}:{col}: ", line(""))),
            "{ws}: {e}"
        );
        let field = ws.split(' ').next().unwrap();
        assert!(
            e.contains(&format!("workspace.{field}")) && e.contains(says),
            "{e}"
        );
    }
    let remote = "docker_host = \"tcp://10.0.0.9:2375\"\nhub_url = \"http://10.0.0.1:8100\"\n";
    let e = load_error(&agent("include = [\".env\"]", remote));
    assert!(e.starts_with(&format!("hub.toml:{}:", line(remote))), "{e}");
    assert!(e.contains("not available on a remote engine"), "{e}");
}
