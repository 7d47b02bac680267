//! muster-sim: a deterministic discrete-event simulation of a GPU cluster over virtual time, with
//! muster's own scheduling engine ([`muster_sched::Engine`]) making every decision.
//!
//! What it owns: the trace format ([`trace`]), the DRA inputs as the trace's GPU failures and
//! DeviceTaintRules change them ([`devices`]; [`run`] gives the engine each new view), the
//! importer of Alibaba's openb CSV traces
//! ([`openb`], over a small CSV reader, [`csv`]), the world around the engine ([`world`]: a heap of
//! timed events in virtual milliseconds, ties broken by the order they were pushed; jobs' pods,
//! claims and PodGroups created when they arrive; placed pods bound and run for their duration,
//! then deleted and their claims released as the resourceclaim controller of
//! [`muster_controllers`] says; preemption victims and drained nodes' pods deleted and their jobs
//! restarted), and the report ([`report`]: the `-o json` summary and the text form; [`html`]: one
//! self-contained page with SVG plots; [`fragmentation`]: free devices per node, kept current as
//! claims come and go, for the stranded-devices figures).
//!
//! What it must never do: read a clock (time is the virtual time it computes; a caller that wants
//! to know where the wall time goes may hand in a [`world::Stopwatch`], read for those figures
//! only), draw randomness but from the run's seed (same seed, same draws), do I/O (the binary reads the files and writes the output), or make a
//! scheduling decision of its own (it asks the engine and does what the effects say). Same trace,
//! cluster and options: the same report, byte for byte.
//!
//! ```text
//! loop:
//!   t = min(next event, engine.next_wakeup())
//!   apply every event due at t (arrivals, finishes, drains) as engine changes
//!   repeat: plan = engine.schedule(t); carry out engine.effects(plan)
//!     (evict → delete the pod, release its claims, restart its job;
//!      write claim status → upsert the claim; bind → upsert the pod bound and Running,
//!      its finish pushed at t + duration)
//! ```
//!
//! Modelled simply, for now: a job's pods get one claim each, named `<pod>-gpus` (not from a
//! template); a job that loses a pod (preempted, drained) is restarted whole, at once, and its
//! wait is measured to its first start (`restarts` counts the rest); PodGroup status conditions
//! and events are not written back; binding never fails and takes no time. A share of a device
//! that allows multiple allocations (an openb pod's part of a GPU) counts, in the utilization, as
//! the part of the device's capacity it consumed ([`usage`]). A device out of service (tainted
//! `NoSchedule` or `NoExecute`) still counts as free in the fragmentation figures. Inference
//! endpoints' replicas are scaled by an HPA model (`world/endpoints.rs`: sync period, tolerance,
//! default behavior, scale to zero) on the trace's metric; their GPUs count in the utilization,
//! not in the per-class figures. Not yet: per-reason unschedulable counts in the report, HPA
//! `behavior` other than the default. The seed matters only to
//! endpoints whose cold start is a range (each replica's drawn from it); otherwise it is recorded.

pub mod compare;
pub mod csv;
pub mod devices;
pub mod fragmentation;
pub mod html;
pub mod openb;
pub mod report;
pub mod run;
pub mod trace;
pub mod usage;
pub mod world;

pub use report::Report;
pub use run::{run, run_observing};
pub use trace::{Trace, TraceError};
pub use world::{Options, Sim, SimError};
