//! An object's key as the scheduler's caches write it: `namespace/name`.

/// `namespace/name`, built without the formatting machinery (keys are made for every pod and
/// claim a cluster changes; `format!` costs several times as much).
pub fn namespaced(namespace: &str, name: &str) -> String {
    let mut key = String::with_capacity(namespace.len() + 1 + name.len());
    key.push_str(namespace);
    key.push('/');
    key.push_str(name);
    key
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_is_the_namespace_a_slash_and_the_name() {
        assert_eq!(super::namespaced("ml", "trainer-0"), format!("{}/{}", "ml", "trainer-0"));
        assert_eq!(super::namespaced("", ""), "/");
    }
}
