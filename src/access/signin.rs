//! One-time sign-in codes for the dashboard. `serve` prints a link holding one (and
//! `agent-hub token link` asks for another); the page exchanges it for the owner's token, which
//! then lives in the tab's session storage, so the token itself never appears in a URL or the
//! browser's history. A code works once, for [`CODE_LIFETIME`]; only its hash is kept.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::Rng;
use sha2::{Digest, Sha256};

/// How long a code can be used.
pub const CODE_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// How long a used or expired code is remembered, to say why it is refused.
const REMEMBERED: Duration = Duration::from_secs(24 * 3600);

/// Why a code was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// This hub never issued it (or has restarted since).
    Unknown,
    /// It was used already.
    Used,
    /// It is older than [`CODE_LIFETIME`].
    Expired,
}

impl Refusal {
    /// A sentence for the person holding the link.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Unknown => "this sign-in link is not valid: this hub did not issue it, or the hub was restarted since. Get a new link with `agent-hub token link` on the hub's machine, or sign in with a token",
            Refusal::Used => "this sign-in link was used already: a link signs in once. Get a new one with `agent-hub token link` on the hub's machine, or sign in with a token",
            Refusal::Expired => "this sign-in link has expired (links last 15 minutes). Get a new one with `agent-hub token link` on the hub's machine, or sign in with a token",
        }
    }
}

struct Issued {
    at: Instant,
    used: bool,
}

/// The codes a hub has issued, by SHA-256.
#[derive(Default)]
pub struct Codes {
    issued: Mutex<HashMap<[u8; 32], Issued>>,
}

fn hash(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

impl Codes {
    /// A new code: 32 hex digits (128 random bits).
    pub fn issue(&self) -> String {
        let bytes: [u8; 16] = rand::rng().random();
        let code: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.retain(|_, i| now.duration_since(i.at) < REMEMBERED);
        issued.insert(
            hash(&code),
            Issued {
                at: now,
                used: false,
            },
        );
        code
    }

    /// Uses the code up, or says why it cannot be used.
    pub fn redeem(&self, code: &str) -> Result<(), Refusal> {
        self.redeem_at(code, Instant::now())
    }

    fn redeem_at(&self, code: &str, now: Instant) -> Result<(), Refusal> {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        let entry = issued.get_mut(&hash(code.trim())).ok_or(Refusal::Unknown)?;
        if entry.used {
            return Err(Refusal::Used);
        }
        if now.duration_since(entry.at) >= CODE_LIFETIME {
            return Err(Refusal::Expired);
        }
        entry.used = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once_and_only_while_fresh() {
        let codes = Codes::default();
        let a = codes.issue();
        let b = codes.issue();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert_eq!(codes.redeem(&a), Ok(()));
        assert_eq!(codes.redeem(&a), Err(Refusal::Used));
        let later = Instant::now() + CODE_LIFETIME;
        assert_eq!(codes.redeem_at(&b, later), Err(Refusal::Expired));
        assert_eq!(codes.redeem(&b), Ok(()));
        assert_eq!(codes.redeem("0123"), Err(Refusal::Unknown));
    }
}
