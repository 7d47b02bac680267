//! The search (spec §3): preparation, device eligibility, first-fit depth-first backtracking,
//! taking and undoing devices, and building the results.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceClass,
    DeviceRequestAllocationResult, DeviceSelector, DeviceToleration, ResourceClaim,
};
use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use muster_api::Quantity;
use muster_api::quantity::{Format, format_of};
use muster_cel::{DeviceView, Env, SelectorOwner};

use crate::SliceIndex;
use crate::constraints::{Kind as ConstraintKind, Tracker};
use crate::domain::DeviceDomain;
use crate::pools::{Cand, Gathered, device_matches};
use crate::state::{AllocatedState, DeviceId, Features, PoolHeld};

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
    classes: &'a [DeviceClass],
    slices: &'a SliceIndex,
    env: &'a Env,
    /// The CEL cost this allocation may still spend (muster's bound on a scheduling attempt;
    /// Kubernetes has none): spent, the allocation stops with a fatal error.
    budget: Option<&'a muster_cel::Budget>,
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
    /// The class's selectors, then the request's, compiled once per call: (from the class?,
    /// index, program or compile error). A compile error is reported only when a device reaches
    /// the selector, as upstream does.
    programs: Vec<(bool, usize, Result<Arc<muster_cel::Program>, muster_cel::CompileError>)>,
    mode: Mode,
    admin: bool,
    tolerations: Option<&'a [DeviceToleration]>,
    /// Requested capacity (consumable capacity).
    capacity: Option<&'a BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
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

/// A device within one call: (slice in the cluster's list, device in the slice).
type Key = (usize, usize);

impl Cand<'_> {
    fn key(&self) -> Key {
        (self.global, self.index)
    }
}

type Fast<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<muster_cel::IdHasher>>;

/// What a share consumes of each capacity of its device: nano-units, and the format to print it in.
type Consumed = BTreeMap<String, (i128, Format)>;

/// One device taken for a claim.
struct Taken<'a> {
    request: usize,
    sub: usize,
    cand: Cand<'a>,
    /// Whether it drew on its pool's counters (released on undo).
    counters: bool,
    /// For a share of a multi-allocatable device: its ID and what it consumes.
    share: Option<(String, Consumed)>,
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
    /// The pools this node sees and their devices in search order (shared by every call for the
    /// node until one of its pools changes).
    gathered: &'a Gathered<'a>,
    /// What allocated claims hold of each of `gathered`'s pools, looked up once per call.
    held: Vec<PoolHeld<'a>>,
    claims: Vec<Claim<'a>>,
    memo: Fast<(Key, usize, usize, usize), bool>,
    /// Devices being allocated in this call → claims they are being allocated to.
    allocating: Fast<Key, Vec<usize>>,
    results: Vec<Vec<Taken<'a>>>,
    /// The subrequest chosen for each (claim, request).
    chosen: HashMap<(usize, usize), usize>,
    /// Per pool: what its counters have left after existing allocations (computed on first use),
    /// and what this call has drawn from them, in nano-units.
    available: HashMap<usize, BTreeMap<(String, String), i128>>,
    drawn: HashMap<usize, BTreeMap<(String, String), i128>>,
    /// Capacity taken by shares placed in this call, per device, in nano-units.
    allocating_capacity: Fast<Key, BTreeMap<String, i128>>,
    /// The topology domain the devices must come from ([`Allocator::allocate_within`]).
    domain: Option<&'b DeviceDomain>,
    /// An `All` request matches a device outside `domain`: no solution here.
    all_outside_domain: bool,
    /// The requests (claim, request, subrequest) whose every candidate was looked at since the
    /// search last entered them with no device picked, each with how many candidates from each
    /// position on it could still pick at most (see `search`).
    scanned: Vec<((usize, usize, usize), Vec<u32>)>,
}

pub(crate) fn claim_name(c: &ResourceClaim) -> String {
    match c.metadata.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => muster_api::key::namespaced(ns, c.metadata.name.as_deref().unwrap_or("")),
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

/// The fatal error when an attempt's CEL budget is spent.
fn budget_spent(b: &muster_cel::Budget) -> String {
    format!(
        "the CEL cost budget of this scheduling attempt ({}) is spent: the selectors of the pod's claims cost too much \
         over the devices at hand (muster bounds an attempt's CEL cost; Kubernetes does not)",
        b.total()
    )
}

pub(crate) fn tolerates(t: &DeviceToleration, key: &str, value: &str, effect: &str) -> bool {
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
    /// An allocator for one scheduling cycle: `slices` is the cluster's slices, indexed
    /// ([`SliceIndex`]); `env` caches compiled selectors across cycles.
    pub fn new(
        features: Features,
        allocated: &'a AllocatedState,
        classes: &'a [DeviceClass],
        slices: &'a SliceIndex,
        env: &'a Env,
    ) -> Self {
        Allocator { features, allocated, classes, slices, env, budget: None }
    }

    /// Charge every selector evaluation to `budget` (one scheduling attempt's, shared by the
    /// nodes it tries).
    pub fn with_budget(mut self, budget: Option<&'a muster_cel::Budget>) -> Self {
        self.budget = budget;
        self
    }

    /// Allocates `claims` together on `node`.
    pub fn allocate(&self, node: Option<&Node>, claims: &[&'a ResourceClaim]) -> Result<Outcome, AllocError> {
        self.allocate_within(node, claims, None)
    }

    /// Allocates `claims` together on `node`, taking devices of `domain`'s constrained drivers
    /// only from the domain [beyond upstream]. An `All` request that matches a device outside the
    /// domain has no solution (it never gets fewer devices). `None` is [`Allocator::allocate`].
    pub fn allocate_within(
        &self,
        node: Option<&Node>,
        claims: &[&'a ResourceClaim],
        domain: Option<&DeviceDomain>,
    ) -> Result<Outcome, AllocError> {
        if claims.is_empty() {
            return Ok(Outcome::Allocated(Vec::new()));
        }
        let cell = self.slices.gather(node, self.features);
        let gathered = cell.get();
        let held = gathered.pools.iter().map(|p| self.allocated.pool(p.driver, p.name)).collect();
        let mut call = Call {
            alloc: self,
            node,
            gathered,
            held,
            claims: Vec::new(),
            memo: Fast::default(),
            allocating: Fast::default(),
            results: claims.iter().map(|_| Vec::new()).collect(),
            chosen: HashMap::new(),
            available: HashMap::new(),
            drawn: HashMap::new(),
            allocating_capacity: Fast::default(),
            domain,
            all_outside_domain: false,
            scanned: Vec::new(),
        };
        for (ci, c) in claims.iter().enumerate() {
            let prepared = call.prepare(ci, c)?;
            call.claims.push(prepared);
        }
        if call.all_outside_domain {
            return Ok(Outcome::Unsatisfiable);
        }
        match call.search(0, 0, 0, 0, false, None)? {
            Search::Found => Ok(Outcome::Allocated(call.build()?)),
            Search::No | Search::TooMany => {
                if call.gathered.pools.iter().any(|p| p.invalid.is_some()) {
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
                        s.capacity.as_ref().and_then(|c| c.requests.as_ref()),
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
                    e.capacity.as_ref().and_then(|c| c.requests.as_ref()),
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
        capacity: Option<&'a BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    ) -> Result<Req<'a>, AllocError> {
        let f = self.alloc.features;
        let ctx = |name: &str| format!("claim {claim}, request {name}");
        for (i, s) in selectors.iter().enumerate() {
            if s.cel.is_none() {
                return Err(Self::fatal(format!(
                    "{}, selector #{i}: CEL expression empty (unsupported selector type?)",
                    ctx(&name)
                )));
            }
        }
        if admin.is_some() && !f.admin_access {
            return Err(Self::fatal(format!("{}: admin access is requested, but the feature is disabled", ctx(&name))));
        }
        if class_name.is_empty() {
            return Err(Self::fatal(format!("{}: missing device class name (unsupported request type?)", ctx(&name))));
        }
        let Some(class) = self.alloc.classes.iter().find(|c| c.metadata.name.as_deref() == Some(class_name)) else {
            return Err(Self::fatal(format!(
                "{}: could not retrieve device class {class_name}: deviceclass.resource.k8s.io \"{class_name}\" not found",
                ctx(&name)
            )));
        };
        let mode = match mode.unwrap_or("ExactCount") {
            "ExactCount" => {
                let n = count.unwrap_or(1);
                if n > MAX_DEVICES_PER_CLAIM as i64 * 1000 || n < 0 {
                    return Err(Self::fatal(format!("{}: exact count {n} is too large", ctx(&name))));
                }
                Mode::Exact(n as usize)
            }
            "All" => Mode::All,
            other => return Err(Self::fatal(format!("{}: unsupported count mode {other}", ctx(&name)))),
        };
        let class_sels = class.spec.as_ref().and_then(|s| s.selectors.as_deref()).unwrap_or(&[]);
        let compile = |from_class: bool, sels: &'a [DeviceSelector]| {
            sels.iter().enumerate().filter_map(move |(i, s)| s.cel.as_ref().map(|c| (from_class, i, &c.expression)))
        };
        let programs = compile(true, class_sels)
            .chain(compile(false, selectors))
            .map(|(from_class, i, expr)| (from_class, i, self.alloc.env.compile(expr)))
            .collect();
        let mut req = Req {
            name,
            result_name,
            parent,
            class,
            programs,
            mode,
            admin: admin == Some(true),
            tolerations,
            capacity,
            all: Vec::new(),
        };
        if mode == Mode::All {
            // Spec §3.3: every pool must be usable; then every selectable targeting device.
            for p in &self.gathered.pools {
                if p.incomplete {
                    return Err(Self::fatal(format!(
                        "{}: asks for all devices, but resource pool {}/{} is currently being updated",
                        ctx(&req.name),
                        p.driver,
                        p.name
                    )));
                }
                if p.invalid.is_some() {
                    return Err(Self::fatal(format!(
                        "{}: asks for all devices, but resource pool {}/{} is currently invalid",
                        ctx(&req.name),
                        p.driver,
                        p.name
                    )));
                }
            }
            let mut all = Vec::new();
            for i in 0..self.gathered.cands.len() {
                let c = self.gathered.cands[i];
                if self.selectable(&c, ci, ri, si, &req, claim)?
                    && (!f.consumable_capacity || self.capacity_fits(&c, &req, false))
                {
                    self.all_outside_domain |= !self.in_domain(&c);
                    all.push(c);
                }
            }
            req.all = all;
        }
        Ok(req)
    }

    /// Is the device inside the call's topology domain (always, without one)?
    fn in_domain(&self, c: &Cand<'a>) -> bool {
        self.domain.is_none_or(|d| d.allows(&c.slice_ref.spec.driver, self.view(c).as_deref()))
    }

    fn view(&self, c: &Cand<'a>) -> Result<Arc<DeviceView>, muster_cel::DeviceError> {
        self.alloc.slices.view(c.global, c.index)
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
        let key = c.key();
        if let Some(v) = self.memo.get(&(key, ci, ri, si)) {
            return Ok(*v);
        }
        let class_name = req.class.metadata.name.as_deref().unwrap_or("");
        for (from_class, i, program) in &req.programs {
            let owner = if *from_class { SelectorOwner::Class(class_name) } else { SelectorOwner::Claim(claim) };
            let program =
                program.as_ref().map_err(|e| Self::fatal(muster_cel::selector_compile_error(owner, *i, e)))?;
            if let Some(b) = self.alloc.budget.filter(|b| b.is_spent()) {
                return Err(Self::fatal(budget_spent(b)));
            }
            let remembered =
                if *from_class { self.alloc.slices.class_verdict(program.id, c.global, c.index) } else { None };
            let (verdict, cost) = match remembered {
                Some(known) => known,
                None => {
                    let view = self.view(c).map_err(|e| {
                        Self::fatal(format!("{owner}: selector #{i} on device {}: CEL runtime error: {e}", id_of(c)))
                    })?;
                    let (verdict, cost) = self.alloc.env.eval_metered(program, &view);
                    let known = (verdict.map_err(Arc::new), cost);
                    if *from_class {
                        self.alloc.slices.remember_class_verdict(program.id, c.global, c.index, known.clone());
                    }
                    known
                }
            };
            if let Some(b) = self.alloc.budget {
                b.charge(cost);
            }
            match verdict {
                Ok(true) => {}
                Ok(false) => {
                    self.memo.insert((key, ci, ri, si), false);
                    return Ok(false);
                }
                Err(e) => {
                    return Err(Self::fatal(muster_cel::selector_runtime_error(owner, *i, &id_of(c).to_string(), &e)));
                }
            }
        }
        let ok = device_matches(self.node, c.slice_ref, c.device);
        self.memo.insert((key, ci, ri, si), ok);
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
        let request = (ci, ri, si);
        if di == 0 {
            self.scanned.retain(|(r, _)| *r != request);
        }
        let num_cands = self.gathered.cands.len();
        for i in 0..num_cands {
            let c = self.gathered.cands[i];
            // Within one request only combinations in search order: after the previous pick.
            if start.is_some_and(|st| (c.pool, c.slice, c.index) < st) {
                continue;
            }
            // Fewer candidates left that could be picked than devices still wanted: no pick from
            // here completes the request. Upstream goes on trying them (2^k combinations when
            // one device is missing); stopping changes no answer once every candidate was looked
            // at for this request (`scanned`): the rest would only read remembered verdicts, so
            // no selector error goes unreported.
            if self.scanned.iter().any(|(r, left)| *r == request && (left[i] as usize) < num - di) {
                return Ok(Search::No);
            }
            let admin = self.claims[ci].requests[ri].subs[si].admin;
            let allocating = self.allocating.get(&c.key());
            if admin {
                if allocating.is_some_and(|cs| cs.contains(&ci)) {
                    continue;
                }
            } else if self.held[c.pool].is_dedicated(&c.device.name) || allocating.is_some_and(|cs| !cs.is_empty()) {
                continue;
            }
            if !self.in_domain(&c) {
                continue;
            }
            // `selectable` needs the request while borrowing the call mutably: lend it the claims.
            let claims = std::mem::take(&mut self.claims);
            let selectable = self.selectable(&c, ci, ri, si, &claims[ci].requests[ri].subs[si], &claims[ci].name);
            self.claims = claims;
            if !selectable? {
                continue;
            }
            if self.alloc.features.consumable_capacity {
                let claims = std::mem::take(&mut self.claims);
                let fits = self.capacity_fits(&c, &claims[ci].requests[ri].subs[si], true);
                self.claims = claims;
                if !fits {
                    continue;
                }
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
        // Every candidate after the previous pick was looked at, and (by the search order) every
        // one before it by the loops above this one.
        if !self.scanned.iter().any(|(r, _)| *r == request) {
            let left = self.pickable_from(ci, ri, si);
            self.scanned.push((request, left));
        }
        Ok(Search::No)
    }

    /// For each candidate position, how many candidates from there on request (ci, ri, si) could
    /// pick at most, once every one was looked at: all but those held by earlier allocations
    /// (unless the request has admin access), outside the domain, or refused by a selector.
    /// Devices taken in this call count: the request's own picks come back when it backtracks.
    fn pickable_from(&self, ci: usize, ri: usize, si: usize) -> Vec<u32> {
        let admin = self.claims[ci].requests[ri].subs[si].admin;
        let cands = &self.gathered.cands;
        let mut left = vec![0u32; cands.len() + 1];
        for (i, c) in cands.iter().enumerate().rev() {
            let refused = (!admin && self.held[c.pool].is_dedicated(&c.device.name))
                || !self.in_domain(c)
                || self.memo.get(&(c.key(), ci, ri, si)) == Some(&false);
            left[i] = left[i + 1] + u32::from(!refused);
        }
        left
    }

    /// Spec §3.5: `allocateDevice`. Returns whether the device was taken.
    fn take(&mut self, ci: usize, ri: usize, si: usize, c: Cand<'a>, must: bool) -> Result<bool, AllocError> {
        let f = self.alloc.features;
        let key = c.key();
        let (admin, tolerations) = {
            let r = &self.claims[ci].requests[ri].subs[si];
            (r.admin, r.tolerations)
        };
        let allocating = self.allocating.get(&key);
        if admin {
            if allocating.is_some_and(|cs| cs.contains(&ci)) {
                return Ok(false);
            }
        } else if self.held[c.pool].is_dedicated(&c.device.name) || allocating.is_some_and(|cs| !cs.is_empty()) {
            return Ok(false);
        }
        let multi = f.consumable_capacity && c.device.allow_multiple_allocations == Some(true);
        let consumes = c.device.consumes_counters.as_ref().is_some_and(|cc| !cc.is_empty());
        if consumes && !f.partitionable_devices {
            return Ok(false);
        }
        // A multi-allocatable device draws on its counters for its first share only (spec §6.4).
        let has_shares =
            self.held[c.pool].capacity(&c.device.name).is_some() || self.allocating_capacity.contains_key(&key);
        let consumes = consumes && !(multi && has_shares);
        if consumes && !self.draw_counters(&c, 1) {
            return Ok(false);
        }
        // From here on, a rejection gives the counters back. (Upstream keeps them drawn [QUIRK],
        // which can make a later candidate of the same pool fail wrongly.)
        let give_back = |call: &mut Self| {
            if consumes {
                call.draw_counters(&c, -1);
            }
        };
        if f.device_taints {
            for t in c.device.taints.iter().flatten() {
                if t.effect != "NoSchedule" && t.effect != "NoExecute" {
                    continue;
                }
                let value = t.value.as_deref().unwrap_or("");
                if !tolerations.unwrap_or(&[]).iter().any(|tol| tolerates(tol, &t.key, value, &t.effect)) {
                    give_back(self);
                    return Ok(false);
                }
            }
        }
        let at = self.results[ci].len();
        let needs_view = {
            let claim = &self.claims[ci];
            let r = &claim.requests[ri].subs[si];
            claim.constraints.iter().any(|t| t.applies(&r.result_name, r.parent.as_deref()))
        };
        if needs_view {
            let Ok(view) = self.alloc.slices.view(c.global, c.index) else {
                give_back(self);
                return Ok(false);
            };
            let claim = &mut self.claims[ci];
            let r = &claim.requests[ri].subs[si];
            // Constraints admitted so far (a claim has at most 32), to undo on a rejection.
            let mut added = 0u64;
            let mut rejected = false;
            for (i, t) in claim.constraints.iter_mut().enumerate() {
                if !t.applies(&r.result_name, r.parent.as_deref()) {
                    continue;
                }
                if !t.add(at, &view) {
                    rejected = true;
                    break;
                }
                added |= 1 << i;
            }
            if rejected {
                for (i, t) in claim.constraints.iter_mut().enumerate() {
                    if added & (1 << i) != 0 {
                        t.remove(at);
                    }
                }
                let error = must.then(|| {
                    format!(
                        "claim {}, request {}: cannot add device {} because a claim constraint would not be satisfied",
                        claim.name,
                        r.name,
                        id_of(&c)
                    )
                });
                give_back(self);
                return match error {
                    Some(e) => Err(Self::fatal(e)),
                    None => Ok(false),
                };
            }
        }
        let mut share = None;
        if f.consumable_capacity {
            let claims = std::mem::take(&mut self.claims);
            let req = &claims[ci].requests[ri].subs[si];
            // Only a share records what it consumes.
            let fits = if multi {
                self.capacity_consumed(&c, req, true)
            } else {
                self.capacity_fits(&c, req, true).then(Consumed::new)
            };
            self.claims = claims;
            let Some(consumed) = fits else {
                for t in &mut self.claims[ci].constraints {
                    t.remove(at);
                }
                give_back(self);
                return Ok(false);
            };
            if multi {
                let sum = self.allocating_capacity.entry(key).or_default();
                for (k, (v, _)) in &consumed {
                    *sum.entry(k.clone()).or_default() += v;
                }
                let share_id = share_id(&self.claims[ci].name, at, &id_of(&c));
                share = Some((share_id, consumed));
            }
        }
        if !multi {
            self.allocating.entry(key).or_default().push(ci);
        }
        self.results[ci].push(Taken { request: ri, sub: si, cand: c, counters: consumes, share });
        Ok(true)
    }

    /// Spec §7.3: can `req` take its share of the device's capacities? `in_call` adds the shares
    /// placed in this call.
    fn capacity_fits(&self, c: &Cand<'a>, req: &Req<'a>, in_call: bool) -> bool {
        self.consume(c, req, in_call, |_, _, _| {})
    }

    /// What `req` consumes of each capacity of the device if it fits ([`Call::capacity_fits`]).
    fn capacity_consumed(&self, c: &Cand<'a>, req: &Req<'a>, in_call: bool) -> Option<Consumed> {
        let mut out = BTreeMap::new();
        let fits = self.consume(c, req, in_call, |name, consumed, format| {
            out.insert(name.clone(), (consumed, format));
        });
        fits.then_some(out)
    }

    /// Whether `req` fits each capacity of the device, handing `each` what it would consume of
    /// each one that fits (stopping at the first that does not).
    fn consume(&self, c: &Cand<'a>, req: &Req<'a>, in_call: bool, mut each: impl FnMut(&String, i128, Format)) -> bool {
        let caps = c.device.capacity.as_ref();
        let requested = req.capacity;
        if requested.into_iter().flatten().any(|(name, _)| !caps.is_some_and(|c| c.contains_key(name))) {
            return false;
        }
        let allocated = self.held[c.pool].capacity(&c.device.name);
        let allocating = if in_call { self.allocating_capacity.get(&c.key()) } else { None };
        for (name, cap) in caps.into_iter().flatten() {
            let value = parse(&cap.value.0);
            let (consumed, format, from_default) = consumed_amount(requested.and_then(|r| r.get(name)), cap);
            if !from_default && violates(consumed, cap.request_policy.as_ref()) {
                return false;
            }
            let used = allocated.and_then(|m| m.get(name)).copied().unwrap_or(0)
                + allocating.and_then(|m| m.get(name)).copied().unwrap_or(0);
            if used + consumed > value {
                return false;
            }
            each(name, consumed, format);
        }
        true
    }

    /// What a pool's counters have left after the devices already allocated (spec §6.2): every
    /// device of the pool, targeting this node or not, that is in use draws on them. Keyed by the
    /// pool (driver and name); upstream keys by pool name only [QUIRK].
    fn ensure_available(&mut self, pool: usize) {
        if !self.available.contains_key(&pool) {
            let p = &self.gathered.pools[pool];
            let mut left: BTreeMap<(String, String), i128> = BTreeMap::new();
            for (set, counters) in &p.counter_sets {
                for (name, q) in counters {
                    left.insert((set.to_string(), name.to_string()), q.nanos());
                }
            }
            let devices = p
                .slices
                .iter()
                .flat_map(|(_, s)| s.spec.devices.iter().flatten())
                .chain(p.other_devices.iter().copied());
            for d in devices {
                if !self.held[pool].in_use(&d.name) {
                    continue;
                }
                for cc in d.consumes_counters.iter().flatten() {
                    for (name, c) in &cc.counters {
                        let q = muster_api::quantity::parse(&c.value.0).unwrap_or_default();
                        *left.entry((cc.counter_set.clone(), name.clone())).or_default() -= q.nanos();
                    }
                }
            }
            self.available.insert(pool, left);
        }
    }

    /// Draws (`sign` 1) or returns (`sign` -1) a device's counter consumption. Drawing fails,
    /// changing nothing, if any counter of the pool would go below what is left of it (spec §6.3).
    fn draw_counters(&mut self, c: &Cand<'a>, sign: i128) -> bool {
        let mut change: Vec<((String, String), i128)> = Vec::new();
        for cc in c.device.consumes_counters.iter().flatten() {
            for (name, counter) in &cc.counters {
                let q = muster_api::quantity::parse(&counter.value.0).unwrap_or_default();
                change.push(((cc.counter_set.clone(), name.clone()), sign * q.nanos()));
            }
        }
        self.ensure_available(c.pool);
        let available = &self.available[&c.pool];
        let drawn = self.drawn.entry(c.pool).or_default();
        for (k, v) in &change {
            *drawn.entry(k.clone()).or_default() += v;
        }
        if sign > 0 && available.iter().any(|(k, left)| drawn.get(k).copied().unwrap_or(0) > *left) {
            for (k, v) in &change {
                *drawn.entry(k.clone()).or_default() -= v;
            }
            return false;
        }
        true
    }

    fn undo(&mut self, ci: usize) {
        let Some(t) = self.results[ci].pop() else { return };
        if t.counters {
            self.draw_counters(&t.cand, -1);
        }
        if let Some((_, consumed)) = &t.share
            && let Some(sum) = self.allocating_capacity.get_mut(&t.cand.key())
        {
            for (k, (v, _)) in consumed {
                *sum.entry(k.clone()).or_default() -= v;
            }
            if sum.values().all(|v| *v == 0) {
                self.allocating_capacity.remove(&t.cand.key());
            }
        }
        let at = self.results[ci].len();
        for tr in &mut self.claims[ci].constraints {
            tr.remove(at);
        }
        if let Some(cs) = self.allocating.get_mut(&t.cand.key()) {
            if let Some(i) = cs.iter().rposition(|c| *c == ci) {
                cs.remove(i);
            }
            if cs.is_empty() {
                self.allocating.remove(&t.cand.key());
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
                    driver: t.cand.slice_ref.spec.driver.clone(),
                    pool: t.cand.slice_ref.spec.pool.name.clone(),
                    device: t.cand.device.name.clone(),
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
                    share_id: t.share.as_ref().map(|(s, _)| s.clone()),
                    consumed_capacity: t.share.as_ref().filter(|(_, c)| !c.is_empty()).map(|(_, c)| {
                        c.iter()
                            .map(|(k, (v, fmt))| (k.clone(), ApiQuantity(Quantity::from_nanos(*v).canonical(*fmt))))
                            .collect()
                    }),
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
    fn allocated_names<'c>(&self, ci: usize, claim: &'c Claim<'a>) -> Vec<(&'c str, Option<&'c str>)> {
        claim
            .requests
            .iter()
            .enumerate()
            .map(|(ri, r)| {
                if r.has_subrequests {
                    let s = self.chosen.get(&(ci, ri)).copied().unwrap_or(0);
                    (r.subs[s].parent.as_deref().unwrap_or_default(), Some(r.subs[s].result_name.as_str()))
                } else {
                    (r.subs[0].result_name.as_str(), None)
                }
            })
            .collect()
    }

    fn config(&self, ci: usize, claim: &Claim<'a>) -> Vec<DeviceAllocationConfiguration> {
        let names = self.allocated_names(ci, claim);
        let mut out: Vec<DeviceAllocationConfiguration> = Vec::new();
        // Class configs: one entry per class config the first time a class is seen.
        let mut seen: Vec<(&str, Vec<usize>)> = Vec::new();
        for (ri, r) in claim.requests.iter().enumerate() {
            let s = if r.has_subrequests { self.chosen.get(&(ci, ri)).copied().unwrap_or(0) } else { 0 };
            let req = &r.subs[s];
            let class = req.class.metadata.name.as_deref().unwrap_or_default();
            let full = &req.result_name;
            if let Some((_, entries)) = seen.iter().find(|(c, _)| *c == class) {
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
            seen.push((class, entries));
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

pub(crate) fn parse(s: &str) -> i128 {
    muster_api::quantity::parse(s).map(Quantity::nanos).unwrap_or(0)
}

/// `Quantity.Value()` in nano-units: rounded up to a whole unit.
fn whole(nanos: i128) -> i128 {
    Quantity::from_nanos(nanos).value() as i128 * 1_000_000_000
}

/// Spec §7.4: what a request consumes of one capacity, its format, and whether it is the policy's
/// default (which always satisfies the policy).
pub(crate) fn consumed_amount(requested: Option<&ApiQuantity>, cap: &DeviceCapacity) -> (i128, Format, bool) {
    let policy = cap.request_policy.as_ref();
    let Some(req) = requested else {
        return match policy.and_then(|p| p.default.as_ref()) {
            Some(d) => (parse(&d.0), format_of(&d.0), true),
            None => (parse(&cap.value.0), format_of(&cap.value.0), false),
        };
    };
    let r = parse(&req.0);
    let fmt = format_of(&req.0);
    let Some(policy) = policy else { return (r, fmt, false) };
    if let Some(range) = &policy.valid_range {
        let min = parse(&range.min.0);
        if r < min {
            return (min, format_of(&range.min.0), false);
        }
        let Some(step) = &range.step else { return (r, fmt, false) };
        let (min_w, step_w, req_w) = (whole(min), whole(parse(&step.0)), whole(r));
        if step_w <= 0 {
            return (r, fmt, false);
        }
        let n = (req_w - min_w + step_w - 1) / step_w;
        return (min_w + step_w * n, Format::BinarySI, false);
    }
    if let Some(values) = &policy.valid_values {
        let mut vs: Vec<(i128, &ApiQuantity)> = values.iter().map(|v| (parse(&v.0), v)).collect();
        vs.sort_by_key(|(n, _)| *n);
        if let Some((n, v)) = vs.into_iter().find(|(n, _)| *n >= r) {
            return (n, format_of(&v.0), false);
        }
    }
    (r, fmt, false)
}

/// Spec §7.5: does a consumed amount break the capacity's request policy?
pub(crate) fn violates(consumed: i128, policy: Option<&CapacityRequestPolicy>) -> bool {
    let Some(policy) = policy else { return false };
    if let Some(range) = &policy.valid_range {
        if range.max.as_ref().is_some_and(|m| consumed > parse(&m.0)) {
            return true;
        }
        if let Some(step) = &range.step {
            let step_w = whole(parse(&step.0));
            if step_w > 0 && (whole(consumed) - whole(parse(&range.min.0))) % step_w != 0 {
                return true;
            }
        }
        return false;
    }
    if let Some(values) = &policy.valid_values {
        return !values.iter().any(|v| parse(&v.0) == consumed);
    }
    false
}

/// Gives the shares among `allocation`'s results the IDs the allocator derives for `claim`: an
/// allocation computed for another claim of the same spec (a verdict reused) carries that claim's.
pub fn derive_share_ids(claim: &ResourceClaim, allocation: &mut k8s_openapi::api::resource::v1::AllocationResult) {
    let name = claim_name(claim);
    let results = allocation.devices.as_mut().and_then(|d| d.results.as_mut());
    for (at, r) in results.into_iter().flatten().enumerate() {
        if r.share_id.is_some() {
            let id = DeviceId { driver: r.driver.clone(), pool: r.pool.clone(), device: r.device.clone() };
            r.share_id = Some(share_id(&name, at, &id));
        }
    }
}

/// A share ID: a UUID-shaped string derived from the claim, the result position and the device,
/// so that the same input always gives the same output (upstream draws a random UUID).
fn share_id(claim: &str, at: usize, id: &DeviceId) -> String {
    use std::hash::{Hash, Hasher};
    let hash = |seed: u64| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (seed, claim, at, id).hash(&mut h);
        h.finish()
    };
    let (a, b) = (hash(1), hash(2));
    // `{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}`, written digit by digit.
    let mut out = String::with_capacity(36);
    let parts = [
        (a >> 32, 8),
        ((a >> 16) & 0xffff, 4),
        (0x4000 | (a & 0xfff), 4),
        (0x8000 | ((b >> 48) & 0x3fff), 4),
        (b & 0xffff_ffff_ffff, 12),
    ];
    for (n, (v, digits)) in parts.into_iter().enumerate() {
        if n > 0 {
            out.push('-');
        }
        for i in (0..digits).rev() {
            out.push(char::from(b"0123456789abcdef"[((v >> (4 * i)) & 0xf) as usize]));
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A share ID is the UUID-shaped text of its two hashes: version 4, variant 10.
    #[test]
    fn a_share_id_writes_its_hashes_as_a_uuid() {
        let id = DeviceId { driver: "gpu.example.com".into(), pool: "n0".into(), device: "gpu-3".into() };
        for (claim, at) in [("ml/a", 0), ("ml/b", 7), ("", 1 << 40)] {
            let text = share_id(claim, at, &id);
            use std::hash::{Hash, Hasher};
            let hash = |seed: u64| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (seed, claim, at, &id).hash(&mut h);
                h.finish()
            };
            let (a, b) = (hash(1), hash(2));
            let expected = format!(
                "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xfff,
                0x8000 | ((b >> 48) & 0x3fff),
                b & 0xffff_ffff_ffff
            );
            assert_eq!(text, expected);
            assert_eq!(text.len(), 36);
        }
    }
}
