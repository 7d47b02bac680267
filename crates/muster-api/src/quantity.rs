//! Kubernetes resource quantities (`resource.Quantity`), parsed exactly.
//!
//! `k8s-openapi` keeps a quantity as the string the user wrote. The scheduler needs numbers, so this
//! module parses the Kubernetes grammar (`apimachinery/pkg/api/resource/quantity.go`):
//!
//! ```text
//! quantity        ::= signedNumber suffix
//! suffix          ::= binarySI | decimalExponent | decimalSI
//! binarySI        ::= Ki | Mi | Gi | Ti | Pi | Ei
//! decimalSI       ::= n | u | m | "" | k | M | G | T | P | E
//! decimalExponent ::= ("e" | "E") signedNumber
//! number          ::= digits | digits "." digits | digits "." | "." digits
//! ```
//!
//! The value is held exactly as a count of nano-units in an `i128` (Kubernetes' own smallest scale is
//! 10⁻⁹; finer fractions are rounded up, as upstream does). That covers ±1.7·10²⁹ units, far more than
//! any real resource; larger values are rejected rather than silently capped.

use std::cmp::Ordering;
use std::fmt;

const NANO: i128 = 1_000_000_000;

/// An exactly parsed quantity: a signed number of nano-units.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    nanos: i128,
}

/// Why a string is not a quantity. The message matches upstream's wording where upstream has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Format,
    #[error("unknown quantity suffix {0:?}")]
    Suffix(String),
    #[error("quantity is too large")]
    TooLarge,
    /// A resource quantity below zero (`ValidateResourceQuantityValue`; the quantity grammar
    /// allows a sign, resource lists do not).
    #[error("must be greater than or equal to 0")]
    Negative,
}

impl Quantity {
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// A quantity of `n` whole units.
    pub fn from_units(n: i64) -> Self {
        Quantity { nanos: n as i128 * NANO }
    }

    /// A quantity of `n` nano-units.
    pub fn from_nanos(nanos: i128) -> Self {
        Quantity { nanos }
    }

    /// A quantity of `n` milli-units.
    pub fn from_millis(n: i64) -> Self {
        Quantity { nanos: n as i128 * 1_000_000 }
    }

    /// The exact value in nano-units.
    pub fn nanos(self) -> i128 {
        self.nanos
    }

    /// `Quantity.MilliValue()`: the value in milli-units, rounded up, saturated to `i64`.
    pub fn milli_value(self) -> i64 {
        saturate(div_ceil(self.nanos, 1_000_000))
    }

    /// `Quantity.Value()`: the value in whole units, rounded up, saturated to `i64`.
    pub fn value(self) -> i64 {
        saturate(div_ceil(self.nanos, NANO))
    }

    /// The value as a float, as `AsApproximateFloat64` gives it.
    pub fn as_f64(self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        self.nanos.checked_add(other.nanos).map(|nanos| Quantity { nanos })
    }

    pub fn checked_sub(self, other: Quantity) -> Option<Quantity> {
        self.nanos.checked_sub(other.nanos).map(|nanos| Quantity { nanos })
    }

    pub fn is_zero(self) -> bool {
        self.nanos == 0
    }

    pub fn signum(self) -> i32 {
        match self.nanos.cmp(&0) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }
    }
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Quantity({}n)", self.nanos)
    }
}

impl fmt::Display for Quantity {
    /// Prints the exact decimal value in units (`1.5`, `250m` prints as `0.25`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let whole = abs / NANO as u128;
        let frac = abs % NANO as u128;
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let digits = format!("{frac:09}");
            write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

fn saturate(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b > 0 { q + 1 } else { q }
}

/// Parses a Kubernetes quantity string.
pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
    match parse_plain(s) {
        Some(q) => Ok(q),
        None => parse_general(s),
    }
}

/// The shapes nearly every request and capacity has (`4`, `250m`, `16Gi`: at most 12 digits and
/// no suffix or one of the usual ones), without the general path's 128-bit divisions; `None`
/// for anything else, which [`parse_general`] reads. Both give the same quantity (tested).
fn parse_plain(s: &str) -> Option<Quantity> {
    let b = s.as_bytes();
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 12 {
        return None;
    }
    const NANO: i128 = 1_000_000_000;
    let per_unit: i128 = match &s[digits..] {
        "" => NANO,
        "m" => 1_000_000,
        "k" => 1_000 * NANO,
        "M" => 1_000_000 * NANO,
        "G" => 1_000_000_000 * NANO,
        "T" => 1_000_000_000_000 * NANO,
        "Ki" => (1 << 10) * NANO,
        "Mi" => (1 << 20) * NANO,
        "Gi" => (1 << 30) * NANO,
        "Ti" => (1 << 40) * NANO,
        _ => return None,
    };
    let mantissa = b[..digits].iter().fold(0i128, |m, c| m * 10 + i128::from(c - b'0'));
    Some(Quantity { nanos: mantissa * per_unit })
}

/// Any quantity string: sign, decimal point, every suffix and exponent, rounding up below a
/// nano-unit.
fn parse_general(s: &str) -> Result<Quantity, QuantityError> {
    let s = s.trim();
    let bytes = s.as_bytes();
    if bytes.is_empty() {
        return Err(QuantityError::Format);
    }
    let mut i = 0;
    let negative = match bytes[0] {
        b'+' => {
            i = 1;
            false
        }
        b'-' => {
            i = 1;
            true
        }
        _ => false,
    };
    // Mantissa digits as an exact integer plus the count of digits after the decimal point.
    let mut mantissa: i128 = 0;
    let mut frac_digits: i32 = 0;
    let mut seen_digit = false;
    let mut seen_point = false;
    // Digits beyond what i128 can hold only matter if they are non-zero fractions; track that.
    let mut dropped_nonzero = false;
    let mut int_overflow_digits: i32 = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_digit() {
            seen_digit = true;
            let d = (c - b'0') as i128;
            match mantissa.checked_mul(10).and_then(|m| m.checked_add(d)) {
                Some(m) if m < i128::MAX / 1_000_000_000_000 => {
                    mantissa = m;
                    if seen_point {
                        frac_digits += 1;
                    }
                }
                _ => {
                    if seen_point {
                        dropped_nonzero |= d != 0;
                    } else {
                        int_overflow_digits += 1;
                    }
                }
            }
        } else if c == b'.' && !seen_point {
            seen_point = true;
        } else {
            break;
        }
        i += 1;
    }
    if !seen_digit {
        return Err(QuantityError::Format);
    }
    if int_overflow_digits > 0 {
        return Err(QuantityError::TooLarge);
    }
    let suffix = &s[i..];
    // The suffix fixes a base and an exponent: value = mantissa * 10^-frac_digits * base^exp.
    let (base, exp): (i128, i32) = match suffix {
        "" => (10, 0),
        "n" => (10, -9),
        "u" => (10, -6),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E']).ok_or_else(|| {
                if suffix.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-') {
                    QuantityError::Suffix(suffix.to_string())
                } else {
                    QuantityError::Format
                }
            })?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QuantityError::Suffix(suffix.to_string()));
            }
            let e: i32 = rest.parse().map_err(|_| QuantityError::TooLarge)?;
            if !(-1000..=1000).contains(&e) {
                return Err(QuantityError::TooLarge);
            }
            (10, e)
        }
    };
    // nanos = mantissa * base^exp * 10^(9 - frac_digits), rounded up when it is not whole.
    let mut num: i128 = mantissa;
    let mut den: i128 = 1;
    let mul = |v: i128, f: i128| v.checked_mul(f).ok_or(QuantityError::TooLarge);
    let pow10 = |n: i32| -> Result<i128, QuantityError> { 10i128.checked_pow(n as u32).ok_or(QuantityError::TooLarge) };
    if base == 2 {
        num = mul(num, 1i128 << exp)?;
    }
    let dec_exp = if base == 10 { exp } else { 0 } + 9 - frac_digits;
    if dec_exp >= 0 {
        if num != 0 {
            num = mul(num, pow10(dec_exp)?)?;
        }
    } else if -dec_exp > 38 {
        // Far below a nano-unit: anything non-zero rounds up to one nano-unit.
        den = 0;
    } else {
        den = pow10(-dec_exp)?;
    }
    let mut nanos = if den == 0 { i128::from(num != 0) } else { div_ceil(num, den) };
    if dropped_nonzero && nanos == 0 {
        nanos = 1;
    }
    if negative {
        nanos = -nanos;
    }
    Ok(Quantity { nanos })
}

/// How a quantity is written, as Kubernetes keeps it to print the quantity back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `k`, `M`, `m`, or no suffix.
    DecimalSI,
    /// `Ki`, `Mi`, `Gi`, ...
    BinarySI,
    /// `1e3`.
    DecimalExponent,
}

/// The format of a quantity string (its suffix), as `ParseQuantity` records it.
pub fn format_of(s: &str) -> Format {
    let t = s.trim_end_matches(|c: char| c.is_ascii_digit() || c == '+' || c == '-');
    if t.ends_with('i') {
        Format::BinarySI
    } else if t.ends_with(['e', 'E']) && !t.ends_with("Ee") {
        Format::DecimalExponent
    } else {
        Format::DecimalSI
    }
}

impl Quantity {
    /// Kubernetes' canonical text (`Quantity.String()`): binary suffixes for whole values of at
    /// least 1024 that were written in binary form, decimal suffixes otherwise.
    pub fn canonical(self, format: Format) -> String {
        let n = self.nanos;
        if format == Format::BinarySI && n.abs() >= 1024 * NANO && n % NANO == 0 {
            let mut v = n / NANO;
            let mut e = 0;
            while e < 6 && v % 1024 == 0 {
                v /= 1024;
                e += 1;
            }
            return format!("{v}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][e]);
        }
        if n == 0 {
            return "0".into();
        }
        // The largest power of 1000 (from nano up) that divides the value exactly.
        let mut exp = -9i32;
        let mut m = n;
        while exp < 18 && m % 1000 == 0 {
            m /= 1000;
            exp += 3;
        }
        if format == Format::DecimalExponent {
            return if exp == 0 { m.to_string() } else { format!("{m}e{exp}") };
        }
        let suffix = match exp {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            _ => "E",
        };
        format!("{m}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text() {
        let c = |s: &str| q(s).canonical(format_of(s));
        assert_eq!(c("1024Mi"), "1Gi");
        assert_eq!(c("1536Mi"), "1536Mi");
        assert_eq!(c("2Gi"), "2Gi");
        assert_eq!(c("512"), "512");
        assert_eq!(c("2000"), "2k");
        assert_eq!(c("1500m"), "1500m");
        assert_eq!(c("0.5"), "500m");
        assert_eq!(c("100Ki"), "100Ki");
        assert_eq!(c("0"), "0");
        assert_eq!(Quantity::from_units(1000).canonical(Format::BinarySI), "1k", "below 1024 falls back to decimal");
    }

    fn q(s: &str) -> Quantity {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_the_kubernetes_suffixes() {
        assert_eq!(q("1").value(), 1);
        assert_eq!(q("250m").milli_value(), 250);
        assert_eq!(q("0.5").milli_value(), 500);
        assert_eq!(q(".5").milli_value(), 500);
        assert_eq!(q("5.").value(), 5);
        assert_eq!(q("1Ki").value(), 1024);
        assert_eq!(q("80Gi").value(), 80 * (1 << 30));
        assert_eq!(q("81559Mi").value(), 81559 * (1 << 20));
        assert_eq!(q("1.5Gi").value(), 3 * (1 << 29));
        assert_eq!(q("2k").value(), 2000);
        assert_eq!(q("1M").value(), 1_000_000);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1E3").value(), 1000);
        assert_eq!(q("1e-3").milli_value(), 1);
        assert_eq!(q("100n").nanos(), 100);
        assert_eq!(q("3u").nanos(), 3000);
        assert_eq!(q("+4").value(), 4);
        assert_eq!(q("-4").value(), -4);
        assert_eq!(q("8Ei").value(), i64::MAX, "saturates like Value() would overflow");
    }

    #[test]
    fn rounds_up_like_value_and_milli_value() {
        assert_eq!(q("1500m").value(), 2);
        assert_eq!(q("0.1m").milli_value(), 1);
        assert_eq!(q("1n").milli_value(), 1);
        assert_eq!(q("0.0000000001").nanos(), 1, "finer than nano rounds up");
        assert_eq!(q("1.0000000001").nanos(), NANO + 1);
    }

    #[test]
    fn h100_memory_is_less_than_80gi() {
        assert!(q("81559Mi") < q("80Gi"));
        assert!(q("1Gi") > q("1G"));
        assert_eq!(q("1000m"), q("1"));
    }

    #[test]
    fn rejects_malformed_quantities() {
        for bad in ["", "abc", "1GB", "1gi", "--1", "1.2.3", "1e", "1e+", "Gi", "1 Gi", "1Kii", "e3"] {
            assert!(parse(bad).is_err(), "{bad:?} should not parse");
        }
        assert_eq!(parse("1GB"), Err(QuantityError::Suffix("GB".into())));
        assert_eq!(parse("1e5000"), Err(QuantityError::TooLarge));
    }

    #[test]
    fn displays_exact_units() {
        assert_eq!(q("250m").to_string(), "0.25");
        assert_eq!(q("2").to_string(), "2");
        assert_eq!(q("-1500m").to_string(), "-1.5");
    }

    proptest::proptest! {
        #[test]
        fn the_plain_shapes_parse_as_the_general_path_reads_them(
            digits in "[0-9]{1,13}",
            suffix in proptest::sample::select(vec!["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "Pi", "u", "e3", " "]),
        ) {
            let s = format!("{digits}{suffix}");
            if let Some(fast) = super::parse_plain(&s) {
                proptest::prop_assert_eq!(Ok(fast), super::parse_general(&s));
            }
        }

        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = parse(&s);
        }

        #[test]
        fn binary_suffixes_scale_by_1024(n in 0i64..1_000_000) {
            proptest::prop_assert_eq!(q(&format!("{n}Mi")), q(&format!("{}Ki", n * 1024)));
            proptest::prop_assert_eq!(q(&format!("{n}m")).milli_value(), n);
        }
    }
}
