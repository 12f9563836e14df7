//! The keep policy: which document of a cluster is its representative (kept in the deduplicated
//! corpus), by a rule over the facts the read stage knows of each document.
//!
//! Each document gets a *keep key* when it is read, a `u64` where smaller is better; the cluster
//! stage picks the member with the smallest `(key, rank)`. Ranks follow ids, so ties (and the
//! `first` rule, where every key is equal) go to the smallest id. A document whose field is missing
//! or unreadable gets the worst key (`u64::MAX`): it is kept only when no member has the field.

use crate::config::KeepPolicy;
use crate::source::Attributes;
use crate::summary::KeepFieldCounts;

/// The keep key of a document: [`KeepPolicy`] is a setting of the job, the key is this stage's.
pub trait KeepKey {
    /// The keep key of a document with `tokens` tokens and `attributes`: smaller is better; an
    /// error when the rule's field is missing or holds a value the rule cannot use (the caller
    /// counts it, and the document gets [`MISSING`]: it falls back to the tie-break by id).
    fn key(self, tokens: usize, attributes: &Attributes<'_>) -> Result<u64, NoKey>;
}

impl KeepKey for KeepPolicy {
    fn key(self, tokens: usize, attributes: &Attributes<'_>) -> Result<u64, NoKey> {
        let field = || attributes.timestamp.as_deref().ok_or(NoKey::Missing);
        match self {
            KeepPolicy::First => Ok(0),
            KeepPolicy::Longest => Ok(u64::MAX - 1 - tokens as u64),
            KeepPolicy::Newest => {
                let t = timestamp_micros(field()?).ok_or(NoKey::Unusable)?;
                Ok(u64::MAX - 1 - order_i64(t))
            }
            KeepPolicy::Oldest => {
                let t = timestamp_micros(field()?).ok_or(NoKey::Unusable)?;
                Ok(order_i64(t).min(u64::MAX - 1))
            }
            KeepPolicy::Highest => {
                let x: f64 = field()?.trim().parse().map_err(|_| NoKey::Unusable)?;
                if !x.is_finite() {
                    return Err(NoKey::Unusable);
                }
                Ok(u64::MAX - 1 - order_f64(x).min(u64::MAX - 1))
            }
        }
    }
}

/// Why a document has no keep key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoKey {
    /// The record has no such field.
    Missing,
    /// The field holds what the rule cannot use: not a number or date, a number that is not
    /// finite (`inf`, `NaN`, `1e400`), or a time outside the years 1 to 9999 (`1e300`).
    Unusable,
}

/// Counts one document's keep key in `counts`.
pub fn count(counts: &mut KeepFieldCounts, key: &Result<u64, NoKey>) {
    match key {
        Ok(_) => counts.usable += 1,
        Err(NoKey::Missing) => counts.missing += 1,
        Err(NoKey::Unusable) => counts.unusable += 1,
    }
}

/// Microseconds in a second: the unit of a timestamp's keep key (versions of a page written less
/// than a second apart are told apart; whole seconds made them a tie, decided by id: probe 12).
const MICROS: i64 = 1_000_000;

/// The earliest and latest time a timestamp may name, in microseconds since 1970: the years 1 to
/// 9999.
pub const TIMESTAMP_RANGE: std::ops::RangeInclusive<i64> =
    -62_135_596_800 * MICROS..=253_402_300_799 * MICROS + (MICROS - 1);

/// The key of a document whose field is missing: after every other.
pub const MISSING: u64 = u64::MAX;

/// `i64` to `u64` preserving order.
fn order_i64(x: i64) -> u64 {
    (x as u64) ^ (1 << 63)
}

/// `f64` (not NaN) to `u64` preserving order.
fn order_f64(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Microseconds since 1970 of a timestamp as records write them: a number (Unix seconds; a value
/// above 10^11 is taken as milliseconds; a fraction counts to the microsecond), or ISO 8601 / RFC
/// 3339 (`2024-05-01`, `2024-05-01T12:00:00Z`, `2024-05-01 12:00:00.5+02:00`, as `WARC-Date` and
/// most JSON writers do). `None` if it is neither, names no such day (`2024-02-31`), or is a time
/// outside [`TIMESTAMP_RANGE`].
pub fn timestamp_micros(s: &str) -> Option<i64> {
    parse_timestamp(s).filter(|t| TIMESTAMP_RANGE.contains(t))
}

/// [`timestamp_micros`] without the range check.
fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim().trim_matches('"');
    if let Some(t) = decimal_micros(s) {
        return Some(t);
    }
    if let Ok(x) = s.parse::<f64>() {
        if !x.is_finite() {
            return None;
        }
        let micros = if x.abs() > 1e11 { x * 1e3 } else { x * 1e6 };
        // Out of i64's range saturates, and is then out of TIMESTAMP_RANGE too.
        return Some(micros.floor() as i64);
    }
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(num_of);
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
        return None;
    }
    let mut micros = days_from_civil(year, month, day) * 86_400 * MICROS;
    let mut rest = &s[10..];
    if let Some(t) = rest.strip_prefix(['T', 't', ' ']) {
        let (time, used) = time_of_day_micros(t)?;
        micros += time;
        rest = &t[used..];
    }
    match rest {
        "" | "Z" | "z" => Some(micros),
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let z = rest[1..].replace(':', "");
            if z.len() != 4 {
                return None;
            }
            let offset = num_of(z.get(0..2)?)? * 3600 + num_of(z.get(2..4)?)? * 60;
            Some(micros - sign * offset * MICROS)
        }
    }
}

/// The time of day at the start of `t` (`HH:MM`, `HH:MM:SS` or `HH:MM:SS.fraction`) in
/// microseconds, and the bytes it takes.
fn time_of_day_micros(t: &str) -> Option<(i64, usize)> {
    let tb = t.as_bytes();
    if tb.len() < 5 || tb[2] != b':' {
        return None;
    }
    let (h, m) = (num_of(t.get(0..2)?)?, num_of(t.get(3..5)?)?);
    let (mut sec, mut fraction, mut used) = (0, 0, 5);
    if tb.len() >= 8 && tb[5] == b':' {
        sec = num_of(t.get(6..8)?)?;
        used = 8;
        if tb.get(8) == Some(&b'.') {
            let digits = t[9..].bytes().take_while(u8::is_ascii_digit).count();
            fraction = fraction_digits(&t[9..9 + digits], 6);
            used = 9 + digits;
        }
    }
    if h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some(((h * 3600 + m * 60 + sec) * MICROS + fraction, used))
}

/// A plain decimal number (`-?DIGITS(.DIGITS)?`) of seconds, or of milliseconds when above 10^11,
/// in microseconds, exactly: no float rounds a Parquet timestamp's fraction (written so by the
/// reader) or a JSON number's. A fraction past the microsecond is floored. `None` if `s` is not
/// of that form or overflows (the float path then takes it, and the range refuses it).
fn decimal_micros(s: &str) -> Option<i64> {
    let (negative, body) = match s.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, s),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || int.len() > 18 || !digits(int) || !digits(frac) {
        return None;
    }
    let whole: i64 = int.parse().ok()?;
    let millis =
        whole > 100_000_000_000 || (whole == 100_000_000_000 && frac.bytes().any(|b| b != b'0'));
    let (scale, kept) = if millis { (1_000, 3) } else { (MICROS, 6) };
    let magnitude = whole
        .checked_mul(scale)?
        .checked_add(fraction_digits(frac, kept))?;
    let past = frac.bytes().skip(kept).any(|b| b != b'0');
    Some(if negative {
        -magnitude - i64::from(past)
    } else {
        magnitude
    })
}

/// The first `n` digits of a fraction's `digits` as a number of 10^-n units (missing ones zero).
fn fraction_digits(digits: &str, n: usize) -> i64 {
    let b = digits.as_bytes();
    (0..n).fold(0, |acc, k| {
        acc * 10 + b.get(k).map_or(0, |d| i64::from(d - b'0'))
    })
}

/// Days in `month` of `year` (proleptic Gregorian).
fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A run of ASCII digits as a number (`None` if empty or anything else).
fn num_of(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn at(value: &str) -> Attributes<'static> {
        Attributes {
            bytes: 0,
            timestamp: Some(Cow::Owned(value.to_string())),
        }
    }

    #[test]
    fn timestamps_parse_as_records_write_them() {
        let secs = |t: &str| timestamp_micros(t).map(|m| m.div_euclid(MICROS));
        assert_eq!(secs("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(secs("2024-05-01T12:00:00Z"), Some(1_714_564_800));
        assert_eq!(secs("2024-05-01"), Some(1_714_521_600));
        assert_eq!(secs("2024-05-01 14:00:00.25+02:00"), Some(1_714_564_800));
        assert_eq!(secs("2024-05-01T07:00:00-0500"), Some(1_714_564_800));
        assert_eq!(secs("1714564800"), Some(1_714_564_800));
        assert_eq!(secs("1714564800000"), Some(1_714_564_800));
        assert_eq!(secs("1969-12-31T23:59:59Z"), Some(-1));
        assert_eq!(secs("2024-02-29"), Some(1_709_164_800));
        for bad in [
            "",
            "yesterday",
            "2024-13-01",
            "2024-05-01T25:00:00Z",
            "2024-05-01Tnoon",
            "2024-02-31",
            "2023-02-29",
            "2024-04-31T00:00:00Z",
        ] {
            assert_eq!(timestamp_micros(bad), None, "{bad:?}");
        }
    }

    /// Defect (probe 12): the keep key was whole seconds, so two versions of a page written less
    /// than a second apart (milliseconds, an ISO fraction, a Parquet or WARC/1.1 time) were a tie,
    /// and `newest` kept the one with the smaller id, dropping the newer from the corpus.
    #[test]
    fn times_less_than_a_second_apart_are_told_apart_to_the_microsecond() {
        for (older, newer) in [
            ("2020-05-05T00:00:00.1Z", "2020-05-05T00:00:00.9Z"),
            ("1588636800100", "1588636800900"),
            ("1588636800.1", "1588636800.9"),
            ("1588636800.000001", "1588636800.000002"),
            (
                "2020-05-05T00:00:00.000001+00:00",
                "2020-05-05T00:00:00.000002Z",
            ),
            ("-0.5", "-0.25"),
        ] {
            let (o, n) = (timestamp_micros(older), timestamp_micros(newer));
            assert!(o.is_some() && o < n, "{older} {newer}");
            let (ko, kn) = (at(older), at(newer));
            assert!(KeepPolicy::Newest.key(0, &kn) < KeepPolicy::Newest.key(0, &ko));
            assert!(KeepPolicy::Oldest.key(0, &ko) < KeepPolicy::Oldest.key(0, &kn));
        }
        // One time written three ways is one key.
        let one = ["2020-05-05T00:00:00.1Z", "1588636800100", "1588636800.100"];
        assert!(one
            .iter()
            .all(|t| timestamp_micros(t) == Some(1_588_636_800_100_000)));
        assert_eq!(timestamp_micros("-0.5"), Some(-500_000));
        assert_eq!(timestamp_micros("-0.0000005"), Some(-1), "floored");
    }

    #[test]
    fn a_wide_character_inside_the_time_is_unreadable_not_a_panic() {
        // Regression: the time was sliced by byte positions, and a character of several bytes
        // across one of them panicked the worker (a hostile JSON Lines field).
        for bad in [
            "2024-05-01T12:日",
            "2024-05-01T12:00:日",
            "2024-05-01T12:00+0日",
        ] {
            assert_eq!(timestamp_micros(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn keep_values_out_of_range_or_not_finite_are_unusable() {
        // Regression (issue 16.11): 1e300 seconds became the newest of times (i64 saturated), and
        // "inf" or "1e400" the highest of scores.
        for p in [KeepPolicy::Newest, KeepPolicy::Oldest] {
            for v in [
                "1e300",
                "-1e300",
                "inf",
                "NaN",
                "1e400",
                "99999999999999999",
            ] {
                assert_eq!(p.key(0, &at(v)), Err(NoKey::Unusable), "{p:?} {v}");
            }
            assert!(p.key(0, &at("9999-12-31T23:59:59Z")).is_ok());
            assert!(p.key(0, &at("0001-01-01")).is_ok());
            assert!(p.key(0, &at("1700000000000")).is_ok(), "milliseconds");
        }
        let p = KeepPolicy::Highest;
        for v in ["inf", "-inf", "Infinity", "NaN", "1e400", "-1e400"] {
            assert_eq!(p.key(0, &at(v)), Err(NoKey::Unusable), "{v}");
        }
        assert!(p.key(0, &at("1e300")) < p.key(0, &at("1e299")));
        assert_eq!(timestamp_micros("1e300"), None);
    }

    #[test]
    fn keys_order_documents_as_each_rule_says() {
        let none = Attributes::default();
        let p = KeepPolicy::Longest;
        assert!(p.key(100, &none) < p.key(99, &none));
        let p = KeepPolicy::Newest;
        assert!(p.key(0, &at("2024-05-02")) < p.key(0, &at("2024-05-01T23:00:00Z")));
        assert_eq!(p.key(0, &none), Err(NoKey::Missing));
        let p = KeepPolicy::Oldest;
        assert!(p.key(0, &at("1960-01-01")) < p.key(0, &at("2024-05-01")));
        let p = KeepPolicy::Highest;
        let keys: Vec<u64> = ["3.5", "2", "0", "-1", "-7.25"]
            .iter()
            .map(|v| p.key(0, &at(v)).unwrap())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        assert!(keys.iter().all(|&k| k < MISSING));
        assert_eq!(p.key(0, &at("high")), Err(NoKey::Unusable));
        assert_eq!(
            KeepPolicy::First.key(5, &none),
            KeepPolicy::First.key(9, &none)
        );
    }
}
