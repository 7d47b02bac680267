//! Gang topology domains keyed by a device attribute [beyond upstream]
//! (docs/design/device-topology-domains.md §4–6): the domains a PodGroup's cycle tries — the
//! values of the attribute over the devices the allocator can see, per node with scope `node`,
//! intersected with the node-label domains when the group has both — the pin of members already
//! running, the restriction each trial hands the allocator, and the share of a domain's devices in
//! use that scoring packs by.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use muster_alloc::{DeviceDomain, DomainValue};

use super::reasons::DomainError;
use super::*;
use crate::device_topology::{DeviceTopology, Scope};

/// A PodGroup's topology constraints: a node label (`schedulingConstraints.topology[0].key`),
/// a device attribute (its annotations), or both.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Topology<'a> {
    pub(super) label: Option<&'a str>,
    pub(super) device: Option<&'a DeviceTopology>,
}

impl Topology<'_> {
    pub(super) fn is_some(&self) -> bool {
        self.label.is_some() || self.device.is_some()
    }

    /// How messages name the domains: the label, the attribute, or both.
    pub(super) fn key_text(&self) -> String {
        match (self.label, self.device) {
            (Some(l), Some(d)) => format!("{l} and {d}"),
            (Some(l), None) => l.to_string(),
            (None, Some(d)) => d.to_string(),
            (None, None) => String::new(),
        }
    }
}

/// A device domain as a trial applies it.
#[derive(Debug)]
pub(crate) struct DeviceRestriction {
    pub(crate) domain: DeviceDomain,
    /// Per node: every constrained device it sees has the domain's value, so the restriction
    /// removes nothing there and the unrestricted verdicts apply.
    pub(crate) uniform: Vec<bool>,
    /// Mixed into the claim-spec fingerprint on the other nodes.
    pub(crate) salt: u64,
    /// The domain's constrained devices (slice, device), for scoring and `why`.
    pub(crate) devices: Vec<(usize, usize)>,
}

/// One domain a group's cycle tries.
pub(super) struct Domain {
    pub(super) value: String,
    pub(super) nodes: Vec<NodeId>,
    pub(super) device: Option<Arc<DeviceRestriction>>,
}

/// Where a domain sits in the order: label value, node (scope node), attribute value.
type DomainKey<'a> = (Option<&'a str>, Option<u32>, DomainValue);

/// A domain found so far: its nodes, those where it is uniform, its constrained devices.
type Found = (Vec<NodeId>, Vec<NodeId>, BTreeSet<(usize, usize)>);

/// A running member's pin: its node, and the values its constrained devices allow (`None`: it
/// has none).
type Pin = (NodeId, Option<BTreeSet<DomainValue>>);

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// The candidate domains of a group's topology, in order (within the parent's placement),
    /// pinned by the members already running.
    pub(super) fn group_domains(
        &self,
        t: Topology<'_>,
        within: Option<&[bool]>,
        members: &[PodId],
    ) -> Result<Vec<Domain>, DomainError> {
        let Some(device) = t.device else {
            let label = t.label.expect("a topology has a label or a device attribute");
            let domains = self.domains(label, within, members)?;
            return Ok(domains.into_iter().map(|(value, nodes)| Domain { value, nodes, device: None }).collect());
        };
        self.device_domains(t.label, device, within, members)
    }

    fn device_domains(
        &self,
        label: Option<&str>,
        topology: &DeviceTopology,
        within: Option<&[bool]>,
        members: &[PodId],
    ) -> Result<Vec<Domain>, DomainError> {
        let attr = topology.attribute.as_str();
        let no_device = || DomainError::NoDeviceAttribute { attr: attr.to_string() };
        let Some((ctx, _)) = self.dra.as_ref() else { return Err(no_device()) };
        let features = ctx.features;
        let drivers = ctx.index.constrained_drivers(attr, features);
        if drivers.is_empty() {
            return Err(no_device());
        }
        let drivers = Arc::new(drivers);
        let c = &*self.cluster;
        let mut found: BTreeMap<DomainKey<'_>, Found> = BTreeMap::new();
        for (i, n) in c.nodes.iter().enumerate() {
            if n.detail.removed || within.is_some_and(|w| !w[i]) {
                continue;
            }
            let label_value = match label {
                Some(k) => match n.detail.labels.get(k) {
                    Some(v) => Some(v.as_str()),
                    None => continue,
                },
                None => None,
            };
            let seen = ctx.index.node_domains(Some(&n.detail.node), attr, &drivers, features);
            let node = (topology.scope == Scope::Node).then_some(i as u32);
            for (value, devices) in seen.values {
                let uniform = seen.uniform.as_ref() == Some(&value);
                let entry = found.entry((label_value, node, value)).or_default();
                entry.0.push(NodeId(i as u32));
                if uniform {
                    entry.1.push(NodeId(i as u32));
                }
                entry.2.extend(devices);
            }
        }
        let pins = self.device_pins(members, attr, &drivers, features.list_type_attributes)?;
        let mut domains = Vec::new();
        for ((label_value, node, value), (nodes, uniform_nodes, devices)) in found {
            let pinned_out = pins
                .iter()
                .any(|(on, values)| !nodes.contains(on) || values.as_ref().is_some_and(|vs| !vs.contains(&value)));
            if pinned_out {
                continue;
            }
            let mut name: Vec<String> = label_value.into_iter().map(str::to_string).collect();
            name.extend(node.map(|n| c.nodes[n as usize].name().to_string()));
            name.push(value.to_string());
            let mut uniform = vec![false; c.nodes.len()];
            for n in &uniform_nodes {
                uniform[n.0 as usize] = true;
            }
            let salt = crate::cluster::stable_hash(&[attr, &format!("{value:?}")]);
            let domain = DeviceDomain {
                attribute: attr.to_string(),
                value,
                drivers: drivers.clone(),
                list_types: features.list_type_attributes,
            };
            let restriction = DeviceRestriction { domain, uniform, salt, devices: devices.into_iter().collect() };
            domains.push(Domain { value: name.join("/"), nodes, device: Some(Arc::new(restriction)) });
        }
        if domains.is_empty() {
            let (attr, within) = (attr.to_string(), within.is_some());
            return Err(if pins.is_empty() {
                DomainError::NoDeviceWith { attr, within }
            } else {
                DomainError::PinnedOut { attr, within }
            });
        }
        Ok(domains)
    }

    /// The members already running (or placed by this plan): each one's node and the values of
    /// its allocated constrained devices (`None`: it has none, so only its node pins).
    fn device_pins(
        &self,
        members: &[PodId],
        attr: &str,
        drivers: &BTreeSet<String>,
        list_types: bool,
    ) -> Result<Vec<Pin>, DomainError> {
        let Some((ctx, _)) = self.dra.as_ref() else { return Ok(Vec::new()) };
        let c = &*self.cluster;
        let mut pins = Vec::new();
        for m in members {
            let pod = c.pod(*m);
            let Some(node) = pod.state.on_node() else { continue };
            let mut allowed: Option<BTreeSet<DomainValue>> = None;
            for ci in pod.claims.iter().flatten() {
                let claim = &c.claims[*ci].claim;
                let alloc = claim.status.as_ref().and_then(|s| s.allocation.as_ref()).and_then(|a| a.devices.as_ref());
                for r in
                    alloc.into_iter().flat_map(|d| d.results.iter().flatten()).filter(|r| drivers.contains(&r.driver))
                {
                    let values: BTreeSet<DomainValue> = ctx
                        .index
                        .allocated_values(&r.driver, &r.pool, &r.device, attr, list_types)
                        .unwrap_or_default()
                        .into_iter()
                        .collect();
                    allowed = Some(match allowed {
                        None => values,
                        Some(a) => a.intersection(&values).cloned().collect(),
                    });
                }
            }
            if allowed.as_ref().is_some_and(BTreeSet::is_empty) {
                return Err(DomainError::MemberInSeveral { member: pod.key.to_string(), attr: attr.to_string() });
            }
            pins.push((node, allowed));
        }
        Ok(pins)
    }

    /// The share (0–100) of the domain's constrained devices in use now.
    pub(super) fn devices_in_use(&self, d: &DeviceRestriction) -> i64 {
        let Some((ctx, state)) = self.dra.as_ref() else { return 0 };
        if d.devices.is_empty() {
            return 0;
        }
        let used = d.devices.iter().filter(|k| ctx.index.in_use(**k, state)).count();
        crate::framework::MAX_NODE_SCORE * used as i64 / d.devices.len() as i64
    }

    /// The domain's constrained devices and how many are free now.
    pub(super) fn device_counts(&self, d: &DeviceRestriction) -> (usize, usize) {
        let Some((ctx, state)) = self.dra.as_ref() else { return (0, 0) };
        let used = d.devices.iter().filter(|k| ctx.index.in_use(**k, state)).count();
        (d.devices.len(), d.devices.len() - used)
    }
}
