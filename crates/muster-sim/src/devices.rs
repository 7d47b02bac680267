//! The DRA inputs of a simulation, as the trace's device events change them: ResourceSlices as
//! drivers publish them (a GPU failure adds a taint to its device, a recovery removes it),
//! DeviceTaintRules (created, replaced and deleted by name) and DeviceClasses (fixed). After each
//! instant that changes them, [`crate::run`] gives the engine the slices whose scheduling view
//! changed: those of the pools a GPU event touched, or every slice after a rule's change
//! ([`DeviceInputs::changed_view`]).
//!
//! GPU failures follow NVIDIA's DRA driver with its health checks on: the device gets the taint
//! `gpu.nvidia.com/xid=<xid>` with effect `NoSchedule` for a fatal XID and `None` for the XIDs
//! the driver counts as the application's own ([`APPLICATION_XIDS`]); the driver never sets
//! `NoExecute` (admins do, with a DeviceTaintRule). A fatal XID also ends the processes on the
//! GPU: [`DeviceInputs::apply`] returns the devices whose holders fail (the GPU, and with health
//! propagation the partitions that share its counters).

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaint, DeviceTaintRule, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use muster_controllers::eviction::{DeviceKey, DeviceTaints};
use muster_controllers::slice_view::{device_taints, scheduling_view, view_of};

use crate::trace::{EventKind, Millis};
use crate::world::{EPOCH_MS, SimError};

/// The taint key NVIDIA's DRA driver sets on a GPU that reported an XID error.
pub const XID_TAINT_KEY: &str = "gpu.nvidia.com/xid";

/// XIDs the driver's health check leaves to the application (its own faults: a graphics engine
/// exception, an MMU fault, a reset channel...): tainted with effect `None`, not fatal.
pub const APPLICATION_XIDS: [u32; 6] = [13, 31, 43, 45, 68, 109];

/// Whether an XID makes the GPU unusable (and ends the processes on it).
pub fn fatal(xid: u32) -> bool {
    !APPLICATION_XIDS.contains(&xid)
}

/// ResourceSlices, DeviceTaintRules and DeviceClasses as they are now.
#[derive(Clone, Debug, Default)]
pub struct DeviceInputs {
    /// As drivers publish them, with the failures' taints.
    pub published: Vec<ResourceSlice>,
    /// In creation order (a replaced rule keeps its place).
    pub rules: Vec<DeviceTaintRule>,
    pub classes: Vec<DeviceClass>,
    /// Copy a full device's NoSchedule/NoExecute taints to its partitions (as `plan` does).
    pub health_propagation: bool,
    /// The pools (driver, pool) whose slices' views the events applied since the last
    /// [`DeviceInputs::changed_view`] may have changed; `None`: any slice's (a rule changed).
    touched: Option<BTreeSet<(String, String)>>,
}

/// The slices whose scheduling view may have changed, and every device's taints.
pub struct ChangedView {
    /// Every slice (`whole`), or those of the pools touched.
    pub slices: Vec<ResourceSlice>,
    pub whole: bool,
    pub taints: DeviceTaints,
}

impl DeviceInputs {
    pub fn new(
        published: Vec<ResourceSlice>,
        rules: Vec<DeviceTaintRule>,
        classes: Vec<DeviceClass>,
        health_propagation: bool,
    ) -> Self {
        DeviceInputs { published, rules, classes, health_propagation, touched: None }
    }

    /// The slices as the scheduler sees them now, and every device's taints with their sources.
    pub fn view(&self) -> (Vec<ResourceSlice>, DeviceTaints) {
        scheduling_view(&self.published, &self.rules, self.health_propagation)
    }

    /// The views of the slices the events applied since the last call may have changed (a
    /// slice's view depends on its own devices, the rules, and health propagation within its
    /// pool), and every device's taints; the same as [`DeviceInputs::view`] for those slices.
    pub fn changed_view(&mut self) -> ChangedView {
        let touched = self.touched.replace(BTreeSet::new());
        let taints = device_taints(&self.published, &self.rules, self.health_propagation);
        let pool = |s: &ResourceSlice| (s.spec.driver.clone(), s.spec.pool.name.clone());
        let slices = match &touched {
            None => self.published.iter().map(|s| view_of(s, &self.rules, &taints)).collect(),
            Some(pools) => self
                .published
                .iter()
                .filter(|s| pools.contains(&pool(s)))
                .map(|s| view_of(s, &self.rules, &taints))
                .collect(),
        };
        ChangedView { slices, whole: touched.is_none(), taints }
    }

    /// Applies one device event at virtual time `now`; returns the devices whose holders fail
    /// (a fatal XID's GPU; its partitions are added by [`failed_with_partitions`]).
    pub fn apply(&mut self, kind: &EventKind, now: Millis) -> Result<Vec<DeviceKey>, SimError> {
        match kind {
            EventKind::GpuFailure { node, device, xid } => {
                let effect = if fatal(*xid) { "NoSchedule" } else { "None" };
                let taint = DeviceTaint {
                    key: XID_TAINT_KEY.into(),
                    value: Some(xid.to_string()),
                    effect: effect.into(),
                    time_added: Some(time(now)?),
                };
                let (key, taints) = self.device_taints(node, device)?;
                let pool = (key.driver.clone(), key.pool.clone());
                if !taints.iter().any(|t| t.key == taint.key && t.value == taint.value) {
                    taints.push(taint);
                }
                self.touch(pool);
                Ok(if fatal(*xid) { vec![key] } else { Vec::new() })
            }
            EventKind::GpuRecovery { node, device } => {
                let (key, taints) = self.device_taints(node, device)?;
                taints.retain(|t| t.key != XID_TAINT_KEY);
                self.touch((key.driver, key.pool));
                Ok(Vec::new())
            }
            EventKind::DeviceTaintRule(rule) => {
                let mut rule = (**rule).clone();
                if rule.spec.taint.time_added.is_none() {
                    rule.spec.taint.time_added = Some(time(now)?); // as the API server does on create
                }
                match self.rules.iter_mut().find(|r| r.metadata.name == rule.metadata.name) {
                    Some(old) => *old = rule,
                    None => self.rules.push(rule),
                }
                self.touched = None;
                Ok(Vec::new())
            }
            EventKind::DeleteDeviceTaintRule(name) => {
                let before = self.rules.len();
                self.rules.retain(|r| r.metadata.name.as_deref() != Some(name));
                if self.rules.len() == before {
                    return Err(SimError(format!("the trace deletes DeviceTaintRule {name:?}, which does not exist")));
                }
                self.touched = None;
                Ok(Vec::new())
            }
            EventKind::DrainNode(_) | EventKind::ReturnNode(_) => Ok(Vec::new()),
        }
    }

    fn touch(&mut self, pool: (String, String)) {
        if let Some(pools) = self.touched.as_mut() {
            pools.insert(pool);
        }
    }

    /// The published taints of the node's device named `device` (the first driver's, in input
    /// order, when two drivers of the node publish that name).
    fn device_taints(&mut self, node: &str, device: &str) -> Result<(DeviceKey, &mut Vec<DeviceTaint>), SimError> {
        for s in self.published.iter_mut().filter(|s| s.spec.node_name.as_deref() == Some(node)) {
            let (driver, pool) = (s.spec.driver.as_str(), s.spec.pool.name.as_str());
            let key = |d: &str| DeviceKey::new(driver, pool, d);
            if let Some(d) = s.spec.devices.iter_mut().flatten().find(|d| d.name == device) {
                let key = key(&d.name);
                return Ok((key, d.taints.get_or_insert_with(Vec::new)));
            }
        }
        Err(SimError(format!("the trace names device {device:?} of node {node:?}, which no ResourceSlice publishes")))
    }
}

/// The failed devices with the partitions health propagation tainted from them.
pub fn failed_with_partitions(failed: &[DeviceKey], taints: &DeviceTaints) -> Vec<DeviceKey> {
    let mut out = failed.to_vec();
    for (key, copied) in taints.propagated() {
        let from_failed = copied.iter().any(|t| {
            t.taint.key == XID_TAINT_KEY
                && t.source.propagated_from().is_some_and(|from| {
                    failed.iter().any(|f| f.driver == key.driver && f.pool == key.pool && f.device == from)
                })
        });
        if from_failed && !out.contains(key) {
            out.push(key.clone());
        }
    }
    out
}

/// Virtual time as an API timestamp.
pub fn time(at: Millis) -> Result<Time, SimError> {
    let ms = i64::try_from(at).ok().and_then(|at| at.checked_add(EPOCH_MS));
    ms.and_then(|ms| k8s_openapi::jiff::Timestamp::from_millisecond(ms).ok())
        .map(Time)
        .ok_or_else(|| SimError(format!("time {at} ms is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(node: &str, devices: &[&str]) -> ResourceSlice {
        let devices: Vec<_> = devices.iter().map(|d| json!({"name": d})).collect();
        serde_json::from_value(json!({
            "metadata": {"name": format!("{node}-gpus")},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}
        }))
        .unwrap()
    }

    fn inputs() -> DeviceInputs {
        DeviceInputs { published: vec![slice("n1", &["gpu-0", "gpu-1"])], ..Default::default() }
    }

    fn taints_of(i: &DeviceInputs, device: &str) -> Vec<(String, Option<String>, String)> {
        let d = i.published[0].spec.devices.iter().flatten().find(|d| d.name == device).unwrap();
        d.taints.iter().flatten().map(|t| (t.key.clone(), t.value.clone(), t.effect.clone())).collect()
    }

    #[test]
    fn a_fatal_xid_taints_no_schedule_and_fails_the_gpu() {
        let mut i = inputs();
        let failed = i.apply(&EventKind::GpuFailure { node: "n1".into(), device: "gpu-1".into(), xid: 79 }, 5).unwrap();
        assert_eq!(failed, vec![DeviceKey::new("gpu.example.com", "n1", "gpu-1")]);
        assert_eq!(taints_of(&i, "gpu-1"), vec![(XID_TAINT_KEY.into(), Some("79".into()), "NoSchedule".into())]);
        assert!(taints_of(&i, "gpu-0").is_empty());
        // The same XID again adds nothing; a recovery removes it.
        i.apply(&EventKind::GpuFailure { node: "n1".into(), device: "gpu-1".into(), xid: 79 }, 6).unwrap();
        assert_eq!(taints_of(&i, "gpu-1").len(), 1);
        i.apply(&EventKind::GpuRecovery { node: "n1".into(), device: "gpu-1".into() }, 7).unwrap();
        assert!(taints_of(&i, "gpu-1").is_empty());
    }

    /// After GPU events, the slices of the touched pools, as the whole view has them; after a
    /// rule's change, every slice.
    #[test]
    fn the_changed_view_is_the_touched_pools_slices_of_the_whole_view() {
        let mut i =
            DeviceInputs::new(vec![slice("n1", &["gpu-0"]), slice("n2", &["gpu-0"])], Vec::new(), Vec::new(), true);
        let names = |v: &ChangedView| v.slices.iter().map(|s| s.metadata.name.clone().unwrap()).collect::<Vec<_>>();
        assert!(i.changed_view().whole, "at first, every slice");
        assert!(i.changed_view().slices.is_empty(), "nothing since");
        i.apply(&EventKind::GpuFailure { node: "n2".into(), device: "gpu-0".into(), xid: 79 }, 0).unwrap();
        let changed = i.changed_view();
        assert_eq!((names(&changed), changed.whole), (vec!["n2-gpus".to_string()], false));
        assert_eq!(changed.slices[0], i.view().0[1]);
        let rule = serde_json::from_value(json!({"metadata": {"name": "r"},
            "spec": {"taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}))
        .unwrap();
        i.apply(&EventKind::DeviceTaintRule(Box::new(rule)), 1).unwrap();
        let changed = i.changed_view();
        assert!(changed.whole);
        assert_eq!(changed.slices, i.view().0);
    }

    #[test]
    fn an_application_xid_taints_with_effect_none_and_fails_nothing() {
        let mut i = inputs();
        let failed = i.apply(&EventKind::GpuFailure { node: "n1".into(), device: "gpu-0".into(), xid: 13 }, 0).unwrap();
        assert!(failed.is_empty());
        assert_eq!(taints_of(&i, "gpu-0"), vec![(XID_TAINT_KEY.into(), Some("13".into()), "None".into())]);
    }

    #[test]
    fn an_unknown_device_or_rule_is_an_error() {
        let mut i = inputs();
        let e = i.apply(&EventKind::GpuFailure { node: "n2".into(), device: "gpu-0".into(), xid: 79 }, 0).unwrap_err();
        assert!(e.0.contains("\"gpu-0\" of node \"n2\""), "{e}");
        let e = i.apply(&EventKind::DeleteDeviceTaintRule("r".into()), 0).unwrap_err();
        assert!(e.0.contains("DeviceTaintRule \"r\""), "{e}");
    }

    #[test]
    fn a_rule_is_replaced_by_name_and_stamped_with_its_time() {
        let mut i = inputs();
        let rule: DeviceTaintRule = serde_json::from_value(json!({
            "metadata": {"name": "maintenance"},
            "spec": {"taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}
        }))
        .unwrap();
        i.apply(&EventKind::DeviceTaintRule(Box::new(rule.clone())), 1_000).unwrap();
        let mut again = rule;
        again.spec.taint.effect = "NoExecute".into();
        i.apply(&EventKind::DeviceTaintRule(Box::new(again)), 2_000).unwrap();
        assert_eq!(i.rules.len(), 1);
        assert_eq!(i.rules[0].spec.taint.effect, "NoExecute");
        assert_eq!(i.rules[0].spec.taint.time_added, Some(time(2_000).unwrap()));
        let (view, _) = i.view();
        assert_eq!(view[0].spec.devices.as_ref().unwrap()[0].taints.as_ref().unwrap().len(), 1);
        i.apply(&EventKind::DeleteDeviceTaintRule("maintenance".into()), 3_000).unwrap();
        assert!(i.rules.is_empty());
    }
}
