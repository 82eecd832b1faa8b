//! What an agent may push: read from the start of a `git-receive-pack` request (git's
//! pkt-lines: the ref updates it asks for, before the pack) and decided before git sees it.
//! Pure, so every rule is a table test.
//!
//! A receive-pack request body starts with pkt-lines (four hex digits of length, counting
//! themselves, then the payload; `0000` is a flush): optional `shallow <oid>` lines, then one
//! `<old-oid> <new-oid> <refname>` line per ref, the first followed by a NUL and the client's
//! capabilities, then a flush; the pack follows. A push certificate (`push-cert`) is never
//! asked for: the hub advertises no nonce.

/// The longest run of command pkt-lines read before a push is refused (a push names a ref or
/// two; this is far past any honest one).
pub const MAX_COMMANDS_BYTES: usize = 1 << 20;

/// One ref update a push asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    pub old: String,
    pub new: String,
    /// The full ref name (`refs/heads/agent/w1`).
    pub name: String,
}

impl RefUpdate {
    /// The update deletes the ref.
    pub fn deletes(&self) -> bool {
        is_zero(&self.new)
    }
}

/// The start of a receive-pack request, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commands {
    pub updates: Vec<RefUpdate>,
    /// The capabilities the client asked for (after the first command's NUL).
    pub capabilities: Vec<String>,
}

impl Commands {
    /// Whether the client asked for its report in side-band (`side-band-64k` or `side-band`).
    pub fn side_band(&self) -> bool {
        self.capabilities
            .iter()
            .any(|c| c == "side-band-64k" || c == "side-band")
    }
}

/// Why the start of a request could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PktError {
    #[error("the request is not git's pkt-line protocol: {0}")]
    Malformed(String),
    #[error("the push names more than {MAX_COMMANDS_BYTES} bytes of ref updates")]
    TooLong,
    #[error("push certificates are not accepted")]
    PushCert,
}

/// Reads the ref updates at the start of `buf`: `Ok(None)` while more bytes are needed, else
/// the commands and how many bytes they took (the flush included).
pub fn read_commands(buf: &[u8]) -> Result<Option<(Commands, usize)>, PktError> {
    let mut at = 0;
    let mut commands = Commands {
        updates: Vec::new(),
        capabilities: Vec::new(),
    };
    loop {
        if at > MAX_COMMANDS_BYTES {
            return Err(PktError::TooLong);
        }
        let Some(head) = buf.get(at..at + 4) else {
            return Ok(None);
        };
        let len = pkt_len(head)?;
        if len == 0 {
            return Ok(Some((commands, at + 4)));
        }
        if len < 4 {
            return Err(PktError::Malformed(format!("a pkt-line of length {len}")));
        }
        let Some(payload) = buf.get(at + 4..at + len) else {
            if at + len > MAX_COMMANDS_BYTES {
                return Err(PktError::TooLong);
            }
            return Ok(None);
        };
        at += len;
        let line = payload.strip_suffix(b"\n").unwrap_or(payload);
        if line.starts_with(b"shallow ") {
            continue;
        }
        if line.starts_with(b"push-cert") {
            return Err(PktError::PushCert);
        }
        let (command, caps) = match line.iter().position(|b| *b == 0) {
            Some(nul) => (&line[..nul], Some(&line[nul + 1..])),
            None => (line, None),
        };
        if let Some(caps) = caps {
            commands.capabilities = String::from_utf8_lossy(caps)
                .split(' ')
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect();
        }
        commands.updates.push(parse_update(command)?);
    }
}

/// The length of a pkt-line from its four hex digits.
fn pkt_len(head: &[u8]) -> Result<usize, PktError> {
    std::str::from_utf8(head)
        .ok()
        .and_then(|h| usize::from_str_radix(h, 16).ok())
        .ok_or_else(|| PktError::Malformed(format!("{:?} is no pkt-line length", head)))
}

fn parse_update(line: &[u8]) -> Result<RefUpdate, PktError> {
    let text = String::from_utf8_lossy(line);
    let mut parts = text.splitn(3, ' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(old), Some(new), Some(name)) if is_oid(old) && is_oid(new) && !name.is_empty() => {
            Ok(RefUpdate {
                old: old.into(),
                new: new.into(),
                name: name.into(),
            })
        }
        _ => Err(PktError::Malformed(format!("{text:?} is no ref update"))),
    }
}

fn is_oid(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_zero(oid: &str) -> bool {
    oid.bytes().all(|b| b == b'0')
}

/// Why a push is refused before git sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The ref the refusal is about.
    pub name: String,
    /// Why, as git shows it to the pusher (`[remote rejected] ... (why)`).
    pub why: String,
}

/// Whether the agent, whose branch is `branch`, may make these updates: every one must be to
/// `refs/heads/<branch>` and none may delete it. The first refusal.
pub fn decide(updates: &[RefUpdate], branch: &str) -> Result<(), Refusal> {
    let own = format!("refs/heads/{branch}");
    for update in updates {
        if update.name != own {
            return Err(Refusal {
                name: update.name.clone(),
                why: format!("an agent may push only its own branch {branch}"),
            });
        }
        if update.deletes() {
            return Err(Refusal {
                name: update.name.clone(),
                why: format!("the branch {branch} may not be deleted"),
            });
        }
    }
    Ok(())
}

/// Why git itself refused an update the hub let through (with `receive.denyNonFastForwards`),
/// read from the branch before and after: `None` when the branch took the update.
/// `is_ancestor` says whether the branch's commit before the push is an ancestor of the new
/// one (`None`: not known, the new commit never arrived).
pub fn why_git_refused(
    update: &RefUpdate,
    before: Option<&str>,
    after: Option<&str>,
    is_ancestor: Option<bool>,
) -> Option<String> {
    if after == Some(update.new.as_str()) {
        return None;
    }
    let stale = match before {
        Some(before) => before != update.old,
        None => !is_zero(&update.old),
    };
    Some(match (stale, is_ancestor) {
        (_, Some(false)) => {
            "non-fast-forward: the push would drop commits of the branch (a force push)".into()
        }
        (true, _) => "the branch moved since the pusher last fetched it".into(),
        _ => "git refused the update".into(),
    })
}

/// A pkt-line holding `payload`.
pub fn pkt_line(payload: &[u8]) -> Vec<u8> {
    let mut line = format!("{:04x}", payload.len() + 4).into_bytes();
    line.extend_from_slice(payload);
    line
}

/// The flush pkt-line.
pub const FLUSH: &[u8] = b"0000";

/// git's report of a push refused whole: `unpack ok`, then `ng <ref> <why>` for every update
/// (`refusal`'s reason for its ref, "refused with <ref>" for the others), in side-band when the
/// client asked for it. git shows each as `! [remote rejected] <ref> (<why>)`.
pub fn refusal_report(commands: &Commands, refusal: &Refusal) -> Vec<u8> {
    let mut report = pkt_line(b"unpack ok\n");
    for update in &commands.updates {
        let why = match update.name == refusal.name {
            true => refusal.why.clone(),
            false => format!("refused with {}", refusal.name),
        };
        let line = format!("ng {} {}\n", update.name, why.replace('\n', " "));
        report.extend(pkt_line(line.as_bytes()));
    }
    report.extend_from_slice(FLUSH);
    if !commands.side_band() {
        return report;
    }
    let mut banded = Vec::new();
    for chunk in report.chunks(65_000) {
        let mut payload = vec![1u8];
        payload.extend_from_slice(chunk);
        banded.extend(pkt_line(&payload));
    }
    banded.extend_from_slice(FLUSH);
    banded
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const Z: &str = "0000000000000000000000000000000000000000";

    fn body(lines: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for line in lines {
            out.extend(pkt_line(line.as_bytes()));
        }
        out.extend_from_slice(FLUSH);
        out.extend_from_slice(b"PACK....");
        out
    }

    fn update(old: &str, new: &str, name: &str) -> RefUpdate {
        RefUpdate {
            old: old.into(),
            new: new.into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_commands_are_read_up_to_the_flush() {
        let first = format!("{A} {B} refs/heads/agent/w1\0report-status side-band-64k agent=git/2");
        let second = format!("{A} {B} refs/heads/main\n");
        let bytes = body(&[&format!("shallow {A}"), &first, &second]);
        let (commands, used) = read_commands(&bytes).unwrap().unwrap();
        assert_eq!(&bytes[used..], b"PACK....");
        assert_eq!(
            commands.updates,
            vec![
                update(A, B, "refs/heads/agent/w1"),
                update(A, B, "refs/heads/main")
            ]
        );
        assert!(commands.side_band());
        assert_eq!(commands.capabilities[0], "report-status");
    }

    #[test]
    fn a_short_start_asks_for_more_and_nonsense_is_refused() {
        let bytes = body(&[&format!("{A} {B} refs/heads/agent/w1\0report-status")]);
        for cut in [0, 3, 10, bytes.len() - 12] {
            assert_eq!(read_commands(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
        let table: &[(&[u8], PktError)] = &[
            (
                b"zzzz",
                PktError::Malformed("[122, 122, 122, 122] is no pkt-line length".into()),
            ),
            (
                b"0002",
                PktError::Malformed("a pkt-line of length 2".into()),
            ),
            (&pkt_line(b"push-cert\0report-status"), PktError::PushCert),
        ];
        for (bytes, want) in table {
            assert_eq!(read_commands(bytes).unwrap_err(), *want);
        }
        assert!(matches!(
            read_commands(&body(&["not an update"])),
            Err(PktError::Malformed(_))
        ));
        let long = format!("{A} {B} refs/heads/{}", "x".repeat(60_000));
        let mut huge = Vec::new();
        while huge.len() <= MAX_COMMANDS_BYTES + 60_000 {
            huge.extend(pkt_line(long.as_bytes()));
        }
        assert_eq!(read_commands(&huge), Err(PktError::TooLong));
    }

    #[test]
    fn only_the_agents_own_branch_may_be_pushed_and_never_deleted() {
        let own = "refs/heads/agent/w1";
        let table: &[(&[RefUpdate], Result<(), &str>)] = &[
            (&[update(A, B, own)], Ok(())),
            (&[update(Z, B, own)], Ok(())),
            (&[update(A, B, "refs/heads/main")], Err("refs/heads/main")),
            (
                &[update(A, B, "refs/heads/agent/w2")],
                Err("refs/heads/agent/w2"),
            ),
            (
                &[update(A, B, "refs/heads/agent/w1x")],
                Err("refs/heads/agent/w1x"),
            ),
            (&[update(A, B, "refs/tags/v1")], Err("refs/tags/v1")),
            (
                &[update(A, B, own), update(A, B, "refs/heads/main")],
                Err("refs/heads/main"),
            ),
            (&[update(A, Z, own)], Err(own)),
        ];
        for (updates, want) in table {
            let got = decide(updates, "agent/w1").map_err(|r| r.name);
            assert_eq!(got, want.map_err(String::from), "{updates:?}");
        }
        let deleted = decide(&[update(A, Z, own)], "agent/w1").unwrap_err();
        assert!(
            deleted.why.contains("may not be deleted"),
            "{}",
            deleted.why
        );
    }

    #[test]
    fn why_git_refused_an_update() {
        let u = update(A, B, "refs/heads/agent/w1");
        let c = "3333333333333333333333333333333333333333";
        assert_eq!(why_git_refused(&u, Some(A), Some(B), Some(true)), None);
        let table = [
            (Some(A), Some(A), Some(false), "non-fast-forward"),
            (Some(c), Some(c), Some(false), "non-fast-forward"),
            (Some(c), Some(c), None, "moved since"),
            (Some(A), Some(A), None, "git refused"),
            (None, None, None, "moved since"),
        ];
        for (before, after, ancestor, want) in table {
            let why = why_git_refused(&u, before, after, ancestor).unwrap();
            assert!(why.contains(want), "{before:?} {ancestor:?}: {why}");
        }
    }

    #[test]
    fn a_refusal_is_reported_in_gits_words_in_side_band_when_asked() {
        let commands = Commands {
            updates: vec![update(A, B, "refs/heads/main")],
            capabilities: vec!["report-status".into()],
        };
        let refusal = Refusal {
            name: "refs/heads/main".into(),
            why: "no".into(),
        };
        let plain = b"000eunpack ok\n001ang refs/heads/main no\n0000".to_vec();
        assert_eq!(refusal_report(&commands, &refusal), plain);
        let banded = Commands {
            capabilities: vec!["side-band-64k".into()],
            ..commands
        };
        let mut want = pkt_line(&[&[1u8][..], &plain].concat());
        want.extend_from_slice(FLUSH);
        assert_eq!(refusal_report(&banded, &refusal), want);
    }
}
