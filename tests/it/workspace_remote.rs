//! Workspaces on a remote engine, for real: two agents on an engine that cannot see the hub's
//! files (`AGENT_HUB_REMOTE_ENGINE`, a second `dockerd` of its own; else the local engine over
//! TCP, `AGENT_HUB_DOCKER_TCP`, which the hub treats as remote), one repository on the hub's
//! machine. Each clones its branch from the hub into a volume on that engine, commits, and its
//! commit reaches `agent/<id>` in the repository when its turn ends; neither sees the other's
//! files; `changes` lists the committed files and the uncommitted ones (read in the
//! container); a push to `main`, a force push and a push with the other agent's credential are
//! refused and on record.

use std::time::Duration;

use serde_json::json;

use crate::docker_support::{hub_with_agents_on, test_image};
use crate::require_docker;
use crate::support::{wait_until, TestHub};
use crate::workspace::{commit_a_file, git, names, run, session_of, user_repo};

/// Runs a shell line that must fail; what it printed.
async fn refused(hub: &TestHub, sid: &str, line: &str) -> String {
    let v = hub.talk(sid, line).await;
    assert_ne!(v["exit_code"], 0, "{line}: {v}");
    v["output"].as_str().unwrap().to_string()
}

/// git in the agent's terminal with its own credential.
const AS_AGENT: &str = "git -c \"http.extraHeader=Authorization: Bearer $AGENT_HUB_TOKEN\"";

async fn audited(hub: &TestHub, code: &str, needle: &str) -> bool {
    wait_until(Duration::from_secs(10), || async {
        let (_, v) = hub.get("/v1/pty-traffic/events?action=git_push").await;
        v["events"].as_array().is_some_and(|all| {
            all.iter()
                .any(|r| r["error_code"] == code && r.to_string().contains(needle))
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_on_a_remote_engine_clone_commit_and_push_their_own_branches() {
    require_docker!();
    let Some(rig) = crate::docker_support::remote_engine() else {
        return;
    };
    let engine = rig.endpoint.clone();
    let repo = user_repo();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hub_url = format!("http://{}", listener.local_addr().unwrap());
    // w1's tmux is started by the hub, w2's by the image's entrypoint (which waits for the
    // clone before it starts the program).
    let agent = |id: &str, start_tmux: &str| {
        format!(
            "[[agents]]\nid = \"{id}\"\nimage = \"{}\"\ncommand = [\"bash\", \"--norc\", \"--noprofile\"]\n\
             cli_type = \"shell\"\nnetwork = \"host\"\nready_pattern = '[$#] *$'\nready_timeout = 30\n\
             stop_grace = 2\nstart_tmux = \"{start_tmux}\"\ndocker_host = \"{engine}\"\nhub_url = \"{hub_url}\"\n\
             workspace = {{ repo = \"{}\", base = \"main\" }}\n",
            test_image(),
            repo.path().display()
        )
    };
    let agents = format!("{}{}", agent("w1", "hub"), agent("w2", "image"));
    let (hub, _guard) = hub_with_agents_on(listener, &engine, &agents).await;
    let (s1, s2) = (session_of(&hub, "w1").await, session_of(&hub, "w2").await);

    // Each has its branch cloned at its workdir, and commits there; the commit is on its
    // branch in the user's repository once its turn ends.
    for (sid, me) in [(&s1, "w1"), (&s2, "w2")] {
        let status = run(&hub, sid, "cd /workspace && git status --short --branch").await;
        assert!(
            status.starts_with(&format!("## agent/{me}...origin/agent/{me}")),
            "{status}"
        );
        commit_a_file(&hub, sid, me).await;
        let branch = format!("agent/{me}");
        let pushed = wait_until(Duration::from_secs(20), || async {
            let log = git(repo.path(), &["log", "--format=%s", &branch]);
            log == format!("Add {me}.txt\nStart\n")
        })
        .await;
        assert!(
            pushed,
            "{me}: {}",
            git(repo.path(), &["log", "--format=%s", &branch])
        );
        // Its work summary is read from the pushed branch, after the push.
        let path = format!("/v1/agents/{me}");
        let counted = wait_until(Duration::from_secs(20), || async {
            hub.get(&path).await.1["agent"]["work"]["ahead"] == 1
        })
        .await;
        assert!(counted, "{me}: {}", hub.get(&path).await.1);
    }
    assert_eq!(git(repo.path(), &["log", "--format=%s", "main"]), "Start\n");

    // Neither sees the other's files, nor its branch.
    assert_eq!(run(&hub, &s1, "ls -1").await, "README.md\nw1.txt\n");
    assert_eq!(run(&hub, &s2, "ls -1").await, "README.md\nw2.txt\n");
    let refs = run(&hub, &s1, &format!("{AS_AGENT} ls-remote origin | cut -f2")).await;
    assert_eq!(refs, "refs/heads/agent/w1\nrefs/heads/main\n");

    // changes: what it pushed, and what it has not committed, read in its container.
    run(
        &hub,
        &s1,
        "echo draft > notes.txt && echo more >> README.md",
    )
    .await;
    let (status, v) = hub.get("/v1/agents/w1/changes?full=true").await;
    assert_eq!(status, 200, "{v}");
    let changes = &v["changes"];
    assert_eq!(changes["commits"][0]["subject"], "Add w1.txt", "{v}");
    assert_eq!(
        names(&changes["committed"]),
        [("w1.txt".into(), "added".into())]
    );
    let mut uncommitted = names(&changes["uncommitted"]);
    uncommitted.sort();
    assert_eq!(
        uncommitted,
        [
            ("README.md".to_string(), "modified".to_string()),
            ("notes.txt".into(), "untracked".into())
        ],
        "{v}"
    );
    assert!(
        changes["diff"]["uncommitted"]
            .as_str()
            .unwrap()
            .contains("+draft"),
        "{v}"
    );

    // A push to main with its own credential: refused, in git's words, and on record.
    let said = refused(&hub, &s1, &format!("{AS_AGENT} push origin HEAD:main")).await;
    assert!(said.contains("[remote rejected]"), "{said}");
    assert_eq!(git(repo.path(), &["log", "--format=%s", "main"]), "Start\n");
    assert!(audited(&hub, "WORKSPACE_PUSH_REFUSED", "refs/heads/main").await);

    // A force push over what the branch has: refused by git, and on record.
    run(&hub, &s1, "git commit -q --amend -m 'Rewritten'").await;
    let said = refused(
        &hub,
        &s1,
        &format!("{AS_AGENT} push --force origin agent/w1"),
    )
    .await;
    assert!(said.contains("rejected"), "{said}");
    assert!(audited(&hub, "WORKSPACE_PUSH_REFUSED", "non-fast-forward").await);
    assert_eq!(
        git(repo.path(), &["log", "--format=%s", "agent/w1"]),
        "Add w1.txt\nStart\n"
    );

    // w2's credential on w1's repository: refused, and on record.
    let url = format!("{hub_url}/v1/agents/w1/git");
    let said = refused(&hub, &s2, &format!("{AS_AGENT} push {url} HEAD:agent/w1")).await;
    assert!(said.contains("403"), "{said}");
    let (_, v) = hub.get("/v1/pty-traffic/events?action=git_push").await;
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["error_code"] == "WORKSPACE_NOT_YOURS" && r["actor_agent_id"] == "w2"),
        "{v}"
    );

    // A commit made just before a stop is on the branch when the stop returns; the credential
    // the hub's git used is nowhere in the clone.
    assert_eq!(
        run(&hub, &s2, "grep -c Authorization .git/config || true").await,
        "0\n"
    );
    run(
        &hub,
        &s2,
        "echo last > last.txt && git add last.txt && git commit -qm Last",
    )
    .await;
    let (status, v) = hub.post("/v1/agents/w2/stop", json!({})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        git(repo.path(), &["log", "--format=%s", "agent/w2"]),
        "Last\nAdd w2.txt\nStart\n"
    );
    let (status, v) = hub.delete("/v1/agents/w2/workspace?force=true").await;
    assert_eq!(
        (status, &v["error_code"]),
        (409, &json!("WORKSPACE_REMOTE")),
        "{v}"
    );
    hub.post("/v1/agents/w1/stop", json!({})).await;
}
