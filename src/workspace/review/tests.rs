use super::*;

/// Two files, the first with two hunks, then a new file, a deleted one and a quoted name, as
/// `git diff -M` writes them.
const COMMITTED: &str = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,4 +1,5 @@
 fn one() {}
+fn added() {}
 fn two() {}
 fn three() {}
 fn four() {}
@@ -20,3 +21,2 @@ impl Thing {
 fn twenty() {}
-fn gone() {}
 fn twenty_two() {}
diff --git a/notes.txt b/notes.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/notes.txt
@@ -0,0 +1,2 @@
+first
+second
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 4444444..0000000
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git \"a/with\\ttab.txt\" \"b/with\\ttab.txt\"
index 5555555..6666666 100644
--- \"a/with\\ttab.txt\"
+++ \"b/with\\ttab.txt\"
@@ -1 +1 @@
-x
+y
";

const UNCOMMITTED: &str = "\
diff --git a/src/main.rs b/src/main.rs
index 7777777..8888888 100644
--- a/src/main.rs
+++ b/src/main.rs
@@ -3,2 +3,3 @@ fn main() {
     let a = 1;
+    let b = 2;
 }
";

fn note(note: &str, file: Option<&str>, line: Option<u32>) -> ReviewNote {
    ReviewNote {
        note: note.into(),
        file: file.map(str::to_string),
        line,
    }
}

fn diffs() -> ReviewedDiffs<'static> {
    ReviewedDiffs {
        branch: "agent/x",
        base: "main",
        committed: COMMITTED,
        uncommitted: UNCOMMITTED,
    }
}

#[test]
fn a_diff_is_files_and_hunks_with_their_new_side_ranges() {
    let files = parse_diff(COMMITTED);
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["src/lib.rs", "notes.txt", "old.txt", "with\ttab.txt"]
    );
    let ranges: Vec<(u32, u32)> = files[0]
        .hunks
        .iter()
        .map(|h| (h.new_start, h.new_count))
        .collect();
    assert_eq!(ranges, [(1, 5), (21, 2)]);
    assert_eq!(files[0].hunks[1].header, "@@ -20,3 +21,2 @@ impl Thing {");
    assert_eq!(
        files[0].hunks[1].lines,
        [" fn twenty() {}", "-fn gone() {}", " fn twenty_two() {}"]
    );
    assert_eq!(
        (files[1].hunks[0].new_start, files[1].hunks[0].new_count),
        (1, 2)
    );
    assert_eq!(
        (files[2].hunks[0].new_start, files[2].hunks[0].new_count),
        (0, 0)
    );
    assert_eq!(
        (files[3].hunks[0].new_start, files[3].hunks[0].new_count),
        (1, 1)
    );
    assert!(parse_diff("").is_empty());
}

#[test]
fn a_hunk_holds_the_new_side_lines_it_covers() {
    let files = parse_diff(COMMITTED);
    let first = &files[0].hunks[0];
    assert!(!first.contains(0));
    assert!(first.contains(1) && first.contains(2) && first.contains(5));
    assert!(!first.contains(6));
    let second = &files[0].hunks[1];
    assert!(!second.contains(20) && second.contains(21) && second.contains(22));
    assert!(!second.contains(23));
    // A pure removal holds the line it follows (a file removed whole: line 1).
    assert!(files[2].hunks[0].contains(1));
    assert!(!files[2].hunks[0].contains(2));
}

#[test]
fn several_notes_make_one_prompt_with_file_line_hunk_and_note() {
    let notes = [
        note("name it for what it does", Some("src/lib.rs"), Some(2)),
        note("keep this one", Some("src/lib.rs"), Some(22)),
        note("b is unused", Some("src/main.rs"), Some(4)),
        note("add a test", None, None),
    ];
    let prompt = compose(&diffs(), &notes);
    let want = "\
Review notes on your branch agent/x (against main), 4 notes. Please address each one:

1. File src/lib.rs, line 2, in this hunk of your committed changes:
```diff
@@ -1,4 +1,5 @@
 fn one() {}
+fn added() {}
 fn two() {}
 fn three() {}
 fn four() {}
```
Note: name it for what it does

2. File src/lib.rs, line 22, in this hunk of your committed changes:
```diff
@@ -20,3 +21,2 @@ impl Thing {
 fn twenty() {}
-fn gone() {}
 fn twenty_two() {}
```
Note: keep this one

3. File src/main.rs, line 4, in this hunk of your uncommitted changes:
```diff
@@ -3,2 +3,3 @@ fn main() {
     let a = 1;
+    let b = 2;
 }
```
Note: b is unused

4. On the work as a whole:
Note: add a test";
    assert_eq!(prompt, want);
}

#[test]
fn a_line_outside_the_hunks_or_a_file_not_changed_is_said_so() {
    let notes = [
        note("why?", Some("src/lib.rs"), Some(12)),
        note("look here too", Some("README.md"), Some(3)),
        note("whole file", Some("notes.txt"), None),
        note("and this one", Some("Cargo.toml"), None),
    ];
    let prompt = compose(&diffs(), &notes);
    assert!(prompt.starts_with("Review notes on your branch agent/x (against main), 4 notes."));
    assert!(prompt.contains(
        "1. File src/lib.rs, line 12 (outside the hunks you changed in this file):\nNote: why?"
    ));
    assert!(prompt.contains(
        "2. File README.md, line 3 (this file is unchanged on your branch):\nNote: look here too"
    ));
    assert!(prompt.contains("3. File notes.txt (the whole file):\nNote: whole file"));
    assert!(prompt.contains(
        "4. File Cargo.toml (the whole file; unchanged on your branch):\nNote: and this one"
    ));
    assert!(!prompt.contains("```"), "no hunk for any of them");
    let one = compose(&diffs(), &[note(" trimmed \n", None, None)]);
    assert!(one.contains(", 1 note. ") && one.ends_with("Note: trimmed"));
}

#[test]
fn a_long_hunk_is_shown_around_the_line() {
    let mut diff = String::from(
        "diff --git a/big.txt b/big.txt\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,100 @@\n",
    );
    for i in 1..=100 {
        diff.push_str(&format!("+line {i}\n"));
    }
    let d = ReviewedDiffs {
        branch: "agent/x",
        base: "main",
        committed: &diff,
        uncommitted: "",
    };
    let prompt = compose(&d, &[note("here", Some("big.txt"), Some(50))]);
    assert!(prompt.contains("@@ -0,0 +1,100 @@\n[... 39 lines of the hunk above]\n+line 40\n"));
    assert!(prompt.contains("+line 60\n[... 40 lines of the hunk below]\n```"));
    assert!(!prompt.contains("+line 39\n") && !prompt.contains("+line 61\n"));
}

#[test]
fn bad_notes_are_refused_with_the_reason() {
    let ok = note("fine", Some("a.rs"), Some(1));
    assert_eq!(check_notes(std::slice::from_ref(&ok)), Ok(()));
    assert_eq!(check_notes(&[]), Err(NoteError::NoNotes));
    let many = vec![ok.clone(); MAX_NOTES + 1];
    assert_eq!(check_notes(&many), Err(NoteError::TooMany { count: 51 }));
    assert_eq!(check_notes(&many[..MAX_NOTES]), Ok(()));
    let cases = [
        (note(" \t\r\n", None, None), NoteError::Blank { index: 2 }),
        (note("a\0b", None, None), NoteError::Blank { index: 2 }),
        (
            note(&"x".repeat(MAX_NOTE_CHARS + 1), None, None),
            NoteError::TooLong { index: 2 },
        ),
        (note("n", Some(" "), None), NoteError::BadFile { index: 2 }),
        (
            note("n", None, Some(3)),
            NoteError::LineWithoutFile { index: 2 },
        ),
        (
            note("n", Some("a.rs"), Some(0)),
            NoteError::LineZero { index: 2 },
        ),
    ];
    for (bad, want) in cases {
        assert_eq!(check_notes(&[ok.clone(), bad]), Err(want));
    }
    // Unicode white space is blank too; other characters are text.
    assert_eq!(
        check_notes(&[note("\u{a0}\u{3000}", None, None)]),
        Err(NoteError::Blank { index: 1 })
    );
    assert_eq!(check_notes(&[note("\u{1c}", None, None)]), Ok(()));
}
