//! Scheduling profiles (`KubeSchedulerConfiguration.profiles`): one scheduler serving several
//! `schedulerName`s, each with its own plugin weights and args. A pod is scheduled with the
//! profile its `spec.schedulerName` names, every other pod with the base configuration. The
//! active profile's configuration sits in [`Scheduler`]'s `config` (so that Filter and Score read
//! it as before); the others are parked and swapped in when a pod of theirs comes. Caches whose
//! verdicts depend on the configuration are the profile's own (the score memo, parked with it)
//! or start over at a switch (unschedulable classes). Queue settings (backoff) and muster's gang
//! wait are the base configuration's, as kube-scheduler's queue is one for all its profiles.

use super::{Scheduler, SchedulerConfig, ScoredResource};
use crate::cluster::{Cluster, PodId};
use crate::fastdiv::Divisor;

/// A `schedulerName` and how its pods are scheduled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub scheduler_name: String,
    pub config: SchedulerConfig,
}

impl SchedulerConfig {
    /// The configuration a pod of `scheduler_name` (unset: `default-scheduler`) is scheduled
    /// with: the further profile of that name, else this one.
    pub fn profile_for(&self, scheduler_name: Option<&str>) -> &SchedulerConfig {
        let name = scheduler_name.unwrap_or("default-scheduler");
        self.profiles.iter().find(|p| p.scheduler_name == name).map_or(self, |p| &p.config)
    }
}

/// What a profile changes in the scheduler: its configuration, NodeResourcesFit's resources and
/// the per-node score memo computed under them (exact again when the profile comes back: each
/// entry names the node generation and pod shape it was computed for).
#[derive(Debug, Default)]
pub(super) struct Parked {
    config: SchedulerConfig,
    scored: Vec<ScoredResource>,
    weight_sum: Option<Divisor>,
    memo: Vec<super::ScoreMemo>,
}

/// The profiles: slot 0 is the base configuration (no name), then one per extra profile.
#[derive(Debug, Default)]
pub(super) struct Profiles {
    names: Vec<String>,
    /// Each profile's state while it is not active (the active one's slot is empty).
    parked: Vec<Parked>,
    active: usize,
}

/// NodeResourcesFit's scored resources and their weights' sum, for `config`.
pub(super) fn scored_resources(config: &SchedulerConfig, cluster: &mut Cluster) -> (Vec<ScoredResource>, Divisor) {
    let scored = config
        .scoring_resources
        .iter()
        .map(|(name, weight)| ScoredResource { id: cluster.resources.intern(name), weight: *weight })
        .collect();
    let weight_sum: i64 = config.scoring_resources.iter().map(|(_, w)| *w).sum();
    (scored, Divisor::new(weight_sum.max(1) as u64))
}

impl Profiles {
    /// More than the base profile: pods may be scheduled with different configurations.
    pub(super) fn several(&self) -> bool {
        self.names.len() > 1
    }

    pub(super) fn new(base: &SchedulerConfig, cluster: &mut Cluster) -> Profiles {
        let mut p = Profiles { names: vec![String::new()], parked: vec![Parked::default()], active: 0 };
        for extra in &base.profiles {
            let (scored, weight_sum) = scored_resources(&extra.config, cluster);
            let config = SchedulerConfig { profiles: Vec::new(), ..extra.config.clone() };
            p.names.push(extra.scheduler_name.clone());
            p.parked.push(Parked { config, scored, weight_sum: Some(weight_sum), memo: Vec::new() });
        }
        p
    }

    /// The base configuration, wherever it is now.
    pub(super) fn base<'a>(&'a self, active: &'a SchedulerConfig) -> &'a SchedulerConfig {
        if self.active == 0 { active } else { &self.parked[0].config }
    }
}

impl<C: std::ops::DerefMut<Target = Cluster>> Scheduler<'_, C> {
    /// Makes the profile of `pod`'s `spec.schedulerName` the active one.
    pub(super) fn use_profile_of(&mut self, pod: PodId) {
        if self.profiles.names.len() == 1 {
            return;
        }
        let spec = self.cluster.pod(pod).pod.spec();
        let name = spec.and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler");
        let want = self.profiles.names.iter().position(|n| n == name).unwrap_or(0);
        if want == self.profiles.active {
            return;
        }
        let nodes = self.memo.len();
        let current = Parked {
            config: std::mem::take(&mut self.config),
            scored: std::mem::take(&mut self.scored),
            weight_sum: Some(self.weight_sum),
            memo: std::mem::take(&mut self.memo),
        };
        self.profiles.parked[self.profiles.active] = current;
        let next = std::mem::take(&mut self.profiles.parked[want]);
        self.config = next.config;
        self.scored = next.scored;
        self.weight_sum = next.weight_sum.unwrap_or(self.weight_sum);
        // The profile's own memo; nodes added since it was parked start empty (removed nodes
        // keep their slots, as in the active memo).
        self.memo = next.memo;
        self.memo.resize(nodes, super::ScoreMemo::EMPTY);
        self.profiles.active = want;
        // UnschedulablePods remembered under the other profile's weights and args.
        self.failed_classes.clear();
    }
}
