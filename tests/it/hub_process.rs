//! A hub run as its own process (`agent-hub serve`), so a test can SIGKILL it and start it
//! again on the same data dir. Dropping it kills the process.

use std::time::Duration;

use serde_json::Value;

use crate::support::wait_until;

pub struct HubProcess {
    pub child: std::process::Child,
    pub base: String,
    pub http: reqwest::Client,
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
        let log = std::env::var("AGENT_HUB_TEST_LOG").is_ok();
        let child = std::process::Command::new(crate::cli::BIN)
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .env_remove("AGENT_HUB_TOKEN")
            .stderr(if log {
                std::process::Stdio::inherit()
            } else {
                std::process::Stdio::null()
            })
            .spawn()
            .expect("spawn agent-hub serve");
        let url = format!("{base}/health");
        let up = wait_until(Duration::from_secs(20), || async {
            reqwest::get(&url).await.is_ok()
        })
        .await;
        assert!(up, "hub did not come up at {base}");
        HubProcess {
            child,
            base: base.to_string(),
            http: reqwest::Client::new(),
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
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}
