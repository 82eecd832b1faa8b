//! Serving the user's repository over git's smart HTTP to one agent: `git http-backend` run as
//! a CGI on the repository's git directory, seeing and taking only what that agent may.
//!
//! git's own configuration, given on its command line, does the limiting: `transfer.hideRefs`
//! hides every ref but the agent's branch and its base (git then serves no object that only
//! they reach: protocol v2, which would, is not offered), `receive.denyNonFastForwards` and
//! `receive.denyDeletes` keep what is on the branch, and none of the repository's hooks runs.
//! Which refs a push names is decided before git sees it ([`super::push_rule`]). A hub that
//! runs as root runs git as the repository's owner, so what a push writes belongs to them.
//!
//! Unlike the rest of [`crate::workspace`], this is asynchronous: the request's body streams
//! into git and its answer streams back.

use std::path::Path;
use std::process::Stdio;

use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::git::Git;
use super::WorkspaceError;

/// The longest CGI header block read from git.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// What one agent is served.
#[derive(Debug, Clone)]
pub struct Served<'a> {
    /// The repository's git directory (the common dir).
    pub git_dir: &'a Path,
    /// The agent's branch (`agent/w1`).
    pub branch: &'a str,
    /// The base's full ref name when it is a branch or a tag (`refs/heads/main`).
    pub base_ref: Option<&'a str>,
    /// Whether the caller may push (the agent itself).
    pub push: bool,
    /// Run git as this user and group (a root hub, a repository of another user).
    pub run_as: Option<(u32, u32)>,
    /// Who asks (git records it as the pusher in the branch's reflog).
    pub remote_user: &'a str,
}

/// The request as the CGI sees it.
#[derive(Debug, Clone, Default)]
pub struct CgiRequest {
    pub method: String,
    /// `/info/refs`, `/git-upload-pack` or `/git-receive-pack`.
    pub path_info: String,
    pub query: String,
    pub content_type: Option<String>,
    /// `gzip` when the body is compressed (git decompresses it itself).
    pub content_encoding: Option<String>,
    pub content_length: Option<u64>,
}

/// git's answer: its status and headers, the body streaming, and its end.
pub struct CgiResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: BoxStream<'static, std::io::Result<Bytes>>,
    /// Resolves when git has exited: whether it succeeded, and what it said on stderr.
    pub exited: tokio::sync::oneshot::Receiver<(bool, String)>,
}

/// The configuration that limits what git serves and takes.
pub fn config(served: &Served) -> Vec<String> {
    let mut config = vec![
        "http.uploadpack=true".to_string(),
        format!("http.receivepack={}", served.push),
        "transfer.hideRefs=refs/".into(),
        "transfer.hideRefs=HEAD".into(),
        format!("transfer.hideRefs=!refs/heads/{}", served.branch),
        "receive.denyNonFastForwards=true".into(),
        "receive.denyDeletes=true".into(),
        "receive.autogc=false".into(),
        "receive.advertisePushOptions=false".into(),
        "uploadpack.allowFilter=false".into(),
    ];
    if let Some(base) = served.base_ref {
        config.push(format!("transfer.hideRefs=!{base}"));
    }
    config
}

/// Runs `git http-backend` for `request`, `body` streaming into it.
pub async fn run(
    served: &Served<'_>,
    request: &CgiRequest,
    body: BoxStream<'static, std::io::Result<Bytes>>,
) -> Result<CgiResponse, WorkspaceError> {
    let mut git = Git::new(served.git_dir);
    for setting in config(served) {
        git = git.arg("-c").arg(setting);
    }
    let mut cmd = git.arg("http-backend").into_command();
    cmd.env("GIT_PROJECT_ROOT", served.git_dir)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", &request.path_info)
        .env("QUERY_STRING", &request.query)
        .env("REMOTE_USER", served.remote_user)
        .env("REMOTE_ADDR", "agent-hub")
        .env_remove("GIT_PROTOCOL")
        .env_remove("HTTP_GIT_PROTOCOL")
        .env_remove("CONTENT_LENGTH")
        .env_remove("HTTP_CONTENT_ENCODING");
    if let Some(t) = &request.content_type {
        cmd.env("CONTENT_TYPE", t);
    }
    if let Some(e) = &request.content_encoding {
        cmd.env("HTTP_CONTENT_ENCODING", e);
    }
    if let Some(n) = request.content_length {
        cmd.env("CONTENT_LENGTH", n.to_string());
    }
    if let Some((uid, gid)) = served.run_as {
        // Another user's git must not read the hub's own configuration.
        crate::platform::run_as(&mut cmd, uid, gid);
        cmd.env("HOME", "/nonexistent")
            .env_remove("XDG_CONFIG_HOME");
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .map_err(WorkspaceError::io("could not run git http-backend"))?;
    let (Some(stdin), Some(mut stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(WorkspaceError::io("git http-backend")(
            std::io::Error::other("its pipes are missing"),
        ));
    };
    tokio::spawn(feed(stdin, body));
    let (exited_tx, exited) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let said = read_all(stderr).await;
        let ok = child.wait().await.is_ok_and(|s| s.success());
        let _ = exited_tx.send((ok, said));
    });
    let (head, rest) = read_head(&mut stdout).await?;
    let (status, headers) = parse_head(&head);
    let rest = futures_util::stream::iter((!rest.is_empty()).then(|| Ok(Bytes::from(rest))));
    let body = rest
        .chain(tokio_util::io::ReaderStream::new(stdout))
        .boxed();
    Ok(CgiResponse {
        status,
        headers,
        body,
        exited,
    })
}

/// Writes the request's body into git; a body cut short ends git's input too.
async fn feed(
    mut stdin: tokio::process::ChildStdin,
    mut body: BoxStream<'static, std::io::Result<Bytes>>,
) {
    while let Some(Ok(chunk)) = body.next().await {
        if stdin.write_all(&chunk).await.is_err() {
            return;
        }
    }
    let _ = stdin.shutdown().await;
}

async fn read_all(mut from: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut text = Vec::new();
    let _ = from.read_to_end(&mut text).await;
    String::from_utf8_lossy(&text).trim().to_string()
}

/// The CGI header block (up to the blank line) and the body bytes read with it.
async fn read_head(
    stdout: &mut tokio::process::ChildStdout,
) -> Result<(String, Vec<u8>), WorkspaceError> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some((end, sep)) = header_end(&buf) {
            let rest = buf.split_off(end + sep);
            buf.truncate(end);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        let n = stdout
            .read(&mut chunk)
            .await
            .map_err(WorkspaceError::io("reading git http-backend's answer"))?;
        if n == 0 || buf.len() > MAX_HEADER_BYTES {
            return Err(WorkspaceError::Git {
                args: "http-backend".into(),
                stderr: "it ended before its headers".into(),
            });
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Where the header block ends and how long its separator is.
fn header_end(buf: &[u8]) -> Option<(usize, usize)> {
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The status (`Status: 404 Not Found`; 200 when absent) and the other headers of a CGI
/// header block.
pub fn parse_head(head: &str) -> (u16, Vec<(String, String)>) {
    let mut status = 200;
    let mut headers = Vec::new();
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().to_string();
        if name.eq_ignore_ascii_case("status") {
            status = value
                .split(' ')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(500);
        } else {
            headers.push((name.trim().to_string(), value));
        }
    }
    (status, headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgi_headers_are_read() {
        let (status, headers) =
            parse_head("Status: 403 Forbidden\r\nContent-Type: text/plain\r\nExpires: x");
        assert_eq!(status, 403);
        assert_eq!(
            headers,
            vec![
                ("Content-Type".to_string(), "text/plain".to_string()),
                ("Expires".to_string(), "x".to_string())
            ]
        );
        assert_eq!(parse_head("Content-Type: a/b").0, 200);
        assert_eq!(header_end(b"A: b\r\n\r\nbody"), Some((4, 4)));
        assert_eq!(header_end(b"A: b\n\nbody"), Some((4, 2)));
        assert_eq!(header_end(b"A: b\r\n"), None);
    }

    #[test]
    fn only_the_branch_and_its_base_are_in_view_and_pushes_only_for_the_agent() {
        let served = Served {
            git_dir: Path::new("/r/.git"),
            branch: "agent/w1",
            base_ref: Some("refs/heads/main"),
            push: false,
            run_as: None,
            remote_user: "w1",
        };
        let config = config(&served);
        for want in [
            "http.receivepack=false",
            "transfer.hideRefs=refs/",
            "transfer.hideRefs=!refs/heads/agent/w1",
            "transfer.hideRefs=!refs/heads/main",
            "receive.denyNonFastForwards=true",
            "receive.denyDeletes=true",
        ] {
            assert!(config.iter().any(|c| c == want), "{want} in {config:?}");
        }
        let hide_all = config.iter().position(|c| c == "transfer.hideRefs=refs/");
        let show_own = config
            .iter()
            .position(|c| c == "transfer.hideRefs=!refs/heads/agent/w1");
        assert!(hide_all < show_own, "a later entry wins");
    }
}
