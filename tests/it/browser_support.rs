//! A real browser for the dashboard tests: headless Chromium driven over WebDriver by
//! chromedriver (Debian's `chromium` and `chromium-driver`). The WebDriver calls the tests
//! need (open a page, run a script, find, click and type into an element, resize the window,
//! take a screenshot) are plain JSON over HTTP, spoken here with the `reqwest` client the
//! tests already use instead of a WebDriver crate and its dependency tree.
//!
//! Gating like Docker's: skipped with a message when Chromium is absent, a failure when
//! `AGENT_HUB_BROWSER_TESTS=required` (CI). One browser at a time: each test holds a lock.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::wait_until;

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The W3C key for an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether browser tests can run. Panics when they are required and cannot.
pub fn browser_ready() -> bool {
    let required = std::env::var("AGENT_HUB_BROWSER_TESTS").is_ok_and(|v| v == "required");
    let missing: Vec<&str> = [CHROMEDRIVER, CHROMIUM]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "{} not installed (apt-get install chromium chromium-driver)",
        missing.join(" and ")
    );
    if required {
        panic!("browser tests are required (AGENT_HUB_BROWSER_TESTS=required) but {why}");
    }
    eprintln!("SKIPPED: browser test skipped: {why}");
    false
}

/// Returns a started [`Browser`], or from the test when browser tests cannot run here.
#[macro_export]
macro_rules! browser {
    () => {
        match $crate::browser_support::Browser::start().await {
            Some(b) => b,
            None => return,
        }
    };
}

/// Where screenshots go: `target/browser-artifacts/`.
pub fn artifacts_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser-artifacts");
    std::fs::create_dir_all(&dir).expect("artifacts dir");
    dir
}

/// One chromedriver with one headless Chromium session; both end when it is dropped.
pub struct Browser {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`
    session: String,
    driver: std::process::Child,
    _one: tokio::sync::MutexGuard<'static, ()>,
}

impl Browser {
    pub async fn start() -> Option<Browser> {
        if !browser_ready() {
            return None;
        }
        let one = ONE_BROWSER.lock().await;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let driver = std::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let up = wait_until(Duration::from_secs(20), || async {
            http.get(format!("{base}/status"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
        assert!(up, "chromedriver did not answer on port {port}");
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1400,900"],
            },
        }}});
        let reply: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("new session reply");
        let id = reply["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {reply}"))
            .to_string();
        Some(Browser {
            http,
            session: format!("{base}/session/{id}"),
            driver,
            _one: one,
        })
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.try_call(method.clone(), path, body)
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    /// A WebDriver call; `Err` carries the driver's error object.
    async fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Value> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.session));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let reply: Value = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
            .json()
            .await
            .expect("WebDriver reply");
        if reply["value"]["error"].is_string() {
            return Err(reply["value"].clone());
        }
        Ok(reply["value"].clone())
    }

    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// Signs the tab in to the hub at `base` as its owner would: a one-time sign-in link asked
    /// for with the owner's token (`agent-hub token link`), opened in the tab. Returns once the
    /// page holds its credential and the code has left the address bar.
    pub async fn sign_in(&self, base: &str, owner_token: &str) {
        let reply: Value = crate::support::authed_http(owner_token)
            .post(format!("{base}/v1/auth/signin-link"))
            .send()
            .await
            .expect("signin-link")
            .json()
            .await
            .expect("signin-link reply");
        let path = reply["path"].as_str().expect("a sign-in path");
        self.goto(&format!("{base}{path}")).await;
        self.wait_js(
            "signed in with the sign-in link",
            "return !!sessionStorage.getItem('agent-hub.token') && !location.hash.includes('signin')",
            Duration::from_secs(20),
        )
        .await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns what it returns.
    pub async fn js(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// Waits until `script` returns something truthy; returns it, or panics with `what`.
    pub async fn wait_js(&self, what: &str, script: &str, within: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let v = self.js(script, json!([])).await;
            let truthy = !(v.is_null()
                || v == json!(false)
                || v == json!("")
                || v == json!(0)
                || v == json!([]));
            if truthy {
                return v;
            }
            if tokio::time::Instant::now() >= deadline {
                let body = self
                    .js("return document.body.innerText.slice(0, 3000)", json!([]))
                    .await;
                panic!(
                    "page: {what}: not within {within:?}\npage text:\n{}",
                    body.as_str().unwrap_or("")
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The element `css` selects (panics when there is none).
    pub async fn find(&self, css: &str) -> String {
        let v = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await;
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    /// A real click (WebDriver moves the pointer and clicks), on the element `css` selects.
    /// The live page re-renders rows when events arrive: an element replaced between finding
    /// and clicking it is found again.
    pub async fn click(&self, css: &str) {
        for _ in 0..5 {
            let id = self.find(css).await;
            match self
                .try_call(
                    reqwest::Method::POST,
                    &format!("/element/{id}/click"),
                    Some(json!({})),
                )
                .await
            {
                Ok(_) => return,
                Err(e) if e["error"] == "stale element reference" => continue,
                Err(e) => panic!("click {css}: {e}"),
            }
        }
        panic!("click {css}: the element kept being replaced");
    }

    /// Types `text` into the element `css` selects, as key events (`\u{E007}` is Enter).
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Presses `keys` (text; `\u{E015}` is ArrowDown, `\u{E007}` Enter, `\u{E00C}` Escape) in
    /// whatever has the focus, as a person at the keyboard would.
    pub async fn press(&self, keys: &str) {
        let mut actions = Vec::new();
        for k in keys.chars() {
            actions.push(json!({ "type": "keyDown", "value": k.to_string() }));
            actions.push(json!({ "type": "keyUp", "value": k.to_string() }));
        }
        self.call(
            reqwest::Method::POST,
            "/actions",
            Some(json!({ "actions": [{ "type": "key", "id": "keyboard", "actions": actions }] })),
        )
        .await;
        self.call(reqwest::Method::DELETE, "/actions", None).await;
    }

    /// A Chrome DevTools Protocol command through chromedriver (`goog/cdp/execute`), e.g.
    /// `Browser.grantPermissions`; returns its result.
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({ "cmd": cmd, "params": params })),
        )
        .await
    }

    pub async fn set_window_size(&self, width: u32, height: u32) {
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({ "width": width, "height": height })),
        )
        .await;
    }

    /// Saves a PNG of the window to `target/browser-artifacts/NAME.png`; returns the path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let v = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = agent_hub::protocol::base64_decode(v.as_str().expect("screenshot data"))
            .expect("screenshot base64");
        let path = artifacts_dir().join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        eprintln!("screenshot: {}", path.display());
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // DELETE /session/ID ends the browser (a blocking request: drop cannot await); then
        // chromedriver itself is killed and reaped.
        if let Some((host, path)) = self
            .session
            .strip_prefix("http://")
            .and_then(|s| s.split_once('/'))
        {
            use std::io::{Read, Write};
            if let Ok(mut tcp) = std::net::TcpStream::connect(host) {
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = write!(
                    tcp,
                    "DELETE /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = tcp.read_to_end(&mut Vec::new());
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
