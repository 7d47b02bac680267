//! Device-attribute topology domains [beyond upstream] (docs/design/device-topology-domains.md):
//! the typed values of one device attribute that split a gang's devices into domains (an NVLink
//! clique, a Fabric Manager partition), which devices a domain allows the allocator to take, and
//! which domains the devices a node sees belong to.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use muster_cel::{DeviceView, Value};

use crate::SliceIndex;
use crate::state::Features;

/// One value of a device attribute, typed: `int 3` and `string "3"` are different domains.
/// Ordered by type (int, bool, string, version), then value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DomainValue {
    Int(i64),
    Bool(bool),
    String(Arc<str>),
    /// A version, by its canonical text.
    Version(String),
}

impl fmt::Display for DomainValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DomainValue::Int(i) => write!(f, "{i}"),
            DomainValue::Bool(b) => write!(f, "{b}"),
            DomainValue::String(s) => f.write_str(s),
            DomainValue::Version(v) => f.write_str(v),
        }
    }
}

impl DomainValue {
    fn of(v: &Value) -> Option<DomainValue> {
        Some(match v {
            Value::Int(i) => DomainValue::Int(*i),
            Value::Bool(b) => DomainValue::Bool(*b),
            Value::String(s) => DomainValue::String(s.clone()),
            Value::Semver(s) => DomainValue::Version(s.to_string()),
            _ => return None,
        })
    }
}

/// The domains a device belongs to by `attribute` (matchAttribute's lookup: qualified, or bare
/// when the domain is the device's driver): its scalar value, or with `list_types` every element
/// of a list value. Empty when the device lacks the attribute.
pub fn values_of(view: &DeviceView, attribute: &str, list_types: bool) -> Vec<DomainValue> {
    match view.attribute(attribute) {
        Some(Value::List(items)) if list_types => items.iter().filter_map(DomainValue::of).collect(),
        Some(v) => DomainValue::of(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// The devices one trial may take: those of a constrained driver must have `value` of
/// `attribute`; devices of other drivers are unconstrained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceDomain {
    pub attribute: String,
    pub value: DomainValue,
    /// The drivers with at least one device carrying the attribute
    /// ([`SliceIndex::constrained_drivers`]).
    pub drivers: Arc<BTreeSet<String>>,
    pub list_types: bool,
}

impl DeviceDomain {
    /// May the allocator take this device (`view` is its CEL view, or the conversion error)?
    pub fn allows<E>(&self, driver: &str, view: Result<&DeviceView, E>) -> bool {
        if !self.drivers.contains(driver) {
            return true;
        }
        view.is_ok_and(|v| values_of(v, &self.attribute, self.list_types).contains(&self.value))
    }
}

/// What the devices one node sees say about an attribute.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeDomains {
    /// Each value and the constrained devices carrying it (slice in the cluster's list, device
    /// in the slice).
    pub values: BTreeMap<DomainValue, Vec<(usize, usize)>>,
    /// Constrained devices the node sees, with or without the attribute.
    pub constrained: usize,
    /// The one value every constrained device has (each exactly one), if so: restricting to it
    /// removes nothing.
    pub uniform: Option<DomainValue>,
}

impl SliceIndex {
    /// The drivers that publish `attribute` on at least one device of the snapshot (a device
    /// whose view cannot be built counts for none).
    pub fn constrained_drivers(&self, attribute: &str, features: Features) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (si, s) in self.slices() {
            if out.contains(&s.spec.driver) {
                continue;
            }
            let found = (0..s.spec.devices.as_ref().map_or(0, Vec::len)).any(|di| {
                self.view(si, di).is_ok_and(|v| !values_of(&v, attribute, features.list_type_attributes).is_empty())
            });
            if found {
                out.insert(s.spec.driver.clone());
            }
        }
        out
    }

    /// The domains of the devices `node` sees (the allocator's candidates: complete, valid pools
    /// of the current generation), for the constrained `drivers`.
    pub fn node_domains(
        &self,
        node: Option<&Node>,
        attribute: &str,
        drivers: &BTreeSet<String>,
        features: Features,
    ) -> NodeDomains {
        let cell = self.gather(node, features);
        let gathered = cell.get();
        let mut out = NodeDomains::default();
        let mut uniform: Option<Option<DomainValue>> = None;
        for c in gathered.cands.iter().filter(|c| drivers.contains(&c.slice_ref.spec.driver)) {
            out.constrained += 1;
            let values = match self.view(c.global, c.index) {
                Ok(v) => values_of(&v, attribute, features.list_type_attributes),
                Err(_) => Vec::new(),
            };
            for v in &values {
                out.values.entry(v.clone()).or_default().push((c.global, c.index));
            }
            let one = (values.len() == 1).then(|| values[0].clone());
            uniform = Some(match uniform {
                None => one,
                Some(u) => u.filter(|u| one.as_ref() == Some(u)),
            });
        }
        out.uniform = uniform.flatten();
        out
    }

    /// The domains of an allocated device, looked up in its pool's newest generation; `None` when
    /// no slice publishes it.
    pub fn allocated_values(
        &self,
        driver: &str,
        pool: &str,
        device: &str,
        attribute: &str,
        list_types: bool,
    ) -> Option<Vec<DomainValue>> {
        let (slice, index) = self.find_device(driver, pool, device)?;
        Some(self.view(slice, index).map(|v| values_of(&v, attribute, list_types)).unwrap_or_default())
    }

    /// Is device `index` of slice `slice` allocated (dedicated or shared)?
    pub fn in_use(&self, (slice, index): (usize, usize), state: &crate::state::AllocatedState) -> bool {
        let s = self.slice(slice);
        let d = &s.spec.devices.as_deref().unwrap_or(&[])[index];
        state.in_use(&s.spec.driver, &s.spec.pool.name, &d.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

    fn view(attrs: &[(&str, DeviceAttribute)]) -> DeviceView {
        let d = Device {
            name: "gpu-0".into(),
            attributes: Some(attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()),
            ..Default::default()
        };
        DeviceView::new("gpu.example.com", &d).expect("valid device")
    }

    fn int(i: i64) -> DeviceAttribute {
        DeviceAttribute { int: Some(i), ..Default::default() }
    }

    #[test]
    fn values_are_typed_and_looked_up_as_match_attribute_does() {
        let v = view(&[("cliqueID", DeviceAttribute { string: Some("3".into()), ..Default::default() })]);
        assert_eq!(values_of(&v, "gpu.example.com/cliqueID", false), vec![DomainValue::String("3".into())]);
        assert_eq!(values_of(&v, "cliqueID", false), vec![DomainValue::String("3".into())]);
        assert!(values_of(&v, "other.example.com/cliqueID", false).is_empty());
        let w = view(&[("cliqueID", int(3))]);
        assert_ne!(values_of(&w, "cliqueID", false), values_of(&v, "cliqueID", false));
    }

    #[test]
    fn a_domain_constrains_only_its_drivers() {
        let d = DeviceDomain {
            attribute: "gpu.example.com/partition4".into(),
            value: DomainValue::Int(1),
            drivers: Arc::new(["gpu.example.com".to_string()].into()),
            list_types: false,
        };
        let one = view(&[("partition4", int(1))]);
        let zero = view(&[("partition4", int(0))]);
        let none = view(&[]);
        assert!(d.allows::<()>("gpu.example.com", Ok(&one)));
        assert!(!d.allows::<()>("gpu.example.com", Ok(&zero)));
        assert!(!d.allows::<()>("gpu.example.com", Ok(&none)));
        assert!(!d.allows("gpu.example.com", Err(())));
        assert!(d.allows::<()>("nic.example.com", Ok(&none)));
    }
}
