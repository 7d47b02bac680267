//! Changes of the DRA inputs — ResourceSlices as the scheduler sees them (DeviceTaintRules and
//! health taints applied by the world, `muster_controllers::slice_view`) and DeviceClasses —
//! taken between cycles by a scheduler that owns them. The slice index changes in place
//! ([`muster_alloc::SliceIndex::upsert`]); what read the changed devices is forgotten through the
//! DRA generations: those of the nodes that see a changed pool, or the shared one (every node)
//! for a pool that is not node-local and for any class. Everything else — the queue, the devices
//! in use, the verdicts of other nodes — stays.

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use muster_alloc::{SliceIndex, Touched};

use super::Scheduler;
use crate::cluster::{Cluster, NodeId};
use crate::plugins::dynamic_resources::DraContext;

/// One change of the DRA inputs.
#[derive(Clone, Debug)]
pub enum DeviceChange {
    /// A ResourceSlice added or changed (as the scheduler sees it: taints of DeviceTaintRules and
    /// of health propagation added).
    UpsertSlice(Box<ResourceSlice>),
    /// A ResourceSlice deleted, by name.
    DeleteSlice(String),
    /// A DeviceClass added or changed.
    UpsertClass(Box<DeviceClass>),
    /// A DeviceClass deleted, by name.
    DeleteClass(String),
}

impl DeviceChange {
    /// Can the change make a waiting pod schedulable? Upstream's DynamicResources registers
    /// ResourceSlice and DeviceClass Add and Update, not Delete.
    pub fn wakes(&self) -> bool {
        matches!(self, DeviceChange::UpsertSlice(_) | DeviceChange::UpsertClass(_))
    }
}

/// The changes that turn the slices of `index` (an engine's) into `after`, the scheduling view of
/// every slice (`whole`: those missing from it are deleted) or of some: each slice that differs,
/// by name.
pub fn slice_changes(index: &SliceIndex, after: Vec<ResourceSlice>, whole: bool) -> Vec<DeviceChange> {
    let mut out: Vec<DeviceChange> = Vec::new();
    if whole {
        let names: std::collections::HashSet<&str> = after.iter().filter_map(|s| s.metadata.name.as_deref()).collect();
        out.extend(
            index
                .slices()
                .filter_map(|(_, s)| s.metadata.name.as_deref())
                .filter(|n| !names.contains(n))
                .map(|n| DeviceChange::DeleteSlice(n.to_string())),
        );
    }
    let differs = |s: &ResourceSlice| index.get(s.metadata.name.as_deref().unwrap_or("")) != Some(s);
    out.extend(after.into_iter().filter(differs).map(|s| DeviceChange::UpsertSlice(Box::new(s))));
    out
}

/// The scheduler's DRA inputs are borrowed (a plan's, `why`'s): it cannot change them.
#[derive(Debug, PartialEq, Eq)]
pub struct BorrowedDevices;

impl std::fmt::Display for BorrowedDevices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("this scheduler reads DRA inputs it does not own: it takes no change of slices or classes")
    }
}

impl std::error::Error for BorrowedDevices {}

/// The DRA inputs a scheduler reads: borrowed for one plan, or its own (an engine that lives).
pub(crate) enum DraHold<'c> {
    Borrowed(&'c DraContext),
    Owned(Box<DraContext>),
}

impl std::ops::Deref for DraHold<'_> {
    type Target = DraContext;

    fn deref(&self) -> &DraContext {
        match self {
            DraHold::Borrowed(c) => c,
            DraHold::Owned(c) => c,
        }
    }
}

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// Applies one change of the DRA inputs, between cycles.
    pub fn apply_device_change(&mut self, change: DeviceChange) -> Result<(), BorrowedDevices> {
        let Some((DraHold::Owned(ctx), _)) = self.dra.as_mut() else { return Err(BorrowedDevices) };
        let touched = match change {
            DeviceChange::UpsertSlice(slice) => ctx.index.upsert(*slice),
            DeviceChange::DeleteSlice(name) => ctx.index.delete(&name),
            DeviceChange::UpsertClass(class) => {
                let name = class.metadata.name.clone();
                match ctx.classes.binary_search_by(|c| c.metadata.name.cmp(&name)) {
                    Ok(i) => ctx.classes[i] = *class,
                    Err(i) => ctx.classes.insert(i, *class),
                }
                self.classes_changed();
                return Ok(());
            }
            DeviceChange::DeleteClass(name) => {
                if let Ok(i) = ctx.classes.binary_search_by(|c| c.metadata.name.as_deref().unwrap_or("").cmp(&name)) {
                    ctx.classes.remove(i);
                    self.classes_changed();
                }
                return Ok(());
            }
        };
        self.devices_changed(&touched);
        Ok(())
    }

    /// The devices of the pools `touched` names changed: what read them is forgotten.
    fn devices_changed(&mut self, touched: &Touched) {
        match touched {
            Touched::None => return,
            Touched::All => self.dra_shared_generation = self.cluster.fresh_generation(),
            Touched::Nodes(nodes) => {
                for name in nodes {
                    if let Some(node) = self.cluster.node_id(name) {
                        self.node_devices_changed(node);
                    }
                }
            }
        }
        self.failed_classes.clear();
        self.forget_bound_waits();
    }

    /// Node `node`'s devices read differently (its slices or the node itself changed): a fresh
    /// generation and a fresh device epoch.
    pub(super) fn node_devices_changed(&mut self, node: NodeId) {
        let i = node.0 as usize;
        if i < self.dra_node_generation.len() {
            let fresh = self.cluster.fresh_generation();
            self.dra_node_generation[i] = fresh;
            self.dra_device_epoch[i] = fresh;
            self.cluster.node_journal.note(node);
        }
    }

    /// A DeviceClass changed: every node's devices read differently, and pods' extended
    /// resources may be served by another class.
    fn classes_changed(&mut self) {
        if let Some((ctx, _)) = self.dra.as_ref() {
            self.cluster.map_extended_resources(&ctx.classes);
        }
        self.kept.clear();
        self.devices_changed(&Touched::All);
    }
}
