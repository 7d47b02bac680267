//! `muster plan -o yaml` writes the PodGroups a plan touched with the status kube-scheduler would
//! write: `PodGroupInitiallyScheduled` (True/Scheduled, False/Unschedulable, never True back to
//! False), `DisruptionTarget` for a group preempted as a whole, muster's `GangWaitTimeout`, and
//! `resourceClaimStatuses` for generated PodGroup claims. `--now` is every new condition's
//! `lastTransitionTime`; without it a comment line names what is left out.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use k8s_openapi::api::scheduling::v1beta1::PodGroup;

const NOW: &str = "2026-01-01T00:00:00Z";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn muster(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_muster")).args(args).current_dir(root()).output().unwrap()
}

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

/// The PodGroups of a `-o yaml` output, read back as muster reads input (so the output is valid
/// input), by `namespace/name`.
fn pod_groups(text: &str) -> Vec<(String, PodGroup)> {
    let m = muster_manifest::load_str("plan.yaml", text).expect("the output is valid input");
    m.objects
        .into_iter()
        .filter_map(|l| match l.object {
            muster_manifest::Object::PodGroup(g) => Some(*g),
            _ => None,
        })
        .map(|g| {
            let key = format!("{}/{}", g.metadata.namespace.as_deref().unwrap(), g.metadata.name.as_deref().unwrap());
            (key, g)
        })
        .collect()
}

fn group<'a>(groups: &'a [(String, PodGroup)], key: &str) -> &'a PodGroup {
    &groups.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("{key} not written")).1
}

/// A condition as (type, status, reason, message, lastTransitionTime, observedGeneration).
type Cond = (String, String, String, String, String, Option<i64>);

fn conditions(g: &PodGroup) -> Vec<Cond> {
    g.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
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
    let doc = text
        .split("---\n")
        .find(|d| d.contains("\nkind: PodGroup\n") && d.contains(&format!("\n  name: {name}\n")))
        .unwrap_or_else(|| panic!("PodGroup {name} not in the output"));
    doc.lines().next().and_then(|l| l.strip_prefix("# ")).map(str::to_string)
}

/// The PodGroup documents of an output, with their comment lines (for snapshots).
fn pod_group_documents(text: &str) -> String {
    text.split("---\n").filter(|d| d.contains("\nkind: PodGroup\n")).map(|d| format!("---\n{d}")).collect()
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
