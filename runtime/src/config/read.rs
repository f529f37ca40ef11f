//! Reading one variable: the value set, or else its default from [`VARIABLES`], parsed,
//! with an error that names the variable and the value. A default in parentheses
//! (`(auto)`, `(unset)`) describes what happens without a value: such a variable reads as
//! none when it is not set.

use std::ops::RangeInclusive;
use std::str::FromStr;
use std::time::Duration;

use super::variables::VARIABLES;
use crate::error::Error;

/// The variables of one configuration, read through `lookup` (the environment, or a map
/// in tests).
pub(super) struct Reader<F> {
    lookup: F,
}

impl<F: Fn(&str) -> Option<String>> Reader<F> {
    /// Reads through `lookup`.
    pub(super) fn new(lookup: F) -> Self {
        Reader { lookup }
    }

    /// The value `name` is set to (trimmed; empty counts as unset).
    pub(super) fn set(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// The value set, or else the table's default when that is a value.
    ///
    /// # Panics
    /// If `name` is not in [`VARIABLES`]: every variable read is documented there.
    pub(super) fn value(&self, name: &'static str) -> Option<String> {
        self.set(name).or_else(|| {
            let v = VARIABLES
                .iter()
                .find(|v| v.name == name)
                .unwrap_or_else(|| panic!("{name} is read but missing from config::VARIABLES"));
            (!v.default.is_empty() && !v.default.starts_with('(')).then(|| v.default.to_string())
        })
    }

    /// The value of `name` (set, or its default) parsed by `parse`, whose error says what
    /// is wrong; `None` when it has neither.
    pub(super) fn parse<T>(
        &self,
        name: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, Error> {
        self.value(name)
            .map(|v| parse(&v).map_err(|why| bad(name, &v, why)))
            .transpose()
    }

    /// Like [`Self::parse`] for a variable whose default is a value.
    ///
    /// # Panics
    /// If the table gives `name` no value as its default (a unit test reads every
    /// variable with nothing set).
    pub(super) fn parse_or_default<T>(
        &self,
        name: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, Error> {
        Ok(self
            .parse(name, parse)?
            .unwrap_or_else(|| panic!("{name} has no default value in config::VARIABLES")))
    }

    /// A size in bytes (`1024`, `64K`, `512M`, `1G`, `1T`: powers of 1024).
    pub(super) fn size(&self, name: &'static str) -> Result<usize, Error> {
        self.parse_or_default(name, parse_size)
    }

    /// Seconds (one year or more, `inf` included, is no limit).
    pub(super) fn seconds(&self, name: &'static str) -> Result<Duration, Error> {
        self.parse_or_default(name, symmem_bootstrap::duration::parse_seconds)
    }

    /// A flag: 0/1, true/false, yes/no, on/off.
    pub(super) fn flag(&self, name: &'static str) -> Result<bool, Error> {
        self.parse_or_default(name, parse_bool)
    }

    /// A number in `range`; `what` names what it counts, for the error.
    pub(super) fn number<T>(
        &self,
        name: &'static str,
        range: RangeInclusive<T>,
        what: &str,
    ) -> Result<T, Error>
    where
        T: FromStr + PartialOrd + std::fmt::Display,
    {
        self.parse_or_default(name, |v| {
            v.parse::<T>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| {
                    format!(
                        "expected a number of {what} from {} to {}",
                        range.start(),
                        range.end()
                    )
                })
        })
    }

    /// A non-negative integer, or none when unset and without a default.
    pub(super) fn optional_u64(&self, name: &'static str) -> Result<Option<u64>, Error> {
        self.parse(name, |v| {
            v.parse::<u64>()
                .map_err(|_| "expected a non-negative integer".to_string())
        })
    }

    /// One of `choices` (matched without regard to case; a later name for a value already
    /// listed is an alias, left out of the error).
    pub(super) fn choice<T: Copy + PartialEq>(
        &self,
        name: &'static str,
        choices: &[(&str, T)],
    ) -> Result<T, Error> {
        self.parse_or_default(name, |v| {
            choices
                .iter()
                .find(|(c, _)| c.eq_ignore_ascii_case(v))
                .map(|&(_, t)| t)
                .ok_or_else(|| {
                    let mut names: Vec<&str> = Vec::new();
                    for (i, (c, t)) in choices.iter().enumerate() {
                        if !choices[..i].iter().any(|(_, u)| u == t) {
                            names.push(c);
                        }
                    }
                    match names.split_last() {
                        Some((last, [])) => format!("expected {last}"),
                        Some((last, rest)) => format!("expected {} or {last}", rest.join(", ")),
                        None => "no value is valid".into(),
                    }
                })
        })
    }
}

/// The error of variable `var` set to `value`.
pub(super) fn bad(var: &'static str, value: &str, why: impl Into<String>) -> Error {
    Error::Config {
        var,
        value: value.to_string(),
        reason: why.into(),
    }
}

/// The non-empty, trimmed items of a comma-separated list.
pub(super) fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Parses `1024`, `64K`, `512M`, `1G`, `1T` (powers of 1024; an optional trailing `B`/`iB`).
pub(super) fn parse_size(v: &str) -> Result<usize, String> {
    let upper = v.to_ascii_uppercase();
    let trimmed = upper.trim_end_matches("IB").trim_end_matches('B');
    let (digits, shift) = match trimmed.chars().last() {
        Some('K') => (&trimmed[..trimmed.len() - 1], 10),
        Some('M') => (&trimmed[..trimmed.len() - 1], 20),
        Some('G') => (&trimmed[..trimmed.len() - 1], 30),
        Some('T') => (&trimmed[..trimmed.len() - 1], 40),
        _ => (trimmed, 0),
    };
    let n: usize = digits
        .trim()
        .parse()
        .map_err(|_| "expected a size such as 1073741824, 512M or 1G".to_string())?;
    let bytes = n
        .checked_mul(1usize << shift)
        .ok_or_else(|| "size overflows".to_string())?;
    if bytes == 0 {
        return Err("must be greater than 0".into());
    }
    Ok(bytes)
}

/// Parses a flag.
fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("expected 0/1, true/false, yes/no or on/off".into()),
    }
}
