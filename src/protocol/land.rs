//! Wire types of landing an agent's work: `POST /v1/agents/{id}/merge`, `.../update` and
//! `.../push`.

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::ToSchema;

use crate::workspace::{Commit, FileChange, LandMode};

/// `POST /v1/agents/{id}/merge`
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeRequest {
    /// `merge` (default: a merge commit, or a fast-forward when the base has not moved),
    /// `squash`, `rebase` or `ff-only`.
    #[serde(default)]
    pub mode: LandMode,
    /// The merge or squash commit's message (default: `Merge branch '<branch>'`; a squash:
    /// its commits' subjects). Not blank, no NUL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = commit_message)]
    pub message: Option<String>,
    /// Merge even while the agent is working.
    #[serde(default)]
    pub force: bool,
    /// On a conflict, send the conflicting files and hunks to the agent as a prompt to resolve
    /// them on its branch.
    #[serde(default)]
    pub to_agent: bool,
    /// After the merge, move the agent's branch (and checkout) to the new base.
    #[serde(default)]
    pub continue_from_base: bool,
    /// Change nothing; say what would land.
    #[serde(default)]
    pub dry_run: bool,
}

/// The schema of [`MergeRequest::message`]: absent, `null`, or not blank.
fn commit_message() -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            Type::String,
            Type::Null,
        ]))
        .pattern(Some(super::schema::not_blank()))
        .description(Some("The commit message (default: git's)."))
        .build()
}

/// Whether a commit message is one the hub takes: something besides white space, no NUL.
pub fn commit_message_ok(message: &str) -> bool {
    !message.trim().is_empty() && !message.contains('\0')
}

/// `POST /v1/agents/{id}/merge`: what landed or, with `dry_run`, what would.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MergeReply {
    pub ok: bool,
    pub agent_id: String,
    /// Present (true) on a dry run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    pub mode: LandMode,
    pub base: String,
    pub branch: String,
    /// Dry run: the agent's commits not on the base; a merge: the commits now on the base
    /// that were not (a merge commit included). Newest first.
    pub commits: Vec<Commit>,
    /// The files that change (changed) on the base; a dry run that conflicts: the branch's.
    pub files: Vec<FileChange>,
    /// Dry run: whether it would land (no conflict, and for `ff-only` a fast-forward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean: Option<bool>,
    /// Dry run: the files that would conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<Vec<String>>,
    /// The base's commit before the merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// The base's commit after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// `updated`: the base is checked out and its work tree was updated; `ref_only`: only
    /// its ref moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// `continue_from_base`: the commit the agent's branch is now at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_at: Option<String>,
}

/// `POST /v1/agents/{id}/update`
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    /// Replay the agent's commits on the base instead of merging the base in.
    #[serde(default)]
    pub rebase: bool,
    /// Update even while the agent is working.
    #[serde(default)]
    pub force: bool,
    /// On a conflict, send the conflicting files and hunks to the agent as a prompt.
    #[serde(default)]
    pub to_agent: bool,
}

/// `POST /v1/agents/{id}/update`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UpdateReply {
    pub ok: bool,
    pub agent_id: String,
    pub base: String,
    pub branch: String,
    /// The branch's commit before and after (equal: it already had the base).
    pub before: String,
    pub after: String,
    /// Whether the branch moved.
    pub updated: bool,
    /// `updated`: its checkout was updated; `ref_only`: only its ref moved.
    pub worktree: String,
}

/// `POST /v1/agents/{id}/push`
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// The remote of the user's repository (default `origin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = r"^[^\u0000]*$")]
    pub remote: Option<String>,
}

/// `POST /v1/agents/{id}/push`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PushReply {
    pub ok: bool,
    pub agent_id: String,
    pub remote: String,
    /// The remote's URL (where to open a pull request).
    pub url: String,
    pub branch: String,
    /// The commit pushed.
    pub sha: String,
}

/// How a branch move left the work tree: `updated` or `ref_only`.
pub fn worktree_word(updated: bool) -> &'static str {
    match updated {
        true => "updated",
        false => "ref_only",
    }
}
