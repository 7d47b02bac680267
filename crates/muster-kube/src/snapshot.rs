//! A read-only snapshot of a cluster for `muster plan --kubeconfig` and `muster why --kubeconfig`:
//! every object of the kinds the scheduler reads, listed once (in pages), as a `kind: List`
//! document the manifest loader reads like any file. Nothing is written. Workload controllers'
//! objects (Deployments, ReplicaSets, Jobs, ...) are not listed: their pods are in the cluster already, made by its own
//! controllers (so the default spread constraints see the Services' selectors, not theirs).

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde_json::{Value, json};

/// The cluster's objects, as one `v1 List` (JSON text).
pub async fn list_cluster(client: &Client) -> anyhow::Result<String> {
    let mut items = Vec::new();
    items.extend(all::<PriorityClass>(client).await?);
    items.extend(all::<Namespace>(client).await?);
    items.extend(all::<Node>(client).await?);
    items.extend(all::<DeviceClass>(client).await?);
    items.extend(all::<ResourceSlice>(client).await?);
    items.extend(all::<DeviceTaintRule>(client).await?);
    items.extend(all::<ResourceClaimTemplate>(client).await?);
    items.extend(all::<ResourceClaim>(client).await?);
    // Beta: the device topology a PodGroup inherits from its Workload [beyond upstream].
    items.extend(served::<k8s_openapi::api::scheduling::v1beta1::Workload>(client).await?);
    items.extend(all::<PodGroup>(client).await?);
    // Alpha: served only where the cluster enables it.
    items.extend(served::<k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup>(client).await?);
    items.extend(all::<PodDisruptionBudget>(client).await?);
    // Services: the pods they select spread by PodTopologySpread's default constraints.
    items.extend(all::<k8s_openapi::api::core::v1::Service>(client).await?);
    // The storage kinds the volume plugins read; a server that does not serve one (a test
    // double) has none.
    items.extend(served::<StorageClass>(client).await?);
    items.extend(served::<CSIDriver>(client).await?);
    items.extend(served::<CSINode>(client).await?);
    items.extend(served::<CSIStorageCapacity>(client).await?);
    items.extend(served::<PersistentVolume>(client).await?);
    items.extend(served::<PersistentVolumeClaim>(client).await?);
    items.extend(all::<Pod>(client).await?);
    Ok(serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))?)
}

/// [`all`], or nothing when the server answers 404 Not Found for the kind.
async fn served<K>(client: &Client) -> anyhow::Result<Vec<Value>>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    match api.list(&ListParams::default().limit(1)).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        _ => all::<K>(client).await,
    }
}

/// Every object of one kind, page by page, without `managedFields` (never read, often half of
/// an object).
async fn all<K>(client: &Client) -> anyhow::Result<Vec<Value>>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.map_err(|e| anyhow::anyhow!("listing {}: {e}", K::plural(&())))?;
        for mut o in page.items {
            o.meta_mut().managed_fields = None;
            out.push(serde_json::to_value(&o)?);
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}
