//! The progress line of a long `muster sim` on a terminal: after the first second of wall time,
//! at most five times a second, `simulated 1d04h of 7d00h (17 %), 48,210 events` on stderr,
//! rewritten in place and cleared at the end; configurations compared side by side (run at
//! once) share the line, each with its label. Nothing when stderr is not a terminal (CI logs,
//! pipes), and nothing the simulation reads: the wall clock only paces the line.

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use muster_sim::report::human_seconds;
use muster_sim::trace::{Millis, Trace};

/// See the module documentation. Shared by the runs of a comparison (each updates its own part).
pub struct Board {
    horizon: Millis,
    started: Instant,
    enabled: bool,
    state: Mutex<State>,
}

struct State {
    /// Each run's label (empty for a run alone), simulated time and events handled.
    runs: Vec<(String, Millis, u64)>,
    last: Option<Instant>,
}

impl Board {
    /// A progress line for runs of `trace` (to `until`, else to its last arrival or event), one
    /// per label (an empty label for a run alone).
    pub fn new(trace: &Trace, until: Option<Millis>, labels: Vec<String>) -> Board {
        Board {
            horizon: until.unwrap_or_else(|| horizon(trace)),
            started: Instant::now(),
            enabled: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            state: Mutex::new(State { runs: labels.into_iter().map(|l| (l, 0, 0)).collect(), last: None }),
        }
    }

    /// Run `run` is at `now`, having handled `events`.
    pub fn update(&self, run: usize, now: Millis, events: u64) {
        if !self.enabled || self.started.elapsed() < Duration::from_secs(1) {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = state.runs.get_mut(run) {
            (r.1, r.2) = (now, events);
        }
        if state.last.is_some_and(|l| l.elapsed() < Duration::from_millis(200)) {
            return;
        }
        state.last = Some(Instant::now());
        let text = match state.runs.as_slice() {
            [(label, now, events)] => line(label, *now, self.horizon, *events),
            runs => lines(runs, self.horizon),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[K{text}");
        let _ = err.flush();
    }

    /// Clears the line, if one was shown.
    pub fn finish(&self) {
        if self.state.lock().unwrap_or_else(|e| e.into_inner()).last.is_some() {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
        }
    }
}

/// The last time anything of the trace is due: an arrival, a cluster event, a load change.
fn horizon(trace: &Trace) -> Millis {
    let jobs = trace.jobs.iter().map(|j| j.arrival);
    let events = trace.events.iter().map(|e| e.at);
    let loads = trace.endpoints.iter().filter_map(|e| e.load.last().map(|(at, _)| *at));
    jobs.chain(events).chain(loads).max().unwrap_or(0)
}

/// `label: simulated 1d04h of 7d00h (17 %), 48,210 events`.
fn line(label: &str, now: Millis, horizon: Millis, events: u64) -> String {
    let percent = percent(now, horizon);
    let prefix = if label.is_empty() { String::new() } else { format!("{label}: ") };
    format!(
        "{prefix}simulated {} of {} ({percent:.0} %), {} events",
        human_seconds(now as f64 / 1000.0),
        human_seconds(horizon as f64 / 1000.0),
        thousands(events)
    )
}

/// `least-allocated 17 %, most-allocated 15 % of 7d00h`: runs compared side by side.
fn lines(runs: &[(String, Millis, u64)], horizon: Millis) -> String {
    let parts: Vec<String> =
        runs.iter().map(|(label, now, _)| format!("{label} {:.0} %", percent(*now, horizon))).collect();
    format!("{} of {}", parts.join(", "), human_seconds(horizon as f64 / 1000.0))
}

fn percent(now: Millis, horizon: Millis) -> f64 {
    if horizon == 0 { 100.0 } else { (now as f64 / horizon as f64 * 100.0).min(100.0) }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_how_far_the_run_is() {
        assert_eq!(line("", 100_800_000, 604_800_000, 48_210), "simulated 1d04h of 7d00h (17 %), 48,210 events");
        assert_eq!(line("most-allocated", 5_000, 0, 7), "most-allocated: simulated 5s of 0s (100 %), 7 events");
        let runs = [("least-allocated".to_string(), 100_800_000, 1), ("most-allocated".to_string(), 90_000_000, 2)];
        assert_eq!(lines(&runs, 604_800_000), "least-allocated 17 %, most-allocated 15 % of 7d00h");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn the_horizon_is_the_last_thing_due() {
        let t = Trace::parse(
            "t.yaml",
            "apiVersion: muster.dev/v1alpha1\nkind: Trace\njobs:\n- name: a\n  arrival: 2h\n  duration: 1h\nevents:\n- at: 3h\n  drainNode: n\n",
        )
        .unwrap();
        assert_eq!(horizon(&t), 10_800_000);
        assert_eq!(horizon(&Trace::default()), 0);
    }
}
