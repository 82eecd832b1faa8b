//! Each agent's workspace over git's smart HTTP, under `/v1/agents/{id}/git`: what an agent on
//! another engine clones and pushes (see [`crate::workspace::http_backend`]). Its own
//! credential may fetch and push its branch; people's tokens may fetch. A push that names
//! another ref is refused before git sees it, in git's own words (`! [remote rejected]`); a
//! push git refuses (a force push) is found after it. Every push, and every refusal, is in the
//! audit log (`git_push`, `git_fetch`): these routes are not audited by the audit layer,
//! which would keep the pack itself.

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};

use super::error::{ApiError, ApiResult};
use crate::actor::Actor;
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::WorkspaceInfo;
use crate::workspace::http_backend::{self, CgiRequest, Served};
use crate::workspace::push_rule::{self, Commands, PktError, RefUpdate};
use crate::workspace::ServedRepo;

/// What a request asks of the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Fetch,
    Push,
}

impl Want {
    fn action(self) -> &'static str {
        match self {
            Want::Fetch => "git_fetch",
            Want::Push => "git_push",
        }
    }
}

/// Whether `actor` may `want` agent `agent`'s repository: its own credential may fetch and
/// push; another agent's may do nothing; people may fetch (their role is the route's).
fn admit(actor: &Actor, agent: &str, want: Want) -> Result<(), HubError> {
    let refused = |code, message: String| HubError::Workspace {
        code,
        message,
        files: Vec::new(),
    };
    match (&actor.agent, want) {
        (Some(who), _) if who.agent_id == agent => Ok(()),
        (Some(who), _) => Err(refused(
            "WORKSPACE_NOT_YOURS",
            format!(
                "agent '{}' may reach only its own workspace over git, not agent '{agent}''s",
                who.agent_id
            ),
        )),
        (None, Want::Fetch) => Ok(()),
        (None, Want::Push) => Err(refused(
            "WORKSPACE_PUSH_REFUSED",
            format!("only agent '{agent}''s own credential pushes to its branch"),
        )),
    }
}

/// One line of the audit log about the repository of `agent`.
struct Entry<'a> {
    actor: &'a Actor,
    agent: &'a str,
    want: Want,
    /// What was asked (`push refs/heads/main 1a2b..3c4d`).
    command: String,
    /// `Err((code, why))` for a refusal.
    outcome: Result<(), (&'static str, String)>,
    status: u16,
}

async fn record(hub: &Hub, entry: Entry<'_>) {
    let audit = hub.audit();
    if !audit.enabled() {
        return;
    }
    let actor = entry.actor;
    let mut r = crate::audit::new_record(
        &actor.token_name,
        actor.agent_id.clone(),
        entry.want.action(),
    );
    r.agent_id = Some(entry.agent.to_string());
    r.command = Some(entry.command);
    r.status = Some(i64::from(entry.status));
    r.success = Some(entry.outcome.is_ok());
    if let Err((code, why)) = entry.outcome {
        r.error_code = Some(code.to_string());
        r.response = Some(why);
    }
    if let Err(e) = audit.record(r).await {
        tracing::error!(
            agent = entry.agent,
            "audit: a git request not recorded: {e}"
        );
    }
}

/// Admits the caller, recording a refusal.
async fn admitted(hub: &Hub, actor: &Actor, agent: &str, want: Want) -> ApiResult<()> {
    let Err(e) = admit(actor, agent, want) else {
        return Ok(());
    };
    let entry = Entry {
        actor,
        agent,
        want,
        command: format!("{} refused", want.action()),
        outcome: Err((e.code(), e.to_string())),
        status: e.http_status(),
    };
    record(hub, entry).await;
    Err(ApiError(e))
}

/// The agent's workspace and its repository's facts for serving it.
async fn workspace(hub: &Hub, agent: &str) -> ApiResult<(WorkspaceInfo, ServedRepo)> {
    Ok(hub.agents().served_workspace(agent).await?)
}

fn served<'a>(
    ws: &'a WorkspaceInfo,
    repo: &'a ServedRepo,
    agent: &'a str,
    push: bool,
) -> Served<'a> {
    Served {
        git_dir: &repo.git_dir,
        branch: &ws.branch,
        base_ref: repo.base_ref.as_deref(),
        push,
        run_as: repo.run_as,
        remote_user: agent,
    }
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

fn cgi_request(req: &Request, path_info: &str, query: Option<String>) -> CgiRequest {
    let headers = req.headers();
    CgiRequest {
        method: req.method().to_string(),
        path_info: path_info.to_string(),
        query: query.unwrap_or_default(),
        content_type: header_text(headers, header::CONTENT_TYPE),
        content_encoding: header_text(headers, header::CONTENT_ENCODING),
        content_length: header_text(headers, header::CONTENT_LENGTH).and_then(|n| n.parse().ok()),
    }
}

type ByteStream = BoxStream<'static, std::io::Result<Bytes>>;

fn body_stream(body: Body) -> ByteStream {
    body.into_data_stream()
        .map(|chunk| chunk.map_err(std::io::Error::other))
        .boxed()
}

/// Runs git for the request and answers with what it says.
async fn serve(served: &Served<'_>, request: &CgiRequest, body: ByteStream) -> ApiResult<Response> {
    let cgi = http_backend::run(served, request, body)
        .await
        .map_err(workspace_error)?;
    Ok(cgi_response(cgi.status, cgi.headers, cgi.body))
}

fn cgi_response(status: u16, headers: Vec<(String, String)>, body: ByteStream) -> Response {
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(body)).unwrap_or_else(|e| {
        ApiError(HubError::Internal {
            message: e.to_string(),
        })
        .into_response()
    })
}

fn workspace_error(e: crate::workspace::WorkspaceError) -> ApiError {
    ApiError(HubError::Workspace {
        code: e.code(),
        message: e.to_string(),
        files: Vec::new(),
    })
}

/// `GET .../git/info/refs?service=git-upload-pack|git-receive-pack`: the refs in view.
pub async fn info_refs(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    axum::Extension(actor): axum::Extension<Actor>,
    req: Request,
) -> ApiResult<Response> {
    let service = query
        .as_deref()
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("service="));
    let want = match service {
        Some("git-upload-pack") => Want::Fetch,
        Some("git-receive-pack") => Want::Push,
        _ => {
            return Err(ApiError(HubError::BadRequest {
                message: "only git's smart HTTP is served: ?service=git-upload-pack or \
                          git-receive-pack"
                    .into(),
            }))
        }
    };
    admitted(&hub, &actor, &id, want).await?;
    let (ws, repo) = workspace(&hub, &id).await?;
    let request = cgi_request(&req, "/info/refs", query);
    let served = served(&ws, &repo, &id, want == Want::Push);
    serve(&served, &request, stream::empty().boxed()).await
}

/// `POST .../git/git-upload-pack`: a fetch or a clone.
pub async fn upload_pack(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    axum::Extension(actor): axum::Extension<Actor>,
    req: Request,
) -> ApiResult<Response> {
    admitted(&hub, &actor, &id, Want::Fetch).await?;
    let (ws, repo) = workspace(&hub, &id).await?;
    let request = cgi_request(&req, "/git-upload-pack", None);
    let served = served(&ws, &repo, &id, false);
    serve(&served, &request, body_stream(req.into_body())).await
}

/// `POST .../git/git-receive-pack`: a push, its ref updates decided before git sees them.
pub async fn receive_pack(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    axum::Extension(actor): axum::Extension<Actor>,
    req: Request,
) -> ApiResult<Response> {
    admitted(&hub, &actor, &id, Want::Push).await?;
    let (ws, repo) = workspace(&hub, &id).await?;
    let mut request = cgi_request(&req, "/git-receive-pack", None);
    if request
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.eq_ignore_ascii_case("identity"))
    {
        // git never compresses a push; the refs it names must be read before git runs.
        return Err(ApiError(HubError::BadRequest {
            message: "a compressed push is not taken: send it without Content-Encoding".into(),
        }));
    }
    request.content_encoding = None;
    let mut body = body_stream(req.into_body());
    let (commands, start) = match read_commands(&mut body).await {
        Ok(read) => read,
        Err(e) => {
            let refused = HubError::BadRequest {
                message: e.to_string(),
            };
            let entry = Entry {
                actor: &actor,
                agent: &id,
                want: Want::Push,
                command: "push (unreadable)".into(),
                outcome: Err((refused.code(), e.to_string())),
                status: refused.http_status(),
            };
            record(&hub, entry).await;
            return Err(ApiError(refused));
        }
    };
    let asked = describe(&commands.updates);
    if let Err(refusal) = push_rule::decide(&commands.updates, &ws.branch) {
        // The client reads the report once it has sent everything: the rest is drained.
        while body.next().await.is_some() {}
        let why = format!("{}: {}", refusal.name, refusal.why);
        let entry = Entry {
            actor: &actor,
            agent: &id,
            want: Want::Push,
            command: asked,
            outcome: Err(("WORKSPACE_PUSH_REFUSED", why)),
            status: 200,
        };
        record(&hub, entry).await;
        let report = push_rule::refusal_report(&commands, &refusal);
        let headers = vec![(
            "Content-Type".to_string(),
            "application/x-git-receive-pack-result".to_string(),
        )];
        return Ok(cgi_response(
            200,
            headers,
            stream::iter([Ok(Bytes::from(report))]).boxed(),
        ));
    }
    let git_dir = repo.git_dir.clone();
    let branch = ws.branch.clone();
    let before = blocking(git_dir.clone(), move |dir| {
        crate::workspace::branch_tip(dir, &branch)
    })
    .await;
    let body = stream::iter([Ok(Bytes::from(start))]).chain(body).boxed();
    let served = served(&ws, &repo, &id, true);
    let cgi = http_backend::run(&served, &request, body)
        .await
        .map_err(workspace_error)?;
    let after = Outcome {
        hub: hub.clone(),
        actor: actor.clone(),
        agent: id.clone(),
        branch: ws.branch.clone(),
        git_dir,
        updates: commands.updates,
        before,
        asked,
    };
    tokio::spawn(async move {
        let (ok, said) = cgi.exited.await.unwrap_or_default();
        if !ok {
            tracing::warn!(agent = %after.agent, "git http-backend failed: {said}");
        }
        after.record().await;
    });
    Ok(cgi_response(cgi.status, cgi.headers, cgi.body))
}

/// Reads the body up to the end of its ref updates: the updates, and every byte read (which
/// git must still get).
async fn read_commands(body: &mut ByteStream) -> Result<(Commands, Vec<u8>), PktError> {
    let mut read = Vec::new();
    loop {
        if let Some((commands, _)) = push_rule::read_commands(&read)? {
            return Ok((commands, read));
        }
        match body.next().await {
            Some(Ok(chunk)) => read.extend_from_slice(&chunk),
            Some(Err(e)) => return Err(PktError::Malformed(e.to_string())),
            None if read.is_empty() => {
                return Ok((
                    Commands {
                        updates: Vec::new(),
                        capabilities: Vec::new(),
                    },
                    read,
                ))
            }
            None => {
                return Err(PktError::Malformed(
                    "the push ended in its ref updates".into(),
                ))
            }
        }
    }
}

/// `push <ref> <old>..<new>` for each update.
fn describe(updates: &[RefUpdate]) -> String {
    let short = |oid: &str| oid.get(..12).unwrap_or(oid).to_string();
    let each: Vec<String> = updates
        .iter()
        .map(|u| format!("push {} {}..{}", u.name, short(&u.old), short(&u.new)))
        .collect();
    match each.is_empty() {
        true => "push (nothing)".into(),
        false => each.join("; "),
    }
}

/// Runs `f` on the repository's git directory off the async threads.
async fn blocking<T: Default + Send + 'static>(
    git_dir: std::path::PathBuf,
    f: impl FnOnce(&std::path::Path) -> T + Send + 'static,
) -> T {
    tokio::task::spawn_blocking(move || f(&git_dir))
        .await
        .unwrap_or_default()
}

/// A push git ran: what it did to the branch, recorded once git has exited.
struct Outcome {
    hub: Hub,
    actor: Actor,
    agent: String,
    branch: String,
    git_dir: std::path::PathBuf,
    updates: Vec<RefUpdate>,
    before: Option<String>,
    asked: String,
}

impl Outcome {
    async fn record(self) {
        let Some(update) = self.updates.first().cloned() else {
            return;
        };
        let branch = self.branch.clone();
        let before = self.before.clone();
        let new = update.new.clone();
        let (after, is_ancestor) = blocking(self.git_dir.clone(), move |dir| {
            let after = crate::workspace::branch_tip(dir, &branch);
            let ancestor = before
                .as_deref()
                .and_then(|b| crate::workspace::is_ancestor(dir, b, &new));
            (after, ancestor)
        })
        .await;
        let why = push_rule::why_git_refused(
            &update,
            self.before.as_deref(),
            after.as_deref(),
            is_ancestor,
        );
        if let Some(why) = &why {
            tracing::warn!(agent = %self.agent, "a push to {} was refused: {why}", update.name);
        }
        let entry = Entry {
            actor: &self.actor,
            agent: &self.agent,
            want: Want::Push,
            command: self.asked,
            outcome: why.map_or(Ok(()), |why| Err(("WORKSPACE_PUSH_REFUSED", why))),
            status: 200,
        };
        record(&self.hub, entry).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::AgentIdentity;

    fn agent(id: &str) -> Actor {
        Actor::of_agent(AgentIdentity {
            agent_id: id.into(),
            team: "t".into(),
            leader: true,
            may_merge: false,
        })
    }

    #[test]
    fn its_own_credential_fetches_and_pushes_people_fetch_other_agents_nothing() {
        let owner = Actor {
            token_name: "owner".into(),
            role: Some(crate::actor::Role::Admin),
            ..Actor::default()
        };
        let table = [
            (agent("w1"), Want::Fetch, None),
            (agent("w1"), Want::Push, None),
            (agent("w2"), Want::Fetch, Some("WORKSPACE_NOT_YOURS")),
            (agent("w2"), Want::Push, Some("WORKSPACE_NOT_YOURS")),
            (owner.clone(), Want::Fetch, None),
            (owner, Want::Push, Some("WORKSPACE_PUSH_REFUSED")),
        ];
        for (actor, want, code) in table {
            let got = admit(&actor, "w1", want).err().map(|e| e.code());
            assert_eq!(got, code, "{:?} {want:?}", actor.token_name);
        }
    }
}
