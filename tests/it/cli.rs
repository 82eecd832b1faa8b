//! The `agent-hub` binary against a real hub: one-shot commands, exit codes, config errors, and
//! `attach` driven through a real PTY.

use std::io::{Read, Write};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use serde_json::{json, Value};

use crate::support::{wait_until, TestHub};

pub const BIN: &str = env!("CARGO_BIN_EXE_agent-hub");

/// `agent-hub ARGS` against the hub at `base` with `token`; its standard output (it must
/// succeed).
pub fn run_ok(base: &str, token: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("AGENT_HUB_URL", base)
        .env("AGENT_HUB_TOKEN", token)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn cli(hub: &TestHub, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env("AGENT_HUB_URL", &hub.base)
        .env("AGENT_HUB_DATA_DIR", hub.data_dir())
        .output()
        .expect("run agent-hub")
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_commands_work_and_exit_codes_follow_the_command() {
    let hub = TestHub::start().await;
    let h = hub.base.clone();
    let d = hub.data_dir().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| {
            Command::new(BIN)
                .args(args)
                .env("AGENT_HUB_URL", &h)
                .env("AGENT_HUB_DATA_DIR", &d)
                .output()
                .unwrap()
        };
        let new = run(&[
            "new",
            "--label",
            "cli-test",
            "--json",
            "--",
            "bash",
            "--norc",
            "--noprofile",
        ]);
        assert!(new.status.success(), "{new:?}");
        let id = serde_json::from_str::<Value>(&stdout(&new)).unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_string();
        let talk = run(&["talk", &id, "echo from-cli; (exit 3)"]);
        assert_eq!(talk.status.code(), Some(3), "{talk:?}");
        assert_eq!(stdout(&talk), "from-cli\n");
        let talk0 = run(&["talk", &id, "true"]);
        assert_eq!(talk0.status.code(), Some(0));
        assert!(run(&["send", &id, "echo sent-by-cli"]).status.success());
        assert!(
            run(&["keys", &id, "e", "c", "h", "o", "Space", "k", "e", "y", "s", "Enter"])
                .status
                .success()
        );
        assert!(run(&["resize", &id, "90", "20"]).status.success());
        assert_eq!(stdout(&run(&["talk", &id, "stty size"])), "20 90\n");
        let ls = run(&["ls"]);
        assert!(
            stdout(&ls).contains(&id) && stdout(&ls).contains("cli-test"),
            "{}",
            stdout(&ls)
        );
        let ls_json: Value = serde_json::from_str(&stdout(&run(&["ls", "--json"]))).unwrap();
        assert_eq!(ls_json["count"], 1);
        let read = run(&["read", &id, "--max-bytes", "100000"]);
        assert!(
            stdout(&read).contains("sent-by-cli") && stdout(&read).contains("\rkeys\r\n"),
            "{}",
            stdout(&read)
        );
        // Errors: a clear message and a non-zero exit; with --json, the hub's error body.
        let missing = run(&["send", "pty_00000000", "x"]);
        assert_eq!(missing.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&missing.stderr).contains("PTY_SESSION_NOT_FOUND"));
        let missing_json = run(&["kill", "pty_00000000", "--json"]);
        let v: Value = serde_json::from_str(&stdout(&missing_json)).unwrap();
        assert_eq!(v["error_code"], "PTY_SESSION_NOT_FOUND");
        assert!(run(&["kill", &id]).status.success());
        let gone = run(&["ls", "--json"]);
        serde_json::from_str::<Value>(&stdout(&gone)).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out["count"], 0);
}

#[test]
fn an_unreachable_hub_and_a_bad_config_give_clear_errors() {
    let out = Command::new(BIN)
        .args(["ls", "--hub", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("HUB_UNREACHABLE") && err.contains("127.0.0.1:9"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.toml");
    // A bad value, a price without its output price and a negative one (#41), each at its
    // place.
    for (text, place, what) in [
        ("cols = 100\nrows = \"many\"\n", ":2:8", "rows"),
        (
            "[prices.\"m\"]\ninput = 3.0\n",
            ":1:1",
            "missing field `output`",
        ),
        (
            "[prices.\"m\"]\ninput = -3.0\noutput = 15.0\n",
            ":2:9",
            "input must be a price in dollars per million tokens, 0 or more",
        ),
    ] {
        std::fs::write(&path, text).unwrap();
        let out = Command::new(BIN)
            .args(["serve", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{}{place}", path.display())) && err.contains(what),
            "{err}"
        );
    }

    let out = Command::new(BIN)
        .args(["serve", "--config", "/no/such/hub.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/hub.toml"));

    // Anonymous access (auth = "none") is refused beyond loopback.
    std::fs::write(&path, "auth = \"none\"\n").unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--config", path.to_str().unwrap()])
        .args(["--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "non-loopback without auth is refused"
    );
}

/// A terminal for the CLI: a real PTY whose output is rendered by vt100.
pub struct Terminal {
    writer: Box<dyn Write + Send>,
    master: Box<dyn portable_pty::MasterPty + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Terminal {
    pub fn spawn(script: &str, env: &[(&str, &str)]) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new("sh");
        cmd.args(["-c", script]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            24.try_into().unwrap(),
            80.try_into().unwrap(),
            0,
        )));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (screen.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().process(&buf[..n]);
                r.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Terminal {
            writer,
            master: pair.master,
            screen,
            raw,
            child,
        }
    }

    pub fn text(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    pub fn raw_text(&self) -> String {
        String::from_utf8_lossy(&self.raw.lock().unwrap()).into_owned()
    }

    pub fn type_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// A [`Terminal`] running `agent-hub attach {target}` against `hub` (`target` as a shell word:
/// an id, or a quoted label), then the shell commands `then` (`; echo done`, or nothing).
pub fn attach(hub: &TestHub, target: &str, then: &str) -> Terminal {
    Terminal::spawn(
        &format!("'{BIN}' attach {target}{then}"),
        &[
            ("AGENT_HUB_URL", &hub.base),
            ("AGENT_HUB_DATA_DIR", hub.data_dir().to_str().unwrap()),
        ],
    )
}

/// Whether the session takes the attached terminal's width (80 columns) within 10 s: `attach`
/// has started.
pub async fn attached(hub: &TestHub, id: &str) -> bool {
    wait_until(Duration::from_secs(10), || async {
        hub.session(id).await["cols"] == 80
    })
    .await
}

/// What the attach tests run after `attach`: its exit code, then the terminal's settings.
const THEN_EXIT_AND_STTY: &str = "; echo \"ATTACH_EXIT=$?\"; stty -a";

async fn attach_roundtrip(backend: &str) {
    let hub = TestHub::start().await;
    let id = hub
        .create_with(json!({ "backend": backend, "cols": 70, "rows": 15 }))
        .await;
    hub.talk(&id, "echo READY_BEFORE_ATTACH").await;
    let mut term = attach(&hub, &id, THEN_EXIT_AND_STTY);

    // The current screen is shown at once.
    assert!(
        wait_until(Duration::from_secs(10), || async {
            term.text().contains("READY_BEFORE_ATTACH")
        })
        .await,
        "screen not painted:\n{}",
        term.text()
    );
    // The session follows the attaching terminal's size, and later window resizes.
    assert!(attached(&hub, &id).await);
    term.master
        .resize(PtySize {
            rows: 33,
            cols: 101,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            hub.session(&id).await["cols"] == 101 && hub.session(&id).await["rows"] == 33
        })
        .await,
        "resize not forwarded"
    );

    // Typed input reaches the session and its output comes back to the terminal.
    term.type_bytes(b"echo typed-in-$((40+2))\r");
    hub.wait_output(&id, "typed-in-42", Duration::from_secs(10))
        .await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            term.text().contains("typed-in-42")
        })
        .await
    );

    // The detach key returns to the shell with the session still running, terminal restored.
    term.type_bytes(&[0x1d]);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            term.raw_text().contains("ATTACH_EXIT=0")
        })
        .await,
        "no detach:\n{}",
        term.raw_text()
    );
    // `stty -a` prints over several writes: wait until every flag is there, on or off.
    const FLAGS: [&str; 5] = ["icanon", "echo", "icrnl", "opost", "isig"];
    let after_exit = || {
        let raw = term.raw_text();
        let at = raw.find("ATTACH_EXIT=0").unwrap_or(0);
        raw[at..].to_string()
    };
    let printed = wait_until(Duration::from_secs(5), || async {
        let text = after_exit();
        let words: Vec<&str> = text.split_whitespace().collect();
        FLAGS
            .iter()
            .all(|f| words.contains(f) || words.contains(&format!("-{f}").as_str()))
    })
    .await;
    assert!(printed, "stty -a did not finish: {}", after_exit());
    let raw = term.raw_text();
    assert!(raw.contains("[detached from"), "{raw}");
    let text = after_exit();
    let stty: Vec<&str> = text.split_whitespace().collect();
    for flag in FLAGS {
        assert!(
            stty.contains(&flag),
            "terminal not restored ({flag} is off): {stty:?}"
        );
    }
    assert_eq!(hub.session(&id).await["alive"], true);
    assert_eq!(
        hub.talk(&id, "echo still-here").await["output"],
        "still-here\n"
    );
}
crate::both_backends!(attach_roundtrip);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_ends_when_the_session_exits_and_restores_the_terminal() {
    let hub = TestHub::start().await;
    let id = hub.create("pty").await;
    let mut term = attach(&hub, &id, THEN_EXIT_AND_STTY);
    assert!(attached(&hub, &id).await);
    term.type_bytes(b"exit 4\r");
    // Until `stty -a` has printed its modes line (`icanon` or `-icanon`), not just its first
    // line: under load the rest came after the first look.
    assert!(
        wait_until(Duration::from_secs(10), || async {
            let raw = term.raw_text();
            raw.find("ATTACH_EXIT")
                .is_some_and(|at| raw[at..].contains("speed") && raw[at..].contains("icanon"))
        })
        .await,
        "{}",
        term.raw_text()
    );
    let raw = term.raw_text();
    assert!(
        raw.contains("exit code 4]") && raw.contains("ATTACH_EXIT=0"),
        "{raw}"
    );
    assert!(raw[raw.find("ATTACH_EXIT").unwrap()..]
        .split_whitespace()
        .any(|w| w == "icanon"));
    // Attaching to a session that does not exist fails clearly, before touching the terminal.
    let o = cli(&hub, &["attach", "pty_00000000"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("NOT_FOUND") && err.contains("no session, agent or label 'pty_00000000'"),
        "{err}"
    );
}
