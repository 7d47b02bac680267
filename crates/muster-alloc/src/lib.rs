//! The structured DRA allocator: given a node, the claims a pod needs, the ResourceSlices, the
//! DeviceClasses and what is already allocated, it finds the devices each claim gets — first-fit,
//! depth-first, in upstream's search order — and returns `AllocationResult`s, "no solution", or the
//! error upstream would return. It owns that decision and nothing else: it does no I/O, never
//! writes into the objects it is given, and gives the same answer for the same input, always.
//!
//! The reference is `k8s.io/dynamic-resource-allocation/structured` as of Kubernetes 1.37
//! (../shared/design/allocator-spec.md). Where upstream has a bug (marked [QUIRK] in the spec),
//! muster does the correct thing; each deviation is documented where it is implemented.
//!
//! Deviations from upstream, each on purpose:
//!
//! - A device rejected after it drew on its pool's counters (untolerated taint, constraint,
//!   capacity) gives them back; upstream keeps them drawn [QUIRK], which can make a later
//!   candidate of the same pool fail wrongly. Counters of multi-allocatable devices are released
//!   on backtracking too.
//! - Counter state is keyed by pool (driver and name); upstream keys it by pool name only [QUIRK],
//!   so two drivers publishing pools of the same name would share counters.
//! - distinctAttribute compares a device with every device admitted so far; upstream keys its state
//!   by request name, so a third device of one request is compared with the second only [QUIRK].
//!   matchAttribute over list values recomputes the intersection from the members, so backtracking
//!   widens it again; upstream does not [QUIRK].
//! - A request with fewer candidates left than devices still wanted stops searching once every
//!   candidate has been looked at; upstream tries every combination of the rest
//!   (kubernetes/kubernetes#131730: a node of 28 devices with one taken, asked for all 28, took
//!   muster 32 s before, 0.01 s now; `tests/scenarios/one-device-short`). The verdicts, selector
//!   errors included, are upstream's.
//! - Share IDs are derived from the claim, the result position and the device, so that the same
//!   input always gives the same output; upstream draws random UUIDs.
//! - The class lookup error names the class plainly (`deviceclass.resource.k8s.io "x" not
//!   found`); upstream's text quotes its lister's internals.
//!
//! None of the 223 upstream test cases depends on a quirk: all pass
//! (`muster conformance allocator tests/conformance/allocator`).

mod allocator;
mod constraints;
mod domain;
pub mod explain;
mod pools;
mod slice_index;
mod state;

pub use allocator::{AllocError, Allocator, MAX_DEVICES_PER_CLAIM, Outcome, derive_share_ids};
pub use domain::{DeviceDomain, DomainValue, NodeDomains, values_of};
pub use pools::{Gathered, GatheredCell};
pub use slice_index::{DeviceNames, LocalSlice, SliceIndex, Touched};
pub use state::{AllocatedState, DeviceId, Features, PoolHeld};
