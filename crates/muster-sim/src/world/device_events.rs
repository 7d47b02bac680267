//! What the world does at a device event: the caller gives the engine the changed slices
//! ([`Sim::devices_changed`]), then the step fails the pods that held a GPU that failed
//! (their jobs restart) and evicts the pods NoExecute device taints evict (the device-taint
//! eviction controller's work, [`muster_controllers::eviction::evictions`]), now or when their
//! tolerations run out. It also keeps the fragmentation figures' devices out of service (tainted
//! `NoSchedule` or `NoExecute`, held by no claim) current.

use std::collections::BTreeSet;

use muster_controllers::eviction::{DeviceKey, DeviceTaints, evictions};
use muster_sched::DeviceChange;

use super::{DeviceUpdate, EPOCH_MS, Event, Sim, SimError, allocated};
use crate::devices::{XID_TAINT_KEY, failed_with_partitions};
use crate::trace::{EventKind, Millis};

impl<'d, 's> Sim<'d, 's> {
    /// The time of the next device event not yet carried out.
    pub(super) fn next_device_event(&self) -> Option<Millis> {
        let i = *self.w.device_events.get(self.w.device_cursor)?;
        Some(self.w.trace.events[i as usize].at)
    }

    /// The device events due at the next step, when the caller must carry them out on the DRA
    /// inputs before it runs: their time and kinds, in trace order.
    pub fn devices_due(&self) -> Option<(Millis, Vec<EventKind>)> {
        let t = self.next_time()?;
        if self.w.update.is_some() || self.next_device_event() != Some(t) {
            return None;
        }
        let due = self.w.device_events[self.w.device_cursor..]
            .iter()
            .map(|i| &self.w.trace.events[*i as usize])
            .take_while(|e| e.at == t)
            .map(|e| e.kind.clone())
            .collect();
        Some((t, due))
    }

    /// The device events due were carried out: the engine takes `changes` (the slices whose
    /// scheduling view changed) now, and the next step, at `update.at`, does the rest.
    pub fn devices_changed(&mut self, changes: Vec<DeviceChange>, update: DeviceUpdate) -> Result<(), SimError> {
        for change in changes {
            self.engine.apply_devices(change, update.at).map_err(|e| SimError(format!("at {} ms: {e}", update.at)))?;
        }
        self.w.update = Some(update);
        Ok(())
    }

    /// The step's share of a device event: holders of failed GPUs fail, tainted pods are evicted.
    pub(super) fn on_devices(&mut self, update: DeviceUpdate) -> Result<(), SimError> {
        let failed = failed_with_partitions(&update.failed, &update.taints);
        self.count_out_of_service(&update.taints);
        self.w.taints = Some(update.taints);
        for key in self.holders(&failed) {
            if self.engine.cluster().pod_id(&key).is_some() {
                self.w.failures += 1;
                self.lose(&key)?;
            }
        }
        self.taint_evictions()
    }

    /// The bound pods whose claims hold one of `devices`, by key.
    fn holders(&self, devices: &[DeviceKey]) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if devices.is_empty() {
            return out;
        }
        let c = self.engine.cluster();
        for p in c.pods.iter().filter(|p| p.state.on_node().is_some()) {
            let holds = p.claims.iter().flatten().any(|claim| {
                let claim = &c.claims[*claim].claim;
                allocated(claim)
                    .any(|r| devices.iter().any(|k| k.driver == r.driver && k.pool == r.pool && k.device == r.device))
            });
            if holds {
                out.insert(p.key.clone());
            }
        }
        out
    }

    /// Evicts the pods NoExecute taints evict now; comes back when the next toleration runs out.
    pub(super) fn taint_evictions(&mut self) -> Result<(), SimError> {
        let Some(taints) = self.w.taints.as_ref() else { return Ok(()) };
        let (due, later) = self.due_evictions(taints);
        for key in due {
            self.evict(&key, false)?;
        }
        if let Some(at) = later {
            self.push(at, Event::TaintEvictions);
        }
        Ok(())
    }

    /// The pods due for eviction now, and the time of the next eviction after now.
    fn due_evictions(&self, taints: &DeviceTaints) -> (BTreeSet<String>, Option<Millis>) {
        let c = self.engine.cluster();
        let pods = c.pods.iter().filter(|p| p.state.on_node().is_some()).map(|p| &p.pod);
        let mut due = BTreeSet::new();
        let mut later: Option<Millis> = None;
        for e in evictions(c.claims.iter().map(|c| &*c.claim), pods, taints).into_iter().filter(|e| !e.dry_run) {
            let at = e.at.as_ref().map_or(self.w.now, |t| {
                let ms = t.0.as_millisecond().saturating_sub(EPOCH_MS);
                u64::try_from(ms).unwrap_or(0)
            });
            if at <= self.w.now {
                due.insert(e.pod);
            } else {
                later = Some(later.map_or(at, |l| l.min(at)));
            }
        }
        (due, later)
    }

    /// Whether a bound pod holds a device with a NoExecute taint, or with a fatal XID's taint
    /// (both end their holders when they come, and the allocator keeps new claims off them).
    pub(super) fn check_taints(&self) -> Result<(), String> {
        let Some(taints) = self.w.taints.as_ref() else { return Ok(()) };
        let c = self.engine.cluster();
        for p in c.pods.iter().filter(|p| p.state.on_node().is_some()) {
            for claim in p.claims.iter().flatten() {
                let claim = &c.claims[*claim].claim;
                // A toleration copied into the result may keep its holder for a while.
                for r in allocated(claim).filter(|r| r.tolerations.is_none()) {
                    let key = DeviceKey::new(&r.driver, &r.pool, &r.device);
                    let bad = taints.of(&key).into_iter().find(|t| {
                        t.taint.effect == "NoExecute"
                            || (t.taint.key == XID_TAINT_KEY && t.taint.effect == "NoSchedule")
                    });
                    if let Some(t) = bad {
                        let taint = muster_controllers::eviction::taint_text(&t.taint);
                        return Err(format!("pod {} holds device {key}, tainted {taint}", p.key));
                    }
                }
            }
        }
        Ok(())
    }

    /// The claim's devices out of service, per node.
    pub(super) fn out_of_service_in(&self, claim: &k8s_openapi::api::resource::v1::ResourceClaim) -> Vec<(u32, u64)> {
        if self.w.blocked.is_empty() {
            return Vec::new();
        }
        self.w.options.inventory.claim_nodes_where(claim, |k| self.w.blocked.contains(k))
    }

    /// The devices `taints` put out of service: every inventory device with a `NoSchedule` or
    /// `NoExecute` taint that no allocated claim holds, counted afresh per node.
    pub(super) fn count_out_of_service(&mut self, taints: &DeviceTaints) {
        let inventory = &self.w.options.inventory;
        let blocks =
            |k: &DeviceKey| taints.of(k).iter().any(|t| matches!(t.taint.effect.as_str(), "NoSchedule" | "NoExecute"));
        self.w.blocked = inventory.devices.iter().map(|(_, k)| k).filter(|k| blocks(k)).cloned().collect();
        let c = self.engine.cluster();
        let held: std::collections::HashSet<DeviceKey> = c
            .claims
            .iter()
            .flat_map(|c| allocated(&c.claim))
            .map(|r| DeviceKey::new(&r.driver, &r.pool, &r.device))
            .collect();
        let mut out = vec![0; inventory.nodes.len()];
        for (node, key) in &inventory.devices {
            if self.w.blocked.contains(key) && !held.contains(key) {
                out[*node as usize] += 1;
            }
        }
        self.w.free.set_out_of_service(&out);
    }
}
