//! C `printf` formatting on the host, for [`printf!`](crate::printf!) on the CPU executor.

extern crate std;

use core::ffi::CStr;
use std::format;
pub(super) use std::string::String;
use std::string::ToString;

use super::Arg;

/// One conversion's flags, width and precision.
#[derive(Default)]
struct Spec {
    left: bool,
    plus: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
}

impl Spec {
    /// `body` padded to the width (zeros after the sign when `0` is set for a number).
    fn pad(&self, body: String, numeric: bool) -> String {
        let len = body.chars().count();
        if len >= self.width {
            return body;
        }
        let fill = self.width - len;
        if self.left {
            body + &" ".repeat(fill)
        } else if self.zero && numeric && self.precision.is_none() {
            let sign = body.starts_with(['-', '+']) as usize;
            format!("{}{}{}", &body[..sign], "0".repeat(fill), &body[sign..])
        } else {
            " ".repeat(fill) + &body
        }
    }
}

/// An integer argument widened to i128 (pointers and floats are not integers).
fn integer(a: Option<&Arg>) -> Option<i128> {
    match a? {
        Arg::I32(v) => Some(*v as i128),
        Arg::U32(v) => Some(*v as i128),
        Arg::I64(v) => Some(*v as i128),
        Arg::U64(v) => Some(*v as i128),
        Arg::Ptr(p) | Arg::Str(p) => Some(*p as usize as i128),
        Arg::F64(_) => None,
    }
}

/// `%e` of `v` with `prec` digits, as C writes it (`1.500000e+03`).
fn exponent(v: f64, prec: usize, upper: bool) -> String {
    let s = format!("{v:.prec$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    let out = format!("{mantissa}e{sign}{:02}", exp.unsigned_abs());
    if upper {
        out.to_uppercase()
    } else {
        out
    }
}

/// `%g` of `v`: `%e` or `%f`, whichever C picks, without trailing zeros.
fn general(v: f64, prec: usize, upper: bool) -> String {
    let p = prec.max(1);
    let exp = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i32
    };
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if exp < -4 || exp >= p as i32 {
        let e = exponent(v, p - 1, upper);
        let (m, rest) = e.split_at(e.find(['e', 'E']).unwrap_or(e.len()));
        trim(m.to_string()) + rest
    } else {
        trim(format!("{v:.*}", (p as i32 - 1 - exp).max(0) as usize))
    }
}

/// Appends `format` (without its NUL) with `args` to `out`.
pub(super) fn format_into(out: &mut String, format: &[u8], args: &[Arg]) {
    let mut args = args.iter();
    let mut i = 0;
    while i < format.len() {
        let start = i;
        while i < format.len() && format[i] != b'%' {
            i += 1;
        }
        out.push_str(&String::from_utf8_lossy(&format[start..i]));
        if i >= format.len() {
            break;
        }
        i += 1;
        let mut spec = Spec::default();
        while let Some(&f) = format.get(i) {
            match f {
                b'-' => spec.left = true,
                b'+' => spec.plus = true,
                b'0' => spec.zero = true,
                b' ' | b'#' => {}
                _ => break,
            }
            i += 1;
        }
        while let Some(d) = format.get(i).filter(|c| c.is_ascii_digit()) {
            spec.width = spec.width * 10 + (d - b'0') as usize;
            i += 1;
        }
        if format.get(i) == Some(&b'.') {
            i += 1;
            let mut p = 0;
            while let Some(d) = format.get(i).filter(|c| c.is_ascii_digit()) {
                p = p * 10 + (d - b'0') as usize;
                i += 1;
            }
            spec.precision = Some(p);
        }
        while matches!(format.get(i), Some(b'l' | b'h' | b'z' | b'j' | b't' | b'L')) {
            i += 1;
        }
        let Some(&conv) = format.get(i) else { break };
        i += 1;
        let signed = |v: i128| {
            if spec.plus && v >= 0 {
                format!("+{v}")
            } else {
                v.to_string()
            }
        };
        let float = |a: Option<&Arg>| match a {
            Some(Arg::F64(v)) => *v,
            other => integer(other).unwrap_or(0) as f64,
        };
        let (body, numeric) = match conv {
            b'%' => ("%".to_string(), false),
            b'd' | b'i' => (signed(integer(args.next()).unwrap_or(0)), true),
            b'u' => (integer(args.next()).unwrap_or(0).to_string(), true),
            b'x' => (format!("{:x}", integer(args.next()).unwrap_or(0)), true),
            b'X' => (format!("{:X}", integer(args.next()).unwrap_or(0)), true),
            b'o' => (format!("{:o}", integer(args.next()).unwrap_or(0)), true),
            b'p' => (format!("{:#x}", integer(args.next()).unwrap_or(0)), false),
            b'c' => {
                let c = integer(args.next()).unwrap_or(0) as u32;
                (char::from_u32(c).unwrap_or('\u{FFFD}').to_string(), false)
            }
            b's' => match args.next() {
                Some(Arg::Str(p)) if !p.is_null() => {
                    // SAFETY: `%s` arguments are `&CStr`s (`Arg::from`), alive for the call.
                    let s = unsafe { CStr::from_ptr(p.cast()) }.to_string_lossy();
                    let s: String = match spec.precision {
                        Some(n) => s.chars().take(n).collect(),
                        None => s.into_owned(),
                    };
                    (s, false)
                }
                _ => ("(null)".to_string(), false),
            },
            b'f' | b'F' => {
                let v = float(args.next());
                let body = format!("{v:.*}", spec.precision.unwrap_or(6));
                let plus = if spec.plus && v >= 0.0 { "+" } else { "" };
                (format!("{plus}{body}"), true)
            }
            b'e' | b'E' => {
                let v = float(args.next());
                (exponent(v, spec.precision.unwrap_or(6), conv == b'E'), true)
            }
            b'g' | b'G' => {
                let v = float(args.next());
                (general(v, spec.precision.unwrap_or(6), conv == b'G'), true)
            }
            other => (format!("%{}", other as char), false),
        };
        out.push_str(&spec.pad(body, numeric));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(format: &str, args: &[Arg]) -> String {
        let mut out = String::new();
        format_into(&mut out, format.as_bytes(), args);
        out
    }

    #[test]
    fn integers_as_c_prints_them() {
        let args = [Arg::I32(-42), Arg::U32(7), Arg::U64(255), Arg::I64(3)];
        assert_eq!(
            printed("%d|%5u|%-4x|%+lld|%%", &args),
            "-42|    7|ff  |+3|%"
        );
        assert_eq!(
            printed(
                "%05d %X %o %c",
                &[Arg::I32(-7), Arg::U32(0xab), Arg::U32(8), Arg::U32(65)]
            ),
            "-0007 AB 10 A"
        );
    }

    #[test]
    fn floats_as_c_prints_them() {
        let args = [
            Arg::F64(1.5),
            Arg::F64(1500.0),
            Arg::F64(0.0001),
            Arg::F64(2.0),
        ];
        assert_eq!(
            printed("%f %.2e %g %8.3f", &args),
            "1.500000 1.50e+03 0.0001    2.000"
        );
        assert_eq!(
            printed("%g %G", &[Arg::F64(1e-7), Arg::F64(123456789.0)]),
            "1e-07 1.23457E+08"
        );
    }

    #[test]
    fn strings_and_pointers() {
        let s = c"symmem";
        let args = [Arg::from(s), Arg::from(s), Arg::Ptr(0x1000 as *const u8)];
        assert_eq!(printed("%s %.3s %p", &args), "symmem sym 0x1000");
        // A missing argument prints as C's common fallback, not garbage.
        assert_eq!(printed("%s %d", &[]), "(null) 0");
    }
}
