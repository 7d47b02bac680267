//! The scheduling queue against a model of kube-scheduler 1.37's queue rules, written plainly
//! (a list of entries, scanned): random adds, pops, failures, events, failed bindings, removals
//! and clock ticks, with `SchedulerPopFromBackoffQ` on and off. After every step the queue and the
//! model agree on what is popped, on the counts per place and on the next backoff's end.

use std::cmp::Reverse;

use muster_sched::PodId;
use muster_sched::cycle::QueueEntry;
use muster_sched::queue::{Backoff, Millis, OrderKey, SchedulingQueue, Wake};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    Active,
    Backoff,
    ErrorBackoff,
    Unschedulable(Wake),
    InFlight,
}

#[derive(Clone, Debug)]
struct Entry {
    id: u32,
    priority: i32,
    place: Place,
    attempts: u32,
    failed_at: Millis,
    popped_at: u64,
}

/// kube-scheduler's queue, as its rules read.
struct Model {
    gate: bool,
    entries: Vec<Entry>,
    cycle: u64,
    move_request: u64,
}

const INITIAL: Millis = 1_000;
const MAX: Millis = 10_000;

impl Model {
    /// `getBackoffTime`: the failure's time plus 1 s doubling per attempt up to 10 s, truncated
    /// to its second when the gate is on.
    fn key(&self, e: &Entry) -> Millis {
        let backoff = (0..e.attempts.saturating_sub(1)).fold(INITIAL, |b, _| (b * 2).min(MAX));
        let t = e.failed_at + backoff;
        if self.gate { t - t % 1_000 } else { t }
    }

    /// `isEntityBackingoff`.
    fn backing_off(&self, e: &Entry, now: Millis) -> bool {
        e.attempts > 0 && if self.gate { self.key(e) >= now - now % 1_000 } else { self.key(e) > now }
    }

    fn order(e: &Entry) -> (Reverse<i32>, u32) {
        (Reverse(e.priority), e.id)
    }

    fn pop(&mut self, now: Millis) -> Option<u32> {
        for i in 0..self.entries.len() {
            let e = &self.entries[i];
            if matches!(e.place, Place::Backoff | Place::ErrorBackoff) && !self.backing_off(e, now) {
                self.entries[i].place = Place::Active;
            }
        }
        let active = self.entries.iter().filter(|e| e.place == Place::Active).min_by_key(|e| Self::order(e));
        let chosen = match active {
            Some(e) => Some(e.id),
            // `popBackoff`: the backoff queue's head, by backoff time, then as the active queue.
            None if self.gate => self
                .entries
                .iter()
                .filter(|e| e.place == Place::Backoff)
                .min_by_key(|e| (self.key(e), Self::order(e)))
                .map(|e| e.id),
            None => None,
        }?;
        self.cycle += 1;
        let cycle = self.cycle;
        let e = self.entries.iter_mut().find(|e| e.id == chosen).unwrap();
        e.place = Place::InFlight;
        e.attempts += 1;
        e.popped_at = cycle;
        Some(chosen)
    }

    fn failed(&mut self, id: u32, wake: Wake, now: Millis) {
        let move_request = self.move_request;
        let e = self.entries.iter_mut().find(|e| e.id == id).unwrap();
        e.failed_at = now;
        e.place = if move_request >= e.popped_at { Place::Backoff } else { Place::Unschedulable(wake) };
    }

    fn requeue(&mut self, i: usize, now: Millis) {
        let back = self.backing_off(&self.entries[i], now);
        self.entries[i].place = if back { Place::Backoff } else { Place::Active };
    }

    fn event(&mut self, wake: Wake, now: Millis) {
        self.move_request = self.cycle;
        for i in 0..self.entries.len() {
            if let Place::Unschedulable(w) = self.entries[i].place
                && w.intersects(wake)
            {
                self.requeue(i, now);
            }
        }
    }

    fn binding_failed(&mut self, id: u32, priority: i32, now: Millis) {
        match self.entries.iter().position(|e| e.id == id) {
            Some(i) => {
                if matches!(self.entries[i].place, Place::Unschedulable(_)) {
                    self.requeue(i, now);
                }
            }
            None => self.entries.push(Entry {
                id,
                priority,
                place: Place::ErrorBackoff,
                attempts: 1,
                failed_at: now,
                popped_at: 0,
            }),
        }
    }

    fn counts(&self) -> (usize, usize, usize) {
        let n = |f: &dyn Fn(&Place) -> bool| self.entries.iter().filter(|e| f(&e.place)).count();
        (
            n(&|p| *p == Place::Active),
            n(&|p| matches!(p, Place::Backoff | Place::ErrorBackoff)),
            n(&|p| matches!(p, Place::Unschedulable(_))),
        )
    }

    fn next_backoff_expiry(&self) -> Option<Millis> {
        let ready = |e: &Entry| if self.gate { self.key(e) + 1_000 } else { self.key(e) };
        self.entries.iter().filter(|e| matches!(e.place, Place::Backoff | Place::ErrorBackoff)).map(ready).min()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Add { id: u32, priority: i32 },
    Pop,
    Fail(u16),
    Done,
    Event(u16),
    BindingFailed { id: u32, priority: i32 },
    Remove(u32),
    Tick(Millis),
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0u32..8;
    let priority = -1i32..2;
    let wake = 1u16..8; // three kinds of event
    prop_oneof![
        2 => (id.clone(), priority.clone()).prop_map(|(id, priority)| Op::Add { id, priority }),
        4 => Just(Op::Pop),
        3 => wake.clone().prop_map(Op::Fail),
        1 => Just(Op::Done),
        2 => wake.prop_map(Op::Event),
        1 => (id.clone(), priority).prop_map(|(id, priority)| Op::BindingFailed { id, priority }),
        1 => id.prop_map(Op::Remove),
        2 => (0u64..4_000).prop_map(Op::Tick),
    ]
}

fn entry(id: u32) -> QueueEntry {
    QueueEntry::Pod(PodId(id))
}

fn order(id: u32, priority: i32) -> OrderKey {
    OrderKey { priority: Reverse(priority), created: None, key: format!("p{id}").into() }
}

fn wake(bits: u16) -> Wake {
    [Wake::NODE_ADDED, Wake::ASSIGNED_POD_DELETED, Wake::CLAIM_CHANGED]
        .into_iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .fold(Wake::NONE, |w, (_, e)| w.union(e))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn the_queue_follows_kube_schedulers_rules(gate in any::<bool>(), ops in prop::collection::vec(op(), 1..80)) {
        let mut queue = SchedulingQueue::with_backoff(Backoff { pop_from_backoff_q: gate, ..Backoff::default() });
        let mut model = Model { gate, entries: Vec::new(), cycle: 0, move_request: 0 };
        let (mut now, mut in_flight): (Millis, Option<u32>) = (0, None);
        for op in ops {
            match op {
                Op::Add { id, priority } => {
                    if !model.entries.iter().any(|e| e.id == id) {
                        model.entries.push(Entry { id, priority, place: Place::Active, attempts: 0, failed_at: 0, popped_at: 0 });
                    }
                    queue.add(entry(id), order(id, priority));
                }
                // The scheduler tries one entry at a time.
                Op::Pop if in_flight.is_none() => {
                    let (got, want) = (queue.pop(now), model.pop(now));
                    prop_assert_eq!(got, want.map(entry), "pop at {}", now);
                    in_flight = want;
                }
                Op::Fail(bits) => {
                    if let Some(id) = in_flight.take() {
                        queue.failed(entry(id), wake(bits), now);
                        model.failed(id, wake(bits), now);
                    }
                }
                Op::Done => {
                    if let Some(id) = in_flight.take() {
                        queue.done(entry(id));
                        model.entries.retain(|e| e.id != id);
                    }
                }
                Op::Event(bits) => {
                    queue.on_event(wake(bits), now);
                    model.event(wake(bits), now);
                }
                Op::BindingFailed { id, priority } if in_flight != Some(id) => {
                    queue.add_after_binding_failure(entry(id), order(id, priority), now);
                    model.binding_failed(id, priority, now);
                }
                Op::Remove(id) if in_flight != Some(id) => {
                    queue.remove(entry(id));
                    model.entries.retain(|e| e.id != id);
                }
                Op::Tick(ms) => now += ms,
                _ => {}
            }
            prop_assert_eq!(queue.counts(), model.counts(), "(active, backoff, unschedulable) at {}", now);
            prop_assert_eq!(queue.next_backoff_expiry(), model.next_backoff_expiry(), "next backoff end at {}", now);
        }
    }
}
