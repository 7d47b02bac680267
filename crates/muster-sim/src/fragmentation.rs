//! Fragmentation: which free devices are where, kept up to date as claims are allocated and
//! released, so that every step can say how many free devices are *stranded* and how large the
//! largest free block on one node is, in time independent of the cluster's size.
//!
//! Definitions (the report's captions say the same):
//! - a node's devices are those of the ResourceSlices local to it (`spec.nodeName`), in pools
//!   whose slices are all local to that one node; devices of other slices are left out;
//! - a node's free devices are its devices minus those its claims' allocations hold (a device
//!   shared by several claims counts once per claim; the count stops at zero) and minus those
//!   *out of service*: held by no claim and tainted `NoSchedule` or `NoExecute` (a failed GPU,
//!   a maintenance rule), which no pod of the shape can be given;
//! - the *shape* is the trace's dominant GPU request per pod: the request size that asks for the
//!   most GPUs in all (pods × GPUs per pod, summed over the trace's jobs; ties go to the larger
//!   request; 1 when no pod asks for GPUs). Weighing by GPUs rather than by pods keeps a trace of
//!   many 1-GPU pods and a few large gangs from calling 1 the shape, under which nothing is ever
//!   stranded;
//! - *stranded* devices are the free devices of nodes with fewer free devices than the shape:
//!   a pod of the shape cannot use them;
//! - the *largest free block* is the most free devices on one node: the largest pod that could
//!   still be placed, devices-wise;
//! - with racks (a node label, `muster sim --rack-label`), the *largest gang placeable in one
//!   rack* is, over racks, the most pods of the shape its nodes' free devices could hold
//!   (Σ ⌊free / shape⌋ over the rack's nodes): the largest gang a rack-wide topology constraint
//!   could still place, devices-wise.

use std::collections::HashMap;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use muster_controllers::eviction::DeviceKey;

use crate::trace::Job;

/// The cluster's devices per node, and which node each node-local pool belongs to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inventory {
    /// Node names, sorted, and the devices each publishes.
    pub nodes: Vec<(String, u64)>,
    /// driver → pool → index into `nodes`.
    pools: HashMap<String, HashMap<String, u32>>,
    /// Rack names, sorted, and each node's rack (index into `racks`), if it has one.
    pub racks: Vec<String>,
    rack_of: Vec<Option<u32>>,
    /// Every counted device, with its node (index into `nodes`).
    pub devices: Vec<(u32, DeviceKey)>,
}

impl Inventory {
    /// The node-local devices of `slices`. A pool whose slices name no node, or several, is left
    /// out.
    pub fn from_slices(slices: &[ResourceSlice]) -> Inventory {
        // driver → pool → the one node of its slices (None: shared, or several nodes).
        let mut owner: HashMap<&str, HashMap<&str, Option<&str>>> = HashMap::new();
        for s in slices {
            let node = s.spec.node_name.as_deref().filter(|n| !n.is_empty());
            let entry = owner.entry(s.spec.driver.as_str()).or_default().entry(s.spec.pool.name.as_str());
            entry.and_modify(|seen| *seen = seen.filter(|n| Some(*n) == node)).or_insert(node);
        }
        let mut devices: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
        for s in slices {
            if let Some(Some(node)) = owner[s.spec.driver.as_str()].get(s.spec.pool.name.as_str()) {
                *devices.entry(node).or_default() += s.spec.devices.as_ref().map_or(0, Vec::len) as u64;
            }
        }
        let nodes: Vec<(String, u64)> = devices.into_iter().map(|(n, d)| (n.to_string(), d)).collect();
        let mut pools: HashMap<String, HashMap<String, u32>> = HashMap::new();
        for (driver, by_pool) in owner {
            for (pool, node) in by_pool {
                if let Some(node) = node {
                    let i = nodes.binary_search_by(|(n, _)| n.as_str().cmp(node)).expect("counted above");
                    pools.entry(driver.to_string()).or_default().insert(pool.to_string(), i as u32);
                }
            }
        }
        let mut listed = Vec::new();
        for s in slices {
            let Some(&node) = pools.get(&s.spec.driver).and_then(|p| p.get(&s.spec.pool.name)) else { continue };
            for d in s.spec.devices.iter().flatten() {
                listed.push((node, DeviceKey::new(&s.spec.driver, &s.spec.pool.name, &d.name)));
            }
        }
        let rack_of = vec![None; nodes.len()];
        Inventory { nodes, pools, racks: Vec::new(), rack_of, devices: listed }
    }

    /// The inventory with each node's rack, as `rack(node name)` says.
    pub fn with_racks(mut self, rack: impl Fn(&str) -> Option<String>) -> Inventory {
        let of: Vec<Option<String>> = self.nodes.iter().map(|(n, _)| rack(n)).collect();
        let names: std::collections::BTreeSet<&String> = of.iter().flatten().collect();
        self.racks = names.into_iter().cloned().collect();
        self.rack_of =
            of.iter().map(|r| r.as_ref().map(|r| self.racks.binary_search(r).expect("listed") as u32)).collect();
        self
    }

    /// How many devices of the claim's allocation each node holds, by node index.
    pub fn claim_nodes(&self, claim: &ResourceClaim) -> Vec<(u32, u64)> {
        self.claim_nodes_where(claim, |_| true)
    }

    /// [`Inventory::claim_nodes`], counting only the devices `counted` says.
    pub fn claim_nodes_where(&self, claim: &ResourceClaim, counted: impl Fn(&DeviceKey) -> bool) -> Vec<(u32, u64)> {
        let results = claim
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref());
        let mut out: Vec<(u32, u64)> = Vec::new();
        for r in results.into_iter().flatten() {
            let Some(&node) = self.pools.get(&r.driver).and_then(|p| p.get(&r.pool)) else { continue };
            if !counted(&DeviceKey::new(&r.driver, &r.pool, &r.device)) {
                continue;
            }
            match out.iter_mut().find(|(n, _)| *n == node) {
                Some((_, count)) => *count += 1,
                None => out.push((node, 1)),
            }
        }
        out
    }
}

/// The shape of the trace: the GPU request per pod that asks for the most GPUs in all (ties to
/// the larger; 1 without GPU pods).
pub fn common_shape(jobs: &[Job]) -> u64 {
    shape_of(jobs.iter().map(|j| (j.pods, j.gpus_per_pod)))
}

/// The request of (pods, GPUs per pod) pairs that asks for the most GPUs in all.
fn shape_of(jobs: impl Iterator<Item = (u32, u32)>) -> u64 {
    let mut asked: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for (pods, gpus) in jobs.filter(|(_, gpus)| *gpus > 0) {
        *asked.entry(gpus).or_default() += u64::from(pods) * u64::from(gpus);
    }
    // max_by_key keeps the last of equals: the larger request.
    asked.into_iter().max_by_key(|(_, n)| *n).map_or(1, |(gpus, _)| u64::from(gpus))
}

/// Free devices per node, and the totals that follow, kept current in O(1) per change.
#[derive(Clone, Debug, Default)]
pub struct Free {
    capacity: Vec<u64>,
    held: Vec<u64>,
    /// Devices out of service per node (tainted, held by no claim), and their sum.
    out: Vec<u64>,
    out_total: u64,
    /// How many nodes have each number of free devices (index: free devices).
    by_free: Vec<u64>,
    shape: u64,
    free: u64,
    stranded: u64,
    /// Each node's rack, and per rack the pods of the shape its free devices could hold.
    rack_of: Vec<Option<u32>>,
    rack_pods: Vec<u64>,
}

impl Free {
    /// Every node of the inventory empty.
    pub fn new(inventory: &Inventory, shape: u64) -> Free {
        let capacity: Vec<u64> = inventory.nodes.iter().map(|(_, d)| *d).collect();
        let top = capacity.iter().copied().max().unwrap_or(0) as usize;
        let mut by_free = vec![0; top + 1];
        for &c in &capacity {
            by_free[c as usize] += 1;
        }
        let (held, out) = (vec![0; capacity.len()], vec![0; capacity.len()]);
        let mut free = Free { held, out, by_free, shape: shape.max(1), ..Free::default() };
        free.free = capacity.iter().sum();
        free.stranded = capacity.iter().map(|&c| free.stranded_on(c)).sum();
        free.rack_of = inventory.rack_of.clone();
        free.rack_pods = vec![0; inventory.racks.len()];
        for (node, rack) in free.rack_of.iter().enumerate() {
            if let Some(r) = rack {
                free.rack_pods[*r as usize] += capacity[node] / free.shape;
            }
        }
        free.capacity = capacity;
        free
    }

    fn stranded_on(&self, free: u64) -> u64 {
        if free < self.shape { free } else { 0 }
    }

    fn free_on(&self, node: usize) -> u64 {
        self.capacity[node].saturating_sub(self.held[node] + self.out[node])
    }

    /// Claims' devices on nodes were allocated (`taken`) or released.
    pub fn change(&mut self, on: &[(u32, u64)], taken: bool) {
        for &(node, n) in on {
            self.update(node as usize, |held, _| *held = if taken { *held + n } else { held.saturating_sub(n) });
        }
    }

    /// Out-of-service devices on nodes were allocated to claims that tolerate their taints
    /// (`taken`: they leave the out-of-service count) or released (they join it).
    pub fn change_out_of_service(&mut self, on: &[(u32, u64)], taken: bool) {
        for &(node, n) in on {
            self.update(node as usize, |_, out| *out = if taken { out.saturating_sub(n) } else { *out + n });
        }
    }

    /// Every node's out-of-service devices, counted afresh (after the taints changed).
    pub fn set_out_of_service(&mut self, out: &[u64]) {
        for (node, n) in out.iter().enumerate().take(self.capacity.len()) {
            self.update(node, |_, out| *out = *n);
        }
    }

    /// Devices out of service on all nodes.
    pub fn out_of_service(&self) -> u64 {
        self.out_total
    }

    /// Changes a node's held and out-of-service counts, and the totals that follow.
    fn update(&mut self, node: usize, f: impl FnOnce(&mut u64, &mut u64)) {
        let before = self.free_on(node);
        self.out_total -= self.out[node];
        f(&mut self.held[node], &mut self.out[node]);
        self.out_total += self.out[node];
        let after = self.free_on(node);
        self.by_free[before as usize] -= 1;
        self.by_free[after as usize] += 1;
        self.free = self.free - before + after;
        self.stranded = self.stranded - self.stranded_on(before) + self.stranded_on(after);
        if let Some(r) = self.rack_of.get(node).copied().flatten() {
            let pods = &mut self.rack_pods[r as usize];
            *pods = *pods - before / self.shape + after / self.shape;
        }
    }

    /// Whether the nodes have racks.
    pub fn has_racks(&self) -> bool {
        !self.rack_pods.is_empty()
    }

    /// The most pods of the shape one rack's free devices could hold (O(racks)).
    pub fn largest_rack_gang(&self) -> u64 {
        self.rack_pods.iter().copied().max().unwrap_or(0)
    }

    pub fn shape(&self) -> u64 {
        self.shape
    }

    /// Free devices on all nodes.
    pub fn free(&self) -> u64 {
        self.free
    }

    /// Free devices on nodes with fewer free than the shape.
    pub fn stranded(&self) -> u64 {
        self.stranded
    }

    /// The most free devices on one node (O(largest node's devices)).
    pub fn largest(&self) -> u64 {
        self.by_free.iter().rposition(|&n| n > 0).unwrap_or(0) as u64
    }

    /// Whether the totals kept current agree with the nodes counted afresh (a check for tests).
    pub fn check(&self) -> Result<(), String> {
        let frees: Vec<u64> = (0..self.capacity.len()).map(|n| self.free_on(n)).collect();
        let free: u64 = frees.iter().sum();
        let stranded: u64 = frees.iter().map(|&f| self.stranded_on(f)).sum();
        let largest = frees.iter().copied().max().unwrap_or(0);
        let mut rack_pods = vec![0; self.rack_pods.len()];
        for (node, rack) in self.rack_of.iter().enumerate() {
            if let Some(r) = rack {
                rack_pods[*r as usize] += frees[node] / self.shape;
            }
        }
        if rack_pods != self.rack_pods {
            return Err(format!("pods placeable per rack kept as {:?}, counted as {rack_pods:?}", self.rack_pods));
        }
        if self.out.iter().sum::<u64>() != self.out_total {
            return Err(format!(
                "out of service kept as {}, counted as {}",
                self.out_total,
                self.out.iter().sum::<u64>()
            ));
        }
        let got = (self.free, self.stranded, self.largest());
        if got != (free, stranded, largest) {
            return Err(format!("free, stranded, largest kept as {got:?}, counted as {:?}", (free, stranded, largest)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(node: Option<&str>, pool: &str, devices: usize) -> ResourceSlice {
        let devices: Vec<_> = (0..devices).map(|d| json!({"name": format!("gpu-{d}")})).collect();
        let mut spec = json!({"driver": "gpu.example.com", "pool": {"name": pool, "generation": 1,
            "resourceSliceCount": 1}, "devices": devices});
        match node {
            Some(n) => spec["nodeName"] = json!(n),
            None => spec["allNodes"] = json!(true),
        }
        serde_json::from_value(json!({"metadata": {"name": format!("{pool}-slice")}, "spec": spec})).unwrap()
    }

    fn claim(results: &[(&str, &str)]) -> ResourceClaim {
        let results: Vec<_> = results
            .iter()
            .map(|(pool, d)| json!({"request": "gpus", "driver": "gpu.example.com", "pool": pool, "device": d}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {},
            "status": {"allocation": {"devices": {"results": results}}}}))
        .unwrap()
    }

    /// Three nodes of 8, 8 and 4 devices and a shared pool of 2 (left out).
    fn inventory() -> Inventory {
        Inventory::from_slices(&[
            slice(Some("b"), "b", 8),
            slice(Some("a"), "a", 8),
            slice(Some("c"), "c", 4),
            slice(None, "shared", 2),
        ])
    }

    #[test]
    fn the_inventory_counts_node_local_pools_only() {
        let inv = inventory();
        assert_eq!(inv.nodes, vec![("a".into(), 8), ("b".into(), 8), ("c".into(), 4)]);
        let on = inv.claim_nodes(&claim(&[("b", "gpu-0"), ("b", "gpu-1"), ("shared", "gpu-0"), ("a", "gpu-7")]));
        assert_eq!(on, vec![(1, 2), (0, 1)]);
        // A pool whose slices name two nodes belongs to neither.
        let split = Inventory::from_slices(&[slice(Some("a"), "p", 2), slice(Some("b"), "p", 2)]);
        assert!(split.nodes.is_empty());
    }

    #[test]
    fn stranded_devices_are_those_of_nodes_below_the_shape() {
        let inv = inventory();
        let mut free = Free::new(&inv, 4);
        // All empty: 20 free, none stranded (c has exactly 4), the largest block 8.
        assert_eq!((free.free(), free.stranded(), free.largest()), (20, 0, 8));
        // a keeps 3 free (stranded), b 6, c 4.
        let on_a = inv.claim_nodes(&claim(&[("a", "0"), ("a", "1"), ("a", "2"), ("a", "3"), ("a", "4")]));
        free.change(&on_a, true);
        free.change(&[(1, 2)], true);
        assert_eq!((free.free(), free.stranded(), free.largest()), (13, 3, 6));
        // c down to 1: 4 stranded; b full: none of its free.
        free.change(&[(2, 3)], true);
        free.change(&[(1, 6)], true);
        assert_eq!((free.free(), free.stranded(), free.largest()), (4, 4, 3));
        // Releasing a's claim: a is whole again.
        free.change(&on_a, false);
        assert_eq!((free.free(), free.stranded(), free.largest()), (9, 1, 8));
        free.check().unwrap();
    }

    #[test]
    fn the_largest_gang_of_a_rack_counts_whole_shapes_per_node() {
        // a and b in rack r1, c in r2; shape 4.
        let inv = inventory().with_racks(|n| Some(if n == "c" { "r2" } else { "r1" }.to_string()));
        assert_eq!(inv.racks, vec!["r1".to_string(), "r2".to_string()]);
        let mut free = Free::new(&inv, 4);
        assert_eq!(free.largest_rack_gang(), 4, "r1: 2 + 2 pods of 4");
        free.change(&[(0, 5)], true); // a: 3 free, no whole shape
        assert_eq!(free.largest_rack_gang(), 2);
        free.change(&[(1, 8)], true); // b full: r1 holds none, r2 one
        assert_eq!(free.largest_rack_gang(), 1);
        free.check().unwrap();
        assert!(!Free::new(&inventory(), 4).has_racks());
    }

    #[test]
    fn overcounted_shares_stop_at_zero_free() {
        let inv = inventory();
        let mut free = Free::new(&inv, 1);
        free.change(&[(2, 3)], true);
        free.change(&[(2, 3)], true);
        assert_eq!((free.free(), free.largest()), (16, 8));
        free.change(&[(2, 3)], false);
        assert_eq!(free.free(), 17);
    }

    #[test]
    fn devices_out_of_service_are_not_free() {
        let inv = inventory();
        assert_eq!(inv.devices.len(), 20, "node-local devices only");
        let mut free = Free::new(&inv, 4);
        // Two of a's devices and one of c's tainted: c (3 free) strands its devices.
        free.set_out_of_service(&[2, 0, 1]);
        assert_eq!((free.free(), free.stranded(), free.out_of_service()), (17, 3, 3));
        // A claim tolerating the taints takes one of a's: it leaves the count, and comes back
        // to it when released.
        free.change(&[(0, 1)], true);
        free.change_out_of_service(&[(0, 1)], true);
        assert_eq!((free.free(), free.out_of_service()), (17, 2));
        free.change(&[(0, 1)], false);
        free.change_out_of_service(&[(0, 1)], false);
        assert_eq!((free.free(), free.out_of_service()), (17, 3));
        free.set_out_of_service(&[0, 0, 0]);
        assert_eq!((free.free(), free.stranded(), free.out_of_service()), (20, 0, 0));
        free.check().unwrap();
    }

    #[test]
    fn the_shape_is_the_request_with_the_most_gpus_in_all() {
        let shape = |jobs: &[(u32, u32)]| shape_of(jobs.iter().copied());
        assert_eq!(common_shape(&[]), 1);
        assert_eq!(shape(&[(1, 1), (1, 1), (1, 4)]), 4, "4 GPUs asked as 4 against 2 as 1");
        assert_eq!(shape(&[(8, 1), (1, 8), (3, 0)]), 8, "a tie goes to the larger");
        assert_eq!(shape(&[(9, 1), (1, 8)]), 1);
        assert_eq!(shape(&[(1, 2), (1, 2), (1, 2), (1, 4)]), 2);
    }
}
