//! Kubernetes value semantics that `k8s-openapi` leaves to its users: resource quantities parsed
//! exactly, a pod's effective resource request as the scheduler computes it, taint/toleration
//! matching, node selection and objects' `namespace/name` keys. Everything here is a pure
//! function of `k8s-openapi` values; this crate never does I/O, never holds state, and never
//! redefines a Kubernetes type.

pub mod key;
pub mod pod;
pub mod quantity;
pub mod resources;
pub mod selectors;
pub mod taints;

pub use pod::PodObject;
pub use quantity::{Quantity, QuantityError};
