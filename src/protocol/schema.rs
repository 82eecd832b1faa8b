//! Schemas of request fields whose bounds `utoipa`'s attributes cannot spell (used with
//! `#[schema(schema_with = ...)]` / `#[param(schema_with = ...)]`), and the regular
//! expressions the OpenAPI document states bounds with. Each one says exactly what the hub
//! accepts; `api::openapi`'s tests hold them against the code that decides.

use utoipa::openapi::schema::{
    AdditionalProperties, AnyOfBuilder, ArrayBuilder, KnownFormat, Object, ObjectBuilder,
    SchemaFormat, Type,
};
use utoipa::openapi::{Array, RefOr, Schema};

/// Text without a NUL byte (no program argument, path or environment entry can hold one).
pub const NO_NUL: &str = r"^[^\u0000]*$";

/// The characters Rust's `str::trim` removes (Unicode `White_Space`), for patterns of values
/// the hub trims. Spelled out: `\s` means other sets in other regex dialects.
pub const WHITE_SPACE: &str =
    r"\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// Text with something besides white space, and no NUL byte (a task's `cmd` and `name`).
pub fn not_blank() -> String {
    format!(r"^[^\u0000]*[^{WHITE_SPACE}\u0000][^\u0000]*$")
}

/// The states `GET .../state?wait=` takes, comma-separated, blanks and empty items ignored,
/// at least one named.
pub fn wait_states() -> String {
    let ws = format!("[{WHITE_SPACE}]*");
    let name = "(?:idle|blocked|limited|working|exited|unknown|stuck)";
    format!("^(?:{ws},)*{ws}{name}{ws}(?:,{ws}(?:{name}{ws})?)*$")
}

/// Epoch milliseconds as `since`/`until` take them (an `i64`; up to 18 digits after any
/// leading zeros always fits).
pub const EPOCH_MS: &str = r"^[+-]?0*[0-9]{1,18}$";

/// Standard base64 with padding, and zero bits after the last byte (what the `base64` crate's
/// standard engine decodes).
pub const BASE64: &str =
    r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$";

fn string(pattern: impl Into<String>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
}

/// `keys`: at least one key name, each one [`crate::term::key_bytes`] takes.
pub fn key_names() -> Array {
    ArrayBuilder::new()
        .items(string(crate::term::keys::key_name_pattern()))
        .min_items(Some(1))
        .build()
}

/// A talk's command: one line (no CR or LF) with something besides white space.
pub fn talk_command() -> Object {
    string(format!(r"^[^\r\n]*[^{WHITE_SPACE}][^\r\n]*$"))
        .description(Some("One shell command line: no CR or LF, not blank."))
        .build()
}

/// A talk's sentinel: absent, `null`, or 1-64 characters of `A-Z`, `a-z`, `0-9` and `_`.
pub fn talk_sentinel() -> Object {
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            Type::String,
            Type::Null,
        ]))
        .pattern(Some(TALK_SENTINEL))
        .description(Some(
            "The nonce of the markers that frame the output (default: a random one).",
        ))
        .build()
}

/// The sentinel [`talk_sentinel`] takes.
pub const TALK_SENTINEL: &str = "^[A-Za-z0-9_]{1,64}$";

/// A bridge's base URL as `register` takes it: `http://` or `https://`, a host (a name of
/// dot-separated labels of letters, digits, `_` and inner `-`, the last one starting with a
/// letter or `_`; or an IPv4 address), an optional port (0-65535) and an optional path, query
/// or fragment of printable ASCII. Every such URL parses as one with a host; IPv6 hosts and
/// user info are not taken.
pub fn bridge_url() -> String {
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    let label = "[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*";
    let last = "[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*";
    let port =
        "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})";
    format!(
        r"^[Hh][Tt][Tt][Pp][Ss]?://(?:{octet}(?:\.{octet}){{3}}|(?:{label}\.)*{last})(?::{port})?(?:[/?#][!-~]*)?$"
    )
}

/// Whether `url` is a bridge URL [`bridge_url`] admits.
pub fn bridge_url_ok(url: &str) -> bool {
    static PATTERN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(&bridge_url()).expect("the bridge URL pattern")
    });
    PATTERN.is_match(url)
}

/// `args`: a list of texts without NUL bytes.
pub fn no_nul_list() -> Array {
    ArrayBuilder::new().items(string(NO_NUL)).build()
}

/// `env`: names neither empty nor holding `=` (or NUL), values without NUL.
pub fn env_vars() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(string(r"^[^=\u0000]+$")))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(Schema::Object(
            string(NO_NUL).build(),
        )))))
        .build()
}

/// `since` / `until` of the audit filters: RFC 3339, or epoch milliseconds.
pub fn time_filter() -> Schema {
    AnyOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))),
        )
        .item(string(EPOCH_MS))
        .description(Some("RFC 3339 time or milliseconds since the epoch"))
        .build()
        .into()
}

/// A task's `cmd`.
pub fn command() -> Object {
    string(not_blank()).build()
}

/// A task's `name`: absent, `null`, or not blank.
pub fn task_name() -> Object {
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            Type::String,
            Type::Null,
        ]))
        .pattern(Some(not_blank()))
        .description(Some("A name for listing (default: the command)."))
        .build()
}
