//! A message shaped for its webhook: the hub's JSON, ntfy's text body with `Title`, `Tags`,
//! `Click` and `Priority` headers, or Slack's incoming-webhook `text` and `blocks`.

use serde_json::{json, Value};

use super::message::Message;
use crate::config::notify::{NotifyEvent, NotifyFormat};

/// What is POSTed: the body, its content type and the format's own headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub bytes: Vec<u8>,
}

/// `message` in `format`.
pub fn render(format: NotifyFormat, message: &Message) -> Body {
    match format {
        NotifyFormat::Json => Body {
            content_type: "application/json",
            headers: Vec::new(),
            bytes: serde_json::to_vec(message).unwrap_or_default(),
        },
        NotifyFormat::Ntfy => ntfy(message),
        NotifyFormat::Slack => Body {
            content_type: "application/json",
            headers: Vec::new(),
            bytes: serde_json::to_vec(&slack(message)).unwrap_or_default(),
        },
    }
}

/// ntfy's tags (emoji short codes) and priority (1-5) for an event.
fn ntfy_tags(event: NotifyEvent) -> (&'static str, &'static str) {
    match event {
        NotifyEvent::Blocked => ("question", "high"),
        NotifyEvent::Limited => ("hourglass", "default"),
        NotifyEvent::TurnFinished => ("white_check_mark", "default"),
        NotifyEvent::Exited => ("skull", "high"),
        NotifyEvent::StartFailed => ("x", "high"),
        NotifyEvent::PolicyStopped => ("stop_sign", "default"),
        NotifyEvent::PolicyNotified => ("bell", "default"),
        NotifyEvent::BudgetExhausted => ("moneybag", "high"),
        NotifyEvent::BudgetWarned => ("moneybag", "default"),
        NotifyEvent::Test => ("test_tube", "low"),
    }
}

fn ntfy(message: &Message) -> Body {
    let (tags, priority) = ntfy_tags(message.event);
    Body {
        content_type: "text/plain; charset=utf-8",
        headers: vec![
            ("Title", header_text(&message.title())),
            ("Tags", format!("agent-hub,{tags}")),
            ("Priority", priority.to_string()),
            ("Click", message.link.clone()),
        ],
        bytes: message.text().into_bytes(),
    }
}

/// A header value: printable ASCII only (HTTP headers carry no UTF-8 reliably), at most 250
/// characters.
fn header_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .take(250)
        .collect()
}

/// Slack's mrkdwn needs `&`, `<` and `>` escaped.
fn mrkdwn(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn section(text: String) -> Value {
    json!({ "type": "section", "text": { "type": "mrkdwn", "text": text } })
}

fn slack(message: &Message) -> Value {
    let title = format!(
        "*{}* {} ({})",
        mrkdwn(message.agent.name()),
        mrkdwn(&message.what),
        mrkdwn(&message.who())
    );
    let mut blocks = vec![section(title.clone())];
    if let Some(q) = &message.question {
        let mut text = format!("> {}", mrkdwn(q).replace('\n', "\n> "));
        if !message.choices.is_empty() {
            let labels: Vec<String> = message
                .choices
                .iter()
                .map(|c| format!("`{}`", mrkdwn(&c.label)))
                .collect();
            text.push_str(&format!("\n{}", labels.join("  ")));
        }
        blocks.push(section(text));
    }
    if !message.last_lines.is_empty() {
        let lines = mrkdwn(&message.last_lines.join("\n")).replace("```", "'''");
        blocks.push(section(format!("```{lines}```")));
    }
    if let Some(d) = &message.detail {
        blocks.push(section(mrkdwn(d)));
    }
    let open = format!("<{}|Open in agent-hub>", message.link);
    blocks.push(json!({ "type": "context", "elements": [{ "type": "mrkdwn", "text": open }] }));
    json!({ "text": format!("{title} {open}"), "blocks": blocks })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_state::question::Choice;
    use crate::notify::message::AgentRef;

    fn message() -> Message {
        Message {
            event: NotifyEvent::Blocked,
            agent: AgentRef {
                id: "a1".into(),
                label: Some("bob <dev>".into()),
                team: Some("red".into()),
                session_id: Some("docker_1".into()),
            },
            what: "asks a question".into(),
            at: chrono::Utc::now(),
            since: None,
            for_ms: Some(1000),
            question: Some("Allow write? [y/n]".into()),
            choices: vec![Choice {
                label: "yes".into(),
                keys: vec!["y".into()],
            }],
            last_lines: vec!["wrote ```x```".into()],
            detail: None,
            link: "http://hub/#/grid/docker_1".into(),
        }
    }

    #[test]
    fn json_is_the_message_itself() {
        let body = render(NotifyFormat::Json, &message());
        let v: Value = serde_json::from_slice(&body.bytes).unwrap();
        assert_eq!(v["event"], "blocked");
        assert_eq!(v["agent"]["id"], "a1");
        assert_eq!(v["agent"]["sessionId"], "docker_1");
        assert_eq!(v["choices"][0]["label"], "yes");
        assert_eq!(v["forMs"], 1000);
        assert_eq!(v["lastLines"][0], "wrote ```x```");
    }

    #[test]
    fn ntfy_puts_title_tags_and_click_in_headers() {
        let mut m = message();
        m.agent.label = Some("bøb".into());
        let body = render(NotifyFormat::Ntfy, &m);
        let header = |name| {
            body.headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("Title"), Some("b?b: asks a question"));
        assert_eq!(header("Tags"), Some("agent-hub,question"));
        assert_eq!(header("Click"), Some("http://hub/#/grid/docker_1"));
        let text = String::from_utf8(body.bytes).unwrap();
        assert!(
            text.contains("Allow write? [y/n]") && text.contains("[yes]"),
            "{text}"
        );
        assert!(text.contains("agent a1, team red"), "{text}");
    }

    #[test]
    fn slack_has_text_and_blocks_escaped() {
        let body = render(NotifyFormat::Slack, &message());
        let v: Value = serde_json::from_slice(&body.bytes).unwrap();
        let text = v["text"].as_str().unwrap();
        assert!(text.contains("bob &lt;dev&gt;"), "{text}");
        assert!(
            text.contains("<http://hub/#/grid/docker_1|Open in agent-hub>"),
            "{text}"
        );
        let blocks = v["blocks"].as_array().unwrap();
        assert_eq!(blocks[0]["type"], "section");
        assert!(blocks[1]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("`yes`"));
        assert!(!blocks[2]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("```x```"));
    }
}
