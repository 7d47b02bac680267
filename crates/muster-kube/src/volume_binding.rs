//! VolumeBinding's PreBind against the API server (upstream's `BindPodVolumes`): each
//! PersistentVolume the pod's Reserve chose is updated with the claim as its `claimRef`, each
//! claim to provision with the `volume.kubernetes.io/selected-node` annotation — plain updates
//! carrying the resourceVersion the scheduler read, so a conflict fails the binding cycle and the
//! pod is tried again. Then the claims are read until every one is bound (`spec.volumeName` set
//! and the `pv.kubernetes.io/bind-completed` annotation the PV controller writes), for at most
//! VolumeBinding's `bindTimeoutSeconds`. A claim to provision whose selected-node annotation is
//! gone (a provisioner that cannot provision there removes it) or whose volume was given to
//! another claim fails the cycle at once, as upstream's `checkBindings` does.
//!
//! Not checked while waiting (upstream does): that a provisioned volume's node affinity still
//! admits the node, and that the pod still exists.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use muster_sched::Cluster;
use muster_sched::volumes::{ANN_BIND_COMPLETED, ANN_SELECTED_NODE, Binding, VolumeDecision};

use crate::writes::{Writer, pp};

/// One pod's VolumeBinding PreBind: the objects to update, as its Reserve assumed them, then the
/// claims that must be bound before the pod is.
#[derive(Clone, Debug, Default)]
pub struct VolumeBind {
    pub volumes: Vec<PersistentVolume>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub wait: Vec<ClaimWait>,
}

/// A claim the binding cycle waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimWait {
    pub namespace: String,
    pub name: String,
    /// Bound to this volume by the scheduler; `None` for a claim to provision (whose
    /// selected-node annotation must stay while it waits).
    pub volume: Option<String>,
}

impl VolumeBind {
    /// The writes for a pod's decisions, from the engine's assumed copies of the objects.
    pub fn of(cluster: &Cluster, decisions: &[VolumeDecision]) -> VolumeBind {
        let mut out = VolumeBind::default();
        for d in decisions {
            let (namespace, name) = (d.namespace.clone(), d.claim.clone());
            match &d.binding {
                Binding::Volume(pv) => {
                    out.volumes.extend(cluster.volumes.volumes.get(pv).cloned());
                    out.wait.push(ClaimWait { namespace, name, volume: Some(pv.clone()) });
                }
                Binding::Provision(_) => {
                    out.claims.extend(cluster.volumes.claims.get(&(namespace.clone(), name.clone())).cloned());
                    out.wait.push(ClaimWait { namespace, name, volume: None });
                }
            }
        }
        out
    }
}

/// How a claim stands while the binding cycle waits for it.
#[derive(Debug, PartialEq, Eq)]
pub enum Bound {
    Yes,
    NotYet,
    /// It will not be bound as the cycle decided: the cycle fails.
    Never(String),
}

/// Upstream's `checkBindings` for one claim, as the API server holds it now.
pub fn check(wait: &ClaimWait, pvc: Option<&PersistentVolumeClaim>) -> Bound {
    let key = format!("{}/{}", wait.namespace, wait.name);
    let Some(pvc) = pvc else { return Bound::Never(format!("persistentvolumeclaim {key} is gone")) };
    let annotations = pvc.metadata.annotations.as_ref();
    let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|v| !v.is_empty());
    match &wait.volume {
        Some(want) if volume.is_some_and(|v| v != want) => {
            return Bound::Never(format!("persistentvolumeclaim {key} was bound to another volume"));
        }
        None if volume.is_none() && !annotations.is_some_and(|a| a.contains_key(ANN_SELECTED_NODE)) => {
            return Bound::Never(format!("selectedNode annotation reset for persistentvolumeclaim {key}"));
        }
        _ => {}
    }
    let completed = annotations.is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED));
    if volume.is_some() && completed { Bound::Yes } else { Bound::NotYet }
}

impl Writer {
    /// The pod's volumes bound (or asked to be provisioned), then waited for.
    pub(crate) async fn bind_volumes(&self, v: &VolumeBind) -> Result<(), String> {
        let params = pp();
        for pv in &v.volumes {
            let name = pv.metadata.name.clone().unwrap_or_default();
            let api: Api<PersistentVolume> = Api::all(self.client.clone());
            let call = api.replace(&name, &params, pv);
            self.call("update", "persistentvolumes", call)
                .await
                .map_err(|e| format!("persistentvolume {name}: {e}"))?;
        }
        for pvc in &v.claims {
            let ns = pvc.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = pvc.metadata.name.clone().unwrap_or_default();
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
            let call = api.replace(&name, &params, pvc);
            let r = self.call("update", "persistentvolumeclaims", call).await;
            r.map_err(|e| format!("persistentvolumeclaim {ns}/{name}: {e}"))?;
        }
        self.wait_bound(&v.wait).await
    }

    /// Reads each claim again, with a growing pause, until it is bound; gives up after the
    /// bind timeout.
    async fn wait_bound(&self, claims: &[ClaimWait]) -> Result<(), String> {
        let deadline = Instant::now() + self.volume_bind_timeout;
        for wait in claims {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &wait.namespace);
            let mut pause = Duration::from_millis(20);
            loop {
                let pvc = self.call("get", "persistentvolumeclaims", api.get_opt(&wait.name)).await;
                let pvc = pvc.map_err(|e| format!("persistentvolumeclaim {}/{}: {e}", wait.namespace, wait.name))?;
                match check(wait, pvc.as_ref()) {
                    Bound::Yes => break,
                    Bound::Never(why) => return Err(why),
                    Bound::NotYet if Instant::now() >= deadline => {
                        let timeout = self.volume_bind_timeout;
                        return Err(format!(
                            "binding volumes: persistentvolumeclaim {}/{} not bound after {timeout:?}",
                            wait.namespace, wait.name
                        ));
                    }
                    Bound::NotYet => {}
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pvc(v: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(v).unwrap()
    }

    fn wait(volume: Option<&str>) -> ClaimWait {
        ClaimWait { namespace: "ml".into(), name: "data".into(), volume: volume.map(Into::into) }
    }

    #[test]
    fn a_claim_is_bound_once_the_pv_controller_completed_the_binding() {
        let half = pvc(json!({"metadata": {"name": "data"}, "spec": {"volumeName": "pv-1"}}));
        assert_eq!(check(&wait(Some("pv-1")), Some(&half)), Bound::NotYet);
        let done = pvc(json!({"metadata": {"name": "data", "annotations": {ANN_BIND_COMPLETED: "yes"}},
            "spec": {"volumeName": "pv-1"}}));
        assert_eq!(check(&wait(Some("pv-1")), Some(&done)), Bound::Yes);
        assert!(matches!(check(&wait(Some("pv-2")), Some(&done)), Bound::Never(_)), "bound to another volume");
        assert!(matches!(check(&wait(Some("pv-1")), None), Bound::Never(_)), "claim deleted");
    }

    #[test]
    fn a_claim_to_provision_fails_when_its_selected_node_is_reset() {
        let asked = pvc(json!({"metadata": {"name": "data", "annotations": {ANN_SELECTED_NODE: "n1"}}}));
        assert_eq!(check(&wait(None), Some(&asked)), Bound::NotYet);
        let reset = pvc(json!({"metadata": {"name": "data"}}));
        assert_eq!(
            check(&wait(None), Some(&reset)),
            Bound::Never("selectedNode annotation reset for persistentvolumeclaim ml/data".into())
        );
    }
}
