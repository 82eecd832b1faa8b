//! The control-mode parser and command builders against a real tmux server: every byte value
//! through `send-keys`, `%output` round trips and command replies. Own module so the parser's
//! pure tests stay short and these (which need tmux) are found in one place.

use super::*;
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Output as ProcOutput, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use ControlMessage::*;

const TIMEOUT: Duration = Duration::from_secs(15);

/// A tmux server on its own socket, killed on drop (also when a test fails).
struct TmuxServer {
    socket: String,
    /// The socket file, which kill-server leaves behind.
    socket_path: Option<String>,
}

impl TmuxServer {
    /// `None` (after saying so) if tmux is not on PATH.
    fn start(tag: &str, session: &str, pane_command: &str) -> Option<Self> {
        if Command::new("tmux").arg("-V").output().is_err() {
            println!("SKIPPED: tmux not on PATH");
            return None;
        }
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut server = TmuxServer {
            socket: format!("agent-hub-test-{tag}-{}-{nanos}", std::process::id()),
            socket_path: None,
        };
        let out = server.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "80",
            "-y",
            "24",
            pane_command,
        ]);
        assert!(
            out.status.success(),
            "new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = server
            .run(&["display-message", "-p", "#{socket_path}"])
            .stdout;
        server.socket_path = Some(String::from_utf8_lossy(&path).trim().to_string());
        Some(server)
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.env_remove("TMUX").arg("-L").arg(&self.socket);
        cmd
    }

    fn run(&self, args: &[&str]) -> ProcOutput {
        self.command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tmux")
    }

    fn wait_for_screen(&self, target: &str, text: &str) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let out = self.run(&["capture-pane", "-p", "-t", target]);
            if String::from_utf8_lossy(&out.stdout).contains(text) {
                return;
            }
            assert!(Instant::now() < deadline, "pane never showed {text:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
        if let Some(path) = &self.socket_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A `tmux -C attach` client, killed on drop. Runs with LC_ALL=C to show that
/// `%output` bytes do not depend on the client's locale.
struct ControlClient {
    child: Child,
    stdin: ChildStdin,
    chunks: Receiver<Vec<u8>>,
    parser: ControlParser,
}

impl ControlClient {
    fn attach(server: &TmuxServer, session: &str) -> Self {
        let mut child = server
            .command()
            .args(["-C", "attach", "-f", "ignore-size", "-t", session])
            .env("LC_ALL", "C")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tmux -C");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        let (tx, chunks) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        ControlClient {
            child,
            stdin,
            chunks,
            parser: ControlParser::new(),
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write command");
    }

    /// Parsed messages until `done` says so (it sees all messages so far).
    fn read_until(
        &mut self,
        mut done: impl FnMut(&[ControlMessage]) -> bool,
    ) -> Vec<ControlMessage> {
        let deadline = Instant::now() + TIMEOUT;
        let mut msgs = Vec::new();
        while !done(&msgs) {
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = self
                .chunks
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("{e}; got {msgs:?}"));
            msgs.extend(self.parser.feed(&chunk));
        }
        msgs
    }
}

impl Drop for ControlClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pane_output(msgs: &[ControlMessage], pane: &str) -> Vec<u8> {
    msgs.iter()
        .filter_map(|m| match m {
            Output { pane_id, data } if pane_id == pane => Some(data.as_slice()),
            _ => None,
        })
        .flatten()
        .copied()
        .collect()
}

fn replies_from_stdin(msgs: &[ControlMessage]) -> Vec<&ControlMessage> {
    msgs.iter()
        .filter(|m| {
            matches!(
                m,
                Reply {
                    from_stdin: true,
                    ..
                }
            )
        })
        .collect()
}

/// Every byte value, twice (512 bytes: two `send-keys` commands, a multiple of
/// od's 16-byte lines so od prints everything without needing EOF).
fn every_byte_twice() -> Vec<u8> {
    (0..=255).chain((0..=255).rev()).collect()
}

/// The pane sets its tty raw (no ICRNL/ISIG/IXON/ICANON/ISTRIP/OPOST) and without
/// IEXTEN (VLNEXT/VDISCARD) and echo, so the line discipline passes all 256 byte
/// values unchanged; od then prints in hex exactly what the pane received.
#[test]
fn real_tmux_send_keys_delivers_every_byte() {
    let Some(server) = TmuxServer::start(
        "od",
        "od",
        "stty raw -echo -iexten; printf READY; exec od -An -tx1 -v",
    ) else {
        return;
    };
    server.wait_for_screen("od", "READY");
    let mut client = ControlClient::attach(&server, "od");
    let pane = String::from_utf8_lossy(
        &server
            .run(&["display-message", "-p", "-t", "od", "#{pane_id}"])
            .stdout,
    )
    .trim()
    .to_string();
    let bytes = every_byte_twice();
    let commands = send_bytes_commands(&pane, &bytes);
    assert_eq!(commands.len(), 2);
    for line in &commands {
        client.send(line);
    }
    let msgs = client.read_until(|msgs| {
        String::from_utf8_lossy(&pane_output(msgs, &pane))
            .split_ascii_whitespace()
            .count()
            >= bytes.len()
    });
    let received: Vec<u8> = String::from_utf8_lossy(&pane_output(&msgs, &pane))
        .split_ascii_whitespace()
        .map(|h| u8::from_str_radix(h, 16).expect("od hex"))
        .collect();
    assert_eq!(received, bytes);
    let replies = replies_from_stdin(&msgs);
    assert_eq!(replies.len(), 2, "{msgs:?}");
    assert!(replies
        .iter()
        .all(|r| matches!(r, Reply { success: true, lines, .. } if lines.is_empty())));
}

/// `cat` on a raw tty echoes the bytes back unchanged: send-keys in, `%output`
/// out, including invalid UTF-8, NUL and ESC; plus replies, in order.
#[test]
fn real_tmux_output_round_trip_and_replies() {
    let Some(server) = TmuxServer::start(
        "cat",
        "cat",
        "stty raw -echo -iexten; printf READY; exec cat",
    ) else {
        return;
    };
    server.wait_for_screen("cat", "READY");
    let mut client = ControlClient::attach(&server, "cat");
    // The attach command's own block comes first and is not a reply to stdin.
    let first = client.read_until(|msgs| !msgs.is_empty());
    assert!(
        matches!(
            first[0],
            Reply {
                from_stdin: false,
                success: true,
                ..
            }
        ),
        "{first:?}"
    );

    client.send("display-message -p -t cat '#{pane_id}'");
    let msgs = client.read_until(|msgs| !replies_from_stdin(msgs).is_empty());
    let Reply {
        success: true,
        lines,
        ..
    } = replies_from_stdin(&msgs)[0]
    else {
        panic!("{msgs:?}");
    };
    let pane = String::from_utf8_lossy(&lines[0]).into_owned();
    assert!(pane.starts_with('%') && is_safe_name(&pane), "{lines:?}");

    let bytes = every_byte_twice();
    for line in send_bytes_commands(&pane, &bytes) {
        client.send(&line);
    }
    client.send("bogus-command");
    let msgs = client.read_until(|msgs| {
        pane_output(msgs, &pane).len() >= bytes.len() && replies_from_stdin(msgs).len() >= 3
    });
    assert_eq!(pane_output(&msgs, &pane), bytes);
    let replies = replies_from_stdin(&msgs);
    assert!(matches!(replies[0], Reply { success: true, .. }));
    assert!(matches!(replies[1], Reply { success: true, .. }));
    assert!(
        matches!(replies[2], Reply { success: false, lines, .. } if lines == &[b"parse error: unknown command: bogus-command".to_vec()])
    );
    let numbers: Vec<u64> = replies
        .iter()
        .filter_map(|r| {
            if let Reply { number, .. } = r {
                Some(*number)
            } else {
                None
            }
        })
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");

    // Detaching ends the stream with %exit.
    client.send("detach-client");
    let msgs = client.read_until(|msgs| msgs.iter().any(|m| matches!(m, Exit { .. })));
    assert!(matches!(msgs.last(), Some(Exit { .. })));
}
