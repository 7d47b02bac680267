//! The evaluator: a tree walk over the expanded AST with CEL's error semantics and a cost meter.

use std::cmp::Ordering;
use std::sync::Arc;

use muster_api::Quantity;

use crate::ast::{BinOp, CompKind, Expr, Kind, Lit};
use crate::device::DeviceView;
use crate::regex_cache::RegexCache;
use crate::semver::Semver;
use crate::value::{Value, compare_numbers};

/// Kubernetes' per-evaluation runtime cost limit for DRA selectors
/// (`CELSelectorExpressionMaxCost`).
pub const SELECTOR_COST_LIMIT: u64 = 1_000_000;

/// Upstream's cap on list elements `includes` scans.
const INCLUDES_MAX: usize = 48;

/// A runtime error and the byte offset of the node that raised it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError {
    pub pos: u32,
    pub msg: String,
}

type R = Result<Value, EvalError>;

pub struct Ctx<'a> {
    pub device: &'a DeviceView,
    pub cost: u64,
    pub limit: u64,
    vars: Vec<(Arc<str>, Value)>,
    regexes: &'a RegexCache,
}

fn err(pos: u32, msg: impl Into<String>) -> EvalError {
    EvalError { pos, msg: msg.into() }
}

fn no_overload(pos: u32, func: &str, args: &[&Value]) -> EvalError {
    let types: Vec<&str> = args.iter().map(|a| a.type_name()).collect();
    err(pos, format!("no such overload: {func}({})", types.join(", ")))
}

impl<'a> Ctx<'a> {
    pub fn new(device: &'a DeviceView, regexes: &'a RegexCache, limit: u64) -> Self {
        Ctx { device, cost: 0, limit, vars: Vec::new(), regexes }
    }

    #[inline]
    fn charge(&mut self, n: u64, pos: u32) -> Result<(), EvalError> {
        self.cost = self.cost.saturating_add(n);
        if self.cost > self.limit { Err(err(pos, "operation cancelled: actual cost limit exceeded")) } else { Ok(()) }
    }

    pub fn eval(&mut self, e: &Expr) -> R {
        match &e.kind {
            Kind::Lit(l) => Ok(lit(l)),
            Kind::Const(v) => Ok(v.clone()),
            Kind::DeviceDriver => {
                self.charge(borrowed_cost(e), e.pos)?;
                Ok(Value::String(self.device.driver.clone()))
            }
            Kind::DeviceAttr { domain, sym, id } => {
                self.charge(borrowed_cost(e), e.pos)?;
                match self.device.attr(*domain, *sym) {
                    Some(v) => Ok(v.clone()),
                    None => Err(err(e.pos, format!("no such key: {id}"))),
                }
            }
            Kind::DeviceCap { domain, sym, id } => {
                self.charge(borrowed_cost(e), e.pos)?;
                match self.device.cap(*domain, *sym) {
                    Some(q) => Ok(Value::Quantity(q)),
                    None => Err(err(e.pos, format!("no such key: {id}"))),
                }
            }
            Kind::Ident(name) => {
                self.charge(1, e.pos)?;
                if let Some((_, v)) = self.vars.iter().rev().find(|(n, _)| n == name) {
                    return Ok(v.clone());
                }
                match name.as_ref() {
                    "device" => Ok(Value::Device),
                    "int" | "uint" | "double" | "string" | "bytes" | "bool" | "list" | "map" | "null_type" | "type" => {
                        Ok(Value::Type(type_literal(name)))
                    }
                    _ => Err(err(e.pos, format!("no such attribute: {name}"))),
                }
            }
            Kind::Select { operand, field, optional } => {
                self.charge(1, e.pos)?;
                let v = self.eval(operand)?;
                if *optional {
                    return self.select_optional(v, field, e.pos);
                }
                self.select(v, field, e.pos)
            }
            Kind::Has { operand, field } => {
                self.charge(1, e.pos)?;
                let v = self.eval(operand)?;
                let r = match v {
                    Value::Device => {
                        matches!(field.as_ref(), "driver" | "attributes" | "capacity" | "allowMultipleAllocations")
                    }
                    Value::Attributes => self.device.has_attr_domain(sym(field)),
                    Value::Capacity => self.device.has_cap_domain(sym(field)),
                    other => self.lookup(&other, &Value::String(field.clone()), e.pos)?.is_some(),
                };
                Ok(Value::Bool(r))
            }
            Kind::Index { operand, index, optional } => {
                self.charge(1, e.pos)?;
                let v = self.eval(operand)?;
                let i = self.eval(index)?;
                if *optional {
                    let inner = match v {
                        Value::Optional(None) => return Ok(Value::Optional(None)),
                        Value::Optional(Some(x)) => (*x).clone(),
                        other => other,
                    };
                    return Ok(Value::Optional(self.lookup(&inner, &i, e.pos)?.map(Arc::new)));
                }
                if let Value::Optional(o) = v {
                    return Ok(match o {
                        None => Value::Optional(None),
                        Some(x) => Value::Optional(self.lookup(&x, &i, e.pos)?.map(Arc::new)),
                    });
                }
                match self.lookup(&v, &i, e.pos)? {
                    Some(x) => Ok(x),
                    None => Err(self.missing(&v, &i, e.pos)),
                }
            }
            Kind::Not(x) => match self.charge(1, e.pos).and_then(|()| self.eval(x))? {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                other => Err(no_overload(e.pos, "!_", &[&other])),
            },
            Kind::Neg(x) => match self.charge(1, e.pos).and_then(|()| self.eval(x))? {
                Value::Int(i) => i.checked_neg().map(Value::Int).ok_or_else(|| err(e.pos, "integer overflow")),
                Value::Double(d) => Ok(Value::Double(-d)),
                other => Err(no_overload(e.pos, "-_", &[&other])),
            },
            Kind::And(xs) => self.logic(xs, false),
            Kind::Or(xs) => self.logic(xs, true),
            Kind::Cond { cond, then, otherwise } => match self.eval(cond)? {
                Value::Bool(true) => self.eval(then),
                Value::Bool(false) => self.eval(otherwise),
                other => Err(no_overload(e.pos, "_?_:_", &[&other])),
            },
            Kind::Binary { op, lhs, rhs } => {
                // Constants and device attributes are compared in place, without copying them.
                // `x in [constants]` is a set lookup in cel-go: only `x` is charged.
                let set_lookup = *op == BinOp::In && matches!(rhs.kind, Kind::Const(Value::List(_)));
                let device = self.device;
                if let (Some(a), Some(b)) = (borrow(device, lhs), borrow(device, rhs)) {
                    let (a, b) = (a?, b?);
                    let own = if set_lookup { 0 } else { binary_cost(*op, a, b) };
                    self.charge(own + borrowed_cost(lhs) + borrowed_cost(rhs), e.pos)?;
                    return self.binary(*op, a, b, e.pos);
                }
                let a = self.eval(lhs)?;
                let b = self.eval(rhs)?;
                self.charge(if set_lookup { 0 } else { binary_cost(*op, &a, &b) }, e.pos)?;
                self.binary(*op, &a, &b, e.pos)
            }
            Kind::List(xs) => {
                self.charge(10, e.pos)?;
                let mut out = Vec::with_capacity(xs.len());
                for (x, optional) in xs {
                    let v = self.eval(x)?;
                    match (optional, v) {
                        (true, Value::Optional(Some(v))) => out.push((*v).clone()),
                        (true, Value::Optional(None)) => {}
                        (true, other) => return Err(no_overload(x.pos, "optional list element", &[&other])),
                        (false, v) => out.push(v),
                    }
                }
                Ok(Value::list(out))
            }
            Kind::Map(entries) => {
                self.charge(30, e.pos)?;
                let mut out: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
                for (k, v, optional) in entries {
                    let key = self.eval(k)?;
                    if !matches!(key, Value::Int(_) | Value::UInt(_) | Value::String(_) | Value::Bool(_)) {
                        return Err(err(k.pos, format!("unsupported key type: {}", key.type_name())));
                    }
                    let val = match (optional, self.eval(v)?) {
                        (true, Value::Optional(Some(x))) => (*x).clone(),
                        (true, Value::Optional(None)) => continue,
                        (true, other) => return Err(no_overload(v.pos, "optional map entry", &[&other])),
                        (false, x) => x,
                    };
                    if out.iter().any(|(o, _)| equal(o, &key)) {
                        return Err(err(k.pos, format!("repeated key: {}", display(&key))));
                    }
                    out.push((key, val));
                }
                Ok(Value::Map(out.into()))
            }
            Kind::Bind { var, init, body } => {
                let v = self.eval(init)?;
                self.vars.push((var.clone(), v));
                let r = self.eval(body);
                self.vars.pop();
                r
            }
            Kind::Comprehension(c) => self.comprehension(c, e.pos),
            Kind::Call { func, target, args } => self.call(func, target.as_deref(), args, e.pos),
        }
    }

    /// `&&` (`stop_on` = false) and `||` (`stop_on` = true) with CEL's commutative error handling:
    /// a deciding operand wins over an error in another operand.
    fn logic(&mut self, xs: &[Expr], stop_on: bool) -> R {
        let mut first_err = None;
        for x in xs {
            match self.eval(x) {
                Ok(Value::Bool(b)) if b == stop_on => return Ok(Value::Bool(stop_on)),
                Ok(Value::Bool(_)) => {}
                Ok(other) => {
                    let op = if stop_on { "_||_" } else { "_&&_" };
                    first_err.get_or_insert(no_overload(x.pos, op, &[&other]));
                }
                Err(e) if e.msg.contains("actual cost limit exceeded") => return Err(e),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(Value::Bool(!stop_on)),
        }
    }

    fn select(&mut self, v: Value, field: &str, pos: u32) -> R {
        match v {
            Value::Device => match field {
                "driver" => Ok(Value::String(self.device.driver.clone())),
                "attributes" => Ok(Value::Attributes),
                "capacity" => Ok(Value::Capacity),
                "allowMultipleAllocations" => Ok(Value::Bool(self.device.allow_multiple_allocations)),
                _ => Err(err(pos, format!("no such key: {field}"))),
            },
            Value::Optional(o) => Ok(match o {
                None => Value::Optional(None),
                Some(x) => Value::Optional(self.lookup(&x, &Value::string(field), pos)?.map(Arc::new)),
            }),
            other => {
                let key = Value::string(field);
                match self.lookup(&other, &key, pos)? {
                    Some(x) => Ok(x),
                    None => Err(self.missing(&other, &key, pos)),
                }
            }
        }
    }

    fn select_optional(&mut self, v: Value, field: &str, pos: u32) -> R {
        let inner = match v {
            Value::Optional(None) => return Ok(Value::Optional(None)),
            Value::Optional(Some(x)) => (*x).clone(),
            other => other,
        };
        if let Value::Device = inner {
            return self.select(Value::Device, field, pos).map(|x| Value::Optional(Some(Arc::new(x))));
        }
        Ok(Value::Optional(self.lookup(&inner, &Value::string(field), pos)?.map(Arc::new)))
    }

    fn missing(&self, container: &Value, key: &Value, pos: u32) -> EvalError {
        match container {
            Value::List(_) => err(pos, format!("index out of bounds: {}", display(key))),
            _ => err(pos, format!("no such key: {}", display(key))),
        }
    }

    /// Looks `key` up in a map-like or list value: `Ok(None)` when absent.
    fn lookup(&self, container: &Value, key: &Value, pos: u32) -> Result<Option<Value>, EvalError> {
        let dev = self.device;
        let key_str = || match key {
            Value::String(s) => Ok(s.as_ref()),
            other => Err(no_overload(pos, "_[_]", &[container, other])),
        };
        Ok(match container {
            Value::Attributes => Some(Value::AttrDomain(sym(key_str()?))),
            Value::Capacity => Some(Value::CapDomain(sym(key_str()?))),
            Value::AttrDomain(d) => dev.attr(*d, sym(key_str()?)).cloned(),
            Value::CapDomain(d) => dev.cap(*d, sym(key_str()?)).map(Value::Quantity),
            Value::Map(entries) => entries.iter().find(|(k, _)| equal(k, key)).map(|(_, v)| v.clone()),
            Value::List(items) => {
                let i = match key {
                    Value::Int(i) => *i,
                    Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
                    Value::Double(d) if d.fract() == 0.0 => *d as i64,
                    other => return Err(no_overload(pos, "_[_]", &[container, other])),
                };
                usize::try_from(i).ok().and_then(|i| items.get(i)).cloned()
            }
            Value::Device => {
                let k = key_str()?;
                return match k {
                    "driver" | "attributes" | "capacity" | "allowMultipleAllocations" => {
                        Ok(Some(self.clone_ctxless_select(k)))
                    }
                    _ => Ok(None),
                };
            }
            other => return Err(no_overload(pos, "_[_]", &[other, key])),
        })
    }

    fn clone_ctxless_select(&self, field: &str) -> Value {
        match field {
            "driver" => Value::String(self.device.driver.clone()),
            "attributes" => Value::Attributes,
            "capacity" => Value::Capacity,
            _ => Value::Bool(self.device.allow_multiple_allocations),
        }
    }

    /// The elements a comprehension iterates: list items, or map keys.
    fn iterate(&self, v: &Value, pos: u32) -> Result<Vec<(Value, Value)>, EvalError> {
        let dev = self.device;
        Ok(match v {
            Value::List(items) => items.iter().enumerate().map(|(i, x)| (Value::Int(i as i64), x.clone())).collect(),
            Value::Map(entries) => entries.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Value::Attributes => {
                dev.attr_domains().into_iter().map(|(n, s)| (Value::String(n), Value::AttrDomain(s))).collect()
            }
            Value::Capacity => {
                dev.cap_domains().into_iter().map(|(n, s)| (Value::String(n), Value::CapDomain(s))).collect()
            }
            Value::AttrDomain(d) => dev.attr_entries(*d).map(|(k, v)| (Value::String(k.clone()), v.clone())).collect(),
            Value::CapDomain(d) => {
                dev.cap_entries(*d).map(|(k, q)| (Value::String(k.clone()), Value::Quantity(q))).collect()
            }
            other => return Err(err(pos, format!("got '{}', expected iterable type", other.go_type_name()))),
        })
    }

    fn comprehension(&mut self, c: &crate::ast::Comprehension, pos: u32) -> R {
        let range = self.eval(&c.range)?;
        let is_map = !matches!(range, Value::List(_));
        let items = self.iterate(&range, pos)?;
        let mut count = 0u64;
        let mut out = Vec::new();
        let mut first_err: Option<EvalError> = None;
        // cel-go charges each element the expanded macro's loop condition and step around the
        // predicate: `all` 3, `exists` 4, `map` 12 (plus the filter), and after a true predicate
        // `exists_one` 2 and `filter` 13.
        let per_element = match c.kind {
            CompKind::All => 3,
            CompKind::Exists => 4,
            CompKind::Map => 12,
            CompKind::ExistsOne | CompKind::Filter => 0,
        };
        for (k, v) in items {
            self.charge(per_element, pos)?;
            // One variable: the element (lists) or the key (maps). Two: index/key, then value.
            let bound = match &c.var2 {
                None => vec![(c.var.clone(), if is_map { k } else { v })],
                Some(v2) => vec![(c.var.clone(), k), (v2.clone(), v)],
            };
            let depth = self.vars.len();
            self.vars.extend(bound);
            let r = (|| -> Result<Option<bool>, EvalError> {
                match c.kind {
                    CompKind::All | CompKind::Exists | CompKind::ExistsOne => match self.eval(&c.body) {
                        Ok(Value::Bool(b)) => Ok(Some(b)),
                        Ok(other) => Err(no_overload(c.body.pos, "comprehension", &[&other])),
                        Err(e) => Err(e),
                    },
                    CompKind::Filter => match self.eval(&c.body)? {
                        Value::Bool(true) => {
                            self.charge(13, pos)?;
                            out.push(self.vars[depth].1.clone());
                            Ok(None)
                        }
                        Value::Bool(false) => Ok(None),
                        other => Err(no_overload(c.body.pos, "filter", &[&other])),
                    },
                    CompKind::Map => {
                        if let Some(f) = &c.filter {
                            match self.eval(f)? {
                                Value::Bool(true) => {}
                                Value::Bool(false) => return Ok(None),
                                other => return Err(no_overload(f.pos, "map", &[&other])),
                            }
                        }
                        out.push(self.eval(&c.body)?);
                        Ok(None)
                    }
                }
            })();
            self.vars.truncate(depth);
            match (c.kind, r) {
                (CompKind::All, Ok(Some(false))) => return Ok(Value::Bool(false)),
                (CompKind::Exists, Ok(Some(true))) => return Ok(Value::Bool(true)),
                (CompKind::ExistsOne, Ok(Some(true))) => {
                    self.charge(2, pos)?;
                    count += 1;
                }
                (CompKind::All | CompKind::Exists, Err(e)) if !e.msg.contains("actual cost limit exceeded") => {
                    first_err.get_or_insert(e);
                }
                (_, Err(e)) => return Err(e),
                _ => {}
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        // The result expression: `accu` (1), or `accu == 1` for exists_one (2).
        self.charge(if c.kind == CompKind::ExistsOne { 2 } else { 1 }, pos)?;
        Ok(match c.kind {
            CompKind::All => Value::Bool(true),
            CompKind::Exists => Value::Bool(false),
            CompKind::ExistsOne => Value::Bool(count == 1),
            CompKind::Map | CompKind::Filter => Value::list(out),
        })
    }

    fn binary(&mut self, op: BinOp, a: &Value, b: &Value, pos: u32) -> R {
        use Value::*;
        let overflow = || err(pos, "integer overflow");
        Ok(match op {
            BinOp::Eq => Bool(equal(a, b)),
            BinOp::Ne => Bool(!equal(a, b)),
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let ord = match (a, b) {
                    (String(x), String(y)) => Some(x.cmp(y)),
                    (Bytes(x), Bytes(y)) => Some(x.cmp(y)),
                    (Bool(x), Bool(y)) => Some(x.cmp(y)),
                    _ => compare_numbers(a, b),
                };
                let Some(ord) = ord else {
                    if matches!((a, b), (Double(_), _) | (_, Double(_))) && is_number(a) && is_number(b) {
                        return Ok(Bool(false)); // NaN
                    }
                    return Err(no_overload(pos, op.name(), &[a, b]));
                };
                Bool(match op {
                    BinOp::Lt => ord == Ordering::Less,
                    BinOp::Le => ord != Ordering::Greater,
                    BinOp::Gt => ord == Ordering::Greater,
                    _ => ord != Ordering::Less,
                })
            }
            BinOp::In => match b {
                List(items) => Bool(items.iter().any(|x| equal(x, a))),
                // An unknown domain reads as an empty map, but it is not `in` the attributes.
                Attributes => Bool(matches!(a, String(d) if self.device.has_attr_domain(sym(d)))),
                Capacity => Bool(matches!(a, String(d) if self.device.has_cap_domain(sym(d)))),
                Map(_) | AttrDomain(_) | CapDomain(_) => Bool(self.lookup(b, a, pos)?.is_some()),
                _ => return Err(no_overload(pos, "@in", &[a, b])),
            },
            BinOp::Add => match (a, b) {
                (Int(x), Int(y)) => Int(x.checked_add(*y).ok_or_else(overflow)?),
                (UInt(x), UInt(y)) => UInt(x.checked_add(*y).ok_or_else(overflow)?),
                (Double(x), Double(y)) => Double(x + y),
                (String(x), String(y)) => String(format!("{x}{y}").into()),
                (Bytes(x), Bytes(y)) => Bytes([&x[..], &y[..]].concat().into()),
                (List(x), List(y)) => List(x.iter().chain(y.iter()).cloned().collect()),
                _ => return Err(no_overload(pos, "_+_", &[a, b])),
            },
            BinOp::Sub => match (a, b) {
                (Int(x), Int(y)) => Int(x.checked_sub(*y).ok_or_else(overflow)?),
                (UInt(x), UInt(y)) => UInt(x.checked_sub(*y).ok_or_else(overflow)?),
                (Double(x), Double(y)) => Double(x - y),
                _ => return Err(no_overload(pos, "_-_", &[a, b])),
            },
            BinOp::Mul => match (a, b) {
                (Int(x), Int(y)) => Int(x.checked_mul(*y).ok_or_else(overflow)?),
                (UInt(x), UInt(y)) => UInt(x.checked_mul(*y).ok_or_else(overflow)?),
                (Double(x), Double(y)) => Double(x * y),
                _ => return Err(no_overload(pos, "_*_", &[a, b])),
            },
            BinOp::Div => match (a, b) {
                (Int(_), Int(0)) | (UInt(_), UInt(0)) => return Err(err(pos, "division by zero")),
                (Int(x), Int(y)) => Int(x.checked_div(*y).ok_or_else(overflow)?),
                (UInt(x), UInt(y)) => UInt(x / y),
                (Double(x), Double(y)) => Double(x / y),
                _ => return Err(no_overload(pos, "_/_", &[a, b])),
            },
            BinOp::Rem => match (a, b) {
                (Int(_), Int(0)) | (UInt(_), UInt(0)) => return Err(err(pos, "modulus by zero")),
                (Int(x), Int(y)) => Int(x.checked_rem(*y).ok_or_else(overflow)?),
                (UInt(x), UInt(y)) => UInt(x % y),
                _ => return Err(no_overload(pos, "_%_", &[a, b])),
            },
        })
    }

    fn call(&mut self, func: &str, target: Option<&Expr>, args: &[Expr], pos: u32) -> R {
        let recv = match target {
            Some(t) => Some(self.eval(t)?),
            None => None,
        };
        match args {
            [] => crate::functions::call(self, func, recv, &[], pos),
            [a] => {
                let a = self.eval(a)?;
                crate::functions::call(self, func, recv, std::slice::from_ref(&a), pos)
            }
            [a, b] => {
                let vals = [self.eval(a)?, self.eval(b)?];
                crate::functions::call(self, func, recv, &vals, pos)
            }
            _ => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.eval(a)?);
                }
                crate::functions::call(self, func, recv, &vals, pos)
            }
        }
    }

    pub(crate) fn regex(&self, pattern: &str, pos: u32) -> Result<Arc<regex::Regex>, EvalError> {
        self.regexes.get(pattern).map_err(|e| err(pos, e))
    }

    pub(crate) fn charge_n(&mut self, n: u64, pos: u32) -> Result<(), EvalError> {
        self.charge(n, pos)
    }

    /// `includes`: list membership capped at 48 scanned elements, or equality for a scalar.
    pub(crate) fn includes(&mut self, recv: &Value, x: &Value, pos: u32) -> R {
        match recv {
            Value::List(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i >= INCLUDES_MAX {
                        return Err(err(pos, "'includes' function cannot be applied to lists longer than 48 values"));
                    }
                    if equal(item, x) {
                        return Ok(Value::Bool(true));
                    }
                }
                Ok(Value::Bool(false))
            }
            other => Ok(Value::Bool(equal(other, x))),
        }
    }
}

/// cel-go's runtime cost of a binary operator on these operands.
fn binary_cost(op: BinOp, a: &Value, b: &Value) -> u64 {
    fn size(v: &Value) -> Option<u64> {
        match v {
            Value::String(s) => Some(s.chars().count() as u64),
            Value::Bytes(b) => Some(b.len() as u64),
            Value::List(l) => Some(l.len() as u64),
            _ => None,
        }
    }
    let tenth = |n: u64| n.div_ceil(10);
    match op {
        BinOp::Eq | BinOp::Ne => match (a, b) {
            (Value::Quantity(_) | Value::Semver(_), _) => 1,
            _ => match (size(a), size(b)) {
                (Some(x), Some(y)) => tenth(x.min(y)),
                _ => 1,
            },
        },
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => match (a, b) {
            (Value::String(_), Value::String(_)) | (Value::Bytes(_), Value::Bytes(_)) => {
                tenth(size(a).unwrap_or(0).min(size(b).unwrap_or(0)))
            }
            _ => 1,
        },
        BinOp::In => match b {
            Value::List(l) => l.len() as u64,
            _ => 1,
        },
        BinOp::Add => match (a, b) {
            (Value::String(_), Value::String(_)) | (Value::Bytes(_), Value::Bytes(_)) => {
                tenth(size(a).unwrap_or(0) + size(b).unwrap_or(0))
            }
            _ => 1,
        },
        _ => 1,
    }
}

/// What evaluating a borrowable node would have charged: `device` and one qualifier per step.
fn borrowed_cost(e: &Expr) -> u64 {
    match e.kind {
        Kind::DeviceDriver => 2,
        Kind::DeviceAttr { .. } | Kind::DeviceCap { .. } => 4,
        _ => 0,
    }
}

/// The value of a node that needs no evaluation work, by reference: constants and device
/// attributes. `None` for every other node.
#[inline]
fn borrow<'v>(device: &'v DeviceView, e: &'v Expr) -> Option<Result<&'v Value, EvalError>> {
    match &e.kind {
        Kind::Const(v) => Some(Ok(v)),
        Kind::DeviceDriver => Some(Ok(device.driver_value())),
        Kind::DeviceAttr { domain, sym, id } => {
            Some(device.attr(*domain, *sym).ok_or_else(|| err(e.pos, format!("no such key: {id}"))))
        }
        _ => None,
    }
}

/// The symbol of a name looked up at runtime; a name never interned belongs to no device.
fn sym(name: &str) -> crate::intern::Sym {
    crate::intern::lookup(name).unwrap_or(crate::intern::Sym::NONE)
}

fn is_number(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::UInt(_) | Value::Double(_))
}

fn type_literal(name: &str) -> &'static str {
    match name {
        "int" => "int",
        "uint" => "uint",
        "double" => "double",
        "string" => "string",
        "bytes" => "bytes",
        "bool" => "bool",
        "list" => "list",
        "map" => "map",
        "null_type" => "null_type",
        _ => "type",
    }
}

pub fn lit(l: &Lit) -> Value {
    match l {
        Lit::Null => Value::Null,
        Lit::Bool(b) => Value::Bool(*b),
        Lit::Int(i) => Value::Int(*i),
        Lit::UInt(u) => Value::UInt(*u),
        Lit::Double(d) => Value::Double(*d),
        Lit::String(s) => Value::String(s.clone()),
        Lit::Bytes(b) => Value::Bytes(b.clone()),
    }
}

/// CEL equality: numbers compare by value across types; other types must match; no errors.
pub fn equal(a: &Value, b: &Value) -> bool {
    use Value::*;
    match (a, b) {
        (Null, Null) => true,
        (Bool(x), Bool(y)) => x == y,
        (String(x), String(y)) => Arc::ptr_eq(x, y) || x == y,
        (Bytes(x), Bytes(y)) => x == y,
        (List(x), List(y)) => x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| equal(p, q)),
        (Map(x), Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.iter().any(|(k2, v2)| equal(k, k2) && equal(v, v2)))
        }
        (Quantity(x), Quantity(y)) => x == y,
        (Semver(x), Semver(y)) => x == y,
        (Optional(x), Optional(y)) => match (x, y) {
            (None, None) => true,
            (Some(p), Some(q)) => equal(p, q),
            _ => false,
        },
        (Type(x), Type(y)) => x == y,
        (AttrDomain(x), AttrDomain(y)) => x == y,
        (CapDomain(x), CapDomain(y)) => x == y,
        (Device, Device) | (Attributes, Attributes) | (Capacity, Capacity) => true,
        _ => compare_numbers(a, b) == Some(Ordering::Equal),
    }
}

/// A value as error messages show it.
pub fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Quantity(q) => q.to_string(),
        Value::Semver(s) => s.to_string(),
        other => other.type_name().to_string(),
    }
}

pub(crate) fn quantity_arg(v: &Value) -> Option<Quantity> {
    match v {
        Value::Quantity(q) => Some(*q),
        Value::Int(i) => Some(Quantity::from_units(*i)),
        _ => None,
    }
}

pub(crate) fn semver_of(v: &Value) -> Option<&Semver> {
    match v {
        Value::Semver(s) => Some(s),
        _ => None,
    }
}
