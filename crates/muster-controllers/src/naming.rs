//! Deterministic names and identifiers.
//!
//! Upstream, three things are random or depend on Go internals: the API server's `generateName`
//! suffix (five random characters), object UIDs (random UUIDs), and the hash of a pod template
//! (`controller.ComputeHash`: FNV-32a over a `spew` dump of the Go struct, which no other language
//! can reproduce). Here each is derived from the objects' names with the FNV-1a
//! [`stable_hash`] the scheduler already uses for generated claims, so the same input always gives
//! the same names. The *shapes* are upstream's: five characters of the name generator's alphabet,
//! a UUID, and a template hash written as upstream writes it (the decimal form of a 32-bit hash,
//! each digit mapped through `rand.SafeEncodeString`).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use muster_sched::cluster::{name_suffix, stable_hash};

/// The API server's name generator alphabet (`k8s.io/apimachinery/pkg/util/rand`), used by
/// `rand.String` and `rand.SafeEncodeString`.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `names.MaxGeneratedNameLength`: 63 less the five random characters.
pub const MAX_GENERATED_NAME_LENGTH: usize = 58;

/// The name the API server gives an object created with `generateName: base`: `base` cut to 58
/// bytes, then five characters. Upstream's are random; these are derived from `parts` (see the
/// module documentation).
pub fn generated_name(base: &str, parts: &[&str]) -> String {
    let mut base = base.to_string();
    if base.len() > MAX_GENERATED_NAME_LENGTH {
        let mut cut = MAX_GENERATED_NAME_LENGTH;
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base.truncate(cut);
    }
    base + &name_suffix(parts)
}

/// `rand.SafeEncodeString`: every byte mapped to the alphabet (`alphabet[b % 27]`), so that a
/// decimal hash never spells a word.
pub fn safe_encode(s: &str) -> String {
    s.bytes().map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char).collect()
}

/// A pod template's hash, as the `pod-template-hash` label and a ControllerRevision's name write
/// it: a 32-bit hash (with the collision count mixed in when set) in decimal, safe-encoded.
/// Upstream hashes a `spew` dump of the Go struct; muster hashes the template's JSON, so the text
/// differs from a real cluster's but has its shape (up to ten of `bcdf456789`).
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_string(template).unwrap_or_default();
    let count = collision_count.map(|c| c.to_string()).unwrap_or_default();
    let h = stable_hash(&[&json, &count]);
    let h32 = (h ^ (h >> 32)) as u32;
    safe_encode(&h32.to_string())
}

/// A UID for an object that has none (a hand-written manifest): UUID-shaped (version 8, custom),
/// derived from kind, namespace and name, so that owner references and claims' `reservedFor`
/// have one and the same input gives the same UID.
pub fn uid(kind: &str, namespace: &str, name: &str) -> String {
    let a = stable_hash(&["uid", kind, namespace, name]);
    let b = stable_hash(&["uid-2", kind, namespace, name]);
    let hi = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_8000; // version 8
    let lo = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000; // RFC 9562 variant
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_encode_maps_digits_as_upstream() {
        // '0' is byte 48 and 48 % 27 = 21: the alphabet's '4'; '6' is 54 % 27 = 0: 'b'.
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }

    #[test]
    fn generated_names_have_five_characters_of_the_alphabet_and_are_cut_at_58() {
        let n = generated_name("web-", &["ns", "web", "0"]);
        assert_eq!(n.len(), 9);
        assert!(n[4..].bytes().all(|b| ALPHABET.contains(&b)));
        assert_eq!(n, generated_name("web-", &["ns", "web", "0"]));
        assert_ne!(n, generated_name("web-", &["ns", "web", "1"]));
        let long = generated_name(&"x".repeat(70), &["a"]);
        assert_eq!(long.len(), 63);
    }

    #[test]
    fn uids_are_uuid_shaped_and_stable() {
        let u = uid("Deployment", "ml", "web");
        assert_eq!(u.len(), 36);
        assert_eq!(u.as_bytes()[14], b'8');
        assert!(matches!(u.as_bytes()[19], b'8' | b'9' | b'a' | b'b'));
        assert_eq!(u, uid("Deployment", "ml", "web"));
        assert_ne!(u, uid("Job", "ml", "web"));
    }

    #[test]
    fn template_hashes_depend_on_the_template_and_the_collision_count() {
        let a = PodTemplateSpec::default();
        let b = PodTemplateSpec {
            metadata: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                labels: Some([("app".to_string(), "x".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let h = template_hash(&a, None);
        assert!(h.bytes().all(|c| b"456789bcdf".contains(&c)), "{h}");
        assert_ne!(h, template_hash(&b, None));
        assert_ne!(h, template_hash(&a, Some(1)));
        assert_eq!(h, template_hash(&a, None));
    }
}
