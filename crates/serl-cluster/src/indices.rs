//! Index lists as engines write them: `0-3,7,9-10`.

use crate::error::ClusterError;

/// `values` (sorted or not) as ranges: `[0, 1, 2, 3, 7]` is `0-3,7`.
pub fn format(values: &[usize]) -> String {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        while i + 1 < v.len() && v[i + 1] == v[i] + 1 {
            i += 1;
        }
        parts.push(if v[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", v[i])
        });
        i += 1;
    }
    parts.join(",")
}

/// The longest range a list may hold (a plan is never near it).
const MAX_RANGE: usize = 10_000_000;

/// The list [`format`] writes, in order.
pub fn parse(text: &str) -> Result<Vec<usize>, ClusterError> {
    let bad = |part: &str| {
        ClusterError::Config(format!(
            "`{part}` in the index list `{text}` is not an index or a range a-b"
        ))
    };
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (
                    a.parse().map_err(|_| bad(part))?,
                    b.parse().map_err(|_| bad(part))?,
                );
                if b < a || b - a > MAX_RANGE {
                    return Err(bad(part));
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad(part))?),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip_through_ranges() {
        assert_eq!(format(&[7, 0, 1, 2, 3, 9, 10]), "0-3,7,9-10");
        assert_eq!(parse("0-3,7,9-10").unwrap(), [0, 1, 2, 3, 7, 9, 10]);
        assert_eq!(format(&[]), "");
        assert!(parse("3-1").is_err());
        assert!(parse("0-99999999999").is_err(), "no unbounded allocation");
        assert!(parse("a").unwrap_err().to_string().contains("`a`"));
    }
}
