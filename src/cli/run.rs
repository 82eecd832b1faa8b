//! `agent-hub run -- CMD ARGS...`: runs a command as a hub task, prints its output live, and
//! exits with the command's exit code (124 when it timed out, like GNU timeout; 130 when it was
//! cancelled). Ctrl-C cancels the task, which kills every process it started.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use super::ops::fail;
use super::ClientOpts;
use crate::client::{ClientError, HubClient};
use crate::protocol::{
    CreateTask, ServerFrame, TaskCreatedReply, TaskInfo, TaskStartedReply, TaskState,
};

/// Exit code when the task timed out.
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code when the task was cancelled (Ctrl-C).
pub const EXIT_CANCELLED: i32 = 130;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run without a terminal: wait for the end, then print stdout and stderr separately.
    #[arg(long)]
    pub no_pty: bool,
    /// Kill the command after S seconds (default 300).
    #[arg(long, value_name = "S")]
    pub timeout: Option<f64>,
    /// A name for the task list (default: the command).
    #[arg(long, value_name = "N")]
    pub name: Option<String>,
    /// Working directory (default: the hub's home directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Extra environment variables, KEY=VALUE (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// The command and its arguments, run as they are (each is quoted for `sh -c`); for pipes
    /// and other shell syntax, run `sh -c '...'`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Joins words into one `sh -c` command line that runs exactly them.
pub fn shell_join(words: &[String]) -> String {
    shell_words::join(words)
}

/// SIGINT, caught from the start so Ctrl-C never kills the client before it cancels the task.
struct Interrupt {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
}

impl Interrupt {
    fn new() -> std::io::Result<Self> {
        Ok(Interrupt {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?,
        })
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        {
            if self.signal.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The exit code for a finished task.
fn task_exit_code(task: &TaskInfo) -> i32 {
    match task.state {
        TaskState::Success => 0,
        TaskState::Timeout => EXIT_TIMEOUT,
        TaskState::Cancelled => EXIT_CANCELLED,
        TaskState::Running | TaskState::Error => match task.exit_code {
            Some(code) if code != 0 => code,
            _ => 1,
        },
    }
}

/// The output of a piped task: its reply, or the details of its `PTY_TIMEOUT` error.
#[derive(Default, Deserialize)]
struct PipedOutput {
    #[serde(default)]
    stdout: String,
    #[serde(default)]
    stderr: String,
}

pub async fn run(args: RunArgs) -> i32 {
    let mut interrupt = match Interrupt::new() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("agent-hub: cannot catch Ctrl-C: {e}");
            return 1;
        }
    };
    let mut env = BTreeMap::new();
    for pair in &args.env {
        let Some((k, v)) = pair.split_once('=') else {
            eprintln!("agent-hub: --env takes KEY=VALUE, got '{pair}'");
            return 2;
        };
        env.insert(k.to_string(), v.to_string());
    }
    let req = CreateTask {
        cmd: shell_join(&args.command),
        pty: !args.no_pty,
        timeout_s: args.timeout,
        name: args.name.clone(),
        cwd: args.cwd.clone(),
        env,
    };
    let client = args.opts.client();
    if args.no_pty {
        return run_piped(&client, &args.opts, &req, &mut interrupt).await;
    }
    let started = match client.create_task(&req).await {
        Ok(v) => v,
        Err(e) => return fail(&args.opts, &e),
    };
    let (task_id, session_id) = match started {
        TaskCreatedReply::Started(TaskStartedReply {
            task_id,
            session_id: Some(session_id),
            ..
        }) => (task_id, session_id),
        other => {
            let other = serde_json::to_string(&other).unwrap_or_default();
            eprintln!("agent-hub: unexpected reply from the hub: {other}");
            return 1;
        }
    };
    let (task_id, session_id) = (task_id.as_str(), session_id.as_str());
    let follow = async {
        if !args.opts.json {
            print_output(&client, session_id).await;
        }
        wait_for_end(&client, task_id).await
    };
    // A Ctrl-C that came while the task was being created is delivered here at once.
    let (task, interrupted) = tokio::select! {
        task = follow => (task, false),
        _ = interrupt.recv() => (client.cancel_task(task_id).await.map(|v| v.task), true),
    };
    let task = match task {
        Ok(t) => t,
        Err(e) => return fail(&args.opts, &e),
    };
    if args.opts.json {
        super::ops::print_json(&task);
    } else if interrupted {
        eprintln!("agent-hub: cancelled task {task_id}");
    } else if task.state == TaskState::Timeout {
        eprintln!("agent-hub: task {task_id} timed out and was killed");
    }
    if interrupted {
        EXIT_CANCELLED
    } else {
        task_exit_code(&task)
    }
}

/// Copies the task's terminal output to stdout, unchanged, until the command ends.
async fn print_output(client: &HubClient, session_id: &str) {
    let url = client.stream_url(session_id, Some(0));
    let mut socket = match client.ws_connect(&url).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("agent-hub: cannot stream the output ({url}): {e}");
            return;
        }
    };
    let mut stdout = std::io::stdout();
    while let Some(Ok(message)) = socket.next().await {
        match message {
            Message::Binary(bytes) => {
                let _ = stdout.write_all(&bytes);
                let _ = stdout.flush();
            }
            Message::Text(text) => match serde_json::from_str::<ServerFrame>(text.as_str()) {
                Ok(ServerFrame::Resync { dropped_bytes, .. }) => {
                    eprintln!("\nagent-hub: {dropped_bytes} bytes of output were lost (evicted from the scrollback)");
                }
                Ok(ServerFrame::Exit { .. }) => break,
                _ => {}
            },
            Message::Close(_) => break,
            _ => {}
        }
    }
}

/// Waits until the task has finished; returns it.
async fn wait_for_end(client: &HubClient, task_id: &str) -> Result<TaskInfo, ClientError> {
    loop {
        let v = client.wait_task(task_id, 60_000).await?;
        if v.finished {
            return Ok(v.task);
        }
    }
}

/// `--no-pty`: one synchronous request; stdout and stderr are printed when it ends. Ctrl-C
/// drops the request, and the hub cancels a piped task whose caller went away.
async fn run_piped(
    client: &HubClient,
    opts: &ClientOpts,
    req: &CreateTask,
    interrupt: &mut Interrupt,
) -> i32 {
    let result = tokio::select! {
        r = client.create_task(req) => r,
        _ = interrupt.recv() => {
            eprintln!("agent-hub: cancelled");
            return EXIT_CANCELLED;
        }
    };
    let print = |out: PipedOutput| {
        print!("{}", out.stdout);
        let _ = std::io::stdout().flush();
        eprint!("{}", out.stderr);
    };
    match result {
        Ok(TaskCreatedReply::Ran(v)) => {
            let code = task_exit_code(&v.task);
            if opts.json {
                super::ops::print_json(&v);
            } else {
                print(PipedOutput {
                    stdout: v.stdout,
                    stderr: v.stderr,
                });
            }
            code
        }
        Ok(other @ TaskCreatedReply::Started(_)) => {
            let other = serde_json::to_string(&other).unwrap_or_default();
            eprintln!("agent-hub: unexpected reply from the hub: {other}");
            1
        }
        Err(e) if e.error_code == "PTY_TIMEOUT" => {
            if opts.json {
                super::ops::print_json(&e.body);
            } else {
                let details = Value::Object(e.body.details.clone());
                print(serde_json::from_value(details).unwrap_or_default());
                eprintln!("agent-hub: {e}");
            }
            EXIT_TIMEOUT
        }
        Err(e) => fail(opts, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_so_sh_runs_exactly_them() {
        let join = |w: &[&str]| shell_join(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(join(&["echo", "a-b/c.d"]), "echo a-b/c.d");
        assert_eq!(join(&["echo", "a b", ""]), "echo 'a b' ''");
        assert_eq!(join(&["echo", "it's"]), r"echo 'it'\''s'");
        assert_eq!(join(&["A=1", "~", "$HOME", "*"]), "'A=1' '~' '$HOME' '*'");
        assert_eq!(join(&["sh", "-c", "exit 3"]), "sh -c 'exit 3'");
    }

    /// The joined line, run by a real `sh`, gives the program exactly the words it was given.
    #[cfg(unix)] // runs sh
    #[test]
    fn sh_receives_the_words_unchanged() {
        let words: Vec<String> = [
            "printf",
            "%s|",
            "a b",
            "",
            "it's",
            "\"q\"",
            "$HOME",
            "`id`",
            "*",
            "~",
            "naïve ✓",
            "tab\there",
            "line\nbreak",
            "a\\b",
            "{a,b}",
            "!x",
            "; exit 9",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(shell_join(&words))
            .output()
            .unwrap();
        let expected: String = words[2..].iter().map(|w| format!("{w}|")).collect();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
        assert!(out.status.success());
    }

    #[test]
    fn exit_codes_follow_the_task_state() {
        use serde_json::json;
        // A task with the given state fields and placeholders for the rest.
        let code = |v: Value| {
            let mut task = json!({"id": "t1", "name": "t", "startedAt": "2026-01-01T00:00:00Z",
                "cmd": "true", "pty": false});
            for (k, x) in v.as_object().unwrap() {
                task[k] = x.clone();
            }
            task_exit_code(&serde_json::from_value(task).unwrap())
        };
        assert_eq!(code(json!({"state": "success", "exitCode": 0})), 0);
        assert_eq!(code(json!({"state": "error", "exitCode": 3})), 3);
        assert_eq!(code(json!({"state": "error", "exitCode": null})), 1);
        assert_eq!(code(json!({"state": "timeout"})), 124);
        assert_eq!(code(json!({"state": "cancelled"})), 130);
    }
}
