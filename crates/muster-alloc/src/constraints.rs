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

/// An attribute value as a typed set: element type and elements (rendered for comparison).
fn as_set(v: &Value) -> Option<(&'static str, Vec<String>)> {
    fn scalar(v: &Value) -> Option<(&'static str, String)> {
        match v {
            Value::Int(i) => Some(("int", i.to_string())),
            Value::Bool(b) => Some(("bool", b.to_string())),
            Value::String(s) => Some(("string", s.to_string())),
            Value::Semver(s) => Some(("version", s.to_string())),
            _ => None,
        }
    }
    match v {
        Value::List(items) => {
            let mut ty = None;
            let mut out = Vec::new();
            for i in items.iter() {
                let (t, s) = scalar(i)?;
                ty = Some(t);
                out.push(s);
            }
            ty.map(|t| (t, out))
        }
        other => scalar(other).map(|(t, s)| (t, vec![s])),
    }
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
                let Some((_, first)) = self.members.first() else { return true };
                // Scalar semantics: the new value must be a scalar equal (same type) to the first.
                match (as_set(v), as_set(first)) {
                    (Some((t, s)), Some((ft, fs))) if !matches!(v, Value::List(_)) => {
                        !matches!(first, Value::List(_)) && t == ft && s == fs
                    }
                    _ => false,
                }
            }
            (Kind::Match, true) => {
                let Some((t, set)) = as_set(v) else { return false };
                if set.is_empty() {
                    return false;
                }
                // The intersection of every member's set with the new one must not be empty.
                let mut common: Vec<&String> = set.iter().collect();
                for (_, m) in &self.members {
                    let Some((mt, ms)) = as_set(m) else { return false };
                    if mt != t {
                        return false;
                    }
                    common.retain(|x| ms.contains(x));
                }
                !common.is_empty()
            }
            (Kind::Distinct, false) => {
                if self.members.is_empty() {
                    return true;
                }
                if matches!(v, Value::List(_)) {
                    return false;
                }
                let Some((t, s)) = as_set(v) else { return false };
                self.members.iter().all(|(_, m)| match as_set(m) {
                    Some((mt, ms)) if !matches!(m, Value::List(_)) => mt != t || ms != s,
                    _ => true,
                })
            }
            (Kind::Distinct, true) => {
                let set = as_set(v);
                if self.members.is_empty() {
                    return true;
                }
                let Some((t, s)) = set.filter(|(_, s)| !s.is_empty()) else { return false };
                self.members.iter().all(|(_, m)| match as_set(m) {
                    Some((mt, ms)) => mt != t || !ms.iter().any(|x| s.contains(x)),
                    None => true,
                })
            }
        }
    }
}
