//! `[[notify]]` in hub.toml: the webhooks the hub tells of what a person must act on (see
//! `docs/notify.md`), and `public_url`, where their links point. A bad or missing `url` is
//! refused at load with its place in the file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::toml_file::TomlFileError;

/// Default `min_interval_s`: at most one message per agent and event kind in this time.
pub const DEFAULT_MIN_INTERVAL_S: u64 = 30;
/// Default `retry_initial_ms`: the wait before the first retry (doubled for each next one).
pub const DEFAULT_RETRY_INITIAL_MS: u64 = 1000;

/// What a message's body looks like.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifyFormat {
    /// The hub's own JSON shape.
    #[default]
    Json,
    /// A text body with `Title`, `Tags`, `Click` headers, as ntfy.sh takes it.
    Ntfy,
    /// Slack's incoming-webhook shape (`text`, `blocks`); Mattermost and Discord's `/slack`
    /// endpoints take it too.
    Slack,
}

/// The kinds of event a webhook can be told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// An agent asks a question (with its text and choices).
    Blocked,
    /// An agent is held by a usage or rate limit.
    Limited,
    /// An agent went from working to idle after input was sent to it: its turn is over.
    TurnFinished,
    /// An agent's program or container ended without being asked to.
    Exited,
    /// An agent's start failed.
    StartFailed,
    /// A policy stopped an agent.
    PolicyStopped,
    /// A policy's `notify` action (an idle or stuck agent, as the policy says).
    PolicyNotified,
    /// A budget reached its cap.
    BudgetExhausted,
    /// A budget reached 80 % of its cap.
    BudgetWarned,
    /// `agent-hub notify test`.
    Test,
}

impl NotifyEvent {
    /// The kinds a webhook is told of when its `events` names none: those a person must act on.
    pub const DEFAULT: &'static [NotifyEvent] = &[
        NotifyEvent::Blocked,
        NotifyEvent::Limited,
        NotifyEvent::TurnFinished,
        NotifyEvent::Exited,
        NotifyEvent::StartFailed,
        NotifyEvent::PolicyStopped,
        NotifyEvent::PolicyNotified,
        NotifyEvent::BudgetExhausted,
    ];

    /// The name used in hub.toml and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Blocked => "blocked",
            NotifyEvent::Limited => "limited",
            NotifyEvent::TurnFinished => "turn_finished",
            NotifyEvent::Exited => "exited",
            NotifyEvent::StartFailed => "start_failed",
            NotifyEvent::PolicyStopped => "policy_stopped",
            NotifyEvent::PolicyNotified => "policy_notified",
            NotifyEvent::BudgetExhausted => "budget_exhausted",
            NotifyEvent::BudgetWarned => "budget_warned",
            NotifyEvent::Test => "test",
        }
    }
}

fn default_events() -> Vec<NotifyEvent> {
    NotifyEvent::DEFAULT.to_vec()
}

fn default_min_interval_s() -> u64 {
    DEFAULT_MIN_INTERVAL_S
}

fn default_retry_initial_ms() -> u64 {
    DEFAULT_RETRY_INITIAL_MS
}

/// One `[[notify]]` table: a webhook.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Where messages are POSTed (http or https).
    pub url: Spanned<String>,
    /// A name for metrics, doctor and the audit log (default: `notify[N]` and the URL's host).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub format: NotifyFormat,
    #[serde(default = "default_events")]
    pub events: Vec<NotifyEvent>,
    /// Only agents of these teams; empty: every agent (and sessions of no team).
    #[serde(default)]
    pub teams: Vec<String>,
    /// At most one message per agent and event kind in this many seconds (0: no limit).
    #[serde(default = "default_min_interval_s")]
    pub min_interval_s: u64,
    /// The wait before the first retry of a failed delivery, doubled for each next one.
    #[serde(default = "default_retry_initial_ms")]
    pub retry_initial_ms: u64,
    /// Headers sent with every message (an `Authorization`, a token): secrets, redacted
    /// wherever the hub shows its settings.
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<String>>,
}

/// Header values never show: a webhook's settings print with them masked.
impl std::fmt::Debug for NotifyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: BTreeMap<&str, &str> = self
            .headers
            .keys()
            .map(|k| (k.as_str(), "[REDACTED]"))
            .collect();
        f.debug_struct("NotifyConfig")
            .field("url", &"[REDACTED]")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("events", &self.events)
            .field("teams", &self.teams)
            .field("min_interval_s", &self.min_interval_s)
            .field("retry_initial_ms", &self.retry_initial_ms)
            .field("headers", &headers)
            .finish()
    }
}

impl NotifyConfig {
    /// The webhook's name: its `name`, else `notify[INDEX]` with the URL's host.
    pub fn display_name(&self, index: usize) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let host = reqwest::Url::parse(self.url.get_ref())
            .ok()
            .and_then(|u| u.host_str().map(String::from))
            .unwrap_or_default();
        format!("notify[{index}] {host}")
    }

    /// The secrets a webhook holds: its header values and its URL's path and query (a Slack
    /// or ntfy URL is itself the credential).
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = self.headers.values().map(|v| v.get_ref().clone()).collect();
        if let Ok(url) = reqwest::Url::parse(self.url.get_ref()) {
            let path = url.path().trim_matches('/');
            if path.len() >= 8 {
                out.push(path.to_string());
            }
            if let Some(q) = url.query().filter(|q| q.len() >= 8) {
                out.push(q.to_string());
            }
        }
        out
    }
}

/// Whether the hub's HTTP client speaks TLS (reqwest is built without a TLS backend).
const HTTPS_SUPPORTED: bool = false;

/// Why a URL is refused, if it is.
pub fn url_problem(url: &str) -> Option<String> {
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return Some(format!("'{url}' is not a URL: {e}")),
    };
    match parsed.scheme() {
        _ if parsed.host_str().is_none() => Some(format!("'{url}' names no host")),
        "http" => None,
        // Refused at load rather than failing every delivery later.
        "https" if !HTTPS_SUPPORTED => Some(
            "https needs TLS, which this build's HTTP client lacks: use an http URL (a relay on the hub's host)".into(),
        ),
        "https" => None,
        other => Some(format!("scheme '{other}' is not http or https")),
    }
}

/// Why a header is refused, if it is (reqwest would refuse it at every delivery).
fn header_problem(name: &str, value: &str) -> Option<String> {
    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Some(format!("'{name}' is not a header name"));
    }
    // The value is a secret: never in a message.
    reqwest::header::HeaderValue::from_str(value)
        .is_err()
        .then(|| format!("the value of '{name}' is not a header value (printable ASCII)"))
}

/// Checks each webhook's URL and headers and `public_url`; an error names its place in `text`
/// (read from `origin`).
pub fn check(
    webhooks: &[NotifyConfig],
    public_url: Option<&Spanned<String>>,
    text: &str,
    origin: &str,
) -> Result<(), TomlFileError> {
    let refuse = |span: std::ops::Range<usize>, message: String| {
        Err(TomlFileError::invalid(text, origin, Some(span), message))
    };
    for (n, hook) in webhooks.iter().enumerate() {
        if let Some(problem) = url_problem(hook.url.get_ref()) {
            return refuse(hook.url.span(), format!("notify[{n}].url: {problem}"));
        }
        for (name, value) in &hook.headers {
            if let Some(problem) = header_problem(name, value.get_ref()) {
                return refuse(value.span(), format!("notify[{n}].headers: {problem}"));
            }
        }
    }
    match public_url.map(|u| (u, url_problem(u.get_ref()))) {
        Some((url, Some(problem))) => refuse(url.span(), format!("public_url: {problem}")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HubConfig;

    #[test]
    fn webhooks_are_read_with_defaults() {
        let text = "public_url = \"http://hub.example/\"\n[[notify]]\nurl = \"http://127.0.0.1:9/hook\"\n\n[[notify]]\nurl = \"http://ntfy.example/topic-abcdef\"\nformat = \"ntfy\"\nevents = [\"blocked\"]\nteams = [\"red\"]\nmin_interval_s = 0\nheaders = { Authorization = \"Bearer s3cr3t-token-value\" }\n";
        let c = HubConfig::parse(text, "hub.toml").unwrap();
        assert_eq!(c.notify.len(), 2);
        let first = &c.notify[0];
        assert_eq!(first.format, NotifyFormat::Json);
        assert_eq!(first.events, NotifyEvent::DEFAULT);
        assert_eq!(first.min_interval_s, DEFAULT_MIN_INTERVAL_S);
        assert_eq!(first.display_name(0), "notify[0] 127.0.0.1");
        let second = &c.notify[1];
        assert_eq!(second.format, NotifyFormat::Ntfy);
        assert_eq!(second.events, [NotifyEvent::Blocked]);
        assert_eq!(second.teams, ["red"]);
        assert_eq!(second.min_interval_s, 0);
        assert!(second
            .secrets()
            .contains(&"Bearer s3cr3t-token-value".to_string()));
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cr3t-token-value"), "{shown}");
        assert!(shown.contains("Authorization"), "{shown}");
        assert_eq!(
            c.public_url.as_ref().map(|u| u.get_ref().as_str()),
            Some("http://hub.example/")
        );
    }

    #[test]
    fn a_bad_or_missing_url_is_refused_at_its_place() {
        let bad = [
            (
                "[[notify]]\nurl = \"not a url\"\n",
                "hub.toml:2:7",
                "notify[0].url",
            ),
            (
                "cols = 80\n[[notify]]\nurl = \"http://a/\"\n[[notify]]\n  url = \"ftp://x/y\"\n",
                "hub.toml:5:9",
                "scheme 'ftp'",
            ),
            ("[[notify]]\nformat = \"json\"\n", "hub.toml:1:1", "url"),
            (
                "[[notify]]\nurl = \"http://a/\"\nformat = \"xml\"\n",
                "hub.toml:3:10",
                "xml",
            ),
            (
                "[[notify]]\nurl = \"http://a/\"\nevents = [\"coffee\"]\n",
                "hub.toml:3:",
                "coffee",
            ),
            ("public_url = \"nowhere\"\n", "hub.toml:1:14", "public_url"),
            (
                "[[notify]]\nurl = \"http://a/\"\nheaders = { \"X Bad\" = \"v\" }\n",
                "hub.toml:3:",
                "not a header name",
            ),
            (
                "[[notify]]\nurl = \"http://a/\"\nheaders = { X-Token = \"line\\nbreak\" }\n",
                "hub.toml:3:23",
                "not a header value",
            ),
            (
                "[[notify]]\nurl = \"https://ntfy.sh/t\"\n",
                "hub.toml:2:7",
                "TLS",
            ),
        ];
        for (text, at, says) in bad {
            let e = HubConfig::parse(text, "hub.toml").unwrap_err().to_string();
            assert!(e.starts_with(at) && e.contains(says), "{text}: {e}");
        }
    }
}
