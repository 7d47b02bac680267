//! Inference endpoints: each a Deployment whose replicas (one pod, and its claim, each) a
//! HorizontalPodAutoscaler scales on the trace's External metric, as kube-controller-manager's
//! controller computes it every sync period (`pkg/controller/podautoscaler`):
//!
//! - the raw recommendation: with an `AverageValue` target, the current count when the metric per
//!   replica is within the tolerance of the target, else `ceil(metric / target)` (from zero
//!   replicas: the latter);
//! - a count above `maxReplicas` or below `minReplicas` goes to the bound (with `minReplicas: 0`,
//!   the alpha `HPAScaleToZero`); otherwise the raw recommendation normalized as the controller
//!   does, with or without the endpoint's `behavior` ([`super::hpa`]);
//! - a scale-down deletes pending replicas first, then those still starting, then ready ones,
//!   newest first (the ReplicaSet's ranking); an evicted, preempted or failed replica is replaced
//!   at once.
//!
//! A replica serves `coldStart` after it is bound (image pull and model load; drawn per replica
//! from the run's seed when the trace gives a range). A cold start is the
//! time from demand (a metric above 0) with no replica serving to the first replica serving: the
//! HPA's sync delay, the scheduling wait and the cold start itself. Demand that goes away first
//! counts no cold start.

use crate::report::EndpointOutcome;
use crate::trace::{Endpoint, Job, Millis};

/// How long after the last load change and the windows the HPAs may still sync to reach their
/// counts under their policies.
const HPA_GRACE: Millis = 86_400_000;

use super::hpa::HpaMemory;
use super::{Event, Sim, SimError};

/// An endpoint as the world tracks it.
#[derive(Clone, Debug, Default)]
pub(super) struct EndpointState {
    /// Its replicas, oldest first.
    pub(super) replicas: Vec<Replica>,
    next_index: u32,
    /// Its HPA's recommendations and scale events.
    hpa: HpaMemory,
    /// Since when there is demand and no replica serving.
    cold_since: Option<Millis>,
    pub(super) cold_starts: Vec<Millis>,
    pub(super) peak: u32,
}

#[derive(Clone, Debug)]
pub(super) struct Replica {
    index: u32,
    key: String,
    bound: Option<Millis>,
    pub(super) ready: bool,
    /// The devices it holds once bound (in thousandths), counted for its endpoint's class.
    devices: u64,
}

/// The raw recommendation for `metric` over `current` replicas (`AverageValue` target): the
/// current count while the usage ratio is within `1 - down` and `1 + up` (the tolerances).
pub(crate) fn raw_recommendation(metric: f64, target: f64, current: u32, (down, up): (f64, f64)) -> u32 {
    let ratio = metric / (target * f64::from(current));
    if current > 0 && 1.0 - down <= ratio && ratio <= 1.0 + up {
        return current;
    }
    let want = (metric / target).ceil();
    if want >= f64::from(u32::MAX) { u32::MAX } else { want as u32 }
}

/// The raw recommendation for the endpoint's load at `now` over `current` replicas, within its
/// behavior's tolerances (else the controller's).
fn raw_now(spec: &Endpoint, hpa: &crate::trace::endpoints::Hpa, now: Millis, current: u32) -> u32 {
    let tolerance = |r: Option<&crate::trace::behavior::Rules>| r.and_then(|r| r.tolerance).unwrap_or(hpa.tolerance);
    let b = spec.behavior.as_ref();
    let tolerances = (tolerance(b.map(|b| &b.scale_down)), tolerance(b.map(|b| &b.scale_up)));
    raw_recommendation(spec.load_at(now), spec.target, current, tolerances)
}

impl<'d, 's> Sim<'d, 's> {
    /// The endpoints' first sync at 0 and their load changes.
    pub(super) fn push_endpoint_events(&mut self) {
        let endpoints = &self.w.trace.endpoints;
        if endpoints.is_empty() {
            return;
        }
        let hpa = self.w.trace.hpa;
        let last = endpoints.iter().filter_map(|e| e.load.last().map(|(at, _)| *at)).max().unwrap_or(0);
        let window = |e: &Endpoint| match &e.behavior {
            None => hpa.scale_down_stabilization,
            Some(b) => b.scale_up.window.unwrap_or(0).max(b.scale_down.window.unwrap_or(hpa.scale_down_stabilization)),
        };
        let longest = endpoints.iter().map(window).max().unwrap_or(0);
        self.w.hpa_end = last + longest + 2 * hpa.sync_period;
        let loads: Vec<(Millis, u32)> = endpoints
            .iter()
            .enumerate()
            .flat_map(|(e, ep)| ep.load.iter().map(move |(at, _)| (*at, e as u32)))
            .collect();
        self.w.endpoints = vec![EndpointState::default(); endpoints.len()];
        self.push(0, Event::HpaSync);
        for (at, endpoint) in loads {
            self.push(at, Event::Load { endpoint });
        }
    }

    /// Every HPA's sync: the replicas scaled to its recommendation; the next sync pushed.
    pub(super) fn hpa_sync(&mut self) -> Result<(), SimError> {
        let hpa = self.w.trace.hpa;
        for e in 0..self.w.endpoints.len() {
            let before = self.w.endpoints[e].replicas.len() as u32;
            let want = self.recommendation(e);
            self.scale(e, want)?;
            if let Some(b) = &self.w.trace.endpoints[e].behavior {
                self.w.endpoints[e].hpa.scaled(b, before, want, self.w.now);
            }
            self.check_cold(e);
        }
        // After the last load change and the windows, syncs go on while a policy still holds an
        // endpoint back from its count (a day at most).
        let next = self.w.now + hpa.sync_period;
        if next <= self.w.hpa_end || (next <= self.w.hpa_end + HPA_GRACE && !self.hpa_settled()) {
            self.push(next, Event::HpaSync);
        }
        Ok(())
    }

    /// Whether every endpoint has the count its load asks for, or one its policies will never
    /// change (`selectPolicy: Disabled` that way).
    fn hpa_settled(&self) -> bool {
        let (hpa, now) = (self.w.trace.hpa, self.w.now);
        self.w.trace.endpoints.iter().zip(&self.w.endpoints).all(|(spec, state)| {
            let current = state.replicas.len() as u32;
            let want = raw_now(spec, &hpa, now, current).clamp(spec.min_replicas, spec.max_replicas);
            let disabled = |r: &crate::trace::behavior::Rules| r.select == crate::trace::behavior::Select::Disabled;
            want == current
                || spec.behavior.as_ref().is_some_and(|b| {
                    (want > current && disabled(&b.scale_up)) || (want < current && disabled(&b.scale_down))
                })
        })
    }

    /// What the endpoint's HPA asks for now (`reconcileAutoscaler`).
    fn recommendation(&mut self, e: usize) -> u32 {
        let (hpa, now) = (self.w.trace.hpa, self.w.now);
        let spec = &self.w.trace.endpoints[e];
        let state = &mut self.w.endpoints[e];
        let current = state.replicas.len() as u32;
        let bounds = (spec.min_replicas, spec.max_replicas);
        state.hpa.first_sync(now, current);
        if current > spec.max_replicas || current < spec.min_replicas {
            return current.clamp(spec.min_replicas, spec.max_replicas);
        }
        let raw = raw_now(spec, &hpa, now, current);
        match &spec.behavior {
            None => state.hpa.normalize(now, hpa.scale_down_stabilization, current, raw, bounds),
            Some(b) => state.hpa.normalize_with(b, hpa.scale_down_stabilization, now, current, raw, bounds),
        }
    }

    /// Creates or deletes replicas until the endpoint has `want`.
    fn scale(&mut self, e: usize, want: u32) -> Result<(), SimError> {
        while (self.w.endpoints[e].replicas.len() as u32) < want {
            self.add_replica(e)?;
        }
        while self.w.endpoints[e].replicas.len() as u32 > want {
            let state = &self.w.endpoints[e];
            // Pending first, then starting, then serving; the newest of each first.
            let rank = |r: &Replica| (r.bound.is_some(), r.ready, std::cmp::Reverse(r.index));
            let victim = (0..state.replicas.len()).min_by_key(|i| rank(&state.replicas[*i])).expect("not empty");
            self.remove_replica(e, victim)?;
        }
        let state = &mut self.w.endpoints[e];
        state.peak = state.peak.max(state.replicas.len() as u32);
        Ok(())
    }

    /// The endpoint as a one-pod job spec, for [`Sim::pod_objects`].
    fn replica_spec(spec: &Endpoint) -> Job {
        Job {
            name: spec.name.clone(),
            namespace: spec.namespace.clone(),
            arrival: 0,
            duration: 0,
            pods: 1,
            gang: false,
            gpus_per_pod: spec.gpus_per_pod,
            device_class: spec.device_class.clone(),
            priority: spec.priority,
            priority_class_name: None,
            class: spec.class.clone(),
            cpu: spec.cpu.clone(),
            memory: spec.memory.clone(),
            device_selector: None,
            capacity_requests: Vec::new(),
        }
    }

    fn add_replica(&mut self, e: usize) -> Result<(), SimError> {
        let spec = Self::replica_spec(&self.w.trace.endpoints[e]);
        let index = self.w.endpoints[e].next_index;
        self.w.endpoints[e].next_index += 1;
        let name = format!("{}-r{index}", spec.name);
        let uid = format!("sim-{}-{name}", spec.namespace);
        let created = crate::devices::time(self.w.now)?;
        let (claim, pod) = self.pod_objects(&spec, &name, &uid, &created, "muster.dev/sim-endpoint")?;
        if let Some(claim) = claim {
            self.apply(muster_sched::Change::UpsertClaim(Box::new(claim)))?;
        }
        let key = format!("{}/{name}", spec.namespace);
        self.w.replica_of.insert(key.clone(), (e as u32, index));
        self.w.endpoints[e].replicas.push(Replica { index, key, bound: None, ready: false, devices: 0 });
        self.w.pending_pods += 1;
        self.apply(muster_sched::Change::UpsertPod(Box::new(pod)))
    }

    fn remove_replica(&mut self, e: usize, at: usize) -> Result<(), SimError> {
        let replica = self.w.endpoints[e].replicas.remove(at);
        self.w.replica_of.remove(&replica.key);
        if replica.bound.is_none() {
            self.w.pending_pods -= 1;
        }
        let class = self.endpoint_class(e);
        self.w.class_allocated[class] -= replica.devices;
        self.delete_pod(&replica.key)?;
        self.check_cold(e);
        Ok(())
    }

    /// A replica lost (evicted, preempted, failed): the ReplicaSet makes another.
    pub(super) fn replace_replica(&mut self, key: &str) -> Result<(), SimError> {
        let Some((e, index)) = self.w.replica_of.get(key).copied() else { return self.delete_pod(key) };
        let e = e as usize;
        let at = self.w.endpoints[e].replicas.iter().position(|r| r.index == index).expect("tracked");
        self.remove_replica(e, at)?;
        self.add_replica(e)
    }

    /// The index of the endpoint's class among the report's classes.
    fn endpoint_class(&self, e: usize) -> usize {
        let class = &self.w.trace.endpoints[e].class;
        self.w.class_names.binary_search(class).expect("the endpoints' classes are listed")
    }

    /// A replica holding `devices` (in thousandths) was bound: it serves after the cold start.
    pub(super) fn replica_bound(&mut self, key: &str, devices: u64) -> bool {
        let Some((e, index)) = self.w.replica_of.get(key).copied() else { return false };
        let now = self.w.now;
        let class = self.endpoint_class(e as usize);
        self.w.class_allocated[class] += devices;
        let replica = self.w.endpoints[e as usize].replicas.iter_mut().find(|r| r.index == index).expect("tracked");
        replica.bound = Some(now);
        replica.devices = devices;
        self.w.pending_pods -= 1;
        let at = now + self.w.trace.endpoints[e as usize].cold_start_for(self.w.options.seed, index);
        self.push(at, Event::Ready { endpoint: e, index });
        true
    }

    /// The replica's cold start is over, if it is still there.
    pub(super) fn replica_ready(&mut self, e: u32, index: u32) {
        let now = self.w.now;
        let state = &mut self.w.endpoints[e as usize];
        let Some(replica) = state.replicas.iter_mut().find(|r| r.index == index && r.bound.is_some()) else {
            return;
        };
        replica.ready = true;
        if let Some(since) = state.cold_since.take() {
            state.cold_starts.push(now - since);
        }
    }

    /// A cold start begins when there is demand and no replica serving; ends without a count
    /// when the demand goes.
    pub(super) fn check_cold(&mut self, e: usize) {
        let demand = self.w.trace.endpoints[e].load_at(self.w.now) > 0.0;
        let state = &mut self.w.endpoints[e];
        let serving = state.replicas.iter().any(|r| r.ready);
        match (demand, serving, state.cold_since) {
            (false, _, _) | (true, true, _) => state.cold_since = None,
            (true, false, None) => state.cold_since = Some(self.w.now),
            (true, false, Some(_)) => {}
        }
    }
}

impl Sim<'_, '_> {
    /// Serving replicas per endpoint.
    pub(super) fn serving(&self) -> Vec<u32> {
        self.w.endpoints.iter().map(|s| s.replicas.iter().filter(|r| r.ready).count() as u32).collect()
    }

    pub(super) fn endpoint_outcomes(&self) -> Vec<EndpointOutcome> {
        let specs = &self.w.trace.endpoints;
        specs
            .iter()
            .zip(&self.w.endpoints)
            .map(|(spec, s)| EndpointOutcome {
                name: spec.name.clone(),
                namespace: spec.namespace.clone(),
                class: spec.class.clone(),
                cold_starts: s.cold_starts.clone(),
                peak_replicas: s.peak,
                replicas: s.replicas.len() as u32,
                serving: s.replicas.iter().filter(|r| r.ready).count() as u32,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_recommendation_keeps_the_count_within_the_tolerance() {
        let t = (0.1, 0.1);
        assert_eq!(raw_recommendation(35.0, 10.0, 0, t), 4, "from zero: ceil(35 / 10)");
        assert_eq!(raw_recommendation(0.0, 10.0, 0, t), 0);
        assert_eq!(raw_recommendation(41.0, 10.0, 4, t), 4, "41 / 40 is within 10 %");
        assert_eq!(raw_recommendation(45.0, 10.0, 4, t), 5);
        assert_eq!(raw_recommendation(0.0, 10.0, 3, t), 0);
        assert_eq!(raw_recommendation(f64::MAX, 1.0, 1, t), u32::MAX);
        // Tolerances per direction: 37 / 40 is within 10 % down, 41 / 40 not within 1 % up.
        assert_eq!(raw_recommendation(37.0, 10.0, 4, (0.1, 0.01)), 4);
        assert_eq!(raw_recommendation(41.0, 10.0, 4, (0.1, 0.01)), 5);
    }
}
