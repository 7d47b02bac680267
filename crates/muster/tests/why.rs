//! `muster why`: the verdict, then each node's first failing Filter and the device accounting,
//! for one cause per snapshot (tests/why/ and the scenarios that already show a cause).

mod common;
use common::muster;

/// `muster why TARGET PATHS...`: exit 0, and the command line with its output (for a snapshot).
fn why(target: &str, paths: &[&str]) -> String {
    let mut args = vec!["why", target];
    args.extend(paths);
    let o = muster(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    format!("$ muster {}\n{}", args.join(" "), String::from_utf8(o.stdout).unwrap())
}

#[test]
fn insufficient_cpu_unschedulable_node_and_untolerated_taint() {
    let out = why("pod/data/etl-big", &["examples/quickstart"]);
    assert!(out.contains("node cpu-a1  NodeResourcesFit: Insufficient cpu"), "{out}");
    insta::assert_snapshot!("why_quickstart_etl_big", out);
}

#[test]
fn node_selector_matches_no_node() {
    insta::assert_snapshot!("why_node_affinity", why("pod/shop/web-0", &["tests/why/node-affinity.yaml"]));
}

#[test]
fn not_enough_matching_devices() {
    let out = why("pod/ml/train", &["tests/why/not-enough-devices.yaml"]);
    assert!(out.contains("2 available \u{2014} 2 short"), "{out}");
    insta::assert_snapshot!("why_not_enough_devices", out);
}

#[test]
fn devices_already_allocated_by_earlier_pods() {
    let out =
        why("pod/ml/trainer-4", &["examples/gpu-training", "tests/scenarios/gpu-training-one-too-many/trainer-4.yaml"]);
    assert!(out.contains("8 already allocated (gpu-0\u{2026}gpu-7)"), "{out}");
    insta::assert_snapshot!("why_devices_already_allocated", out);
}

#[test]
fn device_tainted_by_a_device_taint_rule() {
    let out = why("pod/ml/b-job", &["tests/scenarios/device-taint-rule"]);
    assert!(out.contains("DeviceTaintRule"), "{out}");
    insta::assert_snapshot!("why_device_taint_rule", out);
}

#[test]
fn mig_partitions_short_of_counters_when_the_full_gpu_is_taken() {
    let out =
        why("pod/serving/infer-0", &["examples/mig", "tests/scenarios/mig-full-gpu-blocks-partitions/full-gpu.yaml"]);
    assert!(out.contains("short of counters"), "{out}");
    insta::assert_snapshot!("why_mig_counters_exhausted", out);
}

#[test]
fn mig_partitions_all_taken() {
    insta::assert_snapshot!("why_mig_partitions_taken", why("pod/serving/infer-7", &["examples/mig"]));
}

#[test]
fn match_attribute_constraint_unmet() {
    let out = why("pod/ml/train", &["tests/why/match-attribute.yaml"]);
    assert!(out.contains("constraint matchAttribute gpu.example.com/numa cannot be met"), "{out}");
    insta::assert_snapshot!("why_match_attribute_unmet", out);
}

#[test]
fn missing_template_claim_and_class() {
    let out = [
        why("pod/ml/no-template", &["tests/why/missing-objects.yaml"]),
        why("pod/ml/no-claim", &["tests/why/missing-objects.yaml"]),
        why("pod/ml/no-class", &["tests/why/missing-objects.yaml"]),
    ]
    .join("\n");
    insta::assert_snapshot!("why_missing_objects", out);
}

#[test]
fn selector_runtime_error_names_the_device() {
    let out = why("pod/ml/train", &["tests/why/cel-error.yaml"]);
    assert!(out.contains("on device gpu.example.com/gpu-node/gpu-1: CEL runtime error"), "{out}");
    insta::assert_snapshot!("why_cel_runtime_error", out);
}

#[test]
fn a_cel_runtime_error_aborts_the_attempt_and_names_each_pods_own_claim() {
    let dir = "tests/scenarios/cel-runtime-error-per-claim";
    let out = why("pod/ml/train-1", &[dir]);
    assert!(out.contains("pod ml/train-1: scheduler error"), "{out}");
    assert!(out.contains("running \"DynamicResources\" filter plugin: claim ml/train-1-gpu-"), "{out}");
    assert!(!out.contains("train-0"), "another pod's claim is named: {out}");
    assert!(!out.contains("nodes are available"), "{out}");
    insta::assert_snapshot!("why_cel_runtime_error_per_claim", out);
    let o = muster(&["plan", dir, "-o", "yaml"]);
    let yaml = String::from_utf8(o.stdout).unwrap();
    assert_eq!(yaml.matches("reason: SchedulerError").count(), 3, "{yaml}");
}

#[test]
fn gang_that_cannot_be_placed_together() {
    let out = [why("podgroup/ml/training", &["tests/why/gang.yaml"]), why("pod/ml/worker-2", &["tests/why/gang.yaml"])]
        .join("\n");
    assert!(out.contains("after reserving ml/worker-0, ml/worker-1"), "{out}");
    assert!(out.contains("node node-1  NodeResourcesFit: Insufficient cpu"), "{out}");
    insta::assert_snapshot!("why_gang_cannot_be_placed", out);
}

#[test]
fn gang_members_agree_with_the_counts_when_the_cycle_stops_early() {
    let dir = "tests/scenarios/gang-stops-early";
    let out = [why("podgroup/ml/crew", &[dir]), why("pod/ml/worker-d", &[dir])].join("\n");
    assert!(out.contains("1 of its 4 pending pods fit, 2 do not, 1 not tried"), "{out}");
    assert!(out.contains("member ml/worker-d: not tried"), "{out}");
    assert_eq!(out.matches("  member ml/worker-").count(), 4, "{out}");
    assert!(
        out.contains("worker-d: unschedulable\n") && out.contains("  not tried: the group's cycle stopped"),
        "{out}"
    );
    insta::assert_snapshot!("why_gang_stops_early", out);
}

#[test]
fn gang_waiting_for_its_pods() {
    let out =
        [why("podgroup/ml/eval", &["tests/why/gang.yaml"]), why("pod/ml/eval-0", &["tests/why/gang.yaml"])].join("\n");
    insta::assert_snapshot!("why_gang_waiting", out);
}

#[test]
fn placed_pod_with_its_devices_and_the_other_feasible_nodes() {
    let out = why("pod/ml/trainer-0", &["examples/gpu-training"]);
    assert!(out.contains("pod ml/trainer-0: placed on node h100-1"), "{out}");
    insta::assert_snapshot!("why_placed", out);
}

#[test]
fn unknown_or_malformed_target_exits_2() {
    let o = muster(&["why", "pod/ml/trainer-9", "examples/gpu-training"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("error: pod ml/trainer-9 is not in the input"), "{err}");
    assert!(err.contains("pod/ml/trainer-0"), "near names are listed: {err}");
    let o = muster(&["why", "deployment/ml/x", "examples/gpu-training"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8(o.stderr)
            .unwrap()
            .contains("expected pod/NAMESPACE/NAME, podgroup/NAMESPACE/NAME or compositepodgroup/NAMESPACE/NAME")
    );
    let o = muster(&["why", "pod/ml/x", "tests/bad-input/03-unknown-field.yaml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn json_contract() {
    let o = muster(&["why", "pod/ml/b-job", "tests/scenarios/device-taint-rule", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["target"], "pod/ml/b-job");
    assert_eq!(v["verdict"]["status"], "unschedulable");
    assert!(v["verdict"]["message"].as_str().unwrap().starts_with("0/2 nodes are available"));
    assert!(
        v["preemption"].as_str().unwrap().starts_with("would not help: no node where evicting lower-priority pods")
    );
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "every node, never the aggregate alone");
    let n1 = &nodes[0];
    assert_eq!(
        (n1["node"].as_str(), n1["status"].as_str(), n1["plugin"].as_str()),
        (Some("node-1"), Some("rejected"), Some("DynamicResources"))
    );
    let req = &n1["claims"][0]["requests"][0];
    for key in
        ["request", "class", "wants", "matching", "allocated", "tainted", "counters", "capacity", "available", "short"]
    {
        assert!(!req[key].is_null(), "{key} in {req}");
    }
    assert_eq!((req["wants"].as_u64(), req["available"].as_u64(), req["short"].as_u64()), (Some(2), Some(1), Some(1)));
    let tainted: Vec<&serde_json::Value> =
        req["devices"].as_array().unwrap().iter().filter(|d| d["status"] == "tainted").collect();
    assert_eq!(tainted.len(), 1);
    assert_eq!(tainted[0]["device"], "gpu-0");
    assert!(tainted[0]["detail"].as_str().unwrap().contains("DeviceTaintRule"));

    // A placed pod: node, devices, other feasible nodes.
    let o = muster(&["why", "pod/ml/trainer-0", "examples/gpu-training", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"]["status"], "placed");
    assert_eq!(v["verdict"]["node"], "h100-1");
    assert_eq!(v["verdict"]["devices"].as_array().unwrap().len(), 8);
    assert_eq!(
        v["verdict"]["devices"][0],
        serde_json::json!({"driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-0"})
    );
    assert_eq!(v["verdict"]["otherFeasibleNodes"], serde_json::json!(["h100-2", "h100-3", "h100-4"]));

    // A gang: outcome, members, the member explained.
    let o = muster(&["why", "podgroup/ml/training", "tests/why/gang.yaml", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"]["status"], "cannot be placed together");
    assert_eq!(v["members"].as_array().unwrap().len(), 3);
    assert_eq!(v["members"][0]["status"], "rolled-back");
    assert_eq!(v["explained"]["pod"], "ml/worker-2");
    assert_eq!(v["explained"]["reservedBefore"], serde_json::json!(["ml/worker-0", "ml/worker-1"]));
    insta::assert_json_snapshot!("why_gang_json", v);
}

#[test]
fn same_input_same_explanation() {
    let a = why("pod/ml/b-job", &["tests/scenarios/device-taint-rule"]);
    let b = why("pod/ml/b-job", &["tests/scenarios/device-taint-rule"]);
    assert_eq!(a, b);
}

#[test]
fn the_articles_gang_one_node_short_names_the_node_and_the_tainted_gpu() {
    let paths = ["examples/gpu-gang", "tests/scenarios/gang-one-node-short/maintenance.yaml"];
    let out = why("podgroup/ml/llm-train", &paths);
    assert!(out.contains("cannot be placed together"), "{out}");
    assert!(
        out.contains("node h100-3  DynamicResources: claim ml/trainer-3-gpus-")
            && out.contains("1 tainted and not tolerated (gpu-5: example.com/maintenance=planned:NoSchedule, DeviceTaintRule h100-3-gpu-5-maintenance), 7 available — 1 short"),
        "{out}"
    );
    insta::assert_snapshot!("why_article_gang_one_node_short", out);
}

#[test]
fn gang_preemption_is_explained() {
    let out = why("podgroup/ml/train-high", &["tests/scenarios/gang-preemption"]);
    assert!(out.contains("preempted 3 lower-priority pods: ml/batch-low-0, ml/batch-low-1, ml/lone-low"), "{out}");
    assert!(out.contains("preemption: preempted 3 pod(s)"), "{out}");
}

#[test]
fn composite_pod_group_tree_with_no_domain() {
    insta::assert_snapshot!(
        "why_composite_no_domain",
        why("compositepodgroup/ml/job-b", &["tests/scenarios/composite-pod-group"])
    );
}

#[test]
fn composite_pod_group_preempting_a_tree() {
    insta::assert_snapshot!(
        "why_composite_preempting",
        why("compositepodgroup/ml/high", &["tests/scenarios/composite-preemption"])
    );
}

#[test]
fn composite_pod_group_invalid_and_nested() {
    let out = why("compositepodgroup/ml/job-e", &["tests/scenarios/composite-pod-group"]);
    insta::assert_snapshot!("why_composite_invalid", out);
    let out = why("compositepodgroup/ml/nested-mid", &["tests/scenarios/composite-preemption"]);
    assert!(out.contains("part of the tree of compositepodgroup ml/nested: scheduled"), "{out}");
}

#[test]
fn topology_domains_each_with_what_fits_and_the_first_failure() {
    let out = why("podgroup/ml/c-too-big", &["tests/scenarios/gang-topology"]);
    insta::assert_snapshot!("why_topology_domains", out);
    let chosen = why("podgroup/ml/b-small", &["tests/scenarios/gang-topology"]);
    assert!(chosen.contains("rack-b (3 nodes): 2 of 2 fit, feasible — chosen"), "{chosen}");
    assert!(chosen.contains("rack-a (2 nodes): 2 of 2 fit, feasible\n"), "{chosen}");
}

/// Beyond upstream: a gang's device domains, each with its devices and what fits, and the node
/// list limited to the domains' nodes.
#[test]
fn device_topology_domains_each_with_their_devices() {
    let out = why("podgroup/ml/train-c", &["tests/scenarios/device-topology-clique"]);
    insta::assert_snapshot!("why_device_topology_domains", out);
    let all = why("podgroup/ml/a-all", &["tests/scenarios/device-topology-partition"]);
    assert!(all.contains("domains of gpu.nvidia.com/partition4 (scope node)"), "{all}");
    assert!(all.contains("    hgx-1/1 (1 node, 4 devices, 0 in use): 0 of 1 fit"), "{all}");
}

#[test]
fn classic_preemption_for_a_pod_outside_groups() {
    let out = why("pod/apps/polite", &["tests/scenarios/pod-preemption"]);
    assert!(out.contains("preemption: not attempted: the pod's preemptionPolicy is Never"), "{out}");
    let o = muster(&["why", "pod/apps/urgent", "tests/scenarios/pod-preemption", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["preemption"], "preempted 1 lower-priority pod(s): apps/low-a");
    let text = why("pod/apps/urgent", &["tests/scenarios/pod-preemption"]);
    assert!(
        text.contains("placed on node node-1\n  preemption: preempted 1 lower-priority pod(s): apps/low-a"),
        "{text}"
    );
}

#[test]
fn a_pod_created_by_a_controller_names_its_workload() {
    let out = why("pod/ml/train-1-zp5wj", &["tests/scenarios/workload-controllers"]);
    assert!(out.contains("\n  created by Job ml/train for this plan (not in the input)\n"), "{out}");
    assert!(out.contains("node gpu-1  DynamicResources: claim ml/train-1-zp5wj-gpu-"), "{out}");
    insta::assert_snapshot!("why_created_by_job", out);
    let o = muster(&["why", "pod/ml/infer-6d566d64ff-9qqk9", "tests/scenarios/workload-controllers", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["createdBy"],
        serde_json::json!({"by": "ReplicaSet ml/infer-6d566d64ff", "workload": "Deployment ml/infer"})
    );
}

#[test]
fn topology_spread_skew() {
    let out = why("pod/ml/serve-6-pinned-a", &["tests/scenarios/spread-zones"]);
    assert!(
        out.contains("topology.kubernetes.io/zone=a: 3 matching pod(s) + 1 - global minimum 2 > maxSkew 1"),
        "{out}"
    );
    insta::assert_snapshot!("why_topology_spread", out);
}

#[test]
fn existing_pods_anti_affinity() {
    let out = why("pod/llm/e-decode-debug", &["tests/scenarios/inference-anti-affinity"]);
    assert!(out.contains("InterPodAffinity: node(s) didn't satisfy existing pods anti-affinity rules"), "{out}");
    insta::assert_snapshot!("why_existing_anti_affinity", out);
}

#[test]
fn volume_plugins_say_which_claim_volume_zone_and_limit() {
    let dir = "tests/scenarios/volumes-training";
    insta::assert_snapshot!("why_volumes_training", why("pod/ml/resnet-2-9jl8r", &[dir]));
    let dir = "tests/scenarios/volumes-restrictions-zone-limits";
    insta::assert_snapshot!("why_volumes_disk_and_zone", why("pod/ns/c-disk-and-zone", &[dir]));
    insta::assert_snapshot!("why_volumes_binding", why("pod/app/c-cache-b", &["tests/scenarios/volumes-binding"]));
}

#[test]
fn each_pod_is_explained_under_its_own_profile() {
    let out = why("pod/ml/prep", &["tests/why/profiles.yaml", "--config", "tests/configs/profiles-gpu-pool.yaml"]);
    assert!(out.contains("node cpu-1  NodeAffinity: node(s) didn't match scheduler-enforced node affinity"), "{out}");
    assert!(out.contains("node gpu-1  NodeResourcesFit: Insufficient cpu"), "{out}");
    assert!(out.contains("  profile: gpu-pool (the pod's spec.schedulerName)\n"), "{out}");
}
