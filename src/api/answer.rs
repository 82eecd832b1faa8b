//! Answer links (`notify_actions = true`; [`crate::notify::answer_link`]): `GET
//! /answer/{session}/{token}` shows the question and the choice with a button (a link preview
//! or a mail scanner that fetches it answers nothing), `POST` answers: the choice's keys go to
//! the session like any other keys (the guard and the traffic log see the actor
//! `answer-link`, the audit log records `answer_link`), and the reply carries the receipt.
//! A link answers only while its question is on the screen: the session blocked since the
//! same moment, asking the same words. A browser (`Accept: text/html`) gets a page, anything
//! else JSON (`{ok:false, error_code, message}` when refused).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;

use super::error::ApiError;
use crate::actor::{Actor, Role};
use crate::agent_state::State as AgentState;
use crate::error::HubError;
use crate::hub::Hub;
use crate::notify::answer_link::{question_hash, AnswerLinks, Claim, Refusal};
use crate::protocol::{AnswerLinkView, AnswerReply};
use crate::session::Session;

/// The route's path as `routes` declares it (its test lets this open route change things:
/// the token is its credential).
#[cfg(test)]
pub const PATH: &str = "/answer/{session}/{token}";

/// The actor answer links act as.
pub const ACTOR: &str = "answer-link";

pub async fn page(
    State(hub): State<Hub>,
    Path((session_id, token)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let html = wants_html(&headers);
    let Checked {
        claim, question, ..
    } = match check(&hub, &session_id, &token) {
        Ok(checked) => checked,
        Err(refusal) => return refused(refusal, html),
    };
    if html {
        return html_reply(StatusCode::OK, |n| confirm_page(&claim, &question, n));
    }
    Json(AnswerLinkView {
        ok: true,
        session_id: claim.session_id,
        question,
        answer: claim.label,
        keys: claim.keys,
        expires_at: chrono::DateTime::from_timestamp(claim.expires, 0),
    })
    .into_response()
}

pub async fn answer(
    State(hub): State<Hub>,
    Path((session_id, token)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let html = wants_html(&headers);
    let Checked {
        claim,
        session,
        links,
        ..
    } = match check(&hub, &session_id, &token) {
        Ok(checked) => checked,
        Err(refusal) => return refused(refusal, html),
    };
    if let Err(refusal) = links.take(&claim, chrono::Utc::now()) {
        return refused(refusal, html);
    }
    let actor = Actor {
        token_name: ACTOR.into(),
        role: Some(Role::Operator),
        ..Actor::default()
    };
    let baseline = session.screen_fingerprint();
    if let Err(e) = session.send_keys(&actor, &claim.keys).await {
        links.give_back(&claim);
        return ApiError(e).into_response();
    }
    let receipt = crate::delivery::keys_receipt(&session, baseline).await;
    let receipt = serde_json::to_value(receipt)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    if html {
        return html_reply(StatusCode::OK, |n| answered_page(&claim, &receipt, n));
    }
    Json(AnswerReply {
        ok: true,
        session_id: claim.session_id,
        answer: claim.label,
        keys: claim.keys,
        receipt,
    })
    .into_response()
}

/// What a link that answers now gives: its claim, the question's words as the screen shows
/// them, the session, and the signer that checked it.
struct Checked {
    claim: Claim,
    question: String,
    session: Arc<Session>,
    links: Arc<AnswerLinks>,
}

/// Whether the link answers now: signed by this hub for this session, current, unused, and
/// its question still on the screen.
fn check(hub: &Hub, session_id: &str, token: &str) -> Result<Checked, Refusal> {
    let links = hub
        .notifier()
        .answer_links()
        .ok_or(Refusal::Invalid)?
        .clone();
    let claim = links.verify(session_id, token, chrono::Utc::now())?;
    if links.answered(&claim) {
        return Err(Refusal::Used);
    }
    let session = hub
        .get(&claim.session_id)
        .map_err(|_| Refusal::QuestionGone)?;
    let report = session.state_report();
    let same_question = report.state == AgentState::Blocked
        && report.since.timestamp_millis() == claim.blocked_since_ms;
    if !same_question {
        return Err(Refusal::QuestionGone);
    }
    let question = super::policies::blocked_question(hub, &session, &report.evidence)
        .map(|(q, _)| q)
        .filter(|q| question_hash(q) == claim.question)
        .ok_or(Refusal::QuestionGone)?;
    Ok(Checked {
        claim,
        question,
        session,
        links,
    })
}

fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"))
}

fn refused(refusal: Refusal, html: bool) -> Response {
    let error = HubError::AnswerLink {
        code: refusal.code(),
        message: refusal.message().into(),
    };
    if !html {
        return ApiError(error).into_response();
    }
    let status = StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::FORBIDDEN);
    let body = format!(
        "<p class=\"refused\" data-code=\"{}\">{}</p><p><a href=\"/\">Open the dashboard</a></p>",
        refusal.code(),
        escape(refusal.message())
    );
    html_reply(status, |n| page_html("Not answered", &body, n))
}

/// A page under the dashboard's security headers (its CSP admits the page's own style by a
/// fresh nonce; no referrer leaves with the link's token), never cached.
fn html_reply(status: StatusCode, page: impl FnOnce(&str) -> String) -> Response {
    let nonce = format!("{:032x}", rand::random::<u128>());
    let mut response = (status, Html(page(&nonce))).into_response();
    response = super::web::with_security_headers(response, &nonce);
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

fn confirm_page(claim: &Claim, question: &str, nonce: &str) -> String {
    page_html(
        "Answer the agent",
        &format!(
            "<p>Session <code>{}</code> asks:</p><pre>{}</pre>\
             <form method=\"post\"><button type=\"submit\">Answer: {}</button></form>\
             <p class=\"note\">This link answers once, within 15 minutes of the message.</p>",
            escape(&claim.session_id),
            escape(question),
            escape(&claim.label)
        ),
        nonce,
    )
}

fn answered_page(claim: &Claim, receipt: &str, nonce: &str) -> String {
    let said = match receipt {
        "submitted" => "the agent's screen changed: it took the answer",
        _ => "the agent's screen did not change yet: open the dashboard to look",
    };
    page_html(
        "Answered",
        &format!(
            "<p class=\"answered\" data-receipt=\"{}\">Sent <b>{}</b> to <code>{}</code>: {}.</p>\
             <p><a href=\"/\">Open the dashboard</a></p>",
            escape(receipt),
            escape(&claim.label),
            escape(&claim.session_id),
            said
        ),
        nonce,
    )
}

fn page_html(title: &str, body: &str, nonce: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>agent-hub: {title}</title><style nonce=\"{nonce}\">body{{font:16px system-ui,sans-serif;\
         margin:1.5em;max-width:40em}}pre{{white-space:pre-wrap;background:#f4f4f4;padding:.75em}}\
         button{{font-size:1.1em;min-height:48px;padding:0 1.5em}}</style></head>\
         <body><h1>{title}</h1>{body}</body></html>"
    )
}

/// Text as HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
