//! A hub started in-process on 127.0.0.1:0 with its own tmux server and data dir, plus
//! helpers that wait on conditions with deadlines (never bare sleeps). Dropping a `TestHub`
//! kills every process its sessions started and its tmux server, even when a test fails.

use std::time::{Duration, Instant};

use agent_hub::config::HubConfig;
use agent_hub::daemon::{Components, Daemon, DaemonOptions};
use agent_hub::hub::Hub;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

pub struct TestHub {
    pub base: String,
    pub hub: Hub,
    /// Presents the owner's token, as a user's client would.
    pub http: reqwest::Client,
    /// The owner's admin token (from the hub's data dir).
    pub owner_token: String,
    pub tmux_socket: String,
    token: CancellationToken,
    _data_dir: tempfile::TempDir,
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl TestHub {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut HubConfig)) -> Self {
        // The API and the audit recorder; tests that need more name the components.
        let components = Components {
            audit: true,
            ..Components::default()
        };
        Self::start_components(components, adjust).await
    }

    /// A hub run by the library's [`Daemon`] with these components.
    pub async fn start_components(
        components: Components,
        adjust: impl FnOnce(&mut HubConfig),
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        Self::start_components_on(listener, components, adjust).await
    }

    /// [`Self::start_components`] on a listener bound before (its address is known to the
    /// config: an agent's `hub_url`).
    pub async fn start_components_on(
        listener: tokio::net::TcpListener,
        components: Components,
        adjust: impl FnOnce(&mut HubConfig),
    ) -> Self {
        // AGENT_HUB_TEST_LOG=debug shows the hub's own log in a failing test's output.
        if let Ok(filter) = std::env::var("AGENT_HUB_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        let data_dir = tempfile::tempdir().expect("temp dir");
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmux_socket = format!("ah-test-{}-{n}", std::process::id());
        let mut config = HubConfig {
            data_dir: data_dir.path().to_path_buf(),
            tmux_socket: tmux_socket.clone(),
            ..HubConfig::default()
        };
        adjust(&mut config);
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let opts = DaemonOptions {
            listener: Some(listener),
            components,
            ..DaemonOptions::default()
        };
        let daemon = Daemon::start(config, opts).await.expect("daemon starts");
        let hub = daemon.hub().clone();
        let token = daemon.root();
        let owner_token = hub.access().owner_token();
        TestHub {
            base,
            hub,
            http: authed_http(&owner_token),
            owner_token,
            tmux_socket,
            token,
            _data_dir: data_dir,
        }
    }

    /// The hub's data dir (its owner's token is there: point a CLI at it with
    /// `AGENT_HUB_DATA_DIR`).
    pub fn data_dir(&self) -> &std::path::Path {
        self._data_dir.path()
    }

    /// A WebSocket request for `url` presenting the owner's token (as a subprotocol).
    pub fn ws(&self, url: &str) -> WsRequest {
        ws_request(url, &self.owner_token)
    }

    /// A WebSocket connection to `path` (`/v1/events`, `/v1/pty/sessions/{id}/stream`...)
    /// presenting the owner's token.
    pub async fn connect_ws(&self, path: &str) -> Ws {
        let url = format!("{}{path}", self.base.replace("http://", "ws://"));
        tokio_tungstenite::connect_async(self.ws(&url))
            .await
            .expect("ws connect")
            .0
    }

    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("non-JSON reply {status}: {text}"));
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.request(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.request(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.request(reqwest::Method::DELETE, path, None).await
    }

    /// A bash session with no rc files and a `$ ` prompt.
    pub async fn create(&self, backend: &str) -> String {
        self.create_with(json!({ "backend": backend })).await
    }

    pub async fn create_with(&self, mut body: Value) -> String {
        if body.get("shell").is_none() {
            body["shell"] = json!("bash");
            body["args"] = json!(["--norc", "--noprofile"]);
        }
        body["env"]["PS1"] = json!("$ ");
        let (status, v) = self.post("/v1/pty/sessions", body).await;
        assert_eq!(status, 200, "create failed: {v}");
        v["session_id"].as_str().expect("session_id").to_string()
    }

    pub async fn talk(&self, id: &str, command: &str) -> Value {
        let (status, v) = self
            .post(
                &format!("/v1/pty/sessions/{id}/talk"),
                json!({ "command": command, "timeout_ms": 15000 }),
            )
            .await;
        assert_eq!(status, 200, "talk '{command}' failed: {v}");
        v
    }

    pub async fn session(&self, id: &str) -> Value {
        let (status, v) = self.get(&format!("/v1/pty/sessions/{id}")).await;
        assert_eq!(status, 200, "{v}");
        v["session"].clone()
    }

    /// Reads output from offset 0 (long-polling) until `needle` appears; returns all text seen.
    pub async fn wait_output(&self, id: &str, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        let mut since = 0u64;
        let mut seen = String::new();
        while Instant::now() < deadline {
            let (status, v) = self
                .get(&format!(
                    "/v1/pty/sessions/{id}/read?since={since}&timeout_ms=500&max_bytes=1048576"
                ))
                .await;
            assert_eq!(status, 200, "{v}");
            seen.push_str(v["output"].as_str().unwrap_or(""));
            since = v["end_offset"].as_u64().expect("end_offset");
            if seen.contains(needle) {
                return seen;
            }
        }
        panic!("'{needle}' not seen within {within:?}; output so far:\n{seen}");
    }

    /// Waits until the session reports `alive: false`; returns the session object.
    pub async fn wait_exited(&self, id: &str, within: Duration) -> Value {
        let ok = wait_until(within, || async {
            self.session(id).await["alive"] == json!(false)
        })
        .await;
        assert!(ok, "session {id} did not exit within {within:?}");
        self.session(id).await
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        self.token.cancel();
        for session in self.hub.list() {
            if let Some(pid) = session.info().pid {
                for p in agent_hub::process::session_processes(pid) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(p as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
        kill_tmux_server(&self.tmux_socket);
    }
}

/// Kills the tmux server on `socket` (and removes its socket file) when dropped.
pub struct TmuxServerGuard(pub String);

impl Drop for TmuxServerGuard {
    fn drop(&mut self) {
        kill_tmux_server(&self.0);
    }
}

/// Kills the tmux server on `socket` and removes the socket file kill-server leaves behind.
pub fn kill_tmux_server(socket: &str) {
    let _ = std::process::Command::new("tmux")
        .args(["-L", socket, "kill-server"])
        .stderr(std::process::Stdio::null())
        .status();
    let dir = std::env::var("TMUX_TMPDIR").unwrap_or_else(|_| "/tmp".into());
    use std::os::unix::fs::MetadataExt;
    if let Ok(uid) = std::fs::metadata("/proc/self").map(|m| m.uid()) {
        let _ = std::fs::remove_file(format!("{dir}/tmux-{uid}/{socket}"));
    }
}

/// Polls `cond` every 20 ms until it holds or `within` passes.
pub async fn wait_until<F, Fut>(within: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a process exists and is not a zombie.
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .map(|i| !stat[i + 1..].trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Whether a process named `name` runs in the terminal session led by `sid`.
pub fn session_runs(sid: u32, name: &str) -> bool {
    agent_hub::process::session_processes(sid)
        .iter()
        .any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
        })
}

/// Runs the test body once per backend.
#[macro_export]
macro_rules! both_backends {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn pty() {
                super::$name("pty").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tmux() {
                super::$name("tmux").await
            }
        }
    };
}

/// The owner identity fields of a session, as the API shows them.
pub const OWNER_FIELDS: [&str; 6] = [
    "owner_agent_id",
    "owner_session_id",
    "owner_role",
    "label",
    "cli_type",
    "conversation_id",
];

/// A WebSocket handshake request.
pub type WsRequest = tokio_tungstenite::tungstenite::handshake::client::Request;

/// A WebSocket client connection.
pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// An HTTP client that presents `token` on every request (`Authorization: Bearer`).
pub fn authed_http(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {token}").parse().expect("header value");
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("http client")
}

/// A WebSocket request for `url` presenting `token` as the hub's bearer subprotocol.
pub fn ws_request(url: &str, token: &str) -> WsRequest {
    agent_hub::client::HubClient::new("http://127.0.0.1")
        .with_token(Some(token.to_string()))
        .ws_request(url)
        .expect("ws request")
}

/// POSTs `body` to `url` (a full URL: usable from a spawned task) with `token`, and returns
/// the reply's JSON.
pub async fn post_json(url: String, token: &str, body: serde_json::Value) -> serde_json::Value {
    json_reply(authed_http(token).post(url).json(&body)).await
}

/// Sends `request` and returns the reply's JSON (panics when it fails or is not JSON).
pub async fn json_reply(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}
