//! The Deployment controller (`pkg/controller/deployment/sync.go` `getNewReplicaSet`,
//! `util/deployment_util.go`): a Deployment owns one ReplicaSet per pod template, named
//! `<deployment>-<pod-template-hash>`, whose labels, selector and template carry
//! `pod-template-hash`.
//!
//! An owned ReplicaSet (or an orphan the selector matches, which the controller adopts) whose
//! template equals the Deployment's, `pod-template-hash` aside (`EqualIgnoreHash`), is reused:
//! when it is the only one with replicas, it is scaled to `spec.replicas` (default 1). Otherwise a
//! new ReplicaSet is created with upstream's annotations (`deployment.kubernetes.io/revision`,
//! `desired-replicas`, `max-replicas`; the Deployment's own annotations copied except
//! `kubectl.kubernetes.io/last-applied-configuration` and the controller's), the Deployment as
//! controller, and the size `NewRSNewReplicas` gives it: all replicas when no older ReplicaSet has
//! any; with older ones, RollingUpdate's first step (`replicas + maxSurge` less the older
//! ReplicaSets' replicas, `maxSurge` 25% rounded up by default) and Recreate's (nothing until the
//! older ReplicaSets are at 0 and their pods that are not Failed or Succeeded are gone, then all
//! replicas). A plan is one instant: it shows that first step and says so in a note; later steps
//! need pods to become available or to terminate, which a plan does not simulate.
//!
//! `spec.paused`: no new ReplicaSet (a paused Deployment only scales the one it has).
//!
//! Deviation: the hash is muster's ([`crate::naming::template_hash`]); a name clash with a
//! ReplicaSet of another template bumps the collision count, as upstream does on `AlreadyExists`.

use muster_api::PodObject;
use std::collections::BTreeMap;

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::naming::template_hash;
use crate::pods::{Owner, Pods, phase};
use crate::{Created, CreatedObject, Expansion, ObjectRef, Workloads};

/// `apps.DefaultDeploymentUniqueLabelKey`.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// Annotations of a Deployment never copied to its ReplicaSets (`skipCopyAnnotation`).
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// What a Deployment's sync does to its ReplicaSets.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing, with why when it is worth a word.
    Nothing(Option<String>),
    /// Scale the existing ReplicaSet (index into the ReplicaSets given) to this many replicas.
    Scale(usize, i32),
    /// Create this ReplicaSet; the note says what a plan leaves for later, if anything.
    Create(Box<ReplicaSet>, Option<String>),
}

pub(crate) fn sync_all(w: &mut Workloads, pods: &Pods<'_>, out: &mut Expansion) {
    for d in &w.deployments {
        let by = ObjectRef::of(Deployment::KIND, &d.metadata);
        match sync(d, &w.replica_sets, pods) {
            Step::Nothing(note) => out.notes.extend(note.map(|n| format!("{by}: {n}"))),
            Step::Scale(i, n) => {
                let rs = &mut w.replica_sets[i];
                let before = rs.spec.replicas.unwrap_or(1);
                out.notes.push(format!(
                    "{by}: ReplicaSet {} scaled from {before} to {n} replicas",
                    rs.metadata.name.as_deref().unwrap_or_default()
                ));
                rs.spec.replicas = Some(n);
            }
            Step::Create(mut rs, note) => {
                // The API server gives it a UID: a derived one, as for input objects without.
                let (ns, name) = (by.namespace.as_str(), rs.metadata.name.clone().unwrap_or_default());
                rs.metadata.uid = Some(crate::naming::uid(ReplicaSet::KIND, ns, &name));
                out.notes.extend(note.map(|n| format!("{by}: {n}")));
                w.replica_sets.push((*rs).clone());
                out.created.push(Created { object: CreatedObject::ReplicaSet(rs), by: by.clone(), root: by.clone() });
            }
        }
    }
}

/// One sync of `d` given the ReplicaSets and pods that exist (other namespaces' are ignored).
pub fn sync(d: &Deployment, replica_sets: &[ReplicaSet], pods: &Pods<'_>) -> Step {
    let spec = &d.spec;
    if d.metadata.deletion_timestamp.is_some() {
        return Step::Nothing(None);
    }
    let owner = Owner { api_version: Deployment::API_VERSION, kind: Deployment::KIND, meta: &d.metadata };
    let owned: Vec<(usize, &ReplicaSet)> =
        replica_sets.iter().enumerate().filter(|(_, rs)| owner.claims(&rs.metadata, &spec.selector)).collect();
    let replicas = spec.replicas.unwrap_or(1);
    let size = |rs: &ReplicaSet| rs.spec.replicas.unwrap_or(1);
    let current =
        owned.iter().find(|(_, rs)| rs.spec.template.as_ref().is_some_and(|t| equal_ignore_hash(t, &spec.template)));
    if let Some(&(i, rs)) = current {
        let others_active = owned.iter().any(|(j, o)| *j != i && size(o) > 0);
        return if others_active {
            Step::Nothing(Some(format!(
                "a rollout is in progress (older ReplicaSets still have replicas): ReplicaSet {} is left at {} of {replicas} replicas; later steps need pods to become available, which a plan does not simulate",
                rs.metadata.name.as_deref().unwrap_or_default(),
                size(rs)
            )))
        } else if size(rs) != replicas {
            Step::Scale(i, replicas)
        } else {
            Step::Nothing(None)
        };
    }
    if spec.paused == Some(true) {
        return Step::Nothing(Some("paused: no new ReplicaSet is created".into()));
    }
    let old_replicas: i32 = owned.iter().map(|(_, rs)| size(rs)).sum();
    let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    if recreate && old_replicas > 0 {
        return Step::Nothing(Some(format!(
            "strategy Recreate: the older ReplicaSets ({old_replicas} replicas) are scaled to 0 first; no new ReplicaSet until their pods are gone"
        )));
    }
    // `oldPodsRunning`: Recreate also waits for the old ReplicaSets' pods that are not Failed or
    // Succeeded (terminating ones included).
    let old_pods: usize = owned
        .iter()
        .map(|(_, rs)| {
            let o = Owner { api_version: ReplicaSet::API_VERSION, kind: ReplicaSet::KIND, meta: &rs.metadata };
            let running = |p: &&dyn PodObject| !matches!(phase(*p), "Failed" | "Succeeded");
            pods.iter().filter(|p| o.claims(p.meta(), &rs.spec.selector)).filter(running).count()
        })
        .sum();
    if recreate && old_pods > 0 {
        return Step::Nothing(Some(format!(
            "strategy Recreate: {old_pods} pod(s) of the older ReplicaSets still run; no new ReplicaSet until they are gone"
        )));
    }
    let surge = if recreate { 0 } else { max_surge(d) };
    let new_replicas = if recreate { replicas } else { (replicas + surge - old_replicas).clamp(0, replicas) };
    let note = (!owned.is_empty()).then(|| {
        format!(
            "rolling update: the new ReplicaSet starts with {new_replicas} of {replicas} replicas (maxSurge {surge}, {old_replicas} in older ReplicaSets); later steps need pods to become available, which a plan does not simulate"
        )
    });
    let revision = owned
        .iter()
        .filter_map(|(_, rs)| rs.metadata.annotations.as_ref()?.get(REVISION)?.parse::<i64>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    let ns = owner.namespace();
    let mut collisions = d.status.as_ref().and_then(|s| s.collision_count);
    let (name, hash) = loop {
        let hash = template_hash(&spec.template, collisions);
        let name = format!("{}-{hash}", owner.name());
        let clash = replica_sets.iter().any(|rs| {
            rs.metadata.namespace.as_deref().unwrap_or("default") == ns && rs.metadata.name.as_deref() == Some(&name)
        });
        if !clash {
            break (name, hash);
        }
        collisions = Some(collisions.unwrap_or(0) + 1);
    };
    let mut template = spec.template.clone();
    let labels = with_hash(template.metadata.as_ref().and_then(|m| m.labels.clone()), &hash);
    template.metadata.get_or_insert_with(Default::default).labels = Some(labels.clone());
    let mut selector = spec.selector.clone();
    selector.match_labels.get_or_insert_with(Default::default).insert(POD_TEMPLATE_HASH.into(), hash.clone());
    let mut annotations: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert(REVISION.into(), revision.to_string());
    annotations.insert(DESIRED_REPLICAS.into(), replicas.to_string());
    annotations.insert(MAX_REPLICAS.into(), (replicas + surge).to_string());
    let rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(ns.into()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner.controller_ref()]),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(new_replicas),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        },
        status: None,
    };
    Step::Create(Box::new(rs), note)
}

fn with_hash(labels: Option<BTreeMap<String, String>>, hash: &str) -> BTreeMap<String, String> {
    let mut l = labels.unwrap_or_default();
    l.insert(POD_TEMPLATE_HASH.into(), hash.into());
    l
}

/// `EqualIgnoreHash`: the templates are equal once `pod-template-hash` is removed from both.
fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    fn strip(t: &PodTemplateSpec) -> PodTemplateSpec {
        let mut t = t.clone();
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.remove(POD_TEMPLATE_HASH);
            if l.is_empty() {
                t.metadata.as_mut().unwrap().labels = None;
            }
        }
        t
    }
    strip(a) == strip(b)
}

/// `MaxSurge`: RollingUpdate's `maxSurge` (default 25%) of `spec.replicas`, percentages rounded
/// up; 0 for other strategies.
fn max_surge(d: &Deployment) -> i32 {
    let spec = &d.spec;
    let replicas = spec.replicas.unwrap_or(1);
    let strategy = spec.strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()).is_some_and(|t| t != "RollingUpdate") {
        return 0;
    }
    let v = strategy.and_then(|s| s.rolling_update.as_ref()).and_then(|r| r.max_surge.clone());
    match v.unwrap_or(IntOrString::String("25%".into())) {
        IntOrString::Int(n) => n,
        IntOrString::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) => i32::try_from((i64::from(replicas) * p + 99) / 100).unwrap_or(i32::MAX),
            None => 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy};

    use super::*;
    use crate::testing::{meta, selector, template};

    fn deployment(replicas: Option<i32>) -> Deployment {
        let mut m = meta("ml", "web");
        m.uid = Some("d-uid".into());
        m.annotations = Some(
            [
                ("team".to_string(), "a".to_string()),
                ("kubectl.kubernetes.io/last-applied-configuration".into(), "{}".into()),
            ]
            .into(),
        );
        Deployment {
            metadata: m,
            spec: DeploymentSpec {
                replicas,
                selector: selector(&[("app", "web")]),
                template: template(&[("app", "web")]),
                ..Default::default()
            },
            status: None,
        }
    }

    fn created(step: Step) -> ReplicaSet {
        match step {
            Step::Create(rs, _) => *rs,
            other => panic!("expected a new ReplicaSet, got {other:?}"),
        }
    }

    #[test]
    fn a_new_deployment_gets_a_replica_set_named_by_its_template_hash() {
        let d = deployment(Some(3));
        let rs = created(sync(&d, &[], &Pods::new(&[])));
        let hash = template_hash(&d.spec.template, None);
        assert_eq!(rs.metadata.name.as_deref(), Some(format!("web-{hash}").as_str()));
        assert_eq!(rs.metadata.namespace.as_deref(), Some("ml"));
        let labels = rs.metadata.labels.as_ref().unwrap();
        assert_eq!((labels["app"].as_str(), labels[POD_TEMPLATE_HASH].as_str()), ("web", hash.as_str()));
        let spec = &rs.spec;
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH], hash);
        let t = spec.template.as_ref().unwrap().metadata.as_ref().unwrap();
        assert_eq!(t.labels.as_ref().unwrap()[POD_TEMPLATE_HASH], hash);
        let r = &rs.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (r.kind.as_str(), r.name.as_str(), r.uid.as_str(), r.controller),
            ("Deployment", "web", "d-uid", Some(true))
        );
        let a = rs.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[REVISION], "1");
        assert_eq!(a[DESIRED_REPLICAS], "3");
        assert_eq!(a[MAX_REPLICAS], "4"); // 25% of 3, rounded up
        assert_eq!(a["team"], "a");
        assert!(!a.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
    }

    #[test]
    fn replicas_default_to_one() {
        assert_eq!(created(sync(&deployment(None), &[], &Pods::new(&[]))).spec.replicas, Some(1));
    }

    #[test]
    fn an_existing_replica_set_with_the_same_template_is_reused_and_scaled() {
        let d = deployment(Some(3));
        let mut rs = created(sync(&d, &[], &Pods::new(&[])));
        assert_eq!(sync(&d, std::slice::from_ref(&rs), &Pods::new(&[])), Step::Nothing(None));
        rs.spec.replicas = Some(1);
        assert_eq!(sync(&d, &[rs], &Pods::new(&[])), Step::Scale(0, 3));
    }

    #[test]
    fn paused_creates_nothing() {
        let mut d = deployment(Some(3));
        d.spec.paused = Some(true);
        assert!(matches!(sync(&d, &[], &Pods::new(&[])), Step::Nothing(Some(_))));
    }

    #[test]
    fn a_new_template_starts_a_rolling_update_at_max_surge() {
        let d = deployment(Some(4));
        let old = created(sync(&d, &[], &Pods::new(&[])));
        let mut d2 = d.clone();
        d2.spec.template.spec.as_mut().unwrap().containers[0].image = Some("busybox:2".into());
        let rs = created(sync(&d2, std::slice::from_ref(&old), &Pods::new(&[])));
        // 4 + 25% of 4 (1) - 4 old = 1 new replica; revision 2.
        assert_eq!(rs.spec.replicas, Some(1));
        assert_eq!(rs.metadata.annotations.as_ref().unwrap()[REVISION], "2");
        assert_ne!(rs.metadata.name, old.metadata.name);
        d2.spec.strategy = Some(DeploymentStrategy { type_: Some("Recreate".into()), ..Default::default() });
        assert!(matches!(sync(&d2, std::slice::from_ref(&old), &Pods::new(&[])), Step::Nothing(Some(_))));
        // Recreate: the old ReplicaSet at 0 replicas, but one of its pods still running.
        let mut scaled = old.clone();
        scaled.spec.replicas = Some(0);
        let hash = old.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH].clone();
        let old_name = old.metadata.name.as_deref().unwrap();
        let running = crate::testing::pod(
            "ml",
            "p",
            &[("app", "web"), (POD_TEMPLATE_HASH, &hash)],
            Some(("ReplicaSet", old_name, "")),
            "Running",
        );
        assert!(matches!(sync(&d2, std::slice::from_ref(&scaled), &Pods::new(&[&running])), Step::Nothing(Some(_))));
        let done = crate::testing::pod("ml", "p", &[("app", "web")], Some(("ReplicaSet", old_name, "")), "Succeeded");
        assert_eq!(created(sync(&d2, &[scaled], &Pods::new(&[&done]))).spec.replicas, Some(4));
    }

    #[test]
    fn a_name_clash_bumps_the_collision_count() {
        let d = deployment(Some(1));
        let mut other = created(sync(&d, &[], &Pods::new(&[])));
        other.metadata.owner_references = None;
        other.spec.template = Some(template(&[("app", "db")]));
        other.spec.selector = selector(&[("app", "db")]);
        let rs = created(sync(&d, std::slice::from_ref(&other), &Pods::new(&[])));
        assert_ne!(rs.metadata.name, other.metadata.name);
        let hash = template_hash(&d.spec.template, Some(1));
        assert_eq!(rs.metadata.name.as_deref(), Some(format!("web-{hash}").as_str()));
    }

    #[test]
    fn expand_runs_deployment_then_replica_set() {
        let mut w = Workloads { deployments: vec![deployment(Some(2))], ..Default::default() };
        let out = crate::expand(&mut w, &[]);
        assert_eq!(out.created.len(), 3);
        assert_eq!(out.created[0].object.kind(), "ReplicaSet");
        let rs_name = out.created[0].object.metadata().name.clone().unwrap();
        for c in &out.created[1..] {
            assert_eq!(c.by.to_string(), format!("ReplicaSet ml/{rs_name}"));
            assert_eq!(c.root.to_string(), "Deployment ml/web");
            let p = match &c.object {
                CreatedObject::Pod(p) => p,
                CreatedObject::ReplicaSet(_) => unreachable!(),
            };
            assert!(p.metadata.name.as_deref().unwrap().starts_with(&format!("{rs_name}-")));
            assert!(p.metadata.labels.as_ref().unwrap().contains_key(POD_TEMPLATE_HASH));
        }
        // Run again with what was created: nothing more.
        let pods: Vec<_> = out.pods().cloned().collect();
        let refs: Vec<&dyn crate::PodObject> = pods.iter().map(|p| p as &dyn crate::PodObject).collect();
        let again = crate::expand(&mut w, &refs);
        assert!(again.created.is_empty(), "{:?}", again.created);
    }
}
