//! Why a pod failed before any node was tried: PreFilter's UnschedulableAndUnresolvable statuses
//! (DynamicResources, the volume plugins) and GangScheduling's PreEnqueue. The engine records
//! them as data ([`crate::FitError::pre_filter`], [`crate::explain::PodExplanation`]); `Display`
//! words them where they are shown, in kube-scheduler's words where upstream has some, so that
//! no attempt formats a sentence it may never show.

use std::fmt;

use crate::unresolved::Unresolved;

/// Why a pod failed before any node was tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreFilterReason {
    /// The cluster has no nodes.
    NoNodes,
    /// The pod has resource claims (or extended resources a DeviceClass backs) and the input
    /// has no DRA objects.
    NoDraInputs,
    /// A special extended-resources claim from an earlier attempt still exists.
    StaleExtendedClaim { claim: String },
    /// One of the pod's claims does not resolve.
    Claim(Unresolved),
    /// A claim already has the most consumers `reservedFor` may list.
    ClaimFullyReserved { claim: String, reserved: usize },
    /// An allocated claim's device has a NoExecute taint the claim does not tolerate.
    ClaimOnTaintedDevice { claim: String, device: String },
    /// A request (`<request>` or `<request>/<subrequest>`) of a claim still to allocate names a
    /// DeviceClass that does not exist.
    ClassNotFound { request: String, class: String },
    /// The pod's PodGroup does not resolve (GangScheduling's PreEnqueue).
    Group(Unresolved),
    /// The pod was tried alone though it belongs to a PodGroup.
    GroupMember,
    /// One of the volume plugins' PreFilters failed.
    Volume(VolumeReason),
}

/// Why a volume plugin's PreFilter (VolumeRestrictions, VolumeBinding, VolumeZone) failed, in
/// upstream's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeReason {
    /// A PersistentVolumeClaim the pod names is not in the store.
    ClaimNotFound(String),
    /// An ephemeral volume's claim has not been made yet.
    EphemeralClaimNotCreated(String),
    /// The claim is bound to a volume that does not exist (phase `Lost`).
    ClaimLost {
        claim: String,
        volume: String,
    },
    ClaimBeingDeleted(String),
    /// An ephemeral volume's claim is not controlled by the pod: `namespace/name` of each.
    ClaimNotForPod {
        claim: String,
        pod: String,
    },
    /// A claim with `Immediate` binding is not bound yet.
    UnboundImmediate,
    /// No node can reach every volume the pod's bound claims use.
    NoEligibleNode,
    ClaimWithoutName,
    /// An unbound claim names no storage class.
    ClaimWithoutVolumeOrClass,
    StorageClassNotFound(String),
    /// An unbound claim of an `Immediate` class (VolumeZone).
    VolumeWithoutName,
    VolumeNotFound(String),
}

impl fmt::Display for PreFilterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreFilterReason::NoNodes => f.write_str("no nodes available to schedule pods"),
            PreFilterReason::NoDraInputs => f.write_str("pod uses DRA resource claims, but the plan has no DRA inputs"),
            PreFilterReason::StaleExtendedClaim { claim } => write!(
                f,
                "cannot schedule extended resource claim: resourceclaim {claim} from an earlier attempt exists \
                 (kube-scheduler deletes it and retries the pod)"
            ),
            PreFilterReason::Claim(why) => why.fmt(f),
            PreFilterReason::ClaimFullyReserved { claim, reserved } => {
                write!(f, "resourceclaim {claim} is reserved by {reserved} consumers, the limit")
            }
            PreFilterReason::ClaimOnTaintedDevice { claim, device } => write!(
                f,
                "resourceclaim {claim} is allocated to a device with a NoExecute taint it does not tolerate ({device}): it gets no new reservations"
            ),
            PreFilterReason::ClassNotFound { request, class } => {
                write!(f, "request {request}: device class {class} does not exist")
            }
            PreFilterReason::Group(why) => write!(f, "{why}: the pod waits until its PodGroup exists"),
            PreFilterReason::GroupMember => {
                f.write_str("pod belongs to a PodGroup: it is scheduled in its group's cycle")
            }
            PreFilterReason::Volume(why) => why.fmt(f),
        }
    }
}

impl fmt::Display for VolumeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VolumeReason::ClaimNotFound(name) => write!(f, "persistentvolumeclaim {name:?} not found"),
            VolumeReason::EphemeralClaimNotCreated(name) => {
                write!(f, "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}")
            }
            VolumeReason::ClaimLost { claim, volume } => {
                write!(f, "persistentvolumeclaim {claim:?} bound to non-existent persistentvolume {volume:?}")
            }
            VolumeReason::ClaimBeingDeleted(name) => write!(f, "persistentvolumeclaim {name:?} is being deleted"),
            VolumeReason::ClaimNotForPod { claim, pod } => {
                write!(f, "PVC {claim} was not created for pod {pod} (pod is not owner)")
            }
            VolumeReason::UnboundImmediate => f.write_str(crate::plugins::volume_binding::UNBOUND_IMMEDIATE),
            VolumeReason::NoEligibleNode => {
                write!(f, "node(s) didn't satisfy plugin {}", crate::plugins::volume_binding::NAME)
            }
            VolumeReason::ClaimWithoutName => f.write_str("PersistentVolumeClaim had no name"),
            VolumeReason::ClaimWithoutVolumeOrClass => {
                f.write_str("PersistentVolumeClaim had no pv name and storageClass name")
            }
            VolumeReason::StorageClassNotFound(name) => write!(f, "storageclass.storage.k8s.io {name:?} not found"),
            VolumeReason::VolumeWithoutName => f.write_str("PersistentVolume had no name"),
            VolumeReason::VolumeNotFound(name) => write!(f, "persistentvolume {name:?} not found"),
        }
    }
}

impl From<VolumeReason> for PreFilterReason {
    fn from(why: VolumeReason) -> PreFilterReason {
        PreFilterReason::Volume(why)
    }
}

#[cfg(test)]
mod tests {
    use super::PreFilterReason::*;
    use super::VolumeReason::*;
    use super::*;

    #[test]
    fn each_reason_reads_as_upstream_words_it() {
        let s = |r: PreFilterReason| r.to_string();
        assert_eq!(s(NoNodes), "no nodes available to schedule pods");
        assert_eq!(s(NoDraInputs), "pod uses DRA resource claims, but the plan has no DRA inputs");
        assert_eq!(
            s(StaleExtendedClaim { claim: "ns/p-extended-resources-x".into() }),
            "cannot schedule extended resource claim: resourceclaim ns/p-extended-resources-x from an earlier \
             attempt exists (kube-scheduler deletes it and retries the pod)"
        );
        assert_eq!(s(Claim(Unresolved::ClaimNotFound("gpu".into()))), r#"resourceclaim "gpu" not found"#);
        assert_eq!(
            s(ClaimFullyReserved { claim: "ns/shared".into(), reserved: 256 }),
            "resourceclaim ns/shared is reserved by 256 consumers, the limit"
        );
        assert_eq!(
            s(ClaimOnTaintedDevice { claim: "ns/c".into(), device: "gpu.example.com/n0/gpu-0".into() }),
            "resourceclaim ns/c is allocated to a device with a NoExecute taint it does not tolerate \
             (gpu.example.com/n0/gpu-0): it gets no new reservations"
        );
        assert_eq!(
            s(ClassNotFound { request: "gpu/big".into(), class: "h100".into() }),
            "request gpu/big: device class h100 does not exist"
        );
        assert_eq!(
            s(Group(Unresolved::GroupNotFound("ml/g".into()))),
            r#"podgroup "ml/g" not found: the pod waits until its PodGroup exists"#
        );
        assert_eq!(s(GroupMember), "pod belongs to a PodGroup: it is scheduled in its group's cycle");
    }

    #[test]
    fn each_volume_reason_reads_as_upstream_words_it() {
        let s = |r: VolumeReason| PreFilterReason::from(r).to_string();
        assert_eq!(s(ClaimNotFound("data".into())), r#"persistentvolumeclaim "data" not found"#);
        assert_eq!(
            s(EphemeralClaimNotCreated("p-scratch".into())),
            r#"waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch""#
        );
        assert_eq!(
            s(ClaimLost { claim: "data".into(), volume: "pv-1".into() }),
            r#"persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-1""#
        );
        assert_eq!(s(ClaimBeingDeleted("data".into())), r#"persistentvolumeclaim "data" is being deleted"#);
        assert_eq!(
            s(ClaimNotForPod { claim: "ns/p-scratch".into(), pod: "ns/q".into() }),
            "PVC ns/p-scratch was not created for pod ns/q (pod is not owner)"
        );
        assert_eq!(s(UnboundImmediate), "pod has unbound immediate PersistentVolumeClaims");
        assert_eq!(s(NoEligibleNode), "node(s) didn't satisfy plugin VolumeBinding");
        assert_eq!(s(ClaimWithoutName), "PersistentVolumeClaim had no name");
        assert_eq!(s(ClaimWithoutVolumeOrClass), "PersistentVolumeClaim had no pv name and storageClass name");
        assert_eq!(s(StorageClassNotFound("fast".into())), r#"storageclass.storage.k8s.io "fast" not found"#);
        assert_eq!(s(VolumeWithoutName), "PersistentVolume had no name");
        assert_eq!(s(VolumeNotFound("pv-1".into())), r#"persistentvolume "pv-1" not found"#);
    }
}
