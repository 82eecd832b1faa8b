//! Answer links (`notify_actions = true` in hub.toml): a webhook message about a question gets
//! a link per choice, `<base>/answer/<session>/<token>`, that answers exactly that question
//! with that choice, once, within [`LINK_LIFETIME`]. The token carries its claims (the session,
//! the question: when the agent became blocked on it and a hash of its words, the choice's
//! label and keys, the expiry), signed with HMAC-SHA256 under a key this hub drew at start
//! (a restart voids every link). Whether the question is still on the screen is the API's to
//! check ([`crate::api`]); what is decided here is whether a token is genuine, current and
//! unused.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::agent_state::question::Choice;

/// How long a link answers.
pub const LINK_LIFETIME: chrono::Duration = chrono::Duration::minutes(15);

/// What a token says, signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The session asked.
    #[serde(rename = "s")]
    pub session_id: String,
    /// When it became blocked on the question, in ms since the epoch (a question asked again
    /// later is another question).
    #[serde(rename = "b")]
    pub blocked_since_ms: i64,
    /// [`question_hash`] of the question's words.
    #[serde(rename = "q")]
    pub question: String,
    /// The choice's label and its keys.
    #[serde(rename = "l")]
    pub label: String,
    #[serde(rename = "k")]
    pub keys: Vec<String>,
    /// When the link stops answering, in seconds since the epoch.
    #[serde(rename = "e")]
    pub expires: i64,
}

/// One choice's link, as a message carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerLink {
    pub label: String,
    pub url: String,
}

/// Why a link does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token this hub signed for this session (altered, truncated, from before a restart).
    Invalid,
    Expired,
    /// This question was answered through a link already.
    Used,
    /// The question is no longer on the screen (answered, or the agent moved on).
    QuestionGone,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Refusal::Invalid => "ANSWER_LINK_INVALID",
            Refusal::Expired => "ANSWER_LINK_EXPIRED",
            Refusal::Used => "ANSWER_LINK_USED",
            Refusal::QuestionGone => "QUESTION_GONE",
        }
    }

    /// A sentence for the person who followed the link.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Invalid => "this answer link is not valid: it was altered, or the hub that made it has restarted since. Open the dashboard to answer",
            Refusal::Expired => "this answer link has expired (links answer for 15 minutes). Open the dashboard to answer",
            Refusal::Used => "this question was answered through a link already: a link answers once",
            Refusal::QuestionGone => "this question is no longer on the agent's screen: someone answered it, or the agent moved on. Nothing was sent",
        }
    }
}

/// The hub's signing key and the questions answered through links.
pub struct AnswerLinks {
    key: [u8; 32],
    /// Questions answered (session and blocked-since), with when their links expire.
    answered: Mutex<HashMap<(String, i64), i64>>,
}

impl Default for AnswerLinks {
    fn default() -> Self {
        Self::with_key(rand::rng().random())
    }
}

impl AnswerLinks {
    pub fn with_key(key: [u8; 32]) -> Self {
        AnswerLinks {
            key,
            answered: Mutex::new(HashMap::new()),
        }
    }

    /// The links of a question's choices, under `base` (the dashboard's address).
    pub fn links(
        &self,
        base: &str,
        session_id: &str,
        blocked_since: DateTime<Utc>,
        question: &str,
        choices: &[Choice],
        now: DateTime<Utc>,
    ) -> Vec<AnswerLink> {
        let base = base.trim_end_matches('/');
        choices
            .iter()
            .map(|choice| {
                let claim = Claim {
                    session_id: session_id.to_string(),
                    blocked_since_ms: blocked_since.timestamp_millis(),
                    question: question_hash(question),
                    label: choice.label.clone(),
                    keys: choice.keys.clone(),
                    expires: (now + LINK_LIFETIME).timestamp(),
                };
                AnswerLink {
                    label: choice.label.clone(),
                    url: format!(
                        "{base}/answer/{}/{}",
                        path_segment(session_id),
                        self.sign(&claim)
                    ),
                }
            })
            .collect()
    }

    /// The token of `claim`: its JSON and its MAC, each base64url.
    pub fn sign(&self, claim: &Claim) -> String {
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claim).unwrap_or_default());
        let mac = URL_SAFE_NO_PAD.encode(hmac_sha256(&self.key, payload.as_bytes()));
        format!("{payload}.{mac}")
    }

    /// The claim of a token given for `session_id`, if this hub signed it and it has not
    /// expired at `now`.
    pub fn verify(
        &self,
        session_id: &str,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<Claim, Refusal> {
        let (payload, mac) = token.split_once('.').ok_or(Refusal::Invalid)?;
        let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| Refusal::Invalid)?;
        if !same(&mac, &hmac_sha256(&self.key, payload.as_bytes())) {
            return Err(Refusal::Invalid);
        }
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| Refusal::Invalid)?;
        let claim: Claim = serde_json::from_slice(&json).map_err(|_| Refusal::Invalid)?;
        if claim.session_id != session_id {
            return Err(Refusal::Invalid);
        }
        if now.timestamp() >= claim.expires {
            return Err(Refusal::Expired);
        }
        Ok(claim)
    }

    /// Marks the claim's question answered; refused if it was already. Forgets the answered
    /// questions whose links have all expired.
    pub fn take(&self, claim: &Claim, now: DateTime<Utc>) -> Result<(), Refusal> {
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        answered.retain(|_, expires| *expires > now.timestamp());
        let question = question_of(claim);
        if answered.contains_key(&question) {
            return Err(Refusal::Used);
        }
        // Every link of this question expires by then (they are made together).
        let until = claim.expires.max(now.timestamp()) + LINK_LIFETIME.num_seconds();
        answered.insert(question, until);
        Ok(())
    }

    /// Whether the claim's question was answered through a link already.
    pub fn answered(&self, claim: &Claim) -> bool {
        let answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        answered.contains_key(&question_of(claim))
    }

    /// Gives a question back (its answer could not be sent).
    pub fn give_back(&self, claim: &Claim) {
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        answered.remove(&question_of(claim));
    }
}

/// The question a claim answers: its session and the moment it became blocked.
fn question_of(claim: &Claim) -> (String, i64) {
    (claim.session_id.clone(), claim.blocked_since_ms)
}

/// The hash a claim names a question's words by (hex, 128 bits of SHA-256).
pub fn question_hash(question: &str) -> String {
    Sha256::digest(question.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A session id as one path segment.
fn path_segment(id: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.');
    percent_encoding::utf8_percent_encode(id, SET).to_string()
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key` (at most a block long).
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut padded = [0u8; BLOCK];
    padded[..key.len()].copy_from_slice(key);
    let ipad: Vec<u8> = padded.iter().map(|b| b ^ 0x36).collect();
    let opad: Vec<u8> = padded.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new()
        .chain_update(&ipad)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(&opad)
        .chain_update(inner)
        .finalize()
        .into()
}

/// Equality in time that does not depend on where the bytes differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).unwrap()
    }

    fn yes_no() -> Vec<Choice> {
        ["Yes", "No"]
            .iter()
            .enumerate()
            .map(|(n, l)| Choice {
                label: l.to_string(),
                keys: vec![(n + 1).to_string()],
            })
            .collect()
    }

    fn token_of(url: &str) -> (&str, &str) {
        let rest = url.split("/answer/").nth(1).unwrap();
        rest.split_once('/').unwrap()
    }

    #[test]
    fn hmac_matches_rfc_4231_test_case_1() {
        // RFC 4231 case 1's key is 20 bytes of 0x0b; HMAC pads a key with zeros to a block,
        // so the same 20 bytes followed by 12 zeros are the same key.
        let mut key = [0u8; 32];
        key[..20].copy_from_slice(&[0x0b; 20]);
        let mac = hmac_sha256(&key, b"Hi There");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    #[test]
    fn a_link_verifies_once_per_question_until_it_expires() {
        let links = AnswerLinks::with_key([7; 32]);
        let made = links.links(
            "http://h:1/",
            "pty_1",
            at(1000),
            "Proceed?",
            &yes_no(),
            at(2000),
        );
        assert_eq!(made.len(), 2);
        assert!(
            made[0].url.starts_with("http://h:1/answer/pty_1/"),
            "{}",
            made[0].url
        );
        let (session, token) = token_of(&made[0].url);
        assert_eq!(session, "pty_1");
        let claim = links.verify("pty_1", token, at(2001)).unwrap();
        assert_eq!(claim.label, "Yes");
        assert_eq!(claim.keys, ["1"]);
        assert_eq!(claim.question, question_hash("Proceed?"));
        assert!(!links.answered(&claim));
        assert_eq!(links.take(&claim, at(2001)), Ok(()));
        assert!(links.answered(&claim));
        assert_eq!(links.take(&claim, at(2002)), Err(Refusal::Used));
        // The other choice's link answers the same question: refused too.
        let other = links
            .verify("pty_1", token_of(&made[1].url).1, at(2003))
            .unwrap();
        assert_eq!(links.take(&other, at(2003)), Err(Refusal::Used));
        // Given back (nothing was sent), it answers again.
        links.give_back(&claim);
        assert_eq!(links.take(&other, at(2004)), Ok(()));
        // 15 minutes on, refused as expired.
        assert_eq!(
            links.verify("pty_1", token, at(2000 + 15 * 60)),
            Err(Refusal::Expired)
        );
    }

    #[test]
    fn altered_foreign_or_misplaced_tokens_are_invalid() {
        let links = AnswerLinks::with_key([7; 32]);
        let made = links.links("http://h", "pty_1", at(1000), "Q?", &yes_no(), at(2000));
        let token = token_of(&made[0].url).1.to_string();
        // Another session's path.
        assert_eq!(
            links.verify("pty_2", &token, at(2001)),
            Err(Refusal::Invalid)
        );
        // The claim changed (the keys of "No" under "Yes"'s MAC).
        let (payload, mac) = token.split_once('.').unwrap();
        let mut claim: Claim =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        claim.keys = vec!["2".into()];
        let forged = format!(
            "{}.{mac}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claim).unwrap())
        );
        assert_eq!(
            links.verify("pty_1", &forged, at(2001)),
            Err(Refusal::Invalid)
        );
        // Another hub's key, a truncated token, garbage.
        let other = AnswerLinks::with_key([8; 32]);
        assert_eq!(
            other.verify("pty_1", &token, at(2001)),
            Err(Refusal::Invalid)
        );
        assert_eq!(
            links.verify("pty_1", &token[..token.len() - 2], at(2001)),
            Err(Refusal::Invalid)
        );
        for bad in ["", ".", "x.y", "%%%", "a.b.c"] {
            assert_eq!(links.verify("pty_1", bad, at(2001)), Err(Refusal::Invalid));
        }
    }
}
