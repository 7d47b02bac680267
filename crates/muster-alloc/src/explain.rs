//! Why a claim cannot be allocated on a node, device by device (`muster why`).
//!
//! [`Explainer::claim`] looks at every device of the pools a node sees and says, for each request
//! of a claim, what keeps each device from being taken: the class's or the request's selectors
//! (with CEL runtime errors named), per-device node selection, an exclusive allocation, a taint the
//! request does not tolerate, its pool's counters, its capacity — or that it is available. It then
//! says whether the available devices are enough for the request's count and whether the claim's
//! matchAttribute / distinctAttribute constraints can be met by them.
//!
//! It uses the allocator's own predicates (taint toleration, capacity policies, counter
//! accounting), but each device is judged alone, against what is already allocated: the
//! allocator's search, which also judges devices together (counters drawn by other devices of the
//! same call, constraints across requests), stays the authority on the verdict. The explanation
//! never changes it; it is pure, like the allocator (no I/O, same input, same output).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceSelector, DeviceTaint, DeviceToleration, ResourceClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use muster_api::Quantity;
use muster_api::quantity::format_of;
use muster_cel::{Env, SelectorOwner, Value};

use crate::SliceIndex;
use crate::allocator::{MAX_DEVICES_PER_CLAIM, claim_name, consumed_amount, parse, tolerates, violates};
use crate::pools::{Cand, Gathered, device_matches};
use crate::state::{AllocatedState, DeviceId, Features};

/// How many devices a request wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wanted {
    Exact(usize),
    /// `allocationMode: All`: every matching device (at least one).
    All,
}

/// What keeps one device from being taken for a request, judged alone; the first cause found, in
/// this order.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceStatus {
    /// The class's or the request's selectors do not select it.
    NoMatch,
    /// A selector failed on it (upstream's message). The allocator fails the pod's attempt on it.
    SelectorError(String),
    /// Per-device node selection does not offer it to this node.
    OtherNode,
    /// A feature it needs is off (the text says which).
    FeatureOff(&'static str),
    /// Exclusively allocated to an allocated claim.
    Allocated,
    /// A `NoSchedule`/`NoExecute` taint the request does not tolerate.
    Tainted(DeviceTaint),
    /// A counter of its pool's counter set has less left than the device consumes.
    Counters {
        counter_set: String,
        counter: String,
        needs: String,
        left: String,
    },
    /// A capacity it cannot give the request (the text says why).
    Capacity {
        capacity: String,
        reason: String,
    },
    Available,
    /// Not judged: the command's total CEL cost budget was spent before its selectors were
    /// evaluated (`muster_cel::Budget`; Kubernetes has no such total).
    NotEvaluated,
}

impl DeviceStatus {
    /// Does the device match the class, the selectors and the node (whatever else keeps it)?
    pub fn matches(&self) -> bool {
        !matches!(
            self,
            DeviceStatus::NoMatch
                | DeviceStatus::SelectorError(_)
                | DeviceStatus::OtherNode
                | DeviceStatus::FeatureOff(_)
                | DeviceStatus::NotEvaluated
        )
    }

    /// A short name for machines: `no-match`, `selector-error`, `other-node`, `feature-off`,
    /// `allocated`, `tainted`, `counters`, `capacity`, `available`.
    pub fn code(&self) -> &'static str {
        match self {
            DeviceStatus::NoMatch => "no-match",
            DeviceStatus::SelectorError(_) => "selector-error",
            DeviceStatus::OtherNode => "other-node",
            DeviceStatus::FeatureOff(_) => "feature-off",
            DeviceStatus::Allocated => "allocated",
            DeviceStatus::Tainted(_) => "tainted",
            DeviceStatus::Counters { .. } => "counters",
            DeviceStatus::Capacity { .. } => "capacity",
            DeviceStatus::Available => "available",
            DeviceStatus::NotEvaluated => "not-evaluated",
        }
    }
}

/// One device of the node's pools and what keeps it from a request.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceVerdict {
    pub device: DeviceId,
    pub status: DeviceStatus,
    /// (slice in the cluster's list, device in the slice), to read the device's attributes.
    pub(crate) slot: (usize, usize),
}

/// One request (or one subrequest of a `firstAvailable` list) on one node.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestExplanation {
    /// The request's name, `request/subrequest` for a subrequest.
    pub request: String,
    /// For a subrequest: its request (the request is met when any of its subrequests is).
    pub parent: Option<String>,
    pub class: String,
    /// The request has selectors of its own (besides the class's).
    pub has_selectors: bool,
    pub wanted: Wanted,
    pub admin_access: bool,
    /// A problem with the request itself (class not found, a selector that does not compile, a
    /// bad count): upstream's text; `devices` is then empty.
    pub error: Option<String>,
    /// Every device of the usable pools the node sees, in the allocator's search order.
    pub devices: Vec<DeviceVerdict>,
}

impl RequestExplanation {
    pub fn count(&self, f: impl Fn(&DeviceStatus) -> bool) -> usize {
        self.devices.iter().filter(|d| f(&d.status)).count()
    }

    /// Devices that match the class, the selectors and the node.
    pub fn matching(&self) -> usize {
        self.count(DeviceStatus::matches)
    }

    pub fn available(&self) -> usize {
        self.count(|s| *s == DeviceStatus::Available)
    }

    /// How many devices it needs: its count, or for `All` every matching device (at least one).
    pub fn needed(&self) -> usize {
        match self.wanted {
            Wanted::Exact(n) => n,
            Wanted::All => self.matching().max(1),
        }
    }

    /// How many devices it lacks on this node, judging each device alone.
    pub fn short(&self) -> usize {
        if self.error.is_some() {
            return self.needed();
        }
        self.needed().saturating_sub(self.available())
    }
}

/// A matchAttribute or distinctAttribute constraint of a claim, checked against the devices
/// available to the requests it applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintExplanation {
    /// `matchAttribute` or `distinctAttribute`.
    pub kind: &'static str,
    pub attribute: String,
    /// Requests it applies to; empty = all.
    pub requests: Vec<String>,
    pub met: bool,
    /// The attribute's values among the available devices: (value, devices); devices without
    /// the attribute under `None`.
    pub values: Vec<(Option<String>, Vec<String>)>,
    /// How many devices the constraint needs (distinct values for distinctAttribute; for
    /// matchAttribute, the devices that must share one value).
    pub needed: usize,
}

/// A pool the node sees but cannot allocate from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolProblem {
    pub driver: String,
    pub pool: String,
    pub problem: String,
}

/// One claim on one node.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimExplanation {
    /// `namespace/name`.
    pub claim: String,
    /// A problem with the whole claim (too many devices, an empty constraint).
    pub error: Option<String>,
    pub pools: Vec<PoolProblem>,
    pub requests: Vec<RequestExplanation>,
    pub constraints: Vec<ConstraintExplanation>,
}

impl ClaimExplanation {
    /// Requests that cannot be met on their own (a request with subrequests counts once, when none
    /// of its subrequests can be met).
    pub fn short_requests(&self) -> Vec<&RequestExplanation> {
        let mut out: Vec<&RequestExplanation> = Vec::new();
        for r in &self.requests {
            let alternatives: Vec<&RequestExplanation> = match &r.parent {
                Some(p) => self.requests.iter().filter(|o| o.parent.as_ref() == Some(p)).collect(),
                None => vec![r],
            };
            if alternatives.iter().all(|a| a.short() > 0) {
                out.push(r);
            }
        }
        out
    }

    /// Does anything in the explanation keep the claim off the node?
    pub fn has_cause(&self) -> bool {
        self.error.is_some()
            || !self.short_requests().is_empty()
            || self.constraints.iter().any(|c| !c.met)
            || self.requests.iter().any(|r| r.count(|s| matches!(s, DeviceStatus::SelectorError(_))) > 0)
    }
}

/// The allocator's inputs, to explain claims with.
pub struct Explainer<'a> {
    features: Features,
    allocated: &'a AllocatedState,
    classes: &'a [DeviceClass],
    slices: &'a SliceIndex,
    env: &'a Env,
    /// A total CEL cost shared with other explanations (a command's), if any.
    budget: Option<&'a muster_cel::Budget>,
}

/// A request's fields, the same for a request and a subrequest.
struct ReqSpec<'a> {
    name: String,
    parent: Option<String>,
    class: &'a str,
    selectors: &'a [DeviceSelector],
    mode: Option<&'a str>,
    count: Option<i64>,
    admin: bool,
    tolerations: &'a [DeviceToleration],
    capacity: Option<&'a BTreeMap<String, ApiQuantity>>,
}

type Program = Arc<muster_cel::Program>;

impl<'a> Explainer<'a> {
    pub fn new(
        features: Features,
        allocated: &'a AllocatedState,
        classes: &'a [DeviceClass],
        slices: &'a SliceIndex,
        env: &'a Env,
    ) -> Self {
        Explainer { features, allocated, classes, slices, env, budget: None }
    }

    /// Selectors are evaluated within `budget`; devices left when it is spent are
    /// [`DeviceStatus::NotEvaluated`].
    pub fn with_budget(mut self, budget: &'a muster_cel::Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Explains `claim` on `node` (its allocation, if any, is ignored: the claim is judged as if it
    /// were pending).
    pub fn claim(&self, node: Option<&Node>, claim: &ResourceClaim) -> ClaimExplanation {
        let cell = self.slices.gather(node, self.features);
        let gathered = cell.get();
        let name = claim_name(claim);
        let mut out = ClaimExplanation {
            claim: name.clone(),
            error: None,
            pools: Vec::new(),
            requests: Vec::new(),
            constraints: Vec::new(),
        };
        for p in &gathered.pools {
            let problem = if p.incomplete {
                Some("is being updated: slices of its newest generation are missing".to_string())
            } else {
                p.invalid.as_ref().map(|why| format!("is invalid: {why}"))
            };
            if let Some(problem) = problem {
                out.pools.push(PoolProblem { driver: p.driver.into(), pool: p.name.into(), problem });
            }
        }
        let mut left: HashMap<usize, BTreeMap<(String, String), i128>> = HashMap::new();
        let devices = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
        let mut min_devices = 0usize;
        for r in devices.and_then(|d| d.requests.as_ref()).into_iter().flatten() {
            let subs = r.first_available.as_deref().unwrap_or(&[]);
            if !subs.is_empty() {
                let mut least = usize::MAX;
                for s in subs {
                    let spec = ReqSpec {
                        name: format!("{}/{}", r.name, s.name),
                        parent: Some(r.name.clone()),
                        class: &s.device_class_name,
                        selectors: s.selectors.as_deref().unwrap_or(&[]),
                        mode: s.allocation_mode.as_deref(),
                        count: s.count,
                        admin: false,
                        tolerations: s.tolerations.as_deref().unwrap_or(&[]),
                        capacity: s.capacity.as_ref().and_then(|c| c.requests.as_ref()),
                    };
                    let e = self.request(node, &name, &spec, gathered, &mut left);
                    least = least.min(e.needed());
                    out.requests.push(e);
                }
                min_devices += least;
            } else if let Some(e) = &r.exactly {
                let spec = ReqSpec {
                    name: r.name.clone(),
                    parent: None,
                    class: &e.device_class_name,
                    selectors: e.selectors.as_deref().unwrap_or(&[]),
                    mode: e.allocation_mode.as_deref(),
                    count: e.count,
                    admin: e.admin_access == Some(true),
                    tolerations: e.tolerations.as_deref().unwrap_or(&[]),
                    capacity: e.capacity.as_ref().and_then(|c| c.requests.as_ref()),
                };
                let e = self.request(node, &name, &spec, gathered, &mut left);
                min_devices += e.needed();
                out.requests.push(e);
            } else {
                out.error.get_or_insert(format!("claim {name}, request {}: unknown request type", r.name));
            }
        }
        if min_devices > MAX_DEVICES_PER_CLAIM {
            out.error.get_or_insert(format!(
                "claim {name}: number of requested devices {min_devices} exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}"
            ));
        }
        for (i, c) in devices.and_then(|d| d.constraints.as_ref()).into_iter().flatten().enumerate() {
            let requests = c.requests.clone().unwrap_or_default();
            let (kind, attribute) = match (&c.match_attribute, &c.distinct_attribute) {
                (Some(a), _) => ("matchAttribute", a),
                (None, Some(a)) => ("distinctAttribute", a),
                (None, None) => {
                    out.error.get_or_insert(format!(
                        "claim {name}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    ));
                    continue;
                }
            };
            out.constraints.push(self.constraint(kind, attribute, requests, &out.requests));
        }
        out
    }

    fn request(
        &self,
        node: Option<&Node>,
        claim: &str,
        spec: &ReqSpec<'a>,
        gathered: &Gathered<'_>,
        left: &mut HashMap<usize, BTreeMap<(String, String), i128>>,
    ) -> RequestExplanation {
        let mut out = RequestExplanation {
            request: spec.name.clone(),
            parent: spec.parent.clone(),
            class: spec.class.to_string(),
            has_selectors: !spec.selectors.is_empty(),
            wanted: Wanted::Exact(1),
            admin_access: spec.admin,
            error: None,
            devices: Vec::new(),
        };
        let ctx = format!("claim {claim}, request {}", spec.name);
        out.wanted = match spec.mode.unwrap_or("ExactCount") {
            "ExactCount" => {
                let n = spec.count.unwrap_or(1);
                if n < 0 || n > MAX_DEVICES_PER_CLAIM as i64 * 1000 {
                    out.error = Some(format!("{ctx}: exact count {n} is too large"));
                    return out;
                }
                Wanted::Exact(n as usize)
            }
            "All" => Wanted::All,
            other => {
                out.error = Some(format!("{ctx}: unsupported count mode {other}"));
                return out;
            }
        };
        let Some(class) = self.classes.iter().find(|c| c.metadata.name.as_deref() == Some(spec.class)) else {
            out.error = Some(format!(
                "{ctx}: could not retrieve device class {0}: deviceclass.resource.k8s.io \"{0}\" not found",
                spec.class
            ));
            return out;
        };
        // The class's selectors, then the request's, as the allocator evaluates them.
        let class_sels = class.spec.as_ref().and_then(|s| s.selectors.as_deref()).unwrap_or(&[]);
        let mut programs: Vec<(SelectorOwner<'_>, usize, Program)> = Vec::new();
        for (owner, sels) in
            [(SelectorOwner::Class(spec.class), class_sels), (SelectorOwner::Claim(claim), spec.selectors)]
        {
            for (i, s) in sels.iter().enumerate() {
                let Some(cel) = &s.cel else {
                    out.error =
                        Some(format!("{ctx}, selector #{i}: CEL expression empty (unsupported selector type?)"));
                    return out;
                };
                match self.env.compile(&cel.expression) {
                    Ok(p) => programs.push((owner, i, p)),
                    Err(e) => {
                        out.error = Some(muster_cel::selector_compile_error(owner, i, &e));
                        return out;
                    }
                }
            }
        }
        for c in &gathered.cands {
            let status = self.device(node, c, &programs, spec, gathered, left);
            out.devices.push(DeviceVerdict { device: id_of(c), status, slot: (c.global, c.index) });
        }
        out
    }

    /// One device for one request, alone.
    fn device(
        &self,
        node: Option<&Node>,
        c: &Cand<'_>,
        programs: &[(SelectorOwner<'_>, usize, Program)],
        spec: &ReqSpec<'a>,
        gathered: &Gathered<'_>,
        left: &mut HashMap<usize, BTreeMap<(String, String), i128>>,
    ) -> DeviceStatus {
        let f = self.features;
        let d = c.device;
        let (driver, pool) = (c.slice_ref.spec.driver.as_str(), c.slice_ref.spec.pool.name.as_str());
        if !f.device_binding_and_status && d.binding_conditions.as_ref().is_some_and(|b| !b.is_empty()) {
            return DeviceStatus::FeatureOff("the device has binding conditions and DRADeviceBindingConditions is off");
        }
        if !programs.is_empty() {
            let view = match self.slices.view(c.global, c.index) {
                Ok(v) => v,
                Err(e) => {
                    let (owner, i, _) = &programs[0];
                    return DeviceStatus::SelectorError(format!(
                        "{owner}: selector #{i} on device {}: CEL runtime error: {e}",
                        id_of(c)
                    ));
                }
            };
            for (owner, i, program) in programs {
                let verdict = match self.budget {
                    Some(b) => match self.env.eval_charged(program, &view, b) {
                        Some(v) => v,
                        None => return DeviceStatus::NotEvaluated,
                    },
                    None => self.env.eval(program, &view),
                };
                match verdict {
                    Ok(true) => {}
                    Ok(false) => return DeviceStatus::NoMatch,
                    Err(e) => {
                        return DeviceStatus::SelectorError(muster_cel::selector_runtime_error(
                            *owner,
                            *i,
                            &id_of(c).to_string(),
                            &e,
                        ));
                    }
                }
            }
        }
        if !device_matches(node, c.slice_ref, d) {
            return DeviceStatus::OtherNode;
        }
        if !spec.admin && self.allocated.is_dedicated(driver, pool, &d.name) {
            return DeviceStatus::Allocated;
        }
        let consumes = d.consumes_counters.as_ref().is_some_and(|cc| !cc.is_empty());
        if consumes && !f.partitionable_devices {
            return DeviceStatus::FeatureOff("the device consumes counters and DRAPartitionableDevices is off");
        }
        if f.device_taints {
            for t in d.taints.iter().flatten() {
                if t.effect != "NoSchedule" && t.effect != "NoExecute" {
                    continue;
                }
                let value = t.value.as_deref().unwrap_or("");
                if !spec.tolerations.iter().any(|tol| tolerates(tol, &t.key, value, &t.effect)) {
                    return DeviceStatus::Tainted(t.clone());
                }
            }
        }
        let multi = f.consumable_capacity && d.allow_multiple_allocations == Some(true);
        let has_shares = self.allocated.capacity(driver, pool, &d.name).is_some();
        if consumes && !(multi && has_shares) {
            let left = left.entry(c.pool).or_insert_with(|| self.counters_left(gathered, c.pool));
            for cc in d.consumes_counters.iter().flatten() {
                for (name, counter) in &cc.counters {
                    let needs = parse(&counter.value.0);
                    let have = left.get(&(cc.counter_set.clone(), name.clone())).copied().unwrap_or(0);
                    if needs > have {
                        return DeviceStatus::Counters {
                            counter_set: cc.counter_set.clone(),
                            counter: name.clone(),
                            needs: counter.value.0.clone(),
                            left: Quantity::from_nanos(have).canonical(format_of(&counter.value.0)),
                        };
                    }
                }
            }
        }
        if f.consumable_capacity
            && let Some((capacity, reason)) = self.capacity_problem(c, spec)
        {
            return DeviceStatus::Capacity { capacity, reason };
        }
        DeviceStatus::Available
    }

    /// What a pool's counters have left after the devices in use (the allocator's accounting).
    fn counters_left(&self, gathered: &Gathered<'_>, pool: usize) -> BTreeMap<(String, String), i128> {
        let p = &gathered.pools[pool];
        let mut left: BTreeMap<(String, String), i128> = BTreeMap::new();
        for (set, counters) in &p.counter_sets {
            for (name, q) in counters {
                left.insert((set.to_string(), name.to_string()), q.nanos());
            }
        }
        let devices =
            p.slices.iter().flat_map(|(_, s)| s.spec.devices.iter().flatten()).chain(p.other_devices.iter().copied());
        for d in devices {
            if !self.allocated.in_use(p.driver, p.name, &d.name) {
                continue;
            }
            for cc in d.consumes_counters.iter().flatten() {
                for (name, c) in &cc.counters {
                    *left.entry((cc.counter_set.clone(), name.clone())).or_default() -= parse(&c.value.0);
                }
            }
        }
        left
    }

    /// Why the device cannot give the request its share of a capacity, if it cannot (the
    /// allocator's capacity check against what is allocated).
    fn capacity_problem(&self, c: &Cand<'_>, spec: &ReqSpec<'a>) -> Option<(String, String)> {
        let caps = c.device.capacity.as_ref();
        for (name, _) in spec.capacity.into_iter().flatten() {
            if !caps.is_some_and(|c| c.contains_key(name)) {
                return Some((name.clone(), "the device has no such capacity".into()));
            }
        }
        let s = &c.slice_ref.spec;
        let allocated = self.allocated.capacity(&s.driver, &s.pool.name, &c.device.name);
        for (name, cap) in caps.into_iter().flatten() {
            let value = parse(&cap.value.0);
            let (consumed, format, from_default) = consumed_amount(spec.capacity.and_then(|r| r.get(name)), cap);
            let text = |n: i128| Quantity::from_nanos(n).canonical(format);
            if !from_default && violates(consumed, cap.request_policy.as_ref()) {
                return Some((name.clone(), format!("{} is outside the capacity's request policy", text(consumed))));
            }
            let used = allocated.and_then(|m| m.get(name)).copied().unwrap_or(0);
            if used + consumed > value {
                return Some((
                    name.clone(),
                    format!("needs {}, {} of {} already consumed", text(consumed), text(used), cap.value.0),
                ));
            }
        }
        None
    }

    fn constraint(
        &self,
        kind: &'static str,
        attribute: &str,
        requests: Vec<String>,
        explained: &[RequestExplanation],
    ) -> ConstraintExplanation {
        let applies = |r: &RequestExplanation| {
            requests.is_empty() || requests.iter().any(|n| *n == r.request || r.parent.as_ref() == Some(n))
        };
        // The requests it applies to, grouped by request (subrequests are alternatives).
        let mut logical: Vec<(&str, Vec<&RequestExplanation>)> = Vec::new();
        for r in explained.iter().filter(|r| applies(r) && r.error.is_none()) {
            let key = r.parent.as_deref().unwrap_or(&r.request);
            match logical.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(r),
                None => logical.push((key, vec![r])),
            }
        }
        // Values of the available devices of those requests; each device once.
        let mut values: Vec<(Option<String>, Vec<String>)> = Vec::new();
        let mut value_of: HashMap<(usize, usize), Option<String>> = HashMap::new();
        for r in logical.iter().flat_map(|(_, v)| v.iter()) {
            for d in r.devices.iter().filter(|d| d.status == DeviceStatus::Available) {
                if value_of.contains_key(&d.slot) {
                    continue;
                }
                let v =
                    self.slices.view(d.slot.0, d.slot.1).ok().and_then(|v| v.attribute(attribute).and_then(value_text));
                value_of.insert(d.slot, v.clone());
                match values.iter_mut().find(|(x, _)| *x == v) {
                    Some((_, devs)) => devs.push(d.device.device.clone()),
                    None => values.push((v, vec![d.device.device.clone()])),
                }
            }
        }
        values.sort_by(|a, b| (a.0.is_none(), &a.0).cmp(&(b.0.is_none(), &b.0)));
        let count_with = |r: &RequestExplanation, v: &Option<String>| {
            r.devices.iter().filter(|d| d.status == DeviceStatus::Available && value_of.get(&d.slot) == Some(v)).count()
        };
        let least = |subs: &Vec<&RequestExplanation>| subs.iter().map(|r| r.needed()).min().unwrap_or(0);
        let (met, needed) = if kind == "matchAttribute" {
            let needed = logical.iter().map(|(_, subs)| least(subs)).sum();
            let met = logical.is_empty()
                || values
                    .iter()
                    .filter(|(v, _)| v.is_some())
                    .any(|(v, _)| logical.iter().all(|(_, subs)| subs.iter().any(|r| count_with(r, v) >= r.needed())));
            (met, needed)
        } else {
            let needed: usize = logical.iter().map(|(_, subs)| least(subs)).sum();
            let distinct = values.iter().filter(|(v, _)| v.is_some()).count();
            (needed <= 1 || distinct >= needed, needed)
        };
        ConstraintExplanation { kind, attribute: attribute.to_string(), requests, met, values, needed }
    }
}

fn id_of(c: &Cand<'_>) -> DeviceId {
    DeviceId {
        driver: c.slice_ref.spec.driver.clone(),
        pool: c.slice_ref.spec.pool.name.clone(),
        device: c.device.name.clone(),
    }
}

/// An attribute value as text (constraints compare scalars); `None` for values constraints never
/// accept.
fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Int(i) => Some(i.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => Some(s.to_string()),
        Value::Semver(s) => Some(s.to_string()),
        Value::List(items) => {
            let parts: Option<Vec<String>> = items.iter().map(value_text).collect();
            parts.map(|p| format!("[{}]", p.join(", ")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::ResourceSlice;
    use serde_json::json;

    fn slice(v: serde_json::Value) -> ResourceSlice {
        serde_json::from_value(v).unwrap()
    }

    fn class(name: &str, selector: Option<&str>) -> DeviceClass {
        let sels = selector.map(|s| json!([{"cel": {"expression": s}}]));
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"selectors": sels}})).unwrap()
    }

    fn claim(spec: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ml"}, "spec": {"devices": spec}}))
            .unwrap()
    }

    fn node() -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap()
    }

    fn allocated(devices: &[&str]) -> ResourceClaim {
        let results: Vec<_> = devices
            .iter()
            .map(|d| json!({"request": "r", "driver": "gpu.example.com", "pool": "n1", "device": d}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "old", "namespace": "ml"},
            "spec": {},
            "status": {"allocation": {"devices": {"results": results}}}
        }))
        .unwrap()
    }

    /// Four GPUs: gpu-0 and gpu-1 on numa 0, gpu-2 and gpu-3 on numa 1; gpu-2 tainted; one NIC.
    fn gpus() -> Vec<ResourceSlice> {
        let gpu = |n: usize, numa: i64| json!({"name": format!("gpu-{n}"), "attributes": {"type": {"string": "gpu"}, "numa": {"int": numa}}});
        let mut tainted = gpu(2, 1);
        tainted["taints"] = json!([{"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}]);
        vec![slice(json!({
            "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [gpu(0, 0), gpu(1, 0), tainted, gpu(3, 1), {"name": "nic-0", "attributes": {"type": {"string": "nic"}}}]}
        }))]
    }

    fn explain(
        slices: &[ResourceSlice],
        classes: &[DeviceClass],
        state: &AllocatedState,
        c: &ResourceClaim,
    ) -> ClaimExplanation {
        let index = SliceIndex::new(slices.to_vec());
        let env = Env::default();
        let e = Explainer::new(Features::kubernetes_1_37(), state, classes, &index, &env);
        e.claim(Some(&node()), c)
    }

    fn codes(r: &RequestExplanation) -> Vec<(&str, &str)> {
        r.devices.iter().map(|d| (d.device.device.as_str(), d.status.code())).collect()
    }

    #[test]
    fn each_device_gets_its_first_cause() {
        let slices = gpus();
        let classes = [class("gpu", Some("device.attributes['gpu.example.com'].type == 'gpu'"))];
        let state = AllocatedState::from_claims([&allocated(&["gpu-0"])], Features::kubernetes_1_37());
        let c = claim(json!({"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 3}}]}));
        let e = explain(&slices, &classes, &state, &c);
        let r = &e.requests[0];
        assert_eq!(
            codes(r),
            vec![
                ("gpu-0", "allocated"),
                ("gpu-1", "available"),
                ("gpu-2", "tainted"),
                ("gpu-3", "available"),
                ("nic-0", "no-match")
            ]
        );
        assert_eq!((r.matching(), r.available(), r.needed(), r.short()), (4, 2, 3, 1));
        assert!(e.has_cause());
        let DeviceStatus::Tainted(t) = &r.devices[2].status else { panic!() };
        assert_eq!((t.key.as_str(), t.effect.as_str()), ("example.com/maintenance", "NoSchedule"));
    }

    #[test]
    fn a_toleration_makes_the_tainted_device_available() {
        let slices = gpus();
        let classes = [class("gpu", None)];
        let c = claim(json!({"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 5,
            "tolerations": [{"key": "example.com/maintenance", "operator": "Exists"}]}}]}));
        let e = explain(&slices, &classes, &AllocatedState::default(), &c);
        assert_eq!(e.requests[0].available(), 5);
        assert!(!e.has_cause());
    }

    #[test]
    fn match_attribute_unmet_names_the_values() {
        let slices = gpus();
        let classes = [class("gpu", Some("device.attributes['gpu.example.com'].type == 'gpu'"))];
        let c = claim(json!({
            "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 2}}],
            "constraints": [{"matchAttribute": "gpu.example.com/numa"}]
        }));
        // gpu-2 is tainted: numa 1 has one available device, numa 0 two.
        let e = explain(&slices, &classes, &AllocatedState::default(), &c);
        assert!(e.constraints[0].met);
        let state = AllocatedState::from_claims([&allocated(&["gpu-0"])], Features::kubernetes_1_37());
        let e = explain(&slices, &classes, &state, &c);
        let k = &e.constraints[0];
        assert!(!k.met);
        assert_eq!(k.needed, 2);
        assert_eq!(
            k.values,
            vec![
                (Some("0".to_string()), vec!["gpu-1".to_string()]),
                (Some("1".to_string()), vec!["gpu-3".to_string()])
            ]
        );
        assert_eq!(e.requests[0].short(), 0, "enough devices, but not on one numa node");
        assert!(e.has_cause());
    }

    #[test]
    fn distinct_attribute_counts_values() {
        let slices = gpus();
        let classes = [class("gpu", Some("device.attributes['gpu.example.com'].type == 'gpu'"))];
        let c = claim(json!({
            "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 3}}],
            "constraints": [{"distinctAttribute": "gpu.example.com/numa"}]
        }));
        let e = explain(&slices, &classes, &AllocatedState::default(), &c);
        assert!(!e.constraints[0].met, "three devices, two numa values");
    }

    #[test]
    fn missing_class_and_runtime_errors_are_named() {
        let slices = gpus();
        let c = claim(json!({"requests": [{"name": "gpus", "exactly": {"deviceClassName": "nope"}}]}));
        let e = explain(&slices, &[], &AllocatedState::default(), &c);
        assert_eq!(
            e.requests[0].error.as_deref(),
            Some(
                "claim ml/c, request gpus: could not retrieve device class nope: deviceclass.resource.k8s.io \"nope\" not found"
            )
        );
        assert!(e.requests[0].devices.is_empty() && e.has_cause());
        let classes = [class("gpu", Some("device.attributes['gpu.example.com'].numa >= 0"))];
        let c = claim(json!({"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}]}));
        let e = explain(&slices, &classes, &AllocatedState::default(), &c);
        let DeviceStatus::SelectorError(msg) = &e.requests[0].devices[4].status else { panic!("{:?}", e.requests[0]) };
        assert!(
            msg.starts_with("class gpu: selector #0 on device gpu.example.com/n1/nic-0: CEL runtime error:"),
            "{msg}"
        );
    }

    #[test]
    fn partitions_are_short_of_counters_when_the_full_device_is_taken() {
        let pool = json!({"name": "n1", "generation": 1, "resourceSliceCount": 2});
        let counters = slice(json!({
            "metadata": {"name": "counters"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": pool,
                "sharedCounters": [{"name": "gpu-0-set", "counters": {"memory": {"value": "80Gi"}}}]}
        }));
        let slices = vec![
            counters,
            slice(json!({
                "metadata": {"name": "s"},
                "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": pool,
                    "devices": [
                        {"name": "gpu-0", "consumesCounters": [{"counterSet": "gpu-0-set", "counters": {"memory": {"value": "80Gi"}}}]},
                        {"name": "gpu-0-mig-0", "consumesCounters": [{"counterSet": "gpu-0-set", "counters": {"memory": {"value": "10Gi"}}}]}
                    ]}
            })),
        ];
        let classes = [class("any", None)];
        let state = AllocatedState::from_claims([&allocated(&["gpu-0"])], Features::kubernetes_1_37());
        let c = claim(json!({"requests": [{"name": "mig", "exactly": {"deviceClassName": "any"}}]}));
        let e = explain(&slices, &classes, &state, &c);
        assert_eq!(
            e.requests[0].devices[1].status,
            DeviceStatus::Counters {
                counter_set: "gpu-0-set".into(),
                counter: "memory".into(),
                needs: "10Gi".into(),
                left: "0".into()
            }
        );
        assert_eq!(e.requests[0].devices[0].status, DeviceStatus::Allocated);
    }
}
