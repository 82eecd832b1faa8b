//! A question the program is asking, recognised by its shape rather than by one CLI's words
//! (the `detect = "choices"` rule): at the bottom of what the program drew, either
//! - a menu of two or more numbered or lettered choices in sequence (`1.` `2.` or `a)` `b)`),
//!   exactly one of them marked by a glyph before its number, whatever the glyph (`❯`, `>`,
//!   `→`, `●`, `*`), or
//! - a yes/no prompt: `(y/n)`, `[Y/n]`, `[yes/no]`, `(Y)es/(N)o`.
//!
//! Pure: rows in, the matched lines out.

use std::sync::LazyLock;

use regex::Regex;

/// A choice line: an optional highlight glyph, then `1.` / `2)` / `a.` and its label.
static CHOICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?P<mark>[^\w\s]{1,2})?\s*(?P<key>\d{1,2}|[A-Za-z])[.)] +\S").unwrap()
});

/// A yes/no prompt's answers.
static YES_NO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\[[yY]/[nN]\]|\([yY]/[nN]\)|\[[yY]es/[nN]o\]|\(Y\)es/\(N\)o)").unwrap()
});

/// Rows below a menu's last choice that may still belong to it (a footer such as `Esc to
/// cancel`, a hint line).
const FOOTER_ROWS: usize = 3;

/// The question at the bottom of `rows` (the program's content, trailing blank rows cut),
/// looking at the last `within` rows: `(index of its lowest row, its lines)`.
pub fn find(rows: &[String], within: usize) -> Option<(usize, Vec<String>)> {
    let from = rows.len().saturating_sub(within);
    yes_no(rows, from).or_else(|| choices(rows, from))
}

/// A yes/no prompt on the last row.
fn yes_no(rows: &[String], from: usize) -> Option<(usize, Vec<String>)> {
    let last = rows.len().checked_sub(1).filter(|l| *l >= from)?;
    YES_NO
        .is_match(&rows[last])
        .then(|| (last, vec![rows[last].trim_end().to_string()]))
}

/// A menu whose last choice is within [`FOOTER_ROWS`] of the bottom: its question line (the
/// non-blank row just above it, when there is one) and its choices.
fn choices(rows: &[String], from: usize) -> Option<(usize, Vec<String>)> {
    let bottom = rows.len().checked_sub(1)?;
    let last = (from..=bottom)
        .rev()
        .take(FOOTER_ROWS + 1)
        .find(|&i| CHOICE.is_match(&rows[i]))?;
    // The run of choices ending at `last`, blank rows between them allowed.
    let mut picked = vec![last];
    let mut i = last;
    while i > from {
        i -= 1;
        if rows[i].trim().is_empty() {
            continue;
        }
        if !CHOICE.is_match(&rows[i]) {
            break;
        }
        picked.push(i);
    }
    picked.reverse();
    let parsed: Vec<(bool, String)> = picked
        .iter()
        .filter_map(|&i| CHOICE.captures(&rows[i]))
        .map(|c| (c.name("mark").is_some(), c["key"].to_lowercase()))
        .collect();
    let marked = parsed.iter().filter(|(m, _)| *m).count();
    if parsed.len() < 2 || marked != 1 || !in_sequence(parsed.iter().map(|(_, k)| k.as_str())) {
        return None;
    }
    let first = picked[0];
    let question = first
        .checked_sub(1)
        .filter(|&q| q >= from && !rows[q].trim().is_empty())
        .into_iter();
    let lines = question
        .chain(picked.iter().copied())
        .map(|i| rows[i].trim_end().to_string())
        .collect();
    Some((last, lines))
}

/// Whether keys count up by one: `1 2 3` or `a b c`.
fn in_sequence<'a>(keys: impl Iterator<Item = &'a str>) -> bool {
    let value = |k: &str| -> Option<u32> {
        k.parse::<u32>()
            .ok()
            .or_else(|| k.chars().next().map(|c| 1000 + c as u32))
    };
    let values: Vec<Option<u32>> = keys.map(value).collect();
    values
        .windows(2)
        .all(|w| matches!((w[0], w[1]), (Some(a), Some(b)) if b == a + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    #[test]
    fn a_menu_with_one_highlighted_choice_is_a_question_whatever_the_glyph() {
        for glyph in ["❯", ">", "→", "●", "*", "▸"] {
            let screen = rows(&format!(
                "Some output\nDo you want to proceed?\n{glyph} 1. Yes\n  2. No\n"
            ));
            let (at, lines) = find(&screen, 8).unwrap_or_else(|| panic!("{glyph}"));
            assert_eq!(at, 3, "{glyph}");
            assert_eq!(lines[0], "Do you want to proceed?");
            assert_eq!(lines.len(), 3);
        }
        // Lettered, with a footer below and the highlight on the second choice.
        let screen = rows("Pick one\n  a) keep\n› b) drop\n  c) merge\n\nEsc to cancel");
        assert_eq!(find(&screen, 8).map(|(at, _)| at), Some(3));
    }

    #[test]
    fn lists_that_are_not_menus_are_not_questions() {
        for text in [
            // A numbered list in a reply: nothing highlighted.
            "Steps:\n  1. build\n  2. test\n",
            // Two highlighted.
            "❯ 1. Yes\n❯ 2. No\n",
            // Out of sequence.
            "❯ 1. Yes\n  3. No\n",
            // One choice only.
            "❯ 1. Yes\n",
            // A menu far above the bottom (a prompt drawn below it since).
            "❯ 1. Yes\n  2. No\nline\nline\nline\nline\n$ ",
        ] {
            assert_eq!(find(&rows(text), 12), None, "{text}");
        }
    }

    #[test]
    fn yes_no_prompts_on_the_last_row_are_questions() {
        for last in [
            "Overwrite? (y/n) ",
            "Continue [Y/n]",
            "Delete all [yes/no]: ",
            "Add file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: ",
        ] {
            let screen = rows(&format!("output\n{last}"));
            assert_eq!(find(&screen, 4).map(|(at, _)| at), Some(1), "{last}");
        }
        assert_eq!(find(&rows("Overwrite? (y/n) y\nok\n$ "), 4), None);
    }

    #[test]
    fn only_the_rows_looked_at_count() {
        let screen = rows("Continue? (y/n)");
        assert_eq!(find(&screen, 0), None);
        let screen = rows("❯ 1. Yes\n  2. No");
        assert_eq!(find(&screen, 1), None, "one row cannot hold a menu");
    }
}
