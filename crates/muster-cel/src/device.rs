//! The `device` variable: a device of a ResourceSlice, converted once into the view selectors read.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::Device;
use muster_api::Quantity;

use crate::intern::{Sym, intern};
use crate::semver::Semver;
use crate::value::Value;

/// What a selector sees of a device (`kubernetes.DRADevice` in the CEL environment).
///
/// Attributes and capacities sit in contiguous arrays keyed by interned (domain, identifier)
/// pairs, in (domain, identifier) name order.
#[derive(Clone, Debug)]
pub struct DeviceView {
    pub driver: Arc<str>,
    /// `driver` as a CEL value, for comparisons in place.
    driver_value: Value,
    pub allow_multiple_allocations: bool,
    /// Attribute keys then capacity keys, (domain, identifier), inline: the API allows at most
    /// 32 attributes and capacities per device, so every lookup scans this array in place and
    /// touches one more cache line, for the value it finds.
    keys: [(Sym, Sym); MAX_ENTRIES],
    len: u8,
    num_attrs: u8,
    /// Attribute values, then capacities (as quantities), at their key's position.
    values: Box<[Value]>,
    /// The names behind `keys`, for iteration and messages.
    names: Box<[(Arc<str>, Arc<str>)]>,
}

/// Why a device cannot be shown to selectors. Fatal for an allocation, as upstream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("attribute {name}: {reason}")]
pub struct DeviceError {
    pub name: String,
    pub reason: String,
}

/// The API's limit on attributes plus capacities of one device.
pub const MAX_ENTRIES: usize = 32;

fn split<'a>(qualified: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    match qualified.split_once('/') {
        Some((d, id)) => (d, id),
        None => (driver, qualified),
    }
}

/// Keys, names and values of one kind of entry, in name order.
type Built<T> = (Box<[(Sym, Sym)]>, Box<[(Arc<str>, Arc<str>)]>, Box<[T]>);

/// Sorted, de-duplicated entries: of `x` and `<driver>/x`, the fully-qualified one wins (upstream
/// keeps whichever Go's map order gives last; muster is deterministic).
fn build<T>(mut entries: Vec<(String, String, bool, T)>) -> Built<T> {
    entries.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
    let mut keys = Vec::with_capacity(entries.len());
    let mut names: Vec<(Arc<str>, Arc<str>)> = Vec::with_capacity(entries.len());
    let mut values = Vec::with_capacity(entries.len());
    for (d, id, _, v) in entries {
        if names.last().is_some_and(|(ld, lid)| **ld == *d && **lid == *id) {
            // Sorted with unqualified first: the qualified one replaces it.
            *values.last_mut().expect("same length") = v;
            continue;
        }
        keys.push((intern(&d), intern(&id)));
        names.push((d.into(), id.into()));
        values.push(v);
    }
    (keys.into(), names.into(), values.into())
}

impl DeviceView {
    /// Converts a device published by `driver`. Attribute conversion errors are returned even when
    /// no selector would read the attribute, as upstream does.
    pub fn new(driver: &str, device: &Device) -> Result<DeviceView, DeviceError> {
        let mut attrs = Vec::new();
        for (name, a) in device.attributes.iter().flatten() {
            let err = |reason: String| DeviceError { name: name.clone(), reason };
            let version = |s: &str| {
                Semver::parse(s)
                    .map(|v| Value::Semver(Arc::new(v)))
                    .map_err(|e| err(format!("parse semantic version: {e}")))
            };
            let v = if let Some(xs) = &a.ints {
                Value::list(xs.iter().map(|i| Value::Int(*i)).collect())
            } else if let Some(xs) = &a.bools {
                Value::list(xs.iter().map(|b| Value::Bool(*b)).collect())
            } else if let Some(xs) = &a.strings {
                Value::list(xs.iter().map(|s| Value::String(crate::intern::shared_str(s))).collect())
            } else if let Some(xs) = &a.versions {
                Value::list(xs.iter().map(|s| version(s)).collect::<Result<_, _>>()?)
            } else if let Some(i) = a.int {
                Value::Int(i)
            } else if let Some(b) = a.bool {
                Value::Bool(b)
            } else if let Some(s) = &a.string {
                Value::String(crate::intern::shared_str(s))
            } else if let Some(s) = &a.version {
                version(s)?
            } else {
                return Err(err("unsupported attribute value".into()));
            };
            let (d, id) = split(name, driver);
            attrs.push((d.to_string(), id.to_string(), name.contains('/'), v));
        }
        let mut caps = Vec::new();
        for (name, c) in device.capacity.iter().flatten() {
            let q = muster_api::quantity::parse(&c.value.0)
                .map_err(|e| DeviceError { name: name.clone(), reason: format!("capacity: {e}") })?;
            let (d, id) = split(name, driver);
            caps.push((d.to_string(), id.to_string(), name.contains('/'), q));
        }
        let (attr_keys, attr_names, attr_values) = build(attrs);
        let (cap_keys, cap_names, cap_values) = build(caps);
        let len = attr_keys.len() + cap_keys.len();
        if len > MAX_ENTRIES {
            return Err(DeviceError {
                name: device.name.clone(),
                reason: format!("{len} attributes and capacities; the API allows at most {MAX_ENTRIES} per device"),
            });
        }
        let mut keys = [(Sym::NONE, Sym::NONE); MAX_ENTRIES];
        for (slot, k) in keys.iter_mut().zip(attr_keys.iter().chain(cap_keys.iter())) {
            *slot = *k;
        }
        let names: Box<[(Arc<str>, Arc<str>)]> = attr_names.iter().chain(cap_names.iter()).cloned().collect();
        let values: Box<[Value]> =
            attr_values.into_vec().into_iter().chain(cap_values.iter().map(|q| Value::Quantity(*q))).collect();
        Ok(DeviceView {
            driver: crate::intern::shared_str(driver),
            driver_value: Value::String(crate::intern::shared_str(driver)),
            allow_multiple_allocations: device.allow_multiple_allocations.unwrap_or(false),
            keys,
            len: len as u8,
            num_attrs: attr_keys.len() as u8,
            values,
            names,
        })
    }

    pub(crate) fn driver_value(&self) -> &Value {
        &self.driver_value
    }

    /// A device with no attributes or capacities (for evaluating constants).
    pub(crate) fn empty() -> DeviceView {
        DeviceView {
            driver: "".into(),
            driver_value: Value::String("".into()),
            allow_multiple_allocations: false,
            keys: [(Sym::NONE, Sym::NONE); MAX_ENTRIES],
            len: 0,
            num_attrs: 0,
            values: Box::new([]),
            names: Box::new([]),
        }
    }

    fn attr_keys(&self) -> &[(Sym, Sym)] {
        &self.keys[..self.num_attrs as usize]
    }

    fn cap_keys(&self) -> &[(Sym, Sym)] {
        &self.keys[self.num_attrs as usize..self.len as usize]
    }

    #[inline]
    pub(crate) fn attr(&self, domain: Sym, id: Sym) -> Option<&Value> {
        self.attr_keys().iter().position(|k| *k == (domain, id)).map(|i| &self.values[i])
    }

    #[inline]
    pub(crate) fn cap(&self, domain: Sym, id: Sym) -> Option<Quantity> {
        let at = self.cap_keys().iter().position(|k| *k == (domain, id))?;
        match self.values[self.num_attrs as usize + at] {
            Value::Quantity(q) => Some(q),
            _ => None,
        }
    }

    pub(crate) fn has_attr_domain(&self, domain: Sym) -> bool {
        self.attr_keys().iter().any(|(d, _)| *d == domain)
    }

    pub(crate) fn has_cap_domain(&self, domain: Sym) -> bool {
        self.cap_keys().iter().any(|(d, _)| *d == domain)
    }

    /// Attribute domains in name order, each once, with their symbol.
    pub(crate) fn attr_domains(&self) -> Vec<(Arc<str>, Sym)> {
        domains(self.attr_keys(), &self.names[..self.num_attrs as usize])
    }

    pub(crate) fn cap_domains(&self) -> Vec<(Arc<str>, Sym)> {
        domains(self.cap_keys(), &self.names[self.num_attrs as usize..])
    }

    /// A domain's (identifier, value) attributes in name order.
    pub(crate) fn attr_entries(&self, domain: Sym) -> impl Iterator<Item = (&Arc<str>, &Value)> {
        let n = self.num_attrs as usize;
        self.keys[..n]
            .iter()
            .zip(&self.names[..n])
            .zip(&self.values[..n])
            .filter(move |((k, _), _)| k.0 == domain)
            .map(|((_, (_, id)), v)| (id, v))
    }

    pub(crate) fn cap_entries(&self, domain: Sym) -> impl Iterator<Item = (&Arc<str>, Quantity)> {
        let (n, len) = (self.num_attrs as usize, self.len as usize);
        self.keys[n..len]
            .iter()
            .zip(&self.names[n..len])
            .zip(&self.values[n..len])
            .filter(move |((k, _), _)| k.0 == domain)
            .filter_map(|((_, (_, id)), v)| match v {
                Value::Quantity(q) => Some((id, *q)),
                _ => None,
            })
    }

    /// An attribute by its fully-qualified or driver-relative name (constraint lookup).
    pub fn attribute(&self, qualified: &str) -> Option<&Value> {
        let (domain, id) = split(qualified, &self.driver);
        let (Some(d), Some(i)) = (crate::intern::lookup(domain), crate::intern::lookup(id)) else { return None };
        self.attr(d, i)
    }
}

fn domains(keys: &[(Sym, Sym)], names: &[(Arc<str>, Arc<str>)]) -> Vec<(Arc<str>, Sym)> {
    let mut out: Vec<(Arc<str>, Sym)> = Vec::new();
    for ((d, _), (name, _)) in keys.iter().zip(names) {
        if out.last().is_none_or(|(_, s)| s != d) {
            out.push((name.clone(), *d));
        }
    }
    out
}
