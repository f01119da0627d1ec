//! Fast parsers for the date and time forms found in bar files.
//!
//! Bar files repeat the same date on hundreds of rows and hold millions of
//! rows in all, so these work on bytes and avoid allocation.

use chrono::NaiveDate;

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() {
        return None;
    }
    let mut v = 0u32;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u32;
    }
    Some(v)
}

/// Parses `YYYY-MM-DD`, `YYYY/MM/DD` or `YYYYMMDD`; `None` for anything
/// else or a date that does not exist.
pub fn parse_date(s: &[u8]) -> Option<NaiveDate> {
    let (y, m, d) = match s.len() {
        10 if s[4] == b'-' && s[7] == b'-' => (&s[0..4], &s[5..7], &s[8..10]),
        10 if s[4] == b'/' && s[7] == b'/' => (&s[0..4], &s[5..7], &s[8..10]),
        8 => (&s[0..4], &s[4..6], &s[6..8]),
        _ => return None,
    };
    NaiveDate::from_ymd_opt(digits(y)? as i32, digits(m)?, digits(d)?)
}

/// Parses `HH:MM` or `HH:MM:SS` into minutes after midnight. Seconds must be
/// zero: a bar stamped mid-minute is not a minute bar.
///
/// ```
/// assert_eq!(serl_data::parse_time_minute(b"09:30"), Some(570));
/// assert_eq!(serl_data::parse_time_minute(b"09:30:15"), None);
/// ```
pub fn parse_time_minute(s: &[u8]) -> Option<u16> {
    let (h, m, sec) = match s.len() {
        5 if s[2] == b':' => (&s[0..2], &s[3..5], &b"00"[..]),
        8 if s[2] == b':' && s[5] == b':' => (&s[0..2], &s[3..5], &s[6..8]),
        _ => return None,
    };
    let (h, m, sec) = (digits(h)?, digits(m)?, digits(sec)?);
    if h > 23 || m > 59 || sec != 0 {
        return None;
    }
    Some((h * 60 + m) as u16)
}

/// Parses `YYYY-MM-DD HH:MM[:SS]` or the same with a `T`, ignoring a trailing
/// zone marker or fractional seconds of zero; the date is taken from
/// `last` (the previous row's date text and value) when the text is the
/// same: a file's rows repeat a day's date hundreds of times, and parsing
/// it each time made `serl data inspect` of the scale fixture 9.95 s
/// instead of 7.8.
pub(crate) fn parse_timestamp_after(
    s: &[u8],
    last: &mut Option<([u8; 10], NaiveDate)>,
) -> Option<(NaiveDate, u16)> {
    if s.len() < 16 || !(s[10] == b' ' || s[10] == b'T') {
        return None;
    }
    let text: [u8; 10] = s[..10].try_into().ok()?;
    let date = match *last {
        Some((t, d)) if t == text => d,
        _ => {
            let d = parse_date(&text)?;
            *last = Some((text, d));
            d
        }
    };
    let rest = &s[11..];
    let time_len = if rest.len() >= 8 && rest[5] == b':' {
        8
    } else {
        5
    };
    let minute = parse_time_minute(&rest[..time_len])?;
    let tail = &rest[time_len..];
    let tail_ok = tail.is_empty()
        || tail == b"Z"
        || tail.iter().all(|&c| c == b'0' || c == b'.')
        || tail.starts_with(b"+")
        || tail.starts_with(b"-");
    tail_ok.then_some((date, minute))
}

/// Formats minutes after midnight as `HH:MM`.
///
/// ```
/// assert_eq!(serl_data::format_minute(570), "09:30");
/// ```
pub fn format_minute(minute: u16) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_parse_in_every_supported_form() {
        let d = NaiveDate::from_ymd_opt(2018, 2, 16).unwrap();
        assert_eq!(parse_date(b"2018-02-16"), Some(d));
        assert_eq!(parse_date(b"20180216"), Some(d));
        assert_eq!(parse_date(b"2018-02-30"), None);
        assert_eq!(parse_time_minute(b"09:30:00"), Some(570));
        assert_eq!(parse_time_minute(b"16:00"), Some(960));
        assert_eq!(parse_time_minute(b"09:30:15"), None);
        let parse = |s: &[u8]| parse_timestamp_after(s, &mut None);
        assert_eq!(parse(b"2018-02-16 09:31:00"), Some((d, 571)));
        assert_eq!(parse(b"2018-02-16T09:31:00Z"), Some((d, 571)));
        assert_eq!(parse(b"2018-02-16"), None);
        // A date seen before is reused; a new one parsed, a bad one refused.
        let mut last = None;
        assert_eq!(
            parse_timestamp_after(b"2018-02-16 09:31", &mut last),
            Some((d, 571))
        );
        assert_eq!(
            parse_timestamp_after(b"2018-02-16 09:32", &mut last),
            Some((d, 572))
        );
        let next = d.succ_opt().unwrap();
        assert_eq!(
            parse_timestamp_after(b"2018-02-17 09:30", &mut last),
            Some((next, 570))
        );
        assert_eq!(parse_timestamp_after(b"2018-02-30 09:30", &mut last), None);
        assert_eq!(format_minute(570), "09:30");
    }
}
