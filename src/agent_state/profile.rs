//! Agent profiles: TOML files (`policies/agents/*.toml`) that say how to read one kind of agent's
//! screen: rules on the bottom rows or on the window title (regex -> state, by priority), what is
//! volatile (masked out of the activity fingerprint), the key that interrupts it, and the stability fallback.
//! Validated at load: a bad file is reported as `file:line:col: message (key `k`)`. The shipped
//! profiles are compiled in; files in the directory add to them or replace them by name.
//! A profile answers to its `names` (`claude` and `claude-code` for Claude Code); a `cli_type`
//! that names no profile gets the default one, and [`ProfileSet::resolve`] says so.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use super::status_file::StatusFileSpec;
use super::{AgentStateError, State};
use crate::activity::Masks;
use crate::toml_file::TomlFileError;
use crate::usage::UsageSpec;

/// The profiles shipped with the hub (also in `policies/agents/`).
const BUILTIN: &[(&str, &str)] = &[
    (
        "shell.toml",
        include_str!("../../policies/agents/shell.toml"),
    ),
    (
        "claude-code.toml",
        include_str!("../../policies/agents/claude-code.toml"),
    ),
    (
        "codex.toml",
        include_str!("../../policies/agents/codex.toml"),
    ),
    (
        "aider.toml",
        include_str!("../../policies/agents/aider.toml"),
    ),
    (
        "gemini-cli.toml",
        include_str!("../../policies/agents/gemini-cli.toml"),
    ),
    (
        "opencode.toml",
        include_str!("../../policies/agents/opencode.toml"),
    ),
];

/// The profile used when a session names no known `cli_type`.
pub const DEFAULT_PROFILE: &str = "shell";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: Option<String>,
    /// The `cli_type` values this profile answers to (besides its name).
    #[serde(default)]
    names: Vec<String>,
    /// The CLI versions whose recorded screens the rules were checked against.
    #[serde(default)]
    checked_with: Vec<String>,
    #[serde(default = "default_bottom_rows")]
    bottom_rows: u16,
    #[serde(default = "default_stable_after_ms")]
    stable_after_ms: u64,
    #[serde(default = "default_stable_state")]
    stable_state: State,
    #[serde(default = "default_interrupt_key")]
    interrupt_key: Spanned<String>,
    /// What a policy's `on_limit = "wait"` sends once a usage or rate limit is over.
    #[serde(default = "default_continue_line")]
    continue_line: String,
    #[serde(default)]
    volatile: Vec<Spanned<String>>,
    #[serde(default = "yes")]
    mask_status_row: bool,
    #[serde(default = "default_input_hold_ms")]
    input_hold_ms: u64,
    #[serde(default = "default_dwell_ms")]
    dwell_ms: u64,
    #[serde(default = "default_stuck_after_s")]
    stuck_after_s: u64,
    /// Which reading wins when rules on the screen disagree.
    #[serde(default)]
    order: Order,
    /// How long a working indicator may stand unchanged above a prompt and still count.
    #[serde(default = "default_grace_ms")]
    grace_ms: u64,
    #[serde(default)]
    rules: Vec<RuleFile>,
    /// How the CLI resumes its last conversation.
    resume: Option<ResumeFile>,
    /// What the CLI's own hooks say about its state.
    signals: Option<SignalsFile>,
    /// Where the CLI records what its model calls used.
    usage: Option<UsageSpec>,
}

/// `[signals]` of a profile.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalsFile {
    #[serde(default = "default_signal_grace_ms")]
    grace_ms: u64,
    /// `EVENT` or `EVENT/DETAIL` (a hook's matcher, such as `Notification/permission_prompt`)
    /// to the state it means.
    #[serde(default)]
    hooks: BTreeMap<String, State>,
    /// Whose settings the hub writes these hooks into at an agent's start.
    install: Option<Install>,
    /// The CLI's own status files.
    status_file: Option<StatusFileSpec>,
}

/// Whose settings the hub writes a profile's hooks into at an agent's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Install {
    /// `~/.claude/settings.json` ([`crate::agents::hooks`]).
    ClaudeCode,
    /// `~/.gemini/settings.json`, in Claude Code's hook format.
    GeminiCli,
    /// `notify` in `~/.codex/config.toml` (one program, run at each turn's end).
    Codex,
}

/// What a CLI's own hooks mean ([`Profile::signals`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signals {
    /// How long the screen may read otherwise before its reading wins over a signal.
    pub grace: Duration,
    /// `EVENT` or `EVENT/DETAIL` to a state.
    pub hooks: BTreeMap<String, State>,
    /// Whose settings the hub writes the hooks into at an agent's start.
    pub install: Option<Install>,
    /// Where the CLI writes its status, and what each status means.
    pub status_file: Option<StatusFileSpec>,
}

impl Signals {
    /// The state a hook event means: `EVENT/DETAIL` first, then `EVENT`; `None` when the
    /// profile gives it none. Returns the key that matched, as the signal's name.
    pub fn hook(&self, event: &str, detail: Option<&str>) -> Option<(String, State)> {
        let full = detail.map(|d| format!("{event}/{d}"));
        full.into_iter()
            .chain(std::iter::once(event.to_string()))
            .find_map(|key| self.hooks.get(&key).map(|s| (key, *s)))
    }
}

/// `[resume]` of a profile.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResumeFile {
    args: Vec<Spanned<String>>,
    #[serde(default)]
    when: Vec<Spanned<String>>,
}

/// How a CLI resumes its last conversation: the arguments that do it, inserted after the
/// program, and the files whose presence means there is one to resume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeSpec {
    /// `--continue` (Claude Code), `resume --last` (Codex).
    pub args: Vec<String>,
    /// Globs (`*` within one path segment) relative to the agent's home, where
    /// `{workdir_slug}` is the agent's workdir with each non-alphanumeric character as `-`;
    /// empty: whenever the agent has run before.
    pub when: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    name: Option<String>,
    state: State,
    /// A regex on each row (or on the title); or else `detect`.
    pattern: Option<Spanned<String>>,
    /// A shape recognised by the hub instead of a pattern: `choices` (a menu with one
    /// highlighted choice, or a yes/no prompt, at the bottom: [`super::menu`]).
    detect: Option<Spanned<String>>,
    #[serde(default)]
    on: Source,
    #[serde(default)]
    priority: i32,
    rows: Option<u16>,
    /// A regex: the rule reads the last block of text (rows up to a blank one) above the
    /// lowest row it matches, instead of the bottom rows.
    above: Option<Spanned<String>>,
    /// The rule applies only once what it reads has been still this long.
    #[serde(default)]
    stable_ms: u64,
    /// The rule applies only while what it reads changed less than this long ago.
    changing_ms: Option<u64>,
}

/// Which screen reading wins when rules disagree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// What is lowest on the screen (drawn last) wins; equals by priority.
    #[default]
    Position,
    /// The highest priority wins wherever it is (Claude Code draws its prompt under its
    /// spinner).
    Priority,
}

/// How a rule recognises its lines.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// A regex on each row, or on the title.
    Pattern(Regex),
    /// A question by its shape ([`super::menu`]).
    Choices,
}

/// What a rule reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The bottom non-empty rows of the screen.
    #[default]
    Screen,
    /// The window title the program last set (OSC 0 or 2): some CLIs show that they are
    /// working only there.
    Title,
}

fn default_bottom_rows() -> u16 {
    6
}
fn default_stable_after_ms() -> u64 {
    2000
}
fn default_stable_state() -> State {
    State::Unknown
}
fn default_continue_line() -> String {
    "continue".into()
}

fn default_interrupt_key() -> Spanned<String> {
    Spanned::new(0..0, "C-c".into())
}
fn yes() -> bool {
    true
}
fn default_input_hold_ms() -> u64 {
    5000
}
fn default_dwell_ms() -> u64 {
    300
}
fn default_stuck_after_s() -> u64 {
    300
}
fn default_grace_ms() -> u64 {
    3000
}
fn default_signal_grace_ms() -> u64 {
    5000
}

/// One classification rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// `name` from the file, else `STATE#INDEX`.
    pub name: String,
    pub state: State,
    pub matcher: Matcher,
    /// The screen's bottom rows or the title.
    pub on: Source,
    pub priority: i32,
    /// How many of the bottom non-empty rows the rule looks at (screen rules).
    pub rows: u16,
    /// Instead of the bottom rows, the last block of text above the lowest row this matches
    /// (Codex's last message above its composer, not one further up in its transcript).
    pub above: Option<Regex>,
    /// The rule applies only once what it reads has been still this long (for a screen that
    /// looks the same at rest and while text streams in above it).
    pub stable: Duration,
    /// The rule applies only while what it reads changed less than this long ago (a spinner
    /// left in the title by a program that died is not work).
    pub changing: Option<Duration>,
}

/// A loaded, validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    /// The `cli_type` values it answers to (always including `name`).
    pub names: Vec<String>,
    /// The CLI versions its rules were checked against (`claude-code 2.1.330`).
    pub checked_with: Vec<String>,
    pub bottom_rows: u16,
    /// No rule matched and the screen has not changed for this long: `stable_state`.
    pub stable_after: Duration,
    pub stable_state: State,
    pub interrupt_key: String,
    pub interrupt_bytes: Vec<u8>,
    /// Sent (as a prompt) once a usage or rate limit is over, under `on_limit = "wait"`.
    pub continue_line: String,
    pub masks: Masks,
    /// After input is sent, `working` holds this long unless the screen changes.
    pub input_hold: Duration,
    /// A new state must be seen this long before it is reported (no flapping).
    pub dwell: Duration,
    /// `working` with no meaningful change for this long is reported as stuck.
    pub stuck_after: Duration,
    /// Which screen reading wins when rules disagree.
    pub order: Order,
    /// A working indicator unchanged this long, with a prompt drawn below it, is not work.
    pub grace: Duration,
    /// Ordered by priority, highest first (file order among equals).
    pub rules: Vec<Rule>,
    /// How the CLI resumes its conversation (`None`: it does not).
    pub resume: Option<ResumeSpec>,
    /// What its own hooks mean (empty: the screen alone).
    pub signals: Signals,
    /// Where it records what its model calls used (`None`: the hub cannot tell).
    pub usage: Option<UsageSpec>,
}

/// A profile chosen for a `cli_type`, and why.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub profile: Arc<Profile>,
    /// One sentence for people: which profile and why.
    pub reason: String,
    /// The `cli_type` when it named no profile (the default was used instead).
    pub unknown_cli_type: Option<String>,
}

/// All profiles by name.
#[derive(Debug, Clone)]
pub struct ProfileSet {
    profiles: BTreeMap<String, Arc<Profile>>,
}

impl Default for ProfileSet {
    fn default() -> Self {
        let mut profiles = BTreeMap::new();
        for (file, text) in BUILTIN {
            if let Ok(p) = parse(text, file, file.trim_end_matches(".toml")) {
                profiles.insert(p.name.clone(), Arc::new(p));
            }
        }
        ProfileSet { profiles }
    }
}

impl ProfileSet {
    /// The shipped profiles plus every `*.toml` in `dir` (when it exists).
    pub fn load(dir: Option<&Path>) -> Result<Self, AgentStateError> {
        let mut set = ProfileSet::default();
        let Some(dir) = dir.filter(|d| d.is_dir()) else {
            return Ok(set);
        };
        for path in crate::toml_file::toml_files(dir)? {
            let text = crate::toml_file::read(&path)?;
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let p = parse(&text, &path.display().to_string(), &stem)?;
            set.profiles.insert(p.name.clone(), Arc::new(p));
        }
        Ok(set)
    }

    /// The profile for a session's `cli_type`, else the default one.
    pub fn for_cli_type(&self, cli_type: Option<&str>) -> Arc<Profile> {
        self.resolve(cli_type).profile
    }

    /// The profile for a session's `cli_type` and why it was chosen: by its name, by one of
    /// its `names`, or the default because the `cli_type` is missing or unknown.
    pub fn resolve(&self, cli_type: Option<&str>) -> Resolved {
        let answering = |c: &str| {
            self.profiles.get(c).cloned().or_else(|| {
                self.profiles
                    .values()
                    .find(|p| p.names.iter().any(|n| n == c))
                    .cloned()
            })
        };
        let default = || {
            self.profiles
                .get(DEFAULT_PROFILE)
                .cloned()
                .unwrap_or_else(|| Arc::new(Profile::fallback()))
        };
        match cli_type {
            None => Resolved {
                profile: default(),
                reason: format!("no cli_type: the default profile `{DEFAULT_PROFILE}`"),
                unknown_cli_type: None,
            },
            Some(c) => match answering(c) {
                Some(profile) => Resolved {
                    reason: format!("cli_type `{c}` selects profile `{}`", profile.name),
                    profile,
                    unknown_cli_type: None,
                },
                None => Resolved {
                    profile: default(),
                    reason: format!(
                        "cli_type `{c}` names no profile (known: {}); using the default \
                         profile `{DEFAULT_PROFILE}`",
                        self.known_names().join(", ")
                    ),
                    unknown_cli_type: Some(c.to_string()),
                },
            },
        }
    }

    /// Every `cli_type` value some profile answers to.
    pub fn known_names(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .profiles
            .values()
            .flat_map(|p| p.names.iter().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// The profiles themselves.
    pub fn profiles(&self) -> impl Iterator<Item = &Arc<Profile>> {
        self.profiles.values()
    }

    /// Profile names.
    pub fn names(&self) -> Vec<String> {
        self.profiles.keys().cloned().collect()
    }
}

impl Profile {
    /// Whether a rule reads the window title.
    pub fn reads_title(&self) -> bool {
        self.rules.iter().any(|r| r.on == Source::Title)
    }

    /// A profile with no rules (used only if the shipped ones failed to parse).
    pub fn fallback() -> Self {
        ProfileSet::default()
            .profiles
            .get(DEFAULT_PROFILE)
            .map(|p| (**p).clone())
            .unwrap_or(Profile {
                name: DEFAULT_PROFILE.into(),
                names: vec![DEFAULT_PROFILE.into()],
                checked_with: Vec::new(),
                bottom_rows: default_bottom_rows(),
                stable_after: Duration::from_millis(default_stable_after_ms()),
                stable_state: State::Unknown,
                interrupt_key: "C-c".into(),
                interrupt_bytes: vec![3],
                continue_line: default_continue_line(),
                masks: Masks::default(),
                input_hold: Duration::from_millis(default_input_hold_ms()),
                dwell: Duration::from_millis(default_dwell_ms()),
                stuck_after: Duration::from_secs(default_stuck_after_s()),
                order: Order::default(),
                grace: Duration::from_millis(default_grace_ms()),
                rules: Vec::new(),
                resume: None,
                signals: Signals::default(),
                usage: None,
            })
    }
}

/// Parses and validates one profile; `origin` names the file in errors, `stem` is the default name.
pub fn parse(text: &str, origin: &str, stem: &str) -> Result<Profile, AgentStateError> {
    let at = |span: std::ops::Range<usize>, message: String| {
        TomlFileError::invalid(text, origin, Some(span), message)
    };
    let file: ProfileFile =
        toml::from_str(text).map_err(|e| TomlFileError::syntax(text, origin, e))?;
    let regex = |s: &Spanned<String>| {
        Regex::new(s.get_ref()).map_err(|e| at(s.span(), format!("invalid regex: {e}")))
    };
    let mut rules = Vec::new();
    for (i, r) in file.rules.iter().enumerate() {
        let matcher = match (&r.pattern, &r.detect) {
            (Some(p), None) => Matcher::Pattern(regex(p)?),
            (None, Some(d)) if d.get_ref() == "choices" && r.on == Source::Screen => {
                Matcher::Choices
            }
            (None, Some(d)) => {
                return Err(at(
                    d.span(),
                    format!(
                        "detect: '{}' is not a shape the hub knows (choices, on the screen)",
                        d.get_ref()
                    ),
                )
                .into())
            }
            _ => {
                let m = format!("rules[{i}]: give a pattern or detect = \"choices\", one of them");
                return Err(TomlFileError::invalid(text, origin, None, m).into());
            }
        };
        rules.push(Rule {
            name: r
                .name
                .clone()
                .unwrap_or_else(|| format!("{}#{i}", r.state.as_str())),
            state: r.state,
            matcher,
            on: r.on,
            priority: r.priority,
            rows: r.rows.unwrap_or(file.bottom_rows).max(1),
            above: r.above.as_ref().map(regex).transpose()?,
            stable: Duration::from_millis(r.stable_ms),
            changing: r.changing_ms.map(Duration::from_millis),
        });
    }
    rules.sort_by_key(|r| std::cmp::Reverse(r.priority));
    let volatile = file.volatile.iter().map(regex).collect::<Result<_, _>>()?;
    let key = file.interrupt_key.get_ref().clone();
    let interrupt_bytes = crate::term::keys_bytes(std::slice::from_ref(&key))
        .map_err(|e| at(file.interrupt_key.span(), format!("interrupt_key: {e}")))?;
    if file.bottom_rows == 0 {
        return Err(AgentStateError::BottomRows {
            origin: origin.to_string(),
        });
    }
    let resume = match file.resume {
        Some(r) => Some(resume_spec(r).map_err(|(span, m)| at(span, m))?),
        None => None,
    };
    let name = file.name.unwrap_or_else(|| stem.to_string());
    let mut names = vec![name.clone()];
    names.extend(file.names.into_iter().filter(|n| *n != name));
    Ok(Profile {
        name,
        names,
        checked_with: file.checked_with,
        bottom_rows: file.bottom_rows,
        stable_after: Duration::from_millis(file.stable_after_ms),
        stable_state: file.stable_state,
        interrupt_key: key,
        interrupt_bytes,
        continue_line: file.continue_line,
        masks: Masks {
            volatile,
            status_row: file.mask_status_row,
        },
        input_hold: Duration::from_millis(file.input_hold_ms),
        dwell: Duration::from_millis(file.dwell_ms),
        stuck_after: Duration::from_secs(file.stuck_after_s),
        order: file.order,
        grace: Duration::from_millis(file.grace_ms),
        rules,
        resume,
        signals: file.signals.map_or_else(Signals::default, |s| Signals {
            grace: Duration::from_millis(s.grace_ms),
            install: s.install,
            hooks: s.hooks,
            status_file: s.status_file,
        }),
        usage: file.usage,
    })
}

/// Checks `[resume]`: arguments that are not empty, globs that stay inside the home.
fn resume_spec(file: ResumeFile) -> Result<ResumeSpec, (std::ops::Range<usize>, String)> {
    if let Some(a) = file.args.iter().find(|a| a.get_ref().is_empty()) {
        return Err((
            a.span(),
            "resume.args: an argument must not be empty".into(),
        ));
    }
    if file.args.is_empty() {
        return Err((0..0, "resume.args: give the arguments that resume".into()));
    }
    for w in &file.when {
        let g = w.get_ref();
        if g.is_empty() || g.starts_with('/') || g.split('/').any(|s| s == ".." || s.is_empty()) {
            return Err((
                w.span(),
                format!("resume.when: '{g}' must be a relative path inside the home (no '..')"),
            ));
        }
    }
    Ok(ResumeSpec {
        args: file.args.into_iter().map(Spanned::into_inner).collect(),
        when: file.when.into_iter().map(Spanned::into_inner).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_load() {
        let set = ProfileSet::default();
        assert_eq!(
            set.names(),
            [
                "aider",
                "claude-code",
                "codex",
                "gemini-cli",
                "opencode",
                "shell"
            ]
        );
        assert_eq!(set.for_cli_type(Some("nope")).name, "shell");
        assert_eq!(set.for_cli_type(Some("codex")).name, "codex");
    }

    #[test]
    fn profiles_answer_to_their_names_and_unknown_cli_types_are_reported() {
        let set = ProfileSet::default();
        for c in ["claude", "claude-code"] {
            let r = set.resolve(Some(c));
            assert_eq!(r.profile.name, "claude-code", "{c}");
            assert_eq!(r.unknown_cli_type, None);
            assert!(r.reason.contains(&format!("`{c}`")), "{}", r.reason);
        }
        let r = set.resolve(Some("cluade"));
        assert_eq!(r.profile.name, "shell");
        assert_eq!(r.unknown_cli_type.as_deref(), Some("cluade"));
        assert!(
            r.reason.contains("names no profile") && r.reason.contains("claude-code"),
            "{}",
            r.reason
        );
        assert_eq!(set.resolve(None).unknown_cli_type, None);
        assert!(set.known_names().contains(&"claude".to_string()));
        let claude = set.for_cli_type(Some("claude"));
        assert!(claude
            .checked_with
            .iter()
            .any(|v| v.starts_with("claude-code ")));
    }

    #[test]
    fn bad_profiles_name_file_line_and_key() {
        let table = [
            (
                "[[rules]]\nstate = \"idle\"\npattern = \"(\"\n",
                "p.toml:3:",
                "pattern",
            ),
            ("bottom_rows = \"x\"\n", "p.toml:1:", "bottom_rows"),
            (
                "[[rules]]\nstate = \"sleepy\"\npattern = \"x\"\n",
                "p.toml:2:",
                "state",
            ),
            ("volatile = [\"[\"]\n", "p.toml:1:", "volatile"),
            (
                "interrupt_key = \"Nope-Key\"\n",
                "p.toml:1:",
                "interrupt_key",
            ),
            ("colour = 1\n", "p.toml:1:", "colour"),
            (
                "[[rules]]\nstate = \"idle\"\npattern = \"x\"\non = \"tilte\"\n",
                "p.toml:4:",
                "on",
            ),
            (
                "[[rules]]\nstate = \"idle\"\npattern = \"x\"\nchanging_ms = -1\n",
                "p.toml:4:",
                "changing_ms",
            ),
            (
                "[[rules]]\nstate = \"blocked\"\ndetect = \"menus\"\n",
                "p.toml:3:",
                "detect",
            ),
            ("order = \"lowest\"\n", "p.toml:1:", "order"),
            ("[signals]\ninstall = \"vim\"\n", "p.toml:2:", "install"),
        ];
        for (text, at, key) in table {
            let e = parse(text, "p.toml", "p").unwrap_err().to_string();
            assert!(e.starts_with(at) && e.contains(key), "{text}: {e}");
        }
    }
}
