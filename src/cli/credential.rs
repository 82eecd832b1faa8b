//! Which credential a client command presents, and where it looked: `--token` /
//! `AGENT_HUB_TOKEN`, else the file `AGENT_HUB_TOKEN_FILE` names (how container agents get
//! theirs), else the owner's token in the data dir the command is pointed at (`--data-dir` /
//! `AGENT_HUB_DATA_DIR`, else the default one). So on the hub's own machine, as the hub's
//! user, no set-up is needed; a refusal says where the command looked and what to do.

use std::path::{Path, PathBuf};

/// A credential (or none) and a sentence saying where it came from or where it was looked for.
#[derive(Debug, Clone)]
pub struct Found {
    pub token: Option<String>,
    pub source: String,
}

/// The credential a command presents, looked for in order.
pub fn find(explicit: Option<&str>, data_dir: Option<&Path>) -> Found {
    if let Some(token) = explicit.filter(|t| !t.trim().is_empty()) {
        return Found {
            token: Some(token.trim().to_string()),
            source: "the token was given by --token or AGENT_HUB_TOKEN".into(),
        };
    }
    let mut looked = vec!["--token and AGENT_HUB_TOKEN are not set".to_string()];
    match std::env::var_os("AGENT_HUB_TOKEN_FILE") {
        Some(path) => {
            let path = PathBuf::from(path);
            match crate::access::owner::read(&path) {
                Ok(Some(token)) => {
                    return Found {
                        token: Some(token),
                        source: format!(
                            "the token was read from {} (AGENT_HUB_TOKEN_FILE)",
                            path.display()
                        ),
                    }
                }
                Ok(None) => looked.push(format!(
                    "AGENT_HUB_TOKEN_FILE names {}, which is missing or empty",
                    path.display()
                )),
                Err(e) => looked.push(format!("AGENT_HUB_TOKEN_FILE: {e}")),
            }
        }
        None => looked.push("AGENT_HUB_TOKEN_FILE is not set".into()),
    }
    let (dir, how) = match data_dir {
        Some(dir) => (dir.to_path_buf(), "--data-dir or AGENT_HUB_DATA_DIR"),
        None => (crate::config::default_data_dir(), "the default data dir"),
    };
    let file = crate::access::owner::path(&dir);
    match crate::access::owner::read(&file) {
        Ok(Some(token)) => Found {
            token: Some(token),
            source: format!("the owner's token was read from {} ({how})", file.display()),
        },
        Ok(None) => {
            looked.push(format!("{} does not exist ({how})", file.display()));
            Found {
                token: None,
                source: nothing_found(&looked),
            }
        }
        Err(e) => {
            looked.push(format!("{e} ({how})"));
            Found {
                token: None,
                source: nothing_found(&looked),
            }
        }
    }
}

fn nothing_found(looked: &[String]) -> String {
    format!(
        "no credential was found: {}. Run this command as the user who runs the hub, point --data-dir (or AGENT_HUB_DATA_DIR) at the hub's data dir, or set AGENT_HUB_TOKEN to a token of [[tokens]] in hub.toml",
        looked.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_token_wins() {
        let found = find(Some(" tok "), None);
        assert_eq!(found.token.as_deref(), Some("tok"));
        assert!(found.source.contains("AGENT_HUB_TOKEN"), "{}", found.source);
    }

    #[test]
    fn the_data_dir_token_is_read_and_a_missing_one_is_explained() {
        // AGENT_HUB_TOKEN_FILE is not set in unit tests (the test runner's environment).
        if std::env::var_os("AGENT_HUB_TOKEN_FILE").is_some() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let missing = find(None, Some(dir.path()));
        assert_eq!(missing.token, None);
        let path = dir.path().join("admin-token").display().to_string();
        assert!(missing.source.contains(&path), "{}", missing.source);
        assert!(
            missing.source.contains("AGENT_HUB_TOKEN_FILE is not set"),
            "{}",
            missing.source
        );
        std::fs::write(dir.path().join("admin-token"), "aho_x\n").unwrap();
        let found = find(None, Some(dir.path()));
        assert_eq!(found.token.as_deref(), Some("aho_x"));
        assert!(found.source.contains(&path), "{}", found.source);
    }
}
