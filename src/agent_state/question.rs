//! The question a blocked agent asks and the answers it offers, read from the screen lines the
//! `blocked` rule matched, so a person can answer with one click (the keys go to the session
//! through `POST .../keys`). Recognised: `[y/n]`-style prompts in their common spellings,
//! `Yes (y)  No (n)`, `(Y)es/(N)o`, and numbered menus (`❯ 1. Yes`, `2. No`).

use serde::{Deserialize, Serialize};

/// One answer: what the button says and the key names that give it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Choice {
    pub label: String,
    pub keys: Vec<String>,
}

/// How many rows at the bottom of a screen [`on_screen`] looks at.
const MENU_ROWS: usize = 16;

/// The whole question at the bottom of a screen's rows (trailing blank rows cut): a menu's
/// question line and every choice, or a yes/no prompt. Fuller than a rule's evidence, which
/// may hold only the lines it matched (the highlighted choice, a footer).
pub fn on_screen(rows: &[String]) -> Option<Vec<String>> {
    super::menu::find(rows, MENU_ROWS).map(|(_, lines)| lines)
}

/// A blocked agent's question and its choices: the whole question at the bottom of its
/// `screen`, else the lines its rule matched (`evidence`), each line through `redact` first.
/// `None` while neither shows one (a hook may say `blocked` before the screen shows it).
pub fn asked_on(
    screen: &str,
    evidence: &[String],
    redact: impl Fn(&str) -> String,
) -> Option<(String, Vec<Choice>)> {
    let mut rows: Vec<String> = screen.lines().map(&redact).collect();
    while rows.last().is_some_and(|r| r.trim().is_empty()) {
        rows.pop();
    }
    let lines = on_screen(&rows).unwrap_or_else(|| evidence.iter().map(|l| redact(l)).collect());
    let asked = asked(&lines);
    (!asked.is_empty()).then(|| (asked, choices(&lines)))
}

/// The question: the matched lines, trimmed and joined.
pub fn question(evidence: &[String]) -> String {
    evidence
        .iter()
        .map(|l| l.trim_matches(|c: char| c.is_whitespace() || c == '│'))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answers the matched lines offer, in screen order; empty when none is recognised.
pub fn choices(evidence: &[String]) -> Vec<Choice> {
    let text = evidence.join("\n");
    let numbered = numbered_choices(evidence);
    if !numbered.is_empty() {
        return numbered;
    }
    let lower = text.to_lowercase();
    let yes_no = ["[y/n]", "(y/n)", "[yes/no]", "yes (y)", "(y)es/(n)o"]
        .iter()
        .any(|p| lower.contains(p));
    if !yes_no {
        return Vec::new();
    }
    // A line-reading prompt (a shell's `read`) needs Enter after the letter.
    ["yes", "no"]
        .iter()
        .map(|word| Choice {
            label: word.to_string(),
            keys: vec![word[..1].to_string(), "Enter".into()],
        })
        .collect()
}

/// `1. Yes` / `❯ 2. No, and tell Claude what to do differently` lines.
fn numbered_choices(evidence: &[String]) -> Vec<Choice> {
    evidence.iter().filter_map(|l| numbered_choice(l)).collect()
}

/// A `1. Yes` / `❯ 2. No, ...` line as a choice.
fn numbered_choice(line: &str) -> Option<Choice> {
    let l = line.trim_matches(|c: char| c.is_whitespace() || c == '│' || c == '❯' || c == '>');
    let (n, label) = l.split_once(". ")?;
    let numbered = n.len() == 1 && n.chars().all(|c| c.is_ascii_digit());
    (numbered && !label.trim().is_empty()).then(|| Choice {
        label: label.trim().to_string(),
        keys: vec![n.to_string()],
    })
}

/// The question's own words: its lines but its numbered choices, trimmed and joined (all
/// of them, when every line is a choice).
pub fn asked(lines: &[String]) -> String {
    let words: Vec<String> = lines
        .iter()
        .filter(|l| numbered_choice(l).is_none())
        .cloned()
        .collect();
    match question(&words) {
        w if w.is_empty() => question(lines),
        w => w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn yes_no_prompts_offer_yes_and_no() {
        for prompt in [
            "Allow write to main.rs? [y/n] ",
            "Continue? (Y/n)",
            "Overwrite? [yes/no]",
            "Run it?  Yes (y)  No (n)",
            "Apply edit? (Y)es/(N)o [Yes]:",
        ] {
            let c = choices(&lines(&[prompt]));
            assert_eq!(
                c,
                vec![
                    Choice {
                        label: "yes".into(),
                        keys: vec!["y".into(), "Enter".into()]
                    },
                    Choice {
                        label: "no".into(),
                        keys: vec!["n".into(), "Enter".into()]
                    },
                ],
                "{prompt}"
            );
        }
    }

    #[test]
    fn numbered_menus_offer_their_items() {
        let ev = lines(&[
            "│ Do you want to proceed?",
            "│ ❯ 1. Yes",
            "│   2. No, and tell Claude what to do differently (esc)",
        ]);
        let c = choices(&ev);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].label, "Yes");
        assert_eq!(c[0].keys, vec!["1"]);
        assert_eq!(c[1].keys, vec!["2"]);
        assert_eq!(
            question(&ev).lines().next(),
            Some("Do you want to proceed?")
        );
    }

    #[test]
    fn other_lines_offer_nothing() {
        assert!(choices(&lines(&["Password:"])).is_empty());
        assert!(choices(&lines(&["version 1. something"])).is_empty());
        assert!(choices(&[]).is_empty());
        assert_eq!(question(&lines(&["  Allow? [y/n] "])), "Allow? [y/n]");
    }

    #[test]
    fn the_question_asked_is_its_lines_but_its_choices() {
        let menu = lines(&[
            " Do you want to proceed?",
            " ❯ 1. Yes",
            "   2. No",
            " Esc to cancel",
        ]);
        assert_eq!(asked(&menu), "Do you want to proceed?\nEsc to cancel");
        assert_eq!(choices(&menu).len(), 2);
        assert_eq!(asked(&lines(&["❯ 1. Yes"])), "❯ 1. Yes");
        let screen = lines(&["output", "Do you want to proceed?", "❯ 1. Yes", "  2. No"]);
        assert_eq!(
            on_screen(&screen).map(|l| asked(&l)).as_deref(),
            Some("Do you want to proceed?")
        );
    }

    #[test]
    fn the_whole_menu_on_the_screen_wins_over_the_matched_line() {
        let screen = " Edit main.rs\n Do you want to proceed?\n ❯ 1. Yes\n   2. Yes, and don't ask again\n   3. No\n\n\n";
        let evidence = lines(&["❯ 1. Yes"]);
        let (asked, choices) = asked_on(screen, &evidence, str::to_string).unwrap();
        assert_eq!(asked, "Do you want to proceed?");
        let labels: Vec<&str> = choices.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["Yes", "Yes, and don't ask again", "No"]);
    }

    #[test]
    fn without_a_question_on_the_screen_the_matched_lines_are_read_redacted() {
        let evidence = lines(&["token sk-123: Continue? (y/n)"]);
        let redact = |l: &str| l.replace("sk-123", "[REDACTED]");
        let (asked, choices) = asked_on("busy\n", &evidence, redact).unwrap();
        assert_eq!(asked, "token [REDACTED]: Continue? (y/n)");
        assert_eq!(choices.len(), 2);
        assert_eq!(asked_on("busy\n", &[], str::to_string), None);
    }
}
