//! A hub run as its own process (`agent-hub serve`), so a test can SIGKILL it and start it
//! again on the same data dir. Dropping it kills the process.

use std::time::Duration;

use serde_json::Value;

use crate::support::wait_until;

pub struct HubProcess {
    pub child: std::process::Child,
    pub base: String,
    /// Presents the owner's token.
    pub http: reqwest::Client,
    /// The admin credential the test uses: the owner's token, read from the hub's data dir once
    /// it is up, or the `AGENT_HUB_TOKEN` the test gave `serve` (a data dir it cannot write).
    pub owner_token: String,
    pub data_dir: std::path::PathBuf,
    /// What the process printed on stderr (its log), line by line.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Run by a wrapper (`strace ...`): `child` is the wrapper, the hub its child.
    wrapped: bool,
}

/// The data dir `serve <args>` uses: `--data-dir`, else the config file's, else
/// `AGENT_HUB_DATA_DIR` from `env`.
fn data_dir_of(args: &[&str], env: &[(&str, &str)]) -> std::path::PathBuf {
    let flag = |name: &str| {
        args.iter()
            .position(|a| *a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.to_string())
    };
    if let Some(dir) = flag("--data-dir") {
        return dir.into();
    }
    if let Some(config) = flag("--config") {
        let config = agent_hub::config::HubConfig::load(config.as_ref()).expect("config loads");
        return config.data_dir;
    }
    let var = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    if let Some(dir) = var("AGENT_HUB_DATA_DIR") {
        return dir.into();
    }
    let xdg = var("XDG_DATA_HOME").expect("a data dir for the test hub");
    std::path::Path::new(xdg).join("agent-hub")
}

/// A TCP port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl HubProcess {
    /// `agent-hub serve --config <config>`, serving at `base`.
    pub async fn spawn_config(config: &std::path::Path, base: &str) -> Self {
        Self::spawn(
            &["--config", config.to_str().expect("utf-8 path")],
            base,
            &[],
        )
        .await
    }

    /// `agent-hub serve <args>` with extra environment, serving at `base`.
    pub async fn spawn(args: &[&str], base: &str, env: &[(&str, &str)]) -> Self {
        Self::spawn_under(&[], args, base, env).await
    }

    /// Like [`Self::spawn`], run by `wrapper` (a program and its arguments, to which the hub's
    /// command line is appended: `strace -f -o LOG`), when it is not empty.
    pub async fn spawn_under(
        wrapper: &[&str],
        args: &[&str],
        base: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let command = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut c = std::process::Command::new(program);
                c.args(wrapper_args).arg(crate::cli::BIN);
                c
            }
            None => std::process::Command::new(crate::cli::BIN),
        };
        Self::spawn_command(command, !wrapper.is_empty(), args, base, env).await
    }

    /// `serve <args>` of another build of the hub: `program` is how it is run (`bash
    /// tests/windows/wine-runner.sh agent-hub.exe`, the Windows build under Wine), the hub
    /// itself (signals reach it).
    pub async fn spawn_program(
        program: &[&str],
        args: &[&str],
        base: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let (first, rest) = program.split_first().expect("a program");
        let mut command = std::process::Command::new(first);
        command.args(rest);
        Self::spawn_command(command, false, args, base, env).await
    }

    async fn spawn_command(
        mut command: std::process::Command,
        wrapped: bool,
        args: &[&str],
        base: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let echo = std::env::var("AGENT_HUB_TEST_LOG").is_ok();
        let mut child = command
            .arg("serve")
            .args(args)
            .env_remove("AGENT_HUB_TOKEN")
            .env_remove("AGENT_HUB_DATA_DIR")
            .envs(env.iter().copied())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn agent-hub serve");
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        let lines = log.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if echo {
                    eprintln!("{line}");
                }
                lines.lock().unwrap().push(line);
            }
        });
        let url = format!("{base}/health");
        let up = wait_until(Duration::from_secs(60), || async {
            reqwest::get(&url).await.is_ok()
        })
        .await;
        assert!(up, "hub did not come up at {base}");
        let data_dir = data_dir_of(args, env);
        let file = agent_hub::access::owner::path(&data_dir);
        let given = env.iter().find(|(k, _)| *k == "AGENT_HUB_TOKEN");
        let owner_token = match given {
            Some((_, token)) => token.to_string(),
            None => agent_hub::access::owner::read(&file)
                .expect("owner token readable")
                .expect("the hub made its owner token"),
        };
        HubProcess {
            child,
            base: base.to_string(),
            http: crate::support::authed_http(&owner_token),
            owner_token,
            data_dir,
            log,
            wrapped,
        }
    }

    /// The hub's process id (the wrapper's child, for a wrapped hub).
    pub fn hub_pid(&self) -> Option<u32> {
        let pid = self.child.id();
        if !self.wrapped {
            return Some(pid);
        }
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }

    /// SIGTERM to the hub, and wait up to 20 s for it (and its wrapper) to end.
    pub fn terminate(&mut self) {
        if let Some(pid) = self.hub_pid() {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill9();
    }

    /// Everything the hub has logged so far.
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The first line of the hub's log that contains `needle`, waiting for it up to 10 s.
    pub async fn log_line(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(line) = self.log.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return line.clone();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no log line with {needle:?}; the log:\n{}",
                self.log.lock().unwrap().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        self.call_status(method, path, body).await.1
    }

    pub async fn call_status(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> (u16, Value) {
        let resp = self
            .http
            .request(method, format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Runs `command` in session `id` with talk; returns the reply.
    pub async fn talk(&self, id: &str, command: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            &format!("/v1/pty/sessions/{id}/talk"),
            serde_json::json!({ "command": command }),
        )
        .await
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(&mut self) {
        if self.wrapped {
            // A wrapper killed alone leaves the hub running.
            if let Some(pid) = self.hub_pid() {
                let pid = nix::unistd::Pid::from_raw(pid as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A `serve` process on a data dir, tmux server and loopback port of its own, all removed when
/// it is dropped.
pub struct FreshHub {
    pub hub: HubProcess,
    pub base: String,
    /// The data dir, as a string for command lines.
    pub dir: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    _tmux: crate::support::TmuxServerGuard,
    _data: tempfile::TempDir,
}

impl FreshHub {
    /// `serve --listen <free port> --data-dir <temp> --tmux-socket ah-test-<tag>-<pid> <extra>`.
    pub async fn start(tag: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_on(free_port(), tag, extra, env).await
    }

    /// [`FreshHub::start`] listening on `port` (one a config names before it starts).
    pub async fn start_on(port: u16, tag: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().to_str().unwrap().to_string();
        let socket = format!("ah-test-{tag}-{}", std::process::id());
        let listen = format!("127.0.0.1:{port}");
        let mut args: Vec<String> = ["--listen", &listen, "--data-dir", &dir, "--tmux-socket"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        args.push(socket.clone());
        args.extend(extra.iter().map(|a| a.to_string()));
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let base = format!("http://{listen}");
        let _tmux = crate::support::TmuxServerGuard(socket);
        let hub = Self::spawn(&args, &base, &env).await;
        FreshHub {
            hub,
            base,
            dir,
            args,
            env,
            _tmux,
            _data: data,
        }
    }

    async fn spawn(args: &[String], base: &str, env: &[(String, String)]) -> HubProcess {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        HubProcess::spawn(&args, base, &env).await
    }

    /// Starts `serve` again with the same arguments (the previous process must be gone).
    pub async fn respawn(&mut self) {
        self.hub = Self::spawn(&self.args, &self.base, &self.env).await;
    }
}
