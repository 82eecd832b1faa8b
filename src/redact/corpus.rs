//! A corpus of fake secrets, one or more per format the redactor knows, as they would appear
//! in terminal output. Shared by the unit tests and the integration tests (every output path is
//! checked against the same list). None of these is a real credential.

/// One sample: the format, a line of output holding the secret, and the secret itself (what
/// must not appear in redacted output).
pub struct Sample {
    pub kind: &'static str,
    pub line: String,
    pub secret: String,
}

fn s(kind: &'static str, line: String, secret: String) -> Sample {
    Sample { kind, line, secret }
}

fn rep(unit: &str, n: usize) -> String {
    unit.repeat(n)
}

/// The corpus (at least 30 formats).
pub fn samples() -> Vec<Sample> {
    let b62 = "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xYz";
    let hex = "0123456789abcdef";
    let mut v = Vec::new();
    let mut tok = |kind: &'static str, secret: String| {
        v.push(s(kind, format!("token: {secret} end"), secret));
    };
    tok("openai-key", format!("sk-{}", &rep(b62, 2)[..48]));
    tok(
        "openai-project-key",
        format!("sk-proj-{}", &rep(b62, 2)[..40]),
    );
    tok(
        "anthropic-key",
        format!("sk-ant-api03-{}", &rep(b62, 3)[..80]),
    );
    tok("github-classic-pat", format!("ghp_{}", &rep(b62, 2)[..36]));
    tok("github-oauth", format!("gho_{}", &rep(b62, 2)[..36]));
    tok("github-server", format!("ghs_{}", &rep(b62, 2)[..36]));
    tok(
        "github-user-to-server",
        format!("ghu_{}", &rep(b62, 2)[..36]),
    );
    tok("github-refresh", format!("ghr_{}", &rep(b62, 2)[..36]));
    tok(
        "github-fine-grained-pat",
        format!("github_pat_11ABCDEFG0{}", &rep(b62, 3)[..70]),
    );
    tok("gitlab-pat", format!("glpat-{}", &rep(b62, 1)[..20]));
    tok(
        "slack-bot",
        "xoxb-2468013579-9753102468642-AbCdEfGhIjKlMnOpQrStUvWx".into(),
    );
    tok(
        "slack-user",
        "xoxp-8642097531-1357924680-5792468013579-fedcba9876543210".into(),
    );
    tok("google-api-key", format!("AIza{}", &rep(b62, 2)[..35]));
    tok("google-oauth", format!("ya29.{}", &rep(b62, 2)[..50]));
    tok("aws-access-key-id", "AKIAIOSFODNN7EXAMPLE".into());
    tok("aws-sts-key-id", "ASIAY34FZKBOKMUTVV7A".into());
    tok(
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(),
    );
    tok("huggingface", format!("hf_{}", &rep(b62, 2)[..34]));
    tok("npm", format!("npm_{}", &rep(b62, 2)[..36]));
    tok(
        "pypi",
        format!("pypi-AgEIcHlwaS5vcmc{}", &rep(b62, 3)[..60]),
    );
    tok(
        "sendgrid",
        format!("SG.{}.{}", &rep(b62, 1)[..22], &rep(b62, 2)[..43]),
    );
    tok("digitalocean", format!("dop_v1_{}", rep(hex, 4)));
    tok("shopify", format!("shpat_{}", rep(hex, 2)));
    tok("stripe-live", format!("sk_live_{}", &rep(b62, 1)[..24]));
    tok(
        "stripe-restricted",
        format!("rk_test_{}", &rep(b62, 1)[..24]),
    );
    tok("mailgun", format!("key-{}", &rep(b62, 1)[..32]));
    let telegram = format!("AA{}", &rep(b62, 2)[..33]);
    v.push(s(
        "telegram-bot",
        format!("bot 918273645:{telegram} end"),
        telegram,
    ));
    let secret40 = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    v.push(s(
        "aws-secret-key",
        format!("aws_secret_access_key = {secret40}"),
        secret40.into(),
    ));
    v.push(s(
        "bearer",
        "Authorization: Bearer abc123DEF456ghi789JKL".into(),
        "abc123DEF456ghi789JKL".into(),
    ));
    v.push(s(
        "basic-auth",
        "Authorization: Basic dXNlcjpodW50ZXIyLXNlY3JldA==".into(),
        "dXNlcjpodW50ZXIyLXNlY3JldA==".into(),
    ));
    v.push(s(
        "export-token",
        "export MY_SERVICE_TOKEN=tOkEnVaLuE-42-xyz".into(),
        "tOkEnVaLuE-42-xyz".into(),
    ));
    v.push(s(
        "export-key",
        "export DEPLOY_KEY='q1w2e3r4t5y6'".into(),
        "q1w2e3r4t5y6".into(),
    ));
    v.push(s(
        "anthropic-env",
        "ANTHROPIC_API_KEY=not-a-prefixed-value-9f8e7d".into(),
        "not-a-prefixed-value-9f8e7d".into(),
    ));
    v.push(s(
        "openai-env",
        "OPENAI_API_KEY=another-plain-value-1a2b3c".into(),
        "another-plain-value-1a2b3c".into(),
    ));
    v.push(s(
        "url-credentials",
        "git clone https://deploy:s3cr3tP4ss@example.com/repo.git".into(),
        "s3cr3tP4ss".into(),
    ));
    v.push(s(
        "postgres-url",
        "DATABASE=postgres://app:pgPassw0rd!@db:5432/app".into(),
        "pgPassw0rd!".into(),
    ));
    v.push(s(
        "azure-connection-string",
        "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;"
            .into(),
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==".into(),
    ));
    v.push(s(
        "json-password",
        r#"{"user":"bob","password":"correct horse battery"}"#.into(),
        "correct horse battery".into(),
    ));
    v.push(s(
        "slack-webhook",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX".into(),
        "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX".into(),
    ));
    let pem_body = "MIIEowIBAAKCAQEA7bq9Xfakefakefakefakefake0123456789abcdefABCDEF";
    v.push(s(
        "pem-rsa-private-key",
        format!("-----BEGIN RSA PRIVATE KEY-----\r\n{pem_body}\r\n-----END RSA PRIVATE KEY-----"),
        pem_body.into(),
    ));
    let pem_body2 = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz";
    v.push(s(
        "pem-openssh-private-key",
        format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\r\n{pem_body2}\r\n-----END OPENSSH PRIVATE KEY-----"
        ),
        pem_body2.into(),
    ));
    v
}
