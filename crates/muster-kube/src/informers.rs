//! Watches: one kube-runtime watcher per kind, each reporting to the scheduler's loop through one
//! bounded channel (a slow loop slows the watches, nothing queues without bound). A kind the API
//! server does not serve (an API version not enabled) is reported listed and empty at once, so
//! that a cluster without the alpha or beta APIs muster reads is still scheduled. A watcher that
//! lists again (after a 410 Gone or a dropped connection) reports the objects that went missing
//! meanwhile as deletions, then that its kind is synced again.

use std::collections::HashSet;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::sync::mpsc;

use crate::Msg;
use crate::observed::{Kind, Watched, key_of};

/// Starts the watches of every kind the engine reads.
pub fn spawn_all(client: &Client, tx: &mpsc::Sender<Msg>) -> Vec<tokio::task::JoinHandle<()>> {
    use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
    use k8s_openapi::api::core::v1::{
        Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
    };
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    use k8s_openapi::api::scheduling::v1alpha3;
    use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
    use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
    vec![
        spawn::<PriorityClass>(Api::all(client.clone()), tx.clone()),
        spawn::<Namespace>(Api::all(client.clone()), tx.clone()),
        spawn::<Node>(Api::all(client.clone()), tx.clone()),
        spawn::<DeviceClass>(Api::all(client.clone()), tx.clone()),
        spawn::<ResourceSlice>(Api::all(client.clone()), tx.clone()),
        spawn::<DeviceTaintRule>(Api::all(client.clone()), tx.clone()),
        spawn::<PodDisruptionBudget>(Api::all(client.clone()), tx.clone()),
        spawn::<Workload>(Api::all(client.clone()), tx.clone()),
        spawn::<PodGroup>(Api::all(client.clone()), tx.clone()),
        spawn_unless::<v1alpha3::PodGroup, PodGroup>(Api::all(client.clone()), Api::all(client.clone()), tx.clone()),
        spawn::<v1alpha3::CompositePodGroup>(Api::all(client.clone()), tx.clone()),
        spawn::<ResourceClaim>(Api::all(client.clone()), tx.clone()),
        spawn::<StorageClass>(Api::all(client.clone()), tx.clone()),
        spawn::<CSIDriver>(Api::all(client.clone()), tx.clone()),
        spawn::<CSINode>(Api::all(client.clone()), tx.clone()),
        spawn::<CSIStorageCapacity>(Api::all(client.clone()), tx.clone()),
        spawn::<PersistentVolume>(Api::all(client.clone()), tx.clone()),
        spawn::<PersistentVolumeClaim>(Api::all(client.clone()), tx.clone()),
        spawn::<Service>(Api::all(client.clone()), tx.clone()),
        spawn::<ReplicationController>(Api::all(client.clone()), tx.clone()),
        spawn::<ReplicaSet>(Api::all(client.clone()), tx.clone()),
        spawn::<StatefulSet>(Api::all(client.clone()), tx.clone()),
        spawn::<Pod>(Api::all(client.clone()), tx.clone()),
    ]
}

fn spawn<K: Watched>(api: Api<K>, tx: mpsc::Sender<Msg>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(watch(api, tx))
}

/// Watches `K` only where the API server does not serve `Preferred`, another version of the same
/// resource: it serves one object in every version it has, so watching two would read each
/// twice. (PodGroups: `v1beta1`, else `v1alpha3`.)
fn spawn_unless<K: Watched, Preferred: Watched>(
    api: Api<K>,
    preferred: Api<Preferred>,
    tx: mpsc::Sender<Msg>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if served(&preferred).await {
            let what = format!("{}/{}", Preferred::api_version(&()), Preferred::plural(&()));
            tracing::debug!(resource = %what, "served: the other versions of the resource are read through it");
            let _ = tx.send(Msg::Synced(K::KIND)).await;
            return;
        }
        watch(api, tx).await;
    })
}

async fn watch<K: Watched>(api: Api<K>, tx: mpsc::Sender<Msg>) {
    if !served(&api).await {
        let what = format!("{}/{}", K::api_version(&()), K::plural(&()));
        tracing::warn!(
            resource = %what,
            "not served by this API server (its API group version or feature gate is off): none of these objects exist for muster"
        );
        let _ = tx.send(Msg::Synced(K::KIND)).await;
        return;
    }
    let mut stream = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut relist = Relist::default();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                for msg in relist.on(event) {
                    if tx.send(msg).await.is_err() {
                        return; // the loop is gone
                    }
                }
            }
            Err(e) => tracing::warn!(kind = ?K::KIND, error = %e, "watch failed; retrying with backoff"),
        }
    }
}

/// Whether the API server serves the kind: a listing answered 404 Not Found means its API group
/// version is not enabled (an alpha or beta API such as `scheduling.k8s.io/v1beta1` on a cluster
/// that did not turn it on). Any other answer counts as served: the watch then retries as usual.
async fn served<K: Watched>(api: &Api<K>) -> bool {
    !matches!(api.list(&kube::api::ListParams::default().limit(1)).await, Err(kube::Error::Api(e)) if e.code == 404)
}

/// The objects of one kind a watch has reported, to turn a fresh listing into deletions.
struct Relist<K> {
    known: HashSet<String>,
    listing: Option<HashSet<String>>,
    _kind: std::marker::PhantomData<K>,
}

impl<K> Default for Relist<K> {
    fn default() -> Self {
        Relist { known: HashSet::new(), listing: None, _kind: std::marker::PhantomData }
    }
}

impl<K: Watched> Relist<K> {
    fn on(&mut self, event: Event<K>) -> Vec<Msg> {
        match event {
            Event::Init => {
                self.listing = Some(HashSet::new());
                Vec::new()
            }
            Event::InitApply(o) => {
                self.listing.get_or_insert_with(HashSet::new).insert(key_of(o.meta()));
                vec![Msg::Apply(o.wrap())]
            }
            Event::InitDone => {
                let seen = self.listing.take().unwrap_or_default();
                let mut gone: Vec<String> = self.known.difference(&seen).cloned().collect();
                gone.sort();
                self.known = seen;
                let mut out: Vec<Msg> = gone.into_iter().map(|k| Msg::Delete(K::KIND, k)).collect();
                out.push(Msg::Synced(K::KIND));
                out
            }
            Event::Apply(o) => {
                self.known.insert(key_of(o.meta()));
                vec![Msg::Apply(o.wrap())]
            }
            Event::Delete(o) => {
                let key = key_of(o.meta());
                self.known.remove(&key);
                tracing::trace!(kind = ?K::KIND, name = %o.name_any(), "deleted");
                vec![Msg::Delete(K::KIND, key)]
            }
        }
    }
}

/// Every kind the loop waits for before its first schedule.
pub fn all_kinds() -> HashSet<Kind> {
    Kind::ALL.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use kube::api::ObjectMeta;

    fn node(name: &str) -> Node {
        Node { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() }
    }

    fn describe(msgs: &[Msg]) -> Vec<String> {
        msgs.iter()
            .map(|m| match m {
                Msg::Apply(o) => format!("apply {:?}", o.kind()),
                Msg::Delete(k, key) => format!("delete {k:?} {key}"),
                Msg::Synced(k) => format!("synced {k:?}"),
                Msg::Done(_) => "done".into(),
            })
            .collect()
    }

    #[test]
    fn a_relisting_reports_what_went_missing_as_deleted() {
        let mut r = Relist::<Node>::default();
        let mut out = Vec::new();
        for e in [Event::Init, Event::InitApply(node("a")), Event::InitApply(node("b")), Event::InitDone] {
            out.extend(r.on(e));
        }
        assert_eq!(describe(&out), ["apply Node", "apply Node", "synced Node"]);
        out.clear();
        for e in [Event::Apply(node("c")), Event::Init, Event::InitApply(node("b")), Event::InitDone] {
            out.extend(r.on(e));
        }
        assert_eq!(describe(&out), ["apply Node", "apply Node", "delete Node a", "delete Node c", "synced Node"]);
    }
}
