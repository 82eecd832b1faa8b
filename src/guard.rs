//! The command guard: one check every input that can run a command passes before it reaches a
//! terminal (send_line, talk, send_line_to_agent, keys that spell a line, WebSocket input
//! that ends a line, and task command lines). The session's input operations call it with the
//! caller's [`crate::actor::Actor`] (see `session::write`), so no caller can skip it. Named patterns, case-insensitive and
//! whitespace-tolerant; `[guard]` in `hub.toml` adds patterns, disables them by name, or
//! allows them for a role.
//!
//! This is a guardrail against mistakes (a leader agent typing `rm -rf /` into the wrong
//! shell), not a security boundary: anyone who can type into a shell can spell a command in a
//! way no pattern foresees.

use std::borrow::Cow;
use std::collections::BTreeMap;

use regex::RegexSet;
use serde::Deserialize;

use crate::actor::Role;
use crate::error::{HubError, HubResult};

/// The default patterns: (name, regex). Each regex is compiled with `(?im)`. The system-damage
/// words (`shutdown`, `halt`, `init 0`) count only where a command starts (line start, after
/// `;`, `&`, `|`, `(`, a backquote, `sudo`, `exec`, `nohup`, `doas`), so `echo shutdown` passes.
pub const DEFAULT_PATTERNS: &[(&str, &str)] = &[
    (
        "rm-rf-root",
        r"\brm\s+(?:-\S+\s+)*(?:-[a-z]*r[a-z]*f[a-z]*|-[a-z]*f[a-z]*r[a-z]*|(?:--recursive|-r)\s+(?:-\S+\s+)*(?:--force|-f)|(?:--force|-f)\s+(?:-\S+\s+)*(?:--recursive|-r))\s+(?:-\S+\s+)*(?:/|/\*|~|~/|~/\*|\$HOME|\$HOME/|\$HOME/\*|\$\{HOME\}/?)(?:\s|;|&|\||$)",
    ),
    (
        "del-recursive",
        r"\bdel\s+(?:\S+\s+)*/[sq]\s+(?:\S+\s+)*/[sq]\b",
    ),
    ("rmdir-recursive", r"\b(?:rmdir|rd)\s+(?:\S+\s+)*/s\b"),
    ("format-drive", r"\bformat(?:\.com)?\s+[a-z]:"),
    ("diskpart", r"\bdiskpart\b"),
    ("mkfs", r"\bmkfs(?:\.\w+)?\b"),
    ("dd-to-device", r"\bdd\s+(?:\S+\s+)*of\s*=\s*/dev/"),
    ("fdisk", r"\b[sc]?fdisk\b"),
    (
        "fork-bomb",
        r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:|%0\s*\|\s*%0",
    ),
    (
        "shutdown",
        r"(?:^|[;&|(`]|\bsudo\s+|\bexec\s+|\bnohup\s+|\bdoas\s+)\s*shutdown\b",
    ),
    (
        "halt",
        r"(?:^|[;&|(`]|\bsudo\s+|\bexec\s+|\bnohup\s+|\bdoas\s+)\s*(?:halt|poweroff)\b",
    ),
    (
        "init-0",
        r"(?:^|[;&|(`]|\bsudo\s+|\bexec\s+|\bnohup\s+|\bdoas\s+)\s*(?:tel)?init\s+0\b",
    ),
    (
        "ssh-keys",
        r"\b(?:cat|less|more|head|tail|base64|xxd|od|strings|cp|scp|tar|nl|tac)\s+(?:\S+\s+)*(?:~|\$HOME|\$\{HOME\}|/root|/home/[^/\s]+)/\.ssh/",
    ),
    (
        "aws-credentials",
        r"\b(?:cat|less|more|head|tail|base64|xxd|od|strings|cp|scp|tar|nl|tac)\s+(?:\S+\s+)*(?:~|\$HOME|\$\{HOME\}|/root|/home/[^/\s]+)/\.aws/",
    ),
    (
        "reg-query-sam",
        r"\breg(?:\.exe)?\s+(?:query|save|export)\s+(?:\S+\s+)*\S*\\(?:sam|security)\b",
    ),
    ("mimikatz", r"\bmimikatz\b|\bsekurlsa::"),
    (
        "reg-delete-hklm",
        r"\breg(?:\.exe)?\s+delete\s+(?:hklm|hkey_local_machine)\b",
    ),
    ("bcdedit", r"\bbcdedit\b"),
    ("vssadmin-delete", r"\bvssadmin(?:\.exe)?\s+delete\b"),
    ("wbadmin-delete", r"\bwbadmin(?:\.exe)?\s+delete\b"),
];

/// `[guard]` in `hub.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuardConfig {
    /// Off switch for the whole guard.
    pub enabled: bool,
    /// Names of default patterns to switch off.
    pub disable: Vec<String>,
    /// Extra patterns.
    pub patterns: Vec<PatternConfig>,
    /// Pattern names a role may use anyway (`admin = ["shutdown"]`); a higher role may too.
    pub allow: BTreeMap<Role, Vec<String>>,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            enabled: true,
            disable: Vec::new(),
            patterns: Vec::new(),
            allow: BTreeMap::new(),
        }
    }
}

/// An extra pattern.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternConfig {
    pub name: String,
    /// A regex, matched case-insensitively, `^`/`$` at line boundaries.
    pub regex: String,
}

/// A refused input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The name of the pattern that matched.
    pub pattern: String,
}

/// A `[guard]` that does not compile; the text names the bad pattern.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// `disable` names a pattern that does not exist.
    #[error("guard.disable: no pattern named '{name}'")]
    UnknownDisabled { name: String },
    /// One pattern is not a valid regex.
    #[error("guard pattern '{name}': {source}")]
    Pattern {
        name: String,
        #[source]
        source: regex::Error,
    },
    /// The patterns fail only when compiled together (too large, say).
    #[error("guard patterns, compiled together: {source}")]
    Patterns {
        #[source]
        source: regex::Error,
    },
}

/// The compiled guard.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The active patterns' names, in the order of `set`.
    names: Vec<String>,
    /// Every active pattern, searched for in one pass over the text: a line that matches none
    /// (almost every line) costs one search, not one per pattern.
    set: RegexSet,
    allow: BTreeMap<Role, Vec<String>>,
    /// Refusals by pattern (registered in the hub's metrics).
    refusals: Refusals,
}

/// The label of a refusal count: the pattern that refused the input.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct PatternLabel {
    pub pattern: String,
}

/// Inputs the guard refused, by pattern.
pub type Refusals = prometheus_client::metrics::family::Family<
    PatternLabel,
    prometheus_client::metrics::counter::Counter,
>;

impl Guard {
    /// Compiles the defaults and the config; an error names the bad pattern.
    pub fn new(config: &GuardConfig) -> Result<Self, GuardError> {
        let (mut names, mut regexes) = (Vec::new(), Vec::new());
        if config.enabled {
            for name in &config.disable {
                let known = DEFAULT_PATTERNS.iter().any(|(n, _)| n == name)
                    || config.patterns.iter().any(|p| &p.name == name);
                if !known {
                    return Err(GuardError::UnknownDisabled { name: name.clone() });
                }
            }
            let extra = config
                .patterns
                .iter()
                .map(|p| (p.name.as_str(), p.regex.as_str()));
            for (name, regex) in DEFAULT_PATTERNS.iter().copied().chain(extra) {
                if config.disable.iter().any(|d| d == name) {
                    continue;
                }
                names.push(name.to_string());
                regexes.push(format!("(?im){regex}"));
            }
        }
        let set = RegexSet::new(&regexes).map_err(|source| {
            // Name the pattern at fault, if one fails alone.
            match names
                .iter()
                .zip(&regexes)
                .find_map(|(name, regex)| regex::Regex::new(regex).err().map(|e| (name, e)))
            {
                Some((name, source)) => GuardError::Pattern {
                    name: name.clone(),
                    source,
                },
                None => GuardError::Patterns { source },
            }
        })?;
        Ok(Guard {
            names,
            set,
            allow: config.allow.clone(),
            refusals: Refusals::default(),
        })
    }

    /// The names of the active patterns.
    pub fn pattern_names(&self) -> Vec<&str> {
        self.names.iter().map(String::as_str).collect()
    }

    /// Checks text about to be typed by a caller with `role`.
    pub fn check(&self, text: &str, role: Role) -> Result<(), Blocked> {
        // Tabs, non-breaking spaces and runs of blanks are all "whitespace" to the patterns.
        let odd_blank = |c: char| c.is_whitespace() && c != '\n' && c != ' ';
        let text = if text.contains(odd_blank) {
            Cow::Owned(text.replace(odd_blank, " "))
        } else {
            Cow::Borrowed(text)
        };
        if !self.set.is_match(&text) {
            return Ok(());
        }
        // The first pattern, in order, that matches and the role may not use.
        match self
            .set
            .matches(&text)
            .iter()
            .map(|i| &self.names[i])
            .find(|name| !self.allowed(name, role))
        {
            Some(name) => Err(Blocked {
                pattern: name.clone(),
            }),
            None => Ok(()),
        }
    }

    /// [`Guard::check`] as the hub's error: `PTY_COMMAND_BLOCKED`, naming the pattern.
    pub fn check_input(&self, text: &str, role: Role) -> HubResult<()> {
        self.check(text, role).map_err(|b| {
            self.refusals
                .get_or_create(&PatternLabel {
                    pattern: b.pattern.clone(),
                })
                .inc();
            HubError::CommandBlocked { pattern: b.pattern }
        })
    }

    /// The count of refusals by pattern (for the hub's metrics).
    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }

    /// The guard for raw input (keys, WebSocket input): bytes that end a line are checked as
    /// the text they spell; keystrokes without a line end pass (the line is checked when a
    /// request carries it whole).
    pub fn check_typed(&self, bytes: &[u8], role: Role) -> HubResult<()> {
        if bytes.contains(&b'\r') || bytes.contains(&b'\n') {
            // As the line editor would see it: backspace and Ctrl-U applied.
            let mut line = Vec::new();
            edit_line(&mut line, bytes);
            self.check_input(&String::from_utf8_lossy(&line), role)?;
        }
        Ok(())
    }

    fn allowed(&self, name: &str, role: Role) -> bool {
        self.allow
            .iter()
            .any(|(r, names)| *r <= role && names.iter().any(|n| n == name))
    }
}

/// The most of a typed line the guard keeps (and so reports to the audit log).
pub const MAX_LINE_BYTES: usize = 10 * 1024;

/// Applies typed bytes to the line being typed: printable text is appended, backspace and
/// Ctrl-U edit, a line end inside stays as `\n` (the guard sees each line). Longer than 10 KB,
/// the oldest bytes are dropped.
pub fn edit_line(line: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'\r' | b'\n' => line.push(b'\n'),
            0x7f | 0x08 => {
                line.pop();
            }
            0x15 => line.clear(),
            b if b >= 0x20 || b == b'\t' => line.push(b),
            _ => {}
        }
    }
    let excess = line.len().saturating_sub(MAX_LINE_BYTES);
    line.drain(..excess);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard::new(&GuardConfig::default()).unwrap()
    }

    #[test]
    fn dangerous_commands_are_blocked_in_any_case_and_spacing() {
        let table = [
            ("rm -rf /", "rm-rf-root"),
            ("RM -RF /", "rm-rf-root"),
            ("rm   -rf    /  ", "rm-rf-root"),
            ("rm -fr /*", "rm-rf-root"),
            ("rm -r -f ~", "rm-rf-root"),
            ("rm --recursive --force /", "rm-rf-root"),
            ("sudo rm -rf --no-preserve-root /", "rm-rf-root"),
            ("cd /tmp && rm\t-Rf $HOME", "rm-rf-root"),
            ("del /s /q C:\\", "del-recursive"),
            ("DEL /Q /S *.*", "del-recursive"),
            ("rmdir /s /q C:\\Windows", "rmdir-recursive"),
            ("format c:", "format-drive"),
            ("FORMAT  D: /q", "format-drive"),
            ("diskpart", "diskpart"),
            ("mkfs.ext4 /dev/sda1", "mkfs"),
            ("MKFS -t xfs /dev/sdb", "mkfs"),
            ("dd if=/dev/zero of=/dev/sda bs=1M", "dd-to-device"),
            ("dd if=x.img  of = /dev/nvme0n1", "dd-to-device"),
            ("fdisk /dev/sda", "fdisk"),
            (":(){ :|:& };:", "fork-bomb"),
            (": ( ) { : | : & } ; :", "fork-bomb"),
            ("shutdown -h now", "shutdown"),
            ("sudo SHUTDOWN now", "shutdown"),
            ("ls; shutdown -r", "shutdown"),
            ("halt", "halt"),
            ("poweroff", "halt"),
            ("init 0", "init-0"),
            ("sudo  init   0", "init-0"),
            ("cat ~/.ssh/id_rsa", "ssh-keys"),
            ("CAT  ~/.ssh/id_ed25519", "ssh-keys"),
            ("cat $HOME/.ssh/id_rsa", "ssh-keys"),
            ("cat ~/.aws/credentials", "aws-credentials"),
            ("reg query HKLM\\SAM\\SAM", "reg-query-sam"),
            ("reg save hklm\\sam sam.hive", "reg-query-sam"),
            ("mimikatz.exe", "mimikatz"),
            ("Invoke-Mimikatz", "mimikatz"),
            ("reg delete HKLM\\Software\\X /f", "reg-delete-hklm"),
            ("bcdedit /set {default} recoveryenabled no", "bcdedit"),
            ("vssadmin delete shadows /all /quiet", "vssadmin-delete"),
            ("wbadmin delete catalog -quiet", "wbadmin-delete"),
        ];
        let g = guard();
        for (text, pattern) in table {
            assert_eq!(
                g.check(text, Role::Admin),
                Err(Blocked {
                    pattern: pattern.into()
                }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn look_alikes_pass() {
        let g = guard();
        for text in [
            "rm -rf ./build",
            "rm -rf /tmp/scratch",
            "rm -rf ~/project/target",
            "rm -f /tmp/x",
            "echo shutdown",
            "grep halt notes.txt",
            "git commit -m 'init 0.1'",
            "cat ~/.bashrc",
            "cat README.ssh.md",
            "ls ~/.ssh",
            "dd if=/dev/zero of=./disk.img",
            "reg query HKCU\\Software",
            "format_code.sh",
            "delete /s",
        ] {
            assert_eq!(g.check(text, Role::Operator), Ok(()), "{text:?}");
        }
    }

    #[test]
    fn config_adds_disables_and_allows_per_role() {
        let config: GuardConfig = toml::from_str(
            r#"
            disable = ["fdisk"]
            patterns = [{ name = "drop-db", regex = 'drop\s+database' }]
            [allow]
            admin = ["shutdown"]
            operator = ["halt"]
            "#,
        )
        .unwrap();
        let g = Guard::new(&config).unwrap();
        assert_eq!(g.check("fdisk /dev/sda", Role::Observer), Ok(()));
        assert!(g.check("DROP   DATABASE prod;", Role::Admin).is_err());
        assert!(g.check("shutdown now", Role::Operator).is_err());
        assert_eq!(g.check("shutdown now", Role::Admin), Ok(()));
        assert_eq!(g.check("halt", Role::Admin), Ok(()));
        assert!(g.check("halt", Role::Observer).is_err());

        // Several patterns match: the first the role may not use is named.
        assert_eq!(
            g.check("sudo shutdown; halt", Role::Admin),
            Ok(()),
            "admin may use both"
        );
        assert_eq!(
            g.check("sudo shutdown; halt", Role::Observer),
            Err(Blocked {
                pattern: "shutdown".into()
            }),
            "both refused: the first in order is named"
        );
        assert_eq!(
            g.check("sudo shutdown; drop database prod", Role::Admin),
            Err(Blocked {
                pattern: "drop-db".into()
            }),
            "shutdown is allowed to admins: the next match is named"
        );
        assert_eq!(
            g.check("fdisk /dev/sda; halt\u{a0}now", Role::Observer),
            Err(Blocked {
                pattern: "halt".into()
            }),
            "a disabled pattern is not searched for"
        );

        let bad: GuardConfig = toml::from_str("disable = [\"nope\"]").unwrap();
        assert!(Guard::new(&bad).unwrap_err().to_string().contains("nope"));
        let bad: GuardConfig =
            toml::from_str("patterns = [{ name = \"x\", regex = \"(\" }]").unwrap();
        assert!(Guard::new(&bad).unwrap_err().to_string().contains("'x'"));
        let off: GuardConfig = toml::from_str("enabled = false").unwrap();
        assert_eq!(
            Guard::new(&off).unwrap().check("rm -rf /", Role::Observer),
            Ok(())
        );
    }
}
