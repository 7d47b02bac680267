//! The function library: CEL's standard functions, the strings and lists extensions, and the
//! Kubernetes libraries (quantity, semver, regex, lists, sets), plus DRA's `includes`.
//!
//! The names (and receiver or global style) each function accepts are listed in [`FUNCTIONS`];
//! the checker rejects anything else at compile time.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::eval::{Ctx, EvalError, display, equal, quantity_arg, semver_of};
use crate::value::{Value, compare_numbers};

/// (name, receiver style?, accepted argument counts) for every supported function.
pub const FUNCTIONS: &[(&str, bool, &[usize])] = &[
    // CEL standard library.
    ("size", false, &[1]),
    ("size", true, &[0]),
    ("contains", true, &[1]),
    ("startsWith", true, &[1]),
    ("endsWith", true, &[1]),
    ("matches", true, &[1]),
    ("matches", false, &[2]),
    ("int", false, &[1]),
    ("uint", false, &[1]),
    ("double", false, &[1]),
    ("string", false, &[1]),
    ("bytes", false, &[1]),
    ("bool", false, &[1]),
    ("dyn", false, &[1]),
    ("type", false, &[1]),
    // Strings extension (cel-go ext.Strings, version 2).
    ("charAt", true, &[1]),
    ("indexOf", true, &[1, 2]),
    ("lastIndexOf", true, &[1, 2]),
    ("lowerAscii", true, &[0]),
    ("upperAscii", true, &[0]),
    ("replace", true, &[2, 3]),
    ("split", true, &[1, 2]),
    ("substring", true, &[1, 2]),
    ("trim", true, &[0]),
    ("join", true, &[0, 1]),
    ("reverse", true, &[0]),
    ("strings.quote", false, &[1]),
    // Kubernetes regex library.
    ("find", true, &[1]),
    ("findAll", true, &[1, 2]),
    // Kubernetes lists library.
    ("isSorted", true, &[0]),
    ("sum", true, &[0]),
    ("min", true, &[0]),
    ("max", true, &[0]),
    // Kubernetes quantity library.
    ("quantity", false, &[1]),
    ("isQuantity", false, &[1]),
    ("compareTo", true, &[1]),
    ("isLessThan", true, &[1]),
    ("isGreaterThan", true, &[1]),
    ("add", true, &[1]),
    ("sub", true, &[1]),
    ("sign", true, &[0]),
    ("isInteger", true, &[0]),
    ("asInteger", true, &[0]),
    ("asApproximateFloat", true, &[0]),
    // Kubernetes semver library.
    ("semver", false, &[1, 2]),
    ("isSemver", false, &[1, 2]),
    ("major", true, &[0]),
    ("minor", true, &[0]),
    ("patch", true, &[0]),
    // Optional types.
    ("optional.of", false, &[1]),
    ("optional.ofNonZeroValue", false, &[1]),
    ("optional.none", false, &[0]),
    ("hasValue", true, &[0]),
    ("value", true, &[0]),
    ("orValue", true, &[1]),
    ("or", true, &[1]),
    // Kubernetes sets library.
    ("sets.contains", false, &[2]),
    ("sets.equivalent", false, &[2]),
    ("sets.intersects", false, &[2]),
    // DRA.
    ("includes", true, &[1]),
];

type R = Result<Value, EvalError>;

fn e(pos: u32, msg: impl Into<String>) -> EvalError {
    EvalError { pos, msg: msg.into() }
}

fn bad(pos: u32, func: &str, recv: &Option<Value>, args: &[Value]) -> EvalError {
    let mut types: Vec<&str> = Vec::new();
    if let Some(r) = recv {
        types.push(r.type_name());
    }
    types.extend(args.iter().map(Value::type_name));
    e(pos, format!("no such overload: {func}({})", types.join(", ")))
}

fn s(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn ord_to_int(o: Ordering) -> Value {
    Value::Int(match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}

/// Character index → byte offset, or an error past the end.
fn char_offset(text: &str, idx: i64, pos: u32) -> Result<usize, EvalError> {
    if idx < 0 {
        return Err(e(pos, format!("index out of range: {idx}")));
    }
    let mut count = 0i64;
    for (b, _) in text.char_indices() {
        if count == idx {
            return Ok(b);
        }
        count += 1;
    }
    if count == idx { Ok(text.len()) } else { Err(e(pos, format!("index out of range: {idx}"))) }
}

fn compare_values(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::Quantity(x), Value::Quantity(y)) => Some(x.cmp(y)),
        (Value::Semver(x), Value::Semver(y)) => Some(x.cmp(y)),
        _ => compare_numbers(a, b),
    }
}

/// cel-go's and Kubernetes' runtime cost of one call (the overload's own cost; arguments are
/// charged as they are evaluated).
fn call_cost(func: &str, recv: Option<&Value>, args: &[Value]) -> u64 {
    fn chars(v: Option<&Value>) -> u64 {
        match v {
            Some(Value::String(s)) => s.chars().count() as u64,
            Some(Value::Bytes(b)) => b.len() as u64,
            Some(Value::List(l)) => l.len() as u64,
            Some(Value::Map(m)) => m.len() as u64,
            _ => 1,
        }
    }
    /// Kubernetes' `traversalCost`: strings by bytes rounded down, lists and maps by their
    /// elements' traversal costs.
    fn traversal(v: &Value) -> u64 {
        match v {
            Value::String(s) => s.len() as u64 / 10,
            Value::Bytes(b) => b.len() as u64 / 10,
            Value::List(l) => l.iter().map(traversal).sum(),
            Value::Map(m) => m.iter().map(|(k, v)| traversal(k) + traversal(v)).sum(),
            _ => 1,
        }
    }
    let ceil = |n: u64, f: f64| (n as f64 * f).ceil() as u64;
    let first = args.first();
    match func {
        "quantity" | "isQuantity" | "semver" | "isSemver" => ceil(chars(first), 0.1),
        "startsWith" | "endsWith" | "bytes" | "strings.quote" => ceil(chars(recv.or(first)), 0.1),
        "matches" if recv.is_some() => ceil(chars(recv) + 1, 0.1) * ceil(chars(first), 0.25),
        "find" | "findAll" => ceil(chars(recv) + 1, 0.1) * ceil(chars(first), 0.25),
        "contains" => ceil(chars(recv), 0.1) * ceil(chars(first), 0.1),
        "lowerAscii" | "upperAscii" | "substring" | "trim" => ceil(chars(recv), 0.1),
        "replace" | "split" => ceil(chars(recv), 0.2),
        "isSorted" | "sum" | "min" | "max" | "indexOf" | "lastIndexOf" => recv.map_or(1, traversal),
        "sets.contains" | "sets.intersects" => 1 + chars(first) * chars(args.get(1)),
        "sets.equivalent" => 1 + 2 * chars(first) * chars(args.get(1)),
        "or" | "orValue" => 0,
        _ => 1,
    }
}

pub fn call(ctx: &mut Ctx<'_>, func: &str, recv: Option<Value>, args: &[Value], pos: u32) -> R {
    use Value::*;
    ctx.charge_n(call_cost(func, recv.as_ref(), args), pos)?;
    let fail = |recv: &Option<Value>, args: &[Value]| bad(pos, func, recv, args);
    let args_slice = args;
    // Receiver-style calls on an optional.
    if let Some(Optional(o)) = &recv {
        return match (func, args) {
            ("hasValue", []) => Ok(Bool(o.is_some())),
            ("value", []) => o.as_deref().cloned().ok_or_else(|| e(pos, "optional.none() dereference")),
            ("orValue", [d]) => Ok(o.as_deref().cloned().unwrap_or_else(|| d.clone())),
            ("or", [Optional(other)]) => Ok(Optional(o.clone().or_else(|| other.clone()))),
            _ => Err(fail(&recv, args)),
        };
    }
    match (func, recv.as_ref(), args_slice) {
        // --- standard library ---
        ("size", None, [x]) | ("size", Some(x), []) => match x {
            String(t) => Ok(Int(t.chars().count() as i64)),
            Bytes(b) => Ok(Int(b.len() as i64)),
            List(l) => Ok(Int(l.len() as i64)),
            Map(m) => Ok(Int(m.len() as i64)),
            AttrDomain(d) => Ok(Int(ctx.device.attr_entries(*d).count() as i64)),
            CapDomain(d) => Ok(Int(ctx.device.cap_entries(*d).count() as i64)),
            Attributes => Ok(Int(ctx.device.attr_domains().len() as i64)),
            Capacity => Ok(Int(ctx.device.cap_domains().len() as i64)),
            _ => Err(fail(&recv, args)),
        },
        ("contains", Some(String(t)), [String(x)]) => Ok(Bool(t.contains(x.as_ref()))),
        ("startsWith", Some(String(t)), [String(x)]) => Ok(Bool(t.starts_with(x.as_ref()))),
        ("endsWith", Some(String(t)), [String(x)]) => Ok(Bool(t.ends_with(x.as_ref()))),
        ("matches", Some(String(t)), [String(re)]) | ("matches", None, [String(t), String(re)]) => {
            Ok(Bool(ctx.regex(re, pos)?.is_match(t)))
        }
        ("int", None, [x]) => match x {
            Int(i) => Ok(Int(*i)),
            UInt(u) => i64::try_from(*u).map(Int).map_err(|_| e(pos, "integer overflow")),
            Double(d) if d.is_finite() && *d > -9.223372036854776e18 && *d < 9.223372036854776e18 => Ok(Int(*d as i64)),
            Double(_) => Err(e(pos, "integer overflow")),
            String(t) => {
                t.parse().map(Int).map_err(|_| e(pos, format!("type conversion error from 'string' to 'int': {t}")))
            }
            _ => Err(fail(&recv, args)),
        },
        ("uint", None, [x]) => match x {
            UInt(u) => Ok(UInt(*u)),
            Int(i) => u64::try_from(*i).map(UInt).map_err(|_| e(pos, "unsigned integer overflow")),
            Double(d) if d.is_finite() && *d >= 0.0 && *d < 1.8446744073709552e19 => Ok(UInt(*d as u64)),
            Double(_) => Err(e(pos, "unsigned integer overflow")),
            String(t) => {
                t.parse().map(UInt).map_err(|_| e(pos, format!("type conversion error from 'string' to 'uint': {t}")))
            }
            _ => Err(fail(&recv, args)),
        },
        ("double", None, [x]) => match x {
            Double(d) => Ok(Double(*d)),
            Int(i) => Ok(Double(*i as f64)),
            UInt(u) => Ok(Double(*u as f64)),
            String(t) => t
                .parse()
                .map(Double)
                .map_err(|_| e(pos, format!("type conversion error from 'string' to 'double': {t}"))),
            _ => Err(fail(&recv, args)),
        },
        ("string", None, [x]) => match x {
            String(_) => Ok(x.clone()),
            Int(_) | UInt(_) | Bool(_) | Double(_) => Ok(Value::string(&display(x))),
            Bytes(b) => std::str::from_utf8(b).map(Value::string).map_err(|_| e(pos, "invalid UTF-8 in bytes")),
            _ => Err(fail(&recv, args)),
        },
        ("bytes", None, [String(t)]) => Ok(Bytes(t.as_bytes().into())),
        ("bytes", None, [Bytes(b)]) => Ok(Bytes(b.clone())),
        ("bool", None, [Bool(b)]) => Ok(Bool(*b)),
        ("bool", None, [String(t)]) => match t.as_ref() {
            "1" | "t" | "true" | "TRUE" | "True" => Ok(Bool(true)),
            "0" | "f" | "false" | "FALSE" | "False" => Ok(Bool(false)),
            _ => Err(e(pos, format!("type conversion error from 'string' to 'bool': {t}"))),
        },
        ("dyn", None, [x]) => Ok(x.clone()),
        ("type", None, [x]) => Ok(Type(x.type_name())),

        // --- strings extension ---
        ("charAt", Some(String(t)), [Int(i)]) => {
            let start = char_offset(t, *i, pos)?;
            Ok(Value::string(t[start..].chars().next().map(|c| c.to_string()).as_deref().unwrap_or("")))
        }
        ("indexOf", Some(String(t)), [String(x), rest @ ..])
        | ("lastIndexOf", Some(String(t)), [String(x), rest @ ..]) => {
            let chars: Vec<char> = t.chars().collect();
            let needle: Vec<char> = x.chars().collect();
            let last = func == "lastIndexOf";
            let bound = match rest {
                [] => None,
                [Int(i)] => Some(*i),
                _ => return Err(fail(&recv, args)),
            };
            if let Some(b) = bound
                && (b < 0 || b as usize > chars.len())
            {
                return Err(e(pos, format!("index out of range: {b}")));
            }
            let n = needle.len();
            let found = if last {
                let hi = bound.map_or(chars.len(), |b| (b as usize + n).min(chars.len()));
                (0..=hi.saturating_sub(n)).rev().find(|&i| i + n <= hi && chars[i..i + n] == needle[..])
            } else {
                let lo = bound.unwrap_or(0) as usize;
                (lo..=chars.len().saturating_sub(n)).find(|&i| i + n <= chars.len() && chars[i..i + n] == needle[..])
            };
            Ok(Int(found.map_or(-1, |i| i as i64)))
        }
        ("lowerAscii", Some(String(t)), []) => Ok(Value::string(&t.to_ascii_lowercase())),
        ("upperAscii", Some(String(t)), []) => Ok(Value::string(&t.to_ascii_uppercase())),
        ("replace", Some(String(t)), [String(a), String(b), rest @ ..]) => match rest {
            [] => Ok(Value::string(&t.replace(a.as_ref(), b))),
            [Int(n)] if *n < 0 => Ok(Value::string(&t.replace(a.as_ref(), b))),
            [Int(n)] => Ok(Value::string(&t.replacen(a.as_ref(), b, *n as usize))),
            _ => Err(fail(&recv, args)),
        },
        ("split", Some(String(t)), [String(sep), rest @ ..]) => {
            let parts: Vec<Value> = match rest {
                [] => t.split(sep.as_ref()).map(Value::string).collect(),
                [Int(0)] => Vec::new(),
                [Int(n)] if *n < 0 => t.split(sep.as_ref()).map(Value::string).collect(),
                [Int(n)] => t.splitn(*n as usize, sep.as_ref()).map(Value::string).collect(),
                _ => return Err(fail(&recv, args)),
            };
            Ok(Value::list(parts))
        }
        ("substring", Some(String(t)), [Int(a), rest @ ..]) => {
            let start = char_offset(t, *a, pos)?;
            let end = match rest {
                [] => t.len(),
                [Int(b)] if b < a => return Err(e(pos, format!("invalid substring range. start: {a}, end: {b}"))),
                [Int(b)] => char_offset(t, *b, pos)?,
                _ => return Err(fail(&recv, args)),
            };
            Ok(Value::string(&t[start..end]))
        }
        ("trim", Some(String(t)), []) => Ok(Value::string(t.trim())),
        ("reverse", Some(String(t)), []) => Ok(Value::string(&t.chars().rev().collect::<std::string::String>())),
        ("join", Some(List(items)), rest) => {
            let sep = match rest {
                [] => "",
                [String(x)] => x,
                _ => return Err(fail(&recv, args)),
            };
            let parts: Option<Vec<&str>> = items.iter().map(s).collect();
            parts.map(|p| Value::string(&p.join(sep))).ok_or_else(|| fail(&recv, args))
        }
        ("strings.quote", None, [String(t)]) => Ok(Value::string(&format!("{t:?}"))),

        // --- regex ---
        ("find", Some(String(t)), [String(re)]) => {
            Ok(Value::string(ctx.regex(re, pos)?.find(t).map_or("", |m| m.as_str())))
        }
        ("findAll", Some(String(t)), [String(re), rest @ ..]) => {
            let limit = match rest {
                [] => usize::MAX,
                [Int(n)] if *n < 0 => usize::MAX,
                [Int(n)] => *n as usize,
                _ => return Err(fail(&recv, args)),
            };
            let r = ctx.regex(re, pos)?;
            Ok(Value::list(r.find_iter(t).take(limit).map(|m| Value::string(m.as_str())).collect()))
        }

        // --- lists library ---
        ("isSorted", Some(List(items)), []) => {
            for w in items.windows(2) {
                match compare_values(&w[0], &w[1]) {
                    Some(Ordering::Greater) => return Ok(Bool(false)),
                    Some(_) => {}
                    None => return Err(fail(&recv, args)),
                }
            }
            Ok(Bool(true))
        }
        ("sum", Some(List(items)), []) => {
            let mut acc = match items.first() {
                None | Some(Int(_)) => Int(0),
                Some(UInt(_)) => UInt(0),
                Some(Double(_)) => Double(0.0),
                Some(Quantity(_)) => Quantity(muster_api::Quantity::ZERO),
                _ => return Err(fail(&recv, args)),
            };
            for x in items.iter() {
                acc = match (&acc, x) {
                    (Int(a), Int(b)) => Int(a.checked_add(*b).ok_or_else(|| e(pos, "integer overflow"))?),
                    (UInt(a), UInt(b)) => UInt(a.checked_add(*b).ok_or_else(|| e(pos, "integer overflow"))?),
                    (Double(a), Double(b)) => Double(a + b),
                    (Quantity(a), Quantity(b)) => {
                        Quantity(a.checked_add(*b).ok_or_else(|| e(pos, "quantity overflow"))?)
                    }
                    _ => return Err(fail(&recv, args)),
                };
            }
            Ok(acc)
        }
        ("min", Some(List(items)), []) | ("max", Some(List(items)), []) => {
            let want = if func == "min" { Ordering::Less } else { Ordering::Greater };
            let mut best: Option<&Value> = None;
            for x in items.iter() {
                best = match best {
                    None => Some(x),
                    Some(b) => match compare_values(x, b) {
                        Some(o) if o == want => Some(x),
                        Some(_) => Some(b),
                        None => return Err(fail(&recv, args)),
                    },
                };
            }
            best.cloned().ok_or_else(|| e(pos, format!("{func} called on empty list")))
        }
        ("indexOf", Some(List(items)), [x]) => Ok(Int(items.iter().position(|i| equal(i, x)).map_or(-1, |i| i as i64))),
        ("lastIndexOf", Some(List(items)), [x]) => {
            Ok(Int(items.iter().rposition(|i| equal(i, x)).map_or(-1, |i| i as i64)))
        }

        // --- quantity ---
        ("quantity", None, [String(t)]) => {
            muster_api::quantity::parse(t).map(Quantity).map_err(|err| e(pos, err.to_string()))
        }
        ("isQuantity", None, [String(t)]) => Ok(Bool(muster_api::quantity::parse(t).is_ok())),
        ("compareTo", Some(Quantity(q)), [Quantity(o)]) => Ok(ord_to_int(q.cmp(o))),
        ("isLessThan", Some(Quantity(q)), [Quantity(o)]) => Ok(Bool(q < o)),
        ("isGreaterThan", Some(Quantity(q)), [Quantity(o)]) => Ok(Bool(q > o)),
        ("add", Some(Quantity(q)), [o]) | ("sub", Some(Quantity(q)), [o]) => {
            let o = quantity_arg(o).ok_or_else(|| fail(&recv, args))?;
            let r = if func == "add" { q.checked_add(o) } else { q.checked_sub(o) };
            r.map(Quantity).ok_or_else(|| e(pos, "quantity overflow"))
        }
        ("sign", Some(Quantity(q)), []) => Ok(Int(q.signum() as i64)),
        ("isInteger", Some(Quantity(q)), []) => {
            Ok(Bool(q.nanos() % 1_000_000_000 == 0 && i64::try_from(q.nanos() / 1_000_000_000).is_ok()))
        }
        ("asInteger", Some(Quantity(q)), []) => {
            if q.nanos() % 1_000_000_000 != 0 {
                return Err(e(pos, "cannot convert value to integer"));
            }
            i64::try_from(q.nanos() / 1_000_000_000).map(Int).map_err(|_| e(pos, "cannot convert value to integer"))
        }
        ("asApproximateFloat", Some(Quantity(q)), []) => Ok(Double(q.as_f64())),

        // --- semver ---
        ("semver", None, [String(t), rest @ ..]) | ("isSemver", None, [String(t), rest @ ..]) => {
            let normalize = match rest {
                [] => false,
                [Bool(b)] => *b,
                _ => return Err(fail(&recv, args)),
            };
            let parsed =
                if normalize { crate::semver::Semver::parse_normalized(t) } else { crate::semver::Semver::parse(t) };
            if func == "isSemver" {
                return Ok(Bool(parsed.is_ok()));
            }
            parsed.map(|v| Semver(Arc::new(v))).map_err(|err| e(pos, format!("invalid semver: {err}")))
        }
        ("compareTo", Some(Semver(a)), [b])
        | ("isLessThan", Some(Semver(a)), [b])
        | ("isGreaterThan", Some(Semver(a)), [b]) => {
            let b = semver_of(b).ok_or_else(|| fail(&recv, args))?;
            let o = a.as_ref().cmp(b);
            Ok(match func {
                "compareTo" => ord_to_int(o),
                "isLessThan" => Bool(o == Ordering::Less),
                _ => Bool(o == Ordering::Greater),
            })
        }
        ("major", Some(Semver(v)), []) => Ok(Int(v.major as i64)),
        ("minor", Some(Semver(v)), []) => Ok(Int(v.minor as i64)),
        ("patch", Some(Semver(v)), []) => Ok(Int(v.patch as i64)),

        // --- optionals ---
        ("optional.of", None, [x]) => Ok(Optional(Some(Arc::new(x.clone())))),
        ("optional.none", None, []) => Ok(Optional(None)),
        ("optional.ofNonZeroValue", None, [x]) => {
            let zero = match x {
                Null => true,
                Bool(b) => !b,
                Int(i) => *i == 0,
                UInt(u) => *u == 0,
                Double(d) => *d == 0.0,
                String(t) => t.is_empty(),
                Bytes(b) => b.is_empty(),
                List(l) => l.is_empty(),
                Map(m) => m.is_empty(),
                _ => false,
            };
            Ok(Optional(if zero { None } else { Some(Arc::new(x.clone())) }))
        }

        // --- sets ---
        ("sets.contains", None, [List(a), List(b)]) => Ok(Bool(b.iter().all(|x| a.iter().any(|y| equal(x, y))))),
        ("sets.equivalent", None, [List(a), List(b)]) => {
            Ok(Bool(b.iter().all(|x| a.iter().any(|y| equal(x, y))) && a.iter().all(|x| b.iter().any(|y| equal(x, y)))))
        }
        ("sets.intersects", None, [List(a), List(b)]) => Ok(Bool(a.iter().any(|x| b.iter().any(|y| equal(x, y))))),

        // --- DRA ---
        ("includes", Some(r), [x]) => ctx.includes(r, x, pos),

        _ => {
            let _ = (int, s);
            Err(fail(&recv, args))
        }
    }
}
