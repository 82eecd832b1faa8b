//! The layer that redacts every JSON reply: whatever a handler puts in a string (talk output,
//! a timeout's partial output, task stdout, term_read lines, an agent's last screen), secrets
//! leave the hub as `[REDACTED]`. Handlers of byte streams (read, stream) redact with context
//! themselves; this layer is the net under everything else. Only an admin's explicit
//! `raw=true` (itself audited) and the sign-in exchange (whose reply is the owner's token)
//! pass through untouched.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;

use crate::actor::{Actor, Role};
use crate::hub::Hub;
use crate::output::Output;
use crate::protocol::Encoding;
use crate::redact::stream::FLUSH_AFTER;
use crate::scrollback::Chunk;

/// Whether the query string asks for raw output (`raw=true` or `raw=1`).
pub fn wants_raw(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&')
            .any(|kv| kv == "raw=true" || kv == "raw=1" || kv == "raw")
    })
}

/// Whether this request may see unredacted output.
pub fn raw_allowed(req_actor: Option<&Actor>, query: Option<&str>) -> bool {
    wants_raw(query) && req_actor.is_some_and(|a| a.role() == Role::Admin)
}

/// Gets a chunk read from `output` ready for a client: a UTF-8 sequence cut at the end is left
/// for the next read (utf8 encoding), and, unless `raw`, secrets are redacted with the bytes
/// before the chunk as context; a word at the very end that could still become a secret is
/// held back for the next read while output is flowing (the chunk then ends before it).
pub fn prepare_read(hub: &Hub, output: &Output, chunk: &mut Chunk, encoding: Encoding, raw: bool) {
    if encoding == Encoding::Utf8 {
        let keep = crate::session::input::complete_utf8_len(&chunk.bytes);
        chunk.end_offset -= (chunk.bytes.len() - keep) as u64;
        chunk.bytes.truncate(keep);
    }
    if raw {
        return;
    }
    let before = crate::redact::output_before(output, chunk.start_offset);
    let may_continue = output.exit().is_none()
        && chunk.end_offset == output.end_offset()
        && output
            .last_output_at()
            .is_some_and(|t| (chrono::Utc::now() - t).to_std().unwrap_or_default() < FLUSH_AFTER);
    let (redacted, held) = hub
        .redactor()
        .redact_read(&before, &chunk.bytes, may_continue);
    chunk.end_offset -= held as u64;
    chunk.bytes = redacted;
}

pub async fn redact_replies(State(hub): State<Hub>, req: Request, next: Next) -> Response {
    // Raw output is offered by `read` (and the stream, which is not JSON) only, where asking
    // for it is audited; everywhere else `raw` is ignored.
    let raw = req.uri().path().ends_with("/read")
        && raw_allowed(req.extensions().get::<Actor>(), req.uri().query());
    // The sign-in exchange's reply is the credential itself (the redactor knows the owner's
    // token as a secret); it holds nothing else.
    let raw = raw || req.uri().path() == super::access::SIGNIN_PATH;
    let response = next.run(req).await;
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if raw || !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let body = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(mut value) => {
            hub.redactor().redact_json(&mut value);
            let text = serde_json::to_vec(&value).unwrap_or_default();
            parts.headers.remove(header::CONTENT_LENGTH);
            Body::from(text)
        }
        Err(_) => Body::from(hub.redactor().redact_bytes(&bytes)),
    };
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_needs_the_flag() {
        for (q, want) in [
            (None, false),
            (Some("raw=true"), true),
            (Some("since=0&raw=1"), true),
            (Some("raw=false"), false),
            (Some("rawx=true"), false),
        ] {
            assert_eq!(wants_raw(q), want, "{q:?}");
        }
    }
}
