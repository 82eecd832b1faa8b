//! People's credentials over the API: `POST /v1/auth/signin` (open: a one-time code from a
//! sign-in link, exchanged for the owner's token), `POST /v1/auth/signin-link` (admin: a new
//! code, for `agent-hub token link`) and `POST /v1/auth/rotate` (admin: replace the owner's
//! token; the old one is refused at once).

use axum::extract::State;
use axum::Json;

use super::error::{ApiJson, ApiResult};
use crate::access::signin::CODE_LIFETIME;
use crate::access::OWNER_NAME;
use crate::actor::Role;
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{RotateReply, SigninLinkReply, SigninReply, SigninRequest};

/// The sign-in exchange's path (its reply is exempt from redaction: it is the credential).
pub const SIGNIN_PATH: &str = "/v1/auth/signin";

/// `POST /v1/auth/signin`
pub async fn signin(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<SigninRequest>,
) -> ApiResult<Json<SigninReply>> {
    let token = hub
        .access()
        .redeem_signin_code(&req.code)
        .map_err(|refusal| HubError::Unauthorized {
            message: refusal.message().into(),
        })?;
    tracing::info!("the dashboard signed in with a sign-in link");
    Ok(Json(SigninReply {
        ok: true,
        token,
        token_name: OWNER_NAME.into(),
        role: Role::Admin,
    }))
}

/// The dashboard path that signs in with `code` (a fragment: never sent to a server, and the
/// page removes it from the address bar).
pub fn signin_path(code: &str) -> String {
    format!("/#signin={code}")
}

/// `POST /v1/auth/signin-link`
pub async fn signin_link(State(hub): State<Hub>) -> Json<SigninLinkReply> {
    let code = hub.access().issue_signin_code();
    Json(SigninLinkReply {
        ok: true,
        path: signin_path(&code),
        code,
        expires_in_s: CODE_LIFETIME.as_secs(),
    })
}

/// `POST /v1/auth/rotate`
pub async fn rotate(State(hub): State<Hub>) -> ApiResult<Json<RotateReply>> {
    hub.rotate_owner_token().map_err(|e| HubError::Internal {
        message: e.to_string(),
    })?;
    let file = hub.access().owner_file().display().to_string();
    tracing::warn!("the owner's token was rotated; the new one is in {file}");
    Ok(Json(RotateReply { ok: true, file }))
}
