//! `[audit]` in `hub.toml`: where the audit log lives and how long it keeps records.

use std::path::PathBuf;

use serde::Deserialize;

/// Largest command or response kept in an audit record: as much as the guard keeps of a line.
pub const MAX_FIELD_BYTES: usize = crate::guard::MAX_LINE_BYTES;

/// `[audit]` in `hub.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Keep the log (default true).
    pub enabled: bool,
    /// The SQLite file (default: `audit.db` in the data dir).
    pub path: Option<PathBuf>,
    /// Let operations through when the log cannot be written (default false: refuse them).
    pub fail_open: bool,
    /// Records older than this are deleted.
    pub retention_days: u64,
    /// The oldest records are deleted while the log is larger than this.
    pub max_bytes: u64,
    /// `full` (default: every record is on disk before the reply) or `normal` (survives a
    /// crash of the hub, not of the machine; faster).
    pub synchronous: String,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: true,
            path: None,
            fail_open: false,
            retention_days: 30,
            max_bytes: 512 * 1024 * 1024,
            synchronous: "full".into(),
        }
    }
}

impl AuditConfig {
    /// Checks values serde cannot.
    pub fn validate(&self) -> Result<(), super::ConfigError> {
        if !matches!(self.synchronous.as_str(), "full" | "normal") {
            return Err(super::ConfigError::AuditSynchronous);
        }
        if self.retention_days == 0 || self.max_bytes < 64 * 1024 {
            return Err(super::ConfigError::AuditLimits);
        }
        Ok(())
    }
}
