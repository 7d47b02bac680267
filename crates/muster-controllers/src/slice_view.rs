//! ResourceSlices as the scheduler sees them: the published devices with the taints of
//! DeviceTaintRules added, then (muster's addition, optional) the taints health propagation
//! copies from a full device to its partitions. Every world builds its scheduling view here, so
//! `plan`, `sim` and `run` see the same devices for the same objects.

use k8s_openapi::api::resource::v1::{DeviceTaintRule, ResourceSlice};

use crate::eviction::{DeviceKey, DeviceTaints, rule_selects};

/// DeviceTaintRules, applied: each rule's taint is added to every device its selector names
/// (driver, pool, device; a rule without a selector names every device, as upstream's code does).
pub fn apply_taint_rules(slices: &mut [ResourceSlice], rules: &[DeviceTaintRule]) {
    for rule in rules {
        for s in slices.iter_mut() {
            let (driver, pool) = (s.spec.driver.as_str(), s.spec.pool.name.as_str());
            for d in s.spec.devices.iter_mut().flatten() {
                if rule_selects(rule, driver, pool, &d.name) {
                    d.taints.get_or_insert_with(Vec::new).push(rule.spec.taint.clone());
                }
            }
        }
    }
}

/// Health propagation, applied after the rules: each device gets the taints
/// [`DeviceTaints::propagate_health`] copied to it from its full device.
pub fn apply_propagated_taints(slices: &mut [ResourceSlice], taints: &DeviceTaints) {
    let propagated = taints.propagated();
    if propagated.is_empty() {
        return;
    }
    for s in slices.iter_mut() {
        let (driver, pool) = (s.spec.driver.clone(), s.spec.pool.name.clone());
        for d in s.spec.devices.iter_mut().flatten() {
            if let Some(extra) = propagated.get(&DeviceKey::new(&driver, &pool, &d.name)) {
                d.taints.get_or_insert_with(Vec::new).extend(extra.iter().map(|t| t.taint.clone()));
            }
        }
    }
}

/// Every device's taints with their sources (the driver's, the rules', and with health
/// propagation the ones copied from a full device): [`scheduling_view`]'s second half, without
/// the view. Health propagation reads the pools' structure and these taints, not the view's.
pub fn device_taints(slices: &[ResourceSlice], rules: &[DeviceTaintRule], health_propagation: bool) -> DeviceTaints {
    let mut taints = DeviceTaints::new(slices, rules);
    if health_propagation {
        taints.propagate_health(slices);
    }
    taints
}

/// The scheduling view of one slice, given every device's taints ([`device_taints`] of the same
/// slices and rules): what [`scheduling_view`] makes of it.
pub fn view_of(slice: &ResourceSlice, rules: &[DeviceTaintRule], taints: &DeviceTaints) -> ResourceSlice {
    let mut view = [slice.clone()];
    apply_taint_rules(&mut view, rules);
    apply_propagated_taints(&mut view, taints);
    let [view] = view;
    view
}

/// The scheduling view of `slices` under `rules`, with health propagation when asked; also
/// returns every device's taints with their sources.
pub fn scheduling_view(
    slices: &[ResourceSlice],
    rules: &[DeviceTaintRule],
    health_propagation: bool,
) -> (Vec<ResourceSlice>, DeviceTaints) {
    let mut taints = DeviceTaints::new(slices, rules);
    let mut view = slices.to_vec();
    apply_taint_rules(&mut view, rules);
    if health_propagation {
        taints.propagate_health(&view);
        apply_propagated_taints(&mut view, &taints);
    }
    (view, taints)
}
