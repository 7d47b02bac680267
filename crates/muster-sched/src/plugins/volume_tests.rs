//! The volume plugins against tables shaped like upstream's unit tests (`volumerestrictions`,
//! `volumezone`, `nodevolumelimits`, `volumebinding`): cluster state → each node's verdict, or the
//! PreFilter message. The data is muster's own; the facts (which state gives which verdict and
//! reason) are upstream's. Counts per plugin are in the test names' tables.

use serde_json::{Value, json};

use crate::cluster::{Cluster, PodId};
use crate::explain::{NodeVerdict, explain_pod};
use crate::plugins::test_cluster::{cluster, node, pod};
use crate::volumes::Volumes;

/// Claim names, as a table's column.
type Names = &'static [&'static str];
/// A verdict on one node: `Ok(reason)` ("" fits) or `Err(PreFilter message)`.
type Want = Result<&'static str, &'static str>;

/// Storage objects from JSON: (kind, object) pairs.
fn storage(objects: &[Value]) -> Volumes {
    let mut v = Volumes { enabled: true, ..Volumes::default() };
    for o in objects {
        let name = o["metadata"]["name"].as_str().unwrap().to_string();
        match o["kind"].as_str().unwrap() {
            "PersistentVolumeClaim" => {
                let ns = o["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
                v.claims.insert((ns, name), serde_json::from_value(o.clone()).unwrap());
            }
            "PersistentVolume" => {
                v.volumes.insert(name, serde_json::from_value(o.clone()).unwrap());
            }
            "StorageClass" => {
                v.classes.insert(name, serde_json::from_value(o.clone()).unwrap());
            }
            "CSINode" => {
                v.csi_nodes.insert(name, serde_json::from_value(o.clone()).unwrap());
            }
            "CSIDriver" => {
                v.csi_drivers.insert(name, serde_json::from_value(o.clone()).unwrap());
            }
            "CSIStorageCapacity" => {
                let ns = o["metadata"]["namespace"].as_str().unwrap_or("default");
                v.capacities.insert(format!("{ns}/{name}"), serde_json::from_value(o.clone()).unwrap());
            }
            k => panic!("{k}"),
        }
    }
    v
}

/// The verdicts for pod `name`: `Err(PreFilter message)` or each node's reasons ("" = fits).
fn judge(c: &Cluster, name: &str) -> Result<Vec<String>, String> {
    let id = PodId(c.pods.iter().position(|p| p.name() == name).unwrap() as u32);
    let e = explain_pod(c, id, None);
    if let Some(m) = e.pre_filter {
        return Err(m.to_string());
    }
    Ok(e.nodes
        .iter()
        .map(|n| match &n.verdict {
            NodeVerdict::Feasible => String::new(),
            NodeVerdict::Filter(r) | NodeVerdict::Volume { rejection: r, .. } => r.reasons.join("; "),
            other => format!("{other:?}"),
        })
        .collect())
}

fn claim(name: &str, class: &str, modes: &[&str], size: &str, volume: Option<&str>) -> Value {
    let mut c = json!({"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": modes, "storageClassName": class, "resources": {"requests": {"storage": size}}}});
    if let Some(v) = volume {
        c["spec"]["volumeName"] = json!(v);
        c["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes"});
    }
    c
}

fn volume(name: &str, class: &str, size: &str, labels: Value, extra: Value) -> Value {
    let mut v = json!({"kind": "PersistentVolume", "metadata": {"name": name, "labels": labels},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "csi": {"driver": "d", "volumeHandle": name}},
        "status": {"phase": "Available"}});
    for (k, x) in extra.as_object().into_iter().flatten() {
        v["spec"][k] = x.clone();
    }
    v
}

fn class(name: &str, provisioner: &str, wait: bool, topologies: Value) -> Value {
    json!({"kind": "StorageClass", "metadata": {"name": name}, "provisioner": provisioner,
        "volumeBindingMode": if wait { "WaitForFirstConsumer" } else { "Immediate" }, "allowedTopologies": topologies})
}

fn claims_volumes(names: &[&str]) -> Value {
    let v: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": n}}))
        .collect();
    json!({"volumes": v})
}

fn host_affinity(host: &str) -> Value {
    json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}})
}

const DISK: &str = "node(s) had no available disk";

/// VolumeRestrictions' disk tables (GCE PD, AWS EBS, RBD, iSCSI), four cases each as upstream:
/// nothing, the node's pod alone, the same disk, another disk — 16 cases — and read-only pairs.
#[test]
fn disk_conflicts() {
    let disks = [
        (json!({"gcePersistentDisk": {"pdName": "foo"}}), json!({"gcePersistentDisk": {"pdName": "bar"}})),
        (json!({"awsElasticBlockStore": {"volumeID": "foo"}}), json!({"awsElasticBlockStore": {"volumeID": "bar"}})),
        (
            json!({"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar"}}),
            json!({"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar"}}),
        ),
        (
            json!({"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}}),
            json!({"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target02", "lun": 0}}),
        ),
    ];
    let with = |src: &Value| {
        let mut v = json!({"name": "d"});
        for (k, x) in src.as_object().unwrap() {
            v[k] = x.clone();
        }
        json!({"volumes": [v]})
    };
    let mut n = 0;
    for (one, two) in &disks {
        let cases: [(Value, Option<Value>, &str); 4] = [
            (json!({}), None, ""),
            (json!({}), Some(with(one)), ""),
            (with(one), Some(with(one)), DISK),
            (with(two), Some(with(one)), ""),
        ];
        for (incoming, existing, want) in cases {
            let mut pods = vec![pod("new", &[], None, incoming)];
            pods.extend(existing.map(|e| pod("old", &[], Some("n1"), e)));
            let mut c = cluster(vec![node("n1", &[])], pods);
            c.volumes.enabled = true;
            assert_eq!(judge(&c, "new"), Ok(vec![want.to_string()]), "{one}");
            n += 1;
        }
    }
    // Read-only on both sides shares a GCE disk and an iSCSI target; EBS never shares.
    let ro = |src: Value| with(&src);
    for (a, b, want) in [
        (
            json!({"gcePersistentDisk": {"pdName": "foo", "readOnly": true}}),
            json!({"gcePersistentDisk": {"pdName": "foo", "readOnly": true}}),
            "",
        ),
        (
            json!({"gcePersistentDisk": {"pdName": "foo", "readOnly": true}}),
            json!({"gcePersistentDisk": {"pdName": "foo"}}),
            DISK,
        ),
        (
            json!({"awsElasticBlockStore": {"volumeID": "foo", "readOnly": true}}),
            json!({"awsElasticBlockStore": {"volumeID": "foo", "readOnly": true}}),
            DISK,
        ),
        (
            json!({"rbd": {"monitors": ["a"], "image": "i", "readOnly": true}}),
            json!({"rbd": {"monitors": ["a"], "image": "i", "pool": "rbd", "readOnly": true}}),
            "",
        ),
        (
            json!({"rbd": {"monitors": ["a"], "image": "i"}}),
            json!({"rbd": {"monitors": ["a"], "image": "i", "pool": "rbd"}}),
            DISK,
        ),
    ] {
        let mut c =
            cluster(vec![node("n1", &[])], vec![pod("new", &[], None, ro(a)), pod("old", &[], Some("n1"), ro(b))]);
        c.volumes.enabled = true;
        assert_eq!(judge(&c, "new"), Ok(vec![want.to_string()]));
        n += 1;
    }
    assert_eq!(n, 21);
}

/// VolumeRestrictions' ReadWriteOncePod table: no claim in use, in use by a pod on some node
/// (every node is refused), a missing claim, a claim in use that is not ReadWriteOncePod.
#[test]
fn read_write_once_pod() {
    let rwop = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";
    let objects = vec![
        claim("rwop-1", "c", &["ReadWriteOncePod"], "1Gi", Some("pv-1")),
        claim("rwop-2", "c", &["ReadWriteOncePod"], "1Gi", Some("pv-2")),
        claim("rwo", "c", &["ReadWriteOnce"], "1Gi", Some("pv-3")),
        volume("pv-1", "c", "1Gi", json!({}), json!({})),
        volume("pv-2", "c", "1Gi", json!({}), json!({})),
        volume("pv-3", "c", "1Gi", json!({}), json!({})),
    ];
    let cases: [(Names, Names, Want); 5] = [
        (&["rwop-1"], &[], Ok("")),
        (&["rwop-1"], &["rwop-1"], Ok(rwop)),
        (&["rwop-2"], &["rwop-1"], Ok("")),
        (&["missing"], &[], Err("persistentvolumeclaim \"missing\" not found")),
        (&["rwo"], &["rwo"], Ok("")),
    ];
    for (mine, theirs, want) in cases {
        let mut pods = vec![pod("new", &[], None, claims_volumes(mine))];
        if !theirs.is_empty() {
            pods.push(pod("old", &[], Some("n2"), claims_volumes(theirs)));
        }
        let mut c = cluster(vec![node("n1", &[]), node("n2", &[])], pods);
        c.volumes = storage(&objects);
        let got = judge(&c, "new");
        match want {
            Ok(r) => assert_eq!(got, Ok(vec![r.to_string(), r.to_string()]), "{mine:?}"),
            Err(m) => assert_eq!(got, Err(m.to_string())),
        }
    }
}

/// VolumeZone's single- and multi-zone tables: beta and GA labels, regions, multi-zone values,
/// nodes without labels, unbound WaitForFirstConsumer claims skipped, Immediate ones refused.
#[test]
fn volume_zone() {
    const CONFLICT: &str = "node(s) had no available volume zone";
    let beta_zone = "failure-domain.beta.kubernetes.io/zone";
    let beta_region = "failure-domain.beta.kubernetes.io/region";
    let zone = "topology.kubernetes.io/zone";
    let region = "topology.kubernetes.io/region";
    let objects = vec![
        volume("vol-1", "c", "1Gi", json!({beta_zone: "us-west1-a"}), json!({})),
        volume("vol-2", "c", "1Gi", json!({beta_region: "us-west1-b"}), json!({})),
        volume("vol-3", "c", "1Gi", json!({zone: "us-west1-a"}), json!({})),
        volume("vol-4", "c", "1Gi", json!({region: "us-west1"}), json!({})),
        volume("vol-5", "c", "1Gi", json!({zone: "us-west1-a__us-west1-b"}), json!({})),
        claim("pvc-1", "c", &["ReadWriteOnce"], "1Gi", Some("vol-1")),
        claim("pvc-2", "c", &["ReadWriteOnce"], "1Gi", Some("vol-2")),
        claim("pvc-3", "c", &["ReadWriteOnce"], "1Gi", Some("vol-3")),
        claim("pvc-4", "c", &["ReadWriteOnce"], "1Gi", Some("vol-4")),
        claim("pvc-5", "c", &["ReadWriteOnce"], "1Gi", Some("vol-5")),
        claim("pvc-wait", "wait", &["ReadWriteOnce"], "1Gi", None),
        claim("pvc-now", "now", &["ReadWriteOnce"], "1Gi", None),
        claim("pvc-missing-pv", "c", &["ReadWriteOnce"], "1Gi", Some("gone")),
        class("wait", "p", true, json!(null)),
        class("now", "p", false, json!(null)),
    ];
    type Labels = Vec<(&'static str, &'static str)>;
    let cases: Vec<(Names, Labels, Want)> = vec![
        (&[], vec![(beta_zone, "us-west1-a")], Ok("")),
        (&["pvc-1"], vec![], Ok("")),
        (&["pvc-1"], vec![(beta_zone, "us-west1-a")], Ok("")),
        (&["pvc-1"], vec![(beta_zone, "us-west1-b")], Ok(CONFLICT)),
        (&["pvc-1"], vec![(zone, "us-west1-a")], Ok("")),
        (&["pvc-1"], vec![(zone, "us-west1-b")], Ok(CONFLICT)),
        (&["pvc-1"], vec![("uselessLabel", "none")], Ok("")),
        (&["pvc-2"], vec![(beta_region, "us-west1-b")], Ok("")),
        (&["pvc-2"], vec![(beta_region, "no_us-west1-b")], Ok(CONFLICT)),
        (&["pvc-3"], vec![(zone, "us-west1-a")], Ok("")),
        (&["pvc-3"], vec![(beta_zone, "us-west1-a")], Ok(CONFLICT)),
        (&["pvc-4"], vec![(region, "us-west1")], Ok("")),
        (&["pvc-4"], vec![(region, "us-east1"), (zone, "us-west1-a")], Ok(CONFLICT)),
        (&["pvc-5"], vec![(zone, "us-west1-b")], Ok("")),
        (&["pvc-5"], vec![(zone, "us-west1-c")], Ok(CONFLICT)),
        (&["pvc-1", "pvc-3"], vec![(zone, "us-west1-a")], Ok("")),
        (&["pvc-wait"], vec![(zone, "us-west1-a")], Ok("")),
        (&["pvc-now"], vec![(zone, "us-west1-a")], Err("pod has unbound immediate PersistentVolumeClaims")),
        (&["pvc-missing-pv"], vec![(zone, "us-west1-a")], Err("persistentvolume \"gone\" not found")),
        (&["nope"], vec![(zone, "us-west1-a")], Err("persistentvolumeclaim \"nope\" not found")),
    ];
    let n = cases.len();
    for (claims, labels, want) in cases {
        let mut c = cluster(vec![node("n1", &labels)], vec![pod("new", &[], None, claims_volumes(claims))]);
        c.volumes = storage(&objects);
        let got = judge(&c, "new");
        match want {
            Ok(r) => assert_eq!(got, Ok(vec![r.to_string()]), "{claims:?} on {labels:?}"),
            Err(m) => assert_eq!(got, Err(m.to_string()), "{claims:?}"),
        }
    }
    assert_eq!(n, 20);
}

/// NodeVolumeLimits' table (after `TestCSILimits`): limits per driver, volumes already attached
/// counted once, unbound claims counted under their class's provisioner, nodes without a CSINode
/// or a limit unlimited, other drivers not counted.
#[test]
fn csi_limits() {
    const MAX: &str = "node(s) exceed max volume count";
    let pv = |name: &str, driver: &str| {
        json!({"kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "c",
                     "csi": {"driver": driver, "volumeHandle": name}}})
    };
    let mut objects = vec![class("ebs", "ebs.csi", true, json!(null)), class("c", "p", false, json!(null))];
    for (i, d) in [("1", "ebs.csi"), ("2", "ebs.csi"), ("3", "ebs.csi"), ("4", "gce.csi")] {
        objects.push(pv(&format!("pv-{i}"), d));
        objects.push(claim(&format!("c-{i}"), "c", &["ReadWriteOnce"], "1Gi", Some(&format!("pv-{i}"))));
    }
    objects.push(claim("unbound-1", "ebs", &["ReadWriteOnce"], "1Gi", None));
    objects.push(claim("unbound-2", "ebs", &["ReadWriteOnce"], "1Gi", None));
    let csi_node = |limit: Option<i32>| {
        let mut d = json!({"name": "ebs.csi", "nodeID": "n1"});
        if let Some(l) = limit {
            d["allocatable"] = json!({"count": l});
        }
        json!({"kind": "CSINode", "metadata": {"name": "n1"}, "spec": {"drivers": [d]}})
    };
    let cases: Vec<(Names, Names, Option<i32>, &str)> = vec![
        (&["c-1"], &[], Some(1), ""),
        (&["c-1", "c-2"], &[], Some(1), MAX),
        (&["c-2"], &["c-1"], Some(1), MAX),
        (&["c-2"], &["c-1"], Some(2), ""),
        (&["c-1"], &["c-1"], Some(1), ""),
        (&["c-3"], &["c-1", "c-2"], Some(2), MAX),
        (&["c-4"], &["c-1", "c-2"], Some(2), ""),
        (&["c-3"], &["c-1", "c-2"], None, ""),
        (&["unbound-1"], &["c-1"], Some(1), MAX),
        (&["unbound-1"], &["unbound-1"], Some(1), ""),
        (&["unbound-2"], &["unbound-1"], Some(2), ""),
        (&["c-1"], &[], Some(0), MAX),
    ];
    let n = cases.len();
    for (mine, theirs, limit, want) in cases {
        let mut pods = vec![pod("new", &[], None, claims_volumes(mine))];
        if !theirs.is_empty() {
            pods.push(pod("old", &[], Some("n1"), claims_volumes(theirs)));
        }
        let mut c = cluster(vec![node("n1", &[("kubernetes.io/hostname", "n1")])], pods);
        let mut o = objects.clone();
        o.push(csi_node(limit));
        c.volumes = storage(&o);
        assert_eq!(judge(&c, "new"), Ok(vec![want.to_string()]), "{mine:?} with {theirs:?}, limit {limit:?}");
    }
    // No CSINode at all: no limit.
    let mut c = cluster(vec![node("n1", &[])], vec![pod("new", &[], None, claims_volumes(&["c-1", "c-2"]))]);
    c.volumes = storage(&objects);
    assert_eq!(judge(&c, "new"), Ok(vec![String::new()]));
    assert_eq!(n + 1, 13);
}

/// VolumeBinding's table (after `TestVolumeBinding`, the binder's `FindPodVolumes` and
/// `GetEligibleNodes` cases).
#[test]
fn volume_binding() {
    const NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
    const BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
    const NOT_ELIGIBLE: &str = "node(s) didn't satisfy plugin(s) [VolumeBinding]";
    let objects = vec![
        class("wait", "kubernetes.io/no-provisioner", true, json!(null)),
        class("immediate", "p", false, json!(null)),
        class("provision", "p", true, json!(null)),
        class(
            "provision-n2",
            "p",
            true,
            json!([{"matchLabelExpressions": [{"key": "kubernetes.io/hostname", "values": ["n2"]}]}]),
        ),
        volume("pv-n1", "wait", "5Gi", json!({}), host_affinity("n1")),
        volume("pv-n2-small", "wait", "1Gi", json!({}), host_affinity("n2")),
        volume("pv-n2-big", "wait", "10Gi", json!({}), host_affinity("n2")),
        volume(
            "pv-n1-rwx",
            "wait",
            "5Gi",
            json!({"tier": "gold"}),
            json!({"accessModes": ["ReadWriteMany"], "nodeAffinity": host_affinity("n1")["nodeAffinity"]}),
        ),
        volume(
            "pv-bound",
            "wait",
            "5Gi",
            json!({}),
            json!({"nodeAffinity": host_affinity("n1")["nodeAffinity"], "claimRef": {"namespace": "default", "name": "bound"}}),
        ),
        claim("bound", "wait", &["ReadWriteOnce"], "5Gi", Some("pv-bound")),
        volume(
            "pv-bound-n2",
            "wait",
            "5Gi",
            json!({}),
            json!({"nodeAffinity": host_affinity("n2")["nodeAffinity"], "claimRef": {"namespace": "default", "name": "bound-n2"}}),
        ),
        claim("bound-n2", "wait", &["ReadWriteOnce"], "5Gi", Some("pv-bound-n2")),
        volume(
            "pv-zoned",
            "wait",
            "5Gi",
            json!({}),
            json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z9"]}]}]}}}),
        ),
        claim("bound-zoned", "wait", &["ReadWriteOnce"], "5Gi", Some("pv-zoned")),
        claim("bound-missing", "wait", &["ReadWriteOnce"], "5Gi", Some("nowhere")),
        claim("unbound-2g", "wait", &["ReadWriteOnce"], "2Gi", None),
        claim("unbound-1g", "wait", &["ReadWriteOnce"], "1Gi", None),
        claim("unbound-20g", "wait", &["ReadWriteOnce"], "20Gi", None),
        claim("rwx", "wait", &["ReadWriteMany"], "1Gi", None),
        {
            let mut c = claim("gold", "wait", &["ReadWriteOnce"], "1Gi", None);
            c["spec"]["selector"] = json!({"matchLabels": {"tier": "silver"}});
            c
        },
        claim("immediate", "immediate", &["ReadWriteOnce"], "1Gi", None),
        claim("dynamic", "provision", &["ReadWriteOnce"], "100Gi", None),
        claim("dynamic-n2", "provision-n2", &["ReadWriteOnce"], "100Gi", None),
        {
            let mut c = claim("selected", "provision", &["ReadWriteOnce"], "1Gi", None);
            c["metadata"]["annotations"] = json!({"volume.kubernetes.io/selected-node": "n2"});
            c
        },
        {
            let mut c = claim("prebound", "wait", &["ReadWriteOnce"], "1Gi", None);
            c["spec"]["volumeName"] = json!("pv-n1");
            c
        },
    ];
    let both = |a: &str, b: &str| Ok(vec![a.to_string(), b.to_string()]);
    let cases: Vec<(Names, Result<Vec<String>, String>)> = vec![
        (&[], both("", "")),
        // A bound volume naming hostnames narrows the nodes at PreFilter; other affinity is Filter's.
        (&["bound"], both("", NOT_ELIGIBLE)),
        (&["bound-zoned"], both(NODE_CONFLICT, NODE_CONFLICT)),
        (&["bound", "bound-n2"], Err("node(s) didn't satisfy plugin VolumeBinding".into())),
        // VolumeZone's PreFilter looks the volume up (after VolumeBinding's PreFilter passed).
        (&["bound-missing"], Err("persistentvolume \"nowhere\" not found".into())),
        (&["unbound-2g"], both("", "")),
        (&["unbound-20g"], both(BIND_CONFLICT, BIND_CONFLICT)),
        (&["unbound-1g", "unbound-2g"], both(BIND_CONFLICT, "")),
        (&["rwx"], both("", BIND_CONFLICT)),
        (&["gold"], both(BIND_CONFLICT, BIND_CONFLICT)),
        (&["bound", "unbound-2g"], both("", NOT_ELIGIBLE)),
        (&["bound", "unbound-20g"], both(BIND_CONFLICT, NOT_ELIGIBLE)),
        (
            &["bound-zoned", "unbound-20g"],
            both(&format!("{NODE_CONFLICT}; {BIND_CONFLICT}"), &format!("{NODE_CONFLICT}; {BIND_CONFLICT}")),
        ),
        (&["immediate"], Err("pod has unbound immediate PersistentVolumeClaims".into())),
        (&["prebound"], Err("pod has unbound immediate PersistentVolumeClaims".into())),
        (&["missing"], Err("persistentvolumeclaim \"missing\" not found".into())),
        (&["dynamic"], both("", "")),
        (&["dynamic-n2"], both(BIND_CONFLICT, "")),
        (&["selected"], both(BIND_CONFLICT, "")),
    ];
    let n = cases.len();
    for (claims, want) in cases {
        let nodes =
            vec![node("n1", &[("kubernetes.io/hostname", "n1")]), node("n2", &[("kubernetes.io/hostname", "n2")])];
        let mut c = cluster(nodes, vec![pod("new", &[], None, claims_volumes(claims))]);
        c.volumes = storage(&objects);
        assert_eq!(judge(&c, "new"), want, "{claims:?}");
    }
    assert_eq!(n, 19);
}

/// The smallest matching volume is chosen, and a volume chosen for one claim of the pod is not
/// chosen again for the next.
#[test]
fn binding_chooses_the_smallest_and_each_volume_once() {
    use crate::plugins::volume_binding::{BindingState, find_pod_volumes};
    let objects = vec![
        class("wait", "kubernetes.io/no-provisioner", true, json!(null)),
        volume("big", "wait", "10Gi", json!({}), json!({})),
        volume("small", "wait", "2Gi", json!({}), json!({})),
        claim("a", "wait", &["ReadWriteOnce"], "1Gi", None),
        claim("b", "wait", &["ReadWriteOnce"], "1Gi", None),
    ];
    let v = storage(&objects);
    let labels = Default::default();
    let view = muster_api::selectors::NodeView { name: "n1", labels: &labels };
    let state =
        BindingState { namespace: "default".into(), delayed: vec!["a".into(), "b".into()], ..Default::default() };
    let found = find_pod_volumes(&state, view, &v);
    assert_eq!(
        found.static_bindings,
        vec![("a".to_string(), "small".to_string()), ("b".to_string(), "big".to_string())]
    );
    assert!(found.reasons.is_empty());
}

/// VolumeBinding's Score on each node, with `shape` as configured (scores 0..=10 as in
/// `pluginConfig`); the pod's claims are all still to bind.
fn storage_scores(objects: &[Value], claims: &[&str], nodes: &[&str], shape: &[(i64, i64)]) -> Vec<i64> {
    use crate::plugins::node_resources_fit::ShapePoint;
    use crate::plugins::volume_binding::{BindingState, score};
    let v = storage(objects);
    let shape: Vec<ShapePoint> =
        shape.iter().map(|&(utilization, s)| ShapePoint { utilization, score: s * 10 }).collect();
    let state = BindingState {
        namespace: "default".into(),
        delayed: claims.iter().map(|c| c.to_string()).collect(),
        ..Default::default()
    };
    nodes
        .iter()
        .map(|n| {
            let labels = std::collections::BTreeMap::from([("kubernetes.io/hostname".to_string(), n.to_string())]);
            score(&state, muster_api::selectors::NodeView { name: n, labels: &labels }, &v, &shape)
        })
        .collect()
}

fn on_host(host: &str) -> Value {
    json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}})
}

/// `shape` 0 → 0, 100 → 10: the fuller the better (the old VolumeCapacityPriority default).
const PACK: &[(i64, i64)] = &[(0, 0), (100, 10)];
/// 1.37's default with StorageCapacityScoring: 0 → 10, 100 → 0.
const SPREAD: &[(i64, i64)] = &[(0, 10), (100, 0)];

/// Static binding: each class's request against the capacity of the volume chosen on the node
/// (upstream's "local volumes with close capacity are preferred" cases).
#[test]
fn score_rates_the_chosen_volumes_of_each_class() {
    let mut objects = vec![
        class("fast", "kubernetes.io/no-provisioner", true, json!(null)),
        class("hdd", "kubernetes.io/no-provisioner", true, json!(null)),
        claim("c0", "fast", &["ReadWriteOnce"], "50Gi", None),
        claim("c1", "hdd", &["ReadWriteOnce"], "100Gi", None),
    ];
    for (name, class, size, host) in [
        ("a0", "fast", "200Gi", "a"),
        ("a1", "fast", "200Gi", "a"),
        ("a2", "hdd", "200Gi", "a"),
        ("b0", "fast", "100Gi", "b"),
        ("b1", "fast", "100Gi", "b"),
        ("b2", "hdd", "100Gi", "b"),
    ] {
        objects.push(volume(name, class, size, json!({}), json!({"nodeAffinity": on_host(host)["nodeAffinity"]})));
    }
    assert_eq!(storage_scores(&objects, &["c0"], &["a", "b"], PACK), vec![25, 50]);
    assert_eq!(storage_scores(&objects, &["c0"], &["a", "b"], SPREAD), vec![75, 50]);
    // Two classes: (25 + 50) / 2 rounds to 38 on a; (50 + 100) / 2 on b.
    assert_eq!(storage_scores(&objects, &["c0", "c1"], &["a", "b"], PACK), vec![38, 75]);
}

/// Dynamic provisioning: the claims of a class against the `capacity` of the CSIStorageCapacity
/// that admits the node; a claim whose driver does not track capacity takes no part.
#[test]
fn score_rates_the_capacity_published_for_the_node() {
    let capacity = |name: &str, class: &str, host: &str, capacity: Value, max: Value| {
        json!({"kind": "CSIStorageCapacity", "metadata": {"name": name, "namespace": "csi"},
            "storageClassName": class, "capacity": capacity, "maximumVolumeSize": max,
            "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": host}}})
    };
    let objects = vec![
        class("lvm", "lvm.csi.example.com", true, json!(null)),
        class("nfs", "nfs.example.com", true, json!(null)),
        json!({"kind": "CSIDriver", "metadata": {"name": "lvm.csi.example.com"}, "spec": {"storageCapacity": true}}),
        claim("scratch", "lvm", &["ReadWriteOnce"], "50Gi", None),
        claim("more", "lvm", &["ReadWriteOnce"], "30Gi", None),
        claim("shared", "nfs", &["ReadWriteOnce"], "1Ti", None),
        capacity("a", "lvm", "a", json!("100Gi"), json!(null)),
        capacity("b", "lvm", "b", json!("400Gi"), json!(null)),
        // Only a maximum volume size: room enough, but no capacity to rate.
        capacity("c", "lvm", "c", json!(null), json!("100Gi")),
    ];
    assert_eq!(storage_scores(&objects, &["scratch"], &["a", "b", "c"], SPREAD), vec![50, 88, 0]);
    // Both claims of the class count against one capacity: 80 of 100, 80 of 400.
    assert_eq!(storage_scores(&objects, &["scratch", "more"], &["a", "b"], SPREAD), vec![20, 80]);
    // The nfs class's driver publishes nothing: it takes no part.
    assert_eq!(storage_scores(&objects, &["scratch", "shared"], &["a", "b"], SPREAD), vec![50, 88]);
    assert_eq!(storage_scores(&objects, &["shared"], &["a"], SPREAD), vec![0]);
}
