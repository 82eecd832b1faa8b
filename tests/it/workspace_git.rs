//! An agent's workspace served over git's smart HTTP (`/v1/agents/{id}/git`), with the host's
//! git standing in for the agent's and credentials minted as a start mints them: no engine
//! needed. The agent sees its branch and the base only, pushes its branch only (fast-forward,
//! never a deletion), another agent's credential reaches nothing, and every refusal is in the
//! audit log. The same over a real remote engine is `workspace_remote`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use agent_hub::actor::AgentIdentity;
use serde_json::Value;

use crate::support::{wait_until, TestHub};
use crate::workspace::{git, user_repo};

/// Runs the host's git as a client of the hub presenting `token`; the whole output.
fn git_as(token: &str, dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            &format!("http.extraHeader=Authorization: Bearer {token}"),
        ])
        .args([
            "-c",
            "user.name=Agent",
            "-c",
            "user.email=agent@example.com",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("git")
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A hub with agents `w1` and `w2` on a remote engine (never reached here) sharing `repo`.
async fn hub_on(repo: &Path) -> TestHub {
    let agents: String = ["w1", "w2"]
        .iter()
        .map(|id| {
            format!(
                "[[agents]]\nid = \"{id}\"\nimage = \"img\"\ndocker_host = \"tcp://127.0.0.1:9\"\n\
                 hub_url = \"http://127.0.0.1:9\"\nworkspace = {{ repo = \"{}\", base = \"main\" }}\n",
                repo.display()
            )
        })
        .collect();
    let parsed = agent_hub::config::HubConfig::parse(&agents, "test.toml").expect("parses");
    TestHub::start_with(|c| c.agents = parsed.agents.clone()).await
}

fn credential(hub: &TestHub, id: &str) -> String {
    let who = AgentIdentity {
        agent_id: id.into(),
        team: "default".into(),
        leader: false,
        may_merge: false,
    };
    hub.hub.credentials().mint(id, who)
}

async fn git_audit(hub: &TestHub) -> Vec<Value> {
    let (_, v) = hub.get("/v1/pty-traffic/events?action=git_push").await;
    let (_, f) = hub.get("/v1/pty-traffic/events?action=git_fetch").await;
    let mut all = v["events"].as_array().cloned().unwrap_or_default();
    all.extend(f["events"].as_array().cloned().unwrap_or_default());
    all
}

/// Waits for an audit record whose error code is `code` and whose text has `needle`.
async fn audited(hub: &TestHub, code: &str, needle: &str) -> Value {
    let find = || async {
        git_audit(hub)
            .await
            .into_iter()
            .find(|r| r["error_code"] == code && r.to_string().contains(needle))
    };
    let seen = wait_until(Duration::from_secs(5), || async { find().await.is_some() }).await;
    assert!(
        seen,
        "no {code} record with {needle:?}: {:?}",
        git_audit(hub).await
    );
    find().await.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_fetches_and_pushes_its_own_branch_only() {
    let repo = user_repo();
    for id in ["w1", "w2"] {
        // As an agent's start makes it (given to the repository's owner by a root hub).
        let branch = format!("agent/{id}");
        let made = agent_hub::workspace::ensure_branch(&agent_hub::workspace::Branch {
            repo: repo.path(),
            base: "main",
            branch: &branch,
        });
        assert!(made.unwrap());
    }
    git(repo.path(), &["branch", "secret", "main"]);
    let hub = hub_on(repo.path()).await;
    let (t1, t2) = (credential(&hub, "w1"), credential(&hub, "w2"));
    let url = format!("{}/v1/agents/w1/git", hub.base);
    let clones = tempfile::tempdir().unwrap();
    let clone = clones.path().join("w1");

    // Only its branch and the base are in view.
    let out = git_as(&t1, clones.path(), &["ls-remote", &url]);
    assert!(out.status.success(), "{}", said(&out));
    let refs = String::from_utf8_lossy(&out.stdout).into_owned();
    let names: Vec<&str> = refs.lines().filter_map(|l| l.split('\t').nth(1)).collect();
    assert_eq!(names, ["refs/heads/agent/w1", "refs/heads/main"], "{refs}");

    let out = git_as(
        &t1,
        clones.path(),
        &["clone", "-q", "-b", "agent/w1", &url, "w1"],
    );
    assert!(out.status.success(), "{}", said(&out));
    std::fs::write(clone.join("w1.txt"), "from w1\n").unwrap();
    git(&clone, &["add", "w1.txt"]);
    git(&clone, &["commit", "-qm", "Add w1.txt"]);
    let out = git_as(&t1, &clone, &["push", "-q", "origin", "agent/w1"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        git(repo.path(), &["log", "--format=%s", "agent/w1"]),
        "Add w1.txt\nStart\n"
    );
    // (The audit writes its records a moment after the answer.)
    let on_record = |pushed: &[Value]| {
        pushed.iter().any(|r| {
            r["success"] == true
                && r["agent_id"] == "w1"
                && r["command"]
                    .as_str()
                    .unwrap_or("")
                    .contains("refs/heads/agent/w1")
        })
    };
    let seen = wait_until(Duration::from_secs(5), || async {
        on_record(&git_audit(&hub).await)
    })
    .await;
    assert!(seen, "{:?}", git_audit(&hub).await);

    // Another branch: refused before git sees it, in git's words, and on record.
    let out = git_as(&t1, &clone, &["push", "origin", "HEAD:main"]);
    assert!(!out.status.success());
    let text = said(&out);
    assert!(
        text.contains("[remote rejected]") && text.contains("only its own branch agent/w1"),
        "{text}"
    );
    assert_eq!(git(repo.path(), &["log", "--format=%s", "main"]), "Start\n");
    audited(&hub, "WORKSPACE_PUSH_REFUSED", "refs/heads/main").await;

    // Another agent's branch, and deleting its own: refused too.
    let out = git_as(&t1, &clone, &["push", "origin", "HEAD:agent/w2"]);
    assert!(!out.status.success(), "{}", said(&out));
    let out = git_as(&t1, &clone, &["push", "origin", ":agent/w1"]);
    assert!(!out.status.success(), "{}", said(&out));
    audited(&hub, "WORKSPACE_PUSH_REFUSED", "may not be deleted").await;

    // A force push over a commit the agent has not seen (made on the hub's machine).
    let tree = git(repo.path(), &["rev-parse", "agent/w1^{tree}"]);
    let tip = git(repo.path(), &["rev-parse", "agent/w1"]);
    let theirs = git(
        repo.path(),
        &[
            "commit-tree",
            "-p",
            tip.trim(),
            "-m",
            "The user's",
            tree.trim(),
        ],
    );
    git(
        repo.path(),
        &["update-ref", "refs/heads/agent/w1", theirs.trim()],
    );
    std::fs::write(clone.join("w1.txt"), "rewritten\n").unwrap();
    git(&clone, &["commit", "-qam", "Rewrite"]);
    let out = git_as(&t1, &clone, &["push", "--force", "origin", "agent/w1"]);
    assert!(!out.status.success(), "{}", said(&out));
    assert_eq!(
        git(repo.path(), &["rev-parse", "agent/w1"]).trim(),
        theirs.trim(),
        "the user's commit is kept"
    );
    audited(&hub, "WORKSPACE_PUSH_REFUSED", "non-fast-forward").await;

    // Another agent's credential reaches nothing of w1's, and is on record.
    let other = clones.path().join("other");
    let out = git_as(&t2, clones.path(), &["clone", "-q", &url, "other"]);
    assert!(!out.status.success() && !other.join(".git").exists());
    let out = git_as(&t2, &clone, &["push", "origin", "agent/w1"]);
    assert!(!out.status.success(), "{}", said(&out));
    let refused = audited(&hub, "WORKSPACE_NOT_YOURS", "agent 'w2'").await;
    assert_eq!(refused["agent_id"], "w1", "{refused}");
    assert_eq!(refused["actor_agent_id"], "w2", "{refused}");

    // The owner's token reads, and pushes nothing.
    let out = git_as(&hub.owner_token, clones.path(), &["ls-remote", &url]);
    assert!(out.status.success(), "{}", said(&out));
    let out = git_as(&hub.owner_token, &clone, &["push", "origin", "agent/w1"]);
    assert!(!out.status.success(), "{}", said(&out));
    audited(&hub, "WORKSPACE_PUSH_REFUSED", "own credential").await;
}
