//! The allocator's inputs as the watches report them — DeviceClasses, ResourceSlices,
//! DeviceTaintRules — and the changes the engine takes from them. The engine reads slices as the
//! scheduler sees them (DeviceTaintRules' taints added, and with health propagation the taints a
//! full device passes to its partitions: `muster_controllers::slice_view`). A slice's view
//! depends on its own devices, the rules, and with health propagation the other slices of its
//! pool (driver and pool name) alone. So a change of slices costs what it touches: without rules
//! and health propagation only the slices that changed are looked at (their view is the slice);
//! otherwise the views of the pools they were or are in are built and compared with the engine's
//! slices. Only a change of the rules, which may name any device, builds the view whole.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceSlice};
use muster_alloc::SliceIndex;
use muster_sched::DeviceChange;

use crate::observed::{Kind, Object, key_of};

/// A pool: its driver and its name.
type PoolKey = (String, String);

fn pool_of(slice: &ResourceSlice) -> PoolKey {
    (slice.spec.driver.clone(), slice.spec.pool.name.clone())
}

/// The allocator's inputs, by name, and what changed since the engine last took them.
#[derive(Default)]
pub struct DraInputs {
    pub classes: BTreeMap<String, DeviceClass>,
    slices: BTreeMap<String, ResourceSlice>,
    /// The names of each pool's slices.
    pools: BTreeMap<PoolKey, BTreeSet<String>>,
    rules: BTreeMap<String, DeviceTaintRule>,
    changed_slices: BTreeSet<String>,
    /// The pools the changed slices were in or are in now.
    touched_pools: BTreeSet<PoolKey>,
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
                self.touched_pools.insert(pool_of(&o));
                self.pools.entry(pool_of(&o)).or_default().insert(key.clone());
                if let Some(old) = self.slices.insert(key.clone(), *o) {
                    self.leave_pool_if_moved(&key, &old);
                }
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
            Kind::ResourceSlice => {
                if let Some(old) = self.slices.remove(key) {
                    self.changed_slices.insert(key.into());
                    self.leave_pool_if_moved(key, &old);
                }
            }
            Kind::DeviceTaintRule if self.rules.remove(key).is_some() => self.rules_changed = true,
            _ => {}
        }
    }

    /// Slice `key` was in `old`'s pool: unless it still is, it leaves the pool's list.
    fn leave_pool_if_moved(&mut self, key: &str, old: &ResourceSlice) {
        let pool = pool_of(old);
        if self.slices.get(key).is_some_and(|now| pool_of(now) == pool) {
            return;
        }
        if let Some(names) = self.pools.get_mut(&pool) {
            names.remove(key);
            if names.is_empty() {
                self.pools.remove(&pool);
            }
        }
        self.touched_pools.insert(pool);
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
        self.touched_pools.clear();
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
        if self.rules_changed {
            let after = self.view(health_propagation);
            out.extend(muster_sched::slice_changes(index, after, true));
            return out;
        }
        let changed = std::mem::take(&mut self.changed_slices);
        let touched = std::mem::take(&mut self.touched_pools);
        if self.rules.is_empty() && !health_propagation {
            out.extend(changed.into_iter().map(|name| match self.slices.get(&name) {
                Some(s) => DeviceChange::UpsertSlice(Box::new(s.clone())),
                None => DeviceChange::DeleteSlice(name),
            }));
            return out;
        }
        out.extend(changed.into_iter().filter(|n| !self.slices.contains_key(n)).map(DeviceChange::DeleteSlice));
        let rules: Vec<DeviceTaintRule> = self.rules.values().cloned().collect();
        for pool in touched {
            let Some(names) = self.pools.get(&pool) else { continue };
            let published: Vec<ResourceSlice> = names.iter().filter_map(|n| self.slices.get(n)).cloned().collect();
            let (view, _) = muster_controllers::slice_view::scheduling_view(&published, &rules, health_propagation);
            out.extend(muster_sched::slice_changes(index, view, false));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A slice of pool `node-<pool>` (generation `generation`): a full GPU of counter set
    /// `set-<name % 2>`, and a partition of the other set, whose full GPU is in another slice of
    /// the pool (health propagation crosses slices); the full GPU tainted when `taint` says so.
    fn slice(name: usize, pool: usize, generation: i64, taint: Option<&str>) -> ResourceSlice {
        let full = json!({"memory": {"value": "80Gi"}});
        let half = json!({"memory": {"value": "40Gi"}});
        let device = |n: String, set: usize, uses: &serde_json::Value| json!({"name": n, "consumesCounters": [{"counterSet": format!("set-{set}"), "counters": uses}]});
        let mut gpu = device(format!("full-{name}"), name % 2, &full);
        if let Some(effect) = taint {
            gpu["taints"] = json!([{"key": "gpu.example.com/xid", "value": "79", "effect": effect}]);
        }
        serde_json::from_value(json!({
            "metadata": {"name": format!("slice-{name}")},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": format!("node-{pool}"),
                "pool": {"name": format!("node-{pool}"), "generation": generation, "resourceSliceCount": 1},
                "sharedCounters": [{"name": "set-0", "counters": full}, {"name": "set-1", "counters": full}],
                "devices": [gpu, device(format!("part-{name}"), (name + 1) % 2, &half)]
            }
        }))
        .expect("a valid ResourceSlice")
    }

    fn rule(name: usize, pool: Option<usize>, device: Option<&str>) -> DeviceTaintRule {
        serde_json::from_value(json!({
            "metadata": {"name": format!("rule-{name}")},
            "spec": {
                "deviceSelector": {"pool": pool.map(|p| format!("node-{p}")), "device": device},
                "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}
            }
        }))
        .expect("a valid DeviceTaintRule")
    }

    #[derive(Clone, Debug)]
    enum Op {
        Slice {
            name: usize,
            pool: usize,
            generation: i64,
            taint: Option<&'static str>,
        },
        DeleteSlice(usize),
        Rule {
            name: usize,
            pool: Option<usize>,
            device: Option<&'static str>,
        },
        DeleteRule(usize),
        /// The engine takes what changed.
        Take,
    }

    fn op() -> impl Strategy<Value = Op> {
        let taint = prop::option::of(prop::sample::select(vec!["NoSchedule", "NoExecute", "None"]));
        let device = prop::option::of(prop::sample::select(vec!["full-0", "part-1"]));
        prop_oneof![
            4 => (0..6usize, 0..3usize, 1..3i64, taint)
                .prop_map(|(name, pool, generation, taint)| Op::Slice { name, pool, generation, taint }),
            1 => (0..6usize).prop_map(Op::DeleteSlice),
            1 => (0..2usize, prop::option::of(0..3usize), device)
                .prop_map(|(name, pool, device)| Op::Rule { name, pool, device }),
            1 => (0..2usize).prop_map(Op::DeleteRule),
            2 => Just(Op::Take),
        ]
    }

    fn apply(index: &mut SliceIndex, changes: Vec<DeviceChange>) {
        for change in changes {
            match change {
                DeviceChange::UpsertSlice(s) => drop(index.upsert(*s)),
                DeviceChange::DeleteSlice(name) => drop(index.delete(&name)),
                DeviceChange::UpsertClass(_) | DeviceChange::DeleteClass(_) => {}
            }
        }
    }

    fn sorted(slices: impl IntoIterator<Item = ResourceSlice>) -> Vec<ResourceSlice> {
        let mut v: Vec<ResourceSlice> = slices.into_iter().collect();
        v.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        v
    }

    proptest! {
        /// The engine's slices, kept up to date one change at a time (pool by pool), are the
        /// scheduling view built whole, with and without health propagation.
        #[test]
        fn changes_taken_pool_by_pool_keep_the_whole_view(ops in prop::collection::vec(op(), 1..40), health in any::<bool>()) {
            let mut inputs = DraInputs::default();
            let mut index = SliceIndex::new(inputs.view(health));
            let mut published: BTreeMap<String, ResourceSlice> = BTreeMap::new();
            let mut rules: BTreeMap<String, DeviceTaintRule> = BTreeMap::new();
            for op in ops.into_iter().chain([Op::Take]) {
                match op {
                    Op::Slice { name, pool, generation, taint } => {
                        let s = slice(name, pool, generation, taint);
                        published.insert(key_of(&s.metadata), s.clone());
                        inputs.upsert(Object::ResourceSlice(Box::new(s)));
                    }
                    Op::DeleteSlice(name) => {
                        let key = format!("slice-{name}");
                        published.remove(&key);
                        inputs.delete(Kind::ResourceSlice, &key);
                    }
                    Op::Rule { name, pool, device } => {
                        let r = rule(name, pool, device);
                        rules.insert(key_of(&r.metadata), r.clone());
                        inputs.upsert(Object::DeviceTaintRule(Box::new(r)));
                    }
                    Op::DeleteRule(name) => {
                        let key = format!("rule-{name}");
                        rules.remove(&key);
                        inputs.delete(Kind::DeviceTaintRule, &key);
                    }
                    Op::Take => {
                        let changes = inputs.take_changes(health, &index);
                        apply(&mut index, changes);
                        prop_assert!(!inputs.changed());
                        let slices: Vec<ResourceSlice> = published.values().cloned().collect();
                        let rules: Vec<DeviceTaintRule> = rules.values().cloned().collect();
                        let (whole, _) = muster_controllers::slice_view::scheduling_view(&slices, &rules, health);
                        let engine = sorted(index.slices().map(|(_, s)| s.clone()));
                        prop_assert_eq!(engine, sorted(whole));
                    }
                }
            }
        }
    }

    /// A slice that moves to another pool leaves the first one's list, and both pools' views
    /// are built again (the first pool's partitions may lose a propagated taint).
    #[test]
    fn a_slice_that_moves_pools_touches_both() {
        let mut inputs = DraInputs::default();
        inputs.upsert(Object::DeviceTaintRule(Box::new(rule(0, Some(9), None))));
        inputs.upsert(Object::ResourceSlice(Box::new(slice(0, 0, 1, Some("NoSchedule")))));
        let index = SliceIndex::new(inputs.view(true));
        inputs.upsert(Object::ResourceSlice(Box::new(slice(0, 1, 1, None))));
        assert_eq!(inputs.touched_pools.len(), 2);
        assert!(!inputs.pools.contains_key(&("gpu.example.com".to_string(), "node-0".to_string())));
        let changes = inputs.take_changes(true, &index);
        assert!(matches!(changes.as_slice(), [DeviceChange::UpsertSlice(s)] if s.spec.pool.name == "node-1"));
    }
}
