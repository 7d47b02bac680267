//! The in-tree plugins muster runs, under kube-scheduler's names and in its Filter order.

pub mod dynamic_resources;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_ports;
pub mod node_resources_balanced_allocation;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_matcher;
pub mod pod_topology_spread;
pub mod taint_toleration;
#[cfg(test)]
pub mod test_cluster;
pub mod volume_binding;
pub mod volume_restrictions;
#[cfg(test)]
mod volume_tests;
pub mod volume_zone;
