//! What a simulation reports: a summary (the stable `-o json` contract), per-class wait
//! percentiles, and one line per job; `text` renders it for people.
//!
//! Waits are measured from a job's arrival to the time all its pods were first running
//! (`start`); percentiles (nearest rank) are over the jobs that started. A gang's wait until
//! minCount is the same wait (the trace's gangs have minCount = pods), over gangs only.
//! Fragmentation figures are means over the simulated span of the counts
//! [`crate::fragmentation`] defines. The utilization is the device time allocated (from the
//! moment the world writes a claim's allocation to the moment the claim is released) over the
//! devices the cluster publishes times the simulated span.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::trace::Millis;

pub mod endpoints;
pub use endpoints::{EndpointLine, EndpointOutcome};

/// One job at the end.
#[derive(Clone, Debug, PartialEq)]
pub struct JobOutcome {
    pub name: String,
    pub namespace: String,
    pub class: String,
    pub arrival: Millis,
    pub start: Option<Millis>,
    pub end: Option<Millis>,
    /// `finished`, `running` or `pending`.
    pub state: &'static str,
    /// Why a pending job is pending (the scheduler's last message about one of its pods).
    pub reason: Option<String>,
    pub restarts: u32,
    /// The nodes its last attempt's pods were placed on, sorted.
    pub nodes: Vec<String>,
    /// A gang (a PodGroup with minCount = pods).
    pub gang: bool,
}

/// Allocated devices and pending pods after one step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub at: Millis,
    pub allocated: u64,
    pub pending_pods: u64,
    /// Devices held by the trace's jobs and endpoints' replicas, per class (in
    /// [`Report::class_names`] order).
    pub per_class: Vec<u64>,
    /// Free devices, the stranded ones, and the most free on one node
    /// ([`crate::fragmentation`]).
    pub free: u64,
    pub stranded: u64,
    pub largest: u64,
    /// The largest gang of the shape placeable in one rack (0 without racks).
    pub rack_gang: u64,
    /// Preemptions and evictions so far, and the device time they lost so far.
    pub preemptions: u64,
    pub evictions: u64,
    /// Pods that failed with a GPU they held, so far.
    pub failures: u64,
    pub lost_device_ms: u128,
    /// Serving replicas per endpoint (in trace order).
    pub serving: Vec<u32>,
}

/// What the world counted.
pub struct Totals {
    pub jobs: Vec<JobOutcome>,
    pub span: Millis,
    pub seed: u64,
    pub devices: u64,
    pub allocated_ms: u128,
    pub preemptions: u64,
    pub evictions: u64,
    pub failures: u64,
    pub lost_device_ms: u128,
    pub events: u64,
    pub steps: u64,
    pub samples: Vec<Sample>,
    pub class_names: Vec<String>,
    /// The trace's dominant GPU request per pod, and free and stranded devices integrated over
    /// time.
    pub shape: u64,
    pub free_ms: u128,
    pub stranded_ms: u128,
    /// Devices out of service (tainted, held by no claim) integrated over time, and now.
    pub out_of_service_ms: u128,
    pub out_of_service_now: u64,
    pub peak_stranded: u64,
    /// Free devices now (a zero-length run's means).
    pub free_now: u64,
    pub stranded_now: u64,
    /// Racks, the largest gang placeable in one rack integrated over time, and now.
    pub racks: usize,
    pub rack_gang_ms: u128,
    pub rack_gang_now: u64,
    /// Devices of the nodes the fragmentation counts cover.
    pub inventory_devices: u64,
    /// Failed pod attempts by what failed them ([`Summary::unschedulable_attempts`]).
    pub unschedulable_by: BTreeMap<&'static str, u64>,
    pub endpoints: Vec<EndpointOutcome>,
}

/// p50, p95 and p99, in seconds; null without data.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values` (milliseconds), in seconds.
    pub fn of(values: &mut [Millis]) -> Percentiles {
        values.sort_unstable();
        let at = |p: usize| {
            if values.is_empty() {
                return None;
            }
            let rank = (p * values.len()).div_ceil(100).max(1);
            Some(seconds(values[rank - 1]))
        };
        Percentiles { p50: at(50), p95: at(95), p99: at(99) }
    }
}

fn seconds(ms: Millis) -> f64 {
    ms as f64 / 1000.0
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub jobs: usize,
    pub finished: usize,
    pub running: usize,
    pub pending: usize,
    /// Allocated device time over available device time, 0..1 (six decimals).
    pub gpu_utilization: f64,
    pub wait_seconds: Percentiles,
    /// Gangs only: arrival until minCount members were running.
    pub gang_wait_seconds: Percentiles,
    /// Pods deleted to make room for higher-priority pods or gangs.
    pub preemptions: u64,
    /// Pods evicted by node drains and NoExecute device taints.
    pub evictions: u64,
    /// Pods that failed with a GPU they held (a fatal XID).
    pub gpu_failures: u64,
    /// Device-hours of work lost by preempted, evicted or failed pods (their run time so far).
    pub gpu_hours_lost: f64,
    /// Jobs' restarts after losing pods.
    pub restarts: u64,
    /// Inference endpoints' cold starts (demand with no replica serving, until one serves): how
    /// many, and how long, in seconds.
    pub cold_starts: usize,
    pub cold_start_seconds: Percentiles,
    pub simulated_seconds: f64,
    pub seed: u64,
    /// Events handled (arrivals, finishes, cluster events) and scheduling steps.
    pub events: u64,
    pub steps: u64,
    pub fragmentation: Fragmentation,
    /// Failed scheduling attempts of pods, by what failed them: the Filter plugin that rejected
    /// nodes (each plugin once per attempt), `PreFilter` (the pod failed before any node was
    /// tried), `PodGroup` (its group could not be placed), or a plugin's error.
    pub unschedulable_attempts: BTreeMap<String, u64>,
}

/// Free devices that a pod of the trace's dominant GPU request cannot use
/// ([`crate::fragmentation`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fragmentation {
    /// The trace's dominant GPU request per pod (the size that asks for the most GPUs in all).
    pub gpus_per_pod: u64,
    /// Over the simulated span (three decimals): free devices, and those on nodes with fewer
    /// free than `gpusPerPod`.
    pub mean_free_gpus: f64,
    pub mean_stranded_gpus: f64,
    /// Over the simulated span: devices out of service (a `NoSchedule` or `NoExecute` taint, held
    /// by no claim), which the free devices leave out.
    pub mean_out_of_service_gpus: f64,
    /// The most stranded at the end of a step.
    pub peak_stranded_gpus: u64,
    /// With racks (`--rack-label`): how many, and over the simulated span the largest gang of
    /// `gpusPerPod` pods placeable in one rack (three decimals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub racks: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_largest_rack_gang_pods: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassSummary {
    pub jobs: usize,
    pub finished: usize,
    pub running: usize,
    pub pending: usize,
    pub wait_seconds: Percentiles,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobLine {
    pub name: String,
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
    pub class: String,
    pub arrival: f64,
    pub start: Option<f64>,
    pub end: Option<f64>,
    pub wait_seconds: Option<f64>,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub restarts: u32,
    pub nodes: Vec<String>,
    /// For the gang-wait plots; not in the JSON.
    #[serde(skip)]
    pub gang: bool,
}

fn is_default(ns: &str) -> bool {
    ns == "default"
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The report: `summary`, `classes`, `jobs` (in trace order), as `-o json` writes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub summary: Summary,
    pub classes: BTreeMap<String, ClassSummary>,
    pub jobs: Vec<JobLine>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointLine>,
    /// What the caller says about the input (rows of an openb trace left out, say).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Per step, for plots; not in the JSON.
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// Devices the cluster publishes (the plots' ceiling).
    #[serde(skip)]
    pub devices: u64,
    /// The classes of [`Sample::per_class`], sorted.
    #[serde(skip)]
    pub class_names: Vec<String>,
    /// Devices of the nodes the fragmentation counts cover (0: no figure).
    #[serde(skip)]
    pub inventory_devices: u64,
}

impl Report {
    pub fn build(t: Totals) -> Report {
        let count = |jobs: &[&JobOutcome], state: &str| jobs.iter().filter(|j| j.state == state).count();
        let waits = |jobs: &[&JobOutcome]| {
            let mut w: Vec<Millis> = jobs.iter().filter_map(|j| j.start.map(|s| s - j.arrival)).collect();
            Percentiles::of(&mut w)
        };
        let gangs: Vec<&JobOutcome> = t.jobs.iter().filter(|j| j.gang).collect();
        let all: Vec<&JobOutcome> = t.jobs.iter().collect();
        let available = u128::from(t.devices) * u128::from(t.span);
        let utilization =
            if available == 0 { 0.0 } else { (t.allocated_ms as f64 / available as f64 * 1e6).round() / 1e6 };
        let summary = Summary {
            jobs: all.len(),
            finished: count(&all, "finished"),
            running: count(&all, "running"),
            pending: count(&all, "pending"),
            gpu_utilization: utilization,
            wait_seconds: waits(&all),
            gang_wait_seconds: waits(&gangs),
            preemptions: t.preemptions,
            evictions: t.evictions,
            gpu_failures: t.failures,
            gpu_hours_lost: (t.lost_device_ms as f64 / 3_600_000.0 * 1e3).round() / 1e3,
            restarts: t.jobs.iter().map(|j| u64::from(j.restarts)).sum(),
            cold_starts: endpoints::cold_starts(&t.endpoints).0,
            cold_start_seconds: endpoints::cold_starts(&t.endpoints).1,
            simulated_seconds: seconds(t.span),
            seed: t.seed,
            events: t.events,
            steps: t.steps,
            fragmentation: fragmentation(&t),
            unschedulable_attempts: t.unschedulable_by.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        };
        let mut by_class: BTreeMap<String, Vec<&JobOutcome>> = BTreeMap::new();
        for j in &t.jobs {
            by_class.entry(j.class.clone()).or_default().push(j);
        }
        let classes = by_class
            .into_iter()
            .map(|(class, jobs)| {
                let s = ClassSummary {
                    jobs: jobs.len(),
                    finished: count(&jobs, "finished"),
                    running: count(&jobs, "running"),
                    pending: count(&jobs, "pending"),
                    wait_seconds: waits(&jobs),
                };
                (class, s)
            })
            .collect();
        let jobs = t
            .jobs
            .into_iter()
            .map(|j| JobLine {
                wait_seconds: j.start.map(|s| seconds(s - j.arrival)),
                arrival: seconds(j.arrival),
                start: j.start.map(seconds),
                end: j.end.map(seconds),
                name: j.name,
                namespace: j.namespace,
                class: j.class,
                state: j.state,
                reason: j.reason,
                restarts: j.restarts,
                nodes: j.nodes,
                gang: j.gang,
            })
            .collect();
        Report {
            summary,
            classes,
            jobs,
            endpoints: t.endpoints.into_iter().map(EndpointLine::of).collect(),
            notes: Vec::new(),
            samples: t.samples,
            devices: t.devices,
            class_names: t.class_names,
            inventory_devices: t.inventory_devices,
        }
    }

    /// The JSON document (`-o json`), pretty-printed, with a final newline.
    pub fn json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a report serializes");
        s.push('\n');
        s
    }

    /// A short summary for people (`-o text`).
    pub fn text(&self) -> String {
        let s = &self.summary;
        let p = |x: Option<f64>| x.map_or_else(|| "-".into(), human_seconds);
        let mut out = format!(
            "simulated {} ({} events, {} steps)\njobs: {} ({} finished, {} running, {} pending)\nGPU utilization: {:.1} %\nwait: p50 {}, p95 {}, p99 {}\npreemptions: {}, evictions: {}, GPU failures: {}, restarts: {}, GPU-hours lost: {:.1}\n",
            human_seconds(s.simulated_seconds),
            s.events,
            s.steps,
            s.jobs,
            s.finished,
            s.running,
            s.pending,
            s.gpu_utilization * 100.0,
            p(s.wait_seconds.p50),
            p(s.wait_seconds.p95),
            p(s.wait_seconds.p99),
            s.preemptions,
            s.evictions,
            s.gpu_failures,
            s.restarts,
            s.gpu_hours_lost,
        );
        if !s.unschedulable_attempts.is_empty() {
            let mut by: Vec<(&String, &u64)> = s.unschedulable_attempts.iter().collect();
            by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let list: Vec<String> = by.iter().map(|(what, n)| format!("{what} {n}")).collect();
            out.push_str(&format!("unschedulable attempts: {}\n", list.join(", ")));
        }
        if !self.endpoints.is_empty() {
            let c = &s.cold_start_seconds;
            out.push_str(&format!(
                "endpoints: {}, cold starts: {} (p50 {}, p95 {}, p99 {})\n",
                self.endpoints.len(),
                s.cold_starts,
                p(c.p50),
                p(c.p95),
                p(c.p99)
            ));
        }
        if self.jobs.iter().any(|j| j.gang) {
            let g = &s.gang_wait_seconds;
            out.push_str(&format!("gang wait until minCount: p50 {}, p95 {}, p99 {}\n", p(g.p50), p(g.p95), p(g.p99)));
        }
        if self.inventory_devices > 0 {
            let f = &s.fragmentation;
            out.push_str(&format!(
                "free devices: {:.1} on average, {:.1} of them stranded (on nodes with fewer than {} free), peak {}\n",
                f.mean_free_gpus, f.mean_stranded_gpus, f.gpus_per_pod, f.peak_stranded_gpus
            ));
            if f.mean_out_of_service_gpus > 0.0 {
                out.push_str(&format!(
                    "out of service (tainted, not counted free): {:.1} devices on average\n",
                    f.mean_out_of_service_gpus
                ));
            }
            if let (Some(racks), Some(gang)) = (f.racks, f.mean_largest_rack_gang_pods) {
                out.push_str(&format!(
                    "largest gang of {}-device pods placeable in one rack: {gang:.1} pods on average ({racks} racks)\n",
                    f.gpus_per_pod
                ));
            }
        }
        if self.classes.len() > 1 {
            out.push_str("per class:\n");
            for (class, c) in &self.classes {
                out.push_str(&format!(
                    "  {class}: {} job{}, {} pending; wait p50 {}, p95 {}, p99 {}\n",
                    c.jobs,
                    if c.jobs == 1 { "" } else { "s" },
                    c.pending,
                    p(c.wait_seconds.p50),
                    p(c.wait_seconds.p95),
                    p(c.wait_seconds.p99)
                ));
            }
        }
        let pending: Vec<&JobLine> = self.jobs.iter().filter(|j| j.state == "pending").take(5).collect();
        if !pending.is_empty() {
            out.push_str("pending:\n");
            for j in pending {
                out.push_str(&format!("  {}: {}\n", j.name, j.reason.as_deref().unwrap_or("")));
            }
        }
        for note in &self.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        out
    }
}

/// The means of free and stranded devices over the span.
fn fragmentation(t: &Totals) -> Fragmentation {
    let mean = |integral: u128, now: u64| {
        let m = if t.span == 0 { now as f64 } else { integral as f64 / t.span as f64 };
        (m * 1e3).round() / 1e3
    };
    Fragmentation {
        gpus_per_pod: t.shape,
        mean_free_gpus: mean(t.free_ms, t.free_now),
        mean_stranded_gpus: mean(t.stranded_ms, t.stranded_now),
        mean_out_of_service_gpus: mean(t.out_of_service_ms, t.out_of_service_now),
        peak_stranded_gpus: t.peak_stranded,
        racks: (t.racks > 0).then_some(t.racks),
        mean_largest_rack_gang_pods: (t.racks > 0).then(|| mean(t.rack_gang_ms, t.rack_gang_now)),
    }
}

/// `90s`, `15m`, `2h05m`, `3d04h`.
pub fn human_seconds(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<Millis> = (1..=100).map(|i| i * 1000).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!((p.p50, p.p95, p.p99), (Some(50.0), Some(95.0), Some(99.0)));
        let p = Percentiles::of(&mut [7000]);
        assert_eq!((p.p50, p.p99), (Some(7.0), Some(7.0)));
        assert_eq!(Percentiles::of(&mut []).p50, None);
    }

    #[test]
    fn seconds_read_as_people_write_them() {
        assert_eq!(human_seconds(59.4), "59s");
        assert_eq!(human_seconds(90.0), "1m30s");
        assert_eq!(human_seconds(7500.0), "2h05m");
        assert_eq!(human_seconds(273_600.0), "3d04h");
    }
}
