//! The store's Workloads (`scheduling.k8s.io/v1beta1`), one change at a time. The scheduler
//! schedules PodGroups, not Workloads (upstream reads no Workload); muster keeps one thing of
//! each: its annotations, where a PodGroup that asks for no device topology of its own inherits
//! one from the Workload its `spec.workloadRef` names [beyond upstream,
//! [`crate::device_topology`]]. A change to them recomputes the device topology of the groups
//! naming the Workload, and wakes what waits for a workload change.

use k8s_openapi::api::scheduling::v1beta1::Workload;

use super::{Applied, Cluster, Wake};
use crate::cluster::{GroupId, object_key};

impl Cluster {
    pub(super) fn upsert_workload(&mut self, workload: Workload) -> Applied {
        let key = object_key(&workload.metadata);
        let annotations = workload.metadata.annotations.unwrap_or_default();
        if self.workload_annotations.get(&key) == Some(&annotations) {
            return Applied::default();
        }
        self.workload_annotations.insert(key.clone(), annotations);
        self.workload_changed(&key)
    }

    pub(super) fn delete_workload(&mut self, key: &str) -> Applied {
        if self.workload_annotations.remove(key).is_none() {
            return Applied::default();
        }
        self.workload_changed(key)
    }

    /// The groups naming the Workload `key` take their device topology again. A scan of the
    /// groups (there are far fewer than pods), as Workloads change rarely.
    fn workload_changed(&mut self, key: &str) -> Applied {
        let named: Vec<GroupId> = (0..self.groups.len() as u32)
            .map(GroupId)
            .filter(|g| {
                let group = &self.groups[*g].group;
                group.spec.workload_ref.as_ref().is_some_and(|w| {
                    let ns = group.metadata.namespace.as_deref().unwrap_or("default");
                    key.strip_prefix(ns).and_then(|rest| rest.strip_prefix('/')) == Some(w.workload_name.as_str())
                })
            })
            .collect();
        for g in &named {
            self.groups[*g].device_topology = self.device_topology_of(&self.groups[*g].group);
        }
        Applied { wake: Wake::WORKLOAD_CHANGED, ..Applied::default() }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
    use serde_json::json;

    use crate::device_topology::{DeviceTopology, KEY_ANNOTATION, Scope};
    use crate::{Change, Cluster, SchedulerNames};

    fn workload(name: &str, key: Option<&str>) -> Change {
        let annotations = key.map(|k| json!({ KEY_ANNOTATION: k })).unwrap_or(json!({}));
        let w: Workload = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
            "spec": {"podGroupTemplates": [{"name": "t", "schedulingPolicy": {"gang": {"minCount": 2}}}]}
        }))
        .unwrap();
        Change::UpsertWorkload(Box::new(w))
    }

    fn group(name: &str, workload: &str) -> Change {
        let g: PodGroup = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"workloadRef": {"workloadName": workload, "templateName": "t"},
                     "schedulingPolicy": {"gang": {"minCount": 2}}}
        }))
        .unwrap();
        Change::UpsertPodGroup(Box::new(g))
    }

    fn topology(c: &Cluster, g: usize) -> Option<Result<DeviceTopology, String>> {
        c.groups[crate::cluster::GroupId(g as u32)].device_topology.clone()
    }

    #[test]
    fn a_group_takes_the_device_topology_of_its_workload_whenever_it_comes_and_goes() {
        let mut c =
            Cluster::build(Vec::new(), Vec::<crate::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        c.apply(group("a", "w")).unwrap();
        c.apply(group("b", "other")).unwrap();
        assert_eq!(topology(&c, 0), None);

        let applied = c.apply(workload("w", Some("gpu.example.com/clique"))).unwrap();
        assert_eq!(applied.wake, crate::queue::Wake::WORKLOAD_CHANGED);
        let want = DeviceTopology { attribute: "gpu.example.com/clique".into(), scope: Scope::Cluster };
        assert_eq!(topology(&c, 0), Some(Ok(want)));
        assert_eq!(topology(&c, 1), None, "a group naming another Workload keeps its own");

        // The same annotations again change nothing and wake nothing.
        let again = c.apply(workload("w", Some("gpu.example.com/clique"))).unwrap();
        assert_eq!(again.wake, crate::queue::Wake::NONE);
        assert!(again.queue.is_empty() && again.dequeue.is_empty() && again.claims.is_empty());

        c.apply(workload("w", Some("not a key"))).unwrap();
        let err = topology(&c, 0).unwrap().unwrap_err();
        assert!(err.starts_with("workload ml/w: "), "{err}");

        c.apply(Change::DeleteWorkload("ml/w".into())).unwrap();
        assert_eq!(topology(&c, 0), None);
        // A Workload in another namespace is another Workload.
        c.apply(Change::DeleteWorkload("other/w".into())).unwrap();
        assert_eq!(topology(&c, 0), None);
    }

    #[test]
    fn a_group_that_comes_after_its_workload_inherits_at_once() {
        let mut c =
            Cluster::build(Vec::new(), Vec::<crate::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
        c.apply(workload("w", Some("gpu.example.com/clique"))).unwrap();
        c.apply(group("a", "w")).unwrap();
        assert!(matches!(topology(&c, 0), Some(Ok(_))));
    }
}
