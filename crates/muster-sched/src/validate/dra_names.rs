//! The names of resource.k8s.io: drivers (a CSI driver's rules), pools (DNS subdomains joined by
//! `/`), and attribute and capacity names (`[domain/]identifier`, the identifier a C identifier of
//! at most 32 characters). Shared by claims, classes, slices and taint rules.

use super::{FieldError, dns_label, dns_subdomain, dns_subdomain_problem, invalid};

/// `DeviceMaxIDLength`.
const ID_MAX: usize = 32;
/// `PoolNameMaxLength`.
const POOL_MAX: usize = 253;
/// A CSI (and DRA) driver name's limit.
const DRIVER_MAX: usize = 63;

const C_IDENTIFIER_MSG: &str = "a valid C identifier must start with alphabetic character or '_', followed by a \
string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation \
is '[A-Za-z_][A-Za-z0-9_]*')";

/// `field.TooLong`.
pub fn too_long(path: &str, max: usize) -> FieldError {
    (path.to_string(), format!("Too long: may not be more than {max} bytes"))
}

/// `ValidateCSIDriverName`: required, at most 63 characters, a DNS subdomain once lower-cased.
pub fn driver_name(name: &str, path: &str, out: &mut Vec<FieldError>) {
    if name.is_empty() {
        out.push((path.into(), "Required value".into()));
    } else if name.len() > DRIVER_MAX {
        out.push(too_long(path, DRIVER_MAX));
    } else if let Some(detail) = dns_subdomain_problem(&name.to_lowercase()) {
        out.push((path.into(), invalid(format!("{name:?}"), detail)));
    }
}

/// `validatePoolName`: required, at most 253 characters, each `/`-separated part a DNS subdomain.
pub fn pool_name(name: &str, path: &str, out: &mut Vec<FieldError>) {
    if name.is_empty() {
        out.push((path.into(), "Required value".into()));
        return;
    }
    if name.len() > POOL_MAX {
        out.push(too_long(path, POOL_MAX));
    }
    out.extend(name.split('/').filter_map(|part| dns_subdomain(part, path)));
}

/// A device's name (a DNS label), as results and taint rules name it.
pub fn device_name(name: &str, path: &str, out: &mut Vec<FieldError>) {
    out.extend(dns_label(name, path));
}

fn c_identifier(id: &str, path: &str, out: &mut Vec<FieldError>) {
    if id.len() > ID_MAX {
        out.push(too_long(path, ID_MAX));
    }
    let b = id.as_bytes();
    let ok = !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if !ok {
        out.push((path.into(), invalid(format!("{id:?}"), C_IDENTIFIER_MSG)));
    }
}

/// `validateQualifiedName` (resource.k8s.io's, not apimachinery's): an identifier, or a driver-like
/// domain and an identifier.
pub fn qualified_attribute(name: &str, path: &str, out: &mut Vec<FieldError>) {
    let parts: Vec<&str> = name.split('/').collect();
    match parts[..] {
        [id] => c_identifier(id, path, out),
        [domain, id] => {
            if domain.is_empty() {
                out.push((path.into(), invalid("\"\"", "the domain must not be empty")));
            } else {
                driver_name(domain, path, out);
            }
            if id.is_empty() {
                out.push((path.into(), invalid("\"\"", "the name must not be empty")));
            } else {
                c_identifier(id, path, out);
            }
        }
        _ => out.push((path.into(), invalid(format!("{name:?}"), "must not contain more than one slash"))),
    }
}

/// `validateFullyQualifiedName`: a qualified name that has its domain.
pub fn fully_qualified_attribute(name: &str, path: &str, out: &mut Vec<FieldError>) {
    qualified_attribute(name, path, out);
    if !name.contains('/') {
        let why = "a fully qualified name must be a domain and a name separated by a slash";
        out.push((path.into(), invalid(format!("{name:?}"), why)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: impl Fn(&str, &str, &mut Vec<FieldError>), value: &str) -> Vec<String> {
        let mut out = Vec::new();
        f(value, "p", &mut out);
        out.into_iter().map(|(_, m)| m).collect()
    }

    #[test]
    fn drivers_pools_and_attributes() {
        assert!(run(driver_name, "gpu.nvidia.com").is_empty());
        assert!(run(driver_name, "GPU.Example.com").is_empty(), "checked lower-cased");
        assert_eq!(run(driver_name, ""), ["Required value"]);
        assert!(run(driver_name, "gpu_example")[0].starts_with("Invalid value: \"gpu_example\": a lowercase RFC 1123"));
        assert!(run(pool_name, "rack-1/node-1").is_empty());
        assert_eq!(run(pool_name, "rack-1//node").len(), 1);
        assert!(run(qualified_attribute, "gpu.nvidia.com/cliqueID").is_empty());
        assert!(run(qualified_attribute, "productName").is_empty());
        assert!(run(qualified_attribute, "memory-gb")[0].contains("a valid C identifier"));
        assert_eq!(
            run(qualified_attribute, "a/b/c"),
            ["Invalid value: \"a/b/c\": must not contain more than one slash"]
        );
        assert_eq!(run(fully_qualified_attribute, "model").len(), 1);
        assert!(run(fully_qualified_attribute, "gpu.example.com/model").is_empty());
    }
}
