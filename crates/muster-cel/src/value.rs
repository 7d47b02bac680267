//! CEL runtime values.

use std::cmp::Ordering;
use std::sync::Arc;

use muster_api::Quantity;

use crate::semver::Semver;

/// A CEL value. Cheap to clone: strings, lists and maps are shared.
#[derive(Clone, Debug, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
    List(Arc<[Value]>),
    Map(Arc<[(Value, Value)]>),
    Quantity(Quantity),
    Semver(Arc<Semver>),
    Optional(Option<Arc<Value>>),
    Type(&'static str),
    /// The `device` variable of the evaluation.
    Device,
    /// `device.attributes` / `device.capacity`.
    Attributes,
    Capacity,
    /// `device.attributes[domain]` / `device.capacity[domain]`: the domain's symbol (a domain the
    /// device does not have reads as an empty map).
    AttrDomain(crate::intern::Sym),
    CapDomain(crate::intern::Sym),
}

impl Value {
    pub fn string(s: &str) -> Value {
        Value::String(s.into())
    }

    pub fn list(v: Vec<Value>) -> Value {
        Value::List(v.into())
    }

    /// The CEL type name, as error messages print it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null_type",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::UInt(_) => "uint",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Map(_) | Value::Attributes | Value::Capacity | Value::AttrDomain(_) | Value::CapDomain(_) => "map",
            Value::Quantity(_) => "kubernetes.Quantity",
            Value::Semver(_) => "kubernetes.Semver",
            Value::Optional(_) => "optional_type",
            Value::Type(_) => "type",
            Value::Device => "kubernetes.DRADevice",
        }
    }

    /// Go's name for the value's type, as cel-go prints it in "expected iterable type" errors.
    pub fn go_type_name(&self) -> &'static str {
        match self {
            Value::Int(_) => "types.Int",
            Value::UInt(_) => "types.Uint",
            Value::Double(_) => "types.Double",
            Value::Bool(_) => "types.Bool",
            Value::String(_) => "types.String",
            Value::Bytes(_) => "types.Bytes",
            Value::Null => "types.Null",
            Value::Semver(_) => "cel.Semver",
            Value::Quantity(_) => "cel.Quantity",
            _ => self.type_name(),
        }
    }
}

/// Numeric comparison across int, uint and double (CEL's heterogeneous numeric ordering).
pub fn compare_numbers(a: &Value, b: &Value) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (UInt(x), UInt(y)) => Some(x.cmp(y)),
        (Double(x), Double(y)) => x.partial_cmp(y),
        (Int(x), UInt(y)) => Some(if *x < 0 { Ordering::Less } else { (*x as u64).cmp(y) }),
        (UInt(x), Int(y)) => Some(if *y < 0 { Ordering::Greater } else { x.cmp(&(*y as u64)) }),
        (Int(x), Double(y)) => cmp_i_f(*x as i128, *y),
        (Double(x), Int(y)) => cmp_i_f(*y as i128, *x).map(Ordering::reverse),
        (UInt(x), Double(y)) => cmp_i_f(*x as i128, *y),
        (Double(x), UInt(y)) => cmp_i_f(*y as i128, *x).map(Ordering::reverse),
        _ => None,
    }
}

fn cmp_i_f(i: i128, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    if f >= 1.8e19 {
        return Some(Ordering::Less);
    }
    if f <= -1.8e19 {
        return Some(Ordering::Greater);
    }
    let t = f.trunc();
    match i.cmp(&(t as i128)) {
        Ordering::Equal => Some(if f > t {
            Ordering::Less
        } else if f < t {
            Ordering::Greater
        } else {
            Ordering::Equal
        }),
        o => Some(o),
    }
}

/// Structural equality: same variant and equal by CEL's rules (used to compare ASTs in tests).
impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other) && crate::eval::equal(self, other)
    }
}
