//! Running a command in a container through the engine's exec API and collecting what it
//! printed: how the hub works in a container whose files it cannot see (a remote engine).
//! Stand-in for the lead's `Containers::exec_output` until it lands on main.

use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::Docker;
use futures_util::StreamExt;

use crate::error::HubResult;

/// What a command run in a container did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl ExecOutput {
    /// Standard error as text, trimmed (or the exit code when it said nothing).
    pub fn error_text(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr).trim().to_string();
        match text.is_empty() {
            true => format!("exit code {}", self.exit_code),
            false => text,
        }
    }
}

/// Runs `argv` in `container` as `user` (`None`: the container's) with `env` (`NAME=value`)
/// added, without a terminal; waits for it to end.
pub async fn exec_output(
    docker: &Docker,
    endpoint: &str,
    container: &str,
    user: Option<&str>,
    argv: &[String],
    env: &[String],
) -> HubResult<ExecOutput> {
    let failed = |e| super::docker_error(endpoint, e);
    let config = ExecConfig {
        cmd: Some(argv.to_vec()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: Some(env.to_vec()),
        user: user.map(String::from),
        ..Default::default()
    };
    let exec = docker
        .create_exec(container, config)
        .await
        .map_err(failed)?
        .id;
    let started = docker
        .start_exec(&exec, None::<StartExecOptions>)
        .await
        .map_err(failed)?;
    let mut out = ExecOutput::default();
    if let StartExecResults::Attached { mut output, .. } = started {
        while let Some(item) = output.next().await {
            match item.map_err(failed)? {
                bollard::container::LogOutput::StdErr { message } => {
                    out.stderr.extend_from_slice(&message)
                }
                other => out.stdout.extend_from_slice(&other.into_bytes()),
            }
        }
    }
    out.exit_code = docker
        .inspect_exec(&exec)
        .await
        .map_err(failed)?
        .exit_code
        .unwrap_or(-1);
    Ok(out)
}
