//! Prometheus metrics, under kube-scheduler's names and labels where the meaning is the same
//! (`scheduler_schedule_attempts_total`, `scheduler_pending_pods`,
//! `scheduler_preemption_attempts_total`, `scheduler_preemption_victims`,
//! `scheduler_scheduling_attempt_duration_seconds`), muster's own otherwise (`muster_*`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    pub result: &'static str,
    pub profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: String,
    pub resource: String,
    pub code: String,
}

/// A histogram family whose histograms all have the latency buckets.
pub type Latencies<L> = Family<L, Histogram, fn() -> Histogram>;

/// kube-scheduler's latency buckets: 1 ms doubling, 15 buckets.
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

pub struct Metrics {
    pub registry: Registry,
    pub attempts: Family<AttemptLabels, Counter>,
    /// One queue entry's cycle (a pod's, or a whole PodGroup's), by its result.
    pub attempt_seconds: Latencies<AttemptLabels>,
    pub pending: Family<QueueLabels, Gauge>,
    pub preemption_attempts: Counter,
    pub preemption_victims: Histogram,
    pub requests: Family<RequestLabels, Counter>,
    /// One `Engine::schedule` call: every ready entry's cycle.
    pub batch_seconds: Histogram,
    /// From a binding unit's start to a pod's binding.
    pub binding_seconds: Histogram,
    pub bound: Counter,
    pub binding_failures: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            attempts: Family::default(),
            attempt_seconds: Family::new_with_constructor(latency_buckets),
            pending: Family::default(),
            preemption_attempts: Counter::default(),
            preemption_victims: Histogram::new(exponential_buckets(1.0, 2.0, 7)),
            requests: Family::default(),
            batch_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            binding_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            bound: Counter::default(),
            binding_failures: Counter::default(),
        };
        let r = &mut m.registry;
        r.register("scheduler_schedule_attempts", "Scheduling attempts by result.", m.attempts.clone());
        r.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "One scheduling cycle (a pod's, or a PodGroup's as one), by result.",
            m.attempt_seconds.clone(),
        );
        r.register("scheduler_pending_pods", "Queue entries waiting, by queue.", m.pending.clone());
        r.register("scheduler_preemption_attempts", "Preemption attempts.", m.preemption_attempts.clone());
        r.register("scheduler_preemption_victims", "Victims per preemption.", m.preemption_victims.clone());
        r.register("muster_api_requests", "API calls by verb, resource and code.", m.requests.clone());
        r.register("muster_schedule_batch_duration_seconds", "One batch of cycles.", m.batch_seconds.clone());
        r.register("muster_binding_duration_seconds", "Binding cycle, claims to binding.", m.binding_seconds.clone());
        r.register("muster_pods_bound", "Pods bound.", m.bound.clone());
        r.register("muster_binding_failures", "Pods whose binding cycle failed.", m.binding_failures.clone());
        m
    }

    /// `n` attempts of pods of `profile` (their `spec.schedulerName`) that ended in `result`.
    pub fn attempt(&self, result: &'static str, profile: &str, n: usize) {
        self.attempts.get_or_create(&AttemptLabels { result, profile: profile.into() }).inc_by(n as u64);
    }

    pub fn attempt_duration(&self, result: &'static str, profile: &str, seconds: f64) {
        self.attempt_seconds.get_or_create(&AttemptLabels { result, profile: profile.into() }).observe(seconds);
    }

    pub fn api_request(&self, verb: &str, resource: &str, code: u16) {
        let labels = RequestLabels { verb: verb.into(), resource: resource.into(), code: code.to_string() };
        self.requests.get_or_create(&labels).inc();
    }

    pub fn queue(&self, active: usize, backoff: usize, unschedulable: usize) {
        for (queue, n) in [("active", active), ("backoff", backoff), ("unschedulable", unschedulable)] {
            self.pending.get_or_create(&QueueLabels { queue }).set(n as i64);
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_names_and_labels() {
        let m = Metrics::new();
        m.attempt("scheduled", "muster", 3);
        m.queue(1, 2, 3);
        m.api_request("create", "pods/binding", 201);
        m.attempt_duration("unschedulable", "muster", 0.003);
        m.attempt("scheduled", "gpu-packer", 1);
        let text = m.encode();
        assert!(
            text.contains(
                r#"scheduler_scheduling_attempt_duration_seconds_count{result="unschedulable",profile="muster"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"scheduler_schedule_attempts_total{result="scheduled",profile="muster"} 3"#), "{text}");
        assert!(text.contains(r#"scheduler_schedule_attempts_total{result="scheduled",profile="gpu-packer"} 1"#));
        assert!(text.contains(r#"scheduler_pending_pods{queue="unschedulable"} 3"#), "{text}");
        assert!(text.contains(r#"muster_api_requests_total{verb="create",resource="pods/binding",code="201"} 1"#));
    }
}
