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
    let mut headers = vec![
        ("Title", header_text(&message.title())),
        ("Tags", format!("agent-hub,{tags}")),
        ("Priority", priority.to_string()),
        ("Click", message.link.clone()),
    ];
    if let Some(actions) = ntfy_actions(message) {
        headers.push(("Actions", actions));
    }
    Body {
        content_type: "text/plain; charset=utf-8",
        headers,
        bytes: message.text().into_bytes(),
    }
}

/// ntfy's action buttons (at most [`NTFY_MAX_ACTIONS`]): one per answer link, each a POST to
/// its link (one tap answers), the notification cleared after.
fn ntfy_actions(message: &Message) -> Option<String> {
    let actions: Vec<String> = message
        .answers
        .iter()
        .take(NTFY_MAX_ACTIONS)
        .map(|a| {
            let label = header_text(&a.label).replace([',', ';', '"'], " ");
            format!("http, {label}, {}, method=POST, clear=true", a.url)
        })
        .collect();
    (!actions.is_empty()).then(|| actions.join("; "))
}

/// How many action buttons ntfy shows.
const NTFY_MAX_ACTIONS: usize = 3;

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
        let labels: Vec<String> = match message.answers.is_empty() {
            true => message
                .choices
                .iter()
                .map(|c| format!("`{}`", mrkdwn(&c.label)))
                .collect(),
            false => message
                .answers
                .iter()
                .map(|a| format!("<{}|{}>", a.url, mrkdwn(&a.label)))
                .collect(),
        };
        if !labels.is_empty() {
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
    use crate::notify::answer_link::AnswerLink;
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
            answers: Vec::new(),
        }
    }

    fn with_answers() -> Message {
        let answers = ["Yes", "Yes, always", "No", "Esc"]
            .iter()
            .map(|l| AnswerLink {
                label: l.to_string(),
                url: format!("http://hub/answer/docker_1/t-{}", l.len()),
            })
            .collect();
        Message {
            answers,
            ..message()
        }
    }

    #[test]
    fn answer_links_are_in_every_format() {
        let m = with_answers();
        let v: Value = serde_json::from_slice(&render(NotifyFormat::Json, &m).bytes).unwrap();
        assert_eq!(v["answers"][2]["label"], "No");
        assert_eq!(v["answers"][2]["url"], "http://hub/answer/docker_1/t-2");
        // ntfy: a button per link, each a POST (one tap answers), at most three.
        let body = render(NotifyFormat::Ntfy, &m);
        let actions = body.headers.iter().find(|(n, _)| *n == "Actions").unwrap();
        assert_eq!(
            actions.1,
            "http, Yes, http://hub/answer/docker_1/t-3, method=POST, clear=true; \
             http, Yes  always, http://hub/answer/docker_1/t-11, method=POST, clear=true; \
             http, No, http://hub/answer/docker_1/t-2, method=POST, clear=true"
        );
        let text = String::from_utf8(body.bytes).unwrap();
        assert!(
            text.contains("[Esc] http://hub/answer/docker_1/t-3"),
            "{text}"
        );
        // Slack: each choice a link.
        let v: Value = serde_json::from_slice(&render(NotifyFormat::Slack, &m).bytes).unwrap();
        let question = v["blocks"][1]["text"]["text"].as_str().unwrap();
        assert!(
            question.contains("<http://hub/answer/docker_1/t-2|No>"),
            "{question}"
        );
        // Without links, no Actions header.
        let plain = render(NotifyFormat::Ntfy, &message());
        assert!(plain.headers.iter().all(|(n, _)| *n != "Actions"));
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
