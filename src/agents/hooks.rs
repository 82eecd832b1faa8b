//! The CLI's own hooks, written into an agent's CLI config dir at each start (in its kept home,
//! or where its environment and mounts put it: [`super::config_dir`]), so the CLI tells the
//! hub its state itself (`agent-hub hook EVENT [MATCHER]`, see [`crate::agent_state`]'s
//! signals). Written for the profiles that say how (`[signals] install = "claude-code"`,
//! `"gemini-cli"` or `"codex"`), merged into the user's own settings: the user's hooks and
//! every other setting are kept, the hub's own entries (recognised by their command) are
//! replaced, so a start after a start changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::agent_state::profile::Install;
use crate::agent_state::State;

/// The file in the CLI's config dir ([`super::config_dir`]) that `install` writes: Claude
/// Code's and Gemini CLI's `settings.json`, Codex's `config.toml`.
pub fn settings_file(install: Install) -> &'static str {
    match install {
        Install::ClaudeCode | Install::GeminiCli => "settings.json",
        Install::Codex => "config.toml",
    }
}

/// `existing` settings of `install` (empty: none yet) with the hub's hooks for `hooks`.
/// Errors when the file cannot be merged (it is then left alone).
pub fn merge(
    install: Install,
    existing: &str,
    binary: &str,
    hooks: &BTreeMap<String, State>,
) -> Result<String, String> {
    match install {
        // Claude Code's hook timeout is in seconds, Gemini CLI's in milliseconds (its
        // docs/hooks/reference.md, "Hook configuration"); the format is otherwise the same.
        Install::ClaudeCode => merge_json_hooks(existing, binary, hooks, 5),
        Install::GeminiCli => merge_json_hooks(existing, binary, hooks, 5000),
        Install::Codex => merge_codex_config(existing, binary),
    }
}

/// `existing` JSON settings in Claude Code's hook format (Gemini CLI shares it: `hooks` maps
/// an event to a list of `{matcher, hooks: [{type, command, timeout}]}`) with a hook per key
/// of `hooks` (`EVENT` or `EVENT/MATCHER`) running `binary hook EVENT [MATCHER]`, each given
/// `timeout` in the CLI's unit. Errors when `existing` is not a JSON object, or its `hooks` is
/// not one.
pub fn merge_json_hooks(
    existing: &str,
    binary: &str,
    hooks: &BTreeMap<String, State>,
    timeout: u64,
) -> Result<String, String> {
    let mut settings: Value = if existing.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(existing).map_err(|e| format!("not JSON: {e}"))?
    };
    let all = settings
        .as_object_mut()
        .ok_or("not a JSON object")?
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("`hooks` is not a JSON object")?;
    let ours = format!("{binary} hook ");
    // The hub's entries of an earlier start go, whatever events they were for.
    for entries in all.values_mut() {
        if let Some(list) = entries.as_array_mut() {
            list.retain(|entry| !is_ours(entry, &ours));
        }
    }
    all.retain(|_, entries| entries.as_array().is_none_or(|l| !l.is_empty()));
    for key in hooks.keys() {
        let (event, matcher) = match key.split_once('/') {
            Some((event, matcher)) => (event, Some(matcher)),
            None => (key.as_str(), None),
        };
        let command = match matcher {
            Some(m) => format!("{ours}{event} {m}"),
            None => format!("{ours}{event}"),
        };
        let hook = json!({"type": "command", "command": command, "timeout": timeout});
        let mut entry = json!({ "hooks": [hook] });
        if let Some(m) = matcher {
            entry["matcher"] = json!(m);
        }
        let list = all.entry(event).or_insert_with(|| json!([]));
        match list.as_array_mut() {
            Some(list) => list.push(entry),
            None => return Err(format!("`hooks.{event}` is not a list")),
        }
    }
    Ok(serde_json::to_string_pretty(&settings).unwrap_or_default())
}

/// Codex's `notify` program, run at the end of each turn with a JSON argument appended
/// (`agent-hub hook --notify PAYLOAD` names the event by the payload's `type`).
fn codex_notify(binary: &str) -> Vec<String> {
    vec![
        binary.to_string(),
        "hook".to_string(),
        "--notify".to_string(),
    ]
}

/// `existing` Codex config (TOML; empty: none yet) with the hub's `notify` as its top-level
/// `notify`, written as one line at the top (top-level keys must come before any table) so
/// that the rest of the file, comments and all, stays as the user wrote it; the hub's line of
/// an earlier start is replaced. Codex has a single `notify` program: when the user has one of
/// their own, it is kept and this errors (the hub's turn signal is then missing, and the
/// screen reads the agent alone), rather than replacing theirs or chaining to it.
pub fn merge_codex_config(existing: &str, binary: &str) -> Result<String, String> {
    let table: toml::Table = existing.parse().map_err(|e| format!("not TOML: {e}"))?;
    let ours = toml::Value::from(codex_notify(binary));
    let line = format!("notify = {ours}");
    match table.get("notify") {
        Some(v) if *v != ours && is_hub_notify(v) => {
            return Err(format!("`notify` names another hub binary: {v}"))
        }
        Some(v) if *v != ours => return Err(format!("has the user's own `notify` (kept): {v}")),
        _ => {}
    }
    // The hub's line of an earlier start goes; every line ends with a newline, so the second
    // start writes what the first did.
    let body: String = existing
        .lines()
        .filter(|l| l.trim() != line)
        .map(|l| format!("{l}\n"))
        .collect();
    let merged = format!("{line}\n{body}");
    let check: toml::Table = merged
        .parse()
        .map_err(|e| format!("merged not TOML: {e}"))?;
    (check.get("notify") == Some(&ours))
        .then_some(merged)
        .ok_or_else(|| "the hub's `notify` is not a line of its own".to_string())
}

/// Whether a `notify` value runs some `agent-hub hook` (the hub's, from another path).
fn is_hub_notify(v: &toml::Value) -> bool {
    let args: Vec<&str> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str())
        .collect();
    args.len() >= 2 && args[0].ends_with("agent-hub") && args[1] == "hook"
}

/// Whether a hook entry is the hub's: every command in it starts with `binary hook `.
fn is_ours(entry: &Value, ours: &str) -> bool {
    let commands: Vec<&str> = entry["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["command"].as_str())
        .collect();
    !commands.is_empty() && commands.iter().all(|c| c.starts_with(ours))
}

/// Claude Code's state file, which may name MCP servers: `~/.claude.json`, or
/// `.claude.json` in its config dir.
const CLAUDE_STATE: &str = ".claude.json";

/// Whether Claude Code with its config dir at `config` (and its home at `home`, when the hub
/// sees it) runs the hub's MCP server over stdio (`agent-hub mcp`, in the `mcpServers` of its
/// user scope or of a project).
pub fn claude_runs_hub_mcp(home: Option<&Path>, config: &Path) -> bool {
    home.into_iter()
        .chain([config])
        .map(|dir| dir.join(CLAUDE_STATE))
        .any(|f| std::fs::read_to_string(f).is_ok_and(|text| names_hub_mcp(&text)))
}

/// Whether a Claude Code state file names an MCP server whose command line runs
/// `agent-hub mcp` (directly, or through a wrapper such as `sh -c`).
fn names_hub_mcp(text: &str) -> bool {
    let Ok(state) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let projects = state["projects"]
        .as_object()
        .into_iter()
        .flat_map(|p| p.values());
    std::iter::once(&state)
        .chain(projects)
        .filter_map(|scope| scope["mcpServers"].as_object())
        .flat_map(|servers| servers.values())
        .any(|server| {
            let args = server["args"].as_array().into_iter().flatten();
            let words: Vec<&str> = std::iter::once(&server["command"])
                .chain(args)
                .filter_map(Value::as_str)
                .collect();
            words.join(" ").contains("agent-hub mcp")
        })
}

/// Writes `install`'s settings, merged, into `config` (the CLI's config dir on this machine),
/// owned like the directory that holds them (the agent's user, whoever the hub runs as). A
/// file that cannot be merged is left alone, with an error saying why.
pub fn install(
    install: Install,
    config: &Path,
    binary: &str,
    hooks: &BTreeMap<String, State>,
) -> Result<(), String> {
    let file = config.join(settings_file(install));
    let existing = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    };
    let merged = merge(install, &existing, binary, hooks)
        .map_err(|e| format!("{}: {e}; left alone", file.display()))?;
    if merged == existing {
        return Ok(());
    }
    // The config dir's owner, or its parent's (the home) when it is new.
    let like = match config.exists() {
        true => config,
        false => config.parent().unwrap_or(config),
    };
    let like = like.to_path_buf();
    std::fs::create_dir_all(config)
        .map_err(|e| format!("cannot make {}: {e}", config.display()))?;
    std::fs::write(&file, merged).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    own_like(&like, &[config, &file]);
    Ok(())
}

/// Gives `paths` the owner of `like` (the hub may run as root; the agent's user must own its
/// settings).
fn own_like(like: &Path, paths: &[&Path]) {
    let Ok(meta) = std::fs::metadata(like) else {
        return;
    };
    let owner = crate::platform::owner(&meta);
    for path in paths {
        let _ = crate::platform::chown(path, owner.uid, owner.gid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks() -> BTreeMap<String, State> {
        BTreeMap::from([
            ("Stop".to_string(), State::Idle),
            ("Notification/permission_prompt".to_string(), State::Blocked),
        ])
    }

    const BIN: &str = "/usr/local/bin/agent-hub";

    #[test]
    fn the_users_settings_and_hooks_are_kept_and_ours_replaced_on_every_start() {
        let user = r#"{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}"#;
        let once = merge_json_hooks(user, BIN, &hooks(), 5).unwrap();
        let v: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(v["model"], "opus");
        let stop = v["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop.len(), 2, "{v}");
        assert_eq!(stop[0]["hooks"][0]["command"], "notify-send done");
        assert_eq!(stop[1]["hooks"][0]["command"], format!("{BIN} hook Stop"));
        let note = &v["hooks"]["Notification"][0];
        assert_eq!(note["matcher"], "permission_prompt");
        assert_eq!(
            note["hooks"][0]["command"],
            format!("{BIN} hook Notification permission_prompt")
        );
        // Again: the same file.
        assert_eq!(merge_json_hooks(&once, BIN, &hooks(), 5).unwrap(), once);
        // A profile that no longer maps an event: its entry goes, the user's stays.
        let fewer = BTreeMap::from([("Stop".to_string(), State::Idle)]);
        let v: Value =
            serde_json::from_str(&merge_json_hooks(&once, BIN, &fewer, 5).unwrap()).unwrap();
        assert!(v["hooks"].get("Notification").is_none(), "{v}");
        assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn settings_that_are_not_an_object_are_left_alone() {
        assert!(merge_json_hooks("", BIN, &hooks(), 5).is_ok());
        for bad in ["[1]", "{", r#"{"hooks": 3}"#, r#"{"hooks": {"Stop": 1}}"#] {
            assert!(merge_json_hooks(bad, BIN, &hooks(), 5).is_err(), "{bad}");
        }
    }

    /// Installs `which` into a fresh home twice (the second changes nothing), then over a
    /// broken file (left alone, with an error); returns the first file written.
    fn installs_once_and_leaves_a_broken_file_alone(which: Install, broken: &str) -> String {
        let home = tempfile::tempdir().unwrap();
        let config = home.path().join(".cli");
        install(which, &config, BIN, &hooks()).unwrap();
        let file = config.join(settings_file(which));
        let first = std::fs::read_to_string(&file).unwrap();
        install(which, &config, BIN, &hooks()).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
        std::fs::write(&file, broken).unwrap();
        let e = install(which, &config, BIN, &hooks()).unwrap_err();
        assert!(e.contains("left alone"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), broken);
        first
    }

    #[test]
    fn the_hubs_mcp_server_is_found_in_any_scope_however_it_is_started() {
        let user = json!({"mcpServers": {"hub": {"command": "/usr/local/bin/agent-hub", "args": ["mcp"]}}});
        let project = json!({"projects": {"/w": {"mcpServers": {"k": {"type": "stdio",
            "command": "sh", "args": ["-c", "sleep 1; exec agent-hub mcp"]}}}}});
        for named in [user, project] {
            assert!(names_hub_mcp(&named.to_string()), "{named}");
        }
        let others = json!({"mcpServers": {"fs": {"command": "npx", "args": ["fs-server"]},
            "web": {"type": "http", "url": "http://127.0.0.1:8100/mcp"}},
            "projects": {"/w": {"allowedTools": []}}});
        for not in [others.to_string(), "{".into(), "[]".into(), String::new()] {
            assert!(!names_hub_mcp(&not), "{not}");
        }
        let home = tempfile::tempdir().unwrap();
        let config = home.path().join(".claude");
        assert!(!claude_runs_hub_mcp(Some(home.path()), &config));
        std::fs::create_dir(&config).unwrap();
        let state = json!({"mcpServers": {"hub": {"command": "agent-hub", "args": ["mcp"]}}});
        std::fs::write(config.join(".claude.json"), state.to_string()).unwrap();
        assert!(claude_runs_hub_mcp(Some(home.path()), &config));
        assert!(claude_runs_hub_mcp(None, &config), "a config dir elsewhere");
        let elsewhere = tempfile::tempdir().unwrap();
        assert!(!claude_runs_hub_mcp(None, elsewhere.path()));
        std::fs::write(home.path().join(".claude.json"), state.to_string()).unwrap();
        assert!(claude_runs_hub_mcp(Some(home.path()), elsewhere.path()));
    }

    #[test]
    fn install_writes_once_and_keeps_what_is_there() {
        let claude = installs_once_and_leaves_a_broken_file_alone(Install::ClaudeCode, "{ broken");
        assert!(claude.contains("permission_prompt"));
        assert!(claude.contains(r#""timeout": 5,"#), "{claude}");
        let gemini = installs_once_and_leaves_a_broken_file_alone(Install::GeminiCli, "[]");
        assert!(gemini.contains(r#""timeout": 5000"#), "{gemini}");
        let codex = installs_once_and_leaves_a_broken_file_alone(Install::Codex, "notify = [");
        assert_eq!(
            codex,
            format!("notify = [\"{BIN}\", \"hook\", \"--notify\"]\n")
        );
    }

    #[test]
    fn gemini_settings_keep_the_users_hooks_and_settings() {
        let user = r#"{"security": {"auth": {"selectedType": "gemini-api-key"}},
            "hooks": {"AfterAgent": [{"matcher": "*", "hooks": [{"type": "command", "command": "say done"}]}]}}"#;
        let gemini = BTreeMap::from([
            ("AfterAgent".to_string(), State::Idle),
            ("Notification".to_string(), State::Blocked),
        ]);
        let once = merge(Install::GeminiCli, user, BIN, &gemini).unwrap();
        let v: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(v["security"]["auth"]["selectedType"], "gemini-api-key");
        let after = v["hooks"]["AfterAgent"].as_array().unwrap();
        assert_eq!(after.len(), 2, "{v}");
        assert_eq!(after[0]["hooks"][0]["command"], "say done");
        let ours = &after[1]["hooks"][0];
        assert_eq!(ours["command"], format!("{BIN} hook AfterAgent"));
        assert_eq!(ours["timeout"], 5000);
        assert_eq!(
            merge(Install::GeminiCli, &once, BIN, &gemini).unwrap(),
            once
        );
    }

    #[test]
    fn codex_config_keeps_the_users_text_and_their_own_notify() {
        let user = "# mine\nmodel = \"o3\"\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        let once = merge_codex_config(user, BIN).unwrap();
        let ours = format!("notify = [\"{BIN}\", \"hook\", \"--notify\"]\n");
        assert_eq!(once, format!("{ours}{user}"));
        assert_eq!(merge_codex_config(&once, BIN).unwrap(), once);
        // A last line with no newline gets one, once.
        let once = merge_codex_config("model = \"o3\"", BIN).unwrap();
        assert_eq!(once, format!("{ours}model = \"o3\"\n"));
        assert_eq!(merge_codex_config(&once, BIN).unwrap(), once);
        // Their own notify program is kept: the hub's is not written, and the caller is told.
        let theirs = "notify = [\"notify-send\", \"done\"]\nmodel = \"o3\"\n";
        let e = merge_codex_config(theirs, BIN).unwrap_err();
        assert!(e.contains("own `notify` (kept)"), "{e}");
        let other_hub = "notify = [\"/opt/agent-hub\", \"hook\", \"--notify\"]\n";
        assert!(merge_codex_config(other_hub, BIN).is_err());
        for bad in ["notify = [", "[x]\n[x]\n", "a = 1\na = 2\n"] {
            assert!(merge_codex_config(bad, BIN).is_err(), "{bad}");
        }
    }
}
