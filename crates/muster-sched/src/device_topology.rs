//! The annotations that put a gang's devices in one domain of a device attribute [beyond
//! upstream] (docs/design/device-topology-domains.md §3): `muster.dev/device-topology-key` and
//! `muster.dev/device-topology-scope` on a PodGroup, or on the Workload its `spec.workloadRef`
//! names. Reading them, and the errors a malformed value gets (the same words in `check`, `plan`
//! and a live group's SchedulerError).

use std::collections::BTreeMap;

use crate::validate::FieldError;

/// The device attribute, fully qualified (`gpu.nvidia.com/cliqueID`).
pub const KEY_ANNOTATION: &str = "muster.dev/device-topology-key";
/// `cluster` (the default: the value names the domain) or `node` (the domain is a node and a
/// value: for IDs that mean something only within a node, like Fabric Manager partitions).
pub const SCOPE_ANNOTATION: &str = "muster.dev/device-topology-scope";

/// What a domain is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Cluster,
    Node,
}

/// A gang's device topology: every constrained device of every member has one value of
/// `attribute` (per node, with scope `node`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceTopology {
    pub attribute: String,
    pub scope: Scope,
}

impl std::fmt::Display for DeviceTopology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.scope {
            Scope::Cluster => f.write_str(&self.attribute),
            Scope::Node => write!(f, "{} (scope node)", self.attribute),
        }
    }
}

fn path(annotation: &str) -> String {
    format!("metadata.annotations[{annotation}]")
}

/// A C identifier of at most 32 characters (a device attribute's name).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 32
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn key_error(key: &str) -> Option<FieldError> {
    let ok = key.split_once('/').is_some_and(|(domain, id)| {
        domain.len() <= 63 && crate::validate::dns_subdomain(domain, "").is_none() && is_identifier(id)
    });
    (!ok).then(|| {
        (
            path(KEY_ANNOTATION),
            format!(
                "Invalid value: {key:?}: must be a fully qualified device attribute, <domain>/<name>: a DNS subdomain \
                 of at most 63 characters, '/', and a C identifier of at most 32 characters (e.g. gpu.nvidia.com/cliqueID)"
            ),
        )
    })
}

/// The device topology the annotations ask for: `None` without the key annotation, else the
/// topology or every problem with the values.
pub fn from_annotations(
    annotations: Option<&BTreeMap<String, String>>,
) -> Option<Result<DeviceTopology, Vec<FieldError>>> {
    let a = annotations?;
    let scope = a.get(SCOPE_ANNOTATION);
    let Some(key) = a.get(KEY_ANNOTATION) else {
        let message = format!("Required value: {SCOPE_ANNOTATION} is set, but {KEY_ANNOTATION} is not");
        return scope.map(|_| Err(vec![(path(KEY_ANNOTATION), message)]));
    };
    let mut errors: Vec<FieldError> = key_error(key).into_iter().collect();
    let scope = match scope.map(String::as_str) {
        None | Some("cluster") => Scope::Cluster,
        Some("node") => Scope::Node,
        Some(other) => {
            errors.push((path(SCOPE_ANNOTATION), crate::validate::unsupported(other, &["cluster", "node"])));
            Scope::Cluster
        }
    };
    Some(if errors.is_empty() { Ok(DeviceTopology { attribute: key.clone(), scope }) } else { Err(errors) })
}

/// The problems with the annotations of one object (none when it has no such annotation).
pub fn errors(annotations: Option<&BTreeMap<String, String>>) -> Vec<FieldError> {
    match from_annotations(annotations) {
        Some(Err(e)) => e,
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Option<Result<DeviceTopology, Vec<FieldError>>> {
        let a: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        from_annotations(Some(&a))
    }

    #[test]
    fn a_key_and_an_optional_scope_are_read() {
        assert_eq!(read(&[]), None);
        assert_eq!(
            read(&[(KEY_ANNOTATION, "gpu.nvidia.com/cliqueID")]),
            Some(Ok(DeviceTopology { attribute: "gpu.nvidia.com/cliqueID".into(), scope: Scope::Cluster }))
        );
        let node = read(&[(KEY_ANNOTATION, "gpu.nvidia.com/partition4"), (SCOPE_ANNOTATION, "node")]);
        assert_eq!(node.unwrap().unwrap().scope, Scope::Node);
    }

    #[test]
    fn malformed_values_are_errors_naming_the_annotation() {
        for bad in ["cliqueID", "GPU.example.com/x", "gpu.nvidia.com/9lives", "gpu.nvidia.com/", "/x"] {
            let errors = read(&[(KEY_ANNOTATION, bad)]).unwrap().unwrap_err();
            assert_eq!(errors[0].0, "metadata.annotations[muster.dev/device-topology-key]", "{bad}");
        }
        let errors =
            read(&[(KEY_ANNOTATION, "gpu.nvidia.com/cliqueID"), (SCOPE_ANNOTATION, "rack")]).unwrap().unwrap_err();
        assert_eq!(errors[0].1, "Unsupported value: \"rack\": supported values: \"cluster\", \"node\"");
        assert!(read(&[(SCOPE_ANNOTATION, "node")]).unwrap().is_err());
    }
}
