//! Whether the next start of an agent resumes its conversation, and with which arguments: a
//! pure decision ([`plan`]) over the agent's definition, its CLI profile's `[resume]`, and what
//! its home and its CLI's config dir ([`super::config_dir`]) hold on the hub's machine
//! ([`find_in`]).
//!
//! The arguments are inserted after the program (`claude --continue ...`,
//! `codex resume --last ...`): the hub passes them to the tmux session it starts, or writes them
//! to the agent's `start-args` file, which the shipped entrypoint reads at every start.

use std::path::{Path, PathBuf};

use super::config_dir::{self, ConfigDir, ConfigDirSpec};
use crate::agent_state::profile::ResumeSpec;
use crate::config::{AgentDef, Resume};

/// What the next start does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The arguments that resume, inserted after the program; empty: none to pass.
    pub args: Vec<String>,
    /// Files (globs, relative to the home or absolute in the container) of which one must
    /// exist for `args` to apply: the entrypoint looks again at start, as the agent's user (who
    /// can read its home when the hub cannot); empty: `args` apply as they are.
    pub when: Vec<String>,
    /// Whether the start resumes, as far as the hub can see.
    pub resumes: bool,
    /// Why, in a few words (`found .claude/projects/-workspace/<id>.jsonl`).
    pub reason: String,
}

impl Plan {
    /// A new conversation, for `reason`.
    pub fn fresh(reason: impl Into<String>) -> Self {
        Plan {
            args: Vec::new(),
            when: Vec::new(),
            resumes: false,
            reason: reason.into(),
        }
    }
}

/// What the hub knows of the agent's past when it decides.
#[derive(Debug, Clone, Copy)]
pub struct Past<'a> {
    /// The agent's home on the hub's machine, when it keeps one.
    pub home: Option<&'a Path>,
    /// Its CLI's config dir and where it is ([`config_dir::locate`]): the profile's globs
    /// under the CLI's default config dir are looked for there. `None`: the profile names none.
    pub config: Option<(&'a ConfigDirSpec, &'a ConfigDir)>,
    /// The hub started the agent before (with this data dir).
    pub started_before: bool,
    /// A fresh start was asked for.
    pub fresh: bool,
}

/// Decides the next start. `profile` is the `[resume]` of the agent's CLI profile.
pub fn plan(def: &AgentDef, profile: Option<&ResumeSpec>, past: Past) -> Plan {
    if past.fresh {
        return Plan::fresh("a fresh start was asked for");
    }
    let args = match (&def.resume, profile) {
        (Resume::Enabled(false), _) => return Plan::fresh("resume = false"),
        (Resume::Args(args), _) => args.clone(),
        (Resume::Enabled(true), Some(p)) => p.args.clone(),
        (Resume::Enabled(true), None) => {
            return Plan::fresh("its CLI profile does not say how to resume");
        }
    };
    let when = profile.map(|p| p.when.as_slice()).unwrap_or_default();
    if when.is_empty() {
        return match (past.home, past.started_before) {
            (None, _) => Plan::fresh(no_home(def)),
            (Some(_), true) => Plan {
                args,
                when: Vec::new(),
                resumes: true,
                reason: "the agent ran before".into(),
            },
            (Some(_), false) => Plan::fresh("the agent never ran"),
        };
    }
    let slug = def
        .workdir_or_default()
        .map_or_else(|| "*".to_string(), |w| workdir_slug(&w));
    let targets: Vec<Target> = when
        .iter()
        .map(|g| target(&g.replace("{workdir_slug}", &slug), def, past))
        .collect();
    decide(args, targets)
}

/// Why an agent without a home on the hub's machine starts anew.
fn no_home(def: &AgentDef) -> &'static str {
    let _ = def;
    "keep_home = false: the CLI's state is not kept"
}

/// One glob of a profile's `when`: as the entrypoint reads it (relative to the home, or
/// absolute in the container), and what the hub's own look for it found.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    glob: String,
    look: Look,
}

/// Where `glob` (relative to the home) is looked for: in the CLI's config dir when it is under
/// the CLI's default one, else in the home.
fn target(glob: &str, def: &AgentDef, past: Past) -> Target {
    let moved = past.config.and_then(|(spec, dir)| {
        let rest = config_dir::in_config_dir(glob, spec)?;
        Some((dir, rest))
    });
    let look = match (moved, past.home) {
        (Some((dir, rest)), _) => return in_config_dir(dir, rest),
        (None, Some(home)) => find_in(home, glob),
        (None, None) => Look::Unseen(no_home(def).to_string()),
    };
    Target {
        glob: glob.to_string(),
        look,
    }
}

/// `rest` looked for in the config dir `dir`; what it finds is named as the container names it.
fn in_config_dir(dir: &ConfigDir, rest: &str) -> Target {
    let in_container = Path::new(&dir.in_container);
    let look = match &dir.on_host {
        Ok(root) => match find_in(root, rest) {
            Look::Found(p) => Look::Found(in_container.join(p)),
            other => other,
        },
        Err(why) => Look::Unseen(why.clone()),
    };
    Target {
        glob: crate::platform::posix_path(&in_container.join(rest)),
        look,
    }
}

/// The plan from what the looks for `when` found. Nothing the hub can see: a new conversation,
/// and why.
fn decide(args: Vec<String>, targets: Vec<Target>) -> Plan {
    let found = targets.iter().find_map(|t| match &t.look {
        Look::Found(path) => Some(path),
        _ => None,
    });
    let unreadable = targets.iter().find_map(|t| match &t.look {
        Look::Unreadable(dir) => Some(dir),
        _ => None,
    });
    let unseen: Vec<&str> = targets
        .iter()
        .filter_map(|t| match &t.look {
            Look::Unseen(why) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    let when: Vec<String> = targets.iter().map(|t| t.glob.clone()).collect();
    let (resumes, reason) = match (found, unreadable) {
        (Some(path), _) => (true, format!("found {}", crate::platform::posix_path(path))),
        (None, Some(dir)) => (
            true,
            format!(
                "if {} exists (the hub cannot read {}; the agent's entrypoint looks at start)",
                when.join(" or "),
                dir.display()
            ),
        ),
        _ if unseen.len() == targets.len() => return Plan::fresh(unseen.join("; ")),
        (None, None) => (
            false,
            std::iter::once(format!("no conversation yet ({})", when.join(", ")))
                .chain(unseen.iter().map(|why| why.to_string()))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    Plan {
        args,
        when,
        resumes,
        reason,
    }
}

/// A working directory as Claude Code names its project directory: every character but ASCII
/// letters and digits becomes `-` (`/workspace` is `-workspace`).
pub fn workdir_slug(workdir: &str) -> String {
    workdir
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The program and its arguments with `extra` inserted after the program.
pub fn with_args(command: &[String], extra: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(command.len() + extra.len());
    out.extend(command.first().cloned());
    out.extend(extra.iter().cloned());
    out.extend(command.iter().skip(1).cloned());
    out
}

/// What a look for a glob in the home found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look {
    /// The first path it names, relative to the home.
    Found(PathBuf),
    /// Nothing.
    Absent,
    /// A directory on the way the hub may not read (the agent's user made it private).
    Unreadable(PathBuf),
    /// A place the hub cannot see at all, and why.
    Unseen(String),
}

/// Looks under `root` for what `glob` (relative, `/`-separated, `*` matching within one
/// segment) names. Symbolic links are not followed.
pub fn find_in(root: &Path, glob: &str) -> Look {
    let segments: Vec<&str> = glob.split('/').filter(|s| !s.is_empty()).collect();
    match walk(root, &segments) {
        Look::Found(p) => Look::Found(p.strip_prefix(root).unwrap_or(&p).to_path_buf()),
        other => other,
    }
}

fn walk(dir: &Path, segments: &[&str]) -> Look {
    let Some((first, rest)) = segments.split_first() else {
        return Look::Absent;
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Look::Unreadable(dir.to_path_buf());
        }
        Err(_) => return Look::Absent,
    };
    let mut names: Vec<_> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| wild_match(first, n)))
        .collect();
    names.sort_by_key(|e| e.file_name());
    let mut unreadable = None;
    for e in names {
        let Ok(kind) = e.file_type() else { continue };
        let look = match rest.is_empty() {
            true if kind.is_file() => Look::Found(e.path()),
            false if kind.is_dir() => walk(&e.path(), rest),
            _ => Look::Absent,
        };
        match look {
            Look::Found(_) => return look,
            Look::Unreadable(_) => unreadable = unreadable.or(Some(look)),
            Look::Absent | Look::Unseen(_) => {}
        }
    }
    unreadable.unwrap_or(Look::Absent)
}

/// `*` matches any run of characters (none included); everything else itself.
pub fn wild_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|i| rest.is_char_boundary(*i))
                .any(|i| wild_match(tail, &rest[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(extra: &str) -> AgentDef {
        let text = format!("id = \"a\"\nimage = \"i\"\nworkdir = \"/workspace\"\n{extra}");
        toml::from_str(&text).unwrap()
    }

    fn claude() -> ResumeSpec {
        ResumeSpec {
            args: vec!["--continue".into()],
            when: vec![".claude/projects/{workdir_slug}/*.jsonl".into()],
        }
    }

    fn past(home: &Path) -> Past<'_> {
        Past {
            home: Some(home),
            config: None,
            started_before: true,
            fresh: false,
        }
    }

    #[test]
    fn wildcards_match_within_a_segment() {
        assert!(wild_match("*.jsonl", "a.jsonl"));
        assert!(wild_match("rollout-*.jsonl", "rollout-2026-11-26.jsonl"));
        assert!(wild_match("*", ""));
        assert!(!wild_match("*.jsonl", "a.json"));
        assert!(!wild_match("rollout-*", "other"));
        assert!(wild_match("a*b*c", "aXXbYYc"));
        assert!(!wild_match("a*b*c", "aXXcYYb"));
        assert!(wild_match("é*", "éa"));
    }

    #[test]
    fn a_conversation_in_the_home_resumes_and_nothing_else_does() {
        let home = tempfile::tempdir().unwrap();
        let d = def("");
        let p = plan(&d, Some(&claude()), past(home.path()));
        assert!(!p.resumes, "{p:?}");
        assert!(p.reason.contains("no conversation yet"), "{p:?}");

        let project = home.path().join(".claude/projects/-workspace");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("notes.txt"), "").unwrap();
        assert!(!plan(&d, Some(&claude()), past(home.path())).resumes);
        std::fs::create_dir_all(project.join("dir.jsonl")).unwrap();
        assert!(
            !plan(&d, Some(&claude()), past(home.path())).resumes,
            "a directory is not a conversation"
        );
        let elsewhere = home.path().join(".claude/projects/-srv-other");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("1.jsonl"), "{}").unwrap();
        assert!(
            !plan(&d, Some(&claude()), past(home.path())).resumes,
            "a conversation of another directory is not continued"
        );

        std::fs::write(project.join("4b1f.jsonl"), "{}").unwrap();
        let p = plan(&d, Some(&claude()), past(home.path()));
        assert_eq!(p.args, ["--continue"]);
        assert_eq!(p.reason, "found .claude/projects/-workspace/4b1f.jsonl");

        let fresh = Past {
            fresh: true,
            ..past(home.path())
        };
        assert!(!plan(&d, Some(&claude()), fresh).resumes);
        assert!(!plan(&def("resume = false"), Some(&claude()), past(home.path())).resumes);
        let own = plan(
            &def("resume = [\"-c\"]"),
            Some(&claude()),
            past(home.path()),
        );
        assert_eq!(own.args, ["-c"]);
        assert!(!plan(&d, None, past(home.path())).resumes, "no profile");
        let no_home = Past {
            home: None,
            ..past(home.path())
        };
        assert!(!plan(&d, Some(&claude()), no_home).resumes);
    }

    #[test]
    fn own_arguments_without_files_to_look_for_resume_once_the_agent_ran() {
        let home = tempfile::tempdir().unwrap();
        let d = def("resume = [\"--resume-last\"]");
        let first = Past {
            started_before: false,
            ..past(home.path())
        };
        assert!(!plan(&d, None, first).resumes);
        assert_eq!(plan(&d, None, past(home.path())).args, ["--resume-last"]);
    }

    #[cfg(unix)] // a Unix symbolic link
    #[test]
    fn symbolic_links_are_not_followed() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(elsewhere.path().join("p")).unwrap();
        std::fs::write(elsewhere.path().join("p/x.jsonl"), "").unwrap();
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), home.path().join(".claude/projects")).unwrap();
        assert_eq!(
            find_in(home.path(), ".claude/projects/*/*.jsonl"),
            Look::Absent
        );
    }

    fn targets(looks: &[Look]) -> Vec<Target> {
        let glob = ".claude/projects/-workspace/*.jsonl".to_string();
        looks
            .iter()
            .map(|look| Target {
                glob: glob.clone(),
                look: look.clone(),
            })
            .collect()
    }

    #[test]
    fn a_home_the_hub_cannot_read_leaves_the_look_to_the_entrypoint() {
        let when = vec![".claude/projects/-workspace/*.jsonl".to_string(); 2];
        let args = vec!["--continue".to_string()];
        let private = Look::Unreadable(PathBuf::from("/h/.claude"));
        let p = decide(args.clone(), targets(&[Look::Absent, private]));
        assert_eq!(
            (p.args.as_slice(), p.when.as_slice()),
            (args.as_slice(), when.as_slice())
        );
        assert!(p.resumes, "{p:?}");
        assert!(p.reason.contains("the hub cannot read /h/.claude"), "{p:?}");
        let found = Look::Found(PathBuf::from("x.jsonl"));
        let p = decide(
            args.clone(),
            targets(&[Look::Unreadable("/h".into()), found]),
        );
        assert_eq!((p.resumes, p.reason.as_str()), (true, "found x.jsonl"));
        let p = decide(args.clone(), targets(&[Look::Absent]));
        assert!(!p.resumes, "{p:?}");
        assert_eq!(p.args, args, "the entrypoint looks again at start");
    }

    #[test]
    fn a_place_the_hub_cannot_see_starts_anew_and_says_why() {
        let args = vec!["--continue".to_string()];
        let p = decide(args.clone(), targets(&[Look::Unseen("X is hidden".into())]));
        assert_eq!(p, Plan::fresh("X is hidden"));
        let p = decide(
            args.clone(),
            targets(&[Look::Unseen("X is hidden".into()), Look::Absent]),
        );
        assert!(
            !p.resumes && p.reason.starts_with("no conversation yet"),
            "{p:?}"
        );
    }

    /// A Claude Code agent whose config dir is `config` (in the container, on this machine).
    fn moved(home: &Path, in_container: &str, on_host: Result<PathBuf, String>) -> Plan {
        let spec = config_dir::spec_of_install(crate::agent_state::profile::Install::ClaudeCode);
        let dir = ConfigDir {
            in_container: in_container.into(),
            on_host,
        };
        let past = Past {
            config: Some((&spec, &dir)),
            ..past(home)
        };
        plan(&def(""), Some(&claude()), past)
    }

    #[test]
    fn a_conversation_in_a_config_dir_elsewhere_is_looked_for_there() {
        let home = tempfile::tempdir().unwrap();
        let mounted = tempfile::tempdir().unwrap();
        let cfg = || Ok(mounted.path().to_path_buf());
        let p = moved(home.path(), "/cfg", cfg());
        assert_eq!(
            (p.resumes, p.when.as_slice()),
            (
                false,
                ["/cfg/projects/-workspace/*.jsonl".to_string()].as_slice()
            ),
            "{p:?}"
        );
        // One in the home's `.claude` is not the CLI's now.
        let in_home = home.path().join(".claude/projects/-workspace");
        std::fs::create_dir_all(&in_home).unwrap();
        std::fs::write(in_home.join("old.jsonl"), "{}").unwrap();
        assert!(!moved(home.path(), "/cfg", cfg()).resumes);

        let project = mounted.path().join("projects/-workspace");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("c0ffee.jsonl"), "{}").unwrap();
        let p = moved(home.path(), "/cfg", cfg());
        assert_eq!(p.args, ["--continue"]);
        assert_eq!(
            (p.resumes, p.reason.as_str()),
            (true, "found /cfg/projects/-workspace/c0ffee.jsonl")
        );
        // The default config dir: relative to the home, as before.
        let p = moved(home.path(), ".claude", Ok(home.path().join(".claude")));
        assert_eq!(p.reason, "found .claude/projects/-workspace/old.jsonl");
        assert_eq!(p.when, [".claude/projects/-workspace/*.jsonl"]);

        let hidden = moved(
            home.path(),
            "/cfg",
            Err("CLAUDE_CONFIG_DIR=/cfg is hidden".into()),
        );
        assert_eq!(hidden, Plan::fresh("CLAUDE_CONFIG_DIR=/cfg is hidden"));
    }

    #[test]
    fn working_directories_are_named_as_claude_code_names_them() {
        assert_eq!(workdir_slug("/workspace"), "-workspace");
        assert_eq!(workdir_slug("/home/me/my_proj.v2"), "-home-me-my-proj-v2");
    }

    #[test]
    fn arguments_go_after_the_program() {
        let cmd = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            with_args(&cmd(&["codex", "-c", "x=1"]), &cmd(&["resume", "--last"])),
            cmd(&["codex", "resume", "--last", "-c", "x=1"])
        );
        assert_eq!(with_args(&cmd(&["claude"]), &[]), cmd(&["claude"]));
        assert_eq!(with_args(&[], &cmd(&["--continue"])), cmd(&["--continue"]));
    }
}
