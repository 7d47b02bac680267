//! `FailedScheduling` events aggregated as client-go's events recorder (kube-scheduler's) does:
//! events about one pod with the same reason and action are *isomorphic* (the note does not
//! count: the first note stays). The first is created; the second, within 6 minutes of the last
//! one seen, turns it into a series (a patch setting `series: {count: 2, lastObservedTime}`); later
//! ones only count, and a series whose count grew is patched again every 30 minutes. A pod not
//! seen failing for 6 minutes is forgotten: its next failure creates a new event.
//!
//! The loop owns this (it reads the wall clock for names and times; the engine never does).

use std::collections::HashMap;

use muster_sched::queue::Millis;

/// After this long without a repeat, a series is finished (client-go's `finishTime`).
pub const FINISH: Millis = 6 * 60 * 1000;
/// How often a growing series is written again (client-go's `refreshTime`).
pub const REFRESH: Millis = 30 * 60 * 1000;

/// What to write for one occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventWrite {
    /// Nothing: the series only counts.
    Nothing,
    /// A new event of this name.
    Create { name: String },
    /// The event of this name becomes (or stays) a series of `count` occurrences.
    Series { name: String, count: i32 },
}

#[derive(Debug)]
struct Entry {
    name: String,
    namespace: String,
    count: i32,
    /// The count last written.
    written: i32,
    last_observed: Millis,
    last_written: Millis,
}

/// The events sent lately, by (pod uid, reason).
#[derive(Debug, Default)]
pub struct Series(HashMap<(String, &'static str), Entry>);

/// A series to write again: the event's namespace and name, and its count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refresh {
    pub namespace: String,
    pub name: String,
    pub count: i32,
}

impl Series {
    /// One more event `reason` about the pod `uid` (`namespace/pod`) at `now`; `name` is the name
    /// a new event gets.
    pub fn observe(
        &mut self,
        uid: &str,
        reason: &'static str,
        namespace: &str,
        name: String,
        now: Millis,
    ) -> EventWrite {
        let key = (uid.to_string(), reason);
        match self.0.get_mut(&key) {
            Some(e) if now.saturating_sub(e.last_observed) < FINISH => {
                e.count += 1;
                e.last_observed = now;
                if e.count != 2 {
                    return EventWrite::Nothing;
                }
                e.written = 2;
                e.last_written = now;
                EventWrite::Series { name: e.name.clone(), count: 2 }
            }
            _ => {
                let entry = Entry {
                    name: name.clone(),
                    namespace: namespace.to_string(),
                    count: 1,
                    written: 1,
                    last_observed: now,
                    last_written: now,
                };
                self.0.insert(key, entry);
                EventWrite::Create { name }
            }
        }
    }

    /// The series to write again at `now` (their count grew and the last write is
    /// [`REFRESH`] old); finished ones are forgotten. Bounded by the pods failing lately.
    pub fn tick(&mut self, now: Millis) -> Vec<Refresh> {
        self.0.retain(|_, e| now.saturating_sub(e.last_observed) < FINISH);
        let mut out = Vec::new();
        for e in self.0.values_mut() {
            if e.count > e.written && now.saturating_sub(e.last_written) >= REFRESH {
                e.written = e.count;
                e.last_written = now;
                out.push(Refresh { namespace: e.namespace.clone(), name: e.name.clone(), count: e.count });
            }
        }
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: &str = "FailedScheduling";

    #[test]
    fn repeats_become_a_series_and_a_quiet_pod_starts_over() {
        let mut s = Series::default();
        let name = |n: &str| n.to_string();
        assert_eq!(s.observe("u1", R, "ml", name("p.1"), 0), EventWrite::Create { name: name("p.1") });
        assert_eq!(s.observe("u1", R, "ml", name("p.2"), 1_000), EventWrite::Series { name: name("p.1"), count: 2 });
        assert_eq!(s.observe("u1", R, "ml", name("p.3"), 2_000), EventWrite::Nothing, "counted only");
        assert_eq!(
            s.observe("u2", R, "ml", name("q.1"), 2_000),
            EventWrite::Create { name: name("q.1") },
            "another pod"
        );
        // Quiet for FINISH: forgotten, the next failure is a new event.
        let later = 2_000 + FINISH;
        assert_eq!(s.observe("u1", R, "ml", name("p.4"), later), EventWrite::Create { name: name("p.4") });
    }

    #[test]
    fn a_growing_series_is_written_again_every_refresh() {
        let mut s = Series::default();
        s.observe("u1", R, "ml", "p.1".into(), 0);
        s.observe("u1", R, "ml", "p.2".into(), 1);
        let mut at = 1;
        // Failing every minute keeps the series open.
        while at < REFRESH + 60_000 {
            at += 60_000;
            s.observe("u1", R, "ml", "p.x".into(), at);
            if at < REFRESH {
                assert!(s.tick(at).is_empty(), "not before the refresh period");
            }
        }
        let due = s.tick(at);
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].name.as_str(), due[0].count > 2), ("p.1", true));
        assert!(s.tick(at + 1).is_empty(), "written: nothing new");
        assert!(s.tick(at + FINISH).is_empty());
        assert!(s.0.is_empty(), "finished series are forgotten");
    }
}
