//! Secure by default: a hub with nothing configured asks every caller for a credential, on
//! loopback too; its owner's token is made at first start in the data dir, where the CLI finds
//! it by itself; `token rotate` replaces it; the dashboard signs in with a one-time link;
//! `auth = "none"` is explicit, loud and loopback-only; and a worker in a container sharing
//! the host's network cannot step outside its team through the TCP listener.

use std::process::{Command, Output};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::cli::BIN;
use crate::hub_process::{free_port, FreshHub, HubProcess};
use crate::support::{TestHub, TmuxServerGuard};

const T: Duration = Duration::from_secs(30);

/// A request path for a route template (`{id}` and `{*path}` filled in).
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|seg| if seg.starts_with('{') { "x" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every route that needs a role, as (method, path).
fn guarded_routes() -> Vec<(String, String)> {
    agent_hub::api::routes::ROUTES
        .iter()
        .filter(|r| r.role.is_some())
        .map(|r| {
            let method = r
                .method
                .as_ref()
                .map_or("POST".to_string(), |m| m.to_string());
            (method, concrete(r.path))
        })
        .collect()
}

/// `agent-hub ARGS` with a clean credential environment plus `env`.
fn cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("AGENT_HUB_TOKEN")
        .env_remove("AGENT_HUB_TOKEN_FILE")
        .env_remove("AGENT_HUB_DATA_DIR")
        .env_remove("AGENT_HUB_URL")
        .envs(env.iter().copied())
        .output()
        .expect("run agent-hub")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The finding named `check` in `agent-hub doctor --json`'s report.
pub(crate) fn doctor_finding(doctor: &Output, check: &str) -> Value {
    let report: Value = serde_json::from_slice(&doctor.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&doctor.stdout)));
    let found = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .cloned();
    found.unwrap_or_else(|| panic!("no {check} finding: {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_hub_refuses_every_route_and_websocket_without_a_credential() {
    let hub = TestHub::start().await;
    let anonymous = reqwest::Client::new();
    let routes = guarded_routes();
    assert!(routes.len() > 50, "{routes:?}");
    for (method, path) in &routes {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        // (The owner's token passes every route but rotate, which would replace it.)
        let owner_too = path != "/v1/auth/rotate";
        let clients = [Some(&anonymous), owner_too.then_some(&hub.http)];
        for client in clients.into_iter().flatten() {
            let resp = client
                .request(method.clone(), format!("{}{path}", hub.base))
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            if std::ptr::eq(client, &anonymous) {
                assert_eq!(
                    (status, v["error_code"].as_str()),
                    (401, Some("UNAUTHORIZED")),
                    "{method} {path} without a credential: {v}"
                );
            } else if path.ends_with("/git/git-receive-pack") {
                // Only the agent's own credential pushes to its branch, the owner's neither.
                assert_eq!(
                    (status, v["error_code"].as_str()),
                    (403, Some("WORKSPACE_PUSH_REFUSED")),
                    "{method} {path} with the owner's token: {v}"
                );
            } else {
                assert!(
                    status != 401 && status != 403,
                    "{method} {path} with the owner's token: {status} {v}"
                );
            }
        }
    }
    // A wrong token is refused as well, and the refusal says what is wanted.
    let (status, v) = crate::auth::call_as(
        &hub,
        "GET",
        "/v1/pty/sessions",
        None,
        Some("aho_nope"),
        None,
    )
    .await;
    assert_eq!(status, 401, "{v}");
    let (status, v) = crate::auth::call_as(&hub, "GET", "/v1/pty/sessions", None, None, None).await;
    assert_eq!(status, 401, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("admin-token"),
        "{v}"
    );
    // WebSocket upgrades: refused without a credential, accepted with the owner's token.
    let id = hub.create("pty").await;
    let ws = hub.base.replace("http://", "ws://");
    for path in [
        "/v1/events".to_string(),
        format!("/v1/pty/sessions/{id}/stream"),
    ] {
        let url = format!("{ws}{path}");
        let err = tokio_tungstenite::connect_async(url.clone())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("401"), "{path}: {err}");
        let (mut socket, _) = tokio_tungstenite::connect_async(hub.ws(&url))
            .await
            .unwrap_or_else(|e| panic!("{path} with the owner's token: {e}"));
        if path.ends_with("stream") {
            let hello = socket.next().await.unwrap().unwrap();
            assert!(hello.to_text().unwrap().contains("\"hello\""), "{hello:?}");
        }
    }
    // The token was made at first start: private to its user, and only the owner's.
    let file = hub.data_dir().join("admin-token");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().trim(),
        hub.owner_token
    );
    let (_, who) = hub.get("/v1/whoami").await;
    assert_eq!(
        (
            who["token_name"].as_str(),
            who["role"].as_str(),
            who["auth_required"].as_bool()
        ),
        (Some("owner"), Some("admin"), Some(true)),
        "{who}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_finds_the_owner_token_of_the_data_dir_it_is_pointed_at() {
    // A hub on its user's default data dir ($XDG_DATA_HOME/agent-hub), nothing configured.
    let home = tempfile::tempdir().unwrap();
    let xdg = home.path().join("data");
    let xdg = xdg.to_str().unwrap();
    let socket = format!("ah-test-secure-{}", std::process::id());
    let _tmux = TmuxServerGuard(socket.clone());
    let listen = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{listen}");
    let hub = HubProcess::spawn(
        &["--listen", &listen, "--tmux-socket", &socket],
        &base,
        &[("XDG_DATA_HOME", xdg)],
    )
    .await;
    assert_eq!(hub.data_dir, home.path().join("data/agent-hub"));
    let made = hub
        .call(
            reqwest::Method::POST,
            "/v1/pty/sessions",
            json!({"shell": "bash", "args": ["--norc"], "label": "on-default"}),
        )
        .await;
    assert!(made["ok"].as_bool().unwrap_or(false), "{made}");
    // `agent-hub ls` as the same user: no token, no flags.
    let ls = cli(
        &["ls", "--json"],
        &[("XDG_DATA_HOME", xdg), ("AGENT_HUB_URL", &base)],
    );
    assert!(ls.status.success(), "{}", text(&ls.stderr));
    assert!(
        text(&ls.stdout).contains("on-default"),
        "{}",
        text(&ls.stdout)
    );

    // Another hub, on a data dir of its own: AGENT_HUB_DATA_DIR (or --data-dir) points there.
    let other = TestHub::start().await;
    other
        .create_with(json!({"backend": "pty", "label": "on-other"}))
        .await;
    let other_dir = other.data_dir().to_str().unwrap();
    let pointed = cli(
        &["ls", "--json", "--hub", &other.base],
        &[("XDG_DATA_HOME", xdg), ("AGENT_HUB_DATA_DIR", other_dir)],
    );
    assert!(pointed.status.success(), "{}", text(&pointed.stderr));
    assert!(
        text(&pointed.stdout).contains("on-other"),
        "{}",
        text(&pointed.stdout)
    );
    let flag = cli(
        &[
            "ls",
            "--json",
            "--hub",
            &other.base,
            "--data-dir",
            other_dir,
        ],
        &[("XDG_DATA_HOME", xdg)],
    );
    assert!(flag.status.success(), "{}", text(&flag.stderr));
    // Pointed at the wrong data dir, the refusal names the file the token came from.
    let wrong = cli(&["ls", "--hub", &other.base], &[("XDG_DATA_HOME", xdg)]);
    assert_eq!(wrong.status.code(), Some(1));
    let said = text(&wrong.stderr);
    let default_file = hub.data_dir.join("admin-token").display().to_string();
    assert!(
        said.contains("UNAUTHORIZED") && said.contains(&default_file),
        "{said}"
    );
    // With no token anywhere, it says where it looked and what to do.
    let empty = home.path().join("empty");
    let nothing = cli(
        &["ls", "--hub", &base],
        &[("XDG_DATA_HOME", empty.to_str().unwrap())],
    );
    assert_eq!(nothing.status.code(), Some(1));
    let said = text(&nothing.stderr);
    for part in [
        "UNAUTHORIZED",
        "AGENT_HUB_TOKEN_FILE is not set",
        &format!("{}/agent-hub/admin-token does not exist", empty.display()),
        "--data-dir",
    ] {
        assert!(said.contains(part), "missing {part:?} in: {said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_rotate_refuses_the_old_token_at_once_and_the_cli_follows_the_file() {
    let mut fresh = FreshHub::start("rotate", &[], &[]).await;
    let (base, dir) = (fresh.base.clone(), fresh.dir.clone());
    let old = fresh.hub.owner_token.clone();
    let sessions = format!("{base}/v1/pty/sessions");
    let status = |token: String| {
        let url = sessions.clone();
        async move {
            crate::support::authed_http(&token)
                .get(url)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(status(old.clone()).await, 200);
    // `token rotate` succeeds and says what it did.
    let rotate = |says: &str| {
        let out = cli(
            &["token", "rotate", "--hub", &base, "--data-dir", &dir],
            &[],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains(says), "{}", text(&out.stdout));
    };

    rotate("admin-token");
    let new = std::fs::read_to_string(std::path::Path::new(&dir).join("admin-token"))
        .unwrap()
        .trim()
        .to_string();
    assert_ne!(new, old);
    assert_eq!(
        status(old.clone()).await,
        401,
        "the old token is refused at once"
    );
    assert_eq!(status(new.clone()).await, 200, "the new one works");
    let ls = cli(&["ls", "--hub", &base, "--data-dir", &dir], &[]);
    assert!(ls.status.success(), "{}", text(&ls.stderr));
    // `token show` prints it; `token link` makes a sign-in link with it.
    let shown = cli(&["token", "show", "--data-dir", &dir], &[]);
    assert_eq!(text(&shown.stdout).trim(), new);
    let link = cli(
        &[
            "token",
            "link",
            "--hub",
            &base,
            "--data-dir",
            &dir,
            "--json",
        ],
        &[],
    );
    assert!(link.status.success(), "{}", text(&link.stderr));
    let link: Value = serde_json::from_slice(&link.stdout).unwrap();
    assert!(
        link["url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{base}/#signin=")),
        "{link}"
    );

    // With no hub answering, the file is replaced and the next start uses it.
    fresh.hub.kill9();
    rotate("no hub answered");
    fresh.respawn().await;
    assert_ne!(fresh.hub.owner_token, new);
    assert_eq!(status(new).await, 401);
    assert_eq!(status(fresh.hub.owner_token.clone()).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_none_is_explicit_loud_and_loopback_only() {
    let hub = TestHub::start_with(|c| c.auth = agent_hub::config::AuthMode::None).await;
    let (status, v) = crate::auth::call_as(&hub, "GET", "/v1/pty/sessions", None, None, None).await;
    assert_eq!(status, 200, "{v}");
    let (_, who) = crate::auth::call_as(&hub, "GET", "/v1/whoami", None, None, None).await;
    assert_eq!(
        (
            who["token_name"].as_str(),
            who["role"].as_str(),
            who["auth_required"].as_bool()
        ),
        (Some("anonymous"), Some("admin"), Some(false)),
        "{who}"
    );

    // `serve` warns at every start, and refuses a non-loopback address at load.
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("hub.toml");
    let listen = format!("127.0.0.1:{}", free_port());
    std::fs::write(
        &config,
        format!(
            "auth = \"none\"\nlisten = \"{listen}\"\ndata_dir = '{}'\ntmux_socket = 'ah-test-none-{}'\n",
            data.path().display(),
            std::process::id()
        ),
    )
    .unwrap();
    let base = format!("http://{listen}");
    let hub = HubProcess::spawn_config(&config, &base).await;
    let warning = hub.log_line("auth = \"none\"").await;
    assert!(
        warning.contains("WARN") && warning.contains("agents included"),
        "{warning}"
    );
    let anonymous = reqwest::get(format!("{base}/v1/pty/sessions"))
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 200);
    drop(hub);
    let config = config.to_str().unwrap();
    let refused = cli(&["serve", "--config", config, "--listen", "0.0.0.0:0"], &[]);
    assert_eq!(refused.status.code(), Some(2));
    let said = text(&refused.stderr);
    assert!(
        said.contains("auth = \"none\"") && said.contains("loopback"),
        "{said}"
    );
    // doctor reports it.
    let doctor = cli(
        &["doctor", "--json", "--config", config, "--hub", &base],
        &[],
    );
    let finding = doctor_finding(&doctor, "listen and auth");
    assert_eq!(finding["status"], "warn", "{finding}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_the_sessions_that_run_on_the_host() {
    let hub = TestHub::start().await;
    hub.create_with(json!({"backend": "pty", "label": "hosted-one"}))
        .await;
    let dir = hub.data_dir().to_str().unwrap().to_string();
    let doctor = cli(
        &["doctor", "--json", "--hub", &hub.base, "--data-dir", &dir],
        &[],
    );
    let finding = doctor_finding(&doctor, "host sessions");
    assert_eq!(finding["status"], "warn", "{finding}");
    assert!(
        finding["detail"].as_str().unwrap().contains("hosted-one"),
        "{finding}"
    );
    let owner = doctor_finding(&doctor, "owner's token");
    assert_eq!(owner["status"], "ok", "{owner}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_sign_in_link_signs_in_once_and_leaves_the_address_bar() {
    let b = crate::browser!();
    let fresh = FreshHub::start("signin", &["--open-shell"], &[]).await;
    let (hub, base) = (&fresh.hub, fresh.base.clone());
    let line = hub.log_line("dashboard: open ").await;
    let link = line
        .split("dashboard: open ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(link.starts_with(&format!("{base}/#signin=")), "{line}");
    assert!(
        !line.contains(&hub.owner_token),
        "the token itself is never printed: {line}"
    );

    b.goto(&link).await;
    b.wait_js(
        "signed in through the link, the fleet live",
        "return document.body.dataset.live === 'yes' && window.agentHub.app.fleet?.loaded && document.getElementById('who').textContent.startsWith('owner')",
        T,
    )
    .await;
    let href = b.js("return location.href", json!([])).await;
    let code = link.split("#signin=").nth(1).unwrap();
    assert!(!href.as_str().unwrap().contains(code), "{href}");
    let history = b
        .js("return [history.length, location.hash]", json!([]))
        .await;
    assert_eq!(history[1], "#/", "{history}");
    // The host shell is marked as running on the host.
    b.wait_js(
        "the host session is marked",
        "return document.querySelector('[data-where=host]')?.textContent.startsWith('on host')",
        T,
    )
    .await;

    // The same link again, in a tab with nothing stored: refused, with a clear page.
    b.js("sessionStorage.clear()", json!([])).await;
    b.goto(&link).await;
    b.wait_js(
        "a used link is refused",
        "return !document.getElementById('signin-link-refused').hidden && document.getElementById('signin-error').textContent.includes('used already')",
        T,
    )
    .await;
    let stored = b
        .js(
            "return sessionStorage.getItem('agent-hub.token')",
            json!([]),
        )
        .await;
    assert_eq!(stored, Value::Null);
    // A made-up code too.
    b.goto(&format!("{base}/#signin=0123456789abcdef0123456789abcdef"))
        .await;
    b.wait_js(
        "an unknown code is refused",
        "return !document.getElementById('signin-link-refused').hidden && document.getElementById('signin-error').textContent.includes('not valid')",
        T,
    )
    .await;
    b.screenshot("sign-in-link-refused").await;
    // The form still signs in with a pasted token.
    b.type_into("#token", &format!("{}\u{E007}", hub.owner_token))
        .await;
    b.wait_js(
        "signed in with the pasted token",
        "return document.body.dataset.live === 'yes' && window.agentHub.app.fleet?.loaded",
        T,
    )
    .await;
}

/// A container agent on the host's network (people use it to reach a local model proxy).
fn host_network_agent(id: &str, team: &str) -> String {
    format!(
        "[[agents]]\nid = \"{id}\"\nimage = \"{}\"\ncommand = [\"bash\", \"--norc\", \"--noprofile\"]\nnetwork = \"host\"\nteam = \"{team}\"\nowner_role = \"worker\"\nready_pattern = '[$#] *$'\nready_timeout = 20\nstop_grace = 1\n",
        crate::docker_support::test_image()
    )
}

/// Runs `sh -c script` in `container`: (exit code, stdout, stderr).
fn in_container(container: &str, script: &str) -> (i32, String, String) {
    let out = Command::new("docker")
        .args(["exec", container, "bash", "-c", script])
        .output()
        .expect("docker exec");
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_the_host_network_cannot_leave_its_team_through_tcp() {
    crate::require_docker!();
    let agents = [
        host_network_agent("hw", "t"),
        host_network_agent("mate", "t"),
        host_network_agent("other", "u"),
    ]
    .concat();
    let (hub, _guard) =
        crate::docker_support::hub_with_started_agents(&agents, &["hw", "mate", "other"], |_| {})
            .await;
    let (_, v) = hub.get("/v1/agents/hw").await;
    let hw = v["agent"]["container_id"].as_str().unwrap().to_string();
    let port = hub.base.rsplit(':').next().unwrap().to_string();
    let tcp = format!("http://127.0.0.1:{port}");
    let other_session = {
        let (_, v) = hub.get("/v1/agents/other").await;
        v["agent"]["session_id"].as_str().unwrap().to_string()
    };

    // With no credential, the CLI in the container gets 401 over TCP and types nothing.
    let (code, _, err) = in_container(
        &hw,
        &format!("env -u AGENT_HUB_TOKEN_FILE -u AGENT_HUB_TOKEN AGENT_HUB_URL={tcp} agent-hub send other 'echo pwned-by-worker'"),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("UNAUTHORIZED"), "{err}");
    // Every route of the TCP listener, as raw HTTP from the container (bash's /dev/tcp).
    let mut script = String::from("req() { exec 3<>/dev/tcp/127.0.0.1/$PORT; printf '%s %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}' \"$1\" \"$2\" >&3; read -r _ status _ <&3; echo \"$1 $2 $status\"; exec 3>&-; }\n");
    let routes = guarded_routes();
    for (method, path) in &routes {
        script.push_str(&format!("req {method} '{path}'\n"));
    }
    let (code, out, err) = in_container(&hw, &format!("PORT={port}\n{script}"));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), routes.len(), "{out}");
    for line in lines {
        assert!(
            line.ends_with(" 401"),
            "not refused without a credential: {line}"
        );
    }

    // With its own credential, over TCP as over the unix socket: its team and nothing else.
    let (code, _, err) = in_container(
        &hw,
        &format!("AGENT_HUB_URL={tcp} agent-hub send other 'echo pwned-by-worker'"),
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("FORBIDDEN") || err.contains("NOT_FOUND"),
        "{err}"
    );
    let (code, over_tcp, err) =
        in_container(&hw, &format!("AGENT_HUB_URL={tcp} agent-hub ls --json"));
    assert_eq!(code, 0, "{err}");
    let (code, over_socket, err) = in_container(&hw, "agent-hub ls --json");
    assert_eq!(code, 0, "{err}");
    let ids = |text: &str| {
        let v: Value = serde_json::from_str(text).unwrap();
        let mut ids: Vec<String> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["agent_id"].as_str().unwrap_or("").to_string())
            .collect();
        ids.sort();
        ids
    };
    // A worker sees its own sessions, whichever listener it asks.
    assert_eq!(ids(&over_tcp), vec!["hw".to_string()], "{over_tcp}");
    assert_eq!(ids(&over_tcp), ids(&over_socket));
    // Nothing reached the other team's terminal.
    let (_, read) = hub
        .get(&format!(
            "/v1/pty/sessions/{other_session}/read?since=0&max_bytes=100000"
        ))
        .await;
    assert!(
        !read["output"].as_str().unwrap().contains("pwned-by-worker"),
        "{read}"
    );
}
