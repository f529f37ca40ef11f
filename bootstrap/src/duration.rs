//! Durations that come from outside the program: environment variables
//! (`SYMMEM_BOOTSTRAP_TIMEOUT`, `SYMMEM_TIMEOUT`) and command-line flags (`symrun
//! --kill-grace`).
//!
//! # The rule
//! A duration is a non-negative number of seconds; decimals and exponents are accepted (`30`,
//! `0.5`, `1e3`). One year ([`MAX_WAIT`]) or more, `inf` included, means **no limit**: such
//! a value is held as [`MAX_WAIT`], which no job outlives, so adding it to an [`Instant`]
//! can never overflow (a `Duration` of `1e20` seconds would panic in
//! `Duration::from_secs_f64`, and `1e19` seconds in `Instant + Duration`). `nan`, negative
//! numbers and text that is not a number are errors; the caller names the variable or flag.
//!
//! Deadlines computed from a caller's `Duration` go through [`deadline_after`], which caps
//! the same way, so a library caller passing `Duration::MAX` gets no limit, not a panic.

use std::time::{Duration, Instant};

/// The longest wait symmem tracks: one year. Durations at or above it mean "no limit".
pub const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Parses a number of seconds given from outside, by [the rule](self): values of one year or
/// more (`inf` included) come back as [`MAX_WAIT`], meaning no limit. The error says what
/// was expected; the caller adds the variable or flag and the value.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text.trim().parse().map_err(|_| {
        "expected a number of seconds, e.g. 30 or 0.5 (1 year or more, or inf, = no limit)"
            .to_string()
    })?;
    if secs.is_nan() {
        return Err("expected a number of seconds, not NaN".into());
    }
    if secs < 0.0 {
        return Err("expected a non-negative number of seconds".into());
    }
    if secs >= MAX_WAIT.as_secs_f64() {
        return Ok(MAX_WAIT);
    }
    // Finite, non-negative and below one year here, so this cannot panic.
    Ok(Duration::from_secs_f64(secs))
}

/// Whether `d` means "no limit" under [the rule](self) (one year or more).
pub fn is_unlimited(d: Duration) -> bool {
    d >= MAX_WAIT
}

/// The instant `wait` from now, with `wait` capped at [`MAX_WAIT`] so that it never
/// overflows.
pub fn deadline_after(wait: Duration) -> Instant {
    Instant::now() + wait.min(MAX_WAIT)
}

/// `wait` capped at [`MAX_WAIT`], for code that adds it to instants or other durations.
pub fn capped(wait: Duration) -> Duration {
    wait.min(MAX_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_values() {
        assert_eq!(parse_seconds("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_seconds(" 0.5 "), Ok(Duration::from_millis(500)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert_eq!(parse_seconds("1e3"), Ok(Duration::from_secs(1000)));
    }

    #[test]
    fn huge_values_mean_no_limit() {
        for v in [
            "1e19", "1e20", "1e300", "inf", "+inf", "infinity", "31536000",
        ] {
            let d = parse_seconds(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            assert_eq!(d, MAX_WAIT, "{v}");
            assert!(is_unlimited(d), "{v}");
            // The panic this module exists to prevent.
            let _ = deadline_after(d);
        }
        assert!(!is_unlimited(parse_seconds("31535999").unwrap()));
    }

    #[test]
    fn bad_values_are_errors() {
        for v in ["nan", "NaN", "-1", "-inf", "-0.5", "abc", "", "10s", "1e"] {
            assert!(parse_seconds(v).is_err(), "{v} was accepted");
        }
    }

    #[test]
    fn deadlines_never_overflow() {
        let far = deadline_after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(364 * 24 * 3600));
        assert_eq!(capped(Duration::MAX), MAX_WAIT);
        assert_eq!(capped(Duration::from_secs(5)), Duration::from_secs(5));
    }
}
