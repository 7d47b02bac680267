//! NodePorts: a pod's container host ports must be free on the node. Two ports conflict when
//! they have the same protocol and number and either host IP is the wildcard `0.0.0.0` or both
//! IPs are equal (an empty IP is the wildcard, an empty protocol TCP).

use crate::stored_pod::StoredPod;

use crate::cluster::{Cluster, NodeInfo};
use crate::framework::{CycleState, Rejection};

pub const NAME: &str = "NodePorts";
pub const REASON: &str = "node(s) didn't have free ports for the requested pod ports";

const WILDCARD: &str = "0.0.0.0";

/// One host port as `HostPortInfo` keeps it: IP and protocol defaulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPort<'a> {
    pub ip: &'a str,
    pub protocol: &'a str,
    pub port: i32,
}

impl HostPort<'_> {
    fn conflicts(&self, other: &HostPort<'_>) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == WILDCARD || other.ip == WILDCARD || self.ip == other.ip)
    }
}

/// The host ports of a pod's containers and sidecars (init containers with `restartPolicy:
/// Always`; other init containers have exited before the pod runs), those with `hostPort > 0`.
pub fn host_ports(pod: &StoredPod) -> Vec<HostPort<'_>> {
    pod.containers()
        .iter()
        .filter(|c| c.long_lived())
        .flat_map(|c| c.ports.iter())
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .map(|p| HostPort {
            ip: p.host_ip.as_deref().filter(|ip| !ip.is_empty()).unwrap_or(WILDCARD),
            protocol: p.protocol.as_deref().filter(|p| !p.is_empty()).unwrap_or("TCP"),
            port: p.host_port.unwrap_or(0),
        })
        .collect()
}

/// Filter: no wanted port conflicts with a port of a pod on the node.
pub fn filter(state: &CycleState<'_>, node: &NodeInfo, cluster: &Cluster) -> Result<(), Rejection> {
    if state.host_ports.is_empty() {
        return Ok(());
    }
    for id in &node.detail.pods {
        for used in host_ports(&cluster.pod(*id).pod) {
            if state.host_ports.iter().any(|want| want.conflicts(&used)) {
                return Err(Rejection::new(NAME, false, REASON));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SchedulerNames;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>, ports: &[(&str, &str, i32)]) -> Box<Pod> {
        let ports: Vec<_> = ports
            .iter()
            .map(|(proto, ip, port)| json!({"containerPort": 80, "hostPort": port, "protocol": proto, "hostIP": ip}))
            .collect();
        let mut spec = json!({"containers": [{"name": "c", "ports": ports}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        Box::new(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"}, "spec": spec})).unwrap())
    }

    /// Runs the incoming pod's ports against a node holding `existing`.
    fn fits(want: &[(&str, &str, i32)], existing: &[(&str, &str, i32)]) -> bool {
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        }))
        .unwrap();
        let pods = vec![pod("existing", Some("n"), existing), pod("incoming", None, want)];
        let cluster = Cluster::build(vec![node], pods, &[], &SchedulerNames::default()).unwrap();
        let incoming = cluster.pods.iter().position(|p| p.name() == "incoming").unwrap();
        let state = CycleState::new(&cluster.pods[incoming]);
        filter(&state, &cluster.nodes[0], &cluster).is_ok()
    }

    // Cases after upstream's nodeports TestNodePorts table (own data).
    #[test]
    fn no_ports_fit_anywhere() {
        assert!(fits(&[], &[("TCP", "127.0.0.1", 8080)]));
    }

    #[test]
    fn other_port_fits() {
        assert!(fits(&[("UDP", "127.0.0.1", 8080)], &[("UDP", "127.0.0.1", 9090)]));
    }

    #[test]
    fn same_udp_port_same_ip_conflicts() {
        assert!(!fits(&[("UDP", "127.0.0.1", 8080)], &[("UDP", "127.0.0.1", 8080)]));
    }

    #[test]
    fn same_port_other_protocol_fits() {
        assert!(fits(&[("UDP", "127.0.0.1", 8080)], &[("TCP", "127.0.0.1", 8080)]));
    }

    #[test]
    fn same_tcp_port_same_ip_conflicts() {
        assert!(!fits(&[("TCP", "127.0.0.1", 8080)], &[("TCP", "127.0.0.1", 8080)]));
    }

    #[test]
    fn same_port_other_ip_fits() {
        assert!(fits(&[("TCP", "127.0.0.1", 8001)], &[("TCP", "127.0.0.2", 8001)]));
    }

    #[test]
    fn one_of_several_ports_conflicts() {
        assert!(!fits(&[("TCP", "127.0.0.1", 8001), ("UDP", "127.0.0.1", 8002)], &[("TCP", "127.0.0.1", 8001)]));
    }

    #[test]
    fn wildcard_wanted_conflicts_with_any_ip() {
        assert!(!fits(&[("TCP", "0.0.0.0", 8001)], &[("TCP", "127.0.0.1", 8001)]));
    }

    #[test]
    fn wildcard_used_conflicts_with_any_ip() {
        assert!(!fits(&[("TCP", "127.0.0.1", 8001)], &[("TCP", "0.0.0.0", 8001)]));
    }

    #[test]
    fn wildcard_other_protocol_fits() {
        assert!(fits(&[("UDP", "0.0.0.0", 8001)], &[("TCP", "127.0.0.1", 8001)]));
        assert!(fits(&[("TCP", "127.0.0.1", 8001)], &[("UDP", "0.0.0.0", 8001)]));
    }

    #[test]
    fn empty_ip_and_protocol_are_the_defaults() {
        assert!(!fits(&[("", "", 8001)], &[("TCP", "10.0.0.1", 8001)]));
        assert!(fits(&[("", "", 8001)], &[("UDP", "10.0.0.1", 8001)]));
    }

    #[test]
    fn sidecar_host_ports_count_and_other_init_containers_do_not() {
        let with_init = |restart: Option<&str>| {
            let mut p = pod("incoming", None, &[]);
            let c: k8s_openapi::api::core::v1::Container = serde_json::from_value(json!({
                "name": "init", "restartPolicy": restart,
                "ports": [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}]
            }))
            .unwrap();
            p.spec.as_mut().unwrap().init_containers = Some(vec![c]);
            p
        };
        assert_eq!(host_ports(&StoredPod::new(with_init(Some("Always")))).len(), 1);
        assert!(host_ports(&StoredPod::new(with_init(None))).is_empty());
    }

    #[test]
    fn wildcard_used_for_both_protocols() {
        assert!(!fits(&[("UDP", "127.0.0.1", 8001)], &[("TCP", "0.0.0.0", 8001), ("UDP", "0.0.0.0", 8001)]));
    }

    #[test]
    fn container_port_without_host_port_is_not_wanted() {
        assert!(fits(&[("TCP", "", 0)], &[("TCP", "", 0)]));
    }
}
