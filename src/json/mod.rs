//! The JSON conventions every layer's wire types share: how bytes travel (`encoding`, base64),
//! integers that JSON Schema lets be whole floats ([`whole`]), requests that refuse unknown
//! fields next to a flattened struct ([`NoOtherFields`]), and the body of every error reply.

mod error_body;
mod strict;
pub mod whole;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use error_body::ErrorBody;
pub use strict::NoOtherFields;

/// How `read` returns bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// Text; an incomplete UTF-8 sequence at the end is left for the next read, invalid bytes
    /// become U+FFFD.
    #[default]
    Utf8,
    /// Exact bytes, base64-encoded.
    Base64,
}

/// Bytes as standard base64 (the `encoding: base64` form).
pub fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A text that is not standard base64.
#[derive(Debug, thiserror::Error)]
#[error("invalid base64: {0}")]
pub struct InvalidBase64(#[source] base64::DecodeError);

/// The bytes of a standard base64 text.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, InvalidBase64> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(InvalidBase64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_refuses_bad_input() {
        for raw in ["", "f", "fo", "foobar", "naïve ✓\x1b[0m"] {
            let enc = base64_encode(raw.as_bytes());
            assert_eq!(base64_decode(&enc).unwrap(), raw.as_bytes());
        }
        assert_eq!(base64_decode("Zm8=").unwrap(), b"fo");
        // What the old hand-written decoder silently accepted (dropping or guessing bytes).
        for bad in ["Zm9v!", "Zg=", "Zm 9v", "Zm9vY", "é==="] {
            let err = base64_decode(bad).unwrap_err().to_string();
            assert!(err.starts_with("invalid base64"), "{bad}: {err}");
        }
    }
}
