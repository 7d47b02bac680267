//! The search (spec §3): preparation, device eligibility, first-fit depth-first backtracking,
//! taking and undoing devices, and building the results.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceClass,
    DeviceRequestAllocationResult, DeviceSelector, DeviceToleration, ResourceClaim, ResourceSlice,
};
use muster_cel::{DeviceView, Env, SelectorOwner};

use crate::constraints::{Kind as ConstraintKind, Tracker};
use crate::pools::{Pool, device_matches, gather};
use crate::state::{AllocatedState, DeviceId, Features};

/// The most devices one claim can be allocated (`AllocationResultsMaxSize`).
pub const MAX_DEVICES_PER_CLAIM: usize = 32;

/// A failed allocation call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// A problem with the claims, classes or slices that no node can fix (upstream aborts the
    /// pod's scheduling attempt).
    Fatal(String),
    /// No solution, and some pool on this node is invalid.
    InvalidPools,
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::Fatal(m) => f.write_str(m),
            AllocError::InvalidPools => f.write_str("invalid resource pools were encountered"),
        }
    }
}

impl std::error::Error for AllocError {}

/// A successful call: one result per claim, or no solution on this node.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Allocated(Vec<AllocationResult>),
    Unsatisfiable,
}

/// The allocator for one scheduling cycle.
pub struct Allocator<'a> {
    features: Features,
    allocated: &'a AllocatedState,
    classes: HashMap<&'a str, &'a DeviceClass>,
    slices: &'a [ResourceSlice],
    env: &'a Env,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Exact(usize),
    All,
}

/// A request, or one subrequest of a request with `firstAvailable`.
struct Req<'a> {
    /// The name used in preparation errors: the request's, or only the subrequest's.
    name: String,
    /// The name results carry: `request` or `request/subrequest`.
    result_name: String,
    parent: Option<String>,
    class: &'a DeviceClass,
    selectors: &'a [DeviceSelector],
    mode: Mode,
    admin: bool,
    tolerations: Option<&'a [DeviceToleration]>,
    /// For `All`: the devices it takes, found during preparation.
    all: Vec<Cand<'a>>,
}

impl Req<'_> {
    fn num_devices(&self) -> usize {
        match self.mode {
            Mode::Exact(n) => n,
            Mode::All => self.all.len(),
        }
    }
}

struct Request<'a> {
    /// One entry for a plain request, one per subrequest otherwise.
    subs: Vec<Req<'a>>,
    has_subrequests: bool,
}

struct Claim<'a> {
    claim: &'a ResourceClaim,
    name: String,
    requests: Vec<Request<'a>>,
    constraints: Vec<Tracker>,
}

/// A candidate device and where it sits in the search order.
#[derive(Clone, Copy)]
struct Cand<'a> {
    pool: usize,
    slice: usize,
    index: usize,
    slice_ref: &'a ResourceSlice,
    device: &'a Device,
}

/// One device taken for a claim.
struct Taken<'a> {
    request: usize,
    sub: usize,
    cand: Cand<'a>,
    id: DeviceId,
}

enum Search {
    Found,
    No,
    TooMany,
}

/// Mutable state of one `allocate` call.
struct Call<'a, 'b> {
    alloc: &'b Allocator<'a>,
    node: Option<&'b Node>,
    pools: Vec<Pool<'a>>,
    claims: Vec<Claim<'a>>,
    views: HashMap<DeviceId, Arc<DeviceView>>,
    memo: HashMap<(DeviceId, usize, usize, usize), bool>,
    /// Devices being allocated in this call → claims they are being allocated to.
    allocating: HashMap<DeviceId, Vec<usize>>,
    results: Vec<Vec<Taken<'a>>>,
    /// The subrequest chosen for each (claim, request).
    chosen: HashMap<(usize, usize), usize>,
}

fn claim_name(c: &ResourceClaim) -> String {
    match c.metadata.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => format!("{ns}/{}", c.metadata.name.as_deref().unwrap_or("")),
        None => c.metadata.name.clone().unwrap_or_default(),
    }
}

fn id_of(c: &Cand<'_>) -> DeviceId {
    DeviceId {
        driver: c.slice_ref.spec.driver.clone(),
        pool: c.slice_ref.spec.pool.name.clone(),
        device: c.device.name.clone(),
    }
}

fn tolerates(t: &DeviceToleration, key: &str, value: &str, effect: &str) -> bool {
    if t.effect.as_deref().is_some_and(|e| !e.is_empty() && e != effect) {
        return false;
    }
    if t.key.as_deref().is_some_and(|k| !k.is_empty() && k != key) {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == value,
        "Exists" => true,
        _ => false,
    }
}

impl<'a> Allocator<'a> {
    pub fn new(
        features: Features,
        allocated: &'a AllocatedState,
        classes: &'a [DeviceClass],
        slices: &'a [ResourceSlice],
        env: &'a Env,
    ) -> Self {
        let classes = classes.iter().map(|c| (c.metadata.name.as_deref().unwrap_or(""), c)).collect();
        Allocator { features, allocated, classes, slices, env }
    }

    /// Allocates `claims` together on `node`.
    pub fn allocate(&self, node: Option<&Node>, claims: &[&'a ResourceClaim]) -> Result<Outcome, AllocError> {
        if claims.is_empty() {
            return Ok(Outcome::Allocated(Vec::new()));
        }
        let mut call = Call {
            alloc: self,
            node,
            pools: gather(node, self.slices, self.features),
            claims: Vec::new(),
            views: HashMap::new(),
            memo: HashMap::new(),
            allocating: HashMap::new(),
            results: claims.iter().map(|_| Vec::new()).collect(),
            chosen: HashMap::new(),
        };
        for (ci, c) in claims.iter().enumerate() {
            let prepared = call.prepare(ci, c)?;
            call.claims.push(prepared);
        }
        match call.search(0, 0, 0, 0, false, None)? {
            Search::Found => Ok(Outcome::Allocated(call.build()?)),
            Search::No | Search::TooMany => {
                if call.pools.iter().any(|p| p.invalid.is_some()) {
                    Err(AllocError::InvalidPools)
                } else {
                    Ok(Outcome::Unsatisfiable)
                }
            }
        }
    }
}

impl<'a> Call<'a, '_> {
    fn fatal(msg: String) -> AllocError {
        AllocError::Fatal(msg)
    }

    /// Spec §3.1.
    fn prepare(&mut self, ci: usize, claim: &'a ResourceClaim) -> Result<Claim<'a>, AllocError> {
        let f = self.alloc.features;
        let name = claim_name(claim);
        let spec = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
        let mut requests = Vec::new();
        let mut min_devices = 0usize;
        for (ri, r) in spec.and_then(|d| d.requests.as_ref()).into_iter().flatten().enumerate() {
            let subs = r.first_available.as_deref().unwrap_or(&[]);
            if !subs.is_empty() {
                if !f.prioritized_list {
                    return Err(Self::fatal(format!(
                        "claim {name}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                        r.name
                    )));
                }
                let mut prepared = Vec::new();
                for (si, s) in subs.iter().enumerate() {
                    if !f.consumable_capacity && s.capacity.is_some() {
                        return Err(Self::fatal(format!(
                            "claim {name}, subrequest {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                            s.name
                        )));
                    }
                    let req = self.prepare_req(
                        ci,
                        ri,
                        si,
                        &name,
                        s.name.clone(),
                        format!("{}/{}", r.name, s.name),
                        Some(r.name.clone()),
                        &s.device_class_name,
                        s.selectors.as_deref().unwrap_or(&[]),
                        s.allocation_mode.as_deref(),
                        s.count,
                        None,
                        s.tolerations.as_deref(),
                    )?;
                    prepared.push(req);
                }
                min_devices += prepared.iter().map(Req::num_devices).min().unwrap_or(0);
                requests.push(Request { subs: prepared, has_subrequests: true });
            } else if let Some(e) = &r.exactly {
                if !f.consumable_capacity && e.capacity.is_some() {
                    return Err(Self::fatal(format!(
                        "claim {name}, request {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                        r.name
                    )));
                }
                let req = self.prepare_req(
                    ci,
                    ri,
                    0,
                    &name,
                    r.name.clone(),
                    r.name.clone(),
                    None,
                    &e.device_class_name,
                    e.selectors.as_deref().unwrap_or(&[]),
                    e.allocation_mode.as_deref(),
                    e.count,
                    e.admin_access,
                    e.tolerations.as_deref(),
                )?;
                min_devices += req.num_devices();
                requests.push(Request { subs: vec![req], has_subrequests: false });
            } else {
                return Err(Self::fatal(format!("claim {name}, request {}: unknown request type", r.name)));
            }
        }
        if min_devices > MAX_DEVICES_PER_CLAIM {
            return Err(Self::fatal(format!(
                "claim {name}: number of requested devices {min_devices} exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}"
            )));
        }
        let mut constraints = Vec::new();
        for (i, c) in spec.and_then(|d| d.constraints.as_ref()).into_iter().flatten().enumerate() {
            let requests = c.requests.clone().unwrap_or_default();
            let tracker = if let Some(a) = &c.match_attribute {
                Tracker::new(ConstraintKind::Match, a.clone(), requests, f.list_type_attributes)
            } else if let Some(a) = &c.distinct_attribute {
                Tracker::new(ConstraintKind::Distinct, a.clone(), requests, f.list_type_attributes)
            } else {
                return Err(Self::fatal(format!(
                    "claim {name}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )));
            };
            constraints.push(tracker);
        }
        Ok(Claim { claim, name, requests, constraints })
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare_req(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        claim: &str,
        name: String,
        result_name: String,
        parent: Option<String>,
        class_name: &str,
        selectors: &'a [DeviceSelector],
        mode: Option<&str>,
        count: Option<i64>,
        admin: Option<bool>,
        tolerations: Option<&'a [DeviceToleration]>,
    ) -> Result<Req<'a>, AllocError> {
        let f = self.alloc.features;
        let ctx = format!("claim {claim}, request {name}");
        for (i, s) in selectors.iter().enumerate() {
            if s.cel.is_none() {
                return Err(Self::fatal(format!(
                    "{ctx}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )));
            }
        }
        if admin.is_some() && !f.admin_access {
            return Err(Self::fatal(format!("{ctx}: admin access is requested, but the feature is disabled")));
        }
        if class_name.is_empty() {
            return Err(Self::fatal(format!("{ctx}: missing device class name (unsupported request type?)")));
        }
        let Some(class) = self.alloc.classes.get(class_name).copied() else {
            return Err(Self::fatal(format!(
                "{ctx}: could not retrieve device class {class_name}: deviceclass.resource.k8s.io \"{class_name}\" not found"
            )));
        };
        let mode = match mode.unwrap_or("ExactCount") {
            "ExactCount" => {
                let n = count.unwrap_or(1);
                if n > MAX_DEVICES_PER_CLAIM as i64 * 1000 || n < 0 {
                    return Err(Self::fatal(format!("{ctx}: exact count {n} is too large")));
                }
                Mode::Exact(n as usize)
            }
            "All" => Mode::All,
            other => return Err(Self::fatal(format!("{ctx}: unsupported count mode {other}"))),
        };
        let mut req = Req {
            name,
            result_name,
            parent,
            class,
            selectors,
            mode,
            admin: admin == Some(true),
            tolerations,
            all: Vec::new(),
        };
        if mode == Mode::All {
            // Spec §3.3: every pool must be usable; then every selectable targeting device.
            for p in &self.pools {
                if p.incomplete {
                    return Err(Self::fatal(format!(
                        "{ctx}: asks for all devices, but resource pool {}/{} is currently being updated",
                        p.driver, p.name
                    )));
                }
                if p.invalid.is_some() {
                    return Err(Self::fatal(format!(
                        "{ctx}: asks for all devices, but resource pool {}/{} is currently invalid",
                        p.driver, p.name
                    )));
                }
            }
            let cands = self.candidates();
            let mut all = Vec::new();
            for c in cands {
                if self.selectable(&c, ci, ri, si, &req, claim)? {
                    all.push(c);
                }
            }
            req.all = all;
        }
        Ok(req)
    }

    /// Every targeting device of every usable pool, in search order.
    fn candidates(&self) -> Vec<Cand<'a>> {
        let mut out = Vec::new();
        for (pi, p) in self.pools.iter().enumerate() {
            if p.incomplete || p.invalid.is_some() {
                continue;
            }
            for (si, s) in p.slices.iter().enumerate() {
                for (di, d) in s.spec.devices.iter().flatten().enumerate() {
                    out.push(Cand { pool: pi, slice: si, index: di, slice_ref: s, device: d });
                }
            }
        }
        out
    }

    fn view(&mut self, c: &Cand<'a>, id: &DeviceId) -> Result<Arc<DeviceView>, muster_cel::DeviceError> {
        if let Some(v) = self.views.get(id) {
            return Ok(v.clone());
        }
        let v = Arc::new(DeviceView::new(&c.slice_ref.spec.driver, c.device)?);
        self.views.insert(id.clone(), v.clone());
        Ok(v)
    }

    /// Spec §3.2.
    fn selectable(
        &mut self,
        c: &Cand<'a>,
        ci: usize,
        ri: usize,
        si: usize,
        req: &Req<'a>,
        claim: &str,
    ) -> Result<bool, AllocError> {
        if !self.alloc.features.device_binding_and_status
            && c.device.binding_conditions.as_ref().is_some_and(|b| !b.is_empty())
        {
            return Ok(false);
        }
        let id = id_of(c);
        if let Some(v) = self.memo.get(&(id.clone(), ci, ri, si)) {
            return Ok(*v);
        }
        let class_name = req.class.metadata.name.as_deref().unwrap_or("");
        let class_sels = req.class.spec.as_ref().and_then(|s| s.selectors.as_deref()).unwrap_or(&[]);
        let groups = [(SelectorOwner::Class(class_name), class_sels), (SelectorOwner::Claim(claim), req.selectors)];
        for (owner, sels) in groups {
            for (i, s) in sels.iter().enumerate() {
                let Some(cel) = &s.cel else { continue };
                let program = self
                    .alloc
                    .env
                    .compile(&cel.expression)
                    .map_err(|e| Self::fatal(muster_cel::selector_compile_error(owner, i, &e)))?;
                let view = self.view(c, &id).map_err(|e| {
                    Self::fatal(format!("{owner}: selector #{i} on device {id}: CEL runtime error: {e}"))
                })?;
                match self.alloc.env.eval(&program, &view) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.memo.insert((id, ci, ri, si), false);
                        return Ok(false);
                    }
                    Err(e) => {
                        return Err(Self::fatal(muster_cel::selector_runtime_error(owner, i, &id.to_string(), &e)));
                    }
                }
            }
        }
        let ok = device_matches(self.node, c.slice_ref, c.device);
        self.memo.insert((id, ci, ri, si), ok);
        Ok(ok)
    }

    fn devices_in_claim(&self, ci: usize) -> usize {
        self.results[ci].len()
    }

    /// Spec §3.4: `allocateOne`.
    fn search(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        di: usize,
        inside: bool,
        start: Option<(usize, usize, usize)>,
    ) -> Result<Search, AllocError> {
        if ci == self.claims.len() {
            return Ok(Search::Found);
        }
        if ri == self.claims[ci].requests.len() {
            return Ok(match self.search(ci + 1, 0, 0, 0, false, None)? {
                Search::TooMany => Search::No,
                other => other,
            });
        }
        let has_subs = self.claims[ci].requests[ri].has_subrequests;
        if has_subs && !inside {
            let n = self.claims[ci].requests[ri].subs.len();
            let mut all_too_many = true;
            for s in 0..n {
                match self.search(ci, ri, s, 0, true, None)? {
                    Search::Found => {
                        self.chosen.insert((ci, ri), s);
                        return Ok(Search::Found);
                    }
                    Search::TooMany => {}
                    Search::No => all_too_many = false,
                }
            }
            return Ok(if all_too_many { Search::TooMany } else { Search::No });
        }
        let (mode, num, all_empty) = {
            let r = &self.claims[ci].requests[ri].subs[si];
            (r.mode, r.num_devices(), r.mode == Mode::All && r.all.is_empty())
        };
        if all_empty {
            return Ok(Search::No);
        }
        if di == num {
            return self.search(ci, ri + 1, 0, 0, false, None);
        }
        if self.devices_in_claim(ci) + num - di > MAX_DEVICES_PER_CLAIM {
            return Ok(Search::TooMany);
        }
        if mode == Mode::All {
            let cand = self.claims[ci].requests[ri].subs[si].all[di];
            if !self.take(ci, ri, si, cand, true)? {
                return Ok(Search::No);
            }
            let r = self.search(ci, ri, si, di + 1, inside, None);
            if !matches!(r, Ok(Search::Found)) {
                self.undo(ci);
            }
            return r;
        }
        let cands = self.candidates();
        let claim_name = self.claims[ci].name.clone();
        for c in cands {
            // Within one request only combinations in search order: after the previous pick.
            if start.is_some_and(|st| (c.pool, c.slice, c.index) < st) {
                continue;
            }
            let id = id_of(&c);
            let admin = self.claims[ci].requests[ri].subs[si].admin;
            let allocating = self.allocating.get(&id);
            if admin {
                if allocating.is_some_and(|cs| cs.contains(&ci)) {
                    continue;
                }
            } else if self.alloc.allocated.devices.contains(&id) || allocating.is_some_and(|cs| !cs.is_empty()) {
                continue;
            }
            // `selectable` needs the request while borrowing the call mutably: lend it the claims.
            let claims = std::mem::take(&mut self.claims);
            let selectable = self.selectable(&c, ci, ri, si, &claims[ci].requests[ri].subs[si], &claim_name);
            self.claims = claims;
            if !selectable? {
                continue;
            }
            if !self.take(ci, ri, si, c, false)? {
                continue;
            }
            let next_start = Some((c.pool, c.slice, c.index + 1));
            match self.search(ci, ri, si, di + 1, inside, next_start) {
                Ok(Search::Found) => return Ok(Search::Found),
                Ok(Search::No) => self.undo(ci),
                other => {
                    self.undo(ci);
                    return other;
                }
            }
        }
        Ok(Search::No)
    }

    /// Spec §3.5: `allocateDevice`. Returns whether the device was taken.
    fn take(&mut self, ci: usize, ri: usize, si: usize, c: Cand<'a>, must: bool) -> Result<bool, AllocError> {
        let f = self.alloc.features;
        let id = id_of(&c);
        let (admin, tolerations, req_name, result_name, parent) = {
            let r = &self.claims[ci].requests[ri].subs[si];
            (r.admin, r.tolerations, r.name.clone(), r.result_name.clone(), r.parent.clone())
        };
        let allocating = self.allocating.get(&id);
        if admin {
            if allocating.is_some_and(|cs| cs.contains(&ci)) {
                return Ok(false);
            }
        } else if self.alloc.allocated.devices.contains(&id) || allocating.is_some_and(|cs| !cs.is_empty()) {
            return Ok(false);
        }
        if c.device.consumes_counters.as_ref().is_some_and(|cc| !cc.is_empty()) {
            // Shared counters are not implemented yet: such devices are never taken.
            return Ok(false);
        }
        if f.device_taints {
            for t in c.device.taints.iter().flatten() {
                if t.effect != "NoSchedule" && t.effect != "NoExecute" {
                    continue;
                }
                let value = t.value.as_deref().unwrap_or("");
                if !tolerations.unwrap_or(&[]).iter().any(|tol| tolerates(tol, &t.key, value, &t.effect)) {
                    return Ok(false);
                }
            }
        }
        let at = self.results[ci].len();
        let needs_view = self.claims[ci].constraints.iter().any(|t| t.applies(&result_name, parent.as_deref()));
        if needs_view {
            let view = match self.view(&c, &id) {
                Ok(v) => v,
                Err(_) => return Ok(false),
            };
            let mut added = Vec::new();
            for (i, t) in self.claims[ci].constraints.iter_mut().enumerate() {
                if !t.applies(&result_name, parent.as_deref()) {
                    continue;
                }
                if t.add(at, &view) {
                    added.push(i);
                    continue;
                }
                for j in added {
                    self.claims[ci].constraints[j].remove(at);
                }
                if must {
                    let name = self.claims[ci].name.clone();
                    return Err(Self::fatal(format!(
                        "claim {name}, request {req_name}: cannot add device {id} because a claim constraint would not be satisfied"
                    )));
                }
                return Ok(false);
            }
        }
        self.allocating.entry(id.clone()).or_default().push(ci);
        self.results[ci].push(Taken { request: ri, sub: si, cand: c, id });
        Ok(true)
    }

    fn undo(&mut self, ci: usize) {
        let Some(t) = self.results[ci].pop() else { return };
        let at = self.results[ci].len();
        for tr in &mut self.claims[ci].constraints {
            tr.remove(at);
        }
        if let Some(cs) = self.allocating.get_mut(&t.id) {
            if let Some(i) = cs.iter().rposition(|c| *c == ci) {
                cs.remove(i);
            }
            if cs.is_empty() {
                self.allocating.remove(&t.id);
            }
        }
    }

    /// Spec §1.4, §3.8, §3.9: the results.
    fn build(&self) -> Result<Vec<AllocationResult>, AllocError> {
        let f = self.alloc.features;
        let mut out = Vec::new();
        for (ci, claim) in self.claims.iter().enumerate() {
            let mut results = Vec::new();
            for t in &self.results[ci] {
                let r = &claim.requests[t.request].subs[t.sub];
                results.push(DeviceRequestAllocationResult {
                    request: r.result_name.clone(),
                    driver: t.id.driver.clone(),
                    pool: t.id.pool.clone(),
                    device: t.id.device.clone(),
                    admin_access: r.admin.then_some(true),
                    tolerations: r.tolerations.filter(|t| !t.is_empty()).map(|t| t.to_vec()),
                    binding_conditions: if f.device_binding_and_status {
                        t.cand.device.binding_conditions.clone()
                    } else {
                        None
                    },
                    binding_failure_conditions: if f.device_binding_and_status {
                        t.cand.device.binding_failure_conditions.clone()
                    } else {
                        None
                    },
                    ..Default::default()
                });
            }
            let config = self.config(ci, claim);
            let node_selector = self.node_selector(ci, claim)?;
            out.push(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: (!results.is_empty()).then_some(results),
                    config: (!config.is_empty()).then_some(config),
                }),
                node_selector,
                allocation_timestamp: None,
            });
        }
        Ok(out)
    }

    /// The full name of each request as allocated: the request, or `request/chosen-subrequest`.
    fn allocated_names(&self, ci: usize, claim: &Claim<'a>) -> Vec<(String, Option<String>)> {
        claim
            .requests
            .iter()
            .enumerate()
            .map(|(ri, r)| {
                if r.has_subrequests {
                    let s = self.chosen.get(&(ci, ri)).copied().unwrap_or(0);
                    (r.subs[s].parent.clone().unwrap_or_default(), Some(r.subs[s].result_name.clone()))
                } else {
                    (r.subs[0].result_name.clone(), None)
                }
            })
            .collect()
    }

    fn config(&self, ci: usize, claim: &Claim<'a>) -> Vec<DeviceAllocationConfiguration> {
        let names = self.allocated_names(ci, claim);
        let mut out: Vec<DeviceAllocationConfiguration> = Vec::new();
        // Class configs: one entry per class config the first time a class is seen.
        let mut seen: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (ri, r) in claim.requests.iter().enumerate() {
            let s = if r.has_subrequests { self.chosen.get(&(ci, ri)).copied().unwrap_or(0) } else { 0 };
            let req = &r.subs[s];
            let class = req.class.metadata.name.clone().unwrap_or_default();
            let full = req.result_name.clone();
            if let Some(entries) = seen.get(&class) {
                for &e in entries {
                    out[e].requests.get_or_insert_with(Vec::new).push(full.clone());
                }
                continue;
            }
            let mut entries = Vec::new();
            for c in req.class.spec.as_ref().and_then(|s| s.config.as_ref()).into_iter().flatten() {
                entries.push(out.len());
                out.push(DeviceAllocationConfiguration {
                    source: "FromClass".into(),
                    requests: Some(vec![full.clone()]),
                    opaque: c.opaque.clone(),
                });
            }
            seen.insert(class, entries);
        }
        // Claim configs that apply to an allocated request.
        let claim_configs = claim.claim.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.config.as_ref());
        for c in claim_configs.into_iter().flatten() {
            let reqs = c.requests.clone().unwrap_or_default();
            let applies = reqs.is_empty()
                || reqs
                    .iter()
                    .any(|r| names.iter().any(|(plain, sub)| r == plain || sub.as_deref() == Some(r.as_str())));
            if applies {
                out.push(DeviceAllocationConfiguration {
                    source: "FromClaim".into(),
                    requests: (!reqs.is_empty()).then_some(reqs),
                    opaque: c.opaque.clone(),
                });
            }
        }
        // An entry naming every request of the claim applies to all of them.
        for e in &mut out {
            if let Some(reqs) = &e.requests
                && !reqs.is_empty()
                && names
                    .iter()
                    .all(|(plain, sub)| reqs.iter().any(|r| r == plain || sub.as_deref() == Some(r.as_str())))
            {
                e.requests = None;
            }
        }
        out
    }

    fn node_selector(&self, ci: usize, claim: &Claim<'a>) -> Result<Option<NodeSelector>, AllocError> {
        let mut term = NodeSelectorTerm::default();
        let pin = || {
            let node = self.node.and_then(|n| n.metadata.name.clone()).unwrap_or_default();
            Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: None,
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node]),
                    }]),
                }],
            })
        };
        for t in &self.results[ci] {
            let s = &t.cand.slice_ref.spec;
            let d = t.cand.device;
            let (name, selector) = if s.per_device_node_selection == Some(true) {
                (d.node_name.as_deref(), d.node_selector.as_ref())
            } else {
                (s.node_name.as_deref(), s.node_selector.as_ref())
            };
            if name.is_some_and(|n| !n.is_empty()) || d.binds_to_node == Some(true) {
                return Ok(pin());
            }
            let Some(sel) = selector else { continue };
            match sel.node_selector_terms.len() {
                0 => {}
                1 => {
                    let src = &sel.node_selector_terms[0];
                    merge(&mut term.match_fields, src.match_fields.as_deref());
                    merge(&mut term.match_expressions, src.match_expressions.as_deref());
                }
                n => {
                    let name = claim.claim.metadata.name.as_deref().unwrap_or("");
                    return Err(Self::fatal(format!(
                        "create NodeSelector for claim {name}: unsupported ResourceSlice.NodeSelector with {n} terms"
                    )));
                }
            }
        }
        let empty = term.match_fields.as_ref().is_none_or(Vec::is_empty)
            && term.match_expressions.as_ref().is_none_or(Vec::is_empty);
        Ok(if empty { None } else { Some(NodeSelector { node_selector_terms: vec![term] }) })
    }
}

/// Appends requirements not already present (same key, operator and value set).
fn merge(into: &mut Option<Vec<NodeSelectorRequirement>>, from: Option<&[NodeSelectorRequirement]>) {
    for r in from.into_iter().flatten() {
        let list = into.get_or_insert_with(Vec::new);
        let values =
            |x: &NodeSelectorRequirement| x.values.clone().unwrap_or_default().into_iter().collect::<HashSet<_>>();
        if !list.iter().any(|x| x.key == r.key && x.operator == r.operator && values(x) == values(r)) {
            list.push(r.clone());
        }
    }
}
