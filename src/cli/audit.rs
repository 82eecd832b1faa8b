//! `agent-hub audit`: the audit and traffic log. Prints the most recent records that match
//! the filters (oldest first), and with `--follow` keeps printing new ones as the hub writes
//! them (from the live stream, filtered the same way).

use clap::Args;
use futures_util::StreamExt;

use tokio_tungstenite::tungstenite::Message;

use super::ClientOpts;
use crate::protocol::{AuditRecord, TrafficFrame};

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Keep printing new records as they are written (Ctrl-C stops).
    #[arg(long, short)]
    pub follow: bool,
    /// Only this session's records.
    #[arg(long)]
    pub session: Option<String>,
    /// Only this agent's records.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only this action (send_line, talk, keys, kill, agent_start, ...).
    #[arg(long)]
    pub action: Option<String>,
    /// Only inputs the command guard refused.
    #[arg(long)]
    pub blocked: bool,
    /// Only failed operations.
    #[arg(long)]
    pub errors: bool,
    /// Only records whose command or response contains this text.
    #[arg(long)]
    pub search: Option<String>,
    /// Only records at or after this time (RFC 3339, or epoch milliseconds).
    #[arg(long)]
    pub since: Option<String>,
    /// How many of the most recent records to print first.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    #[command(flatten)]
    pub opts: ClientOpts,
}

impl AuditArgs {
    fn filters(&self) -> Vec<(&'static str, String)> {
        let mut f = Vec::new();
        for (name, value) in [
            ("session_id", &self.session),
            ("agent_id", &self.agent),
            ("action", &self.action),
            ("search", &self.search),
            ("since", &self.since),
        ] {
            if let Some(v) = value {
                f.push((name, v.clone()));
            }
        }
        if self.blocked {
            f.push(("blocked_only", "true".into()));
        }
        if self.errors {
            f.push(("errors_only", "true".into()));
        }
        f
    }

    /// Whether a live record passes the filters (`since` is implied: it is new).
    fn matches(&self, e: &AuditRecord) -> bool {
        let eq = |field: &Option<String>, want: &Option<String>| {
            want.as_ref().is_none_or(|w| field.as_ref() == Some(w))
        };
        let text = |field: &Option<String>| field.clone().unwrap_or_default();
        eq(&e.session_id, &self.session)
            && eq(&e.agent_id, &self.agent)
            && self.action.as_ref().is_none_or(|a| &e.action == a)
            && (!self.blocked || e.blocked)
            && (!self.errors || e.success == Some(false))
            && self
                .search
                .as_ref()
                .is_none_or(|s| text(&e.command).contains(s) || text(&e.response).contains(s))
    }
}

/// One record as a line of text.
pub fn format_record(e: &AuditRecord) -> String {
    let s = |f: &Option<String>| f.as_deref().unwrap_or("-").to_string();
    let actor = match &e.actor_agent_id {
        Some(agent) => format!("{}/{agent}", e.actor),
        None => e.actor.clone(),
    };
    let outcome = if e.blocked {
        format!("BLOCKED({})", s(&e.blocked_pattern))
    } else {
        match e.success {
            Some(true) => "ok".into(),
            Some(false) => s(&e.error_code),
            None => "unfinished".into(),
        }
    };
    let duration = e.duration_ms.map_or(String::new(), |d| format!(" {d}ms"));
    let command: String = s(&e.command).chars().take(100).collect();
    format!(
        "{} {:<6} {:<18} {:<20} {:<14} {}{} {}",
        e.id,
        e.ts,
        actor,
        e.action,
        s(&e.session_id),
        outcome,
        duration,
        command
    )
}

fn print(e: &AuditRecord, json: bool) {
    if json {
        super::ops::print_json(e);
    } else {
        println!("{}", format_record(e));
    }
}

pub async fn run(args: AuditArgs) -> i32 {
    let client = args.opts.client();
    let fail = |e: &crate::client::ClientError| {
        if args.opts.json {
            super::ops::print_json(&e.body);
        } else {
            eprintln!("agent-hub: {e}");
        }
        1
    };
    // Subscribe first so nothing written between the page and the stream is missed.
    let mut live = None;
    if args.follow {
        match client.ws_connect(&client.audit_stream_url()).await {
            Ok(ws) => live = Some(ws),
            Err(e) => {
                eprintln!("agent-hub: cannot follow the audit stream: {e}");
                return 1;
            }
        }
    }
    let mut filters = args.filters();
    filters.push(("limit", "1".into()));
    let total = match client.audit_events(&filters).await {
        Ok(v) => u64::try_from(v.total).unwrap_or(0),
        Err(e) => return fail(&e),
    };
    filters.pop();
    filters.push(("limit", args.limit.clamp(1, 1000).to_string()));
    filters.push((
        "offset",
        total.saturating_sub(u64::from(args.limit)).to_string(),
    ));
    let mut last_id = 0;
    match client.audit_events(&filters).await {
        Ok(v) => {
            for e in &v.events {
                last_id = e.id;
                print(e, args.opts.json);
            }
        }
        Err(e) => return fail(&e),
    }
    let Some(mut ws) = live else { return 0 };
    while let Some(Ok(message)) = ws.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let e = match serde_json::from_str::<TrafficFrame>(text.as_str()) {
            Ok(TrafficFrame::AuditEvent { event }) => *event,
            Ok(TrafficFrame::EventsDropped { count }) => {
                eprintln!("agent-hub: {count} audit records were not shown (too slow)");
                continue;
            }
            Err(_) => continue,
        };
        // Records already printed from the page come again on the stream: skip them.
        if e.id <= last_id || !args.matches(&e) {
            continue;
        }
        print(&e, args.opts.json);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_print_as_one_line() {
        let e: AuditRecord = serde_json::from_value(json!({"id": 7, "ts": "T", "ts_ms": 0, "actor": "ops", "actor_agent_id": "lead", "action": "send_line",
            "session_id": "pty_1", "blocked": true, "blocked_pattern": "rm-rf-root", "success": false,
            "duration_ms": 2, "command": "{\"data\":\"rm -rf /\"}"}))
        .unwrap();
        let line = format_record(&e);
        assert!(line.starts_with("7 T"), "{line}");
        for part in [
            "ops/lead",
            "send_line",
            "pty_1",
            "BLOCKED(rm-rf-root)",
            "2ms",
            "rm -rf /",
        ] {
            assert!(line.contains(part), "{part}: {line}");
        }
    }
}
