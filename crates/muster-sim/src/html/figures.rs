//! The report's figures of fragmentation and losses, for one run and for a comparison: free and
//! stranded devices and the largest free block on one node over time (definitions in
//! [`crate::fragmentation`], repeated in the captions), preemptions and evictions and the
//! GPU-hours they lost over time, and gangs' wait until minCount per run.

use std::fmt::Write;

use super::{PALETTE, esc, frame, legend, overlay, steps};
use crate::report::{JobLine, Report, Sample};

/// Time in seconds, and one value of each sample.
fn series(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> Vec<(f64, f64)> {
    samples.iter().map(|x| (x.at as f64 / 1000.0, f(x))).collect()
}

fn highest(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(1.0, f64::max)
}

/// Closes a figure with a note under the plot.
fn close(out: &mut String, note: &str) {
    let _ = writeln!(out, "</svg><p class=\"note\">{}</p></figure>", esc(note));
}

/// What "stranded" means, for the captions.
fn stranded_note(shape: u64) -> String {
    format!(
        "Free devices: devices of node-local ResourceSlices that no claim holds. Stranded: the free devices of nodes \
         with fewer than {shape} free, a pod of the trace's dominant GPU request (the per-pod size that asks for the \
         most GPUs in all) cannot use them."
    )
}

fn hours(ms: u128) -> f64 {
    ms as f64 / 3_600_000.0
}

/// Free devices against stranded ones, and the largest free block on one node, over time; nothing
/// when the cluster has no node-local devices.
pub fn fragmentation(out: &mut String, report: &Report, samples: &[Sample], x_max: f64) {
    if report.inventory_devices == 0 || samples.is_empty() {
        return;
    }
    let shape = report.summary.fragmentation.gpus_per_pod;
    let free = series(samples, |x| x.free as f64);
    let stranded = series(samples, |x| x.stranded as f64);
    let y_max = highest(&free);
    frame(
        out,
        &format!("Fragmentation: free devices, and those stranded below {shape} per node"),
        x_max,
        y_max,
        "devices",
    );
    steps(out, &free, x_max, y_max, "#333");
    legend(out, 0, "free", "#333");
    steps(out, &stranded, x_max, y_max, PALETTE[1]);
    legend(out, 1, &format!("stranded (on nodes with < {shape} free)"), PALETTE[1]);
    close(out, &stranded_note(shape));
    let largest = series(samples, |x| x.largest as f64);
    let y_max = highest(&largest).max(shape as f64);
    frame(out, "Largest free block on one node", x_max, y_max, "devices");
    steps(out, &largest, x_max, y_max, PALETTE[0]);
    close(out, "The most free devices on one node: the largest pod that could still be placed, devices-wise.");
    if report.summary.fragmentation.racks.is_some() {
        let gang = series(samples, |x| x.rack_gang as f64);
        let y_max = highest(&gang);
        frame(out, &format!("Largest gang of {shape}-device pods placeable in one rack"), x_max, y_max, "pods");
        steps(out, &gang, x_max, y_max, PALETTE[2]);
        close(
            out,
            &format!(
                "Over racks, the most pods of {shape} devices one rack's free devices could hold (whole pods per node, \
                 summed over the rack's nodes): the largest gang a rack-wide topology constraint could still place."
            ),
        );
    }
}

/// Preemptions and evictions, and the GPU-hours they lost, cumulative over time.
pub fn losses(out: &mut String, report: &Report, samples: &[Sample], x_max: f64) {
    if samples.is_empty() {
        return;
    }
    let s = &report.summary;
    let preempted = series(samples, |x| x.preemptions as f64);
    let evicted = series(samples, |x| x.evictions as f64);
    let failed = series(samples, |x| x.failures as f64);
    let y_max = highest(&preempted).max(highest(&evicted)).max(highest(&failed));
    frame(out, "Preemptions and evictions, cumulative", x_max, y_max, "pods");
    steps(out, &preempted, x_max, y_max, PALETTE[1]);
    legend(out, 0, &format!("preempted ({})", s.preemptions), PALETTE[1]);
    steps(out, &evicted, x_max, y_max, PALETTE[4]);
    legend(out, 1, &format!("evicted ({})", s.evictions), PALETTE[4]);
    if s.gpu_failures > 0 {
        steps(out, &failed, x_max, y_max, PALETTE[2]);
        legend(out, 2, &format!("failed with their GPU ({})", s.gpu_failures), PALETTE[2]);
    }
    close(
        out,
        "Pods deleted to make room for higher-priority pods or gangs, pods evicted from drained nodes or by NoExecute device taints, and pods whose GPU failed (a fatal XID).",
    );
    let lost = series(samples, |x| hours(x.lost_device_ms));
    let y_max = highest(&lost);
    frame(out, &format!("GPU-hours lost, cumulative ({:.1} in all)", s.gpu_hours_lost), x_max, y_max, "GPU-hours");
    steps(out, &lost, x_max, y_max, PALETTE[3]);
    close(out, "The run time so far times the devices held, of every preempted or evicted pod: work thrown away.");
}

/// Each inference endpoint's serving replicas over time, with its cold starts; nothing without
/// endpoints.
pub fn endpoints(out: &mut String, report: &Report, samples: &[Sample], x_max: f64) {
    if report.endpoints.is_empty() || samples.is_empty() {
        return;
    }
    let lines: Vec<Vec<(f64, f64)>> = (0..report.endpoints.len())
        .map(|e| series(samples, |x| x.serving.get(e).copied().unwrap_or(0) as f64))
        .collect();
    let y_max = lines.iter().map(|l| highest(l)).fold(1.0, f64::max);
    frame(out, "Inference replicas serving", x_max, y_max, "replicas");
    for (e, (line, ep)) in lines.iter().zip(&report.endpoints).enumerate() {
        let color = PALETTE[e % PALETTE.len()];
        steps(out, line, x_max, y_max, color);
        let p95 = ep.cold_start_seconds.p95.map_or_else(|| "-".into(), |s| format!("{s:.0} s"));
        legend(out, e, &format!("{} ({} cold starts, p95 {p95})", ep.name, ep.cold_starts), color);
    }
    close(
        out,
        "Replicas done with their cold start, per endpoint, as its HorizontalPodAutoscaler scales it. A cold start \
         runs from demand with no replica serving to the first replica serving: the HPA's sync, the scheduling wait, \
         then image pull and model load.",
    );
}

/// The CDF of the waits of the jobs `which` keeps.
pub fn wait_cdf(report: &Report, which: fn(&JobLine) -> bool) -> Vec<(f64, f64)> {
    let mut waits: Vec<f64> = report.jobs.iter().filter(|j| which(j)).filter_map(|j| j.wait_seconds).collect();
    waits.sort_by(f64::total_cmp);
    let n = waits.len().max(1) as f64;
    let mut points = vec![(0.0, 0.0)];
    points.extend(waits.iter().enumerate().map(|(k, w)| (*w, (k + 1) as f64 / n)));
    points
}

/// A comparison's gang waits, stranded devices, preemptions and evictions, and GPU-hours lost,
/// one line per run.
pub fn comparison(out: &mut String, runs: &[(String, Report)], thinned: &[Vec<Sample>], x_max: f64) {
    let gangs: Vec<Vec<(f64, f64)>> = runs.iter().map(|(_, r)| wait_cdf(r, |j| j.gang)).collect();
    if gangs.iter().any(|c| c.len() > 1) {
        let wait_max = gangs.iter().flat_map(|c| c.last().map(|p| p.0)).fold(1.0, f64::max);
        let title = "Gangs: wait until minCount members were running, CDF";
        overlay(out, title, "share of started gangs", runs, &gangs, wait_max, Some(1.0));
    }
    let each = |f: &dyn Fn(&Sample) -> f64| -> Vec<Vec<(f64, f64)>> {
        thinned.iter().map(|samples| series(samples, f)).collect()
    };
    if runs.iter().all(|(_, r)| r.inventory_devices > 0) && thinned.iter().all(|s| !s.is_empty()) {
        let shape = runs.iter().map(|(_, r)| r.summary.fragmentation.gpus_per_pod).max().unwrap_or(1);
        let title = format!("Stranded devices: free on nodes with fewer than {shape} free");
        overlay(out, &title, "devices", runs, &each(&|x| x.stranded as f64), x_max, None);
        let title = "Largest free block on one node";
        overlay(out, title, "devices", runs, &each(&|x| x.largest as f64), x_max, None);
    }
    if thinned.iter().all(|s| !s.is_empty()) {
        let lost = |x: &Sample| (x.preemptions + x.evictions) as f64;
        let title = "Pods preempted or evicted, cumulative";
        overlay(out, title, "pods", runs, &each(&lost), x_max, None);
        let title = "GPU-hours lost by preempted and evicted pods, cumulative";
        overlay(out, title, "GPU-hours", runs, &each(&|x| hours(x.lost_device_ms)), x_max, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stranded_caption_names_the_shape() {
        assert!(stranded_note(4).contains("fewer than 4 free"));
    }

    #[test]
    fn a_gang_cdf_counts_gangs_only() {
        let job = |name: &str, wait: Option<f64>, gang: bool| JobLine {
            name: name.into(),
            namespace: "default".into(),
            class: "default".into(),
            arrival: 0.0,
            start: wait,
            end: None,
            wait_seconds: wait,
            state: if wait.is_some() { "running" } else { "pending" },
            reason: None,
            restarts: 0,
            nodes: Vec::new(),
            gang,
        };
        let mut report = crate::report::Report::build(crate::report::Totals {
            jobs: Vec::new(),
            span: 0,
            seed: 0,
            devices: 0,
            allocated_ms: 0,
            preemptions: 0,
            evictions: 0,
            failures: 0,
            lost_device_ms: 0,
            events: 0,
            steps: 0,
            samples: Vec::new(),
            class_names: Vec::new(),
            shape: 1,
            free_ms: 0,
            stranded_ms: 0,
            out_of_service_ms: 0,
            out_of_service_now: 0,
            unschedulable_by: Default::default(),
            peak_stranded: 0,
            free_now: 0,
            stranded_now: 0,
            inventory_devices: 0,
            racks: 0,
            rack_gang_ms: 0,
            rack_gang_now: 0,
            endpoints: Vec::new(),
        });
        report.jobs = vec![job("a", Some(5.0), true), job("b", Some(1.0), false), job("c", None, true)];
        assert_eq!(wait_cdf(&report, |j| j.gang), vec![(0.0, 0.0), (5.0, 1.0)]);
        assert_eq!(wait_cdf(&report, |_| true), vec![(0.0, 0.0), (1.0, 0.5), (5.0, 1.0)]);
    }
}
