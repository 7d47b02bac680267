//! The allocator's inputs as the watches report them — DeviceClasses, ResourceSlices,
//! DeviceTaintRules — and the changes the engine takes from them. The engine reads slices as the
//! scheduler sees them (DeviceTaintRules' taints added, and with health propagation the taints a
//! full device passes to its partitions: `muster_controllers::slice_view`). Without rules and
//! health propagation a slice's view is the slice, so only the slices that changed are looked at;
//! otherwise any slice's view may change, and the view is built whole and compared with the
//! engine's slices.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceSlice};
use muster_alloc::SliceIndex;
use muster_sched::DeviceChange;

use crate::observed::{Kind, Object, key_of};

/// The allocator's inputs, by name, and what changed since the engine last took them.
#[derive(Default)]
pub(crate) struct DraInputs {
    pub classes: BTreeMap<String, DeviceClass>,
    slices: BTreeMap<String, ResourceSlice>,
    rules: BTreeMap<String, DeviceTaintRule>,
    changed_slices: BTreeSet<String>,
    changed_classes: BTreeSet<String>,
    rules_changed: bool,
}

impl DraInputs {
    pub fn upsert(&mut self, object: Object) {
        match object {
            Object::DeviceClass(o) => {
                let key = key_of(&o.metadata);
                self.changed_classes.insert(key.clone());
                self.classes.insert(key, *o);
            }
            Object::ResourceSlice(o) => {
                let key = key_of(&o.metadata);
                self.changed_slices.insert(key.clone());
                self.slices.insert(key, *o);
            }
            Object::DeviceTaintRule(o) => {
                self.rules.insert(key_of(&o.metadata), *o);
                self.rules_changed = true;
            }
            _ => {}
        }
    }

    pub fn delete(&mut self, kind: Kind, key: &str) {
        match kind {
            Kind::DeviceClass if self.classes.remove(key).is_some() => drop(self.changed_classes.insert(key.into())),
            Kind::ResourceSlice if self.slices.remove(key).is_some() => drop(self.changed_slices.insert(key.into())),
            Kind::DeviceTaintRule if self.rules.remove(key).is_some() => self.rules_changed = true,
            _ => {}
        }
    }

    /// Has anything changed since the engine last took the inputs?
    pub fn changed(&self) -> bool {
        self.rules_changed || !self.changed_slices.is_empty() || !self.changed_classes.is_empty()
    }

    /// The scheduling view of every slice (what the engine starts with).
    pub fn view(&mut self, health_propagation: bool) -> Vec<ResourceSlice> {
        let published: Vec<ResourceSlice> = self.slices.values().cloned().collect();
        let rules: Vec<DeviceTaintRule> = self.rules.values().cloned().collect();
        let (view, _) = muster_controllers::slice_view::scheduling_view(&published, &rules, health_propagation);
        self.changed_slices.clear();
        self.changed_classes.clear();
        self.rules_changed = false;
        view
    }

    /// What changed since the engine last took the inputs, as changes it takes one at a time;
    /// `index` is the engine's.
    pub fn take_changes(&mut self, health_propagation: bool, index: &SliceIndex) -> Vec<DeviceChange> {
        let mut out: Vec<DeviceChange> = std::mem::take(&mut self.changed_classes)
            .into_iter()
            .map(|name| match self.classes.get(&name) {
                Some(c) => DeviceChange::UpsertClass(Box::new(c.clone())),
                None => DeviceChange::DeleteClass(name),
            })
            .collect();
        let changed = std::mem::take(&mut self.changed_slices);
        if self.rules.is_empty() && !self.rules_changed && !health_propagation {
            out.extend(changed.into_iter().map(|name| match self.slices.get(&name) {
                Some(s) => DeviceChange::UpsertSlice(Box::new(s.clone())),
                None => DeviceChange::DeleteSlice(name),
            }));
            return out;
        }
        let after = self.view(health_propagation);
        out.extend(muster_sched::slice_changes(index, after, true));
        out
    }
}
