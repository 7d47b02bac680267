//! Claim constraints: matchAttribute and distinctAttribute (spec §4).
//!
//! Deviation from upstream, on purpose: each tracker keeps the values of its members (in the order
//! they were added) and decides from all of them. Upstream keys distinctAttribute's state by
//! request name, so a third device of one request is only compared with the second ([QUIRK]), and
//! does not widen matchAttribute's running intersection of list values when backtracking
//! ([QUIRK]); both can give wrong answers that muster does not reproduce.

use muster_cel::{DeviceView, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Match,
    Distinct,
}

/// One constraint of one claim.
pub struct Tracker {
    pub kind: Kind,
    pub attribute: String,
    /// Requests it applies to; empty = all.
    pub requests: Vec<String>,
    /// Values of the devices currently admitted, with the device's position in the claim's
    /// results (for removal).
    members: Vec<(usize, Value)>,
    list_types: bool,
}

/// The type of a scalar attribute value, or `None` for anything else.
fn kind(v: &Value) -> Option<u8> {
    match v {
        Value::Int(_) => Some(0),
        Value::Bool(_) => Some(1),
        Value::String(_) => Some(2),
        Value::Semver(_) => Some(3),
        _ => None,
    }
}

/// Equal scalars of one type. Versions compare as their text (semver text is canonical), which
/// includes build metadata.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Semver(x), Value::Semver(y)) => {
            (x.major, x.minor, x.patch) == (y.major, y.minor, y.patch) && x.pre == y.pre && x.build == y.build
        }
        _ => false,
    }
}

/// An attribute value as a typed set (ListTypeAttributes): lists by their elements, scalars as
/// singletons; `None` for an empty list or mixed element types.
fn as_set(v: &Value) -> Option<(u8, &[Value])> {
    match v {
        Value::List(items) => {
            let t = kind(items.first()?)?;
            items.iter().all(|i| kind(i) == Some(t)).then_some((t, &items[..]))
        }
        other => kind(other).map(|t| (t, std::slice::from_ref(other))),
    }
}

fn intersects(a: &[Value], b: &[Value]) -> bool {
    a.iter().any(|x| b.iter().any(|y| same(x, y)))
}

impl Tracker {
    pub fn new(kind: Kind, attribute: String, requests: Vec<String>, list_types: bool) -> Self {
        Tracker { kind, attribute, requests, members: Vec::new(), list_types }
    }

    /// Does the constraint apply to a device taken for `request` (`parent` when it is a
    /// subrequest)?
    pub fn applies(&self, request: &str, parent: Option<&str>) -> bool {
        self.requests.is_empty() || self.requests.iter().any(|r| r == request || parent.is_some_and(|p| r == p))
    }

    /// Admits the device at result position `at`, or rejects it.
    pub fn add(&mut self, at: usize, device: &DeviceView) -> bool {
        let Some(v) = device.attribute(&self.attribute).cloned() else { return false };
        if !self.accepts(&v) {
            return false;
        }
        self.members.push((at, v));
        true
    }

    pub fn remove(&mut self, at: usize) {
        if let Some(i) = self.members.iter().rposition(|(p, _)| *p == at) {
            self.members.remove(i);
        }
    }

    fn accepts(&self, v: &Value) -> bool {
        match (self.kind, self.list_types) {
            (Kind::Match, false) => {
                // Scalar semantics: the new value must be a scalar equal (same type) to the first.
                let Some((_, first)) = self.members.first() else { return true };
                kind(v).is_some() && same(v, first)
            }
            (Kind::Match, true) => {
                let Some((t, set)) = as_set(v) else { return false };
                // The intersection of every member's set with the new one must not be empty.
                let mut common: Vec<&Value> = set.iter().collect();
                for (_, m) in &self.members {
                    let Some((mt, ms)) = as_set(m) else { return false };
                    if mt != t {
                        return false;
                    }
                    common.retain(|x| ms.iter().any(|y| same(x, y)));
                }
                !common.is_empty()
            }
            (Kind::Distinct, false) => {
                if self.members.is_empty() {
                    return true;
                }
                kind(v).is_some() && self.members.iter().all(|(_, m)| !same(v, m))
            }
            (Kind::Distinct, true) => {
                if self.members.is_empty() {
                    return true;
                }
                let Some((t, set)) = as_set(v) else { return false };
                self.members.iter().all(|(_, m)| match as_set(m) {
                    Some((mt, ms)) => mt != t || !intersects(set, ms),
                    None => true,
                })
            }
        }
    }
}
