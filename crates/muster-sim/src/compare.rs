//! `muster sim --compare`: the same trace run under several scheduler configurations, reported
//! side by side — JSON (`{"runs": [{"name", "summary", "classes", "jobs"}, ...]}`, each run as
//! `-o json` writes one) and a text table of the summaries. The HTML page is
//! [`crate::html::render_comparison`].

use std::fmt::Write;

use serde::Serialize;

use crate::report::{Report, human_seconds};

#[derive(Serialize)]
struct Run<'r> {
    name: &'r str,
    #[serde(flatten)]
    report: &'r Report,
}

/// The runs as one JSON document, pretty-printed, with a final newline.
pub fn json(runs: &[(String, Report)]) -> String {
    let runs: Vec<Run<'_>> = runs.iter().map(|(name, report)| Run { name, report }).collect();
    let mut s = serde_json::to_string_pretty(&serde_json::json!({ "runs": runs })).expect("reports serialize");
    s.push('\n');
    s
}

/// The summary rows of a comparison: a label and each run's value.
pub fn rows(runs: &[(String, Report)]) -> Vec<(&'static str, Vec<String>)> {
    let each = |f: &dyn Fn(&Report) -> String| runs.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    let p = |x: Option<f64>| x.map_or_else(|| "-".into(), human_seconds);
    vec![
        ("jobs finished", each(&|r| r.summary.finished.to_string())),
        ("jobs running at the end", each(&|r| r.summary.running.to_string())),
        ("jobs pending at the end", each(&|r| r.summary.pending.to_string())),
        ("GPU utilization", each(&|r| format!("{:.1} %", r.summary.gpu_utilization * 100.0))),
        ("wait p50", each(&|r| p(r.summary.wait_seconds.p50))),
        ("wait p95", each(&|r| p(r.summary.wait_seconds.p95))),
        ("wait p99", each(&|r| p(r.summary.wait_seconds.p99))),
        ("gang wait p50", each(&|r| p(r.summary.gang_wait_seconds.p50))),
        ("gang wait p95", each(&|r| p(r.summary.gang_wait_seconds.p95))),
        ("free devices, mean", each(&|r| format!("{:.1}", r.summary.fragmentation.mean_free_gpus))),
        ("stranded devices, mean", each(&|r| format!("{:.1}", r.summary.fragmentation.mean_stranded_gpus))),
        ("preemptions", each(&|r| r.summary.preemptions.to_string())),
        ("evictions", each(&|r| r.summary.evictions.to_string())),
        ("GPU failures", each(&|r| r.summary.gpu_failures.to_string())),
        ("GPU-hours lost", each(&|r| format!("{:.1}", r.summary.gpu_hours_lost))),
        ("simulated", each(&|r| human_seconds(r.summary.simulated_seconds))),
    ]
}

/// The summaries side by side, one column per run.
pub fn text(runs: &[(String, Report)]) -> String {
    let rows = rows(runs);
    let label_w = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let widths: Vec<usize> = runs
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            rows.iter().map(|(_, v)| v[i].chars().count()).chain([name.chars().count()]).max().unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:label_w$}", "");
    for ((name, _), w) in runs.iter().zip(&widths) {
        let _ = write!(out, "   {name:>w$}");
    }
    out.push('\n');
    for (label, values) in &rows {
        let _ = write!(out, "{label:label_w$}");
        for (v, w) in values.iter().zip(&widths) {
            let _ = write!(out, "   {v:>w$}");
        }
        out.push('\n');
    }
    out
}
