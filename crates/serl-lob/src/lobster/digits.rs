//! Reading integers and decimal seconds straight from bytes, without
//! going through `str` or a general number parser: the input files are
//! large and their fields are short runs of ASCII digits.

/// A cursor over comma-separated integer fields of one line.
pub(super) struct Fields<'a> {
    pub(super) b: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Fields<'a> {
    #[inline]
    pub(super) fn next_raw(&mut self) -> Option<&'a [u8]> {
        if self.pos > self.b.len() {
            return None;
        }
        let start = self.pos;
        let end = memchr_comma(&self.b[start..]).map_or(self.b.len(), |i| start + i);
        self.pos = end + 1;
        Some(&self.b[start..end])
    }

    #[inline]
    pub(super) fn int(&mut self) -> Option<i64> {
        parse_i64(self.next_raw()?)
    }
}

#[inline]
fn memchr_comma(b: &[u8]) -> Option<usize> {
    memchr::memchr(b',', b)
}

#[inline]
pub(super) fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + d as i64;
    }
    Some(if neg { -v } else { v })
}

/// Splits a buffer into lines, without the line ends.
pub(super) fn lines(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    std::iter::from_fn(move || loop {
        if start >= b.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &b[start..]).map_or(b.len(), |i| start + i);
        let line = &b[start..end];
        start = end + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.is_empty() {
            return Some(line);
        }
    })
}

/// Parses LOBSTER's decimal seconds after midnight (`34200.017459617`)
/// without going through a float parser.
#[inline]
pub(super) fn parse_seconds(s: &[u8]) -> Option<f64> {
    let (int, frac) = match memchr::memchr(b'.', s) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &b""[..]),
    };
    let whole = parse_i64(int)?;
    if frac.is_empty() {
        return Some(whole as f64);
    }
    if frac.len() > 15 {
        return None;
    }
    let f = parse_i64(frac)?;
    if f < 0 {
        return None;
    }
    Some(whole as f64 + f as f64 / 10f64.powi(frac.len() as i32))
}

/// Index of the first byte of `chunk` (little-endian) that is not an ASCII
/// digit, or 8. Borrows and carries only run towards higher bytes, so the
/// lowest flagged byte is exact.
#[inline(always)]
pub(super) fn digit_run(chunk: u64) -> u32 {
    let below = chunk.wrapping_sub(0x3030_3030_3030_3030);
    let above = chunk.wrapping_add(0x4646_4646_4646_4646);
    let flags = (below | above | chunk) & 0x8080_8080_8080_8080;
    flags.trailing_zeros() / 8
}

/// The value of 8 ASCII digits, first digit in the lowest byte.
#[inline(always)]
fn eight_digits(chunk: u64) -> u64 {
    let mut v = chunk.wrapping_sub(0x3030_3030_3030_3030);
    v = (v.wrapping_mul(10)).wrapping_add(v >> 8);
    let lo = (v & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32));
    let hi = ((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32));
    (lo.wrapping_add(hi)) >> 32
}

const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// Parses an unsigned integer at `*i`, eight digits at a time, and moves
/// `*i` past it. Returns `None` for no digits or more than 18 (so that the
/// value always fits without overflow checks).
#[inline(always)]
pub(super) fn uint_at(b: &[u8], i: &mut usize) -> Option<i64> {
    let mut v: u64 = 0;
    let mut digits = 0u32;
    while *i + 8 <= b.len() {
        let chunk = u64::from_le_bytes(b[*i..*i + 8].try_into().ok()?);
        let n = digit_run(chunk);
        if n == 0 {
            return (digits > 0 && digits <= 18).then_some(v as i64);
        }
        // Left-align the n digits and pad the front with '0's.
        let padded = if n == 8 {
            chunk
        } else {
            (chunk << (8 * (8 - n))) | (0x3030_3030_3030_3030u64 >> (8 * n))
        };
        v = v
            .wrapping_mul(POW10[n as usize])
            .wrapping_add(eight_digits(padded));
        digits += n;
        *i += n as usize;
        if n < 8 {
            return (digits <= 18).then_some(v as i64);
        }
        if digits > 18 {
            return None;
        }
    }
    while let Some(&c) = b.get(*i) {
        if !c.is_ascii_digit() {
            break;
        }
        if digits >= 18 {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
        digits += 1;
        *i += 1;
    }
    (digits > 0).then_some(v as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eight_digit_parser_agrees_with_the_standard_one() {
        let cases = [
            "0",
            "7",
            "42",
            "2239500",
            "12345678",
            "123456789",
            "9999999999",
            "100000000000000000",
        ];
        for c in cases {
            let text = format!("{c},");
            let mut i = 0;
            assert_eq!(
                uint_at(text.as_bytes(), &mut i),
                Some(c.parse().unwrap()),
                "{c}"
            );
            assert_eq!(i, c.len());
        }
        let mut i = 0;
        assert_eq!(uint_at(b"x1", &mut i), None);
        assert_eq!(
            uint_at(b"1234567890123456789", &mut 0),
            None,
            "more than 18 digits"
        );
    }
}
