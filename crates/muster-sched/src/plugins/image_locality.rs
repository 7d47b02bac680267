//! ImageLocality (Score, default weight 1): prefer nodes that already hold the pod's container
//! images (`node.status.images`), each image's size scaled by the share of nodes holding it, so
//! that one node with a popular image does not attract every pod ("node heating"). Init
//! containers count, as upstream counts them.
//!
//! The image states (per image name: its size and the nodes holding it) are rebuilt when a node
//! changes, and only in clusters where some node reports images; elsewhere the plugin costs
//! nothing (every node would score 0).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;

use crate::stored_pod::StoredPod;

use crate::cluster::{Cluster, NodeId};
use crate::framework::MAX_NODE_SCORE;

pub const NAME: &str = "ImageLocality";

const MB: i64 = 1024 * 1024;
/// Below this many (scaled) bytes a node scores 0.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container, above this many bytes a node scores 100.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// Whether a node reports any image (the store counts such nodes).
pub fn has_images(node: &Node) -> bool {
    node.status.as_ref().and_then(|s| s.images.as_ref()).is_some_and(|i| !i.is_empty())
}

/// One image name's state: its size (as the first node, in name order, reports it) and the
/// nodes holding it, sorted.
#[derive(Clone, Debug)]
struct ImageState {
    size: i64,
    nodes: Vec<NodeId>,
}

/// The image states of the cluster as it was at `built_for` (`Cluster::topology_generation`).
#[derive(Clone, Debug, Default)]
pub struct ImageStates {
    built_for: Option<(u64, usize)>,
    by_name: HashMap<String, ImageState>,
}

impl ImageStates {
    fn refresh(&mut self, cluster: &Cluster) {
        let now = (cluster.topology_generation, cluster.nodes.len());
        if self.built_for == Some(now) {
            return;
        }
        self.by_name.clear();
        for (i, n) in cluster.nodes.iter().enumerate().filter(|(_, n)| !n.detail.removed) {
            let images = n.detail.node.status.as_ref().and_then(|s| s.images.as_deref()).unwrap_or_default();
            for image in images {
                for name in image.names.iter().flatten() {
                    let state = self
                        .by_name
                        .entry(name.clone())
                        .or_insert_with(|| ImageState { size: image.size_bytes.unwrap_or(0), nodes: Vec::new() });
                    if state.nodes.last() != Some(&NodeId(i as u32)) {
                        state.nodes.push(NodeId(i as u32));
                    }
                }
            }
        }
        self.built_for = Some(now);
    }
}

/// `normalizedImageName`: an image without a tag is `:latest`.
fn normalized(image: &str) -> String {
    let tagged = match (image.rfind(':'), image.rfind('/')) {
        (Some(colon), Some(slash)) => colon > slash,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if tagged { image.to_string() } else { format!("{image}:latest") }
}

/// `calculatePriority`: the summed scaled sizes, clamped to [23 MB, 1000 MB × containers],
/// mapped onto 0..=100.
fn priority(sum: i64, containers: usize) -> i64 {
    let max = MAX_CONTAINER_THRESHOLD * containers.max(1) as i64;
    let sum = sum.clamp(MIN_THRESHOLD, max);
    MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

/// The scores of `feasible` (not normalized, as upstream), or `None` when every node would score
/// the same (no node reports images, or none holds any of the pod's).
pub fn score(pod: &StoredPod, feasible: &[NodeId], cluster: &Cluster, states: &mut ImageStates) -> Option<Vec<i64>> {
    if cluster.nodes_with_images == 0 {
        return None;
    }
    let containers: Vec<String> = pod.containers().iter().filter_map(|c| c.image.as_deref()).map(normalized).collect();
    let count = pod.containers().len();
    states.refresh(cluster);
    let held: Vec<&ImageState> = containers.iter().filter_map(|c| states.by_name.get(c)).collect();
    if held.is_empty() {
        return None;
    }
    let total = cluster.node_order.len().max(1) as f64;
    let scaled: Vec<i64> = held.iter().map(|s| (s.size as f64 * (s.nodes.len() as f64 / total)) as i64).collect();
    Some(
        feasible
            .iter()
            .map(|n| {
                let sum =
                    held.iter().zip(&scaled).filter(|(s, _)| s.nodes.binary_search(n).is_ok()).map(|(_, v)| *v).sum();
                priority(sum, count)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_without_a_tag_are_latest() {
        assert_eq!(normalized("nginx"), "nginx:latest");
        assert_eq!(normalized("registry:5000/ml/vllm"), "registry:5000/ml/vllm:latest");
        assert_eq!(normalized("ml/vllm:0.6"), "ml/vllm:0.6");
    }

    #[test]
    fn priority_is_clamped_between_the_thresholds() {
        assert_eq!(priority(0, 1), 0);
        assert_eq!(priority(MIN_THRESHOLD, 1), 0);
        assert_eq!(priority(2000 * MB, 1), 100);
        assert_eq!(priority(2000 * MB, 2), (100 * (2000 * MB - MIN_THRESHOLD)) / (2000 * MB - MIN_THRESHOLD));
        assert_eq!(priority(500 * MB, 1), 100 * (500 - 23) / (1000 - 23));
    }
}
