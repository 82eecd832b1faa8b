//! A stand-in of the model APIs the real agent CLIs call, on 127.0.0.1:0 (nothing beyond
//! loopback): the Anthropic Messages API with SSE streaming (Claude Code, through
//! `ANTHROPIC_BASE_URL`), the OpenAI Responses API with SSE (Codex, through a custom
//! `model_providers` entry), the OpenAI Chat Completions API, streamed or not (Aider, through
//! `OPENAI_API_BASE`; opencode, through a provider of its config) and the Gemini API with SSE
//! (Gemini CLI, through `GOOGLE_GEMINI_BASE_URL`). The turn is scripted by the user's last
//! words:
//! - `answer slowly`: a reply streamed one word a second ([`SLOW_WORDS`] words);
//! - `run a tool`: a shell tool call (`touch made-by-tool.txt`) that makes the CLI ask for
//!   permission; the turn after the tool's result answers `The file is made.`. Aider has no
//!   tools: it gets a reply naming a file of its repository that is not in its chat
//!   ([`MENTIONED_FILE`]), which makes it ask `Add file to the chat?`; its turn after a yes
//!   answers `The file is made.`;
//! - `please fail`: an HTTP 400 error (not retried by the CLIs);
//! - anything else: an instant answer, `Instant answer here.`
//!
//! Every request's method and path is recorded, so a test can show what a CLI called, and
//! every model request's body, so a test can show which earlier turns a CLI sent.
//!
//! Every model call answered (any turn, and the side calls a CLI makes for a title or a route)
//! reports the token counts the test chose ([`Usage`]), each API in its own fields, and is
//! counted ([`ModelStandIn::answered`]): a test can hold what a CLI recorded of its calls
//! against the calls it made.
//!
//! A test can make it rate-limited ([`ModelStandIn::limit`]): every model call then gets a 429
//! with `retry-after` and the body its API sends for a rate limit, for a chosen number of calls
//! or until [`ModelStandIn::unlimit`], so the API recovers under a CLI that retries.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_hub::usage::Tokens;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

/// Tool calls and replies are numbered: a CLI keys its answer by the call's id, and its
/// records of a reply by the reply's.
static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn call_id(prefix: &str) -> String {
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}_standin_{n}")
}

/// Words of the slow reply, one a second.
pub const SLOW_WORDS: usize = 8;
/// The instant reply and the reply after a tool call.
pub const INSTANT: &str = "Instant answer here.";
pub const AFTER_TOOL: &str = "The file is made.";
/// The title given to a CLI that asks for one (opencode, for a new session).
pub const TITLE: &str = "Stand-in task";
/// The file Aider is pointed at by `run a tool` (the test commits it in Aider's repository).
pub const MENTIONED_FILE: &str = "hello.py";

/// The tokens the stand-in reports for each model call it answers, in Anthropic's meaning:
/// `input` counts no cached token, `output` counts the thinking too. Each API gets them in
/// its own fields (the methods below); one without a field for a kind gets no count of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Of `output`, the thinking (the OpenAI and Gemini APIs count it apart).
    pub reasoning: u64,
}

impl Usage {
    /// What [`ModelStandIn::start`] reports: a small call, nothing cached.
    pub const SMALL: Usage = Usage {
        input: 10,
        output: 5,
        cache_read: 0,
        cache_write: 0,
        reasoning: 0,
    };

    /// The tokens of one call as the hub counts them.
    pub fn tokens(&self) -> Tokens {
        Tokens {
            input: self.input,
            output: self.output,
            cache_read: self.cache_read,
            cache_write: self.cache_write,
        }
    }

    /// Every token of the prompt, cached or not (the prompt count of OpenAI and Gemini).
    fn prompt(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }

    /// The Anthropic Messages API's `usage`, saying `output` output tokens (a stream's
    /// `message_start` says 1, its `message_delta` the total, which replaces it).
    fn anthropic(&self, output: u64) -> Value {
        json!({"input_tokens": self.input, "cache_creation_input_tokens": self.cache_write,
               "cache_read_input_tokens": self.cache_read, "output_tokens": output})
    }

    /// The OpenAI Responses API's `usage`: the input counts the cached tokens (read and
    /// written), each said apart in its details; the output counts the reasoning.
    fn responses(&self) -> Value {
        json!({"input_tokens": self.prompt(),
               "input_tokens_details": {"cached_tokens": self.cache_read,
                                        "cache_write_tokens": self.cache_write},
               "output_tokens": self.output,
               "output_tokens_details": {"reasoning_tokens": self.reasoning},
               "total_tokens": self.prompt() + self.output})
    }

    /// The Chat Completions API's `usage`: OpenAI's fields (the prompt counts the cached
    /// tokens, the read ones said apart in its details; the completion counts the reasoning)
    /// and the cache fields an OpenAI-compatible gateway in front of Claude adds (LiteLLM's),
    /// the only ones Aider shows.
    fn chat(&self) -> Value {
        json!({"prompt_tokens": self.prompt(), "completion_tokens": self.output,
               "total_tokens": self.prompt() + self.output,
               "prompt_tokens_details": {"cached_tokens": self.cache_read},
               "completion_tokens_details": {"reasoning_tokens": self.reasoning},
               "cache_read_input_tokens": self.cache_read,
               "cache_creation_input_tokens": self.cache_write})
    }

    /// The Gemini API's `usageMetadata` of a reply's last chunk: the prompt counts the cached
    /// tokens (Gemini has no cache write: written tokens are prompt tokens), the thoughts are
    /// apart from the candidates.
    fn gemini(&self) -> Value {
        let candidates = self.output.saturating_sub(self.reasoning);
        json!({"promptTokenCount": self.prompt(), "cachedContentTokenCount": self.cache_read,
               "candidatesTokenCount": candidates, "thoughtsTokenCount": self.reasoning,
               "totalTokenCount": self.prompt() + self.output})
    }

    /// The `usageMetadata` of a chunk before the last: the prompt only, as the API sends it
    /// while the reply is under way (the last chunk's figures replace it).
    fn gemini_so_far(&self) -> Value {
        json!({"promptTokenCount": self.prompt(), "cachedContentTokenCount": self.cache_read,
               "totalTokenCount": self.prompt()})
    }
}

/// A model call the stand-in answered (an error is no answer): its path and its request.
#[derive(Debug, Clone)]
pub struct Answered {
    pub path: String,
    pub body: Value,
}

/// How the stand-in answers while rate-limited ([`ModelStandIn::limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// `retry-after` in seconds (Gemini's `RetryInfo.retryDelay` too: over 300 s makes Gemini
    /// CLI take it for a quota it does not retry by itself).
    pub retry_after_s: u64,
    /// How many model calls get a 429; `None`: every one until [`ModelStandIn::unlimit`].
    pub calls: Option<u32>,
    /// A usage limit that resets then (epoch seconds) instead of a rate limit: Codex's
    /// `usage_limit_reached`, which it does not retry and shows as `try again at 3:34 AM`
    /// (the Responses API only).
    pub resets_at: Option<i64>,
}

#[derive(Clone, Default)]
struct Shared {
    usage: Usage,
    /// The limit in force, if any (its `calls` counting down).
    limit: Arc<Mutex<Option<Limit>>>,
    /// How many model calls got a 429.
    refused: Arc<std::sync::atomic::AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
    bodies: Arc<Mutex<Vec<Value>>>,
    answered: Arc<Mutex<Vec<Answered>>>,
}

impl Shared {
    /// Counts the call to `uri` with `body` as answered.
    fn answering(&self, uri: &Uri, body: &Value) {
        self.answered.lock().unwrap().push(Answered {
            path: uri.path().to_string(),
            body: body.clone(),
        });
    }
}

pub struct ModelStandIn {
    pub base: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelStandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelStandIn {
    /// A stand-in reporting [`Usage::SMALL`] for each call.
    pub async fn start() -> Self {
        Self::start_with_usage(Usage::SMALL).await
    }

    /// A stand-in reporting `usage` for each call it answers.
    pub async fn start_with_usage(usage: Usage) -> Self {
        let shared = Shared {
            usage,
            ..Shared::default()
        };
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/models", get(models))
            .route("/v1/responses", post(responses))
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1beta/models/{call}", post(gemini))
            .fallback(not_found)
            .layer(axum::middleware::from_fn_with_state(shared.clone(), record))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ModelStandIn { base, shared, task }
    }

    /// `METHOD /path` of every request so far.
    pub fn requests(&self) -> Vec<String> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The bodies of the model requests (of every API) that carry `words`, as text:
    /// what a CLI sent along with a prompt (its earlier turns included).
    pub fn turns_with(&self, words: &str) -> Vec<String> {
        let bodies = self.shared.bodies.lock().unwrap();
        bodies
            .iter()
            .map(|b| b.to_string())
            .filter(|b| b.contains(words))
            .collect()
    }

    /// The model calls answered so far, in order.
    pub fn answered(&self) -> Vec<Answered> {
        self.shared.answered.lock().unwrap().clone()
    }

    /// From now on every model call gets a 429 (with `retry-after` and its API's rate-limit
    /// body), `limit.calls` of them or until [`ModelStandIn::unlimit`].
    pub fn limit(&self, limit: Limit) {
        *self.shared.limit.lock().unwrap() = Some(limit);
    }

    /// The API answers again.
    pub fn unlimit(&self) {
        *self.shared.limit.lock().unwrap() = None;
    }

    /// How many model calls got a 429 so far.
    pub fn refused(&self) -> usize {
        self.shared
            .refused
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Shared {
    /// The limit a model call to `path` meets now (counting it), if any.
    fn limit_for(&self, path: &str) -> Option<Limit> {
        let model_call = ["/v1/messages", "/v1/responses", "/v1/chat/completions"].contains(&path)
            || path.starts_with("/v1beta/models/");
        let mut limit = self.limit.lock().unwrap();
        let now = (*limit).filter(|_| model_call)?;
        *limit = match now.calls {
            Some(1) => None,
            Some(n) => Some(Limit {
                calls: Some(n - 1),
                ..now
            }),
            None => Some(now),
        };
        self.refused
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(now)
    }
}

/// A 429 as the API of `path` sends it for a rate limit (docs/research/cli-usage-records.md,
/// section 3 and Appendix A): `retry-after`, and the body its clients read.
fn rate_limited(path: &str, limit: Limit) -> Response {
    let after = limit.retry_after_s;
    let body = if path == "/v1/messages" {
        json!({"type": "error", "error": {"type": "rate_limit_error",
               "message": "Number of request tokens has exceeded your per-minute rate limit"}})
    } else if path.starts_with("/v1beta/") {
        json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
               "message": "Resource has been exhausted (e.g. check quota).",
               "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                            "retryDelay": format!("{after}s")}]}})
    } else if let (Some(at), "/v1/responses") = (limit.resets_at, path) {
        json!({"error": {"type": "usage_limit_reached", "resets_at": at,
               "message": "The usage limit has been reached"}})
    } else if path == "/v1/responses" {
        json!({"error": {"type": "rate_limit_exceeded", "code": "rate_limit_exceeded",
               "message": format!("Rate limit reached for gpt-standin. Please try again in {after}s.")}})
    } else {
        json!({"error": {"type": "tokens", "param": null, "code": "rate_limit_exceeded",
               "message": format!("Rate limit reached for standin on tokens per min (TPM). \
                                   Please try again in {after}s.")}})
    };
    (
        StatusCode::TOO_MANY_REQUESTS,
        [("retry-after", after.to_string())],
        Json(body),
    )
        .into_response()
}

impl Answered {
    /// The model asked for: the body's `model`, else (Gemini) the path's `models/MODEL:METHOD`.
    pub fn model(&self) -> Option<String> {
        match self.body["model"].as_str() {
            Some(model) => Some(model.to_string()),
            None => self
                .path
                .rsplit_once("/models/")
                .and_then(|(_, call)| call.split_once(':'))
                .map(|(model, _)| model.to_string()),
        }
    }
}

async fn record(
    State(shared): State<Shared>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let line = format!("{} {}", req.method(), req.uri().path());
    shared.requests.lock().unwrap().push(line);
    if let Some(limit) = shared.limit_for(req.uri().path()) {
        return rate_limited(req.uri().path(), limit);
    }
    next.run(req).await
}

async fn not_found() -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}})),
    )
}

async fn models() -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": "stand-in", "type": "model", "display_name": "Stand-in",
                  "created_at": "2025-01-01T00:00:00Z"}],
        "has_more": false,
    }))
}

async fn count_tokens() -> Json<Value> {
    Json(json!({ "input_tokens": 10 }))
}

/// What the scripted turn does.
#[derive(Debug, PartialEq)]
enum Turn {
    Instant,
    Slow,
    Tool,
    AfterTool,
    Error,
}

fn turn_for(last_text: &str, after_tool: bool) -> Turn {
    if after_tool {
        Turn::AfterTool
    } else if last_text.contains("answer slowly") {
        Turn::Slow
    } else if last_text.contains("run a tool") {
        Turn::Tool
    } else if last_text.contains("please fail") {
        Turn::Error
    } else {
        Turn::Instant
    }
}

fn words(turn: &Turn) -> Vec<String> {
    match turn {
        Turn::Slow => (0..SLOW_WORDS).map(|i| format!("word{i}")).collect(),
        Turn::AfterTool => AFTER_TOOL.split(' ').map(String::from).collect(),
        _ => INSTANT.split(' ').map(String::from).collect(),
    }
}

/// A streamed SSE body fed by `produce` through a channel (so it can pause between events).
fn sse<F, Fut>(produce: F) -> Response
where
    F: FnOnce(Sender) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(16);
    tokio::spawn(produce(Sender(tx)));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap()
}

struct Sender(tokio::sync::mpsc::Sender<Result<Bytes, Infallible>>);

impl Sender {
    async fn event(&self, name: &str, data: Value) {
        self.send(format!("event: {name}\ndata: {data}\n\n")).await;
    }

    /// An unnamed event (`data: ...` only), as the Chat Completions API streams.
    async fn data(&self, data: impl std::fmt::Display) {
        self.send(format!("data: {data}\n\n")).await;
    }

    async fn send(&self, text: String) {
        let _ = self.0.send(Ok(Bytes::from(text))).await;
    }

    /// An event with data only, each line ended by CR LF (as the Gemini API streams).
    async fn data_crlf(&self, data: Value) {
        self.send(format!("data: {data}\r\n\r\n")).await;
    }
}

fn error_400() -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(
            json!({"type": "error", "error": {"type": "invalid_request_error",
                    "message": "stand-in error", "code": "stand_in"}}),
        ),
    )
        .into_response()
}

/// The Anthropic Messages API. The scripted words are the last user message's last text
/// block (system reminders, which start with `<`, are not the user's words).
async fn messages(State(shared): State<Shared>, uri: Uri, Json(body): Json<Value>) -> Response {
    shared.bodies.lock().unwrap().push(body.clone());
    let user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .cloned()
        .unwrap_or_default();
    let (text, after_tool) = match &user["content"] {
        Value::String(s) => (s.clone(), false),
        Value::Array(blocks) => match blocks.last() {
            Some(b) if b["type"] == "tool_result" => (String::new(), true),
            _ => (
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .rfind(|t| !t.starts_with('<'))
                    .unwrap_or_default()
                    .to_string(),
                false,
            ),
        },
        _ => (String::new(), false),
    };
    let turn = turn_for(&text, after_tool);
    if turn == Turn::Error {
        return error_400();
    }
    shared.answering(&uri, &body);
    let usage = shared.usage;
    let model = body["model"].clone();
    // Numbered: Claude Code's transcript names a call by its message's id, among others.
    let id = call_id("msg");
    if body["stream"] != true {
        return Json(json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": words(&turn).join(" ")}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": usage.anthropic(usage.output),
        }))
        .into_response();
    }
    sse(move |tx| async move {
        tx.event(
            "message_start",
            json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": usage.anthropic(1)}}),
        )
        .await;
        let stop = if turn == Turn::Tool {
            let input =
                json!({"command": "touch made-by-tool.txt", "description": "Create a file"});
            tx.event("content_block_start", json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": call_id("toolu"), "name": "Bash", "input": {}}}))
                .await;
            tx.event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            )
            .await;
            "tool_use"
        } else {
            tx.event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            )
            .await;
            for (i, w) in words(&turn).iter().enumerate() {
                if turn == Turn::Slow {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let piece = if i == 0 { w.clone() } else { format!(" {w}") };
                tx.event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": piece}}),
                )
                .await;
            }
            "end_turn"
        };
        tx.event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        )
        .await;
        tx.event(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": usage.output}}),
        )
        .await;
        tx.event("message_stop", json!({"type": "message_stop"}))
            .await;
    })
}

/// The OpenAI Responses API as Codex calls it. A request for a title (a JSON schema output)
/// gets one; a `function_call_output` last is the turn after a tool call.
async fn responses(State(shared): State<Shared>, uri: Uri, Json(body): Json<Value>) -> Response {
    shared.bodies.lock().unwrap().push(body.clone());
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let last = input.last().cloned().unwrap_or_default();
    let after_tool = last["type"] == "function_call_output";
    let text: String = last["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let wants_title = body["text"]["format"]["type"] == "json_schema";
    let turn = if wants_title {
        Turn::Instant
    } else {
        turn_for(&text, after_tool)
    };
    if turn == Turn::Error {
        return error_400();
    }
    shared.answering(&uri, &body);
    let usage = shared.usage;
    let id = call_id("resp");
    sse(move |tx| async move {
        tx.event(
            "response.created",
            json!({"type": "response.created", "response": {"id": id}}),
        )
        .await;
        if turn == Turn::Tool {
            let args = json!({"cmd": "touch made-by-tool.txt",
                              "sandbox_permissions": "require_escalated",
                              "justification": "Create the file?"});
            let item = json!({"type": "function_call", "id": call_id("fc"), "call_id": call_id("call"),
                              "name": "exec_command", "arguments": args.to_string()});
            tx.event(
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            )
            .await;
            tx.event(
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            )
            .await;
        } else {
            let all = if wants_title {
                vec![r#"{"title":"Stand-in task"}"#.to_string()]
            } else {
                words(&turn)
            };
            tx.event("response.output_item.added", json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "role": "assistant", "id": "msg_standin", "content": []}}))
                .await;
            for (i, w) in all.iter().enumerate() {
                if turn == Turn::Slow {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let piece = if i == 0 { w.clone() } else { format!(" {w}") };
                tx.event("response.output_text.delta", json!({"type": "response.output_text.delta",
                    "item_id": "msg_standin", "output_index": 0, "content_index": 0, "delta": piece}))
                    .await;
            }
            tx.event(
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0,
                "item": {"type": "message", "role": "assistant", "id": "msg_standin",
                         "content": [{"type": "output_text", "text": all.join(" ")}]}}),
            )
            .await;
        }
        tx.event(
            "response.completed",
            json!({"type": "response.completed", "response": {"id": id,
            "usage": usage.responses()}}),
        )
        .await;
    })
}

/// The OpenAI Chat Completions API as Aider and opencode call it.
/// - Aider: its chat streamed, its commit messages (after an edit) not. It appends a reminder
///   of its edit format to the typed text, which can hold any word, so the script reads the
///   last user message's first line only; the message Aider sends by itself once a file was
///   added to the chat is the turn after a tool.
/// - opencode: every call streamed (usage asked for in the last chunk). A turn carries its
///   tools (`bash` among them), so `run a tool` gets a `bash` tool call; the tool's result
///   comes back as a last message of role `tool`. A new session's first prompt is also sent
///   in a call of its own, with no tools, for a title ([`TITLE`]).
async fn chat_completions(
    State(shared): State<Shared>,
    uri: Uri,
    Json(body): Json<Value>,
) -> Response {
    shared.bodies.lock().unwrap().push(body.clone());
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let text = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            content => content.as_str().unwrap_or_default().to_string(),
        })
        .unwrap_or_default();
    let first_line = text.lines().next().unwrap_or_default();
    let after_tool = first_line.starts_with("I added these files to the chat")
        || messages.last().is_some_and(|m| m["role"] == "tool");
    let wants_title = body.get("tools").is_none()
        && messages.first().is_some_and(|m| {
            m["role"] == "system"
                && m["content"]
                    .as_str()
                    .is_some_and(|s| s.contains("title generator"))
        });
    let has_bash = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["function"]["name"] == "bash");
    let turn = if wants_title {
        Turn::Instant
    } else {
        turn_for(first_line, after_tool)
    };
    if turn == Turn::Error {
        return error_400();
    }
    shared.answering(&uri, &body);
    let pieces = match turn {
        _ if wants_title => vec![TITLE.to_string()],
        Turn::Tool => vec![format!("Please look at {MENTIONED_FILE} for the details.")],
        _ => words(&turn),
    };
    let tool_call = turn == Turn::Tool && has_bash;
    let usage = shared.usage.chat();
    let model = body["model"].clone();
    let created = 1_700_000_000;
    if body["stream"] != true {
        return Json(json!({
            "id": "chatcmpl-standin", "object": "chat.completion", "created": created,
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": pieces.join(" ")}}],
            "usage": usage,
        }))
        .into_response();
    }
    let usage_asked = body["stream_options"]["include_usage"] == true;
    sse(move |tx| async move {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "chatcmpl-standin", "object": "chat.completion.chunk",
                   "created": created, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let finish = if tool_call {
            let args = json!({"command": "touch made-by-tool.txt", "description": "Create a file"});
            tx.data(chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                       "id": call_id("call"), "type": "function",
                       "function": {"name": "bash", "arguments": ""}}]}),
                Value::Null,
            ))
            .await;
            tx.data(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": args.to_string()}}]}),
                Value::Null,
            ))
            .await;
            "tool_calls"
        } else {
            tx.data(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            ))
            .await;
            for (i, w) in pieces.iter().enumerate() {
                if turn == Turn::Slow {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let piece = if i == 0 { w.clone() } else { format!(" {w}") };
                tx.data(chunk(json!({ "content": piece }), Value::Null))
                    .await;
            }
            "stop"
        };
        let mut last = chunk(json!({}), json!(finish));
        if usage_asked {
            last["usage"] = usage;
        }
        tx.data(last).await;
        tx.data("[DONE]").await;
    })
}

/// The Gemini API as Gemini CLI calls it: `POST /v1beta/models/MODEL:streamGenerateContent`
/// for every turn (`?alt=sse`: one `data:` event per chunk; the last chunk carries
/// `finishReason`, without which the CLI retries the turn), and `MODEL:generateContent` for
/// side calls (the Auto model's router, a session's title), answered by one plain chunk. The
/// scripted words are the last text part of the last user content (the first turn's earlier
/// part is the CLI's own listing of the directory); a `functionResponse` there is the turn
/// after a tool call.
async fn gemini(
    State(shared): State<Shared>,
    Path(call): Path<String>,
    uri: Uri,
    Json(body): Json<Value>,
) -> Response {
    shared.bodies.lock().unwrap().push(body.clone());
    let known = |method: &str| matches!(method, "generateContent" | "streamGenerateContent");
    let Some((_model, method)) = call.split_once(':').filter(|(_, m)| known(m)) else {
        return not_found().await.into_response();
    };
    let parts = body["contents"]
        .as_array()
        .and_then(|c| c.iter().rev().find(|c| c["role"] == "user"))
        .and_then(|c| c["parts"].as_array())
        .cloned()
        .unwrap_or_default();
    let after_tool = parts.iter().any(|p| p.get("functionResponse").is_some());
    let text = parts
        .iter()
        .filter_map(|p| p["text"].as_str())
        .next_back()
        .unwrap_or_default();
    // A side call asks for JSON that fits a schema (a wrong answer is retried for seconds).
    let schema = &body["generationConfig"]["responseJsonSchema"];
    let wants_json = body["generationConfig"]["responseMimeType"] == "application/json";
    let turn = if wants_json {
        Turn::Instant
    } else {
        turn_for(text, after_tool)
    };
    if turn == Turn::Error {
        return gemini_error_400();
    }
    shared.answering(&uri, &body);
    let usage = shared.usage;
    match method {
        "generateContent" => {
            let reply = if wants_json {
                fitting(schema).to_string()
            } else {
                words(&turn).join(" ")
            };
            Json(gemini_chunk(json!([{ "text": reply }]), &usage, true)).into_response()
        }
        _ => sse(move |tx| async move {
            if turn == Turn::Tool {
                let call = json!({"functionCall": {"name": "run_shell_command",
                    "args": {"command": "touch made-by-tool.txt", "description": "Create a file"}}});
                tx.data_crlf(gemini_chunk(json!([call]), &usage, true))
                    .await;
                return;
            }
            let all = words(&turn);
            for (i, w) in all.iter().enumerate() {
                if turn == Turn::Slow {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let piece = if i == 0 { w.clone() } else { format!(" {w}") };
                let last = i + 1 == all.len();
                tx.data_crlf(gemini_chunk(json!([{ "text": piece }]), &usage, last))
                    .await;
            }
        }),
    }
}

/// One Gemini response chunk of `parts`, with `usage` as far as it goes; the `last` one ends
/// the turn.
fn gemini_chunk(parts: Value, usage: &Usage, last: bool) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    let mut chunk = json!({"modelVersion": "stand-in"});
    if last {
        candidate["finishReason"] = json!("STOP");
        chunk["usageMetadata"] = usage.gemini();
    } else {
        chunk["usageMetadata"] = usage.gemini_so_far();
    }
    chunk["candidates"] = json!([candidate]);
    chunk
}

/// A value that fits a Gemini JSON schema (upper-case type names).
fn fitting(schema: &Value) -> Value {
    match schema["type"]
        .as_str()
        .unwrap_or("OBJECT")
        .to_uppercase()
        .as_str()
    {
        "OBJECT" => schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), fitting(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        "ARRAY" => json!([]),
        "INTEGER" | "NUMBER" => json!(1),
        "BOOLEAN" => json!(false),
        _ => schema["enum"].get(0).cloned().unwrap_or(json!("stand-in")),
    }
}

fn gemini_error_400() -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": {"code": 400, "message": "stand-in error",
                              "status": "INVALID_ARGUMENT"}})),
    )
        .into_response()
}
