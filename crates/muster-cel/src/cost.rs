//! The static cost estimate of a selector: the worst-case runtime cost cel-go's checker predicts
//! for the DRA environment, as the API server computes it to reject selectors over the limit
//! (`MaxCost > 1,000,000`). The scheduler itself does not use it; `muster check` will.
//!
//! Sizes come from the API's limits: a device has at most 32 attributes and capacities, domains
//! are at most 63 characters, identifiers 32, the driver name 63, an attribute value at most 64
//! characters or list elements; `includes` is estimated at 48 per call. All estimates saturate.

use std::sync::Arc;

use crate::ast::{BinOp, CompKind, Expr, Kind, Lit};

/// What the estimator knows of a node: its worst-case cost and size, and where in `device` it
/// points (which decides sizes and whether a field selection is charged).
#[derive(Clone, Debug)]
struct Est {
    cost: u64,
    /// Maximum size (characters, bytes, elements or entries); `None` when unknown.
    size: Option<u64>,
    path: Path,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Device,
    Driver,
    Attributes,
    Capacity,
    AttrDomain,
    CapDomain,
    AttrValue,
    CapValue,
    DomainKey,
    IdKey,
    /// A list literal (element size known separately) or any other list.
    List,
    Map,
    String,
    Other,
}

const ATTRIBUTE_VALUE_MAX: u64 = 64;
const MAX_ENTRIES: u64 = 32;
const DOMAIN_MAX: u64 = 63;
const ID_MAX: u64 = 32;
const DRIVER_MAX: u64 = 63;
const INCLUDES_ESTIMATE: u64 = 48;

fn ceil(n: u64, f: f64) -> u64 {
    (n as f64 * f).ceil() as u64
}

fn est(cost: u64, size: Option<u64>, path: Path) -> Est {
    Est { cost, size, path }
}

/// The estimated maximum cost of a parsed, checked expression.
pub fn estimate(e: &Expr) -> u64 {
    Estimator { vars: Vec::new() }.est(e).cost
}

struct Estimator {
    /// Bound variables: name → (path, size) of what they range over or hold.
    vars: Vec<(Arc<str>, Path, Option<u64>)>,
}

impl Estimator {
    fn est(&mut self, e: &Expr) -> Est {
        match &e.kind {
            Kind::Lit(l) => match l {
                Lit::String(s) => est(0, Some(s.chars().count() as u64), Path::String),
                Lit::Bytes(b) => est(0, Some(b.len() as u64), Path::Other),
                _ => est(0, Some(1), Path::Other),
            },
            Kind::Const(_) | Kind::DeviceDriver | Kind::DeviceAttr { .. } | Kind::DeviceCap { .. } => {
                est(0, None, Path::Other)
            }
            Kind::Ident(name) => {
                if let Some((_, path, size)) = self.vars.iter().rev().find(|(n, _, _)| n == name) {
                    return est(1, *size, *path);
                }
                if name.as_ref() == "device" { est(1, None, Path::Device) } else { est(1, None, Path::Other) }
            }
            Kind::Select { operand, field, .. } => {
                let o = self.est(operand);
                let charged = matches!(
                    o.path,
                    Path::Device | Path::Attributes | Path::Capacity | Path::AttrDomain | Path::CapDomain | Path::Map
                );
                let (path, size) = match (o.path, field.as_ref()) {
                    (Path::Device, "driver") => (Path::Driver, Some(DRIVER_MAX)),
                    (Path::Device, "attributes") => (Path::Attributes, Some(MAX_ENTRIES)),
                    (Path::Device, "capacity") => (Path::Capacity, Some(MAX_ENTRIES)),
                    (Path::Device, "allowMultipleAllocations") => (Path::Other, Some(1)),
                    (Path::Attributes, _) => (Path::AttrDomain, Some(MAX_ENTRIES)),
                    (Path::Capacity, _) => (Path::CapDomain, Some(MAX_ENTRIES)),
                    (Path::AttrDomain, _) => (Path::AttrValue, Some(ATTRIBUTE_VALUE_MAX)),
                    _ => (Path::Other, None),
                };
                est(o.cost.saturating_add(u64::from(charged)), size, path)
            }
            // `has()` is free of its own (PresenceTestHasCost(false)).
            Kind::Has { operand, .. } => est(self.est(operand).cost, Some(1), Path::Other),
            Kind::Index { operand, index, .. } => {
                let o = self.est(operand);
                let i = self.est(index);
                let (path, size) = match o.path {
                    Path::Attributes => (Path::AttrDomain, Some(MAX_ENTRIES)),
                    Path::Capacity => (Path::CapDomain, Some(MAX_ENTRIES)),
                    Path::AttrDomain => (Path::AttrValue, Some(ATTRIBUTE_VALUE_MAX)),
                    Path::CapDomain => (Path::CapValue, Some(0)),
                    _ => (Path::Other, None),
                };
                est(1u64.saturating_add(o.cost).saturating_add(i.cost), size, path)
            }
            Kind::Not(x) | Kind::Neg(x) => est(1u64.saturating_add(self.est(x).cost), Some(1), Path::Other),
            Kind::And(xs) | Kind::Or(xs) => {
                est(xs.iter().fold(0u64, |acc, x| acc.saturating_add(self.est(x).cost)), Some(1), Path::Other)
            }
            Kind::Cond { cond, then, otherwise } => {
                let c = self.est(cond);
                let (t, f) = (self.est(then), self.est(otherwise));
                est(c.cost.saturating_add(t.cost.max(f.cost)), max_size(t.size, f.size), Path::Other)
            }
            Kind::Binary { op, lhs, rhs } => {
                let (l, r) = (self.est(lhs), self.est(rhs));
                let args = l.cost.saturating_add(r.cost);
                let own = match op {
                    BinOp::Eq | BinOp::Ne => equality(&l, &r),
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
                        if l.path == Path::String && r.path == Path::String =>
                    {
                        equality(&l, &r)
                    }
                    BinOp::In => match r.path {
                        Path::List => r.size.unwrap_or(u64::MAX),
                        Path::Map | Path::Attributes | Path::Capacity | Path::AttrDomain | Path::CapDomain => 1,
                        // An attribute value may be a list (in_list) or not (in_map): the union.
                        Path::AttrValue => ATTRIBUTE_VALUE_MAX,
                        _ => r.size.unwrap_or(1),
                    },
                    BinOp::Add if l.path == Path::String || r.path == Path::String => {
                        ceil(l.size.unwrap_or(0).saturating_add(r.size.unwrap_or(0)), 0.1)
                    }
                    _ => 1,
                };
                let size = match op {
                    BinOp::Add => l.size.zip(r.size).map(|(a, b)| a.saturating_add(b)),
                    _ => Some(1),
                };
                let path = if *op == BinOp::Add && l.path == Path::String { Path::String } else { Path::Other };
                est(args.saturating_add(own), size, path)
            }
            Kind::List(xs) => {
                let mut cost = 10u64;
                for (x, _) in xs {
                    cost = cost.saturating_add(self.est(x).cost);
                }
                est(cost, Some(xs.len() as u64), Path::List)
            }
            Kind::Map(xs) => {
                let mut cost = 30u64;
                for (k, v, _) in xs {
                    cost = cost.saturating_add(self.est(k).cost).saturating_add(self.est(v).cost);
                }
                est(cost, Some(xs.len() as u64), Path::Map)
            }
            Kind::Bind { var, init, body } => {
                let i = self.est(init);
                self.vars.push((var.clone(), i.path, i.size));
                let b = self.est(body);
                self.vars.pop();
                est(10u64.saturating_add(i.cost).saturating_add(b.cost), b.size, b.path)
            }
            Kind::Comprehension(c) => {
                let range = self.est(&c.range);
                let n = range.size.unwrap_or(u64::MAX);
                // What the iteration variables hold.
                let (key, value) = match range.path {
                    Path::Attributes | Path::Capacity => ((Path::DomainKey, Some(DOMAIN_MAX)), (Path::Other, None)),
                    Path::AttrDomain | Path::CapDomain => ((Path::IdKey, Some(ID_MAX)), (Path::Other, None)),
                    Path::AttrValue => ((Path::Other, Some(1)), (Path::AttrValue, Some(ATTRIBUTE_VALUE_MAX))),
                    _ => ((Path::Other, None), (Path::Other, None)),
                };
                let depth = self.vars.len();
                match &c.var2 {
                    None => {
                        let bound = if matches!(
                            range.path,
                            Path::Attributes | Path::Capacity | Path::AttrDomain | Path::CapDomain | Path::Map
                        ) {
                            key
                        } else {
                            value
                        };
                        self.vars.push((c.var.clone(), bound.0, bound.1));
                    }
                    Some(v2) => {
                        self.vars.push((c.var.clone(), key.0, key.1));
                        self.vars.push((v2.clone(), value.0, value.1));
                    }
                }
                let p = self.est(&c.body).cost;
                let filter = c.filter.as_ref().map(|f| self.est(f).cost);
                self.vars.truncate(depth);
                // cel-go's macro expansions: (init, per-element cond + step, result).
                let (init, per_element, result) = match c.kind {
                    CompKind::All => (0, 3u64.saturating_add(p), 1),
                    CompKind::Exists => (0, 4u64.saturating_add(p), 1),
                    CompKind::ExistsOne => (0, p.saturating_add(2), 2),
                    CompKind::Map => match filter {
                        None => (10, 12u64.saturating_add(p), 1),
                        Some(f) => (10, f.saturating_add(12u64.saturating_add(p)), 1),
                    },
                    CompKind::Filter => (10, p.saturating_add(13), 1),
                };
                let cost = range
                    .cost
                    .saturating_add(init)
                    .saturating_add(result)
                    .saturating_add(n.saturating_mul(per_element));
                let out = if matches!(c.kind, CompKind::Map | CompKind::Filter) { Path::List } else { Path::Other };
                est(cost, if out == Path::List { range.size } else { Some(1) }, out)
            }
            Kind::Call { func, target, args } => {
                let t = target.as_deref().map(|t| self.est(t));
                let a: Vec<Est> = args.iter().map(|x| self.est(x)).collect();
                let args_cost = t.iter().chain(&a).fold(0u64, |acc, x| acc.saturating_add(x.cost));
                let size_of = |x: Option<&Est>| x.and_then(|x| x.size).unwrap_or(u64::MAX);
                let recv = t.as_ref();
                let own = match func.as_ref() {
                    "quantity" | "isQuantity" | "semver" | "isSemver" => ceil(size_of(a.first()), 0.1),
                    "find" | "findAll" | "matches" if recv.is_some() => {
                        ceil(size_of(recv).saturating_add(1), 0.1).saturating_mul(ceil(size_of(a.first()), 0.25))
                    }
                    "contains" => ceil(size_of(recv), 0.1).saturating_mul(ceil(size_of(a.first()), 0.1)),
                    "startsWith" | "endsWith" => ceil(size_of(a.first()), 0.1),
                    "lowerAscii" | "upperAscii" | "substring" | "trim" => ceil(size_of(recv), 0.1),
                    "split" | "replace" => ceil(size_of(recv), 0.2),
                    "isSorted" | "sum" | "min" | "max" | "indexOf" | "lastIndexOf" => match recv.map(|r| r.path) {
                        Some(Path::List) => size_of(recv),
                        _ => ceil(size_of(recv), 0.1),
                    },
                    "includes" => INCLUDES_ESTIMATE,
                    "sets.contains" | "sets.intersects" => {
                        size_of(a.first()).saturating_mul(size_of(a.get(1))).saturating_add(1)
                    }
                    "sets.equivalent" => {
                        size_of(a.first()).saturating_mul(size_of(a.get(1))).saturating_mul(2).saturating_add(1)
                    }
                    _ => 1,
                };
                let (path, size) = match func.as_ref() {
                    "split" | "findAll" => (Path::List, recv.and_then(|r| r.size)),
                    "lowerAscii" | "upperAscii" | "trim" | "substring" | "replace" | "find" | "string" => {
                        (Path::String, recv.or(a.first()).and_then(|r| r.size))
                    }
                    _ => (Path::Other, Some(1)),
                };
                est(args_cost.saturating_add(own), size, path)
            }
        }
    }
}

fn max_size(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    a.zip(b).map(|(a, b)| a.max(b))
}

/// `equals`: `ceil(min(size(lhs), size(rhs)) * 0.1)`.
fn equality(l: &Est, r: &Est) -> u64 {
    let s = l.size.unwrap_or(u64::MAX).min(r.size.unwrap_or(u64::MAX));
    if s == u64::MAX { 1 } else { ceil(s, 0.1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(src: &str) -> u64 {
        estimate(&crate::parser::parse(src).unwrap())
    }

    /// Found by the `cel` fuzz target: a conjunction of terms each estimated at `u64::MAX` (a
    /// comprehension over a range of unknown size) overflowed the sum. Every estimate saturates:
    /// the expression is refused for its cost, never accepted on a wrapped one.
    #[test]
    fn estimates_saturate_instead_of_wrapping() {
        let huge = "{'a': 1}['k'].all(x, x > 0)";
        assert_eq!(cost(huge), u64::MAX);
        for src in [
            format!("{huge} && {huge} && {huge}"),
            format!("{huge} || {huge}"),
            format!("!{huge}"),
            format!("[{huge}][0]"),
            format!("true ? {huge} : {huge}"),
            format!("{{'a': {huge}}}['a'].a && {huge}"),
        ] {
            assert_eq!(cost(&src), u64::MAX, "{src}");
        }
    }

    /// Upstream's reference estimates (k8s.io/dynamic-resource-allocation/cel `TestCEL`).
    #[test]
    fn matches_upstream_estimates() {
        let a = r#"device.attributes["dra.example.com"]"#;
        let c = r#"device.capacity["dra.example.com"]"#;
        let cases: Vec<(String, u64)> = vec![
            (r#"device.driver == """#.into(), 2),
            (r#"device.driver == "dra.example.com""#.into(), 4),
            (format!("{a}.name"), 4),
            (format!("cel.bind(dra, {a}, dra.name)"), 15),
            (format!("{a}.name > 0"), 5),
            (format!(r#"{a}.name == "fish""#), 5),
            (r#""dra.example.com" in device.attributes"#.into(), 3),
            (format!(r#"{c}.name.isGreaterThan(quantity("1Ki"))"#), 6),
            (format!(r#"{a}.name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)"#), 7),
            (format!(r#""name" in {c} && {c}.name.isGreaterThan(quantity("1Ki"))"#), 10),
            (format!(r#"!("name" in {c}) || {c}.name.isGreaterThan(quantity("1Ki"))"#), 11),
            (format!("{a}.a && {a}.b && {a}.c"), 12),
            (r#"device.attributes.exists_one(x, x == "dra.example.com")"#.into(), 164),
            (r#"device.capacity.exists_one(x, x == "dra.example.com")"#.into(), 164),
            (format!(r#"{a}.exists_one(x, x == "services")"#), 133),
            (format!(r#"{a}.services.split("example").size() >= 2"#), 19),
            (format!(r#"{a}.services.matches("[^a]?sym")"#), 18),
            (format!(r#"{a}.name.includes("fish")"#), 52),
            (format!("1 in {a}.names"), 68),
            (format!("{a}.names.exists(x, x > 0)"), 389),
            ("device.allowMultipleAllocations == true".into(), 3),
        ];
        for (src, want) in cases {
            assert_eq!(cost(&src), want, "{src}");
        }
        let all = [
            r#"device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki"))"#,
            r#"device.attributes["dra.example.com"].bool"#,
            r#"device.attributes["dra.example.com"].int > 0"#,
            r#"device.attributes["dra.example.com"].string == "fish""#,
            r#"device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1"))"#,
            r#"device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki"))"#,
            r#"device.attributes["dra.example.com"]["bool"]"#,
            r#"device.attributes["dra.example.com"]["int"] > 0"#,
            r#"device.attributes["dra.example.com"]["string"] == "fish""#,
            r#"device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))"#,
        ]
        .join(" && ");
        assert_eq!(cost(&all), 52);
        let mut expensive = "int('1'.find('[0-9]*')) < 100".to_string();
        for i in 0..7 {
            expensive = format!("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x{i}, {expensive})");
        }
        assert_eq!(cost(&expensive), 85_555_551);
    }
}
