//! The assume cache for ResourceClaims, as kube-scheduler's (`assumecache`): while muster writes
//! a claim, what the watch reports about it is held back (the engine holds the allocation it
//! decided, which an older version from the watch would undo, freeing devices that are about to
//! be taken); once the write returns, its result is applied, and a reported version no newer than
//! it (resourceVersions compared as numbers) is dropped as stale.
//!
//! Pods need no such cache here: the store keeps a pod it assumed onto a node until an update
//! binds it (see `muster_sched::store`).

use std::collections::HashMap;

use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::observed::{key_of, resource_version};

/// What to do with the engine's copy of a claim.
#[derive(Debug, PartialEq)]
pub enum Apply {
    Upsert(Box<ResourceClaim>),
    Delete(String),
}

#[derive(Default)]
pub struct ClaimAssume {
    /// Writes in flight, per claim key.
    in_flight: HashMap<String, u32>,
    /// The newest event reported for a claim in flight.
    held: HashMap<String, Apply>,
    /// The resourceVersion of muster's last write of a claim, until the watch reports a newer one.
    written: HashMap<String, u64>,
}

impl ClaimAssume {
    /// A write of `key` starts.
    pub fn begin(&mut self, key: &str) {
        *self.in_flight.entry(key.to_string()).or_default() += 1;
    }

    /// The watch reported `claim`: what to apply now (nothing while it is in flight, or when it is
    /// older than muster's last write).
    pub fn observed(&mut self, claim: Box<ResourceClaim>) -> Option<Apply> {
        let key = key_of(&claim.metadata);
        if self.in_flight.contains_key(&key) {
            self.held.insert(key, Apply::Upsert(claim));
            return None;
        }
        if let Some(&written) = self.written.get(&key) {
            match resource_version(&claim.metadata) {
                Some(v) if v <= written => return None,
                _ => {
                    self.written.remove(&key);
                }
            }
        }
        Some(Apply::Upsert(claim))
    }

    /// The watch reported the claim deleted: applied at once unless a write of it is in flight.
    pub fn deleted(&mut self, key: String) -> Option<Apply> {
        self.written.remove(&key);
        if self.in_flight.contains_key(&key) {
            self.held.insert(key.clone(), Apply::Delete(key));
            return None;
        }
        Some(Apply::Delete(key))
    }

    /// A write of `key` ended, with the claim as the API server returned it when it succeeded:
    /// what to apply, in order (the result, then a held event newer than it).
    pub fn ended(&mut self, key: &str, result: Option<ResourceClaim>) -> Vec<Apply> {
        let mut out = Vec::new();
        if let Some(claim) = result {
            if let Some(v) = resource_version(&claim.metadata) {
                let w = self.written.entry(key.to_string()).or_insert(v);
                *w = (*w).max(v);
            }
            out.push(Apply::Upsert(Box::new(claim)));
        }
        let remaining = self.in_flight.get_mut(key).map(|n| {
            *n -= 1;
            *n
        });
        if remaining == Some(0) {
            self.in_flight.remove(key);
            if let Some(held) = self.held.remove(key) {
                match held {
                    Apply::Upsert(c) => out.extend(self.observed(c)),
                    Apply::Delete(k) => out.extend(self.deleted(k)),
                }
            }
        }
        out
    }

    /// Claims with writes in flight.
    pub fn busy(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn claim(rv: u64) -> Box<ResourceClaim> {
        Box::new(ResourceClaim {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("c".into()),
                resource_version: Some(rv.to_string()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn events_during_a_write_are_held_and_stale_ones_dropped() {
        let mut a = ClaimAssume::default();
        assert_eq!(a.observed(claim(5)), Some(Apply::Upsert(claim(5))));
        a.begin("ns/c");
        assert_eq!(a.observed(claim(6)), None, "held while the write is in flight");
        // The write returned version 7: the held 6 is older and dropped.
        assert_eq!(a.ended("ns/c", Some(*claim(7))), vec![Apply::Upsert(claim(7))]);
        assert_eq!(a.observed(claim(7)), None, "the watch's echo of muster's own write");
        assert_eq!(a.observed(claim(8)), Some(Apply::Upsert(claim(8))));
        assert_eq!(a.observed(claim(6)), Some(Apply::Upsert(claim(6))), "no write remembered any more");
    }

    #[test]
    fn a_newer_event_held_during_a_write_is_applied_after_it() {
        let mut a = ClaimAssume::default();
        a.begin("ns/c");
        a.begin("ns/c");
        assert_eq!(a.observed(claim(9)), None);
        assert_eq!(a.ended("ns/c", Some(*claim(7))), vec![Apply::Upsert(claim(7))], "another write in flight");
        assert_eq!(a.ended("ns/c", None), vec![Apply::Upsert(claim(9))]);
        assert_eq!(a.busy(), 0);
    }

    #[test]
    fn a_deletion_during_a_write_waits_for_it() {
        let mut a = ClaimAssume::default();
        a.begin("ns/c");
        assert_eq!(a.deleted("ns/c".into()), None);
        assert_eq!(a.ended("ns/c", None), vec![Apply::Delete("ns/c".into())]);
    }
}
