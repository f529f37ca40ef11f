//! Reading one variable: the value set, or else its default from its declaration
//! ([`Var`]), parsed, with an error that names the variable and the value. A default in
//! parentheses (`(auto)`, `(unset)`) describes what happens without a value: such a
//! variable reads as none when it is not set.

use std::ops::RangeInclusive;
use std::str::FromStr;

use super::variables::Var;
use crate::error::Error;

/// The error of a value that should be a non-negative integer.
pub(super) const NOT_AN_INTEGER: &str = "expected a non-negative integer";

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

    /// The value `var` is set to (trimmed; empty counts as unset).
    pub(super) fn set<T>(&self, var: &Var<T>) -> Option<String> {
        (self.lookup)(var.name())
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// The value of `var` (set, or its default when that is a value) parsed, or `None`
    /// when it has neither.
    pub(super) fn optional<T>(&self, var: &Var<T>) -> Result<Option<T>, Error> {
        self.set(var)
            .or_else(|| var.about.default_value().map(str::to_string))
            .map(|v| (var.parse)(&v).map_err(|why| bad(var.name(), &v, why)))
            .transpose()
    }

    /// Like [`Self::optional`] for a variable whose default is a value.
    ///
    /// # Panics
    /// If `var`'s declaration gives no value as its default (a unit test reads every
    /// variable with nothing set).
    pub(super) fn read<T>(&self, var: &Var<T>) -> Result<T, Error> {
        Ok(self.optional(var)?.unwrap_or_else(|| {
            panic!(
                "{} is read as having a default value, and has none",
                var.name()
            )
        }))
    }
}

/// A number in `range`; `what` names what it counts, for the error.
pub(super) fn number<T>(v: &str, range: RangeInclusive<T>, what: &str) -> Result<T, String>
where
    T: FromStr + PartialOrd + std::fmt::Display,
{
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
}

/// A non-negative integer.
pub(super) fn parse_u64(v: &str) -> Result<u64, String> {
    v.parse::<u64>().map_err(|_| NOT_AN_INTEGER.to_string())
}

/// One of `choices` (matched without regard to case; a later name for a value already
/// listed is an alias, left out of the error).
pub(super) fn choice<T: Copy + PartialEq>(v: &str, choices: &[(&str, T)]) -> Result<T, String> {
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

/// Parses a flag: 0/1, true/false, yes/no, on/off.
pub(super) fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("expected 0/1, true/false, yes/no or on/off".into()),
    }
}
