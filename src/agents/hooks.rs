//! The CLI's own hooks, written into an agent's kept home at each start, so the CLI tells the
//! hub its state itself (`agent-hub hook EVENT [MATCHER]`, see [`crate::agent_state`]'s
//! signals). Written for the profiles that say how (`[signals] install = "claude-code"`),
//! merged into the user's own settings: the user's hooks and every other setting are kept, the
//! hub's own entries (recognised by their command) are replaced, so a start after a start
//! changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::agent_state::State;

/// Claude Code's settings file under its config dir (`~/.claude`).
pub const CLAUDE_SETTINGS: &str = ".claude/settings.json";

/// `existing` Claude Code settings (empty: none yet) with a hook per key of `hooks` (`EVENT`
/// or `EVENT/MATCHER`) running `binary hook EVENT [MATCHER]`. Errors when `existing` is not a
/// JSON object, or its `hooks` is not one (the file is then left alone).
pub fn merge_claude_settings(
    existing: &str,
    binary: &str,
    hooks: &BTreeMap<String, State>,
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
        let mut entry = json!({"hooks": [{"type": "command", "command": command, "timeout": 5}]});
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

/// Claude Code's state files in a home that may name MCP servers: `~/.claude.json`, and
/// `$CLAUDE_CONFIG_DIR/.claude.json` with the config dir at `~/.claude`.
const CLAUDE_STATE: [&str; 2] = [".claude.json", ".claude/.claude.json"];

/// Whether Claude Code in `home` runs the hub's MCP server over stdio (`agent-hub mcp`, in the
/// `mcpServers` of its user scope or of a project).
pub fn claude_runs_hub_mcp(home: &Path) -> bool {
    CLAUDE_STATE
        .iter()
        .any(|f| std::fs::read_to_string(home.join(f)).is_ok_and(|text| names_hub_mcp(&text)))
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

/// Writes the merged settings into `home` (the agent's home on this machine), owned like the
/// home itself (the agent's user, whoever the hub runs as).
pub fn install_claude(
    home: &Path,
    binary: &str,
    hooks: &BTreeMap<String, State>,
) -> Result<(), String> {
    let file = home.join(CLAUDE_SETTINGS);
    let existing = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    };
    let merged = merge_claude_settings(&existing, binary, hooks)
        .map_err(|e| format!("{}: {e}; left alone", file.display()))?;
    if merged == existing {
        return Ok(());
    }
    let dir = file.parent().unwrap_or(home);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    std::fs::write(&file, merged).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    own_like(home, &[dir, &file]);
    Ok(())
}

/// Gives `paths` the owner of `like` (the hub may run as root; the agent's user must own its
/// settings).
fn own_like(like: &Path, paths: &[&Path]) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(like) else {
        return;
    };
    for path in paths {
        let _ = std::os::unix::fs::chown(path, Some(meta.uid()), Some(meta.gid()));
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
        let once = merge_claude_settings(user, BIN, &hooks()).unwrap();
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
        assert_eq!(merge_claude_settings(&once, BIN, &hooks()).unwrap(), once);
        // A profile that no longer maps an event: its entry goes, the user's stays.
        let fewer = BTreeMap::from([("Stop".to_string(), State::Idle)]);
        let v: Value =
            serde_json::from_str(&merge_claude_settings(&once, BIN, &fewer).unwrap()).unwrap();
        assert!(v["hooks"].get("Notification").is_none(), "{v}");
        assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn settings_that_are_not_an_object_are_left_alone() {
        assert!(merge_claude_settings("", BIN, &hooks()).is_ok());
        for bad in ["[1]", "{", r#"{"hooks": 3}"#, r#"{"hooks": {"Stop": 1}}"#] {
            assert!(merge_claude_settings(bad, BIN, &hooks()).is_err(), "{bad}");
        }
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
        assert!(!claude_runs_hub_mcp(home.path()));
        std::fs::create_dir(home.path().join(".claude")).unwrap();
        let state = json!({"mcpServers": {"hub": {"command": "agent-hub", "args": ["mcp"]}}});
        std::fs::write(home.path().join(".claude/.claude.json"), state.to_string()).unwrap();
        assert!(claude_runs_hub_mcp(home.path()));
    }

    #[test]
    fn install_writes_once_and_keeps_what_is_there() {
        let home = tempfile::tempdir().unwrap();
        install_claude(home.path(), BIN, &hooks()).unwrap();
        let file = home.path().join(CLAUDE_SETTINGS);
        let first = std::fs::read_to_string(&file).unwrap();
        assert!(first.contains("permission_prompt"));
        install_claude(home.path(), BIN, &hooks()).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
        std::fs::write(&file, "{ broken").unwrap();
        let e = install_claude(home.path(), BIN, &hooks()).unwrap_err();
        assert!(e.contains("left alone"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ broken");
    }
}
