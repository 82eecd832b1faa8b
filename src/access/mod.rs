//! Who may call the hub's API as a person: the owner's admin token (made at first start and
//! kept in the data dir, see [`owner`]), people's `[[tokens]]` from `hub.toml` with their roles,
//! and one-time sign-in codes that a dashboard tab exchanges for the owner's token (see
//! [`signin`]). With `auth = "none"` a caller without a credential is an anonymous admin
//! (loopback only; the config refuses anything else). Agents' credentials are
//! [`crate::credentials`]' business, not this module's.

pub mod owner;
pub mod signin;

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use crate::actor::Role;
use crate::config::{AuthMode, TokenConfig};

/// The name the owner's token acts under (in the audit trail, `whoami`, the dashboard).
pub const OWNER_NAME: &str = "owner";

/// The owner's token file cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("cannot read {}: {source}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the owner's token to {}: {source}", file.display())]
    Write {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A token the hub knows: whose it is and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub name: String,
    pub role: Role,
}

/// The hub's people's credentials.
pub struct Access {
    mode: AuthMode,
    tokens: Vec<TokenConfig>,
    owner: RwLock<String>,
    owner_file: PathBuf,
    /// Whether the owner's token is in `owner_file` (not when the data dir cannot be written).
    owner_kept: bool,
    codes: signin::Codes,
}

/// Equal-time comparison: the time taken does not depend on where the inputs differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

impl Access {
    /// The access of a hub whose data dir is `data_dir`: the owner's token is read from
    /// `<data_dir>/admin-token`, or made and written there (mode 0600) at first start. A data
    /// dir that cannot be read or written does not stop the hub: the token then lives in memory
    /// for this run (sign-in links and `[[tokens]]` still work), and the log says so.
    pub fn open(mode: AuthMode, tokens: Vec<TokenConfig>, data_dir: &Path) -> Self {
        let owner_file = owner::path(data_dir);
        let (owner, owner_kept) = match owner::load_or_create(&owner_file) {
            Ok(token) => (token, true),
            Err(e) => {
                tracing::error!(
                    "{e}; the owner's token of this run is in memory only, so agent-hub commands cannot find it: sign in with the dashboard link, or give serve AGENT_HUB_TOKEN or [[tokens]]"
                );
                (owner::generate(), false)
            }
        };
        Access {
            mode,
            tokens,
            owner: RwLock::new(owner),
            owner_file,
            owner_kept,
            codes: signin::Codes::default(),
        }
    }

    /// Whether the owner's token is kept in [`Access::owner_file`] (false when the data dir
    /// could not be written: it is then in memory only).
    pub fn owner_kept(&self) -> bool {
        self.owner_kept
    }

    /// Whether a caller with no credential is an admin (`auth = "none"`).
    pub fn anonymous_allowed(&self) -> bool {
        self.mode == AuthMode::None
    }

    /// Where the owner's token is kept.
    pub fn owner_file(&self) -> &Path {
        &self.owner_file
    }

    /// The owner's token as it is now.
    pub fn owner_token(&self) -> String {
        self.owner.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Who holds `presented`, if it is the owner's token or one of `[[tokens]]`. Every token is
    /// compared, so the time taken does not say which one matched.
    pub fn holder(&self, presented: &str) -> Option<Holder> {
        let owner = self.owner.read().unwrap_or_else(|e| e.into_inner());
        let mut found = constant_time_eq(owner.as_bytes(), presented.as_bytes()).then(|| Holder {
            name: OWNER_NAME.into(),
            role: Role::Admin,
        });
        for t in &self.tokens {
            if constant_time_eq(t.token.as_bytes(), presented.as_bytes()) {
                found = Some(Holder {
                    name: t.name.clone(),
                    role: t.role,
                });
            }
        }
        found
    }

    /// Replaces the owner's token (in the file first, then in memory): the old one is refused
    /// from the next request on. Returns the new one.
    pub fn rotate_owner(&self) -> Result<String, AccessError> {
        let new = owner::generate();
        owner::write(&self.owner_file, &new)?;
        *self.owner.write().unwrap_or_else(|e| e.into_inner()) = new.clone();
        Ok(new)
    }

    /// A new one-time sign-in code for the dashboard (see [`signin`]).
    pub fn issue_signin_code(&self) -> String {
        self.codes.issue()
    }

    /// Exchanges a sign-in code for the owner's token; a code works once, for
    /// [`signin::CODE_LIFETIME`].
    pub fn redeem_signin_code(&self, code: &str) -> Result<String, signin::Refusal> {
        self.codes.redeem(code).map(|()| self.owner_token())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str, token: &str, role: Role) -> TokenConfig {
        TokenConfig {
            name: name.into(),
            token: token.into(),
            role,
        }
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn the_owner_and_configured_tokens_are_known_by_name_and_role() {
        let dir = tempfile::tempdir().unwrap();
        let access = Access::open(
            AuthMode::Token,
            vec![token("ci", "observer-token-0123456789", Role::Observer)],
            dir.path(),
        );
        let owner = access.owner_token();
        assert_eq!(
            access.holder(&owner),
            Some(Holder {
                name: "owner".into(),
                role: Role::Admin
            })
        );
        assert_eq!(
            access.holder("observer-token-0123456789").unwrap().role,
            Role::Observer
        );
        assert_eq!(access.holder("nope"), None);
        assert_eq!(access.holder(""), None);
        assert!(!access.anonymous_allowed());
    }

    #[test]
    fn rotation_refuses_the_old_token_and_keeps_the_new_one_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let access = Access::open(AuthMode::Token, vec![], dir.path());
        let old = access.owner_token();
        let new = access.rotate_owner().unwrap();
        assert_ne!(old, new);
        assert_eq!(access.holder(&old), None);
        assert_eq!(access.holder(&new).unwrap().name, "owner");
        let again = Access::open(AuthMode::Token, vec![], dir.path());
        assert!(again.owner_kept());
        assert_eq!(again.owner_token(), new);
    }

    #[test]
    fn a_sign_in_code_gives_the_owner_token_once() {
        let dir = tempfile::tempdir().unwrap();
        let access = Access::open(AuthMode::Token, vec![], dir.path());
        let code = access.issue_signin_code();
        assert_eq!(access.redeem_signin_code(&code), Ok(access.owner_token()));
        assert_eq!(access.redeem_signin_code(&code), Err(signin::Refusal::Used));
        assert_eq!(
            access.redeem_signin_code("not-a-code"),
            Err(signin::Refusal::Unknown)
        );
    }
}

#[cfg(all(test, unix))]
mod unwritable {
    use super::*;

    #[test]
    fn an_unwritable_data_dir_keeps_the_owner_token_in_memory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500)).unwrap();
        // Root writes anyway: then there is nothing to check here.
        if std::fs::write(ro.join("probe"), "x").is_ok() {
            return;
        }
        let access = Access::open(AuthMode::Token, vec![], &ro);
        assert!(!access.owner_kept());
        let token = access.owner_token();
        assert_eq!(access.holder(&token).unwrap().name, "owner");
        assert!(access.rotate_owner().is_err(), "rotation needs the file");
    }
}
