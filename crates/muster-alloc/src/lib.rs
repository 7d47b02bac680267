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
//! Not implemented yet: partitionable devices' shared counters (devices that consume counters are
//! never taken; slices with counter sets or per-device node selection are handled as with the
//! feature off) and consumable capacity (requests with capacity and multi-allocatable devices).

mod allocator;
mod constraints;
mod pools;
mod state;

pub use allocator::{AllocError, Allocator, MAX_DEVICES_PER_CLAIM, Outcome};
pub use pools::SliceIndex;
pub use state::{AllocatedState, DeviceId, Features};
