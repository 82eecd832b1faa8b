//! The `#[utoipa::path]` declarations of landing an agent's work (merge, update, push).

#![allow(dead_code)]

use crate::protocol::*;

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/merge",
    operation_id = "merge_agent",
    summary = "Land the agent's branch on its base: merge (default; a fast-forward when the base has not moved), squash, rebase or ff-only. `dry_run` changes nothing and says what would land. Refused with BASE_DIRTY (the base is checked out with uncommitted changes: `files`), MERGE_CONFLICT (`conflicts`: each file and its hunks; nothing changed; with `to_agent` the conflicts are sent to the agent: `delivered`), AGENT_WORKING (unless `force`), NOTHING_TO_MERGE, NOT_FAST_FORWARD (ff-only), NO_WORKSPACE. Where the base is checked out (clean) its work tree is updated, else only its ref moves. `continue_from_base` then moves the agent's branch to the new base (its checkout must be clean: WORKSPACE_DIRTY before anything happens; refused with WORKSPACE_REMOTE for a workspace on another engine).",
    params(("id" = String, Path, description = "Agent id")),
    request_body = MergeRequest,
    responses((status = 200, body = MergeReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn merge_agent() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/update",
    operation_id = "update_agent_branch",
    summary = "Bring the agent's base into its branch: merged in (a fast-forward when the branch has nothing of its own), or with `rebase` its commits replayed on the base; its checkout is updated. Refused with WORKSPACE_DIRTY (uncommitted changes in its checkout), MERGE_CONFLICT (nothing changed; `to_agent` sends the conflicts to the agent), AGENT_WORKING (unless `force`), WORKSPACE_REMOTE (a workspace on another engine).",
    params(("id" = String, Path, description = "Agent id")),
    request_body = UpdateRequest,
    responses((status = 200, body = UpdateReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn update_agent_branch() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/push",
    operation_id = "push_agent_branch",
    summary = "Push the agent's branch to a remote of the user's repository (default `origin`) under the same name, with the user's own git configuration and credentials: the reply names the remote's URL and the branch, for a pull request. NO_SUCH_REMOTE, PUSH_FAILED (git's message).",
    params(("id" = String, Path, description = "Agent id")),
    request_body = PushRequest,
    responses((status = 200, body = PushReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn push_agent_branch() {}
