//! Doctor checks of this machine: tmux, the data dir, the audit log, listen address and auth,
//! and a hub answering at `--hub`. The verdicts are pure functions of what was observed.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::{Finding, Status};
use crate::config::{AuthMode, HubConfig};

/// The oldest tmux the hub's control-mode monitor works with (`attach -f ignore-size`).
const TMUX_MIN: (u32, u32) = (3, 2);

/// `tmux -V` as found on `PATH`.
pub fn tmux() -> Finding {
    if let Some(why) = crate::backend::tmux::HOST_SESSIONS_REFUSED {
        return Finding::ok("tmux", "not used on this system", why);
    }
    let out = std::process::Command::new("tmux").arg("-V").output();
    let version = out
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    tmux_verdict(version.as_deref())
}

/// `major.minor` of a `tmux -V` line (`tmux 3.3a`, `tmux next-3.4`).
fn tmux_version(line: &str) -> Option<(u32, u32)> {
    let v = line.rsplit([' ', '-']).next()?;
    let (major, rest) = v.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn tmux_verdict(version: Option<&str>) -> Finding {
    const WHY: &str = "tmux sessions (`new --tmux`) and adopting tmux sessions need tmux on the hub's host; container agents need it in their image instead";
    match version {
        None => Finding::problem(
            Status::Fail,
            "tmux",
            "tmux was not found on PATH",
            WHY,
            "install tmux >= 3.2 (Debian/Ubuntu: apt-get install tmux) or put it on the hub's PATH",
        ),
        Some(v) => match tmux_version(v) {
            Some(found) if found >= TMUX_MIN => Finding::ok("tmux", v, WHY),
            _ => Finding::problem(
                Status::Fail,
                "tmux",
                format!("{v} is older than 3.2 (or unreadable)"),
                "the hub attaches its monitor with `attach -f ignore-size`, which tmux < 3.2 lacks",
                "install tmux >= 3.2",
            ),
        },
    }
}

/// Creates `dir` if needed and writes (then removes) a file in it.
fn write_probe(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".agent-hub-doctor-{}", std::process::id()));
    std::fs::create_dir_all(dir)?;
    std::fs::write(&probe, b"ok")?;
    std::fs::remove_file(&probe)
}

/// Whether the data dir can be created and written.
pub fn data_dir(dir: &Path) -> Finding {
    const WHY: &str = "the hub keeps its id, the session registry, the lifecycle log, snapshots and (by default) the audit log there";
    match write_probe(dir) {
        Ok(()) => Finding::ok("data dir", format!("{} is writable", dir.display()), WHY),
        Err(e) => Finding::problem(
            Status::Fail,
            "data dir",
            format!("{} is not writable: {e}", dir.display()),
            WHY,
            format!(
                "create it and give it to the hub's user (mkdir -p {0} && chown agent-hub: {0}), or choose another with --data-dir / AGENT_HUB_DATA_DIR",
                dir.display()
            ),
        ),
    }
}

/// Whether the audit log's file can be opened for writing (or created in its directory).
pub fn audit_log(config: &HubConfig) -> Finding {
    const WHY: &str = "every input is recorded before it runs; when the log cannot be written, inputs are refused with AUDIT_UNAVAILABLE (unless audit.fail_open)";
    if !config.audit.enabled {
        return Finding::problem(
            Status::Warn,
            "audit log",
            "the audit log is disabled (audit.enabled = false)",
            "nothing records who typed what where",
            "set audit.enabled = true in hub.toml unless you mean it",
        );
    }
    let path = config
        .audit
        .path
        .clone()
        .unwrap_or_else(|| config.data_dir.join(crate::audit::store::FILE_NAME));
    let result = if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map(drop)
    } else {
        write_probe(path.parent().unwrap_or(Path::new(".")))
    };
    match result {
        Ok(()) => Finding::ok("audit log", format!("{} is writable", path.display()), WHY),
        Err(e) => Finding::problem(
            Status::Fail,
            "audit log",
            format!("{} cannot be written: {e}", path.display()),
            WHY,
            "make the file and its directory writable by the hub's user, or set audit.path in hub.toml",
        ),
    }
}

/// Listen address and auth: every listener asks for a credential unless `auth = "none"`, which
/// is a finding in itself (loopback only, and every local process is then an admin).
pub fn listen(addr: SocketAddr, auth: AuthMode, tokens: usize) -> Finding {
    const CHECK: &str = "listen and auth";
    const WHY: &str = "whoever reaches the API with an admin's credential can type into every terminal; with auth = \"none\" every process on this machine can, agents included";
    let loopback = addr.ip().is_loopback();
    match auth {
        AuthMode::None if loopback => Finding::problem(
            Status::Warn,
            CHECK,
            format!("{addr} with auth = \"none\": any local process, agents included, can control every agent without a credential"),
            WHY,
            "remove auth = \"none\" from hub.toml: the hub then asks for the owner's token (agent-hub commands on this machine read it from the data dir)",
        ),
        AuthMode::None => Finding::problem(
            Status::Fail,
            CHECK,
            format!("{addr} is reachable from other machines and auth = \"none\" (serve refuses to start)"),
            WHY,
            "remove auth = \"none\" from hub.toml, or listen on 127.0.0.1",
        ),
        AuthMode::Token if loopback => Finding::ok(
            CHECK,
            format!("{addr} (loopback); a credential is required: the owner's token and {tokens} more"),
            WHY,
        ),
        AuthMode::Token => Finding::ok(
            CHECK,
            format!("{addr}; a credential is required: the owner's token and {tokens} more. Put TLS in front (a reverse proxy) if it leaves a trusted network"),
            WHY,
        ),
    }
}

/// The owner's admin token in the data dir: private, or made at the hub's first start.
pub fn owner_token(data_dir: &Path) -> Finding {
    const CHECK: &str = "owner's token";
    const WHY: &str =
        "the owner's token is an admin credential: whoever reads it controls every agent";
    let file = crate::access::owner::path(data_dir);
    let Ok(meta) = std::fs::metadata(&file) else {
        return Finding::ok(
            CHECK,
            format!(
                "{} does not exist yet: the hub makes it at its first start",
                file.display()
            ),
            WHY,
        );
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Finding::problem(
                Status::Warn,
                CHECK,
                format!(
                    "{} can be read by other users (mode {mode:o})",
                    file.display()
                ),
                WHY,
                format!(
                    "chmod 600 {} (the hub does it at its next start)",
                    file.display()
                ),
            );
        }
    }
    let _ = meta;
    Finding::ok(
        CHECK,
        format!("{} is private to its user", file.display()),
        WHY,
    )
}

/// Which sessions of the hub at `url` run on the host, as the hub's own user: they can read its
/// data dir, the owner's token included (containers are the isolation boundary).
pub async fn host_sessions(client: &crate::client::HubClient) -> Option<Finding> {
    const CHECK: &str = "host sessions";
    const WHY: &str = "a program in a host session runs as the hub's user and can read the hub's data dir, the owner's admin token included: only containers keep an agent inside its team";
    let sessions = client.list().await.ok()?.sessions;
    let on_host: Vec<String> = sessions
        .iter()
        .filter(|s| s.spec.source == "host" && s.alive)
        .map(|s| match &s.owner.label {
            Some(label) => format!("{label} ({})", s.spec.id),
            None => s.spec.id.clone(),
        })
        .collect();
    Some(if on_host.is_empty() {
        Finding::ok(CHECK, "no live session runs on the host", WHY)
    } else {
        Finding::problem(
            Status::Warn,
            CHECK,
            format!("{} session(s) run on the host as the hub's user: {}", on_host.len(), on_host.join(", ")),
            WHY,
            "run agents you do not trust with the hub's own powers as container agents ([[agents]] in hub.toml)",
        )
    })
}

/// Whether a hub answers `GET /health` at `url`.
pub async fn hub_answers(url: &str) -> Finding {
    const WHY: &str = "every client command (ls, send, attach, ...) talks to this hub";
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build();
    let health = format!("{}/health", url.trim_end_matches('/'));
    let reply = match client {
        Ok(c) => c.get(&health).send().await,
        Err(e) => {
            return Finding::problem(Status::Fail, "hub", e.to_string(), WHY, "report this bug")
        }
    };
    let body = match reply {
        Ok(r) if r.status().is_success() => r.json::<crate::protocol::HealthReply>().await.ok(),
        Ok(r) => {
            return Finding::problem(
                Status::Fail,
                "hub",
                format!("{health} answered {}", r.status()),
                WHY,
                "check that --hub / AGENT_HUB_URL points at an agent-hub (not another service)",
            )
        }
        Err(e) => {
            return Finding::problem(
                Status::Fail,
                "hub",
                format!("no hub answers at {url}: {e}"),
                WHY,
                "start it (agent-hub serve, or systemctl start agent-hub) or point --hub / AGENT_HUB_URL at the right address",
            )
        }
    };
    let summary = match body {
        Some(h) => format!(
            "agent-hub {} at {url}: {} session(s), {} agent(s)",
            h.version, h.sessions, h.agents
        ),
        None => format!("agent-hub ? at {url}: its /health reply is not the hub's"),
    };
    Finding::ok("hub", summary, WHY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmux_versions() {
        assert_eq!(tmux_version("tmux 3.3a"), Some((3, 3)));
        assert_eq!(tmux_version("tmux next-3.4"), Some((3, 4)));
        assert_eq!(tmux_version("tmux 2.9"), Some((2, 9)));
        assert_eq!(tmux_verdict(Some("tmux 3.2")).status, Status::Ok);
        assert_eq!(tmux_verdict(Some("tmux 3.1c")).status, Status::Fail);
        assert_eq!(tmux_verdict(None).status, Status::Fail);
    }

    #[test]
    fn auth_none_is_a_finding_and_refused_off_loopback() {
        let v4 = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            listen(v4("127.0.0.1:8100"), AuthMode::Token, 0).status,
            Status::Ok
        );
        assert_eq!(
            listen(v4("0.0.0.0:8100"), AuthMode::Token, 0).status,
            Status::Ok
        );
        assert_eq!(
            listen(v4("[::1]:8100"), AuthMode::None, 0).status,
            Status::Warn
        );
        assert_eq!(
            listen(v4("0.0.0.0:8100"), AuthMode::None, 1).status,
            Status::Fail
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_readable_owner_token_is_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(owner_token(dir.path()).status, Status::Ok);
        let file = dir.path().join("admin-token");
        std::fs::write(&file, "aho_x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(owner_token(dir.path()).status, Status::Warn);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(owner_token(dir.path()).status, Status::Ok);
    }
}
