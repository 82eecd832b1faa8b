//! Landing agents' work through the hub (REST, CLI, MCP) on a real repository the test makes:
//! ff-only, squash and rebase put the agent's commits on `main` (read with the host's git), a
//! dirty base work tree and a conflict change nothing (refs and file bytes compared), a
//! conflict reaches the agent (the scripted fake agent TUI shows the prompt), a working agent
//! is refused unless `force`, `continue_from_base`, `update --rebase` with a conflict, `push` to
//! a bare repository as `origin`, and a leader with `may_merge` lands its team's work through
//! MCP and is refused another team's. The agents are defined, never started: each checkout is
//! made as a start makes it (a worktree on `agent/<id>` in the hub's data dir), and the fake
//! agent runs in a host session the agent owns, where a prompt to the agent goes. One test runs
//! a real container agent: its commit lands, and after `continue_from_base` it goes on working
//! as its own user in the checkout the hub moved.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{json, Value};

use crate::cli::BIN;
use crate::policy_support::{fake_agent, hub_with_policies, policies_dir, wait_state};
use crate::support::TestHub;
use crate::workspace::git;

const T: Duration = Duration::from_secs(15);

/// A repository on `main` with one commit, owned by the hub's user.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["config", "user.name", "Host"]);
    git(dir.path(), &["config", "user.email", "h@x"]);
    std::fs::write(dir.path().join("README.md"), "the app\nline two\n").unwrap();
    git(dir.path(), &["add", "README.md"]);
    git(dir.path(), &["commit", "-qm", "Start"]);
    dir
}

struct Rig {
    hub: TestHub,
    repo: tempfile::TempDir,
    _policies: tempfile::TempDir,
}

impl Rig {
    /// A hub whose agents `w1`, `w2`, `lead` (leader, may_merge) of team `a` and `lb`
    /// (leader without it), `wb` of team `b` all work on one repository; `w1`, `w2` and `wb`
    /// have their checkouts.
    async fn new() -> Self {
        let repo = repo();
        let ws = format!(
            "workspace = {{ repo = \"{}\", base = \"main\" }}",
            repo.path().display()
        );
        let agents: String = [
            ("w1", "a", "worker", ""),
            ("w2", "a", "worker", ""),
            ("lead", "a", "leader", "may_merge = true\n"),
            ("wb", "b", "worker", ""),
            ("lb", "b", "leader", ""),
        ]
        .iter()
        .map(|(id, team, role, extra)| {
            format!(
                "[[agents]]\nid = \"{id}\"\nimage = \"none\"\nteam = \"{team}\"\n\
                 owner_role = \"{role}\"\n{extra}{ws}\n"
            )
        })
        .collect();
        let policies = policies_dir();
        let hub = hub_with_policies(&policies, &agents).await;
        let rig = Rig {
            hub,
            repo,
            _policies: policies,
        };
        for id in ["w1", "w2", "wb"] {
            let path = rig.checkout(id);
            let branch = format!("agent/{id}");
            git(
                rig.repo.path(),
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &branch,
                    path.to_str().unwrap(),
                    "main",
                ],
            );
        }
        rig
    }

    /// `agent-hub ARGS` against the hub.
    fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .args(args)
            .args(["--hub", &self.hub.base, "--token", &self.hub.owner_token])
            .output()
            .unwrap()
    }

    fn checkout(&self, id: &str) -> PathBuf {
        self.hub
            .data_dir()
            .join("agents")
            .join(id)
            .join("workspace")
    }

    /// Agent `id` commits `file` with `text` in its checkout.
    fn agent_commits(&self, id: &str, file: &str, text: &str) -> String {
        let dir = self.checkout(id);
        std::fs::write(dir.join(file), text).unwrap();
        git(&dir, &["add", file]);
        git(&dir, &["commit", "-qm", &format!("{id}: {file}")]);
        git(&dir, &["rev-parse", "HEAD"]).trim().to_string()
    }

    /// The user commits `file` on main in their own work tree.
    fn user_commits(&self, file: &str, text: &str) {
        std::fs::write(self.repo.path().join(file), text).unwrap();
        git(self.repo.path(), &["add", file]);
        git(
            self.repo.path(),
            &["commit", "-qm", &format!("user: {file}")],
        );
    }

    fn main_log(&self) -> Vec<String> {
        git(self.repo.path(), &["log", "--format=%s", "main"])
            .lines()
            .map(String::from)
            .collect()
    }

    fn refs(&self) -> String {
        git(self.repo.path(), &["show-ref"])
    }

    async fn merge(&self, id: &str, body: Value) -> (u16, Value) {
        self.hub.post(&format!("/v1/agents/{id}/merge"), body).await
    }

    /// A host session owned by agent `id` running the fake agent TUI, idle at its prompt.
    async fn fake_agent_of(&self, id: &str) -> String {
        let sid = self
            .hub
            .create_with(json!({
                "shell": "bash", "args": [fake_agent()], "cli_type": "fake", "owner_agent_id": id,
            }))
            .await;
        wait_state(&self.hub, &sid, "idle", T).await;
        sid
    }
}

/// Asserts that a request was refused with `want` and `code`.
fn refused(status: u16, v: &Value, want: u16, code: &str) {
    assert_eq!(
        (status, v["error_code"].as_str()),
        (want, Some(code)),
        "{v}"
    );
}

fn file_bytes(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn index_of(dir: &Path) -> Vec<u8> {
    let index = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    );
    std::fs::read(index.trim()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ff_only_squash_and_rebase_each_land_the_agents_commits_on_main() {
    let rig = Rig::new().await;

    // ff-only: main had not moved.
    rig.agent_commits("w1", "one.txt", "1\n");
    let (status, v) = rig.merge("w1", json!({"mode": "ff-only"})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["worktree"], "updated", "{v}");
    assert_eq!(rig.main_log(), ["w1: one.txt", "Start"]);
    assert!(
        rig.repo.path().join("one.txt").exists(),
        "the user's work tree follows main"
    );

    // A dry run of a squash after main moved: what would land, nothing moved.
    rig.agent_commits("w2", "two.txt", "2\n");
    rig.agent_commits("w2", "two-b.txt", "2b\n");
    rig.user_commits("user.txt", "u\n");
    let refs = rig.refs();
    let (status, v) = rig
        .merge("w2", json!({"mode": "squash", "dry_run": true}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["dry_run"].clone(), v["clean"].clone()),
        (json!(true), json!(true)),
        "{v}"
    );
    assert_eq!(v["commits"].as_array().unwrap().len(), 2, "{v}");
    let files: Vec<_> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].clone())
        .collect();
    assert_eq!(files, [json!("two-b.txt"), json!("two.txt")], "{v}");
    assert_eq!(rig.refs(), refs, "a dry run changes nothing");

    // squash, and the agent's branch continues from what landed.
    let (status, v) = rig
        .merge(
            "w2",
            json!({"mode": "squash", "message": "Land w2", "continue_from_base": true}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(rig.main_log()[..2], ["Land w2", "user: user.txt"]);
    let main = git(rig.repo.path(), &["rev-parse", "main"]);
    assert_eq!(v["continued_at"].as_str().unwrap(), main.trim(), "{v}");
    assert_eq!(git(&rig.checkout("w2"), &["rev-parse", "HEAD"]), main);
    // Its work summary was computed again: nothing ahead, nothing behind.
    let (_, agent) = rig.hub.get("/v1/agents/w2").await;
    let work = &agent["agent"]["work"];
    assert_eq!(
        (work["ahead"].clone(), work["behind"].clone()),
        (json!(0), json!(0)),
        "{agent}"
    );
    assert!(
        rig.checkout("w2").join("user.txt").exists(),
        "its checkout is at the new base"
    );

    // rebase: the agent's commits replayed on main, main moved to the last of them.
    rig.agent_commits("w1", "three.txt", "3\n");
    let (status, v) = rig.merge("w1", json!({"mode": "rebase"})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(rig.main_log()[..2], ["w1: three.txt", "Land w2"]);
    assert_eq!(v["commits"][0]["subject"], "w1: three.txt", "{v}");

    // Nothing left: NOTHING_TO_MERGE (409).
    let (status, v) = rig.merge("w2", json!({})).await;
    refused(status, &v, 409, "NOTHING_TO_MERGE");

    // It is audited.
    let (_, audit) = rig
        .hub
        .get("/v1/pty-traffic/events?action=agent_merge")
        .await;
    assert!(audit["events"].as_array().unwrap().len() >= 3, "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dirty_base_and_a_conflict_change_nothing_and_the_conflict_reaches_the_agent() {
    let rig = Rig::new().await;
    rig.agent_commits("w1", "README.md", "the app\nline two from w1\n");

    // continue_from_base with uncommitted work in the agent's checkout: refused first.
    std::fs::write(rig.checkout("w1").join("draft.txt"), "wip\n").unwrap();
    let refs = rig.refs();
    let (status, v) = rig.merge("w1", json!({"continue_from_base": true})).await;
    refused(status, &v, 409, "WORKSPACE_DIRTY");
    assert_eq!(v["files"], json!(["draft.txt"]), "{v}");
    assert_eq!(rig.refs(), refs);
    std::fs::remove_file(rig.checkout("w1").join("draft.txt")).unwrap();

    // The user's work tree on main has uncommitted changes: BASE_DIRTY naming them.
    std::fs::write(rig.repo.path().join("scratch.txt"), "mine\n").unwrap();
    let refs = rig.refs();
    let (status, v) = rig.merge("w1", json!({})).await;
    refused(status, &v, 409, "BASE_DIRTY");
    assert_eq!(v["files"], json!(["scratch.txt"]), "{v}");
    assert_eq!(rig.refs(), refs);
    std::fs::remove_file(rig.repo.path().join("scratch.txt")).unwrap();

    // main moved on the same line: MERGE_CONFLICT, with the file and its hunk.
    rig.user_commits("README.md", "the app\nline two from the user\n");
    let files = [
        rig.repo.path().join("README.md"),
        rig.checkout("w1").join("README.md"),
    ];
    let before = (
        rig.refs(),
        file_bytes(&files),
        index_of(rig.repo.path()),
        index_of(&rig.checkout("w1")),
    );
    for mode in ["merge", "squash", "rebase"] {
        let (status, v) = rig.merge("w1", json!({"mode": mode})).await;
        refused(status, &v, 409, "MERGE_CONFLICT");
        assert_eq!(v["conflicts"][0]["path"], "README.md", "{v}");
        let hunk = v["conflicts"][0]["hunks"][0].as_str().unwrap();
        assert!(
            hunk.starts_with("<<<<<<<") && hunk.contains("line two from w1"),
            "{hunk}"
        );
        let after = (
            rig.refs(),
            file_bytes(&files),
            index_of(rig.repo.path()),
            index_of(&rig.checkout("w1")),
        );
        assert_eq!(after, before, "{mode}: something changed");
    }
    let (_, v) = rig.merge("w1", json!({"dry_run": true})).await;
    assert_eq!(
        (v["clean"].clone(), v["conflicts"].clone()),
        (json!(false), json!(["README.md"])),
        "{v}"
    );

    // to_agent: the conflict is delivered to the agent as one prompt, and still refused.
    let sid = rig.fake_agent_of("w1").await;
    let (status, v) = rig.merge("w1", json!({"to_agent": true})).await;
    refused(status, &v, 409, "MERGE_CONFLICT");
    assert_eq!(v["delivered"], "submitted", "{v}");
    let screen = rig
        .hub
        .wait_output(&sid, "echo: Your branch agent/w1 conflicts with main", T)
        .await;
    assert!(screen.contains("line two from w1"), "{screen}");
    assert_eq!(rig.refs(), before.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_agent_is_refused_unless_forced() {
    let rig = Rig::new().await;
    rig.agent_commits("w1", "one.txt", "1\n");
    let sid = rig.fake_agent_of("w1").await;
    let (status, v) = rig
        .hub
        .post(
            &format!("/v1/pty/sessions/{sid}/send_line"),
            json!({"data": "spin", "submit": true}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    wait_state(&rig.hub, &sid, "working", T).await;
    let (status, v) = rig.merge("w1", json!({})).await;
    refused(status, &v, 409, "AGENT_WORKING");
    let (status, v) = rig.hub.post("/v1/agents/w1/update", json!({})).await;
    refused(status, &v, 409, "AGENT_WORKING");
    let (status, v) = rig.merge("w1", json!({"force": true})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(rig.main_log(), ["w1: one.txt", "Start"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_brings_main_in_and_a_rebase_conflict_leaves_the_branch_as_it_was() {
    let rig = Rig::new().await;
    rig.agent_commits("w1", "one.txt", "1\n");
    rig.user_commits("user.txt", "u\n");
    let (status, v) = rig
        .hub
        .post("/v1/agents/w1/update", json!({"rebase": true}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["updated"].clone(), v["worktree"].clone()),
        (json!(true), json!("updated")),
        "{v}"
    );
    assert!(rig.checkout("w1").join("user.txt").exists());
    let log = git(&rig.checkout("w1"), &["log", "--format=%s"]);
    assert_eq!(log, "w1: one.txt\nuser: user.txt\nStart\n");

    rig.agent_commits("w1", "README.md", "the app\nline two from w1\n");
    rig.user_commits("README.md", "the app\nline two from the user\n");
    let tip = git(&rig.checkout("w1"), &["rev-parse", "HEAD"]);
    let readme = std::fs::read(rig.checkout("w1").join("README.md")).unwrap();
    let (status, v) = rig
        .hub
        .post("/v1/agents/w1/update", json!({"rebase": true}))
        .await;
    refused(status, &v, 409, "MERGE_CONFLICT");
    assert_eq!(git(&rig.checkout("w1"), &["rev-parse", "HEAD"]), tip);
    assert_eq!(git(rig.repo.path(), &["rev-parse", "agent/w1"]), tip);
    assert_eq!(
        std::fs::read(rig.checkout("w1").join("README.md")).unwrap(),
        readme
    );
    assert_eq!(git(&rig.checkout("w1"), &["status", "--porcelain"]), "");

    // A merge update's conflict, sent to the agent.
    let sid = rig.fake_agent_of("w1").await;
    let (status, v) = rig
        .hub
        .post("/v1/agents/w1/update", json!({"to_agent": true}))
        .await;
    refused(status, &v, 409, "MERGE_CONFLICT");
    assert_eq!(v["delivered"], "submitted", "{v}");
    rig.hub
        .wait_output(&sid, "echo: Your branch agent/w1 conflicts with main", T)
        .await;
    assert_eq!(git(rig.repo.path(), &["rev-parse", "agent/w1"]), tip);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_sends_the_branch_to_origin_and_the_cli_names_branch_and_url() {
    let rig = Rig::new().await;
    let tip = rig.agent_commits("w1", "one.txt", "1\n");
    let bare = tempfile::tempdir().unwrap();
    git(bare.path(), &["init", "-q", "--bare"]);
    let url = bare.path().to_str().unwrap();
    git(rig.repo.path(), &["remote", "add", "origin", url]);

    let out = rig.cli(&["push", "w1"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("agent/w1") && said.contains(url), "{said}");
    assert_eq!(
        git(bare.path(), &["rev-parse", "refs/heads/agent/w1"]).trim(),
        tip
    );

    let (status, v) = rig
        .hub
        .post("/v1/agents/w1/push", json!({"remote": "upstream"}))
        .await;
    refused(status, &v, 404, "NO_SUCH_REMOTE");
    let (status, v) = rig
        .hub
        .post("/v1/agents/w2/merge", json!({"message": " "}))
        .await;
    refused(status, &v, 400, "BAD_REQUEST");

    // The CLI's dry run says what would land.
    let out = rig.cli(&["merge", "w1", "--squash", "--dry-run"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("would squash agent/w1 into main") && said.contains("one.txt"),
        "{said}"
    );
}

/// Calls k_agents `action` with `args` as `token`; the JSON body.
/// One `k_agents` call over MCP with `token`; its structured answer.
pub(crate) async fn k_agents(hub: &TestHub, token: &str, args: Value) -> Value {
    let client = crate::mcp::http_client(hub, token).await;
    let params =
        CallToolRequestParams::new("k_agents").with_arguments(args.as_object().unwrap().clone());
    let result = client.call_tool(params).await.expect("tools/call");
    let body = result
        .structured_content
        .clone()
        .expect("structured content");
    let _ = client.cancel().await;
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_with_may_merge_lands_its_teams_work_through_mcp_and_not_another_teams() {
    let rig = Rig::new().await;
    rig.agent_commits("w1", "one.txt", "1\n");
    rig.agent_commits("wb", "b.txt", "b\n");
    let mint = |id: &str| {
        let who = rig.hub.hub.agents().identity(id).unwrap();
        rig.hub.hub.credentials().mint(id, who)
    };
    let (lead, lb) = (mint("lead"), mint("lb"));

    let v = k_agents(
        &rig.hub,
        &lead,
        json!({"action": "merge", "agent_id": "w1", "mode": "squash"}),
    )
    .await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(rig.main_log(), ["w1: one.txt", "Start"]);
    // update and push reach their handlers for it too (the repository has no remote).
    let v = k_agents(
        &rig.hub,
        &lead,
        json!({"action": "update", "agent_id": "w1"}),
    )
    .await;
    assert_eq!(v["ok"], true, "{v}");
    let v = k_agents(&rig.hub, &lead, json!({"action": "push", "agent_id": "w1"})).await;
    assert_eq!(v["error_code"], "NO_SUCH_REMOTE", "{v}");

    // Another team's worker is out of its sight.
    let refs = rig.refs();
    let v = k_agents(
        &rig.hub,
        &lead,
        json!({"action": "merge", "agent_id": "wb"}),
    )
    .await;
    assert_eq!(v["error_code"], "AGENT_NOT_FOUND", "{v}");
    // A leader without may_merge sees its worker but may not land its work.
    let v = k_agents(&rig.hub, &lb, json!({"action": "merge", "agent_id": "wb"})).await;
    assert_eq!(v["error_code"], "FORBIDDEN", "{v}");
    assert!(v["message"].as_str().unwrap().contains("may_merge"), "{v}");
    let v = k_agents(&rig.hub, &lb, json!({"action": "push", "agent_id": "wb"})).await;
    assert_eq!(v["error_code"], "FORBIDDEN", "{v}");
    assert_eq!(rig.refs(), refs);
}

/// Gives the repository to the agents' user again after the host's git wrote in it as root
/// (as a user's own repository is theirs).
fn give_to_agent_user(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    // Only where `user_repo` gave it to them (a root test run).
    if std::fs::metadata(dir).unwrap().uid() != 1000 {
        return;
    }
    let ok = Command::new("chown")
        .args(["-R", "1000:1000"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(ok.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_agents_work_lands_and_it_goes_on_from_the_new_base() {
    crate::require_docker!();
    let repo = crate::workspace::user_repo();
    let ws = format!(
        "workspace = {{ repo = \"{}\", base = \"main\" }}",
        repo.path().display()
    );
    let (hub, _guard) =
        crate::docker_support::hub_with_agents(&crate::docker_support::agent_toml("w1", &ws)).await;
    let sid = crate::workspace::session_of(&hub, "w1").await;
    crate::workspace::run(&hub, &sid, "cd /workspace").await;
    crate::workspace::commit_a_file(&hub, &sid, "w1").await;
    // The user moves main meanwhile, in their own work tree.
    std::fs::write(repo.path().join("USER.md"), "from the user\n").unwrap();
    git(repo.path(), &["add", "USER.md"]);
    git(repo.path(), &["commit", "-qm", "User's change"]);
    give_to_agent_user(repo.path());

    let (status, v) = hub
        .post(
            "/v1/agents/w1/merge",
            json!({"continue_from_base": true, "force": true}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["worktree"], "updated", "{v}");
    let log = git(repo.path(), &["log", "--format=%s", "-1", "main"]);
    assert_eq!(log, "Merge branch 'agent/w1'\n");
    assert!(
        repo.path().join("w1.txt").exists(),
        "the user's work tree has the agent's file"
    );

    // The agent's checkout is at the new base, and the agent goes on working in it as its
    // own user: the files and the index the hub wrote are its.
    let seen = crate::workspace::run(
        &hub,
        &sid,
        "cat USER.md && git --no-pager log --format=%s -1",
    )
    .await;
    assert_eq!(seen, "from the user\nMerge branch 'agent/w1'\n");
    crate::workspace::run(
        &hub,
        &sid,
        "echo more >> USER.md && git commit -qam 'w1 goes on' && git status --short",
    )
    .await;
    let log = git(repo.path(), &["log", "--format=%s", "-1", "agent/w1"]);
    assert_eq!(log, "w1 goes on\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_another_engine_lands_what_it_pushed_and_nothing_moves_its_branch() {
    let repo = repo();
    // Its branch, as it pushed it: a commit on agent/r1 in the user's repository.
    git(repo.path(), &["switch", "-q", "-c", "agent/r1"]);
    std::fs::write(repo.path().join("pushed.txt"), "p\n").unwrap();
    git(repo.path(), &["add", "pushed.txt"]);
    git(repo.path(), &["commit", "-qm", "r1: pushed.txt"]);
    git(repo.path(), &["switch", "-q", "main"]);
    let agents = format!(
        "[[agents]]\nid = \"r1\"\nimage = \"img\"\ndocker_host = \"tcp://127.0.0.1:9\"\n\
         hub_url = \"http://127.0.0.1:9\"\nworkspace = {{ repo = \"{}\", base = \"main\" }}\n",
        repo.path().display()
    );
    let parsed = agent_hub::config::HubConfig::parse(&agents, "test.toml").expect("parses");
    let hub = TestHub::start_with(|c| c.agents = parsed.agents.clone()).await;
    let tip = git(repo.path(), &["rev-parse", "agent/r1"]);

    for (path, body) in [
        ("merge", json!({"continue_from_base": true})),
        ("update", json!({})),
    ] {
        let (status, v) = hub.post(&format!("/v1/agents/r1/{path}"), body).await;
        refused(status, &v, 409, "WORKSPACE_REMOTE");
    }
    assert_eq!(git(repo.path(), &["rev-parse", "agent/r1"]), tip);
    let (status, v) = hub.post("/v1/agents/r1/merge", json!({})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        git(repo.path(), &["log", "--format=%s", "-1", "main"]),
        "r1: pushed.txt\n"
    );
}
