//! Compile-time checks against the DRA environment: every identifier and function must exist,
//! `device` has only its four fields, operators must have an overload for the operand types the
//! checker knows, and the expression must produce a bool (or a dynamic value).

use std::sync::Arc;

use crate::ast::{BinOp, CompKind, Expr, Kind, Lit};
use crate::functions::FUNCTIONS;

/// What the checker knows of a value's type; `Dyn` is "only known at runtime".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Dyn,
    Bool,
    Int,
    UInt,
    Double,
    String,
    Bytes,
    Null,
    List,
    Map,
    Quantity,
    Semver,
    Optional,
    Type,
    Device,
    Attributes,
    Capacity,
    AttrDomain,
    CapDomain,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::Dyn => "dyn",
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::UInt => "uint",
            Ty::Double => "double",
            Ty::String => "string",
            Ty::Bytes => "bytes",
            Ty::Null => "null_type",
            Ty::List => "list",
            Ty::Map => "map",
            Ty::Quantity => "kubernetes.Quantity",
            Ty::Semver => "kubernetes.Semver",
            Ty::Optional => "optional_type",
            Ty::Type => "type",
            Ty::Device => "kubernetes.DRADevice",
            Ty::Attributes => "map(string, map(string, dyn))",
            Ty::Capacity => "map(string, map(string, kubernetes.Quantity))",
            Ty::AttrDomain => "map(string, dyn)",
            Ty::CapDomain => "map(string, kubernetes.Quantity)",
        }
    }

    fn numeric(self) -> bool {
        matches!(self, Ty::Int | Ty::UInt | Ty::Double)
    }

    fn iterable(self) -> bool {
        matches!(self, Ty::Dyn | Ty::List | Ty::Map | Ty::Attributes | Ty::Capacity | Ty::AttrDomain | Ty::CapDomain)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckError {
    pub pos: u32,
    pub msg: String,
}

fn err(pos: u32, msg: impl Into<String>) -> CheckError {
    CheckError { pos, msg: msg.into() }
}

fn no_overload(pos: u32, op: &str, tys: &[Ty]) -> CheckError {
    let names: Vec<&str> = tys.iter().map(|t| t.name()).collect();
    err(pos, format!("found no matching overload for '{op}' applied to '({})'", names.join(", ")))
}

/// Checks `e` and returns its type.
pub fn check(e: &Expr) -> Result<Ty, CheckError> {
    let mut scope = Vec::new();
    let t = Checker { scope: &mut scope }.check(e)?;
    if !matches!(t, Ty::Bool | Ty::Dyn) {
        return Err(err(e.pos, format!("must evaluate to bool or the unknown type, not {}", t.name())));
    }
    Ok(t)
}

struct Checker<'s> {
    scope: &'s mut Vec<Arc<str>>,
}

impl Checker<'_> {
    fn check(&mut self, e: &Expr) -> Result<Ty, CheckError> {
        let pos = e.pos;
        Ok(match &e.kind {
            Kind::Const(_) | Kind::DeviceDriver | Kind::DeviceAttr { .. } | Kind::DeviceCap { .. } => Ty::Dyn,
            Kind::Lit(l) => match l {
                Lit::Null => Ty::Null,
                Lit::Bool(_) => Ty::Bool,
                Lit::Int(_) => Ty::Int,
                Lit::UInt(_) => Ty::UInt,
                Lit::Double(_) => Ty::Double,
                Lit::String(_) => Ty::String,
                Lit::Bytes(_) => Ty::Bytes,
            },
            Kind::Ident(name) => {
                if self.scope.iter().any(|n| n == name) {
                    Ty::Dyn
                } else {
                    match name.as_ref() {
                        "device" => Ty::Device,
                        "int" | "uint" | "double" | "string" | "bytes" | "bool" | "list" | "map" | "null_type"
                        | "type" => Ty::Type,
                        _ => return Err(err(pos, format!("undeclared reference to '{name}' (in container '')"))),
                    }
                }
            }
            Kind::Select { operand, field, optional } => {
                let t = self.check(operand)?;
                let r = self.field(t, field, pos)?;
                if *optional { Ty::Optional } else { r }
            }
            Kind::Has { operand, field } => {
                let t = self.check(operand)?;
                self.field(t, field, pos)?;
                Ty::Bool
            }
            Kind::Index { operand, index, optional } => {
                let t = self.check(operand)?;
                let i = self.check(index)?;
                let r = match t {
                    Ty::Attributes | Ty::Capacity | Ty::AttrDomain | Ty::CapDomain
                        if !matches!(i, Ty::String | Ty::Dyn) =>
                    {
                        return Err(no_overload(pos, "_[_]", &[t, i]));
                    }
                    Ty::Attributes => Ty::AttrDomain,
                    Ty::Capacity => Ty::CapDomain,
                    Ty::CapDomain => Ty::Quantity,
                    Ty::List | Ty::Map | Ty::Dyn | Ty::AttrDomain | Ty::Optional | Ty::Device => Ty::Dyn,
                    _ => return Err(no_overload(pos, "_[_]", &[t, i])),
                };
                if *optional { Ty::Optional } else { r }
            }
            Kind::Not(x) => {
                let t = self.check(x)?;
                if !matches!(t, Ty::Bool | Ty::Dyn) {
                    return Err(no_overload(pos, "!_", &[t]));
                }
                Ty::Bool
            }
            Kind::Neg(x) => {
                let t = self.check(x)?;
                if !matches!(t, Ty::Int | Ty::Double | Ty::Dyn) {
                    return Err(no_overload(pos, "-_", &[t]));
                }
                t
            }
            Kind::And(xs) | Kind::Or(xs) => {
                let op = if matches!(e.kind, Kind::And(_)) { "_&&_" } else { "_||_" };
                for x in xs {
                    let t = self.check(x)?;
                    if !matches!(t, Ty::Bool | Ty::Dyn) {
                        return Err(no_overload(x.pos, op, &[t, Ty::Bool]));
                    }
                }
                Ty::Bool
            }
            Kind::Cond { cond, then, otherwise } => {
                let c = self.check(cond)?;
                if !matches!(c, Ty::Bool | Ty::Dyn) {
                    return Err(no_overload(pos, "_?_:_", &[c]));
                }
                let a = self.check(then)?;
                let b = self.check(otherwise)?;
                if a == b { a } else { Ty::Dyn }
            }
            Kind::Binary { op, lhs, rhs } => {
                let a = self.check(lhs)?;
                let b = self.check(rhs)?;
                self.binary(*op, a, b, pos)?
            }
            Kind::List(xs) => {
                for (x, _) in xs {
                    self.check(x)?;
                }
                Ty::List
            }
            Kind::Map(xs) => {
                for (k, v, _) in xs {
                    let kt = self.check(k)?;
                    if !matches!(kt, Ty::Int | Ty::UInt | Ty::String | Ty::Bool | Ty::Dyn) {
                        return Err(err(k.pos, format!("unsupported map key type: {}", kt.name())));
                    }
                    self.check(v)?;
                }
                Ty::Map
            }
            Kind::Comprehension(c) => {
                let r = self.check(&c.range)?;
                if !r.iterable() {
                    return Err(err(
                        c.range.pos,
                        format!(
                            "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                            r.name()
                        ),
                    ));
                }
                let depth = self.scope.len();
                self.scope.push(c.var.clone());
                self.scope.extend(c.var2.clone());
                let result = (|| {
                    if let Some(f) = &c.filter {
                        self.check(f)?;
                    }
                    let b = self.check(&c.body)?;
                    if matches!(c.kind, CompKind::All | CompKind::Exists | CompKind::ExistsOne | CompKind::Filter)
                        && !matches!(b, Ty::Bool | Ty::Dyn)
                    {
                        return Err(no_overload(c.body.pos, "_&&_", &[b]));
                    }
                    Ok(())
                })();
                self.scope.truncate(depth);
                result?;
                match c.kind {
                    CompKind::Map | CompKind::Filter => Ty::List,
                    _ => Ty::Bool,
                }
            }
            Kind::Bind { var, init, body } => {
                self.check(init)?;
                self.scope.push(var.clone());
                let r = self.check(body);
                self.scope.pop();
                r?
            }
            Kind::Call { func, target, args } => {
                let recv = match target {
                    Some(t) => Some(self.check(t)?),
                    None => None,
                };
                let mut tys = Vec::with_capacity(args.len());
                for a in args {
                    tys.push(self.check(a)?);
                }
                let member = recv.is_some();
                let known = FUNCTIONS.iter().filter(|(n, m, _)| n == &func.as_ref() && *m == member);
                let mut any = false;
                let mut arity_ok = false;
                for (_, _, counts) in known {
                    any = true;
                    arity_ok |= counts.contains(&args.len());
                }
                if !any && !arity_ok {
                    if FUNCTIONS.iter().any(|(n, _, _)| n == &func.as_ref()) {
                        let mut all: Vec<Ty> = recv.into_iter().collect();
                        all.extend(&tys);
                        return Err(no_overload(pos, func, &all));
                    }
                    return Err(err(pos, format!("undeclared reference to '{func}' (in container '')")));
                }
                if !arity_ok {
                    let mut all: Vec<Ty> = recv.into_iter().collect();
                    all.extend(&tys);
                    return Err(no_overload(pos, func, &all));
                }
                // Quantity and semver comparisons need a value of their own kind.
                if let (Some(r @ (Ty::Quantity | Ty::Semver)), "compareTo" | "isLessThan" | "isGreaterThan", [a]) =
                    (recv, func.as_ref(), tys.as_slice())
                    && !matches!(a, Ty::Dyn)
                    && *a != r
                {
                    return Err(no_overload(pos, func, &[r, *a]));
                }
                return_type(func, recv)
            }
        })
    }

    fn field(&mut self, t: Ty, field: &str, pos: u32) -> Result<Ty, CheckError> {
        Ok(match t {
            Ty::Device => match field {
                "driver" => Ty::String,
                "attributes" => Ty::Attributes,
                "capacity" => Ty::Capacity,
                "allowMultipleAllocations" => Ty::Bool,
                _ => return Err(err(pos, format!("undefined field '{field}'"))),
            },
            Ty::Attributes => Ty::AttrDomain,
            Ty::Capacity => Ty::CapDomain,
            Ty::CapDomain => Ty::Quantity,
            Ty::AttrDomain | Ty::Map | Ty::Dyn | Ty::Optional => Ty::Dyn,
            other => return Err(err(pos, format!("type '{}' does not support field selection", other.name()))),
        })
    }

    fn binary(&mut self, op: BinOp, a: Ty, b: Ty, pos: u32) -> Result<Ty, CheckError> {
        let dyn_either = a == Ty::Dyn || b == Ty::Dyn;
        Ok(match op {
            BinOp::Eq | BinOp::Ne => Ty::Bool,
            BinOp::In => {
                if !dyn_either
                    && !matches!(b, Ty::List | Ty::Map | Ty::Attributes | Ty::Capacity | Ty::AttrDomain | Ty::CapDomain)
                {
                    return Err(no_overload(pos, op.name(), &[a, b]));
                }
                Ty::Bool
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let ok = dyn_either
                    || (a.numeric() && b.numeric())
                    || (a == b && matches!(a, Ty::String | Ty::Bytes | Ty::Bool));
                if !ok {
                    return Err(no_overload(pos, op.name(), &[a, b]));
                }
                Ty::Bool
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                if dyn_either {
                    return Ok(Ty::Dyn);
                }
                let ok = match op {
                    BinOp::Add => {
                        a == b && matches!(a, Ty::Int | Ty::UInt | Ty::Double | Ty::String | Ty::Bytes | Ty::List)
                    }
                    BinOp::Rem => a == b && matches!(a, Ty::Int | Ty::UInt),
                    _ => a == b && a.numeric(),
                };
                if !ok {
                    return Err(no_overload(pos, op.name(), &[a, b]));
                }
                a
            }
        })
    }
}

fn return_type(func: &str, recv: Option<Ty>) -> Ty {
    match func {
        "size" | "indexOf" | "lastIndexOf" | "sign" | "asInteger" | "major" | "minor" | "patch" | "int" => Ty::Int,
        "compareTo" => Ty::Int,
        "uint" => Ty::UInt,
        "double" | "asApproximateFloat" => Ty::Double,
        "contains" | "startsWith" | "endsWith" | "matches" | "isQuantity" | "isSemver" | "isLessThan"
        | "isGreaterThan" | "hasValue" | "isSorted" | "isInteger" | "includes" | "bool" | "sets.contains"
        | "sets.equivalent" | "sets.intersects" => Ty::Bool,
        "quantity" => Ty::Quantity,
        "add" | "sub" if recv == Some(Ty::Quantity) => Ty::Quantity,
        "semver" => Ty::Semver,
        "string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "join" | "find"
        | "reverse" | "strings.quote" => Ty::String,
        "bytes" => Ty::Bytes,
        "split" | "findAll" => Ty::List,
        "optional.of" | "optional.none" | "optional.ofNonZeroValue" | "or" => Ty::Optional,
        "type" => Ty::Type,
        _ => Ty::Dyn,
    }
}
