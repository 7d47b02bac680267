//! DynamicResources' PreBind wait for binding conditions (KEP-5007, beta and on in 1.37): once a
//! unit's claims are written, every device allocated with `bindingConditions` must have each of
//! them `True` in the claim's `status.devices` (its driver writes them, e.g. once a
//! fabric-attached GPU is attached to the node) before the unit's pods are bound. The pods get a
//! `BindingConditionsPending` event; the claims are read again with a growing pause (up to
//! upstream's 5 s); a `bindingFailureConditions` entry that is `True`, or DynamicResources'
//! `bindingTimeout`, fails the binding cycle.
//!
//! After such a failure kube-scheduler's next cycle finds the claim unusable (Filter) and
//! deallocates it (PostFilter); muster deallocates it at once, when no pod outside the unit holds
//! it — the same end, one cycle sooner — so that the pod's next cycle allocates afresh.

use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, DeviceRequestAllocationResult, ResourceClaim};
use kube::Api;
use muster_sched::effects::EventType;

use crate::jobs::BindUnit;
use crate::writes::{Writer, pp};

/// The longest pause between two reads of the claims (upstream polls every 5 s).
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Whether some device of the claim's allocation has binding conditions.
pub fn waits(claim: &ResourceClaim) -> bool {
    results(claim).iter().any(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
}

/// Upstream's `isClaimReadyForBinding`: every binding condition of every device is `True`
/// (`Ok(true)`), some is not yet (`Ok(false)`), or a binding-failure condition is `True` (the
/// error names it).
pub fn ready(claim: &ResourceClaim) -> Result<bool, String> {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    for r in results(claim) {
        let conditions = r.binding_conditions.as_deref().unwrap_or_default();
        if conditions.is_empty() {
            continue;
        }
        let Some(status) = device_status(claim, r) else { return Ok(false) };
        for failure in r.binding_failure_conditions.iter().flatten() {
            if let Some(c) = condition(status, failure).filter(|c| c.status == "True") {
                return Err(format!("claim {name} binding failed: reason={}, message={:?}", c.reason, c.message));
            }
        }
        if !conditions.iter().all(|want| condition(status, want).is_some_and(|c| c.status == "True")) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn results(claim: &ResourceClaim) -> &[DeviceRequestAllocationResult] {
    let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
    allocation.and_then(|a| a.devices.as_ref()?.results.as_deref()).unwrap_or_default()
}

fn device_status<'c>(claim: &'c ResourceClaim, r: &DeviceRequestAllocationResult) -> Option<&'c AllocatedDeviceStatus> {
    let devices = claim.status.as_ref()?.devices.as_deref()?;
    devices.iter().find(|d| d.driver == r.driver && d.pool == r.pool && d.device == r.device)
}

fn condition<'s>(
    status: &'s AllocatedDeviceStatus,
    type_: &str,
) -> Option<&'s k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    status.conditions.iter().flatten().find(|c| c.type_ == type_)
}

impl Writer {
    /// Waits until the written claims' devices meet their binding conditions. `claims` are the
    /// unit's writes (key, the API server's copy): each copy read again replaces the written one,
    /// and a claim deallocated after a failure is reported as deallocated.
    pub(crate) async fn wait_binding_conditions(
        &self,
        unit: &BindUnit,
        claims: &mut [(String, Option<ResourceClaim>)],
    ) -> Result<(), String> {
        let waiting: Vec<usize> = (0..claims.len()).filter(|&i| claims[i].1.as_ref().is_some_and(waits)).collect();
        if waiting.is_empty() {
            return Ok(());
        }
        for b in &unit.pods {
            let note = format!("waiting for binding conditions for device on node {}", b.node);
            self.event(&b.pod, EventType::Normal, "BindingConditionsPending", "Scheduling", &note).await;
        }
        let deadline = Instant::now() + self.dra_binding_timeout;
        let mut pause = Duration::from_millis(50);
        loop {
            match self.all_ready(&waiting, claims).await {
                Ok(true) => return Ok(()),
                Ok(false) if Instant::now() < deadline => {}
                Ok(false) => return Err(self.give_up(unit, &waiting, claims, "device binding timeout".into()).await),
                Err(e) => return Err(self.give_up(unit, &waiting, claims, e).await),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// Reads each waiting claim again; whether all are ready.
    async fn all_ready(
        &self,
        waiting: &[usize],
        claims: &mut [(String, Option<ResourceClaim>)],
    ) -> Result<bool, String> {
        let mut all = true;
        for &i in waiting {
            let Some(held) = claims[i].1.as_ref() else { continue };
            let ns = held.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = held.metadata.name.clone().unwrap_or_default();
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
            let fresh =
                self.call("get", "resourceclaims", api.get(&name)).await.map_err(|e| format!("claim {name}: {e}"))?;
            let verdict = ready(&fresh);
            claims[i].1 = Some(fresh);
            all &= verdict?;
        }
        Ok(all)
    }

    /// The cycle failed: each waiting claim no pod outside the unit holds is deallocated.
    /// Returns the failure.
    async fn give_up(
        &self,
        unit: &BindUnit,
        waiting: &[usize],
        claims: &mut [(String, Option<ResourceClaim>)],
        why: String,
    ) -> String {
        let ours = |uid: &str| unit.pods.iter().any(|b| b.pod.uid == uid);
        for &i in waiting {
            let Some(held) = claims[i].1.clone() else { continue };
            let reserved = held.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or_default();
            if !reserved.iter().all(|r| ours(&r.uid)) {
                continue;
            }
            match self.deallocate(held).await {
                Ok(c) => claims[i].1 = Some(c),
                Err(e) => tracing::warn!(claim = %claims[i].0, error = %e, "claim not deallocated"),
            }
        }
        why
    }

    /// The claim's allocation, reservations and device status cleared (upstream's PostFilter).
    async fn deallocate(&self, mut claim: ResourceClaim) -> Result<ResourceClaim, kube::Error> {
        let ns = claim.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = claim.metadata.name.clone().unwrap_or_default();
        if let Some(status) = claim.status.as_mut() {
            status.allocation = None;
            status.reserved_for = None;
            status.devices = None;
        }
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        self.call("update", "resourceclaims/status", api.replace_status(&name, &pp(), &claim)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(conditions: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "gpu", "namespace": "ml"},
            "spec": {},
            "status": {
                "allocation": {"devices": {"results": [{
                    "request": "gpu", "driver": "fabric.example.com", "pool": "p", "device": "gpu-0",
                    "bindingConditions": ["attached"], "bindingFailureConditions": ["attach-failed"],
                }]}},
                "devices": [{"driver": "fabric.example.com", "pool": "p", "device": "gpu-0", "conditions": conditions}],
            },
        }))
        .unwrap()
    }

    fn cond(type_: &str, status: &str) -> serde_json::Value {
        json!({"type": type_, "status": status, "reason": "Driver", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn a_claim_is_ready_once_every_binding_condition_is_true() {
        assert!(waits(&claim(json!([]))));
        assert_eq!(ready(&claim(json!([]))), Ok(false));
        assert_eq!(ready(&claim(json!([cond("attached", "False")]))), Ok(false));
        assert_eq!(ready(&claim(json!([cond("attached", "True")]))), Ok(true));
        let failed = ready(&claim(json!([cond("attached", "False"), cond("attach-failed", "True")])));
        assert_eq!(failed, Err("claim gpu binding failed: reason=Driver, message=\"m\"".into()));
    }

    #[test]
    fn a_device_without_binding_conditions_needs_no_wait() {
        let mut c = claim(json!([]));
        let devices = c.status.as_mut().unwrap().allocation.as_mut().unwrap().devices.as_mut().unwrap();
        devices.results.as_mut().unwrap()[0].binding_conditions = None;
        assert!(!waits(&c));
        assert_eq!(ready(&c), Ok(true));
    }
}
