//! The Job controller (`pkg/controller/job/job_controller.go` `manageJob`,
//! `indexed_job_utils.go`), with what the API server adds to a Job on create
//! (`pkg/registry/batch/job/strategy.go` `generateSelector`).
//!
//! A Job keeps `parallelism` (default 1) pods active, limited by the completions still needed:
//! with `completions`, `min(completions - succeeded, parallelism)`; without, `parallelism` until a
//! pod has succeeded. Pods being deleted are replaced at once (`podReplacementPolicy:
//! TerminatingOrFailed`, the default without a `podFailurePolicy`) or only once Failed (`Failed`,
//! the default with one). Nothing is created for a suspended Job, a finished one (a `Complete`,
//! `Failed`, `SuccessCriteriaMet` or `FailureTarget` condition), one whose failed pods exceed
//! `backoffLimit` (default 6), or one with `spec.managedBy` other than
//! `kubernetes.io/job-controller` (another controller's: skipped with a note).
//!
//! Pods: `GetPodFromTemplate` with the labels the API server gives the template
//! (`batch.kubernetes.io/controller-uid`, `batch.kubernetes.io/job-name` and the legacy
//! `controller-uid`, `job-name`, unless `manualSelector`), the finalizer
//! `batch.kubernetes.io/job-tracking`, and `generateName: <job>-`. Indexed Jobs
//! (`completionMode: Indexed`) fill the lowest missing indexes first (not succeeded —
//! `status.completedIndexes` or a Succeeded pod —, not active, not failed for good under
//! `backoffLimitPerIndex`); each pod gets `generateName: <job>-<index>-`, the annotation and the
//! label (PodIndexLabel, GA) `batch.kubernetes.io/job-completion-index`, `spec.hostname`
//! `<job>-<index>`, the variable `JOB_COMPLETION_INDEX` in every container and init container
//! (from that label), and with `backoffLimitPerIndex` the annotation
//! `batch.kubernetes.io/job-index-failure-count`.
//!
//! Deviations and limits: a plan has no clock, so back-off delays before replacing a failed pod
//! and `activeDeadlineSeconds` are not applied; succeeded and failed counts are the larger of the
//! Job's status and its pods (upstream adds pods not yet counted, which needs the tracking
//! finalizers' history); `successPolicy` is honoured only through its condition; the alpha
//! `WorkloadWithJob` integration (a Workload and PodGroup per Job, `spec.scheduling`) is off, as
//! by default in 1.37.

use muster_api::PodObject;
use std::collections::BTreeSet;

use k8s_openapi::Resource;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::naming::MAX_GENERATED_NAME_LENGTH;
use crate::pods::{Owner, Pods, from_template, is_active, phase};
use crate::{Created, CreatedObject, Expansion, ObjectRef};

pub const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
pub const JOB_NAME: &str = "batch.kubernetes.io/job-name";
pub const LEGACY_CONTROLLER_UID: &str = "controller-uid";
pub const LEGACY_JOB_NAME: &str = "job-name";
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
pub const JOB_CONTROLLER: &str = "kubernetes.io/job-controller";
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

pub(crate) fn sync_all(jobs: &[Job], pods: &mut Pods<'_>, out: &mut Expansion) {
    for job in jobs {
        let by = ObjectRef::of(Job::KIND, &job.metadata);
        let (created, notes) = sync(job, pods);
        out.notes.extend(notes.into_iter().map(|n| format!("{by}: {n}")));
        for pod in created {
            out.created.push(Created { object: CreatedObject::Pod(Box::new(pod)), by: by.clone(), root: by.clone() });
        }
    }
}

/// The pods `job` creates given the pods that exist (to which they are added), and notes.
pub fn sync(job: &Job, pods: &mut Pods<'_>) -> (Vec<Pod>, Vec<String>) {
    let (mut created, mut notes) = (Vec::new(), Vec::new());
    let Some(spec) = job.spec.as_ref() else { return (created, notes) };
    if let Some(m) = spec.managed_by.as_deref().filter(|m| *m != JOB_CONTROLLER) {
        notes.push(format!("spec.managedBy is {m:?}, not {JOB_CONTROLLER}: left to that controller, no pods created"));
        return (created, notes);
    }
    if job.metadata.deletion_timestamp.is_some() {
        return (created, notes);
    }
    let status = job.status.clone().unwrap_or_default();
    if let Some(c) = status.conditions.iter().flatten().find(|c| {
        c.status == "True" && matches!(c.type_.as_str(), "Complete" | "Failed" | "SuccessCriteriaMet" | "FailureTarget")
    }) {
        notes.push(format!("finished (condition {}): no pods created", c.type_));
        return (created, notes);
    }
    if spec.suspend == Some(true) {
        notes.push("suspended: no pods created".into());
        return (created, notes);
    }
    if spec.scheduling.is_some() {
        notes.push("spec.scheduling needs the alpha WorkloadWithJob gate (off by default in 1.37): no Workload or PodGroup is created, pods are scheduled one by one".into());
    }
    let owner = Owner { api_version: Job::API_VERSION, kind: Job::KIND, meta: &job.metadata };
    let (name, uid) = (owner.name(), owner.uid());
    let manual = spec.manual_selector == Some(true);
    let mut template = spec.template.clone();
    if !manual {
        let labels = template.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(Default::default);
        for (k, v) in [(LEGACY_CONTROLLER_UID, uid), (LEGACY_JOB_NAME, name), (CONTROLLER_UID, uid), (JOB_NAME, name)] {
            labels.entry(k.into()).or_insert_with(|| v.into());
        }
    }
    let selector = match (&spec.selector, manual) {
        (Some(s), _) => s.clone(),
        (None, false) => {
            LabelSelector { match_labels: Some([(CONTROLLER_UID.into(), uid.into())].into()), ..Default::default() }
        }
        (None, true) => LabelSelector::default(),
    };
    let planned = match plan(job, &owner, &selector, pods) {
        Ok(p) => p,
        Err(note) => {
            notes.push(note);
            return (created, notes);
        }
    };
    let mut base = template;
    let finalizers = base.metadata.get_or_insert_with(Default::default).finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.into());
    }
    if planned.iter().any(Option::is_some) {
        for c in
            base.spec.iter_mut().flat_map(|s| s.init_containers.iter_mut().flatten().chain(s.containers.iter_mut()))
        {
            add_index_env(c);
        }
    }
    for index in planned {
        let Some((i, failures)) = index else {
            let mut pod = from_template(&base, &owner);
            pod.metadata.name = Some(pods.generate_name(owner.namespace(), &format!("{name}-")));
            created.push(pods.add(pod));
            continue;
        };
        let mut t = base.clone();
        let meta = t.metadata.get_or_insert_with(Default::default);
        meta.annotations.get_or_insert_with(Default::default).insert(COMPLETION_INDEX.into(), i.to_string());
        meta.labels.get_or_insert_with(Default::default).insert(COMPLETION_INDEX.into(), i.to_string());
        if let Some(n) = failures {
            meta.annotations.get_or_insert_with(Default::default).insert(INDEX_FAILURE_COUNT.into(), n.to_string());
        }
        t.spec.get_or_insert_with(Default::default).hostname = Some(format!("{name}-{i}"));
        let mut pod = from_template(&t, &owner);
        let prefix = generate_name_with_index(name, i);
        pod.metadata.generate_name = Some(prefix.clone());
        pod.metadata.name = Some(pods.generate_name(owner.namespace(), &prefix));
        created.push(pods.add(pod));
    }
    (created, notes)
}

/// A pod to create: `None` for a pod of a non-indexed Job, `Some((index, failure count))` for an
/// indexed one (the count only with `backoffLimitPerIndex`).
type ToCreate = Option<(usize, Option<i64>)>;

/// The pods to create, or why none.
fn plan(job: &Job, owner: &Owner<'_>, selector: &LabelSelector, pods: &Pods<'_>) -> Result<Vec<ToCreate>, String> {
    let spec = job.spec.as_ref().expect("checked by sync");
    let status = job.status.clone().unwrap_or_default();
    let mine: Vec<&dyn PodObject> = pods.claimed(owner, selector).collect();
    let active: Vec<&dyn PodObject> = mine.iter().copied().filter(|p| is_active(*p)).collect();
    let terminating: Vec<&dyn PodObject> = mine
        .iter()
        .copied()
        .filter(|p| p.meta().deletion_timestamp.is_some() && !matches!(phase(*p), "Succeeded" | "Failed"))
        .collect();
    let only_failed = spec.pod_replacement_policy.as_deref().unwrap_or(if spec.pod_failure_policy.is_some() {
        "Failed"
    } else {
        "TerminatingOrFailed"
    }) == "Failed";
    let failed_pods: Vec<&dyn PodObject> = mine
        .iter()
        .copied()
        .filter(|p| {
            phase(*p) == "Failed" || (!only_failed && p.meta().deletion_timestamp.is_some() && phase(*p) != "Succeeded")
        })
        .collect();
    let parallelism = i64::from(spec.parallelism.unwrap_or(1).max(0));
    let waiting = if only_failed { terminating.len() as i64 } else { 0 };
    let per_index = spec.backoff_limit_per_index;
    let failed = i64::from(status.failed.unwrap_or(0)).max(failed_pods.len() as i64);
    let backoff_limit = i64::from(spec.backoff_limit.unwrap_or(if per_index.is_some() { i32::MAX } else { 6 }));
    if failed > backoff_limit {
        return Err(format!(
            "{failed} failed pods exceed backoffLimit {backoff_limit}: the Job fails, no pods created"
        ));
    }
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    if !indexed {
        let succeeded = i64::from(status.succeeded.unwrap_or(0))
            .max(mine.iter().filter(|p| phase(**p) == "Succeeded").count() as i64);
        let want = match spec.completions {
            None if succeeded > 0 => active.len() as i64,
            None => parallelism,
            Some(c) => (i64::from(c) - succeeded).clamp(0, parallelism),
        };
        return Ok(vec![None; (want - active.len() as i64 - waiting).max(0) as usize]);
    }
    let Some(completions) = spec.completions.map(|c| c.max(0) as usize) else {
        return Err("completionMode Indexed without completions (the API server refuses it): no pods created".into());
    };
    let index_of = |p: &dyn PodObject| -> Option<usize> {
        p.meta().annotations.as_ref()?.get(COMPLETION_INDEX)?.parse::<usize>().ok().filter(|i| *i < completions)
    };
    let mut completed = parse_indexes(status.completed_indexes.as_deref().unwrap_or(""), completions);
    completed.extend(mine.iter().filter(|p| phase(**p) == "Succeeded").filter_map(|p| index_of(*p)));
    let failure_count = |i: usize| -> i64 {
        failed_pods
            .iter()
            .filter(|p| index_of(**p) == Some(i))
            .map(|p| {
                let prior = p.meta().annotations.as_ref().and_then(|a| a.get(INDEX_FAILURE_COUNT));
                prior.and_then(|v| v.parse::<i64>().ok()).unwrap_or(0) + 1
            })
            .max()
            .unwrap_or(0)
    };
    let mut failed_indexes = BTreeSet::new();
    if let Some(limit) = per_index {
        failed_indexes = parse_indexes(status.failed_indexes.as_deref().unwrap_or(""), completions);
        failed_indexes.extend((0..completions).filter(|i| failure_count(*i) > i64::from(limit)));
        if let Some(max) = spec.max_failed_indexes
            && failed_indexes.len() as i64 > i64::from(max)
        {
            return Err(format!(
                "{} failed indexes exceed maxFailedIndexes {max}: the Job fails, no pods created",
                failed_indexes.len()
            ));
        }
    }
    let mut taken: BTreeSet<usize> = completed.clone();
    taken.extend(failed_indexes.iter().copied());
    taken.extend(active.iter().filter_map(|p| index_of(*p)));
    if only_failed {
        taken.extend(terminating.iter().filter_map(|p| index_of(*p)));
    }
    let want = (completions as i64 - completed.len() as i64).clamp(0, parallelism);
    let count = (want - active.len() as i64 - waiting).max(0) as usize;
    let indexes = (0..completions).filter(|i| !taken.contains(i)).take(count);
    Ok(indexes.map(|i| Some((i, per_index.map(|_| failure_count(i))))).collect())
}

/// `podGenerateNameWithIndex`: `<job>-<index>-`, the Job's name cut so that the whole fits in 58.
pub fn generate_name_with_index(job: &str, index: usize) -> String {
    let suffix = format!("-{index}-");
    let full = format!("{job}{suffix}");
    if full.len() <= MAX_GENERATED_NAME_LENGTH {
        return full;
    }
    let mut cut = MAX_GENERATED_NAME_LENGTH - suffix.len();
    while !job.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &job[..cut])
}

/// `addCompletionIndexEnvVariable`: `JOB_COMPLETION_INDEX` from the completion-index label (the
/// field path upstream uses with PodIndexLabel), unless the container already sets it.
fn add_index_env(c: &mut Container) {
    let env = c.env.get_or_insert_with(Vec::new);
    if env.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
        return;
    }
    env.push(EnvVar {
        name: COMPLETION_INDEX_ENV.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.labels['{COMPLETION_INDEX}']"),
            }),
            ..Default::default()
        }),
    });
}

/// Indexes written as `1,3-5,7` (`status.completedIndexes`, `failedIndexes`), those below
/// `completions`; malformed parts are skipped.
pub fn parse_indexes(text: &str, completions: usize) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            out.extend((a..=b.min(completions.saturating_sub(1))).take_while(|i| *i < completions));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};

    use super::*;
    use crate::testing::{meta, pod, template};

    fn job(completions: Option<i32>, parallelism: Option<i32>, indexed: bool) -> Job {
        let mut m = meta("ml", "train");
        m.uid = Some("job-uid".into());
        Job {
            metadata: m,
            spec: Some(JobSpec {
                completions,
                parallelism,
                completion_mode: indexed.then(|| "Indexed".into()),
                template: template(&[("app", "train")]),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn names(pods: &[Pod]) -> Vec<&str> {
        pods.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect()
    }

    fn job_pod(name: &str, index: Option<usize>, phase: &str) -> Pod {
        let mut p = pod("ml", name, &[(CONTROLLER_UID, "job-uid")], Some(("Job", "train", "job-uid")), phase);
        if let Some(i) = index {
            p.metadata.annotations = Some([(COMPLETION_INDEX.to_string(), i.to_string())].into());
        }
        p
    }

    #[test]
    fn non_indexed_pods_get_labels_finalizer_and_owner() {
        let (pods, notes) = sync(&job(Some(5), Some(2), false), &mut Pods::new(&[]));
        assert!(notes.is_empty());
        assert_eq!(pods.len(), 2);
        let p = &pods[0];
        let name = p.metadata.name.as_deref().unwrap();
        assert!(name.starts_with("train-") && name.len() == "train-".len() + 5, "{name}");
        let l = p.metadata.labels.as_ref().unwrap();
        for (k, v) in [
            (CONTROLLER_UID, "job-uid"),
            (JOB_NAME, "train"),
            (LEGACY_CONTROLLER_UID, "job-uid"),
            (LEGACY_JOB_NAME, "train"),
            ("app", "train"),
        ] {
            assert_eq!(l[k], v, "{k}");
        }
        assert_eq!(p.metadata.finalizers.as_deref(), Some(&[TRACKING_FINALIZER.to_string()][..]));
        let r = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((r.api_version.as_str(), r.kind.as_str(), r.uid.as_str()), ("batch/v1", "Job", "job-uid"));
        assert!(p.spec.as_ref().unwrap().hostname.is_none());
    }

    #[test]
    fn counts_follow_parallelism_completions_and_succeeded_pods() {
        // Default parallelism 1.
        assert_eq!(sync(&job(None, None, false), &mut Pods::new(&[])).0.len(), 1);
        // completions 3, 2 succeeded: 1 more even with parallelism 4.
        let (a, b) = (job_pod("a", None, "Succeeded"), job_pod("b", None, "Succeeded"));
        assert_eq!(sync(&job(Some(3), Some(4), false), &mut Pods::new(&[&a, &b])).0.len(), 1);
        // No completions: once one succeeded, nothing new.
        assert!(sync(&job(None, Some(4), false), &mut Pods::new(&[&a])).0.is_empty());
        // An active pod counts.
        let c = job_pod("c", None, "Running");
        assert_eq!(sync(&job(Some(10), Some(3), false), &mut Pods::new(&[&c])).0.len(), 2);
        // Status counts too.
        let mut j = job(Some(3), Some(3), false);
        j.status = Some(JobStatus { succeeded: Some(3), ..Default::default() });
        assert!(sync(&j, &mut Pods::new(&[])).0.is_empty());
    }

    #[test]
    fn suspended_finished_and_foreign_jobs_create_nothing() {
        let mut j = job(Some(2), Some(2), false);
        j.spec.as_mut().unwrap().suspend = Some(true);
        let (pods, notes) = sync(&j, &mut Pods::new(&[]));
        assert!(pods.is_empty());
        assert_eq!(notes, ["suspended: no pods created"]);

        let mut j = job(Some(2), Some(2), false);
        j.spec.as_mut().unwrap().managed_by = Some("kueue.x-k8s.io/multikueue".into());
        let (pods, notes) = sync(&j, &mut Pods::new(&[]));
        assert!(pods.is_empty());
        assert!(notes[0].contains("managedBy"));
        j.spec.as_mut().unwrap().managed_by = Some(JOB_CONTROLLER.into());
        assert_eq!(sync(&j, &mut Pods::new(&[])).0.len(), 2);

        let mut j = job(Some(2), Some(2), false);
        j.status = Some(JobStatus {
            conditions: Some(vec![JobCondition {
                type_: "Complete".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert!(sync(&j, &mut Pods::new(&[])).0.is_empty());
    }

    #[test]
    fn backoff_limit_stops_a_failing_job() {
        let failed: Vec<Pod> = (0..3).map(|i| job_pod(&format!("f{i}"), None, "Failed")).collect();
        let refs: Vec<&dyn crate::PodObject> = failed.iter().map(|p| p as &dyn crate::PodObject).collect();
        let mut j = job(Some(5), Some(2), false);
        j.spec.as_mut().unwrap().backoff_limit = Some(2);
        let (pods, notes) = sync(&j, &mut Pods::new(&refs));
        assert!(pods.is_empty());
        assert!(notes[0].contains("backoffLimit"));
        j.spec.as_mut().unwrap().backoff_limit = Some(3);
        assert_eq!(sync(&j, &mut Pods::new(&refs)).0.len(), 2);
    }

    #[test]
    fn indexed_jobs_fill_the_lowest_missing_indexes() {
        let (pods, _) = sync(&job(Some(4), Some(2), true), &mut Pods::new(&[]));
        assert_eq!(pods.len(), 2);
        for (i, p) in pods.iter().enumerate() {
            let name = p.metadata.name.as_deref().unwrap();
            let prefix = format!("train-{i}-");
            assert!(name.starts_with(&prefix) && name.len() == prefix.len() + 5, "{name}");
            assert_eq!(p.metadata.generate_name.as_deref(), Some(prefix.as_str()));
            assert_eq!(p.metadata.annotations.as_ref().unwrap()[COMPLETION_INDEX], i.to_string());
            assert_eq!(p.metadata.labels.as_ref().unwrap()[COMPLETION_INDEX], i.to_string());
            let spec = p.spec.as_ref().unwrap();
            assert_eq!(spec.hostname.as_deref(), Some(format!("train-{i}").as_str()));
            let env = spec.containers[0].env.as_ref().unwrap();
            let e = env.iter().find(|e| e.name == COMPLETION_INDEX_ENV).unwrap();
            let path = &e.value_from.as_ref().unwrap().field_ref.as_ref().unwrap().field_path;
            assert_eq!(path, "metadata.labels['batch.kubernetes.io/job-completion-index']");
        }
        // Index 0 succeeded (status), index 1 running, index 3 succeeded (pod): index 2 next.
        let mut j = job(Some(4), Some(2), true);
        j.status = Some(JobStatus { completed_indexes: Some("0".into()), ..Default::default() });
        let (running, done) = (job_pod("r", Some(1), "Running"), job_pod("d", Some(3), "Succeeded"));
        let (pods, _) = sync(&j, &mut Pods::new(&[&running, &done]));
        let idx: Vec<_> =
            pods.iter().map(|p| p.metadata.annotations.as_ref().unwrap()[COMPLETION_INDEX].clone()).collect();
        assert_eq!(idx, ["2"]);
    }

    #[test]
    fn backoff_limit_per_index_counts_failures_and_skips_failed_indexes() {
        let mut j = job(Some(3), Some(3), true);
        j.spec.as_mut().unwrap().backoff_limit_per_index = Some(1);
        let mut once = job_pod("f0", Some(0), "Failed");
        once.metadata.annotations.as_mut().unwrap().insert(INDEX_FAILURE_COUNT.into(), "0".into());
        let mut twice = job_pod("f1", Some(1), "Failed");
        twice.metadata.annotations.as_mut().unwrap().insert(INDEX_FAILURE_COUNT.into(), "1".into());
        let (pods, _) = sync(&j, &mut Pods::new(&[&once, &twice]));
        let got: Vec<(String, String)> = pods
            .iter()
            .map(|p| {
                let a = p.metadata.annotations.as_ref().unwrap();
                (a[COMPLETION_INDEX].clone(), a[INDEX_FAILURE_COUNT].clone())
            })
            .collect();
        // Index 1 failed twice (> 1): failed for good. Index 0 retried with count 1, index 2 new.
        assert_eq!(got, [("0".to_string(), "1".to_string()), ("2".to_string(), "0".to_string())]);
    }

    #[test]
    fn terminating_pods_are_replaced_unless_the_policy_is_failed() {
        let mut t = job_pod("t", None, "Running");
        t.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        let mut j = job(Some(1), Some(1), false);
        assert_eq!(sync(&j, &mut Pods::new(&[&t])).0.len(), 1);
        j.spec.as_mut().unwrap().pod_replacement_policy = Some("Failed".into());
        assert!(sync(&j, &mut Pods::new(&[&t])).0.is_empty());
    }

    #[test]
    fn index_helpers() {
        assert_eq!(parse_indexes("0,2-4, 9", 5).into_iter().collect::<Vec<_>>(), [0, 2, 3, 4]);
        assert_eq!(generate_name_with_index("train", 3), "train-3-");
        let long = "j".repeat(60);
        let g = generate_name_with_index(&long, 12);
        assert_eq!(g.len(), 58);
        assert!(g.ends_with("-12-"));
        assert_eq!(names(&[]), Vec::<&str>::new());
    }
}
