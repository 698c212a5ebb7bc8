//! Field values as the Python parser computes them: `float()` of a number, the sum of a
//! per-upstream time list, Unix seconds of a Common Log Format or ISO 8601 time.

use crate::shapes::is_space;

/// Longest time a request can take, in seconds (a week), as `MAX_DURATION_S` in
/// `logformats/base.py`: a logged duration beyond it is damage.
pub const MAX_DURATION_S: f64 = 7.0 * 24.0 * 3600.0;

/// `duration()` of `logformats/base.py`: a time from 0 to MAX_DURATION_S, else None (NaN too).
pub fn duration(seconds: f64) -> Option<f64> {
    (0.0..=MAX_DURATION_S).contains(&seconds).then_some(seconds)
}

/// `float(text)` of `\d+(?:\.\d+)?`, None for anything else (such as `-`).
pub fn number(text: &[u8]) -> Option<f64> {
    let dot = text.iter().position(|b| *b == b'.');
    let (int, frac) = match dot {
        Some(d) => (&text[..d], &text[d + 1..]),
        None => (text, &text[..0]),
    };
    if int.is_empty() || !int.iter().all(u8::is_ascii_digit) || !frac.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    if dot.is_some() && frac.is_empty() {
        return None;
    }
    // Exact when the digits fit in 2^53 and the power of ten is exact: one correctly
    // rounded division, as Python's correctly rounded parse gives.
    if int.len() + frac.len() <= 15 && frac.len() <= 22 {
        let mantissa = int
            .iter()
            .chain(frac)
            .fold(0u64, |m, b| m * 10 + u64::from(b - b'0'));
        return Some(mantissa as f64 / POWERS[frac.len()]);
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

const POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// `int(text)` of `\d{3}` (a logged status) from 100 to 999; None for `-` or `000`.
pub fn status(text: &[u8]) -> Option<i32> {
    if text.is_empty() || text.len() > 9 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let code = text.iter().fold(0i32, |v, b| v * 10 + i32::from(b - b'0'));
    (100..=999).contains(&code).then_some(code)
}

/// `sum_upstream`: the sum of a per-upstream time list (`0.010, 0.020 : 0.005`), None
/// when it holds no time. `compensated` sums as Python 3.12+ does (Neumaier), else left
/// to right as Python 3.11.
pub fn sum_upstream(text: &[u8], compensated: bool) -> Option<f64> {
    if text == b"-" {
        return None;
    }
    if !text.iter().any(|b| *b == b',' || *b == b':') {
        return number(text);
    }
    let mut items = text
        .split(|b| *b == b',' || *b == b':' || is_space(*b))
        .filter(|t| !t.is_empty());
    let mut sum: Option<f64> = None;
    let mut c = 0.0f64;
    for item in items.by_ref() {
        if item == b"-" {
            continue;
        }
        let x = number(item)?;
        sum = Some(match sum {
            None => x,
            Some(f) => {
                let t = f + x;
                if compensated {
                    c += if f.abs() >= x.abs() {
                        (f - t) + x
                    } else {
                        (x - t) + f
                    };
                }
                t
            }
        });
    }
    sum.map(|f| if c != 0.0 && c.is_finite() { f + c } else { f })
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

fn int(text: &[u8]) -> i64 {
    text.iter().fold(0i64, |v, b| v * 10 + i64::from(b - b'0'))
}

/// Unix seconds of a wall-clock time `offset_s` ahead of UTC; None where Python's
/// `datetime` refuses the date or time.
fn unix(date: (i64, i64, i64), time: (i64, i64, i64), offset_s: i64) -> Option<f64> {
    let (year, month, day) = date;
    let (hour, minute, second) = time;
    let valid = (1..=9999).contains(&year)
        && (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && hour <= 23
        && minute <= 59
        && second <= 59;
    if !valid {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some((seconds - offset_s) as f64)
}

const MONTHS: [&[u8; 3]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
];

/// `parse_clf_time` of a matched `dd/Mon/yyyy:hh:mm:ss +hhmm`: None for an unknown month,
/// a date or time `datetime` refuses, or an offset of a day or more.
pub fn clf_time(t: &[u8]) -> Option<f64> {
    if t.len() != 26 {
        return None;
    }
    let name = [
        t[3].to_ascii_lowercase(),
        t[4].to_ascii_lowercase(),
        t[5].to_ascii_lowercase(),
    ];
    let month = MONTHS.iter().position(|m| **m == name)? as i64 + 1;
    let offset_min = int(&t[22..24]) * 60 + int(&t[24..26]);
    if offset_min >= 24 * 60 {
        return None;
    }
    let sign = if t[21] == b'-' { -1 } else { 1 };
    let date = (int(&t[7..11]), month, int(&t[0..2]));
    let time = (int(&t[12..14]), int(&t[15..17]), int(&t[18..20]));
    unix(date, time, sign * offset_min * 60)
}

/// What `datetime.fromisoformat` gives for a matched `yyyy-mm-ddThh:mm:ss[+hh:mm|Z]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IsoTime {
    Seconds(f64),
    Invalid,
    /// Hour 24, or an offset of 60 minutes or more: Python versions differ; ask Python.
    Unsure,
}

pub fn iso_time(t: &[u8]) -> IsoTime {
    let date = (int(&t[0..4]), int(&t[5..7]), int(&t[8..10]));
    let time = (int(&t[11..13]), int(&t[14..16]), int(&t[17..19]));
    let mut offset_s = 0;
    if t.len() == 25 {
        let (hours, minutes) = (int(&t[20..22]), int(&t[23..25]));
        if minutes >= 60 || hours >= 24 {
            return IsoTime::Unsure;
        }
        offset_s = (hours * 3600 + minutes * 60) * if t[19] == b'-' { -1 } else { 1 };
    }
    if time.0 == 24 {
        return IsoTime::Unsure;
    }
    unix(date, time, offset_s).map_or(IsoTime::Invalid, IsoTime::Seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_as_python_floats() {
        assert_eq!(number(b"0.012"), Some(0.012));
        assert_eq!(number(b"1795338900.123"), Some(1795338900.123));
        assert_eq!(number(b"000.5"), Some(0.5));
        assert_eq!(
            number(b"12345678901234567890.123456789"),
            Some(12345678901234567890.123456789)
        );
        assert_eq!(number(b"1".repeat(400).as_slice()), Some(f64::INFINITY));
        assert_eq!(number(b"-"), None);
        assert_eq!(number(b"1."), None);
        assert_eq!(number(b""), None);
        assert_eq!(status(b"502"), Some(502));
        assert_eq!(status(b"-"), None);
        assert_eq!(status(b"000"), None);
        assert_eq!(status(b"099"), None);
    }

    #[test]
    fn durations_are_finite_and_at_most_a_week() {
        assert_eq!(duration(0.0), Some(0.0));
        assert_eq!(duration(MAX_DURATION_S), Some(604_800.0));
        assert_eq!(duration(604_800.001), None);
        assert_eq!(duration(f64::INFINITY), None);
        assert_eq!(duration(f64::NAN), None);
        assert_eq!(duration(-0.001), None);
    }

    #[test]
    fn upstream_sums() {
        assert_eq!(sum_upstream(b"-", false), None);
        assert_eq!(sum_upstream(b"- : -", false), None);
        assert_eq!(sum_upstream(b"0.004", false), Some(0.004));
        assert_eq!(sum_upstream(b"-, 0.020", false), Some(0.020));
        assert_eq!(sum_upstream(b"0.010, 0.020", false), Some(0.010 + 0.020));
        assert_eq!(
            sum_upstream(b"0.1, 0.2 : 0.3", false),
            Some(0.1 + 0.2 + 0.3)
        );
        // Python 3.12's sum: 0.1 + 0.2 + 0.3 is 0.6 there, 0.6000000000000001 in 3.11.
        assert_eq!(sum_upstream(b"0.1, 0.2 : 0.3", true), Some(0.6));
    }

    #[test]
    fn clf_times() {
        // 22/Nov/2026:10:15:00 +0100 is 09:15:00 UTC.
        assert_eq!(clf_time(b"22/Nov/2026:10:15:00 +0100"), Some(1795338900.0));
        assert_eq!(clf_time(b"22/nov/2026:08:45:00 -0030"), Some(1795338900.0));
        assert_eq!(clf_time(b"01/Jan/1970:00:00:00 +0000"), Some(0.0));
        assert_eq!(clf_time(b"29/Feb/2024:00:00:00 +0000"), Some(1709164800.0));
        assert_eq!(clf_time(b"29/Feb/2026:00:00:00 +0000"), None);
        assert_eq!(clf_time(b"22/Xyz/2026:10:15:00 +0100"), None);
        assert_eq!(clf_time(b"22/Nov/0000:10:15:00 +0100"), None);
        assert_eq!(clf_time(b"22/Nov/2026:24:15:00 +0100"), None);
        assert_eq!(clf_time(b"22/Nov/2026:10:15:00 +2400"), None);
        assert_eq!(
            clf_time(b"22/Nov/2026:10:15:00 -2359"),
            Some(1795338900.0 + 3600.0 + 86340.0)
        );
    }

    #[test]
    fn iso_times() {
        assert_eq!(
            iso_time(b"2026-11-22T09:15:00"),
            IsoTime::Seconds(1795338900.0)
        );
        assert_eq!(
            iso_time(b"2026-11-22T09:15:00Z"),
            IsoTime::Seconds(1795338900.0)
        );
        assert_eq!(
            iso_time(b"2026-11-22T10:15:00+01:00"),
            IsoTime::Seconds(1795338900.0)
        );
        assert_eq!(iso_time(b"2026-02-29T10:15:00+01:00"), IsoTime::Invalid);
        assert_eq!(iso_time(b"2026-11-22T24:00:00"), IsoTime::Unsure);
        assert_eq!(iso_time(b"2026-11-22T10:00:00+05:99"), IsoTime::Unsure);
    }
}
