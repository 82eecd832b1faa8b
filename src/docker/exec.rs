//! A command run in a container through the engine's exec API, its output collected: how the
//! hub looks at or acts on an agent's files when it cannot see them (a remote engine).

use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::Docker;
use futures_util::StreamExt;

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The user to run as (`agent`, `1000:1000`); empty: the container's.
    pub user: String,
    /// `NAME=value` entries added to the container's environment.
    pub env: Vec<String>,
    /// The working directory; empty: the container's.
    pub workdir: String,
}

/// What it did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl ExecOutput {
    /// Its standard output as text (lossy).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Its standard error as text (lossy), trimmed.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

/// Runs `req` in `container` and waits for it to end.
pub async fn run(
    docker: &Docker,
    container: &str,
    req: &ExecRequest,
) -> Result<ExecOutput, bollard::errors::Error> {
    let config = ExecConfig {
        cmd: Some(req.argv.clone()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: Some(req.env.clone()),
        user: (!req.user.is_empty()).then(|| req.user.clone()),
        working_dir: (!req.workdir.is_empty()).then(|| req.workdir.clone()),
        ..Default::default()
    };
    let exec = docker.create_exec(container, config).await?.id;
    let started = docker.start_exec(&exec, None::<StartExecOptions>).await?;
    let mut out = ExecOutput::default();
    if let StartExecResults::Attached { mut output, .. } = started {
        while let Some(item) = output.next().await {
            match item? {
                bollard::container::LogOutput::StdErr { message } => {
                    out.stderr.extend_from_slice(&message)
                }
                other => out.stdout.extend_from_slice(&other.into_bytes()),
            }
        }
    }
    out.exit_code = docker.inspect_exec(&exec).await?.exit_code.unwrap_or(0);
    Ok(out)
}
