//! The scheduling engine: the cluster store (a snapshot built at once, or changed one object at a
//! time), the scheduling queue, kube-scheduler's Filter and Score plugins under their upstream
//! names, and the cycles that place pods, PodGroups and group trees. It owns the scheduler's view
//! of the cluster and its decisions. It never does I/O (worlds read and write objects), never
//! reads a clock or a random source (time comes in as `now`; same changes and config, same
//! decisions), and creates no Kubernetes object but those kube-scheduler itself creates (the
//! special extended-resources claim) — controllers beside it make the rest, and worlds apply
//! what it decided. One exception is left to move out: `Cluster::add_claims` still generates the
//! claims of pending pods' templates when a plan's snapshot is built.

pub mod cluster;
pub mod cycle;
pub mod device_topology;
mod dra_memo;
pub mod effects;
pub mod engine;
pub mod explain;
pub mod fastdiv;
pub mod framework;
pub mod node_journal;
pub mod plugins;
pub mod pre_filter_reason;
pub mod queue;
pub mod short_name;
pub mod slots;
pub mod spread_selectors;
pub mod store;
pub mod stored_pod;
pub mod topology;
pub mod unresolved;
pub mod validate;
pub mod volumes;

pub use cluster::{
    ClaimId, ClaimInfo, Cluster, CompositeId, CompositeInfo, GroupId, GroupInfo, GroupNode, ModelError, NodeId,
    NodeInfo, PodId, PodInfo, PodState, SchedulerNames, TreeError, object_key,
};
pub use cycle::device_changes::{BorrowedDevices, DeviceChange, slice_changes};
pub use cycle::{
    AddedAffinity, Attempted, CompositeResult, DomainTrial, GroupOutcome, GroupResult, Outcome, PlacementWeights, Plan,
    PodPreemptionResult, Profile, QueueEntry, Scheduler, SchedulerConfig, ScoreWeights,
};
pub use dra_memo::MemoCounts;
pub use effects::Effect;
pub use engine::Engine;
pub use framework::{FilterError, FitError, Rejection};
pub use muster_api::PodObject;
pub use plugins::dynamic_resources::DraContext;
pub use plugins::node_resources_fit::{ScoringStrategy, ShapePoint};
pub use queue::Backoff;
pub use store::Change;
pub use stored_pod::{ContainerView, StoredPod};
