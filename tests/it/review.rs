//! Review notes to an agent (`POST /v1/agents/{id}/review`, `agent-hub review`, MCP
//! `k_agents review`): refused when bad, scoped to a leader's team (no containers); delivered to
//! the fake agent TUI in a container with a workspace, queued while it works and typed once it
//! is idle, once; and to the real, pinned Claude Code in a container against the model
//! stand-in, whose request log shows one user message with the file, the line, the hunk and
//! the note.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::BIN;
use crate::docker_support::{test_image, unique_hub_id, ContainerGuard};
use crate::model_standin::ModelStandIn;
use crate::policy_support::{hub_with_policies, policies_dir};
use crate::real_cli::{cli, write_claude_config};
use crate::real_cli_docker::{claude_agent, open_up, start_synced};
use crate::require_docker;
use crate::support::{wait_until, TestHub};
use crate::workspace::{git, user_repo};

const T: Duration = Duration::from_secs(30);

fn code(v: &Value) -> &str {
    v["error_code"].as_str().unwrap_or("")
}

/// `agent-hub ARGS` against `hub` with `token`.
fn cli_as(hub: &TestHub, token: &str, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .args(["--hub", &hub.base, "--token", token])
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_notes_are_refused_and_a_leader_reviews_its_own_team_only() {
    let f = crate::scope::fleet().await;
    let hub = &f.hub;
    let review = |agent: &str| format!("/v1/agents/{agent}/review");
    let note = |n: &str| json!({"note": n});
    let many: Vec<Value> = (0..51).map(|i| note(&format!("n{i}"))).collect();
    for (body, words) in [
        (json!({"notes": []}), "no notes"),
        (json!({"notes": many}), "51 notes: at most 50"),
        (
            json!({"notes": [note(" \n\t")]}),
            "note 1: its text is blank",
        ),
        (
            json!({"notes": [note("ok"), {"note": "x", "line": 3}]}),
            "note 2: a line needs its file",
        ),
        (
            json!({"notes": [{"note": "x", "file": "a.rs", "line": 0}]}),
            "lines count from 1",
        ),
        (
            json!({"notes": [{"note": "x", "side": "left"}]}),
            "unknown field",
        ),
        (
            json!({"notes": [note("x")], "extra": true}),
            "unknown field",
        ),
        (json!({}), "notes"),
    ] {
        let (status, v) = hub.post(&review("w1"), body.clone()).await;
        assert_eq!((status, code(&v)), (400, "BAD_REQUEST"), "{body}: {v}");
        assert!(
            v["message"].as_str().unwrap().contains(words),
            "{body}: {v}"
        );
    }
    let ok = json!({"notes": [{"note": "x", "file": "a.rs", "line": 2}]});
    let (status, v) = hub.post(&review("w1"), ok.clone()).await;
    assert_eq!((status, code(&v)), (404, "NO_WORKSPACE"), "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("workspace = {"),
        "{v}"
    );
    let (status, v) = hub.post(&review("nobody"), ok.clone()).await;
    assert_eq!((status, code(&v)), (404, "AGENT_NOT_FOUND"), "{v}");

    // Agent credentials: a leader passes the scope for its team (and reaches the workspace
    // check), not for another team's worker; a worker reviews nobody, not even itself.
    let body = ok.to_string();
    for (token, target, want) in [
        (&f.lead, "w1", "NO_WORKSPACE"),
        (&f.lead, "wb", "AGENT_NOT_FOUND"),
        (&f.w1, "w1", "FORBIDDEN"),
        (&f.w1, "w2", "AGENT_NOT_FOUND"),
        (&f.w1, "lead", "AGENT_NOT_FOUND"),
    ] {
        let (_, v) = f
            .call(token, &format!("POST /v1/agents/{target}/review"), &body)
            .await;
        assert_eq!(code(&v), want, "{target}: {v}");
    }

    // The same through MCP's k_agents review, with the leader's credential.
    let client = crate::mcp::http_client(hub, &f.lead).await;
    let notes = json!([{"note": "x", "file": "a.rs", "line": 2}]);
    let args = |agent: &str| json!({"action": "review", "agent_id": agent, "notes": notes});
    crate::mcp::refused(&client, "k_agents", args("w1"), "NO_WORKSPACE").await;
    crate::mcp::refused(&client, "k_agents", args("wb"), "AGENT_NOT_FOUND").await;
    let no_notes = json!({"action": "review", "agent_id": "w1"});
    crate::mcp::refused(&client, "k_agents", no_notes, "BAD_REQUEST").await;
    client.cancel().await.unwrap();

    // The CLI: --help explains; --line needs --file; --json gives the error's shape.
    let help = cli_as(hub, &hub.owner_token, &["review", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for words in ["--file", "--line", "hunk", "queued", "--json"] {
        assert!(help.contains(words), "{words}: {help}");
    }
    let no_file = cli_as(hub, &hub.owner_token, &["review", "w1", "--line", "3", "x"]);
    assert_eq!(no_file.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_file.stderr).contains("--file"));
    let out = cli_as(hub, &hub.owner_token, &["review", "w1", "--json", "x"]);
    assert_ne!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&v), "NO_WORKSPACE", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_never_started_has_no_checkout_and_no_session_to_review() {
    let repo = user_repo();
    let toml = format!(
        "[[agents]]\nid = \"fresh\"\nimage = \"none\"\n\
         workspace = {{ repo = \"{}\", base = \"main\" }}\n",
        repo.path().display()
    );
    let parsed = agent_hub::config::HubConfig::parse(&toml, "test.toml").unwrap();
    let hub = TestHub::start_with(|c| c.agents = parsed.agents.clone()).await;
    let body = json!({"notes": [{"note": "x", "file": "a.rs", "line": 2}]});
    // Past the changes (none yet, no checkout), refused where the prompt would go: it runs
    // nowhere and its policy does not start it on a message.
    let (status, v) = hub.post("/v1/agents/fresh/review", body).await;
    assert_eq!((status, code(&v)), (404, "NOT_FOUND"), "{v}");
}

/// A container agent `id` running the fake agent TUI with a workspace on `repo`, under the
/// policy `wake` (`start_on_message`).
pub(crate) fn fake_agent_toml(hub_id: &str, id: &str, repo: &std::path::Path) -> String {
    format!(
        "hub_id = \"{hub_id}\"\n[[agents]]\nid = \"{id}\"\nimage = \"{}\"\n\
         command = [\"bash\", \"/fixtures/fake-agent.sh\"]\n\
         mounts = [\"{}/tests/fixtures:/fixtures:ro\"]\nnetwork = \"none\"\ncli_type = \"fake\"\n\
         ready_pattern = 'fake> '\nready_timeout = 30\nstop_grace = 1\npolicy = \"wake\"\n\
         workspace = {{ repo = \"{}\", base = \"main\" }}\n",
        test_image(),
        env!("CARGO_MANIFEST_DIR"),
        repo.display()
    )
}

/// Commits `file` with `text` on the agent's branch, in its checkout (host git), leaving what
/// git wrote to the repository's owner (the agents' user, as `user_repo` makes it).
pub(crate) async fn commit_in_checkout(hub: &TestHub, agent: &str, file: &str, text: &str) {
    let (_, v) = hub.get(&format!("/v1/agents/{agent}")).await;
    let checkout = std::path::PathBuf::from(v["agent"]["workspace"]["path"].as_str().unwrap());
    std::fs::write(checkout.join(file), text).unwrap();
    git(&checkout, &["add", file]);
    git(&checkout, &["commit", "-qm", &format!("Add {file}")]);
    let common = git(
        &checkout,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    );
    let owner = std::fs::metadata(v["agent"]["workspace"]["repo"].as_str().unwrap()).unwrap();
    use std::os::unix::fs::MetadataExt;
    let who = format!("{}:{}", owner.uid(), owner.gid());
    for dir in [common.trim(), checkout.to_str().unwrap()] {
        let chowned = Command::new("chown")
            .args(["-R", &who, dir])
            .status()
            .unwrap();
        assert!(chowned.success(), "chown {dir}");
    }
}

pub(crate) async fn output(hub: &TestHub, sid: &str) -> String {
    let path = format!("/v1/pty/sessions/{sid}/read?since=0&max_bytes=1000000&timeout_ms=0");
    hub.get(&path).await.1["output"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

async fn state(hub: &TestHub, agent: &str) -> Value {
    hub.get(&format!("/v1/agents/{agent}/state")).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_sent_while_the_agent_works_is_typed_once_it_is_idle() {
    require_docker!();
    let repo = user_repo();
    let hub_id = unique_hub_id();
    let _guard = ContainerGuard(hub_id.clone());
    let dir = policies_dir();
    // Its team's leader (never started: its credential is enough to review through MCP).
    let leader = format!(
        "[[agents]]\nid = \"lead\"\nimage = \"{}\"\nowner_role = \"leader\"\n",
        test_image()
    );
    let toml = fake_agent_toml(&hub_id, "rv", repo.path()) + &leader;
    let hub = hub_with_policies(&dir, &toml).await;
    let (sid, _session) = start_synced(&hub, "rv").await;
    commit_in_checkout(&hub, "rv", "app.txt", "one\ntwo\nthree\n").await;

    // The agent works for 6 s.
    let (status, v) = hub
        .post(
            "/v1/pty/send_line_to_agent",
            json!({"agent_id": "rv", "data": "work 6"}),
        )
        .await;
    assert_eq!(
        (status, v["receipt"].as_str()),
        (200, Some("submitted")),
        "{v}"
    );
    let working = wait_until(T, || async {
        state(&hub, "rv").await["state"] == "working"
    });
    assert!(working.await, "{}", state(&hub, "rv").await);

    let note = "rename two to deux";
    let body = json!({"notes": [
        {"note": note, "file": "app.txt", "line": 2},
        {"note": "otherwise fine"},
    ]});
    let (status, v) = hub.post("/v1/agents/rv/review", body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["receipt"], "queued", "{v}");
    assert_eq!(
        (v["notes"].as_u64(), v["branch"].as_str()),
        (Some(2), Some("agent/rv"))
    );
    let prompt = v["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("File app.txt, line 2, in this hunk of your committed changes:\n```diff\n@@ -0,0 +1,3 @@\n+one\n+two\n+three\n```\nNote: rename two to deux"),
        "{prompt}"
    );

    // Not typed into its work: nothing of it on the pane while it works.
    while state(&hub, "rv").await["state"] == "working" {
        assert!(
            !output(&hub, &sid).await.contains(note),
            "typed while working"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let echoed = "echo: Review notes on your branch agent/rv (against main), 2 notes.";
    hub.wait_output(&sid, echoed, T).await;
    let out = output(&hub, &sid).await;
    let (done, review) = (out.find("done: 6").unwrap(), out.find(echoed).unwrap());
    assert!(done < review, "{out}");
    assert!(out[review..].contains(note), "{out}");
    // Once: nothing types it again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(output(&hub, &sid).await.matches(echoed).count(), 1);

    // Audited once, as its own action, on the agent.
    let (_, audit) = hub.get("/v1/pty-traffic/events?action=agent_review").await;
    assert_eq!(audit["total"], 1, "{audit}");
    assert_eq!(audit["events"][0]["success"], true, "{audit}");

    // The CLI, to the idle agent: submitted at once.
    let out = cli_as(
        &hub,
        &hub.owner_token,
        &[
            "review",
            "rv",
            "--file",
            "app.txt",
            "--line",
            "3",
            "three is odd",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.trim(), "1 review note on agent/rv to rv: submitted");
    hub.wait_output(&sid, "Note: three is odd", T).await;

    // Its leader reviews it through MCP's k_agents review: one prompt with the hunk, typed.
    let who = hub.hub.agents().identity("lead").unwrap();
    let lead = hub.hub.credentials().mint("lead", who);
    let notes = json!([{"note": "from the leader", "file": "app.txt", "line": 1}]);
    let args = json!({"action": "review", "agent_id": "rv", "notes": notes});
    let v = crate::land::k_agents(&hub, &lead, args).await;
    // Typed at once, or once the agent is done with the note before (it may still work on it).
    let receipt = v["receipt"].as_str();
    assert!(matches!(receipt, Some("submitted" | "queued")), "{v}");
    assert_eq!(v["branch"], "agent/rv", "{v}");
    hub.wait_output(&sid, "Note: from the leader", T).await;
    let (_, audit) = hub.get("/v1/pty-traffic/events?action=agent_review").await;
    assert_eq!(audit["total"], 3, "{audit}");

    // Stopped, its policy starts it for the notes (its checkout kept, so the hunk is there).
    let (status, v) = hub.post("/v1/agents/rv/stop", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let body = json!({"notes": [{"note": "after a stop", "file": "app.txt", "line": 1}]});
    let (status, v) = hub.post("/v1/agents/rv/review", body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["started"].as_bool(), v["receipt"].as_str()),
        (Some(true), Some("submitted")),
        "{v}"
    );
    assert!(
        v["prompt"]
            .as_str()
            .unwrap()
            .contains("+one\n+two\n+three\n```\nNote: after a stop"),
        "{v}"
    );
    let new_sid = v["resolved_session_id"].as_str().unwrap();
    assert_ne!(new_sid, sid);
    hub.wait_output(new_sid, "Note: after a stop", T).await;
}

/// The text of every content block of the user messages of a model request body, with
/// line breaks as `\n`.
fn user_texts(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        if m["role"] != "user" {
            continue;
        }
        match &m["content"] {
            Value::String(s) => out.push(s.clone()),
            Value::Array(blocks) => out.extend(
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str().map(str::to_string)),
            ),
            _ => {}
        }
    }
    // However the CLI ends the pasted lines.
    out.iter()
        .map(|t| t.replace("\r\n", "\n").replace('\r', "\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_note_reaches_claude_code_as_one_prompt_with_its_hunk() {
    require_docker!();
    let Some(_) = cli("claude") else { return };
    let standin = ModelStandIn::start().await;
    let repo = user_repo();
    let files = tempfile::tempdir().unwrap();
    write_claude_config(&files.path().join("claude"), "/workspace", false);
    open_up(files.path());
    let hub_id = unique_hub_id();
    let _guard = ContainerGuard(hub_id.clone());
    let workspace = format!(
        "workspace = {{ repo = \"{}\", base = \"main\" }}\n",
        repo.path().display()
    );
    let agent = claude_agent(&hub_id, files.path(), &standin, "", &workspace);
    let dir = policies_dir();
    let hub = hub_with_policies(&dir, &agent).await;
    let (_, session) = start_synced(&hub, "cc").await;
    let code = "def greet(name):\n    return 'hi ' + name\n\n\ndef part():\n    return 42\n";
    commit_in_checkout(&hub, "cc", "greet.py", code).await;
    let idle = wait_until(T, || async {
        session.state_report().state == agent_hub::agent_state::State::Idle
    });
    assert!(idle.await, "{:?}", session.state_report());

    let note = "use an f-string for the greeting";
    let body = json!({"notes": [{"note": note, "file": "greet.py", "line": 2}]});
    let (status, v) = hub.post("/v1/agents/cc/review", body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["receipt"], "submitted", "{v}");

    // The stand-in got one user message with the file, the line, the hunk and the note.
    let arrived = wait_until(T, || async { !standin.turns_with("f-string").is_empty() });
    assert!(arrived.await, "{}", session.with_screen(|s| s.text()));
    let hunk = "@@ -0,0 +1,6 @@\n+def greet(name):\n+    return 'hi ' + name\n+\n+\n+def part():\n+    return 42";
    let bodies = standin.turns_with("f-string");
    let prompts: Vec<String> = bodies
        .iter()
        .flat_map(|b| user_texts(&serde_json::from_str(b).unwrap()))
        .filter(|t| t.contains(note))
        .collect();
    let one = prompts.iter().find(|t| {
        t.contains("Review notes on your branch agent/cc")
            && t.contains("File greet.py, line 2,")
            && t.contains(hunk)
            && t.contains(&format!("Note: {note}"))
    });
    assert!(one.is_some(), "{prompts:?}");
}
