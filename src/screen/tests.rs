//! Rendered screens: feeding, repaint, queries, titles, reads and the text history.

use super::*;

fn size() -> TermSize {
    TermSize { cols: 20, rows: 4 }
}

#[test]
fn feeding_overlapping_ranges_processes_each_byte_once() {
    let mut s = Screen::new(size());
    s.feed(0, b"abc");
    s.feed(1, b"bcdef");
    assert_eq!(s.text(), "abcdef");
    assert_eq!(s.fed_to(), 6);
    s.feed(2, b"cd");
    assert_eq!(s.text(), "abcdef");
}

#[test]
fn a_gap_restarts_the_emulator() {
    let mut s = Screen::new(size());
    s.feed(0, b"old");
    s.feed(10, b"new");
    assert_eq!(s.text(), "new");
    assert_eq!(s.fed_to(), 13);
}

#[test]
fn repaint_reproduces_the_screen_on_a_fresh_emulator() {
    let mut s = Screen::new(size());
    s.feed(0, b"\x1b[31mred\x1b[0m\r\nline two\x1b[2;3H");
    let mut fresh = vt100::Parser::new(nz(4), nz(20), 0);
    fresh.process(&s.repaint());
    assert_eq!(fresh.screen().contents(), s.text());
    assert_eq!(fresh.screen().cursor_position(), s.vt().cursor_position());
}

#[test]
fn sco_cursor_save_and_restore_work_even_when_split() {
    let stream = b"ab\x1b[scdef\x1b[uX";
    for split in 0..stream.len() {
        let mut s = Screen::new(size());
        s.feed(0, &stream[..split]);
        s.feed(split as u64, &stream[split..]);
        assert_eq!(s.text(), "abXdef", "split at {split}");
    }
}

#[test]
fn terminal_queries_are_answered() {
    let mut s = Screen::new(size());
    s.feed(0, b"hi\x1b[6n\x1b[c\x1b[5n");
    let replies = s.take_replies();
    assert_eq!(
        replies,
        vec![
            b"\x1b[1;3R".to_vec(),
            b"\x1b[?62;22c".to_vec(),
            b"\x1b[0n".to_vec()
        ]
    );
    assert!(s.take_replies().is_empty());
}

#[test]
fn the_last_title_set_is_kept_even_when_its_sequence_is_split() {
    let stream = "\x1b]0;⠋ proj\x07text\x1b]2;Stand-in task | proj\x1b\\\x1b]1;icon\x07".as_bytes();
    for split in 0..stream.len() {
        let mut s = Screen::new(size());
        assert_eq!(s.title(), "");
        s.feed(0, &stream[..split]);
        s.feed(split as u64, &stream[split..]);
        assert_eq!(s.title(), "Stand-in task | proj", "split at {split}");
        assert_eq!(s.text(), "text", "split at {split}");
    }
    let mut s = Screen::new(size());
    s.feed(0, b"\x1b]2;first\x07");
    s.feed(100, b"after a gap");
    assert_eq!(s.title(), "", "a restarted screen has not seen the title");
}

fn req(mode: ReadMode) -> TermReadRequest {
    TermReadRequest {
        mode,
        ..Default::default()
    }
}

#[test]
fn tail_viewport_and_delta_reads() {
    let mut s = Screen::new(size());
    let mut out = Vec::new();
    for i in 1..=10 {
        out.extend_from_slice(format!("line{i}\r\n").as_bytes());
    }
    s.feed(0, &out);
    let tail = s.read(&req(ReadMode::Tail));
    assert_eq!(tail.lines.first().map(String::as_str), Some("line1"));
    assert_eq!(
        tail.lines.last().map(String::as_str),
        Some(""),
        "the cursor's empty line"
    );
    let view = s.read(&req(ReadMode::Viewport));
    assert_eq!(view.lines, vec!["line8", "line9", "line10", ""]);
    assert_eq!(view.viewport_y, 7);
    let marker = view.marker_id.clone();
    s.feed(out.len() as u64, b"new1\r\nnew2");
    let delta = s.read(&TermReadRequest {
        mode: ReadMode::Delta,
        marker_id: Some(marker),
        ..Default::default()
    });
    assert_eq!(delta.lines, vec!["new1", "new2"]);
    assert!(!delta.marker_disposed);
    let bad = s.read(&TermReadRequest {
        mode: ReadMode::Delta,
        marker_id: Some("g9l1".into()),
        ..Default::default()
    });
    assert!(bad.marker_disposed);
}

#[test]
fn wrapped_rows_merge_into_one_line_unless_asked_not_to() {
    let mut s = Screen::new(TermSize { cols: 5, rows: 4 });
    s.feed(0, b"abcdefghij\r\nx");
    assert_eq!(s.read(&req(ReadMode::Tail)).lines, vec!["abcdefghij", "x"]);
    let raw = s.read(&TermReadRequest {
        merge_wrapped: Some(false),
        ..Default::default()
    });
    assert_eq!(raw.lines, vec!["abcde", "fghij", "x"]);
}

#[test]
fn limits_truncate_the_oldest_content() {
    let mut s = Screen::new(size());
    s.feed(0, b"aaaa\r\nbbbb\r\ncccc");
    let r = s.read(&TermReadRequest {
        max_lines: Some(2),
        ..Default::default()
    });
    assert_eq!(
        (r.lines.clone(), r.truncated),
        (vec!["bbbb".to_string(), "cccc".to_string()], true)
    );
    let r = s.read(&TermReadRequest {
        max_chars: Some(6),
        ..Default::default()
    });
    assert_eq!(
        (r.text.as_str(), r.dropped_chars, r.truncated),
        ("b\ncccc", 8, true)
    );
}

/// Every row of a vt100 emulator with ample scrollback, read the old way (through the
/// view offset): the oracle for the text history.
fn rows_of_an_emulator_with_scrollback(bytes: &[u8], size: TermSize) -> Vec<(String, bool)> {
    let mut parser = vt100::Parser::new(nz(size.rows), nz(size.cols), 10_000);
    parser.process(bytes);
    let screen = parser.screen_mut();
    let mut out = Vec::new();
    screen.set_scrollback(usize::MAX);
    let mut offset = screen.scrollback();
    while offset > 0 {
        screen.set_scrollback(offset);
        let take = offset.min(size.rows as usize);
        let texts: Vec<String> = screen.rows(0, size.cols).take(take).collect();
        for (i, text) in texts.into_iter().enumerate() {
            out.push((text, screen.row_wrapped(i as u16)));
        }
        offset -= take;
    }
    screen.set_scrollback(0);
    let texts: Vec<String> = screen.rows(0, size.cols).collect();
    for (i, text) in texts.into_iter().enumerate() {
        out.push((text, screen.row_wrapped(i as u16)));
    }
    out
}

#[test]
fn rows_that_leave_the_screen_keep_their_text_and_wrapping() {
    let size = TermSize { cols: 12, rows: 3 };
    let stream = [
        "plain line\r\n",
        "\x1b[31mred\x1b[0m and \x1b[1;44mbold blue\x1b[0m\r\n",
        "a line long enough to wrap twice over\r\n",
        "wrap at a space: abcdefghij k\r\n",
        "wide 漢字漢字漢字 chars\r\n",
        "overwritten\rOVER\r\n",
        "erased tail\x1b[5D\x1b[K\r\n",
        "\x1b[42m          \x1b[0m\r\n",
        "\r\n\r\nlast",
    ]
    .concat();
    let mut s = Screen::new(size);
    // Fed in pieces, as output arrives.
    for (i, piece) in stream.as_bytes().chunks(7).enumerate() {
        s.feed((i * 7) as u64, piece);
    }
    let oracle = rows_of_an_emulator_with_scrollback(stream.as_bytes(), size);
    let ours = s.all_rows();
    assert!(oracle.len() > 10, "the stream scrolls: {oracle:?}");
    let trimmed = |rows: Vec<(String, bool)>| -> Vec<(String, bool)> {
        // Reads trim the end of rows that do not wrap; trailing blanks are not content.
        rows.into_iter()
            .map(|(t, w)| (if w { t } else { t.trim_end().to_string() }, w))
            .collect()
    };
    assert_eq!(trimmed(ours), trimmed(oracle));
    // And the reads built on them.
    let tail = s.read(&TermReadRequest {
        max_lines: Some(200),
        ..Default::default()
    });
    assert_eq!(tail.lines[0], "plain line");
    assert!(tail
        .lines
        .contains(&"a line long enough to wrap twice over".to_string()));
    assert!(tail
        .lines
        .contains(&"wrap at a space: abcdefghij k".to_string()));
    assert!(tail.lines.iter().any(|l| l.starts_with("wide 漢字")));
    assert!(tail.lines.contains(&"OVERwritten".to_string()));
}

#[test]
fn markers_are_disposed_when_their_lines_leave_the_scrollback() {
    let mut s = Screen::new(size());
    s.feed(0, b"first\r\n");
    let marker = s.read(&req(ReadMode::Tail)).marker_id;
    let mut out = Vec::new();
    for i in 0..(SCREEN_SCROLLBACK_ROWS + 50) {
        out.extend_from_slice(format!("{i}\r\n").as_bytes());
    }
    s.feed(7, &out);
    let r = s.read(&TermReadRequest {
        mode: ReadMode::Delta,
        marker_id: Some(marker),
        max_lines: Some(5),
        ..Default::default()
    });
    assert!(r.marker_disposed);
    assert!(r.truncated);
}

#[test]
fn a_repaint_replaces_the_screen_and_keeps_modes_history_and_title() {
    let mut s = Screen::new(size());
    let mut out = b"\x1b]2;the title\x07\x1b[?2004h\x1b[?1h".to_vec();
    for i in 1..=6 {
        out.extend_from_slice(format!("line{i}\r\n").as_bytes());
    }
    s.feed(0, &out);
    let before = s.read(&req(ReadMode::Tail));
    s.repaint_from(
        b"\x1b[H\x1b[2J\x1b[1;1Hline5 is now\x1b[2;1Hreflowed\x1b[3;1H",
        out.len() as u64,
    );
    assert_eq!(s.text(), "line5 is now\nreflowed");
    assert_eq!(s.fed_to(), out.len() as u64);
    assert!(s.vt().bracketed_paste() && s.vt().application_cursor());
    assert_eq!(s.title(), "the title");
    let after = s.read(&req(ReadMode::Tail));
    assert_eq!(
        after.lines[..3],
        before.lines[..3],
        "the history above stays"
    );
    assert_eq!(after.viewport_y, before.viewport_y, "line numbers carry on");
    // Output after the repaint lands on it.
    s.feed(out.len() as u64, b"more");
    assert_eq!(s.text(), "line5 is now\nreflowed\nmore");
}

/// Setting a scroll region moves the cursor to the top left, origin mode or not, and a region
/// of one row changes nothing, as in tmux (the vendored vt100's patch, #29 item 6).
#[test]
fn a_scroll_region_homes_the_cursor_like_tmux() {
    let row_of = |bytes: &[u8], word: &str| {
        let mut s = Screen::new(size());
        s.feed(0, bytes);
        s.text().lines().position(|l| l.contains(word))
    };
    assert_eq!(row_of(b"\x1b[3;1Hx\x1b[2;4rHERE", "HERE"), Some(0));
    assert_eq!(row_of(b"\x1b[?6h\x1b[3;1Hx\x1b[2;4rHERE", "HERE"), Some(0));
    assert_eq!(row_of(b"\x1b[2;1Hx\x1b[3;3rHERE", "HERE"), Some(1));
}

/// Records each row that scrolls off twice: as the history keeps it (`write_plain`), and as
/// the upstream capture gives it (formatted, then stripped to plain text; its wrapping from
/// the newline the next capture starts with).
#[derive(Default)]
struct BothCaptures {
    plain: Vec<(String, bool)>,
    formatted: Vec<(String, bool)>,
    state: vt100::capture::BasicFormattedCaptureState,
    pending: Option<String>,
}

impl BothCaptures {
    fn flush(&mut self, next_starts_with_newline: bool) {
        if let Some(text) = self.pending.take() {
            self.formatted.push((text, !next_starts_with_newline));
        }
    }
}

impl vt100::Callbacks for BothCaptures {
    fn on_scroll(&mut self, row: vt100::capture::RowContents<'_>, alternate_screen: bool) {
        if alternate_screen {
            return;
        }
        let mut plain = String::new();
        row.write_plain(&mut plain);
        self.plain.push((plain, row.wrapped()));
        let mut formatted = String::new();
        let _ = row.write_formatted_basic(&mut formatted, &mut self.state);
        let newline = formatted.starts_with('\n');
        self.flush(newline);
        let body = formatted.strip_prefix('\n').unwrap_or(&formatted);
        self.pending = Some(vt100::capture::basic_formatted_to_plain(body).collect());
    }
}

/// A deterministic mix of what programs print: text, wide and combining characters, colours
/// (background colours make blank cells that are not empty), erasing, inserting and deleting
/// characters and lines, cursor moves, scroll regions, wrapping and the alternate screen.
fn mixed_output(seed: u64, pieces: usize) -> Vec<u8> {
    const PARTS: &[&str] = &[
        "text ",
        "a longer run of plain words ",
        "漢字",
        "e\u{301}",
        "\x1b[31m",
        "\x1b[44m",
        "\x1b[0m",
        "\x1b[1;42m   \x1b[0m",
        "\x1b[K",
        "\x1b[1K",
        "\x1b[2K",
        "\x1b[3@",
        "\x1b[2P",
        "\x1b[4X",
        "\x1b[L",
        "\x1b[M",
        "\x1b[5G",
        "\x1b[2;7H",
        "\x1b[A",
        "\x1b[3C",
        "\x1b[J",
        "\x1b[2;3r\x1b[3;1Hin a region\n\n\x1b[r\x1b[6;1H",
        "\x1b[?1049halternate\r\n\x1b[?1049l",
        "\x1b[S",
        "\x1b[T",
        "\t",
        "\x08",
        "\r\n",
        "\r\n",
        "\r\n",
        "\r\n",
        "\r\n",
        "\n",
        "\r",
        "\x1b[45m\x1b[K\x1b[0m",
        "\x1bD",
        "\x1bM",
    ];
    let mut x = seed;
    let mut out = Vec::new();
    for _ in 0..pieces {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        out.extend_from_slice(PARTS[(x >> 33) as usize % PARTS.len()].as_bytes());
    }
    out
}

#[test]
fn the_history_keeps_each_row_as_the_upstream_capture_gives_it() {
    for seed in 0..40 {
        let bytes = mixed_output(seed, 3000);
        let mut parser =
            vt100::Parser::new_with_callbacks(nz(6), nz(17), 0, BothCaptures::default());
        // In pieces, as output arrives; `reset` checks the rows' written bound (debug builds).
        for piece in bytes.chunks(61) {
            parser.process(piece);
        }
        let captures = parser.callbacks_mut();
        captures.flush(true);
        let (plain, formatted) = (&captures.plain, &captures.formatted);
        assert!(
            plain.len() > 100,
            "seed {seed}: the stream scrolls ({} rows)",
            plain.len()
        );
        assert_eq!(plain.len(), formatted.len());
        for (i, (p, f)) in plain.iter().zip(formatted).enumerate() {
            // The upstream capture only shows a row's wrapping through the next capture.
            let last = i + 1 == plain.len();
            assert_eq!(p.0, f.0, "seed {seed}, row {i}");
            assert!(
                last || p.1 == f.1,
                "seed {seed}, row {i}: wrapped {} vs {}",
                p.1,
                f.1
            );
        }
    }
}

#[test]
fn mixed_output_renders_as_an_emulator_with_scrollback_renders_it() {
    let size = TermSize { cols: 17, rows: 6 };
    for seed in 100..120 {
        // No alternate screen: the oracle's scrollback is the normal screen's.
        let bytes: Vec<u8> = String::from_utf8(mixed_output(seed, 2000))
            .expect("utf-8")
            .replace("\x1b[?1049halternate\r\n\x1b[?1049l", "")
            .into_bytes();
        let mut s = Screen::new(size);
        for (i, piece) in bytes.chunks(53).enumerate() {
            s.feed((i * 53) as u64, piece);
        }
        let keep = s.all_rows().len();
        let oracle = rows_of_an_emulator_with_scrollback(&bytes, size);
        let oracle = &oracle[oracle.len().saturating_sub(keep)..];
        let trim = |rows: &[(String, bool)]| -> Vec<String> {
            rows.iter().map(|(t, _)| t.trim_end().to_string()).collect()
        };
        assert_eq!(trim(&s.all_rows()), trim(oracle), "seed {seed}");
    }
}

/// Output of a busy agent: runs of short lines (long enough to be skipped) between the other
/// things programs print (colours, tabs, long wrapping lines, cursor moves, scroll regions, the
/// alternate screen, characters outside ASCII, bare CR and LF, cut-off sequences).
fn busy_output(seed: u64, pieces: usize) -> Vec<u8> {
    const OTHERS: &[&[u8]] = &[
        b"\x1b[32mgreen\x1b[0m\r\n",
        b"a\tb\r\n",
        b"\x1b[A\x1b[2Kredrawn\r\n",
        b"wide \xe6\xbc\xa2\xe5\xad\x97\r\n",
        b"\x1b[2;4r\x1b[4;1Hregion\n\n\x1b[r\x1b[6;1H",
        b"\x1b[?1049halt\r\n\x1b[?1049l",
        b"bare\nfeed\n",
        b"progress 10%\rprogress 20%\r",
        b"\x1b]0;a title\x07",
        b"\x1b[1;3H",
        b"a line long enough to wrap past seventeen columns\r\n",
        b"\x1b[",
        b"31m",
        b"\xe6",
        b"\x97\xa5\r\n",
        b"x\r\n",
    ];
    let mut x = seed;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    let mut out = Vec::new();
    let mut n = 0;
    for _ in 0..pieces {
        if next() % 3 == 0 {
            // Lines of up to 16 characters fit left of the 17th column.
            let wide = next() % 2 == 0;
            for _ in 0..next() % 600 {
                n += 1;
                let line = if wide {
                    format!("{n:>16}")
                } else {
                    n.to_string()
                };
                out.extend_from_slice(format!("{line}\r\n").as_bytes());
            }
        } else {
            out.extend_from_slice(OTHERS[next() % OTHERS.len()]);
        }
    }
    out
}

#[test]
fn skipping_lines_that_cannot_stay_renders_what_feeding_every_byte_renders() {
    let size = TermSize { cols: 17, rows: 6 };
    let mut skipped = 0;
    for seed in 0..12 {
        let bytes = busy_output(seed, 60);
        let mut chunk_sizes = seed + 1;
        let mut fast = Screen::new(size);
        let mut at = 0;
        while at < bytes.len() {
            chunk_sizes = chunk_sizes
                .wrapping_mul(2862933555777941757)
                .wrapping_add(3037000493);
            let n = ((chunk_sizes >> 40) as usize % 6000 + 1).min(bytes.len() - at);
            fast.feed(at as u64, &bytes[at..at + n]);
            at += n;
        }
        let mut slow = Screen::new(size);
        for (i, b) in bytes.iter().enumerate() {
            slow.feed(i as u64, std::slice::from_ref(b));
        }
        assert_eq!(slow.skipped_lines(), 0);
        skipped += fast.skipped_lines();
        assert_eq!(fast.all_rows(), slow.all_rows(), "seed {seed}");
        assert_eq!(fast.vt().cursor_position(), slow.vt().cursor_position());
        assert_eq!(fast.title(), slow.title());
        for mode in [ReadMode::Tail, ReadMode::Viewport] {
            let r = TermReadRequest {
                mode,
                max_lines: Some(200),
                ..Default::default()
            };
            let (f, s) = (fast.read(&r), slow.read(&r));
            assert_eq!(
                (f.lines, f.viewport_y),
                (s.lines, s.viewport_y),
                "seed {seed}"
            );
            assert_eq!(f.marker_id, s.marker_id, "seed {seed}: line numbers");
        }
    }
    assert!(skipped > 5_000, "lines were skipped: {skipped}");
}
