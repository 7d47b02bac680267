//! Lowering after the check: rewrites the hot shapes of DRA selectors into direct forms, so that
//! evaluation does no string building, no parsing and no allocation for them. The meaning of the
//! expression is unchanged; only shapes whose result cannot differ are rewritten.

use std::sync::Arc;

use crate::ast::{Expr, Kind, Lit};
use crate::value::Value;

/// A string key written as `.name` or `['name']`.
fn key(e: &Expr) -> Option<Arc<str>> {
    match &e.kind {
        Kind::Lit(Lit::String(s)) | Kind::Const(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

fn is_device(e: &Expr, shadowed: bool) -> bool {
    !shadowed && matches!(&e.kind, Kind::Ident(n) if n.as_ref() == "device")
}

/// `device.attributes` or `device.capacity` → which one.
fn device_map(e: &Expr, shadowed: bool) -> Option<bool> {
    match &e.kind {
        Kind::Select { operand, field, optional: false } if is_device(operand, shadowed) => match field.as_ref() {
            "attributes" => Some(true),
            "capacity" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// `device.attributes[d]` / `device.attributes.d` → (attributes?, domain).
fn device_domain(e: &Expr, shadowed: bool) -> Option<(bool, Arc<str>)> {
    match &e.kind {
        Kind::Select { operand, field, optional: false } => device_map(operand, shadowed).map(|a| (a, field.clone())),
        Kind::Index { operand, index, optional: false } => {
            let a = device_map(operand, shadowed)?;
            Some((a, key(index)?))
        }
        _ => None,
    }
}

pub fn lower(e: &mut Expr) {
    lower_in(e, &mut Vec::new());
}

fn lower_in(e: &mut Expr, bound: &mut Vec<Arc<str>>) {
    let shadowed = bound.iter().any(|b| b.as_ref() == "device");
    // Children first.
    match &mut e.kind {
        Kind::Select { operand, .. } | Kind::Has { operand, .. } | Kind::Not(operand) | Kind::Neg(operand) => {
            lower_in(operand, bound)
        }
        Kind::Index { operand, index, .. } => {
            lower_in(operand, bound);
            lower_in(index, bound);
        }
        Kind::Call { target, args, .. } => {
            if let Some(t) = target {
                lower_in(t, bound);
            }
            args.iter_mut().for_each(|a| lower_in(a, bound));
        }
        Kind::Binary { lhs, rhs, .. } => {
            lower_in(lhs, bound);
            lower_in(rhs, bound);
        }
        Kind::And(xs) | Kind::Or(xs) => xs.iter_mut().for_each(|x| lower_in(x, bound)),
        Kind::Cond { cond, then, otherwise } => {
            lower_in(cond, bound);
            lower_in(then, bound);
            lower_in(otherwise, bound);
        }
        Kind::List(xs) => xs.iter_mut().for_each(|(x, _)| lower_in(x, bound)),
        Kind::Map(xs) => xs.iter_mut().for_each(|(k, v, _)| {
            lower_in(k, bound);
            lower_in(v, bound);
        }),
        Kind::Comprehension(c) => {
            lower_in(&mut c.range, bound);
            let depth = bound.len();
            bound.push(c.var.clone());
            bound.extend(c.var2.clone());
            if let Some(f) = &mut c.filter {
                lower_in(f, bound);
            }
            lower_in(&mut c.body, bound);
            bound.truncate(depth);
        }
        Kind::Bind { var, init, body } => {
            lower_in(init, bound);
            bound.push(var.clone());
            lower_in(body, bound);
            bound.pop();
        }
        _ => {}
    }
    // Then this node. Only plain (non-optional) access is rewritten: optional access has its own
    // semantics.
    let lowered = match &e.kind {
        Kind::Select { operand, field, optional: false }
            if is_device(operand, shadowed) && field.as_ref() == "driver" =>
        {
            Some(Kind::DeviceDriver)
        }
        Kind::Select { operand, field, optional: false } => {
            device_domain(operand, shadowed).map(|(attrs, domain)| device_leaf(attrs, domain, field.clone()))
        }
        Kind::Index { operand, index, optional: false } => match (device_domain(operand, shadowed), key(index)) {
            (Some((attrs, domain)), Some(id)) => Some(device_leaf(attrs, domain, id)),
            _ => None,
        },
        // Pure functions of constants are computed once.
        Kind::Call { func, target: None, args } if matches!(func.as_ref(), "quantity" | "semver") => {
            let lits: Option<Vec<Value>> = args
                .iter()
                .map(|a| match &a.kind {
                    Kind::Lit(l) => Some(crate::eval::lit(l)),
                    Kind::Const(v) => Some(v.clone()),
                    _ => None,
                })
                .collect();
            lits.and_then(|vals| {
                let regexes = crate::regex_cache::RegexCache::default();
                let device = crate::device::DeviceView::empty();
                let mut ctx = crate::eval::Ctx::new(&device, &regexes, u64::MAX);
                // A constant that fails stays a call, so that the error surfaces at evaluation.
                crate::functions::call(&mut ctx, func, None, &vals, e.pos).ok().map(Kind::Const)
            })
        }
        // String literals share the interned copy, so that comparing with a device's string is
        // usually a pointer comparison.
        Kind::Lit(Lit::String(s)) => Some(Kind::Const(Value::String(crate::intern::shared_str(s)))),
        Kind::Lit(l) => Some(Kind::Const(crate::eval::lit(l))),
        // A list of constants is a constant (cel-go folds it too, so it costs nothing at runtime).
        Kind::List(xs) if xs.iter().all(|(x, optional)| !optional && matches!(x.kind, Kind::Const(_))) => {
            let vals: Vec<Value> = xs
                .iter()
                .map(|(x, _)| match &x.kind {
                    Kind::Const(v) => v.clone(),
                    _ => unreachable!("checked above"),
                })
                .collect();
            Some(Kind::Const(Value::list(vals)))
        }
        _ => None,
    };
    if let Some(k) = lowered {
        e.kind = k;
    }
}

fn device_leaf(attrs: bool, domain: Arc<str>, id: Arc<str>) -> Kind {
    let (domain, sym) = (crate::intern::intern(&domain), crate::intern::intern(&id));
    if attrs { Kind::DeviceAttr { domain, sym, id } } else { Kind::DeviceCap { domain, sym, id } }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered(src: &str) -> Expr {
        let mut e = crate::parser::parse(src).unwrap();
        lower(&mut e);
        e
    }

    #[test]
    fn device_paths_and_constants_are_lowered() {
        let e = lowered("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0");
        let Kind::Binary { lhs, rhs, .. } = e.kind else { panic!() };
        assert!(matches!(rhs.kind, Kind::Const(Value::Int(0))));
        let Kind::Call { target, args, .. } = lhs.kind else { panic!() };
        assert!(matches!(target.unwrap().kind, Kind::DeviceCap { .. }));
        assert!(matches!(args[0].kind, Kind::Const(Value::Quantity(_))));
        assert!(matches!(lowered("device.attributes.d.x").kind, Kind::DeviceAttr { .. }));
        assert!(matches!(lowered("device.driver").kind, Kind::DeviceDriver));
        // Optional access and shadowed `device` keep their general form.
        assert!(matches!(lowered("device.attributes['d'].?x").kind, Kind::Select { optional: true, .. }));
        assert!(
            !matches!(lowered("cel.bind(device, {'driver': 'x'}, device.driver)").kind, Kind::Bind { ref body, .. } if matches!(body.kind, Kind::DeviceDriver))
        );
    }
}
