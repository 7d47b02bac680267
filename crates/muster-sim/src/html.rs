//! The HTML report (`-o html`): one self-contained page, plots drawn here as inline SVG (no
//! script, no network): devices allocated over time (in all and per class), pods pending over
//! time, the wait-time CDF per class, gangs' wait until minCount per class, free and stranded
//! devices and the largest free block on one node over time, preemptions and evictions and the
//! GPU-hours they lost over time, and the worst waits. Deterministic: the same report gives the
//! same bytes.

mod figures;

use std::fmt::Write;

use crate::report::{JobLine, Report, Sample, human_seconds};

const W: f64 = 720.0;
const H: f64 = 220.0;
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 28.0;
const TOP: f64 = 12.0;
const RIGHT: f64 = 16.0;
const PALETTE: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// At most `n` samples, one per equal slice of time (the last of each slice), so that long runs
/// stay small.
fn thin(samples: &[Sample], n: usize) -> Vec<Sample> {
    if samples.len() <= n {
        return samples.to_vec();
    }
    let end = samples.last().map_or(1, |s| s.at.max(1));
    let mut out: Vec<Sample> = Vec::with_capacity(n + 1);
    let mut bucket = u64::MAX;
    for s in samples {
        let b = s.at * n as u64 / (end + 1);
        if b == bucket {
            *out.last_mut().expect("a bucket has a sample") = s.clone();
        } else {
            out.push(s.clone());
            bucket = b;
        }
    }
    out
}

/// A figure with its axes: time (or seconds waited) along x, `y_label` up to `y_max` along y.
fn frame(out: &mut String, title: &str, x_max: f64, y_max: f64, y_label: &str) {
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let _ = write!(
        out,
        "<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"{}\">",
        esc(title),
        esc(title)
    );
    let _ =
        write!(out, "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#888\"/>");
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let y = TOP + ph * (1.0 - f);
        let x = LEFT + pw * f;
        let _ = write!(
            out,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">{}</text>",
            LEFT + pw,
            LEFT - 4.0,
            y + 3.0,
            tick(y_max * f)
        );
        let _ = write!(
            out,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{}</text>",
            H - BOTTOM + 14.0,
            human_seconds(x_max * f)
        );
    }
    let _ = write!(
        out,
        "<text x=\"12\" y=\"{:.1}\" font-size=\"10\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        esc(y_label)
    );
}

/// A legend line, top right, the `i`-th.
fn legend(out: &mut String, i: usize, text: &str, color: &str) {
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"{color}\" text-anchor=\"end\">{}</text>",
        W - RIGHT - 6.0,
        TOP + 14.0 + 13.0 * i as f64,
        esc(text)
    );
}

fn tick(v: f64) -> String {
    if v.fract() == 0.0 || v >= 10.0 { format!("{v:.0}") } else { format!("{v:.2}") }
}

fn xy(x: f64, y: f64, x_max: f64, y_max: f64) -> (f64, f64) {
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    (LEFT + pw * x / x_max.max(1e-9), TOP + ph * (1.0 - y / y_max.max(1e-9)))
}

/// A step line through (x, y) points.
fn steps(out: &mut String, points: &[(f64, f64)], x_max: f64, y_max: f64, color: &str) {
    let mut d = String::new();
    let mut last_y = None;
    for &(x, y) in points {
        let (px, py) = xy(x, y, x_max, y_max);
        match last_y {
            None => {
                let _ = write!(d, "M{px:.1},{py:.1}");
            }
            Some(ly) => {
                let _ = write!(d, " L{px:.1},{ly:.1} L{px:.1},{py:.1}");
            }
        }
        last_y = Some(py);
    }
    if let Some(ly) = last_y {
        let (px, _) = xy(x_max, 0.0, x_max, y_max);
        let _ = write!(d, " L{px:.1},{ly:.1}");
    }
    let _ = write!(out, "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"/>");
}

fn time_plot(out: &mut String, title: &str, y_label: &str, points: &[(f64, f64)], x_max: f64, ceiling: Option<f64>) {
    let y_max = ceiling.unwrap_or_else(|| points.iter().map(|p| p.1).fold(1.0, f64::max));
    frame(out, title, x_max, y_max, y_label);
    steps(out, points, x_max, y_max, PALETTE[0]);
    out.push_str("</svg></figure>\n");
}

/// The wait CDF per class of the jobs `which` keeps, titled `title`; nothing when no such job
/// started.
fn cdf_plot(out: &mut String, report: &Report, title: &str, which: fn(&JobLine) -> bool) {
    let mut per_class: Vec<(&str, Vec<f64>)> = Vec::new();
    for class in report.classes.keys() {
        let mut waits: Vec<f64> =
            report.jobs.iter().filter(|j| &j.class == class && which(j)).filter_map(|j| j.wait_seconds).collect();
        waits.sort_by(f64::total_cmp);
        per_class.push((class, waits));
    }
    if per_class.iter().all(|(_, w)| w.is_empty()) {
        return;
    }
    let x_max = per_class.iter().filter_map(|(_, w)| w.last().copied()).fold(1.0, f64::max);
    frame(out, title, x_max, 1.0, "share of started jobs");
    for (i, (class, waits)) in per_class.iter().enumerate() {
        if waits.is_empty() {
            continue;
        }
        let n = waits.len() as f64;
        let mut points = vec![(0.0, 0.0)];
        for (k, w) in waits.iter().enumerate() {
            points.push((*w, (k + 1) as f64 / n));
        }
        let color = PALETTE[i % PALETTE.len()];
        steps(out, &points, x_max, 1.0, color);
        legend(out, i, &format!("{class} ({} jobs)", waits.len()), color);
    }
    out.push_str("</svg></figure>\n");
}

fn worst(out: &mut String, report: &Report, n: usize) {
    let mut jobs: Vec<&JobLine> = report.jobs.iter().collect();
    let span = report.summary.simulated_seconds;
    // Pending jobs have waited until the end; they come first among equals.
    let waited = |j: &JobLine| j.wait_seconds.unwrap_or(span - j.arrival);
    jobs.sort_by(|a, b| waited(b).total_cmp(&waited(a)).then_with(|| a.name.cmp(&b.name)));
    out.push_str("<h2>Worst waits</h2>\n<table><tr><th>job</th><th>class</th><th>arrival</th><th>waited</th><th>state</th><th>why</th></tr>\n");
    for j in jobs.into_iter().take(n) {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&j.name),
            esc(&j.class),
            human_seconds(j.arrival),
            human_seconds(waited(j)),
            j.state,
            esc(j.reason.as_deref().unwrap_or(if j.restarts > 0 { "restarted after losing pods" } else { "" }))
        );
    }
    out.push_str("</table>\n");
}

/// The page's head and title.
fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>body{{font-family:system-ui,sans-serif;margin:24px;max-width:780px}}figure{{margin:16px 0}}figcaption{{font-weight:600}}table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:left}}.k{{color:#555}}.note{{color:#555;font-size:12px;margin:2px 0 0}}</style></head><body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    )
}

/// The page.
pub fn render(report: &Report, title: &str) -> String {
    let s = &report.summary;
    let mut out = head(title);
    let p = |x: Option<f64>| x.map_or_else(|| "-".into(), human_seconds);
    let _ = writeln!(
        out,
        "<p><span class=\"k\">simulated</span> {} &middot; <span class=\"k\">jobs</span> {} ({} finished, {} running, {} pending) &middot; <span class=\"k\">GPU utilization</span> {:.1} % &middot; <span class=\"k\">wait</span> p50 {}, p95 {}, p99 {} &middot; <span class=\"k\">preemptions</span> {} &middot; <span class=\"k\">evictions</span> {} &middot; <span class=\"k\">GPU-hours lost</span> {:.1}</p>",
        human_seconds(s.simulated_seconds),
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
        s.gpu_hours_lost
    );
    for note in &report.notes {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(note));
    }
    let samples = thin(&report.samples, 1500);
    let x_max = s.simulated_seconds.max(1.0);
    let alloc: Vec<(f64, f64)> = samples.iter().map(|x| (x.at as f64 / 1000.0, x.allocated as f64)).collect();
    let pending: Vec<(f64, f64)> = samples.iter().map(|x| (x.at as f64 / 1000.0, x.pending_pods as f64)).collect();
    let ceiling = report.devices.max(1) as f64;
    frame(
        &mut out,
        &format!("Devices allocated (of {}), in all and per class", report.devices),
        x_max,
        ceiling,
        "devices",
    );
    steps(&mut out, &alloc, x_max, ceiling, "#333");
    for (i, class) in report.class_names.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<(f64, f64)> =
            samples.iter().map(|x| (x.at as f64 / 1000.0, x.per_class.get(i).copied().unwrap_or(0) as f64)).collect();
        steps(&mut out, &points, x_max, ceiling, color);
        legend(&mut out, i, class, color);
    }
    out.push_str("</svg></figure>\n");
    time_plot(&mut out, "Pods pending", "pods", &pending, x_max, None);
    cdf_plot(&mut out, report, "Wait until running, CDF per class", |_| true);
    cdf_plot(&mut out, report, "Gangs: wait until minCount members were running, CDF per class", |j| j.gang);
    figures::fragmentation(&mut out, report, &samples, x_max);
    figures::losses(&mut out, report, &samples, x_max);
    figures::endpoints(&mut out, report, &samples, x_max);
    worst(&mut out, report, 20);
    out.push_str("</body></html>\n");
    out
}

/// The page of a comparison (`muster sim --compare`): the summaries side by side, then devices
/// allocated, pods pending, the wait CDF, gangs' wait CDF, stranded devices, the largest free
/// block, pods preempted or evicted and GPU-hours lost, with one line per run.
pub fn render_comparison(runs: &[(String, Report)], title: &str) -> String {
    let mut out = head(title);
    out.push_str("<table><tr><th></th>");
    for (i, (name, _)) in runs.iter().enumerate() {
        let _ = write!(out, "<th style=\"color:{}\">{}</th>", PALETTE[i % PALETTE.len()], esc(name));
    }
    out.push_str("</tr>\n");
    for (label, values) in crate::compare::rows(runs) {
        let _ = write!(out, "<tr><td>{}</td>", esc(label));
        for v in values {
            let _ = write!(out, "<td>{}</td>", esc(&v));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    let x_max = runs.iter().map(|(_, r)| r.summary.simulated_seconds).fold(1.0, f64::max);
    let devices = runs.iter().map(|(_, r)| r.devices).max().unwrap_or(0).max(1) as f64;
    let thinned: Vec<Vec<Sample>> = runs.iter().map(|(_, r)| thin(&r.samples, 1500)).collect();
    let series = |f: fn(&Sample) -> f64| -> Vec<Vec<(f64, f64)>> {
        thinned.iter().map(|samples| samples.iter().map(|x| (x.at as f64 / 1000.0, f(x))).collect()).collect()
    };
    overlay(&mut out, "Devices allocated", "devices", runs, &series(|x| x.allocated as f64), x_max, Some(devices));
    overlay(&mut out, "Pods pending", "pods", runs, &series(|x| x.pending_pods as f64), x_max, None);
    let cdfs: Vec<Vec<(f64, f64)>> = runs.iter().map(|(_, r)| figures::wait_cdf(r, |_| true)).collect();
    let wait_max = cdfs.iter().flat_map(|c| c.last().map(|p| p.0)).fold(1.0, f64::max);
    overlay(&mut out, "Wait until running, CDF of all jobs", "share of started jobs", runs, &cdfs, wait_max, Some(1.0));
    figures::comparison(&mut out, runs, &thinned, x_max);
    out.push_str("</body></html>\n");
    out
}

/// One figure with a line per run, in the runs' colours.
fn overlay(
    out: &mut String,
    title: &str,
    y_label: &str,
    runs: &[(String, Report)],
    lines: &[Vec<(f64, f64)>],
    x_max: f64,
    ceiling: Option<f64>,
) {
    let y_max = ceiling.unwrap_or_else(|| lines.iter().flatten().map(|p| p.1).fold(1.0, f64::max));
    frame(out, title, x_max, y_max, y_label);
    for (i, ((name, _), points)) in runs.iter().zip(lines).enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        steps(out, points, x_max, y_max, color);
        legend(out, i, name, color);
    }
    out.push_str("</svg></figure>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_one_sample_per_slice_and_the_last() {
        let samples: Vec<Sample> =
            (0..10_000).map(|i| Sample { at: i * 10, allocated: i, ..Sample::default() }).collect();
        let thinned = thin(&samples, 100);
        assert!(thinned.len() <= 101, "{}", thinned.len());
        assert_eq!(thinned.last(), samples.last());
        assert_eq!(thin(&samples[..5], 100).len(), 5);
    }
}
