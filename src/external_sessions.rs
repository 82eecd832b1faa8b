//! External sessions: terminals owned by other processes (another hub, an IDE, a script) and
//! reached through their bridge API. This module registers them and keeps the registry's
//! housekeeping (unregister, heartbeat, reset); `backend::external` calls a bridge and moves
//! their bytes like any other backend.

use std::sync::Arc;

use chrono::Utc;
use serde::Deserialize;

use crate::backend::external::BridgeClient;
use crate::backend::external::{ExternalBackend, ExternalLink};
use crate::backend::TermSize;
use crate::config::check_size;
use crate::config::HubConfig;
use crate::error::{HubError, HubResult};
use crate::event_bus::EventSink;
use crate::output::Output;
use crate::protocol::EventKind;
use crate::redact::Redactor;
use crate::registry::Registry;
use crate::registry::{NewSession, Origin, SessionRegistry};
use crate::session::{Owner, Session, SessionSpec};

/// `POST /v1/pty/register`
#[derive(Debug, Clone, Deserialize, serde::Serialize, utoipa::ToSchema)]
pub struct RegisterRequest {
    /// The id the session gets in this hub.
    #[schema(pattern = r"^[A-Za-z0-9_.:-]{1,128}$")]
    pub session_id: String,
    /// The id on the bridge, when it differs from `session_id`.
    pub remote_session_id: Option<String>,
    /// Where the terminal lives (`remote-hub`, `ide`, ...); `external` if not given.
    pub source: Option<String>,
    #[serde(default, deserialize_with = "crate::json::whole::opt")]
    #[schema(value_type = Option<u64>, maximum = 4_294_967_295_u64)]
    pub pid: Option<u32>,
    /// The bridge's base URL: `http://` or `https://`, a host name or IPv4 address, an
    /// optional port and path. The hub calls it (its `/health` first) before it answers.
    #[schema(schema_with = bridge_url_schema)]
    pub bridge_url: String,
    /// Bearer token the hub presents to the bridge.
    pub bridge_token: Option<String>,
    #[serde(default, deserialize_with = "crate::json::whole::opt")]
    #[schema(minimum = 1, maximum = 1000)]
    pub cols: Option<u16>,
    #[serde(default, deserialize_with = "crate::json::whole::opt")]
    #[schema(minimum = 1, maximum = 500)]
    pub rows: Option<u16>,
    /// Who the session belongs to.
    #[serde(flatten)]
    pub owner: Owner,
    #[serde(flatten, skip_serializing)]
    #[schema(ignore)]
    pub no_other_fields: crate::json::NoOtherFields,
}

fn bridge_url_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .pattern(Some(crate::protocol::schema::bridge_url()))
        .build()
}

/// What `reset` removed.
#[derive(Debug, Default, serde::Serialize)]
pub struct ResetReport {
    pub unregistered: Vec<String>,
    pub forgotten_exited: Vec<String>,
}

/// Ids of external sessions: what a process may name its terminals.
pub fn check_session_id(id: &str) -> HubResult<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(HubError::bad_request(format!(
            "session_id '{id}' is not allowed: use 1-128 letters, digits, '_', '-', '.' or ':'"
        )))
    }
}

/// The external sessions component: registers, unregisters and resets them in the session
/// registry. Saving the registry afterwards is the caller's (the hub's) part.
#[derive(Clone)]
pub struct Externals {
    pub sessions: Arc<Registry>,
    pub events: EventSink,
    pub redactor: Arc<Redactor>,
    pub config: Arc<HubConfig>,
}

impl Externals {
    /// Adds a terminal served by a bridge. Registering the same session (same bridge and
    /// remote id) again updates its owner fields in place and returns `(session, false)`.
    pub async fn register(
        &self,
        req: RegisterRequest,
        check_bridge: bool,
    ) -> HubResult<(Arc<Session>, bool)> {
        check_session_id(&req.session_id)?;
        crate::owner_routing::check_owner_role(req.owner.owner_role.as_deref())?;
        // Checked before anything else, a registration made again included.
        let size = TermSize {
            cols: req.cols.unwrap_or(self.config.cols),
            rows: req.rows.unwrap_or(self.config.rows),
        };
        check_size(size.cols, size.rows).map_err(|e| HubError::bad_request(e.to_string()))?;
        let remote_id = req
            .remote_session_id
            .clone()
            .unwrap_or_else(|| req.session_id.clone());
        let owner = req.owner.clone();
        let client = BridgeClient::new(&req.bridge_url, req.bridge_token.clone())?;
        // The bridge token is a secret like any other: never shown, logged or audited.
        if let Some(token) = &req.bridge_token {
            self.redactor.add_literals([token.as_str()]);
        }
        if let Ok(existing) = self.sessions.get(&req.session_id) {
            let same = existing
                .external()
                .is_some_and(|l| l.client.url() == client.url() && l.remote_id == remote_id);
            if !same {
                return Err(HubError::SessionExists {
                    id: req.session_id.clone(),
                });
            }
            existing.update_owner(owner);
            existing.heartbeat();
            return Ok((existing, false));
        }
        let link = Arc::new(ExternalLink::new(
            client,
            remote_id,
            req.bridge_token.clone(),
        ));
        if check_bridge {
            link.check_health().await?;
            link.check_credential().await?;
        }
        let output = Arc::new(Output::new(self.config.scrollback_bytes));
        let backend = ExternalBackend::start(link, req.pid, output.clone());
        let spec = SessionSpec {
            id: req.session_id.clone(),
            backend: crate::session::SessionBackend::External,
            source: req.source.clone().unwrap_or_else(|| "external".into()),
            shell: req.owner.cli_type.clone().unwrap_or_default(),
            args: Vec::new(),
            cwd: String::new(),
            tmux_session: None,
            agent_id: None,
            policy: None,
            container_id: None,
            created_at: Utc::now(),
        };
        let new = NewSession::new(spec, size, owner, output, backend);
        let session = self.sessions.add(new, Origin::Created);
        session.heartbeat();
        self.events.emit(EventKind::SessionRegistered {
            session_id: req.session_id.clone(),
            bridge_url: req.bridge_url.clone(),
            owner: session.owner(),
        });
        Ok((session, true))
    }

    /// Removes an external session from the registry (its program is not touched). A leader's
    /// session needs `force`.
    pub async fn unregister(&self, id: &str, force: bool) -> HubResult<Arc<Session>> {
        let session = self.sessions.get(id)?;
        if session.external().is_none() {
            return Err(HubError::UnregisterUnsupported {
                id: id.into(),
                backend: session.spec().backend.to_string(),
            });
        }
        if !force && session.owner().owner_role.as_deref() == Some("leader") {
            return Err(HubError::LeaderSession { id: id.into() });
        }
        session.detach().await;
        self.sessions.remove(id);
        self.events.emit(EventKind::SessionUnregistered {
            session_id: id.to_string(),
            forced: force,
        });
        Ok(session)
    }

    /// Clears the registry: unregisters every external session and forgets every session
    /// whose program has ended. The hub's own live sessions stay (stop them with kill).
    pub async fn reset(&self) -> ResetReport {
        let mut report = ResetReport::default();
        for session in self.sessions.list() {
            let id = session.id().to_string();
            if session.external().is_some() {
                session.detach().await;
                self.sessions.remove(&id);
                report.unregistered.push(id);
            } else if session.output().exit().is_some() {
                self.sessions.remove(&id);
                report.forgotten_exited.push(id);
            }
        }
        self.events.emit(EventKind::RegistryReset {
            unregistered: report.unregistered.clone(),
            forgotten_exited: report.forgotten_exited.clone(),
        });
        report
    }
}
