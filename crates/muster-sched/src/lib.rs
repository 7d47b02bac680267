//! The scheduling engine: the cluster snapshot, the queue, kube-scheduler's Filter and Score
//! plugins under their upstream names, and the cycle that places pods one at a time. It takes a
//! snapshot and returns decisions; it never does I/O (worlds read and write objects), never reads
//! a clock or a random source (same snapshot and config, same plan), and never writes back into the
//! Kubernetes objects it was given — callers apply a plan to objects themselves.

pub mod cluster;
pub mod cycle;
mod dra_memo;
pub mod engine;
pub mod eviction;
pub mod explain;
pub mod fastdiv;
pub mod framework;
pub mod plugins;
pub mod queue;
pub mod store;

pub use cluster::{
    ClaimInfo, Cluster, CompositeInfo, GroupInfo, GroupNode, ModelError, NodeId, NodeInfo, PodId, PodInfo, PodState,
    SchedulerNames, TreeError,
};
pub use cycle::{
    Attempted, CompositeResult, DomainTrial, GroupOutcome, GroupResult, Outcome, Plan, PodPreemptionResult, QueueEntry,
    Scheduler, SchedulerConfig, ScoreWeights,
};
pub use engine::Engine;
pub use framework::{FitError, Rejection};
pub use plugins::dynamic_resources::DraContext;
pub use plugins::node_resources_fit::ScoringStrategy;
pub use store::Change;
