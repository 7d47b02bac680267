//! What an allocation counts for in the simulation's utilization: devices in thousandths
//! ([`MILLI`]). A whole device counts 1000; a share of a device that allows multiple allocations
//! (a result with a `shareID`, such as an openb pod's part of a GPU) counts the part of the
//! device's capacity it consumed, so that shares of one device add up to at most the device.

use std::collections::HashMap;

use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, ResourceClaim, ResourceSlice};

/// Allocated devices are counted in thousandths: a whole device is `MILLI`, a share of a device
/// that allows multiple allocations the part of its capacity it consumed.
pub const MILLI: u64 = 1_000;

/// The capacities of the devices that allow multiple allocations, by (driver, pool, device): each
/// capacity's name and value in milli-units.
pub type SharedCapacity = HashMap<(String, String, String), Vec<(String, i64)>>;

/// [`SharedCapacity`] of the slices' devices that set `allowMultipleAllocations: true`
/// (capacities whose value does not parse, or is not positive, are left out).
pub fn shared_capacity(slices: &[ResourceSlice]) -> SharedCapacity {
    let mut out = SharedCapacity::new();
    for slice in slices {
        for d in slice.spec.devices.iter().flatten().filter(|d| d.allow_multiple_allocations == Some(true)) {
            let caps = d
                .capacity
                .iter()
                .flatten()
                .filter_map(|(name, c)| {
                    let v = muster_api::quantity::parse(&c.value.0).ok()?.milli_value();
                    (v > 0).then(|| (name.clone(), v))
                })
                .collect();
            out.insert((slice.spec.driver.clone(), slice.spec.pool.name.clone(), d.name.clone()), caps);
        }
    }
    out
}

/// The devices a claim's allocation holds, in [`MILLI`].
pub fn allocation_milli(shared: &SharedCapacity, claim: &ResourceClaim) -> u64 {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .map_or(0, |r| r.iter().map(|r| result_milli(shared, r)).sum())
}

/// One allocated device in [`MILLI`]: a share (a result with a `shareID`) of a device listed in
/// `shared` counts the largest part of a capacity it consumed, rounded up (nothing, when the
/// device publishes no capacity: its shares are unlimited); anything else is whole.
pub(crate) fn result_milli(shared: &SharedCapacity, r: &DeviceRequestAllocationResult) -> u64 {
    let (Some(_), Some(consumed)) = (&r.share_id, &r.consumed_capacity) else { return MILLI };
    if shared.is_empty() {
        return MILLI;
    }
    let Some(caps) = shared.get(&(r.driver.clone(), r.pool.clone(), r.device.clone())) else { return MILLI };
    let mut part = 0;
    for (name, value) in caps {
        let Some(q) = consumed.get(name).and_then(|q| muster_api::quantity::parse(&q.0).ok()) else { continue };
        let used = i128::from(q.milli_value().max(0)) * i128::from(MILLI);
        let share = (used + i128::from(*value) - 1) / i128::from(*value);
        part = part.max(share.min(i128::from(MILLI)) as u64);
    }
    part
}

/// Thousandths of devices as whole devices, to the nearest (for plots).
pub(crate) fn whole(milli: u64) -> u64 {
    (milli + MILLI / 2) / MILLI
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn slices() -> Vec<ResourceSlice> {
        let slice = json!({"metadata": {"name": "s"}, "spec": {"driver": "d", "nodeName": "n",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": [
                {"name": "gpu", "allowMultipleAllocations": true, "capacity": {"milli": {"value": "1000"}}},
                {"name": "nic", "allowMultipleAllocations": true, "capacity": {"bw": {"value": "3"}, "q": {"value": "0"}}},
                {"name": "open", "allowMultipleAllocations": true},
                {"name": "whole"}]}});
        vec![serde_json::from_value(slice).unwrap()]
    }

    fn result(device: &str, consumed: Option<serde_json::Value>) -> DeviceRequestAllocationResult {
        let mut r = json!({"request": "r", "driver": "d", "pool": "p", "device": device});
        if let Some(c) = consumed {
            r["shareID"] = json!("00000000-0000-0000-0000-000000000001");
            r["consumedCapacity"] = c;
        }
        serde_json::from_value(r).unwrap()
    }

    #[test]
    fn a_share_counts_its_part_of_the_device() {
        let shared = shared_capacity(&slices());
        assert_eq!(shared.len(), 3, "the multi-allocatable devices only");
        assert_eq!(shared[&("d".into(), "p".into(), "nic".into())], [("bw".to_string(), 3_000)], "q = 0 left out");
        assert_eq!(result_milli(&shared, &result("gpu", Some(json!({"milli": "460"})))), 460);
        assert_eq!(result_milli(&shared, &result("nic", Some(json!({"bw": "1"})))), 334, "a third, rounded up");
        assert_eq!(result_milli(&shared, &result("gpu", Some(json!({"milli": "2k"})))), MILLI, "at most whole");
        assert_eq!(result_milli(&shared, &result("open", Some(json!({})))), 0);
        assert_eq!(result_milli(&shared, &result("gpu", None)), MILLI, "no share: whole");
        assert_eq!(result_milli(&shared, &result("other", Some(json!({"milli": "1"})))), MILLI, "unknown: whole");
        assert_eq!(result_milli(&SharedCapacity::new(), &result("gpu", Some(json!({"milli": "1"})))), MILLI);
    }

    #[test]
    fn thousandths_round_to_the_nearest_device() {
        assert_eq!((whole(0), whole(499), whole(500), whole(1_499), whole(2_000)), (0, 0, 1, 1, 2));
    }
}
