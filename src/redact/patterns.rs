//! The built-in secret patterns. Each has a name (shown in the marker's place in tests and
//! docs), a regex run on visible text, and, when secrets of that kind begin with a fixed
//! prefix, that prefix: a stream holds back a trailing word that is (or could become) such a
//! prefix until it can tell. When a regex has a group named `s`, only that group is the secret
//! (`Bearer <s>`, `KEY=<s>`); otherwise the whole match is.

/// One built-in pattern.
pub struct PatternDef {
    pub name: &'static str,
    pub regex: &'static str,
    pub prefixes: &'static [&'static str],
}

const fn p(
    name: &'static str,
    regex: &'static str,
    prefixes: &'static [&'static str],
) -> PatternDef {
    PatternDef {
        name,
        regex,
        prefixes,
    }
}

/// Characters that may continue a token-like secret.
pub const TOKEN_CHARS: &str = "A-Za-z0-9_\\-";

/// Text after which the next word is a secret value (`Bearer <token>`, `secret_key = <value>`):
/// a stream holds such a word until it is complete.
pub const VALUE_CONTEXT: &str = r#"(?i)(\bbearer|\bbasic|(?:^|[^a-z])(key|token|secret|password|passwd|credentials?)["']?[ \t]*[:=])[ \t]*$"#;

/// Shapes of a trailing word that is the first part of a secret with no fixed prefix (a
/// Telegram bot id and colon, a URL with `user:` but no `@` yet): a stream holds such a word.
pub const HOLD_SHAPES: &[&str] = &[r"^[0-9]{8,10}:", r"://[^\s/@]*:[^\s/@]*$"];

/// The built-in patterns, most specific first.
pub const PATTERNS: &[PatternDef] = &[
    p(
        "pem-private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)",
        &["-----BEGIN"],
    ),
    p("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{16,}", &["sk-ant-"]),
    // The hub's own per-agent credentials (see `crate::credentials`).
    p("agent-hub-credential", r"\bahk_[0-9a-f]{64}\b", &["ahk_"]),
    p(
        "stripe-key",
        r"\b[rs]k_(live|test)_[A-Za-z0-9]{16,}",
        &["sk_", "rk_"],
    ),
    p("openai-key", r"\bsk-[A-Za-z0-9_\-]{16,}", &["sk-"]),
    p(
        "github-pat",
        r"github_pat_[A-Za-z0-9_]{20,}",
        &["github_pat_"],
    ),
    p(
        "github-token",
        r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        &["ghp_", "gho_", "ghs_", "ghu_", "ghr_"],
    ),
    p("gitlab-token", r"\bglpat-[A-Za-z0-9_\-]{20,}", &["glpat-"]),
    p(
        "slack-token",
        r"\bxox[abposre]-[A-Za-z0-9\-]{10,}",
        &[
            "xoxb-", "xoxp-", "xoxa-", "xoxo-", "xoxs-", "xoxr-", "xoxe-",
        ],
    ),
    p(
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+",
        &[],
    ),
    p("google-api-key", r"\bAIza[0-9A-Za-z_\-]{30,}", &["AIza"]),
    p(
        "google-oauth-token",
        r"\bya29\.[0-9A-Za-z_\-]{20,}",
        &["ya29."],
    ),
    p(
        "aws-access-key-id",
        r"\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
        &[
            "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
        ],
    ),
    p(
        "aws-secret-key",
        r#"(?i)(aws_secret_access_key|aws_secret_key|secret_access_key|secretaccesskey)["']?\s*[:=]\s*["']?(?P<s>[A-Za-z0-9/+=]{40})"#,
        &[],
    ),
    p(
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        &["eyJ"],
    ),
    p("huggingface-token", r"\bhf_[A-Za-z0-9]{30,}", &["hf_"]),
    p("npm-token", r"\bnpm_[A-Za-z0-9]{30,}", &["npm_"]),
    p("pypi-token", r"\bpypi-[A-Za-z0-9_\-]{40,}", &["pypi-"]),
    p(
        "sendgrid-key",
        r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
        &["SG."],
    ),
    p(
        "digitalocean-token",
        r"\bdo[opr]_v1_[a-f0-9]{40,}",
        &["dop_v1_", "doo_v1_", "dor_v1_"],
    ),
    p(
        "shopify-token",
        r"\bshp(at|ss|ca|pa)_[a-fA-F0-9]{32}",
        &["shpat_", "shpss_", "shpca_", "shppa_"],
    ),
    p("mailgun-key", r"\bkey-[0-9a-zA-Z]{32}\b", &["key-"]),
    p(
        "telegram-bot-token",
        r"\b[0-9]{8,10}:(?P<s>AA[0-9A-Za-z_\-]{33})",
        &[],
    ),
    p(
        "azure-account-key",
        r"(?i)AccountKey=(?P<s>[A-Za-z0-9+/=]+)",
        &[],
    ),
    p(
        "url-credentials",
        r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:(?P<s>[^\s@/]+)@",
        &[],
    ),
    p(
        "basic-auth",
        r"(?i)authorization:[ \t]*basic[ \t]+(?P<s>[A-Za-z0-9+/=]+)",
        &[],
    ),
    p(
        "bearer-token",
        r"(?i)\bbearer[ \t]+(?P<s>[A-Za-z0-9._~+/=\-]{8,})",
        &[],
    ),
    p(
        "export-secret",
        r#"(?i)\bexport[ \t]+[A-Z0-9_]*(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)[A-Z0-9_]*=(?P<s>"[^"\r\n]*"?|'[^'\r\n]*'?|[^\s]+)"#,
        &[],
    ),
    p(
        "secret-assignment",
        r#"\b[A-Za-z0-9_]*(API_KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY|PRIVATE_KEY)[A-Za-z0-9_]*=(?P<s>"[^"\r\n]*"?|'[^'\r\n]*'?|[^\s"']+)"#,
        &[],
    ),
    p(
        "json-secret",
        r#"(?i)"(password|passwd|secret|api_key|apikey|token|access_token|refresh_token|client_secret)"\s*:\s*"(?P<s>[^"]+)"#,
        &[],
    ),
];
