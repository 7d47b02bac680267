//! The configuration judge on files of each kind: valid 1.37 files read whole, each invalid or
//! unsupported setting named at its place.

use super::*;

fn ok(text: &str) -> (SchedulerConfig, Judgement) {
    let mut c = SchedulerConfig::default();
    let j = judge(text, &mut c);
    assert!(j.errors.is_empty(), "{:?}", j.errors);
    (c, j)
}

fn errors(text: &str) -> Vec<String> {
    let mut c = SchedulerConfig::default();
    let j = judge(text, &mut c);
    assert_eq!(c, SchedulerConfig::default(), "a refused file changes nothing");
    j.errors.iter().map(|e| e.render("c.yaml")).collect()
}

const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

#[test]
fn reads_the_scoring_strategy_and_weights() {
    let (c, j) = ok(&format!(
        "{HEAD}profiles:\n- schedulerName: muster\n  plugins:\n    score:\n      enabled:\n      - name: TaintToleration\n        weight: 5\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n        resources:\n        - name: nvidia.com/gpu\n          weight: 3\n"
    ));
    assert_eq!(j.names, ["muster"]);
    assert_eq!(c.scoring_strategy, ScoringStrategy::MostAllocated);
    assert_eq!(c.scoring_resources, [("nvidia.com/gpu".to_string(), 3)]);
    assert_eq!(c.weights.taint_toleration, 5);
    assert_eq!(c.weights.node_affinity, 2, "the other default weights stay");
}

#[test]
fn the_topology_aware_scheduling_example_sets_placement_weights() {
    let (c, j) = ok(&format!(
        "{HEAD}profiles:\n  - schedulerName: default-scheduler\n    plugins:\n      placementScore:\n        enabled:\n          - name: NodeResourcesFit\n            weight: 2\n          - name: PodGroupPodsCount\n            weight: 5\n    pluginConfig:\n      - name: NodeResourcesFit\n        args:\n          scoringStrategy:\n            type: LeastAllocated\n            resources:\n              - name: cpu\n                weight: 2\n              - name: memory\n                weight: 1\n"
    ));
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    assert_eq!(c.placement_weights, muster_sched::PlacementWeights { node_resources_fit: 2, pod_group_pods_count: 5 });
    assert_eq!(c.scoring_resources, [("cpu".to_string(), 2), ("memory".to_string(), 1)]);
    assert_eq!(c.weights, muster_sched::ScoreWeights::default(), "Score weights are untouched");
}

#[test]
fn disabling_every_score_plugin_zeroes_the_weights() {
    let (c, _) = ok(&format!(
        "{HEAD}profiles:\n- plugins:\n    score:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: NodeAffinity\n"
    ));
    let w = c.weights;
    assert_eq!((w.node_resources_fit, w.balanced_allocation, w.taint_toleration, w.node_affinity), (0, 0, 0, 1));
}

#[test]
fn multi_point_weights_reach_score() {
    let (c, _) = ok(&format!(
        "{HEAD}profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: TaintToleration\n        weight: 7\n"
    ));
    assert_eq!(c.weights.taint_toleration, 7);
}

#[test]
fn backoff_and_percentages_are_read_and_checked() {
    let (c, _) =
        ok(&format!("{HEAD}podInitialBackoffSeconds: 2\npodMaxBackoffSeconds: 30\npercentageOfNodesToScore: 40\n"));
    assert_eq!((c.backoff.initial, c.backoff.max), (2_000, 30_000));
    assert_eq!(c.percentage_of_nodes_to_score, 40);
    assert_eq!(
        errors(&format!("{HEAD}podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n")),
        [
            "c.yaml:4:23: KubeSchedulerConfiguration: podMaxBackoffSeconds: 2: must be greater than or equal to podInitialBackoffSeconds"
        ]
    );
}

#[test]
fn unknown_fields_are_errors_with_positions() {
    assert_eq!(
        errors("kind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  plugns: {}\n"),
        ["c.yaml:4:3: KubeSchedulerConfiguration: profiles[0]: unknown field \"plugns\""]
    );
    assert_eq!(
        errors(&format!(
            "{HEAD}profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args:\n      hardPodAffinityWieght: 3\n"
        )),
        [
            "c.yaml:7:7: KubeSchedulerConfiguration: profiles[0].pluginConfig[0].args: unknown field \"hardPodAffinityWieght\""
        ]
    );
}

#[test]
fn out_of_tree_plugins_and_what_muster_cannot_turn_off_are_refused() {
    let e = errors(&format!(
        "{HEAD}profiles:\n- plugins:\n    filter:\n      disabled:\n      - name: NodeAffinity\n    score:\n      enabled:\n      - name: Coscheduling\n"
    ));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("turns NodeAffinity off at filter"), "{e:?}");
    assert!(e[1].contains("\"Coscheduling\" is not a plugin of kube-scheduler 1.37"), "{e:?}");
}

#[test]
fn profiles_that_schedule_differently_are_kept_and_alike_ones_serve_every_name() {
    let (c, j) = ok(&format!("{HEAD}profiles:\n- schedulerName: a\n- schedulerName: b\n"));
    assert_eq!(j.names, ["a", "b"]);
    assert!(c.profiles.is_empty(), "alike: one configuration");
    let (c, j) = ok(&format!(
        "{HEAD}profiles:\n- schedulerName: a\n- schedulerName: b\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n"
    ));
    assert_eq!(j.names, ["a", "b"]);
    assert_eq!(c.scoring_strategy, ScoringStrategy::LeastAllocated, "the first profile is the base");
    assert_eq!(c.profiles.len(), 1);
    assert_eq!(c.profiles[0].scheduler_name, "b");
    assert_eq!(c.profiles[0].config.scoring_strategy, ScoringStrategy::MostAllocated);
}

#[test]
fn fields_muster_does_not_act_on_are_named_in_warnings() {
    let (_, j) = ok(&format!(
        "{HEAD}parallelism: 8\nleaderElection:\n  leaderElect: false\nprofiles:\n- pluginConfig:\n  - name: DynamicResources\n    args:\n      filterTimeout: 5s\n"
    ));
    let w: Vec<&str> = j.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(w, ["parallelism", "leaderElection", "profiles[0].pluginConfig[0].args.filterTimeout"]);
}

#[test]
fn old_versions_and_bad_args_are_errors() {
    let e = errors("apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n");
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("muster reads kubescheduler.config.k8s.io/v1"), "{e:?}");
    let e = errors(&format!(
        "{HEAD}profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      kind: InterPodAffinityArgs\n      scoringStrategy:\n        resources:\n        - name: cpu\n          weight: 101\n"
    ));
    assert_eq!(e.len(), 2, "{e:?}");
}

#[test]
fn inter_pod_plugins_take_their_weights_and_args() {
    let (c, j) = ok(&format!(
        "{HEAD}profiles:\n- plugins:\n    score:\n      enabled:\n      - name: PodTopologySpread\n        weight: 7\n  pluginConfig:\n  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeight: 5\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n      defaultConstraints:\n      - maxSkew: 1\n        topologyKey: topology.kubernetes.io/zone\n        whenUnsatisfiable: ScheduleAnyway\n"
    ));
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    assert_eq!((c.weights.pod_topology_spread, c.weights.inter_pod_affinity), (7, 2));
    assert_eq!(c.inter_pod_affinity.hard_pod_affinity_weight, 5);
    assert_eq!(c.pod_topology_spread.defaulting_type, muster_sched::plugins::pod_topology_spread::DefaultingType::List);
    assert_eq!(c.pod_topology_spread.default_constraints[0].max_skew, 1);
}

#[test]
fn requested_to_capacity_ratio_reads_its_shape_scaled_to_node_scores() {
    let args = "  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: RequestedToCapacityRatio\n";
    let shape = "        requestedToCapacityRatio:\n          shape:\n          - {utilization: 0, score: 0}\n          - {utilization: 100, score: 10}\n";
    let (c, _) = ok(&format!("{HEAD}profiles:\n- schedulerName: muster\n{args}{shape}"));
    assert_eq!(c.scoring_strategy, ScoringStrategy::RequestedToCapacityRatio);
    let points: Vec<(i64, i64)> = c.utilization_shape.iter().map(|p| (p.utilization, p.score)).collect();
    assert_eq!(points, [(0, 0), (100, 100)]);
    let missing = errors(&format!("{HEAD}profiles:\n- schedulerName: muster\n{args}"));
    assert!(missing[0].ends_with("scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio"), "{missing:?}");
    let bad = "        requestedToCapacityRatio:\n          shape:\n          - {utilization: 50, score: 11}\n          - {utilization: 40, score: 1}\n";
    let bad = errors(&format!("{HEAD}profiles:\n- schedulerName: muster\n{args}{bad}"));
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].ends_with("shape[0].score: Invalid value: 11: not in valid range [0, 10]"), "{bad:?}");
    assert!(
        bad[1].ends_with("shape[1].utilization: Invalid value: 40: values must be sorted in increasing order"),
        "{bad:?}"
    );
}

#[test]
fn volume_binding_reads_its_storage_shape_and_scores_by_default() {
    assert_eq!(SchedulerConfig::default().weights.volume_binding, 1);
    let shape_points = |c: &SchedulerConfig| -> Vec<(i64, i64)> {
        c.volume_binding_shape.iter().map(|p| (p.utilization, p.score)).collect()
    };
    assert_eq!(shape_points(&SchedulerConfig::default()), [(0, 100), (100, 0)], "1.37's default");
    let args = "  pluginConfig:\n  - name: VolumeBinding\n    args:\n      shape:\n";
    let (c, j) = ok(&format!(
        "{HEAD}profiles:\n- schedulerName: muster\n{args}      - {{utilization: 0, score: 0}}\n      - {{utilization: 80, score: 10}}\n"
    ));
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    assert_eq!(shape_points(&c), [(0, 0), (80, 100)]);
    let bad =
        errors(&format!("{HEAD}profiles:\n- schedulerName: muster\n{args}      - {{utilization: 101, score: 3}}\n"));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].ends_with("shape[0].utilization: Invalid value: 101: not in valid range [0, 100]"), "{bad:?}");
    let off = "  plugins:\n    score:\n      disabled:\n      - name: VolumeBinding\n";
    let (c, _) = ok(&format!("{HEAD}profiles:\n- schedulerName: muster\n{off}"));
    assert_eq!(c.weights.volume_binding, 0, "a profile may turn storage scoring off");
}

#[test]
fn added_affinity_is_applied_when_its_selectors_are_valid() {
    let head = "  pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchExpressions:\n";
    let (c, j) = ok(&format!(
        "{HEAD}profiles:\n- schedulerName: muster\n{head}            - {{key: pool, operator: In, values: [gpu]}}\n"
    ));
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    let added = c.added_affinity.expect("applied").0;
    assert_eq!(added.required_during_scheduling_ignored_during_execution.unwrap().node_selector_terms.len(), 1);
    let bad = errors(&format!(
        "{HEAD}profiles:\n- schedulerName: muster\n{head}            - {{key: pool, operator: Like, values: [gpu]}}\n"
    ));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator"), "{bad:?}");
}

#[test]
fn binding_timeouts_are_applied_and_checked() {
    let args = |plugin: &str, field: &str, value: &str| {
        format!(
            "{HEAD}profiles:\n- schedulerName: muster\n  pluginConfig:\n  - name: {plugin}\n    args:\n      {field}: {value}\n"
        )
    };
    let (c, j) = ok(&args("DynamicResources", "bindingTimeout", "90s"));
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    assert_eq!(c.dra_binding_timeout_ms, 90_000);
    let (c, _) = ok(&args("VolumeBinding", "bindTimeoutSeconds", "30"));
    assert_eq!(c.volume_bind_timeout_seconds, 30);
    for (value, want) in [("0s", "must be positive"), ("soon", "not a duration")] {
        let bad = errors(&args("DynamicResources", "bindingTimeout", value));
        assert!(bad.len() == 1 && bad[0].contains("bindingTimeout") && bad[0].contains(want), "{bad:?}");
    }
}
