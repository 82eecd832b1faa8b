//! `agent-hub doctor`: checks what a hub needs on this machine (tmux, the Docker engines and
//! agent images of `hub.toml`, the data dir and audit log, listen address and auth, a hub
//! answering at `--hub`, its webhooks) and explains every problem with a fix. Exit 0 when nothing failed,
//! 1 otherwise; `--json` for scripts.

mod engines;
mod host;
mod webhooks;

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::config::HubConfig;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Config file (hub.toml) to check, as `serve` would load it.
    #[arg(long, env = "AGENT_HUB_CONFIG")]
    pub config: Option<PathBuf>,
    /// The data dir `serve` would use (overrides the config's).
    #[arg(long, env = "AGENT_HUB_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The address `serve` would listen on (overrides the config's).
    #[arg(long, env = "AGENT_HUB_LISTEN")]
    pub listen: Option<std::net::SocketAddr>,
    /// URL of the hub that should be answering.
    #[arg(long, env = "AGENT_HUB_URL", default_value = super::DEFAULT_HUB_URL)]
    pub hub: String,
    /// Token for the hub at --hub (default: the owner's token in the data dir), to list which
    /// of its sessions run on the host.
    #[arg(long, env = "AGENT_HUB_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Works, but an operator should know.
    Warn,
    /// The hub will not work as configured.
    Fail,
}

/// One check's result: what was found, why it matters and, unless it is fine, how to fix it.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub check: String,
    pub status: Status,
    pub detail: String,
    pub explanation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    pub fn ok(check: impl Into<String>, detail: impl Into<String>, why: &str) -> Self {
        Finding {
            check: check.into(),
            status: Status::Ok,
            detail: detail.into(),
            explanation: why.into(),
            fix: None,
        }
    }

    pub fn problem(
        status: Status,
        check: impl Into<String>,
        detail: impl Into<String>,
        why: &str,
        fix: impl Into<String>,
    ) -> Self {
        Finding {
            check: check.into(),
            status,
            detail: detail.into(),
            explanation: why.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The config `serve` would run with, or the finding that says why there is none.
fn load_config(args: &DoctorArgs) -> Result<HubConfig, Finding> {
    let mut config = match &args.config {
        Some(path) => HubConfig::load(path).map_err(|e| {
            Finding::problem(
                Status::Fail,
                "config",
                e.to_string(),
                "serve refuses to start with a config it cannot read or that is invalid",
                format!("fix {} (the message says where)", path.display()),
            )
        })?,
        None => HubConfig::default(),
    };
    if let Some(dir) = &args.data_dir {
        config.data_dir = dir.clone();
    }
    if let Some(listen) = args.listen {
        config.listen_on(listen);
    }
    Ok(config)
}

/// Runs every check, in the order a newcomer would fix them.
pub async fn findings(args: &DoctorArgs) -> Vec<Finding> {
    let mut out = vec![host::tmux()];
    let mut data_dir = args.data_dir.clone();
    match load_config(args) {
        Ok(config) => {
            data_dir = Some(config.data_dir.clone());
            let source = args
                .config
                .as_ref()
                .map_or("built-in defaults".to_string(), |p| p.display().to_string());
            out.push(Finding::ok(
                "config",
                format!("loaded {source}"),
                "serve starts with this configuration",
            ));
            out.extend(engines::check(&config).await);
            out.push(host::data_dir(&config.data_dir));
            out.push(host::owner_token(&config.data_dir));
            out.push(host::audit_log(&config));
            out.push(host::listen(
                config.listen,
                config.auth,
                config.tokens.len(),
            ));
        }
        Err(f) => out.push(f),
    }
    let hub = host::hub_answers(&args.hub).await;
    let answers = hub.status == Status::Ok;
    out.push(hub);
    if answers {
        let found = super::credential::find(args.token.as_deref(), data_dir.as_deref());
        let client =
            crate::client::HubClient::new(&args.hub).with_credential(found.token, found.source);
        out.extend(host::host_sessions(&client).await);
        out.extend(webhooks::check(&client).await);
    }
    out
}

pub async fn run(args: DoctorArgs) -> i32 {
    let found = findings(&args).await;
    let failed = found.iter().any(|f| f.status == Status::Fail);
    if args.json {
        let report = serde_json::json!({ "ok": !failed, "findings": found });
        println!("{report:#}");
    } else {
        for f in &found {
            let tag = match f.status {
                Status::Ok => "ok  ",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            println!("[{tag}] {}: {}", f.check, f.detail);
            if f.status != Status::Ok {
                println!("       why: {}", f.explanation);
            }
            if let Some(fix) = &f.fix {
                println!("       fix: {fix}");
            }
        }
        let problems = found.iter().filter(|f| f.status == Status::Fail).count();
        if failed {
            println!("{problems} problem(s) found");
        } else {
            println!("all checks passed");
        }
    }
    i32::from(failed)
}
