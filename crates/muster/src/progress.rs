//! The progress line of a long `muster sim` on a terminal: after the first second of wall time,
//! at most five times a second, `simulated 1d04h of 7d00h (17 %), 48,210 events` on stderr,
//! rewritten in place and cleared at the end. Nothing when stderr is not a terminal (CI logs,
//! pipes), and nothing the simulation reads: the wall clock only paces the line.

use std::io::Write;
use std::time::{Duration, Instant};

use muster_sim::report::human_seconds;
use muster_sim::trace::{Millis, Trace};

/// See the module documentation.
pub struct Progress {
    label: String,
    horizon: Millis,
    started: Instant,
    last: Option<Instant>,
    enabled: bool,
}

impl Progress {
    /// A progress line for a run of `trace` (to `until`, else to its last arrival or event),
    /// prefixed with `label` (the configuration, in a comparison).
    pub fn new(trace: &Trace, until: Option<Millis>, label: &str) -> Progress {
        Progress {
            label: label.to_string(),
            horizon: until.unwrap_or_else(|| horizon(trace)),
            started: Instant::now(),
            last: None,
            enabled: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        }
    }

    /// The simulation is at `now`, having handled `events`.
    pub fn update(&mut self, now: Millis, events: u64) {
        if !self.enabled || self.started.elapsed() < Duration::from_secs(1) {
            return;
        }
        if self.last.is_some_and(|l| l.elapsed() < Duration::from_millis(200)) {
            return;
        }
        self.last = Some(Instant::now());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[K{}", line(&self.label, now, self.horizon, events));
        let _ = err.flush();
    }

    /// Clears the line, if one was shown.
    pub fn finish(&self) {
        if self.last.is_some() {
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
    let percent = if horizon == 0 { 100.0 } else { (now as f64 / horizon as f64 * 100.0).min(100.0) };
    let prefix = if label.is_empty() { String::new() } else { format!("{label}: ") };
    format!(
        "{prefix}simulated {} of {} ({percent:.0} %), {} events",
        human_seconds(now as f64 / 1000.0),
        human_seconds(horizon as f64 / 1000.0),
        thousands(events)
    )
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
