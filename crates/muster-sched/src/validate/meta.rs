//! apimachinery's rules for the metadata every object carries and for label selectors:
//! label keys are qualified names (`[prefix/]name`), label values at most 63 characters of a
//! restricted alphabet, annotation keys qualified names with all annotations together at most
//! 256 KiB, and a selector's operators and values as `ValidateLabelSelector` checks them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};

use super::{FieldError, invalid};

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex \
used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `TotalAnnotationSizeLimitB`: all of an object's annotations, keys and values, in bytes.
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// The name part of a qualified name (and a label value, when not empty): alphanumerics at both
/// ends, `-`, `_` and `.` between.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    !b.is_empty() && b[0].is_ascii_alphanumeric() && b[b.len() - 1].is_ascii_alphanumeric() && b.iter().all(inner)
}

/// `IsQualifiedName`'s messages for `value` (empty when it is one).
pub fn qualified_name_problems(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let (prefix, name) = match parts[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    let mut out = Vec::new();
    match prefix {
        Some("") => out.push("prefix part must be non-empty".to_string()),
        Some(p) => {
            if let Some(problem) = super::dns_subdomain_problem(p) {
                out.push(format!("prefix part {problem}"));
            }
        }
        None => {}
    }
    if name.is_empty() {
        out.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".into());
    } else if !is_name_part(name) {
        out.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    out
}

/// `ValidateLabelName` (and a qualified-name key anywhere): one error per problem, at `path`.
pub fn qualified_name(value: &str, path: &str) -> Vec<FieldError> {
    qualified_name_problems(value).into_iter().map(|m| (path.to_string(), invalid(format!("{value:?}"), &m))).collect()
}

/// `IsValidLabelValue`.
pub fn label_value(value: &str, path: &str) -> Option<FieldError> {
    let problem = if value.len() > 63 {
        "must be no more than 63 characters"
    } else if !value.is_empty() && !is_name_part(value) {
        LABEL_VALUE_MSG
    } else {
        return None;
    };
    Some((path.to_string(), invalid(format!("{value:?}"), problem)))
}

/// `ValidateLabels`: each key a qualified name, each value a label value; errors at `path` itself.
pub fn labels(labels: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    for (k, v) in labels {
        out.extend(qualified_name(k, path));
        out.extend(label_value(v, path));
    }
    out
}

/// `ValidateAnnotations`: keys are qualified names (checked lower-cased, as upstream does) and
/// all annotations together stay within 256 KiB.
pub fn annotations(annotations: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations {
        out.extend(qualified_name(&k.to_lowercase(), path));
        total = total.saturating_add(k.len() + v.len());
    }
    if total > ANNOTATIONS_MAX_BYTES {
        out.push((path.to_string(), format!("Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes")));
    }
    out
}

/// An object's labels and annotations (`ValidateObjectMeta`'s part that names do not cover).
pub fn object_meta(meta: &ObjectMeta) -> Vec<FieldError> {
    let mut out = labels(meta.labels.as_ref().unwrap_or(&BTreeMap::new()), "metadata.labels");
    out.extend(annotations(meta.annotations.as_ref().unwrap_or(&BTreeMap::new()), "metadata.annotations"));
    out
}

/// `ValidateLabelSelectorRequirement`: In/NotIn need values, Exists/DoesNotExist take none, other
/// operators are refused; the key is a qualified name and each value a label value.
pub fn selector_requirement(r: &LabelSelectorRequirement, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => out.push((
            format!("{path}.values"),
            "Required value: must be specified when `operator` is 'In' or 'NotIn'".into(),
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => out.push((
            format!("{path}.values"),
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".into(),
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        other => out.push((format!("{path}.operator"), invalid(format!("{other:?}"), "not a valid selector operator"))),
    }
    out.extend(qualified_name(&r.key, &format!("{path}.key")));
    for (i, v) in values.iter().enumerate() {
        out.extend(label_value(v, &format!("{path}.values[{i}]")));
    }
    out
}

/// `ValidateLabelSelector`: its expressions and its `matchLabels`.
pub fn label_selector(s: &LabelSelector, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        out.extend(selector_requirement(r, &format!("{path}.matchExpressions[{i}]")));
    }
    out.extend(labels(s.match_labels.as_ref().unwrap_or(&BTreeMap::new()), &format!("{path}.matchLabels")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in ["app", "example.com/gpu", "a_b.c-d", "nvidia.com/gpu.product", "A1"] {
            assert!(qualified_name_problems(ok).is_empty(), "{ok}");
        }
        assert_eq!(qualified_name_problems("/x"), ["prefix part must be non-empty"]);
        assert_eq!(qualified_name_problems("x/"), ["name part must be non-empty"]);
        assert!(qualified_name_problems("Example.com/x")[0].starts_with("prefix part a lowercase RFC 1123 subdomain"));
        assert!(qualified_name_problems("a/b/c")[0].starts_with("a qualified name must consist of"));
        assert!(qualified_name_problems("-x")[0].starts_with("name part must consist of"));
        assert_eq!(qualified_name_problems(&"x".repeat(64)), ["name part must be no more than 63 characters"]);
    }

    #[test]
    fn label_values() {
        assert!(label_value("", "p").is_none());
        assert!(label_value("H100_80GB.v2", "p").is_none());
        let (path, m) = label_value("has space", "metadata.labels").unwrap();
        assert_eq!(path, "metadata.labels");
        assert!(m.starts_with("Invalid value: \"has space\": a valid label must be"), "{m}");
        assert!(label_value(&"v".repeat(64), "p").unwrap().1.ends_with("must be no more than 63 characters"));
    }

    #[test]
    fn selectors() {
        let req = |op: &str, values: &[&str]| LabelSelectorRequirement {
            key: "app".into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        };
        assert!(selector_requirement(&req("In", &["a"]), "s").is_empty());
        assert_eq!(selector_requirement(&req("In", &[]), "s")[0].0, "s.values");
        assert!(selector_requirement(&req("Exists", &["a"]), "s")[0].1.starts_with("Forbidden"));
        assert_eq!(selector_requirement(&req("Gt", &["1"]), "s")[0].0, "s.operator");
        assert_eq!(selector_requirement(&req("In", &["a b"]), "s")[0].0, "s.values[0]");
    }

    #[test]
    fn annotations_are_bounded() {
        let big: BTreeMap<String, String> = [("k".to_string(), "v".repeat(ANNOTATIONS_MAX_BYTES))].into();
        assert_eq!(annotations(&big, "metadata.annotations").len(), 1);
        let bad_key: BTreeMap<String, String> = [("a b".to_string(), String::new())].into();
        assert_eq!(annotations(&bad_key, "metadata.annotations").len(), 1);
    }
}
