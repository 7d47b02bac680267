//! `muster plan -o yaml` writes the PodGroups a plan touched with the status kube-scheduler would
//! write: `PodGroupInitiallyScheduled` (True/Scheduled, False/Unschedulable, never True back to
//! False), `DisruptionTarget` for a group preempted as a whole, muster's `GangWaitTimeout`, and
//! `resourceClaimStatuses` for generated PodGroup claims; and the root CompositePodGroup of every
//! tree a cycle ran for (`CompositePodGroupInitiallyScheduled`, with `Invalid` for a bad layout)
//! and every CompositePodGroup preempted as a whole. `--now` is every new condition's
//! `lastTransitionTime`; without it a comment line names what is left out.

use std::process::Command;

use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

mod common;
use common::{muster, root};

const NOW: &str = "2026-01-01T00:00:00Z";

/// `muster plan PATHS -o yaml EXTRA...`, which must succeed.
fn plan_yaml(paths: &[&str], extra: &[&str]) -> String {
    let mut args = vec!["plan"];
    args.extend(paths);
    args.extend(["-o", "yaml"]);
    args.extend(extra);
    let o = muster(&args);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// `muster plan - -o yaml EXTRA...` with `input` on standard input, which must succeed.
fn plan_yaml_stdin(input: &str, extra: &[&str]) -> String {
    use std::io::Write;
    let mut args = vec!["plan", "-", "-o", "yaml"];
    args.extend(extra);
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(&args)
        .current_dir(root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The objects of one kind in a `-o yaml` output, read back as muster reads input (so the output
/// is valid input), by `namespace/name`.
fn read_back<T>(
    text: &str,
    pick: impl Fn(muster_manifest::Object) -> Option<T>,
    meta: impl Fn(&T) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<(String, T)> {
    let m = muster_manifest::load_str("plan.yaml", text).expect("the output is valid input");
    m.objects
        .into_iter()
        .filter_map(|l| pick(l.object))
        .map(|g| {
            let key = format!("{}/{}", meta(&g).namespace.as_deref().unwrap(), meta(&g).name.as_deref().unwrap());
            (key, g)
        })
        .collect()
}

/// The PodGroups of a `-o yaml` output, by `namespace/name`.
fn pod_groups(text: &str) -> Vec<(String, PodGroup)> {
    read_back(
        text,
        |o| match o {
            muster_manifest::Object::PodGroup(g) => Some(*g),
            _ => None,
        },
        |g| &g.metadata,
    )
}

/// The CompositePodGroups of a `-o yaml` output (read back as `scheduling.k8s.io/v1alpha3`), by
/// `namespace/name`.
fn composites(text: &str) -> Vec<(String, CompositePodGroup)> {
    read_back(
        text,
        |o| match o {
            muster_manifest::Object::CompositePodGroup(g) => Some(*g),
            _ => None,
        },
        |g| &g.metadata,
    )
}

fn group<'a>(groups: &'a [(String, PodGroup)], key: &str) -> &'a PodGroup {
    &groups.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("{key} not written")).1
}

fn composite<'a>(composites: &'a [(String, CompositePodGroup)], key: &str) -> &'a CompositePodGroup {
    &composites.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("{key} not written")).1
}

fn keys<T>(objects: &[(String, T)]) -> Vec<&str> {
    objects.iter().map(|(k, _)| k.as_str()).collect()
}

/// A condition as (type, status, reason, message, lastTransitionTime, observedGeneration).
type Cond = (String, String, String, String, String, Option<i64>);

fn conditions(g: &PodGroup) -> Vec<Cond> {
    condition_tuples(g.status.as_ref().and_then(|s| s.conditions.as_ref()))
}

fn composite_conditions(g: &CompositePodGroup) -> Vec<Cond> {
    condition_tuples(g.status.as_ref().and_then(|s| s.conditions.as_ref()))
}

fn condition_tuples(conditions: Option<&Vec<Condition>>) -> Vec<Cond> {
    conditions
        .into_iter()
        .flatten()
        .map(|c| {
            let t = serde_json::to_value(&c.last_transition_time).unwrap().as_str().unwrap().to_string();
            (c.type_.clone(), c.status.clone(), c.reason.clone(), c.message.clone(), t, c.observed_generation)
        })
        .collect()
}

fn cond(type_: &str, status: &str, reason: &str, message: &str, time: &str, generation: Option<i64>) -> Cond {
    (type_.into(), status.into(), reason.into(), message.into(), time.into(), generation)
}

/// The comment line written right before the PodGroup `name` (its document's first line).
fn comment_before(text: &str, name: &str) -> Option<String> {
    comment_before_kind(text, "PodGroup", name)
}

/// The comment line written right before the object `kind`/`name` (its document's first line).
fn comment_before_kind(text: &str, kind: &str, name: &str) -> Option<String> {
    let doc = text
        .split("---\n")
        .find(|d| d.contains(&format!("\nkind: {kind}\n")) && d.contains(&format!("\n  name: {name}\n")))
        .unwrap_or_else(|| panic!("{kind} {name} not in the output"));
    doc.lines().next().and_then(|l| l.strip_prefix("# ")).map(str::to_string)
}

/// The PodGroup documents of an output, with their comment lines (for snapshots).
fn pod_group_documents(text: &str) -> String {
    documents(text, "PodGroup")
}

/// The documents of one kind in an output, with their comment lines (for snapshots).
fn documents(text: &str, kind: &str) -> String {
    text.split("---\n").filter(|d| d.contains(&format!("\nkind: {kind}\n"))).map(|d| format!("---\n{d}")).collect()
}

#[test]
fn scheduled_gang_is_initially_scheduled() {
    let text = plan_yaml(&["examples/gpu-gang"], &["--now", NOW]);
    let groups = pod_groups(&text);
    assert_eq!(groups.len(), 1);
    assert_eq!(
        conditions(group(&groups, "ml/llm-train")),
        [cond(
            "PodGroupInitiallyScheduled",
            "True",
            "Scheduled",
            "podgroup ml/llm-train: 4 placed, 0 already running, minCount 4",
            NOW,
            None
        )]
    );
    assert_eq!(comment_before(&text, "llm-train"), None);
}

#[test]
fn rolled_back_gang_is_unschedulable_with_the_groups_message() {
    let paths = ["examples/gpu-gang", "tests/scenarios/gang-one-node-short/maintenance.yaml"];
    let text = plan_yaml(&paths, &["--now", NOW]);
    let groups = pod_groups(&text);
    let message = "podgroup ml/llm-train cannot be placed together: 3 of its 4 pending pods fit, 1 do not, 0 already running, minCount 4; nothing was placed (first failure: ml/trainer-3: 0/4 nodes are available: 4 cannot allocate all claims.)";
    assert_eq!(
        conditions(group(&groups, "ml/llm-train")),
        [cond("PodGroupInitiallyScheduled", "False", "Unschedulable", message, NOW, None)]
    );
    // The same words as the JSON's group message and the members' reason.
    let o = muster(&["plan", paths[0], paths[1], "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["groups"][0]["message"], message);
}

#[test]
fn group_preempted_as_a_whole_is_a_disruption_target() {
    let text = plan_yaml(&["tests/scenarios/gang-preemption"], &["--now", NOW]);
    let groups = pod_groups(&text);
    let keys: Vec<&str> = groups.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["ml/batch-low", "ml/train-high"]);
    assert_eq!(
        conditions(group(&groups, "ml/batch-low")),
        [cond(
            "DisruptionTarget",
            "True",
            "PreemptionByScheduler",
            "muster: preempting every pod of the group (disruptionMode all) to make room for a higher-priority pod group (podgroup ml/train-high)",
            NOW,
            None
        )]
    );
    let high = conditions(group(&groups, "ml/train-high"));
    assert_eq!(high.len(), 1);
    assert_eq!(
        (high[0].0.as_str(), high[0].1.as_str(), high[0].2.as_str()),
        ("PodGroupInitiallyScheduled", "True", "Scheduled")
    );
}

#[test]
fn podgroup_claims_are_in_resource_claim_statuses() {
    for (scenario, paths, status) in [
        ("scheduled", &["tests/scenarios/podgroup-claim"][..], "True"),
        (
            "rolled back",
            &[
                "tests/scenarios/podgroup-claim/cluster.yaml",
                "tests/scenarios/podgroup-claim-rollback/extra-member.yaml",
            ][..],
            "False",
        ),
    ] {
        let text = plan_yaml(paths, &["--now", NOW]);
        let groups = pod_groups(&text);
        let g = group(&groups, "ml/pg-a");
        assert_eq!(conditions(g)[0].1, status, "{scenario}");
        let statuses = g.status.as_ref().unwrap().resource_claim_statuses.as_ref().expect(scenario);
        assert_eq!(statuses.len(), 1, "{scenario}");
        assert_eq!(statuses[0].name, "fabric", "{scenario}");
        let claim = statuses[0].resource_claim_name.as_deref().unwrap();
        assert!(claim.starts_with("pg-a-fabric-"), "{scenario}: {claim}");
        // The generated claim it names is written too.
        assert!(text.contains(&format!("kind: ResourceClaim\nmetadata:\n  annotations:\n    resource.kubernetes.io/pod-claim-name: fabric\n  name: {claim}\n")), "{scenario}");
    }
}

/// tests/scenarios/podgroup-status: PodGroups whose input already carries a status.
#[test]
fn input_status_is_updated_as_kube_scheduler_updates_it() {
    let text = plan_yaml(&["tests/scenarios/podgroup-status"], &["--now", NOW]);
    let groups = pod_groups(&text);
    let keys: Vec<&str> = groups.iter().map(|(k, _)| k.as_str()).collect();
    // `early` merely waits (upstream's PreEnqueue holds it; no cycle, no condition): not written.
    assert_eq!(keys, ["ml/done", "ml/late", "ml/retry", "ml/still-short"]);
    // Once True, never back to False: the input's condition as it was.
    assert_eq!(
        conditions(group(&groups, "ml/done")),
        [cond(
            "PodGroupInitiallyScheduled",
            "True",
            "Scheduled",
            "placed in an earlier cycle",
            "2025-06-01T00:00:00Z",
            Some(1)
        )]
    );
    // False -> True: a transition at --now, observedGeneration from metadata.generation.
    assert_eq!(
        conditions(group(&groups, "ml/retry")),
        [cond(
            "PodGroupInitiallyScheduled",
            "True",
            "Scheduled",
            "podgroup ml/retry: 2 placed, 0 already running, minCount 2",
            NOW,
            Some(2)
        )]
    );
    // False -> False: no transition, the lastTransitionTime kept; reason, message, generation updated.
    let still = conditions(group(&groups, "ml/still-short"));
    assert_eq!(still.len(), 1);
    assert_eq!(
        (still[0].1.as_str(), still[0].2.as_str(), still[0].4.as_str(), still[0].5),
        ("False", "Unschedulable", "2025-12-31T00:00:00Z", Some(2))
    );
    assert!(still[0].3.starts_with("podgroup ml/still-short cannot be placed together"), "{}", still[0].3);
    // Waited an hour for its third pod, longer than the default 300 s.
    assert_eq!(
        conditions(group(&groups, "ml/late")),
        [cond(
            "PodGroupInitiallyScheduled",
            "False",
            "GangWaitTimeout",
            "podgroup ml/late has waited 3600s for its pods, more than the gang wait timeout of 300s: 2 of minCount 3 exist; the gang is not attempted until all are created",
            NOW,
            None
        )]
    );
    insta::assert_snapshot!("podgroup_status_with_now", pod_group_documents(&text));

    // A longer timeout: `late` merely waits too.
    let text = plan_yaml(&["tests/scenarios/podgroup-status"], &["--now", NOW, "--gang-wait-timeout", "7200"]);
    let keys: Vec<String> = pod_groups(&text).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["ml/done", "ml/retry", "ml/still-short"]);
}

#[test]
fn without_now_new_conditions_are_named_in_a_comment() {
    let text = plan_yaml(&["examples/gpu-gang"], &[]);
    assert_eq!(
        comment_before(&text, "llm-train").as_deref(),
        Some(
            "PodGroupInitiallyScheduled=True (Scheduled: podgroup ml/llm-train: 4 placed, 0 already running, minCount 4) is not written: its lastTransitionTime needs --now (a plan reads no clock)"
        )
    );
    let groups = pod_groups(&text);
    assert!(group(&groups, "ml/llm-train").status.is_none());

    let text = plan_yaml(&["tests/scenarios/gang-preemption"], &[]);
    let note = comment_before(&text, "batch-low").unwrap();
    assert!(note.starts_with("DisruptionTarget=True (PreemptionByScheduler: "), "{note}");
    assert!(note.ends_with("is not written: its lastTransitionTime needs --now (a plan reads no clock)"), "{note}");

    let text = plan_yaml(&["tests/scenarios/podgroup-status"], &[]);
    // No transition, no new time: written without --now, no comment.
    assert_eq!(comment_before(&text, "done"), None);
    assert_eq!(comment_before(&text, "still-short"), None);
    let groups = pod_groups(&text);
    assert_eq!(conditions(group(&groups, "ml/still-short"))[0].5, Some(2));
    // A transition needs --now: the input's condition stays as it was.
    assert!(comment_before(&text, "retry").unwrap().starts_with("PodGroupInitiallyScheduled=True (Scheduled: "));
    assert_eq!(
        conditions(group(&groups, "ml/retry")),
        [cond(
            "PodGroupInitiallyScheduled",
            "False",
            "Unschedulable",
            "did not fit before",
            "2025-12-31T00:00:00Z",
            Some(1)
        )]
    );
    // Whether a gang waited too long needs --now too.
    for name in ["late", "early"] {
        let note = comment_before(&text, name).unwrap();
        assert!(note.starts_with("PodGroupInitiallyScheduled=False (GangWaitTimeout) is not written: "), "{note}");
        assert!(note.ends_with("needs --now"), "{note}");
    }
    insta::assert_snapshot!("podgroup_status_without_now", pod_group_documents(&text));
}

#[test]
fn now_is_validated_and_documented() {
    for bad in ["yesterday", "2026-01-01", "2026-01-01T00:00:00"] {
        let o = muster(&["plan", "examples/gpu-gang", "-o", "yaml", "--now", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(o.stdout.is_empty(), "{bad}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(err.contains(&format!("invalid value '{bad}' for '--now <RFC3339>'")), "{err}");
        assert!(err.contains("expected an RFC 3339 time with a UTC offset, such as 2026-01-01T00:00:00Z"), "{err}");
    }
    // Any offset is accepted and written in UTC, to the second, as the API server writes times.
    let text = plan_yaml(&["examples/gpu-gang"], &["--now", "2026-01-01T01:00:00.5+01:00"]);
    assert_eq!(conditions(group(&pod_groups(&text), "ml/llm-train"))[0].4, NOW);
    let help = String::from_utf8(muster(&["plan", "--help"]).stdout).unwrap();
    assert!(help.contains("--now <RFC3339>"), "{help}");
}

#[test]
fn same_input_and_now_same_output() {
    let a = plan_yaml(&["tests/scenarios/podgroup-status", "examples/gpu-gang"], &["--now", NOW]);
    let b = plan_yaml(&["tests/scenarios/podgroup-status", "examples/gpu-gang"], &["--now", NOW]);
    assert_eq!(a, b);
}

/// tests/scenarios/composite-pod-group: the root CompositePodGroup of every tree a cycle ran for
/// carries the tree's outcome as `CompositePodGroupInitiallyScheduled`.
#[test]
fn root_composite_pod_groups_carry_the_trees_outcome() {
    let text = plan_yaml(&["tests/scenarios/composite-pod-group"], &["--now", NOW]);
    assert!(text.contains("---\napiVersion: scheduling.k8s.io/v1alpha3\nkind: CompositePodGroup\n"), "{text}");
    let cpgs = composites(&text);
    // job-d merely waits for a child group's pods (upstream runs no cycle): not written.
    assert_eq!(keys(&cpgs), ["ml/job-a", "ml/job-b", "ml/job-c", "ml/job-e"]);
    assert_eq!(
        composite_conditions(composite(&cpgs, "ml/job-a")),
        [cond(
            "CompositePodGroupInitiallyScheduled",
            "True",
            "Scheduled",
            "compositepodgroup ml/job-a: 4 placed, 0 already running",
            NOW,
            None
        )]
    );
    // job-b: the tree's message, the same words as the JSON's tree message and its PodGroups'.
    let o = muster(&["plan", "tests/scenarios/composite-pod-group", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tree = v["compositePodGroups"].as_array().unwrap().iter().find(|t| t["compositePodGroup"] == "ml/job-b");
    let message = tree.unwrap()["message"].as_str().unwrap();
    assert!(
        message.starts_with("compositepodgroup ml/job-b: no example.com/block domain holds the tree: "),
        "{message}"
    );
    assert_eq!(
        composite_conditions(composite(&cpgs, "ml/job-b")),
        [cond("CompositePodGroupInitiallyScheduled", "False", "Unschedulable", message, NOW, None)]
    );
    let groups = pod_groups(&text);
    for leaf in ["ml/job-b-r0", "ml/job-b-r1"] {
        assert_eq!(
            conditions(group(&groups, leaf)),
            [cond("PodGroupInitiallyScheduled", "False", "Unschedulable", message, NOW, None)],
            "{leaf}"
        );
    }
    // job-c (basic): one child placed is enough.
    assert_eq!(composite_conditions(composite(&cpgs, "ml/job-c"))[0].1, "True");
    // job-e: a bad layout is reason Invalid, status False (the status that goes with Invalid is
    // unverified upstream).
    assert_eq!(
        composite_conditions(composite(&cpgs, "ml/job-e")),
        [cond(
            "CompositePodGroupInitiallyScheduled",
            "False",
            "Invalid",
            "compositepodgroup ml/job-e is invalid: its groups belong to several Workloads (job-e, other)",
            NOW,
            None
        )]
    );
    assert_eq!(comment_before_kind(&text, "CompositePodGroup", "job-e"), None);
    // PodGroups that have their pods and wait for their tree (job-d-r0) or for a missing parent
    // (orphan) are not written: muster's gang wait timeout is about a gang's own pods. job-d-r1
    // waits for its second pod: the timeout applies (here: no creationTimestamp, a comment).
    let pg_keys = keys(&groups);
    assert!(!pg_keys.contains(&"ml/job-d-r0") && !pg_keys.contains(&"ml/orphan"), "{pg_keys:?}");
    let note = comment_before(&text, "job-d-r1").unwrap();
    assert!(note.starts_with("PodGroupInitiallyScheduled=False (GangWaitTimeout) is not written: "), "{note}");
    insta::assert_snapshot!("composite_status_with_now", documents(&text, "CompositePodGroup"));
}

/// tests/scenarios/composite-preemption: the low tree (disruptionMode all on its
/// CompositePodGroup, single on its PodGroups) is preempted as a whole by the high tree.
#[test]
fn composite_preempted_as_a_whole_is_a_disruption_target() {
    let text = plan_yaml(&["tests/scenarios/composite-preemption"], &["--now", NOW]);
    let cpgs = composites(&text);
    // nested-mid is an inner CompositePodGroup of the nested tree: nothing is written on it.
    assert_eq!(keys(&cpgs), ["ml/high", "ml/low", "ml/nested"]);
    assert_eq!(
        composite_conditions(composite(&cpgs, "ml/low")),
        [cond(
            "DisruptionTarget",
            "True",
            "PreemptionByScheduler",
            "muster: preempting every pod of the tree (disruptionMode all) to make room for a higher-priority pod group (compositepodgroup ml/high)",
            NOW,
            None
        )]
    );
    let high = composite_conditions(composite(&cpgs, "ml/high"));
    assert_eq!(high.len(), 1);
    assert_eq!(
        (high[0].0.as_str(), high[0].1.as_str(), high[0].2.as_str(), high[0].4.as_str()),
        ("CompositePodGroupInitiallyScheduled", "True", "Scheduled", NOW)
    );
    assert!(
        high[0].3.starts_with("compositepodgroup ml/high: 2 placed, 0 already running; preempted 2 "),
        "{}",
        high[0].3
    );
    // The low tree's PodGroups are disruptionMode single: their pods go with the tree, but they
    // are no disruption target themselves, and no cycle ran for them: not written.
    assert_eq!(keys(&pod_groups(&text)), ["ml/high-r0", "ml/nested-leaf", "ml/too-deep"]);

    // A leaf that is disruptionMode all itself (as the API wants under an all parent) is one too.
    let input = std::fs::read_to_string(root().join("tests/scenarios/composite-preemption/cluster.yaml")).unwrap();
    let leaf =
        "  parentCompositePodGroupName: low\n  schedulingPolicy: {gang: {minCount: 1}}\n  priorityClassName: low\n";
    assert_eq!(input.matches(leaf).count(), 2);
    let all_leaves = input.replace(leaf, &format!("{leaf}  disruptionMode: {{all: {{}}}}\n"));
    let text = plan_yaml_stdin(&all_leaves, &["--now", NOW]);
    let groups = pod_groups(&text);
    assert_eq!(keys(&groups), ["ml/high-r0", "ml/low-r0", "ml/low-r1", "ml/nested-leaf", "ml/too-deep"]);
    for key in ["ml/low-r0", "ml/low-r1"] {
        assert_eq!(
            conditions(group(&groups, key)),
            [cond(
                "DisruptionTarget",
                "True",
                "PreemptionByScheduler",
                "muster: preempting every pod of the group (disruptionMode all) to make room for a higher-priority pod group (compositepodgroup ml/high)",
                NOW,
                None
            )],
            "{key}"
        );
    }
    assert_eq!(composite_conditions(composite(&composites(&text), "ml/low"))[0].0, "DisruptionTarget");
}

/// CompositePodGroups whose input already carries a status: updated as PodGroups are.
#[test]
fn composite_input_status_is_updated_as_kube_scheduler_updates_it() {
    let input = std::fs::read_to_string(root().join("tests/scenarios/composite-pod-group/cluster.yaml")).unwrap();
    let with_status = |input: String, name: &str, generation: i64, condition: &str| {
        let head = format!("kind: CompositePodGroup\nmetadata: {{name: {name}, namespace: ml}}\n");
        assert!(input.contains(&head), "{name}");
        input.replace(
            &head,
            &format!(
                "kind: CompositePodGroup\nmetadata: {{name: {name}, namespace: ml, generation: {generation}}}\nstatus:\n  conditions:\n  - {{type: CompositePodGroupInitiallyScheduled, {condition}, observedGeneration: 1}}\n"
            ),
        )
    };
    let input = with_status(
        input,
        "job-a",
        3,
        r#"status: "False", reason: Unschedulable, message: did not fit before, lastTransitionTime: "2025-12-31T00:00:00Z""#,
    );
    let input = with_status(
        input,
        "job-b",
        1,
        r#"status: "True", reason: Scheduled, message: placed in an earlier cycle, lastTransitionTime: "2025-06-01T00:00:00Z""#,
    );
    let input = with_status(
        input,
        "job-e",
        2,
        r#"status: "False", reason: Invalid, message: invalid before, lastTransitionTime: "2025-12-31T00:00:00Z""#,
    );

    let text = plan_yaml_stdin(&input, &["--now", NOW]);
    let cpgs = composites(&text);
    // False -> True: a transition at --now, observedGeneration from metadata.generation.
    assert_eq!(
        composite_conditions(composite(&cpgs, "ml/job-a")),
        [cond(
            "CompositePodGroupInitiallyScheduled",
            "True",
            "Scheduled",
            "compositepodgroup ml/job-a: 4 placed, 0 already running",
            NOW,
            Some(3)
        )]
    );
    // Once True, never back to False: the input's condition as it was.
    let job_b = cond(
        "CompositePodGroupInitiallyScheduled",
        "True",
        "Scheduled",
        "placed in an earlier cycle",
        "2025-06-01T00:00:00Z",
        Some(1),
    );
    assert_eq!(composite_conditions(composite(&cpgs, "ml/job-b")), std::slice::from_ref(&job_b));
    // False -> False: the lastTransitionTime kept; message and observedGeneration updated.
    let job_e = cond(
        "CompositePodGroupInitiallyScheduled",
        "False",
        "Invalid",
        "compositepodgroup ml/job-e is invalid: its groups belong to several Workloads (job-e, other)",
        "2025-12-31T00:00:00Z",
        Some(2),
    );
    assert_eq!(composite_conditions(composite(&cpgs, "ml/job-e")), std::slice::from_ref(&job_e));

    // Without --now: the transition is named in a comment and the input's condition stays; the
    // others need no new time and are written as with --now.
    let text = plan_yaml_stdin(&input, &[]);
    let cpgs = composites(&text);
    assert_eq!(
        comment_before_kind(&text, "CompositePodGroup", "job-a").as_deref(),
        Some(
            "CompositePodGroupInitiallyScheduled=True (Scheduled: compositepodgroup ml/job-a: 4 placed, 0 already running) is not written: its lastTransitionTime needs --now (a plan reads no clock)"
        )
    );
    assert_eq!(
        composite_conditions(composite(&cpgs, "ml/job-a")),
        [cond(
            "CompositePodGroupInitiallyScheduled",
            "False",
            "Unschedulable",
            "did not fit before",
            "2025-12-31T00:00:00Z",
            Some(1)
        )]
    );
    for name in ["job-b", "job-e"] {
        assert_eq!(comment_before_kind(&text, "CompositePodGroup", name), None, "{name}");
    }
    assert_eq!(composite_conditions(composite(&cpgs, "ml/job-b")), [job_b]);
    assert_eq!(composite_conditions(composite(&cpgs, "ml/job-e")), [job_e]);
}

#[test]
fn without_now_new_composite_conditions_are_named_in_a_comment() {
    let text = plan_yaml(&["tests/scenarios/composite-preemption"], &[]);
    for name in ["high", "low", "nested"] {
        let note = comment_before_kind(&text, "CompositePodGroup", name).unwrap_or_else(|| panic!("{name}"));
        assert!(note.ends_with("is not written: its lastTransitionTime needs --now (a plan reads no clock)"), "{note}");
        assert!(composite(&composites(&text), &format!("ml/{name}")).status.is_none(), "{name}");
    }
    let note = comment_before_kind(&text, "CompositePodGroup", "low").unwrap();
    assert!(
        note.starts_with(
            "DisruptionTarget=True (PreemptionByScheduler: muster: preempting every pod of the tree (disruptionMode all) to make room for a higher-priority pod group (compositepodgroup ml/high))"
        ),
        "{note}"
    );
    let note = comment_before_kind(&text, "CompositePodGroup", "high").unwrap();
    assert!(
        note.starts_with("CompositePodGroupInitiallyScheduled=True (Scheduled: compositepodgroup ml/high: "),
        "{note}"
    );
}
