//! Jobs carried out against the API server, as kube-scheduler 1.37 writes them
//! (live-and-sim.md §2): volumes bound or provisioned and waited for
//! ([`crate::volume_binding`]); a claim's finalizer by update, its allocation (with its
//! `allocationTimestamp`) and `reservedFor` by an
//! update of `resourceclaims/status` carrying the resourceVersion, retried on conflict after
//! reading the claim again (and given up when it was allocated elsewhere meanwhile or is being
//! deleted), then the wait for devices' binding conditions ([`crate::binding_conditions`]);
//! `pods/binding`; `PodScheduled=False` by a strategic-merge patch of `pods/status`;
//! events.k8s.io/v1 events; victims marked `DisruptionTarget` and deleted with their uid as
//! precondition; Unreserve as a strategic-merge patch deleting the pod's `reservedFor` entry.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use muster_sched::effects::EventType;
use serde_json::json;

use crate::jobs::{BindUnit, Binding as PodBinding, ClaimWrite, Job, PodRef};
use crate::limiter::Limiter;
use crate::metrics::Metrics;
use crate::series::EventWrite;

/// The finalizer that keeps an allocated claim from going before it is deallocated.
pub const CLAIM_FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// Conflicts retried per claim write (client-go's `retry.DefaultRetry` makes 5 steps).
const CONFLICT_RETRIES: usize = 5;
/// How long a preemptor waits for its victims to go (their graceful termination) before its
/// binding cycle fails and it is tried again.
const VICTIM_WAIT: std::time::Duration = std::time::Duration::from_secs(120);
/// Upstream's limit on an event's note.
const NOTE_LIMIT: usize = 1024;

/// What a job did, reported to the loop.
#[derive(Debug)]
pub enum Done {
    /// A binding unit: each claim written (the API server's copy) or not, each pod bound or why not.
    Bind { claims: Vec<(String, Option<ResourceClaim>)>, pods: Vec<(PodRef, std::result::Result<(), String>)> },
    /// Any other job (a failure is logged).
    Other,
}

/// The API client with what every write needs.
pub struct Writer {
    pub client: Client,
    pub limiter: Limiter,
    pub metrics: Arc<Metrics>,
    /// The `reportingInstance` of events (the leader's identity).
    pub identity: String,
    /// VolumeBinding's `bindTimeoutSeconds`.
    pub volume_bind_timeout: std::time::Duration,
    /// DynamicResources' `bindingTimeout`: how long PreBind waits for devices' binding conditions.
    pub dra_binding_timeout: std::time::Duration,
}

type Result<T> = std::result::Result<T, kube::Error>;

impl Writer {
    pub async fn run(&self, job: Job) -> Done {
        match job {
            Job::Bind(unit) => self.bind_unit(unit).await,
            Job::Evict { victim, by } => {
                if let Err(e) = self.evict(&victim, &by).await {
                    tracing::warn!(pod = %victim.key(), error = %e, "preemption: victim not deleted");
                }
                Done::Other
            }
            Job::Unschedulable { pod, reason, message, patch, event } => {
                if patch && let Err(e) = self.unschedulable(&pod, reason, &message).await {
                    tracing::warn!(pod = %pod.key(), error = %e, "PodScheduled=False not written");
                }
                let named = |name: String| {
                    let e = self.event_object(&pod, EventType::Warning, "FailedScheduling", "Scheduling", &message);
                    Event { metadata: ObjectMeta { name: Some(name), ..e.metadata }, ..e }
                };
                match event {
                    EventWrite::Nothing => {}
                    EventWrite::Create { name } => self.create_event(&pod.namespace, named(name)).await,
                    EventWrite::Series { name, count } => self.event_series(named(name), count).await,
                }
                Done::Other
            }
            Job::EventSeries { namespace, name, count } => {
                if let Err(e) = self.patch_series(&namespace, &name, count).await {
                    tracing::debug!(event = %format!("{namespace}/{name}"), error = %e, "event series not written");
                }
                Done::Other
            }
            Job::GroupCondition { composite, namespace, name, type_, status, reason, message, since } => {
                let patch = json!({"status": {"conditions": [{
                    "type": type_, "status": status, "reason": reason, "message": message,
                    "lastTransitionTime": since.unwrap_or_else(|| Time(now())),
                }]}});
                let r = self.group_condition(composite, &namespace, &name, Patch::Strategic(patch)).await;
                if let Err(e) = r {
                    tracing::warn!(group = %format!("{namespace}/{name}"), error = %e, "condition not written");
                }
                Done::Other
            }
            Job::Event { pod, kind, reason, action, note } => {
                self.event(&pod, kind, reason, action, &note).await;
                Done::Other
            }
        }
    }

    /// Claims first, then each pod: its extended-resources status, its binding, its event. A
    /// claim that cannot be written fails every pod of the unit (none is bound without it).
    async fn bind_unit(&self, unit: BindUnit) -> Done {
        let started = Instant::now();
        let mut claims = Vec::new();
        let mut failed: Option<String> = None;
        if !unit.victims.is_empty() {
            for b in &unit.pods {
                self.nominate(&b.pod, &b.node).await;
            }
            failed = self.wait_gone(&unit.victims).await.err();
        }
        // VolumeBinding's PreBind runs before DynamicResources' (upstream's plugin order).
        for b in &unit.pods {
            if failed.is_none()
                && let Some(v) = &b.volumes
                && let Err(e) = self.bind_volumes(v).await
            {
                failed = Some(format!("pod {}: {e}", b.pod.key()));
            }
        }
        for write in &unit.claims {
            let key = write.key();
            if failed.is_some() {
                claims.push((key, None));
                continue;
            }
            match self.write_claim(write).await {
                Ok(c) => claims.push((key, Some(c))),
                Err(e) => {
                    failed = Some(format!("claim {key}: {e}"));
                    claims.push((key, None));
                }
            }
        }
        if failed.is_none() {
            failed = self.wait_binding_conditions(&unit, &mut claims).await.err();
        }
        let mut pods = Vec::new();
        for b in &unit.pods {
            let result = match &failed {
                Some(e) => Err(e.clone()),
                None => self.bind(b).await.map_err(|e| e.to_string()),
            };
            if result.is_ok() {
                let note = format!("Successfully assigned {} to {}", b.pod.key(), b.node);
                self.event(&b.pod, EventType::Normal, "Scheduled", "Binding", &note).await;
                self.metrics.binding_seconds.observe(started.elapsed().as_secs_f64());
            }
            pods.push((b.pod.clone(), result));
        }
        Done::Bind { claims, pods }
    }

    /// DynamicResources' PreBind for one claim (upstream's `bindClaim`).
    async fn write_claim(&self, write: &ClaimWrite) -> std::result::Result<ResourceClaim, String> {
        let want = &write.claim;
        let ns = want.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = want.metadata.name.clone().unwrap_or_default();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        let mut current = want.clone();
        if write.create {
            let mut fresh = want.clone();
            fresh.status = None;
            fresh.metadata.resource_version = None;
            current =
                self.call("create", "resourceclaims", api.create(&pp(), &fresh)).await.map_err(|e| e.to_string())?;
        }
        for attempt in 0..CONFLICT_RETRIES {
            if attempt > 0 {
                current = self.call("get", "resourceclaims", api.get(&name)).await.map_err(|e| e.to_string())?;
                check_still_ours(&current, want)?;
            }
            if !current.metadata.finalizers.iter().flatten().any(|f| f == CLAIM_FINALIZER) {
                current.metadata.finalizers.get_or_insert_with(Vec::new).push(CLAIM_FINALIZER.into());
                match self.call("update", "resourceclaims", api.replace(&name, &pp(), &current)).await {
                    Ok(c) => current = c,
                    Err(e) if conflict(&e) => continue,
                    Err(e) => return Err(e.to_string()),
                }
            }
            let next = with_allocation(&current, want);
            match self.call("update", "resourceclaims/status", api.replace_status(&name, &pp(), &next)).await {
                Ok(c) => return Ok(c),
                Err(e) if conflict(&e) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
        Err(format!("still conflicting after {CONFLICT_RETRIES} attempts"))
    }

    async fn bind(&self, b: &PodBinding) -> Result<()> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &b.pod.namespace);
        if let Some(status) = &b.extended {
            let patch = json!({"status": {"extendedResourceClaimStatus": status}});
            self.call("patch", "pods/status", api.patch_status(&b.pod.name, &pps(), &Patch::Strategic(patch))).await?;
        }
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(b.pod.name.clone()),
                namespace: Some(b.pod.namespace.clone()),
                uid: Some(b.pod.uid.clone()),
                ..Default::default()
            },
            target: ObjectReference { kind: Some("Node".into()), name: Some(b.node.clone()), ..Default::default() },
        };
        let params = pp();
        let call = api.create_subresource::<_, serde_json::Value>("binding", &b.pod.name, &params, &binding);
        self.call("create", "pods/binding", call).await.map(|_| ())
    }

    /// A group's condition, by a patch of its `status`: a CompositePodGroup's as
    /// `scheduling.k8s.io/v1alpha3`; a PodGroup's as v1beta1, or as v1alpha3 where the server
    /// does not serve that object as v1beta1 (404: a server that does not convert, the fake).
    async fn group_condition(
        &self,
        composite: bool,
        namespace: &str,
        name: &str,
        patch: Patch<serde_json::Value>,
    ) -> Result<()> {
        use k8s_openapi::api::scheduling::v1alpha3;
        let params = pps();
        if composite {
            let api: Api<v1alpha3::CompositePodGroup> = Api::namespaced(self.client.clone(), namespace);
            let call = api.patch_status(name, &params, &patch);
            return self.call("patch", "compositepodgroups/status", call).await.map(drop);
        }
        let api: Api<PodGroup> = Api::namespaced(self.client.clone(), namespace);
        match self.call("patch", "podgroups/status", api.patch_status(name, &params, &patch)).await {
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let api: Api<v1alpha3::PodGroup> = Api::namespaced(self.client.clone(), namespace);
                self.call("patch", "podgroups/status", api.patch_status(name, &params, &patch)).await.map(drop)
            }
            r => r.map(drop),
        }
    }

    /// `status.nominatedNodeName` while the victims go (a failure is logged: it only informs).
    async fn nominate(&self, pod: &PodRef, node: &str) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = json!({"status": {"nominatedNodeName": node}});
        if let Err(e) =
            self.call("patch", "pods/status", api.patch_status(&pod.name, &pps(), &Patch::Strategic(patch))).await
        {
            tracing::debug!(pod = %pod.key(), error = %e, "nominatedNodeName not written");
        }
    }

    /// Waits until every victim is gone (not found, or replaced by a pod with another uid),
    /// reading each again with a growing pause; gives up after [`VICTIM_WAIT`].
    async fn wait_gone(&self, victims: &[PodRef]) -> std::result::Result<(), String> {
        let deadline = Instant::now() + VICTIM_WAIT;
        for v in victims {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &v.namespace);
            let mut pause = std::time::Duration::from_millis(20);
            loop {
                match self.call("get", "pods", api.get_opt(&v.name)).await {
                    Ok(None) => break,
                    Ok(Some(p)) if p.metadata.uid.as_deref() != Some(v.uid.as_str()) => break,
                    _ if Instant::now() >= deadline => {
                        return Err(format!("victim {} still there after {VICTIM_WAIT:?}", v.key()));
                    }
                    _ => {}
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
        }
        Ok(())
    }

    /// Unreserve: the pods' entries leave the claim's `reservedFor`.
    pub async fn unreserve(&self, claim: &ResourceClaim, pod_uids: &[String]) -> Result<ResourceClaim> {
        let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({
            "metadata": {"uid": claim.metadata.uid},
            "status": {"reservedFor": pod_uids.iter().map(|uid| json!({"$patch": "delete", "uid": uid})).collect::<Vec<_>>()},
        });
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.call("patch", "resourceclaims/status", api.patch_status(name, &pps(), &Patch::Strategic(patch))).await
    }

    async fn evict(&self, victim: &PodRef, by: &str) -> Result<()> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &victim.namespace);
        let message = format!("muster: preempting to accommodate {by}");
        let patch = json!({"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": message, "lastTransitionTime": Time(now()),
        }]}});
        self.call("patch", "pods/status", api.patch_status(&victim.name, &pps(), &Patch::Strategic(patch))).await?;
        let dp = DeleteParams {
            preconditions: Some(Preconditions { uid: Some(victim.uid.clone()), resource_version: None }),
            ..Default::default()
        };
        self.call("delete", "pods", api.delete(&victim.name, &dp)).await?;
        self.event(victim, EventType::Normal, "Preempted", "Preempting", &format!("Preempted by {by}")).await;
        Ok(())
    }

    async fn unschedulable(&self, pod: &PodRef, reason: &str, message: &str) -> Result<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
            "lastProbeTime": null, "lastTransitionTime": Time(now()),
        }]}});
        self.call("patch", "pods/status", api.patch_status(&pod.name, &pps(), &Patch::Strategic(patch))).await
    }

    /// An events.k8s.io/v1 event about a pod; a failure is logged, never retried.
    pub(crate) async fn event(&self, pod: &PodRef, kind: EventType, reason: &str, action: &str, note: &str) {
        let event = self.event_object(pod, kind, reason, action, note);
        self.create_event(&pod.namespace, event).await;
    }

    /// The event, named after the pod and the time.
    fn event_object(&self, pod: &PodRef, kind: EventType, reason: &str, action: &str, note: &str) -> Event {
        let at = now();
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", pod.name, at.as_nanosecond())),
                namespace: Some(pod.namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(at)),
            type_: Some(match kind {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            reason: Some(reason.into()),
            action: Some(action.into()),
            note: Some(truncate(note, NOTE_LIMIT)),
            reporting_controller: Some("muster".into()),
            reporting_instance: Some(self.identity.clone()),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(pod.namespace.clone()),
                name: Some(pod.name.clone()),
                uid: Some(pod.uid.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    async fn create_event(&self, namespace: &str, event: Event) {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        if let Err(e) = self.call("create", "events", api.create(&pp(), &event)).await {
            tracing::debug!(reason = ?event.reason, error = %e, "event not written");
        }
    }

    /// The event becomes a series of `count`: a merge patch of its `series`; an event gone
    /// meanwhile is created again, with the series (as client-go's recorder does).
    async fn event_series(&self, event: Event, count: i32) {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        match self.patch_series(&namespace, &name, count).await {
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let series = EventSeries { count, last_observed_time: MicroTime(now()) };
                self.create_event(&namespace, Event { series: Some(series), ..event }).await;
            }
            Err(e) => tracing::debug!(event = %format!("{namespace}/{name}"), error = %e, "event series not written"),
            Ok(()) => {}
        }
    }

    async fn patch_series(&self, namespace: &str, name: &str, count: i32) -> Result<()> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let patch = Patch::Merge(json!({"series": {"count": count, "lastObservedTime": MicroTime(now())}}));
        self.call("patch", "events", api.patch(name, &pps(), &patch)).await.map(drop)
    }

    /// One API call: rate-limited, counted by verb, resource and response code.
    pub(crate) async fn call<T>(&self, verb: &str, resource: &str, call: impl Future<Output = Result<T>>) -> Result<T> {
        self.limiter.acquire().await;
        let result = call.await;
        let code = match &result {
            Ok(_) => 200,
            Err(kube::Error::Api(s)) => s.code,
            Err(_) => 0,
        };
        self.metrics.api_request(verb, resource, code);
        result
    }
}

/// The claim to send: `current` with `want`'s allocation and every `reservedFor` entry of either.
fn with_allocation(current: &ResourceClaim, want: &ResourceClaim) -> ResourceClaim {
    let mut next = current.clone();
    let want_status = want.status.clone().unwrap_or_default();
    let status = next.status.get_or_insert_with(Default::default);
    let stamped = status.allocation.as_ref().and_then(|a| a.allocation_timestamp.clone());
    status.allocation = want_status.allocation;
    // As kube-scheduler 1.37 (DRADeviceBindingConditions and DRAResourceClaimDeviceStatus, both
    // on): the allocation carries the time it was written, from which the binding timeout counts.
    if let Some(a) = status.allocation.as_mut()
        && a.allocation_timestamp.is_none()
    {
        a.allocation_timestamp = Some(stamped.unwrap_or(Time(now())));
    }
    let reserved = status.reserved_for.get_or_insert_with(Vec::new);
    for r in want_status.reserved_for.into_iter().flatten() {
        if !reserved.iter().any(|x: &ResourceClaimConsumerReference| x.uid == r.uid) {
            reserved.push(r);
        }
    }
    next
}

/// After a conflict: the claim read again must still be free for this allocation.
fn check_still_ours(current: &ResourceClaim, want: &ResourceClaim) -> std::result::Result<(), String> {
    if current.metadata.deletion_timestamp.is_some() {
        return Err("the claim is being deleted".into());
    }
    if want.metadata.uid.is_some() && current.metadata.uid != want.metadata.uid {
        return Err("the claim was replaced".into());
    }
    // The same allocation, whenever it was written.
    let allocation = |c: &ResourceClaim| {
        let mut a = c.status.as_ref().and_then(|s| s.allocation.clone());
        if let Some(a) = a.as_mut() {
            a.allocation_timestamp = None;
        }
        a
    };
    match allocation(current) {
        Some(a) if Some(&a) != allocation(want).as_ref() => Err("allocated elsewhere in the meantime".into()),
        _ => Ok(()),
    }
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub(crate) fn pp() -> PostParams {
    PostParams { field_manager: Some("muster".into()), ..Default::default() }
}

pub(crate) fn pps() -> PatchParams {
    PatchParams { field_manager: Some("muster".into()), ..Default::default() }
}

/// The live world's clock (the engine reads none).
pub(crate) fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}
