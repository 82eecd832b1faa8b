//! Tasks: PTY tasks (state, exit code, timeout, cancel with children, wait, events in order,
//! output as a session), piped tasks (`pty: false`), hub shutdown, and `agent-hub run`.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_hub::protocol::EventKind;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::cli::BIN;
use crate::support::{post_json, process_alive, session_runs, wait_until, TestHub, Ws};

const T: Duration = Duration::from_secs(10);

/// Starts a PTY task; returns its id and its session id.
async fn start(hub: &TestHub, body: Value) -> (String, String) {
    let (status, v) = hub.post("/v1/tasks", body).await;
    assert_eq!(status, 200, "start failed: {v}");
    assert_eq!(v["status"], "started", "{v}");
    (
        v["taskId"].as_str().expect("taskId").to_string(),
        v["sessionId"].as_str().expect("sessionId").to_string(),
    )
}

/// `POST /v1/tasks/{id}/wait`; returns the reply.
async fn wait(hub: &TestHub, id: &str, timeout_ms: u64) -> Value {
    let (status, v) = hub
        .post(
            &format!("/v1/tasks/{id}/wait?timeout_ms={timeout_ms}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

/// Waits until the task has finished; returns it.
async fn finished(hub: &TestHub, id: &str) -> Value {
    let v = wait(hub, id, 20_000).await;
    assert_eq!(v["finished"], true, "task did not finish: {v}");
    v["task"].clone()
}

async fn task(hub: &TestHub, id: &str) -> Value {
    let (status, v) = hub.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(status, 200, "{v}");
    v["task"].clone()
}

/// All the session's output so far, as text.
async fn session_output(hub: &TestHub, sid: &str) -> String {
    let (status, v) = hub
        .get(&format!(
            "/v1/pty/sessions/{sid}/read?since=0&timeout_ms=0&max_bytes=1048576"
        ))
        .await;
    assert_eq!(status, 200, "{v}");
    v["output"].as_str().unwrap().to_string()
}

use agent_hub::process::group_processes;

fn count_sleeps(pids: &[u32]) -> usize {
    pids.iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
        })
        .count()
}

/// Collects task events from the events socket until every task in `ids` has finished.
async fn collect_task_events(ws: &mut Ws, ids: &[&str]) -> BTreeMap<String, Vec<Value>> {
    let mut by_task: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let all_done = |m: &BTreeMap<String, Vec<Value>>| {
        ids.iter().all(|id| {
            m.get(*id)
                .is_some_and(|evs| evs.iter().any(|e| e["type"] == "task_finished"))
        })
    };
    while !all_done(&by_task) {
        let frame = tokio::time::timeout_at(deadline, ws.next()).await;
        let text = match frame {
            Ok(Some(Ok(Message::Text(t)))) => t,
            Ok(Some(Ok(_))) => continue,
            other => panic!("events ended early: {other:?}; so far {by_task:?}"),
        };
        let event: Value = serde_json::from_str(text.as_str()).expect("event json");
        assert_ne!(event["type"], "events_dropped", "{event}");
        if let Some(id) = event["taskId"].as_str() {
            by_task.entry(id.to_string()).or_default().push(event);
        }
    }
    by_task
}

/// Checks started → ≥1 log → finished; returns the logged text.
fn check_order(id: &str, evs: &[Value]) -> String {
    let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"task_started"), "{id}: {kinds:?}");
    assert_eq!(kinds.last(), Some(&"task_finished"), "{id}: {kinds:?}");
    let middle = &kinds[1..kinds.len() - 1];
    assert!(
        !middle.is_empty() && middle.iter().all(|k| *k == "task_log"),
        "{id}: {kinds:?}"
    );
    evs.iter()
        .filter(|e| e["type"] == "task_log")
        .map(|e| e["chunk"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_succeed_or_fail_with_their_exit_code_and_keep_their_output() {
    let hub = TestHub::start().await;
    let (ok_id, ok_sid) = start(&hub, json!({ "cmd": "echo hello-task", "name": "greet" })).await;
    let (bad_id, bad_sid) = start(&hub, json!({ "cmd": "echo failing >&2; exit 3" })).await;
    let ok = finished(&hub, &ok_id).await;
    assert_eq!(
        (
            ok["state"].as_str(),
            ok["exitCode"].as_i64(),
            ok["name"].as_str()
        ),
        (Some("success"), Some(0), Some("greet")),
        "{ok}"
    );
    assert!(
        ok["durationMs"].is_u64() && ok["finishedAt"].is_string(),
        "{ok}"
    );
    assert_eq!(ok["sessionId"], ok_sid.as_str());
    assert_eq!(ok["cmd"], "echo hello-task");
    let bad = finished(&hub, &bad_id).await;
    assert_eq!(
        (bad["state"].as_str(), bad["exitCode"].as_i64()),
        (Some("error"), Some(3)),
        "{bad}"
    );
    assert_eq!(
        bad["name"], "echo failing >&2; exit 3",
        "the name defaults to the command"
    );

    // The output is a session: read works on it after the task ended.
    assert!(session_output(&hub, &ok_sid).await.contains("hello-task"));
    assert!(session_output(&hub, &bad_sid).await.contains("failing"));
    let info = hub.session(&ok_sid).await;
    assert_eq!(
        (info["alive"].as_bool(), info["exit_code"].as_i64()),
        (Some(false), Some(0))
    );

    let (status, v) = hub.get("/v1/tasks").await;
    assert_eq!((status, v["count"].as_u64()), (200, Some(2)), "{v}");
    assert_eq!(task(&hub, &ok_id).await["state"], "success");
    for (method, path) in [
        (reqwest::Method::GET, "/v1/tasks/task_00000000"),
        (reqwest::Method::DELETE, "/v1/tasks/task_00000000"),
        (reqwest::Method::POST, "/v1/tasks/task_00000000/wait"),
    ] {
        let body = (method == reqwest::Method::POST).then(|| json!({}));
        let (status, v) = hub.request(method, path, body).await;
        assert_eq!(
            (status, v["error_code"].as_str()),
            (404, Some("TASK_NOT_FOUND")),
            "{path}: {v}"
        );
    }
    for bad in [
        json!({ "cmd": "" }),
        json!({ "cmd": "true", "timeout_s": 0 }),
        json!({ "cmd": "true", "bogus": 1 }),
        json!({ "cmd": "true", "env": { "A=B": "x" } }),
    ] {
        let (status, v) = hub.post("/v1/tasks", bad.clone()).await;
        assert_eq!(
            (status, v["error_code"].as_str()),
            (400, Some("BAD_REQUEST")),
            "{bad}: {v}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_the_task() {
    let hub = TestHub::start().await;
    let (id, _) = start(
        &hub,
        json!({ "cmd": "echo begun; sleep 100", "timeout_s": 0.5 }),
    )
    .await;
    let pid = task(&hub, &id).await["pid"].as_u64().unwrap() as u32;
    assert!(wait_until(T, || async { session_runs(pid, "sleep") }).await);
    let procs = agent_hub::process::session_processes(pid);
    let t = finished(&hub, &id).await;
    assert_eq!(
        (t["state"].as_str(), t["exitCode"].as_i64()),
        (Some("timeout"), None),
        "{t}"
    );
    let ms = t["durationMs"].as_u64().unwrap();
    assert!((400..5000).contains(&ms), "{t}");
    for p in procs {
        assert!(!process_alive(p), "process {p} survived the timeout");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_the_task_and_its_children() {
    let hub = TestHub::start().await;
    let (id, sid) = start(
        &hub,
        json!({ "cmd": "sh -c 'sleep 100 & sleep 101 & wait'" }),
    )
    .await;
    let pid = task(&hub, &id).await["pid"].as_u64().unwrap() as u32;
    assert!(
        wait_until(T, || async {
            count_sleeps(&agent_hub::process::session_processes(pid)) == 2
        })
        .await,
        "the children did not start"
    );
    let procs = agent_hub::process::session_processes(pid);
    assert!(procs.len() >= 3, "{procs:?}");
    let (status, v) = hub.delete(&format!("/v1/tasks/{id}")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["task"]["state"], "cancelled", "{v}");
    for p in procs.iter().chain([&pid]) {
        assert!(!process_alive(*p), "process {p} survived the cancel");
    }
    // Cancelling a finished task changes nothing; the session stays, ended.
    let (status, again) = hub.delete(&format!("/v1/tasks/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(again["task"], v["task"]);
    assert_eq!(hub.session(&sid).await["alive"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_returns_the_moment_the_task_ends_or_when_its_timeout_passes() {
    let hub = TestHub::start().await;
    let (id, _) = start(&hub, json!({ "cmd": "sleep 0.5; echo x" })).await;
    let began = Instant::now();
    let v = wait(&hub, &id, 10_000).await;
    let took = began.elapsed();
    assert_eq!(v["finished"], true, "{v}");
    assert_eq!(v["task"]["state"], "success");
    assert!(took < Duration::from_millis(1500), "wait took {took:?}");

    let (slow, _) = start(&hub, json!({ "cmd": "sleep 100" })).await;
    let began = Instant::now();
    let v = wait(&hub, &slow, 300).await;
    let took = began.elapsed();
    assert_eq!(
        (v["finished"].as_bool(), v["task"]["state"].as_str()),
        (Some(false), Some("running"))
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let (status, v) = hub
        .post(
            &format!("/v1/tasks/{slow}/wait?timeout_ms=600001"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (400, Some("BAD_REQUEST"))
    );
    // A waiter blocked on a task sees its cancel at once.
    let h = hub.base.clone();
    let owner = hub.owner_token.clone();
    let slow2 = slow.clone();
    let waiter = tokio::spawn(async move {
        let url = format!("{h}/v1/tasks/{slow2}/wait?timeout_ms=20000");
        post_json(url, &owner, json!({})).await
    });
    hub.delete(&format!("/v1/tasks/{slow}")).await;
    let v = tokio::time::timeout(T, waiter)
        .await
        .expect("waiter returned")
        .unwrap();
    assert_eq!(
        (v["finished"].as_bool(), v["task"]["state"].as_str()),
        (Some(true), Some("cancelled"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_come_in_order_per_task_and_bursts_are_coalesced() {
    let hub = TestHub::start().await;
    let mut ws = hub.connect_ws("/v1/events").await;
    let (a, b, c) = tokio::join!(
        start(
            &hub,
            json!({ "cmd": "for i in 1 2 3; do echo a$i; sleep 0.1; done" })
        ),
        start(&hub, json!({ "cmd": "echo b-out; exit 4" })),
        start(&hub, json!({ "cmd": "seq 1 100000" })),
    );
    let by_task = collect_task_events(&mut ws, &[&a.0, &b.0, &c.0]).await;
    let text_a = check_order(&a.0, &by_task[&a.0]);
    assert_eq!(text_a, "a1\r\na2\r\na3\r\n");
    let text_b = check_order(&b.0, &by_task[&b.0]);
    assert_eq!(text_b, "b-out\r\n");
    let fin_b = by_task[&b.0].last().unwrap();
    assert_eq!(
        (fin_b["state"].as_str(), fin_b["exitCode"].as_i64()),
        (Some("error"), Some(4))
    );
    assert!(fin_b["durationMs"].is_u64(), "{fin_b}");
    let started_a = &by_task[&a.0][0];
    assert!(
        started_a["name"].is_string() && started_a["startedAt"].is_string(),
        "{started_a}"
    );

    let text_c = check_order(&c.0, &by_task[&c.0]);
    let logs_c = by_task[&c.0].len() - 2;
    assert_eq!(text_c.lines().count(), 100_000);
    assert!(text_c.ends_with("99999\r\n100000\r\n"));
    assert!(logs_c < 200, "{logs_c} task_log frames for 100000 lines");
    // Events on the socket match the task's state.
    assert_eq!(task(&hub, &c.0).await["state"], "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_tasks_return_stdout_stderr_and_exit_code() {
    let hub = TestHub::start().await;
    let (status, v) = hub
        .post(
            "/v1/tasks",
            json!({ "cmd": "echo out; echo err >&2; echo \"[$GIVEN][$CARGO_MANIFEST_DIR]\"; exit 5", "pty": false, "env": { "GIVEN": "yes" } }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (
            v["stdout"].as_str(),
            v["stderr"].as_str(),
            v["exitCode"].as_i64()
        ),
        (Some("out\n[yes][]\n"), Some("err\n"), Some(5)),
        "{v}"
    );
    assert!(v["durationMs"].is_u64(), "{v}");
    let t = task(&hub, v["taskId"].as_str().unwrap()).await;
    assert_eq!(
        (t["state"].as_str(), t["pty"].as_bool()),
        (Some("error"), Some(false))
    );
    assert!(t["sessionId"].is_null(), "{t}");

    // A timeout answers PTY_TIMEOUT with the partial output; nothing of the command is left.
    let (status, v) = hub
        .post(
            "/v1/tasks",
            json!({ "cmd": "echo partial; sleep 100", "pty": false, "timeout_s": 0.5 }),
        )
        .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (504, Some("PTY_TIMEOUT")),
        "{v}"
    );
    assert_eq!(
        (v["stdout"].as_str(), v["state"].as_str()),
        (Some("partial\n"), Some("timeout"))
    );
    let id = v["taskId"].as_str().unwrap();
    let t = task(&hub, id).await;
    assert_eq!(t["state"], "timeout");
    let pid = t["pid"].as_u64().unwrap() as u32;
    assert!(group_processes(pid).is_empty() && !process_alive(pid));

    // Processes a command leaves behind do not keep the reply waiting, and do not linger.
    let began = Instant::now();
    let (status, v) = hub
        .post(
            "/v1/tasks",
            json!({ "cmd": "sleep 100 & echo left", "pty": false }),
        )
        .await;
    assert_eq!((status, v["stdout"].as_str()), (200, Some("left\n")), "{v}");
    assert!(began.elapsed() < Duration::from_secs(5));
    let pid = v["task"]["pid"].as_u64().unwrap() as u32;
    assert!(wait_until(T, || async { group_processes(pid).is_empty() }).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_piped_task_whose_caller_goes_away_is_cancelled() {
    let hub = TestHub::start().await;
    let result = hub
        .http
        .post(format!("{}/v1/tasks", hub.base))
        .json(&json!({ "cmd": "sleep 100", "pty": false, "name": "abandoned" }))
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(result.is_err(), "the request should have timed out");
    let (_, v) = hub.get("/v1/tasks").await;
    let t = v["tasks"][0].clone();
    assert_eq!(t["name"], "abandoned", "{v}");
    let id = t["id"].as_str().unwrap().to_string();
    let cancelled = wait_until(T, || async {
        task(&hub, &id).await["state"] == "cancelled"
    })
    .await;
    assert!(cancelled, "{}", task(&hub, &id).await);
    let pid = t["pid"].as_u64().unwrap() as u32;
    assert!(group_processes(pid).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_shutdown_kills_running_tasks_and_closes_the_event_stream() {
    let hub = TestHub::start().await;
    let mut ws = hub.connect_ws("/v1/events").await;
    let (id, _) = start(&hub, json!({ "cmd": "sleep 100 & sleep 101 & wait" })).await;
    let pid = task(&hub, &id).await["pid"].as_u64().unwrap() as u32;
    let h = hub.base.clone();
    let owner = hub.owner_token.clone();
    let piped = tokio::spawn(async move {
        let body = json!({ "cmd": "sleep 102", "pty": false });
        post_json(format!("{h}/v1/tasks"), &owner, body).await
    });
    assert!(
        wait_until(T, || async {
            count_sleeps(&agent_hub::process::session_processes(pid)) == 2
                && hub.get("/v1/tasks").await.1["count"] == 2
        })
        .await
    );
    let procs = agent_hub::process::session_processes(pid);
    let (_, list) = hub.get("/v1/tasks").await;
    let piped_pid = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["pty"] == false)
        .unwrap()["pid"]
        .as_u64()
        .unwrap() as u32;
    tokio::time::timeout(Duration::from_secs(20), hub.hub.shutdown())
        .await
        .expect("shutdown finished");
    for t in hub.hub.tasks().list() {
        assert_eq!(t.state, agent_hub::tasks::TaskState::Cancelled, "{t:?}");
    }
    for p in procs {
        assert!(!process_alive(p), "process {p} survived the shutdown");
    }
    assert!(group_processes(piped_pid).is_empty());
    let v = tokio::time::timeout(T, piped)
        .await
        .expect("piped reply")
        .unwrap();
    assert_eq!(v["state"], "cancelled", "{v}");
    let closed = tokio::time::timeout(T, async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the events socket stayed open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_tasks_are_purged_after_their_retention_with_their_sessions() {
    let hub = TestHub::start_with(|c| c.task_retention_s = 0).await;
    let (id, sid) = start(&hub, json!({ "cmd": "echo short-lived" })).await;
    let t = finished(&hub, &id).await;
    assert_eq!(t["state"], "success");
    let (_, v) = hub.get("/v1/tasks").await;
    assert_eq!(v["count"], 0, "{v}");
    let (status, _) = hub.get(&format!("/v1/pty/sessions/{sid}")).await;
    assert_eq!(status, 404);
}

fn run_cli(base: &str, data_dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("run")
        .args(args)
        .env("AGENT_HUB_URL", base)
        .env("AGENT_HUB_DATA_DIR", data_dir)
        .output()
        .expect("run agent-hub")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_hub_run_prints_the_output_and_exits_with_the_task_exit_code() {
    let hub = TestHub::start().await;
    let h = hub.base.clone();
    let d = hub.data_dir().to_path_buf();
    let outs = tokio::task::spawn_blocking(move || {
        [
            run_cli(&h, &d, &["--", "echo", "it's", "a b"]),
            run_cli(&h, &d, &["--", "sh", "-c", "echo from-run; exit 3"]),
            run_cli(&h, &d, &["--timeout", "0.5", "--", "sleep", "100"]),
            run_cli(&h, &d, &["--", "printf", r"\377\001abc"]),
            run_cli(
                &h,
                &d,
                &["--no-pty", "--", "sh", "-c", "echo o; echo e >&2; exit 2"],
            ),
            run_cli(&h, &d, &["--json", "--name", "j", "--", "true"]),
        ]
    })
    .await
    .unwrap();
    let [ok, three, timeout, binary, piped, json_out] = outs;
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "it's a b\r\n");
    assert_eq!(three.status.code(), Some(3), "{three:?}");
    assert_eq!(String::from_utf8_lossy(&three.stdout), "from-run\r\n");
    assert_eq!(timeout.status.code(), Some(124), "{timeout:?}");
    assert!(String::from_utf8_lossy(&timeout.stderr).contains("timed out"));
    assert_eq!(binary.status.code(), Some(0), "{binary:?}");
    assert_eq!(
        binary.stdout, b"\xff\x01abc",
        "binary output reaches stdout unchanged"
    );
    assert_eq!(piped.status.code(), Some(2), "{piped:?}");
    assert_eq!(
        (piped.stdout.as_slice(), piped.stderr.as_slice()),
        (&b"o\n"[..], &b"e\n"[..])
    );
    assert_eq!(json_out.status.code(), Some(0), "{json_out:?}");
    let v: Value = serde_json::from_slice(&json_out.stdout).expect("--json prints the task");
    assert_eq!(
        (v["state"].as_str(), v["name"].as_str()),
        (Some("success"), Some("j"))
    );
    let (_, list) = hub.get("/v1/tasks").await;
    assert_eq!(list["count"], 6, "{list}");
}

/// Spawns `agent-hub run ARGS`, waits until its task runs, sends SIGINT, and returns the
/// exit code and the task.
async fn interrupt_run(
    hub: &TestHub,
    args: &[&str],
    running: impl Fn(&Value) -> bool,
) -> (Option<i32>, Value) {
    let mut child = Command::new(BIN)
        .arg("run")
        .args(args)
        .env("AGENT_HUB_URL", &hub.base)
        .env("AGENT_HUB_DATA_DIR", hub.data_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-hub run");
    let deadline = Instant::now() + T;
    let seen = loop {
        let (_, v) = hub.get("/v1/tasks").await;
        match v["tasks"].as_array().and_then(|a| a.first()) {
            Some(t) if t["state"] == "running" && running(t) => break t.clone(),
            _ if Instant::now() > deadline => {
                let _ = child.kill();
                panic!("the task did not start: {v}");
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut status = None;
    let exited = wait_until(T, || {
        let s = child.try_wait().unwrap();
        if s.is_some() {
            status = s;
        }
        async move { s.is_some() }
    })
    .await;
    if !exited {
        let _ = child.kill();
        panic!("agent-hub run did not exit after SIGINT");
    }
    (status.and_then(|s| s.code()), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_task_of_agent_hub_run() {
    let hub = TestHub::start().await;
    let (code, t) = interrupt_run(
        &hub,
        &["--", "sh", "-c", "sleep 100 & sleep 101 & wait"],
        |t| {
            let pid = t["pid"].as_u64().unwrap() as u32;
            count_sleeps(&agent_hub::process::session_processes(pid)) == 2
        },
    )
    .await;
    assert_eq!(code, Some(130));
    let id = t["id"].as_str().unwrap();
    let pid = t["pid"].as_u64().unwrap() as u32;
    assert_eq!(task(&hub, id).await["state"], "cancelled");
    assert!(agent_hub::process::session_processes(pid).is_empty());

    // --no-pty: the request goes away with the client, and the hub cancels the task.
    let hub = TestHub::start().await;
    let (code, t) = interrupt_run(&hub, &["--no-pty", "--", "sleep", "100"], |t| {
        count_sleeps(&group_processes(t["pid"].as_u64().unwrap() as u32)) == 1
    })
    .await;
    assert_eq!(code, Some(130));
    let id = t["id"].as_str().unwrap().to_string();
    assert!(
        wait_until(T, || async {
            task(&hub, &id).await["state"] == "cancelled"
        })
        .await
    );
    assert!(group_processes(t["pid"].as_u64().unwrap() as u32).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_events_subscriber_is_told_what_it_missed_and_continues() {
    let hub = TestHub::start().await;
    let mut ws = hub.connect_ws("/v1/events").await;
    // Far more than the socket buffers and the bus hold, while the subscriber reads nothing.
    let padding = "x".repeat(1024);
    let total = 20_000u64;
    for n in 0..total {
        hub.hub.emit(EventKind::TaskLog {
            task_id: format!("test-{n}"),
            chunk: padding.clone(),
            stream: None,
            dropped_bytes: None,
        });
    }
    hub.hub.emit(EventKind::SessionKilled {
        session_id: "test_last".into(),
    });
    let (mut received, mut dropped) = (0u64, 0u64);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next()).await;
        let Ok(Some(Ok(Message::Text(text)))) = frame else {
            panic!("events ended early: {frame:?}");
        };
        let event: Value = serde_json::from_str(text.as_str()).unwrap();
        match event["type"].as_str() {
            Some("task_log") => received += 1,
            Some("events_dropped") => dropped += event["count"].as_u64().unwrap(),
            Some("session_killed") => break,
            _ => {}
        }
    }
    assert!(dropped > 0, "the subscriber never lagged");
    assert_eq!(received + dropped, total);
}
