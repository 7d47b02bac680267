//! Go's duration syntax, as `metav1.Duration` fields of a `KubeSchedulerConfiguration` take it
//! (`600s`, `10m`, `1h30m`, `1.5s`, `300ms`): a sign, then numbers each followed by a unit
//! (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), or a bare `0`.

/// The duration in milliseconds (what is below a millisecond is dropped), or what is wrong.
pub fn millis(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?}: not a duration (such as 600s, 10m or 1h30m)");
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| bad())?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        nanos += number * scale;
        rest = &rest[unit_end..];
    }
    // Go's limit: about 290 years.
    if nanos > i64::MAX as f64 {
        return Err(format!("{text:?}: too long a duration"));
    }
    let ms = (nanos / 1e6) as i64;
    Ok(if negative { -ms } else { ms })
}

#[cfg(test)]
mod tests {
    use super::millis;

    #[test]
    fn go_durations_are_read_as_go_reads_them() {
        assert_eq!(millis("600s"), Ok(600_000));
        assert_eq!(millis("10m"), Ok(600_000));
        assert_eq!(millis("1h30m"), Ok(5_400_000));
        assert_eq!(millis("1.5s"), Ok(1_500));
        assert_eq!(millis("300ms"), Ok(300));
        assert_eq!(millis("0"), Ok(0));
        assert_eq!(millis("-2s"), Ok(-2_000));
        for bad in ["", "10", "s", "1x", "1..5s", "-", "1h 30m"] {
            assert!(millis(bad).is_err(), "{bad:?}");
        }
        assert!(millis("9999999999h").is_err());
    }
}
