//! When a usage or rate limit ends, read from the words a CLI prints about it (pure):
//!
//! - a delay: `try again in 2h 14m`, `It will reset in 2 hours 14 minutes`, `retrying in 18s`,
//!   `Retrying in 0.2 seconds`;
//! - a clock time: `resets 3pm`, `resets 3:34am (UTC)`, `try again at 4:02 AM`,
//!   `Access resets at 4:01 AM UTC`.
//!
//! A clock time is the next one to come after the limit was first seen (today's, else
//! tomorrow's; a minute's grace, as CLIs show hours and minutes): so it stays where it was
//! once it has passed, while a delay counts from the look that read it. It is read as UTC: the
//! CLIs print their process's local time, and agent containers run in UTC; for a host session
//! in another zone the caller must shift it by that zone's offset.

use std::sync::LazyLock;

use chrono::{DateTime, Duration, NaiveTime, Utc};
use regex::Regex;

/// The units a delay is written in (`2h`, `14 minutes`, `18s`, `0.2 seconds`).
const UNIT: &str = r"h|hours?|hrs?|m|min|mins|minutes?|s|sec|secs|seconds?";

static DELAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\bin ((?:\d+(?:\.\d+)?\s*(?:{UNIT})\b[\s,]*(?:and\s+)?)+)"
    ))
    .expect("the delay pattern compiles")
});

static PART: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?i)(\d+(?:\.\d+)?)\s*({UNIT})\b")).expect("the part pattern compiles")
});

static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:resets?|again at|continue automatically at|until)\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?")
        .expect("the clock pattern compiles")
});

/// When the limit `text` speaks of ends, first seen at `first_seen` and read at `now`; none
/// when it names no time.
pub fn reset_time(
    text: &str,
    first_seen: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let grace = Duration::minutes(1);
    clock(text, first_seen - grace).or_else(|| delay(text).map(|d| now + d))
}

/// `in 2h 14m` and its kin.
fn delay(text: &str) -> Option<Duration> {
    let found = DELAY.captures(text)?;
    let mut millis = 0f64;
    for part in PART.captures_iter(found.get(1)?.as_str()) {
        let n: f64 = part[1].parse().ok()?;
        let unit = part[2].to_ascii_lowercase();
        millis += n * match unit.chars().next()? {
            'h' => 3_600_000.0,
            'm' => 60_000.0,
            _ => 1_000.0,
        };
    }
    Some(Duration::milliseconds(millis.round() as i64))
}

/// `resets 3:34am` and its kin: the next such time after `now`.
fn clock(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let found = CLOCK.captures(text)?;
    let mut hour: u32 = found[1].parse().ok()?;
    let minute: u32 = found.get(2).map_or(Some(0), |m| m.as_str().parse().ok())?;
    match found.get(3).map(|m| m.as_str().to_ascii_lowercase()) {
        Some(half) if half.starts_with('p') && hour < 12 => hour += 12,
        Some(half) if half.starts_with('a') && hour == 12 => hour = 0,
        Some(_) => {}
        // A bare number after "resets" with no minutes and no am/pm is no time.
        None if found.get(2).is_none() => return None,
        None => {}
    }
    let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
    let today = now.date_naive().and_time(time).and_utc();
    Some(if today > now {
        today
    } else {
        today + Duration::days(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-11-27T02:00:00Z".parse().unwrap()
    }

    fn at(text: &str) -> Option<String> {
        reset_time(text, now(), now()).map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
    }

    #[test]
    fn a_clock_time_stays_once_it_has_passed_and_a_delay_counts_from_the_look() {
        let later = now() + Duration::minutes(45);
        let text = "try again at 2:30 AM.";
        let passed = reset_time(text, now(), later).unwrap();
        assert_eq!(passed.to_rfc3339(), "2026-11-27T02:30:00+00:00");
        // Shown to the minute: seen at 02:30:20, `2:30` is that minute, not tomorrow's.
        let seen = now() + Duration::seconds(30 * 60 + 20);
        assert_eq!(reset_time(text, seen, seen), Some(passed));
        let countdown = reset_time("retrying in 18s", now(), later).unwrap();
        assert_eq!(countdown, later + Duration::seconds(18));
    }

    #[test]
    fn delays() {
        assert_eq!(
            at("You've hit your usage limit, try again in 2h 14m.").unwrap(),
            "2026-11-27 04:14:00"
        );
        assert_eq!(
            at("Go usage limit reached. It will reset in 2 hours 14 minutes. To continue").unwrap(),
            "2026-11-27 04:14:00"
        );
        assert_eq!(
            at("[retrying in 18s attempt #1]").unwrap(),
            "2026-11-27 02:00:18"
        );
        assert_eq!(
            at("✻ 429 rate limit · retrying in 2s · attempt 3/10").unwrap(),
            "2026-11-27 02:00:02"
        );
    }

    #[test]
    fn clock_times_come_next() {
        assert_eq!(
            at("You've hit your 5-hour limit · resets 3:34am (UTC)").unwrap(),
            "2026-11-27 03:34:00"
        );
        assert_eq!(at("resets 3pm").unwrap(), "2026-11-27 15:00:00");
        assert_eq!(
            at("or try again at 1:02 AM.").unwrap(),
            "2026-11-28 01:02:00"
        );
        assert_eq!(
            at("Access resets at 4:01 AM UTC.").unwrap(),
            "2026-11-27 04:01:00"
        );
        assert_eq!(at("resets at 12am").unwrap(), "2026-11-28 00:00:00");
        assert_eq!(
            at("Usage limit reached · set to continue automatically at 3:34am").unwrap(),
            "2026-11-27 03:34:00"
        );
    }

    #[test]
    fn no_time_named() {
        assert_eq!(at("API Error: Request rejected (429) · rate limited"), None);
        assert_eq!(at("resets 5 times"), None);
        assert_eq!(at("Try again later or check your quotas."), None);
    }
}
