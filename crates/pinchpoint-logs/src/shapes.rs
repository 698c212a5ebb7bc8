//! The shapes of a line's bytes that the matcher tests at a place: spaces, digits,
//! literals, and the fixed-width times nginx writes (`$time_local`, `$time_iso8601`).

/// Most digits of a number, and of either side of its decimal point.
pub const MAX_DIGITS: usize = 20;

/// Python's `str.isspace()` (and `\s`) on ASCII.
pub fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f | b' ')
}

/// `s.starts_with(prefix)` for the short literals of a format, without a call to memcmp.
#[inline]
pub fn starts_with(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s.iter().zip(prefix).all(|(a, b)| a == b)
}

/// Digits at `at`, at most MAX_DIGITS (`\d{1,20}` takes no more).
pub fn digits(s: &[u8], at: usize) -> usize {
    s.get(at..).map_or(0, |t| {
        t.iter()
            .take(MAX_DIGITS)
            .take_while(|b| b.is_ascii_digit())
            .count()
    })
}

pub const CLF_LEN: usize = 26;
pub const ISO_BASE_LEN: usize = 19;

/// Whether `s` starts with a shape: `d` a digit, `a` an ASCII letter, `s` a sign,
/// anything else itself.
fn shaped(s: &[u8], shape: &[u8]) -> bool {
    s.len() >= shape.len()
        && s.iter().zip(shape).all(|(b, k)| match k {
            b'd' => b.is_ascii_digit(),
            b'a' => b.is_ascii_alphabetic(),
            b's' => *b == b'+' || *b == b'-',
            _ => b == k,
        })
}

pub fn is_clf_time(s: &[u8]) -> bool {
    shaped(s, b"dd/aaa/dddd:dd:dd:dd sdddd")
}

pub fn is_iso_base(s: &[u8]) -> bool {
    shaped(s, b"dddd-dd-ddTdd:dd:dd")
}

pub fn is_offset(s: &[u8]) -> bool {
    shaped(s, b"sdd:dd")
}
