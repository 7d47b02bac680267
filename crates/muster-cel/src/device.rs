//! The `device` variable: a device of a ResourceSlice, converted once into the view selectors read.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::Device;
use muster_api::Quantity;

use crate::semver::Semver;
use crate::value::Value;

/// One domain's attributes or capacities, sorted by identifier.
#[derive(Clone, Debug, Default)]
pub struct Domain<T> {
    pub name: Arc<str>,
    pub entries: Vec<(Arc<str>, T)>,
}

impl<T> Domain<T> {
    pub fn get(&self, id: &str) -> Option<&T> {
        self.entries.binary_search_by(|(k, _)| k.as_ref().cmp(id)).ok().map(|i| &self.entries[i].1)
    }
}

/// What a selector sees of a device (`kubernetes.DRADevice` in the CEL environment).
#[derive(Clone, Debug, Default)]
pub struct DeviceView {
    pub driver: Arc<str>,
    /// Domains sorted by name.
    pub attributes: Vec<Domain<Value>>,
    pub capacity: Vec<Domain<Quantity>>,
    pub allow_multiple_allocations: bool,
}

/// Why a device cannot be shown to selectors. Fatal for an allocation, as upstream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("attribute {name}: {reason}")]
pub struct DeviceError {
    pub name: String,
    pub reason: String,
}

fn split<'a>(qualified: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    match qualified.split_once('/') {
        Some((d, id)) => (d, id),
        None => (driver, qualified),
    }
}

fn insert<T>(domains: &mut Vec<Domain<T>>, domain: &str, id: &str, v: T, qualified: bool, quals: &mut Vec<(String, String, bool)>) {
    let di = match domains.binary_search_by(|d| d.name.as_ref().cmp(domain)) {
        Ok(i) => i,
        Err(i) => {
            domains.insert(i, Domain { name: domain.into(), entries: Vec::new() });
            i
        }
    };
    let entries = &mut domains[di].entries;
    match entries.binary_search_by(|(k, _)| k.as_ref().cmp(id)) {
        Ok(i) => {
            // Upstream keeps whichever of `x` and `<driver>/x` Go's map order gives last; muster
            // keeps the fully-qualified one, always.
            let was_qualified = quals.iter().any(|(d, k, q)| d == domain && k == id && *q);
            if qualified || !was_qualified {
                entries[i].1 = v;
            }
        }
        Err(i) => entries.insert(i, (id.into(), v)),
    }
    quals.push((domain.to_string(), id.to_string(), qualified));
}

impl DeviceView {
    /// Converts a device published by `driver`. Attribute conversion errors are returned even when
    /// no selector would read the attribute, as upstream does.
    pub fn new(driver: &str, device: &Device) -> Result<DeviceView, DeviceError> {
        let mut view = DeviceView {
            driver: driver.into(),
            allow_multiple_allocations: device.allow_multiple_allocations.unwrap_or(false),
            ..Default::default()
        };
        let mut quals = Vec::new();
        for (name, a) in device.attributes.iter().flatten() {
            let err = |reason: String| DeviceError { name: name.clone(), reason };
            let version = |s: &str| {
                Semver::parse(s).map(|v| Value::Semver(Arc::new(v))).map_err(|e| err(format!("parse semantic version: {e}")))
            };
            let v = if let Some(xs) = &a.ints {
                Value::list(xs.iter().map(|i| Value::Int(*i)).collect())
            } else if let Some(xs) = &a.bools {
                Value::list(xs.iter().map(|b| Value::Bool(*b)).collect())
            } else if let Some(xs) = &a.strings {
                Value::list(xs.iter().map(|s| Value::string(s)).collect())
            } else if let Some(xs) = &a.versions {
                Value::list(xs.iter().map(|s| version(s)).collect::<Result<_, _>>()?)
            } else if let Some(i) = a.int {
                Value::Int(i)
            } else if let Some(b) = a.bool {
                Value::Bool(b)
            } else if let Some(s) = &a.string {
                Value::string(s)
            } else if let Some(s) = &a.version {
                version(s)?
            } else {
                return Err(err("unsupported attribute value".into()));
            };
            let (domain, id) = split(name, driver);
            insert(&mut view.attributes, domain, id, v, name.contains('/'), &mut quals);
        }
        quals.clear();
        for (name, c) in device.capacity.iter().flatten() {
            let q = muster_api::quantity::parse(&c.value.0)
                .map_err(|e| DeviceError { name: name.clone(), reason: format!("capacity: {e}") })?;
            let (domain, id) = split(name, driver);
            insert(&mut view.capacity, domain, id, q, name.contains('/'), &mut quals);
        }
        Ok(view)
    }

    pub fn attribute_domain(&self, domain: &str) -> Option<usize> {
        self.attributes.binary_search_by(|d| d.name.as_ref().cmp(domain)).ok()
    }

    pub fn capacity_domain(&self, domain: &str) -> Option<usize> {
        self.capacity.binary_search_by(|d| d.name.as_ref().cmp(domain)).ok()
    }

    /// An attribute by its fully-qualified or driver-relative name (constraint lookup).
    pub fn attribute(&self, qualified: &str) -> Option<&Value> {
        let (domain, id) = split(qualified, &self.driver);
        self.attribute_domain(domain).and_then(|i| self.attributes[i].get(id))
    }
}
