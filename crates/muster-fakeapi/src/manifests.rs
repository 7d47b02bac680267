//! Preloading: manifests read by `muster-manifest` (exactly what `muster plan` reads), then
//! what kube-controller-manager would have made of them before a scheduler sees anything — the
//! workload controllers' ReplicaSets and pods (`muster_controllers::expand`) — as JSON objects.

use std::path::Path;

use muster_controllers::Workloads;
use muster_manifest::Object;
use serde_json::Value;

/// The objects of the manifests at `paths`, workloads expanded; the diagnostics, one a line,
/// when they do not load.
pub fn load(paths: &[impl AsRef<Path>]) -> Result<Vec<Value>, String> {
    let manifests = muster_manifest::load_paths(paths)
        .map_err(|ds| ds.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))?;
    Ok(expand(manifests.objects.into_iter().map(|l| l.object).collect()))
}

/// The objects with the workload objects' pods (and a Deployment's ReplicaSets) added.
pub fn expand(objects: Vec<Object>) -> Vec<Value> {
    let mut workloads = Workloads::default();
    let mut out = Vec::new();
    let mut pods = Vec::new();
    for o in objects {
        match o {
            Object::Deployment(d) => workloads.deployments.push(*d),
            Object::ReplicaSet(r) => workloads.replica_sets.push(*r),
            Object::StatefulSet(s) => workloads.stateful_sets.push(*s),
            Object::Job(j) => workloads.jobs.push(*j),
            Object::Pod(p) => pods.push(*p),
            other => out.push(other.to_json()),
        }
    }
    let expansion = {
        let existing: Vec<&dyn muster_controllers::PodObject> =
            pods.iter().map(|p| p as &dyn muster_controllers::PodObject).collect();
        muster_controllers::expand(&mut workloads, &existing)
    };
    let created: Vec<Value> = expansion.pods().filter_map(|p| serde_json::to_value(p).ok()).collect();
    let typed = pods.iter().map(serde_json::to_value);
    let typed = typed
        .chain(workloads.deployments.iter().map(serde_json::to_value))
        .chain(workloads.replica_sets.iter().map(serde_json::to_value))
        .chain(workloads.stateful_sets.iter().map(serde_json::to_value))
        .chain(workloads.jobs.iter().map(serde_json::to_value));
    out.extend(typed.filter_map(Result::ok));
    out.extend(created);
    out
}
