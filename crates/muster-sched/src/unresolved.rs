//! Why a pod's reference to a ResourceClaim or to its PodGroup does not resolve in the store:
//! kept as data on the pod ([`crate::PodInfo::claims`], [`crate::PodInfo::group`]) and worded by
//! `Display` where it is reported (DynamicResources' PreFilter, the gang's wait, `why`), so the
//! store formats no sentence for each pod it takes.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unresolved {
    /// The claim a pod or PodGroup entry names (or its status records) is not in the store.
    ClaimNotFound(String),
    /// The claim a PodGroup's status records for `entry` is not in the store.
    GroupClaimNotFound { claim: String, entry: String },
    /// The entry's ResourceClaimTemplate is not in the input; `made_by` names the object that
    /// makes it when the cluster runs (a JobSet, a LeaderWorkerSet).
    TemplateNotFound { template: String, made_by: Option<String> },
    /// A pod claim from a template whose claim the resourceclaim controller has not made yet.
    WaitingForPodClaim { entry: String, template: String },
    /// The same for an entry the pod shares with its PodGroup.
    WaitingForGroupClaim { entry: String, template: String },
    /// A pod that is not pending names a claim from a template with no claim recorded.
    NoGeneratedClaim { entry: String },
    /// A pod claim entry with neither a claim nor a template name.
    NoSource { entry: String },
    /// The pod's PodGroup (`namespace/name`) is not in the store.
    GroupNotFound(String),
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unresolved::ClaimNotFound(name) => write!(f, "resourceclaim \"{name}\" not found"),
            Unresolved::GroupClaimNotFound { claim, entry } => {
                write!(f, "resourceclaim \"{claim}\" (generated for the PodGroup's entry {entry:?}) not found")
            }
            Unresolved::TemplateNotFound { template, made_by: Some(by) } => write!(
                f,
                "resourceclaimtemplate \"{template}\" not found yet: {by} makes it at run time; the pod waits for it"
            ),
            Unresolved::TemplateNotFound { template, made_by: None } => {
                write!(f, "resourceclaimtemplate \"{template}\" not found")
            }
            Unresolved::WaitingForPodClaim { entry, template } => write!(
                f,
                "waiting for the ResourceClaim of pod claim {entry} to be created from resourceclaimtemplate \"{template}\""
            ),
            Unresolved::WaitingForGroupClaim { entry, template } => write!(
                f,
                "waiting for the ResourceClaim of podgroup claim {entry} to be created from resourceclaimtemplate \"{template}\""
            ),
            Unresolved::NoGeneratedClaim { entry } => write!(f, "pod claim {entry} has no generated ResourceClaim"),
            Unresolved::NoSource { entry } => write!(f, "pod claim {entry} names neither a claim nor a template"),
            Unresolved::GroupNotFound(key) => write!(f, "podgroup {key:?} not found"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Unresolved::*;

    #[test]
    fn each_reason_reads_as_before() {
        let s = |u: super::Unresolved| u.to_string();
        assert_eq!(s(ClaimNotFound("gpu".into())), r#"resourceclaim "gpu" not found"#);
        assert_eq!(
            s(GroupClaimNotFound { claim: "pg-x".into(), entry: "fabric".into() }),
            r#"resourceclaim "pg-x" (generated for the PodGroup's entry "fabric") not found"#
        );
        assert_eq!(
            s(TemplateNotFound { template: "t".into(), made_by: Some("jobset ml/js".into()) }),
            r#"resourceclaimtemplate "t" not found yet: jobset ml/js makes it at run time; the pod waits for it"#
        );
        assert_eq!(
            s(TemplateNotFound { template: "t".into(), made_by: None }),
            r#"resourceclaimtemplate "t" not found"#
        );
        assert_eq!(
            s(WaitingForPodClaim { entry: "gpu".into(), template: "t".into() }),
            r#"waiting for the ResourceClaim of pod claim gpu to be created from resourceclaimtemplate "t""#
        );
        assert_eq!(
            s(WaitingForGroupClaim { entry: "fabric".into(), template: "t".into() }),
            r#"waiting for the ResourceClaim of podgroup claim fabric to be created from resourceclaimtemplate "t""#
        );
        assert_eq!(s(NoGeneratedClaim { entry: "gpu".into() }), "pod claim gpu has no generated ResourceClaim");
        assert_eq!(s(NoSource { entry: "gpu".into() }), "pod claim gpu names neither a claim nor a template");
        assert_eq!(s(GroupNotFound("ml/g".into())), r#"podgroup "ml/g" not found"#);
    }
}
