//! A webhook message as the hub means it, before a format shapes it: which agent, what
//! happened, since when and for how long, a blocked agent's question and choices, a finished
//! turn's last lines, and a link into the dashboard.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::answer_link::AnswerLink;
use crate::agent_state::question::Choice;
use crate::config::notify::NotifyEvent;

/// Which agent a message is about.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRef {
    /// The container agent's id, else the session's.
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

impl AgentRef {
    /// How a person knows the agent: its label, else its id.
    pub fn name(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.id)
    }
}

/// One message (the `json` format's body).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub event: NotifyEvent,
    pub agent: AgentRef,
    /// What happened, in words (`asks a question`, `finished its turn after 3m 12s`).
    pub what: String,
    /// When the hub saw it.
    pub at: DateTime<Utc>,
    /// Since when the agent is in the state the message tells of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// How long the agent was in its state before (working before it asked or finished; idle
    /// before a policy acted), in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub for_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<Choice>,
    /// The last non-blank lines of the agent's screen, redacted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub last_lines: Vec<String>,
    /// The reason or detail the hub gave (a policy's reason, a start's error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The dashboard at this agent.
    pub link: String,
    /// A link per choice that answers the question with it, once (`notify_actions = true`;
    /// see [`super::answer_link`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<AnswerLink>,
}

impl Message {
    /// `NAME: WHAT`, the one line a notification shows first.
    pub fn title(&self) -> String {
        format!("{}: {}", self.agent.name(), self.what)
    }

    /// The message as plain text: the title's parts, the question with its choices, the last
    /// lines, the detail and the link, one a paragraph.
    pub fn text(&self) -> String {
        let mut parts = vec![format!("{} ({})", self.what, self.who())];
        if let Some(q) = &self.question {
            parts.push(q.clone());
        }
        if !self.answers.is_empty() {
            let links: Vec<String> = self
                .answers
                .iter()
                .map(|a| format!("[{}] {}", a.label, a.url))
                .collect();
            parts.push(links.join("\n"));
        } else if !self.choices.is_empty() {
            let labels: Vec<String> = self
                .choices
                .iter()
                .map(|c| format!("[{}]", c.label))
                .collect();
            parts.push(labels.join(" "));
        }
        if !self.last_lines.is_empty() {
            parts.push(self.last_lines.join("\n"));
        }
        if let Some(d) = &self.detail {
            parts.push(d.clone());
        }
        parts.push(self.link.clone());
        parts.join("\n\n")
    }

    /// `agent ID, team T` (the label is in the title).
    pub fn who(&self) -> String {
        let mut who = format!("agent {}", self.agent.id);
        if let Some(team) = &self.agent.team {
            who.push_str(&format!(", team {team}"));
        }
        who
    }
}

/// A duration as a person reads it: `45s`, `3m 12s`, `2h 5m`.
pub fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

/// The dashboard's address of an agent: a live session's terminal (`#/grid/ID`), else a
/// container agent's panel (`#/agent/ID`).
pub fn link(dashboard: &str, agent_id: Option<&str>, session_id: Option<&str>) -> String {
    let base = dashboard.trim_end_matches('/');
    match (session_id, agent_id) {
        (Some(s), _) => format!("{base}/#/grid/{}", encode(s)),
        (None, Some(a)) => format!("{base}/#/agent/{}", encode(a)),
        (None, None) => format!("{base}/#/"),
    }
}

/// Percent-encodes what is not safe in a URL fragment (ids are plain, labels may not be).
fn encode(id: &str) -> String {
    id.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c.to_string(),
            _ => c.to_string().bytes().map(|b| format!("%{b:02X}")).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        for (ms, want) in [
            (0, "0s"),
            (45_900, "45s"),
            (192_000, "3m 12s"),
            (7_500_000, "2h 5m"),
        ] {
            assert_eq!(human_duration(ms), want);
        }
    }

    #[test]
    fn links_point_at_the_terminal_else_the_agent_panel() {
        assert_eq!(
            link("http://h:8100/", Some("a1"), Some("docker_1")),
            "http://h:8100/#/grid/docker_1"
        );
        assert_eq!(
            link("http://h", Some("a 1"), None),
            "http://h/#/agent/a%201"
        );
        assert_eq!(link("http://h", None, None), "http://h/#/");
    }
}
