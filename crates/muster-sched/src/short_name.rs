//! A name that sorts and compares as its text, held inline when it is short: the queue's order
//! keys (`namespace/name`) and preemption's victim keys are copied and compared many times, and
//! an inline name costs neither a reference count nor a visit to the heap.
//!
//! Names of at most [`INLINE`] bytes are kept inline, zero-padded; longer ones are shared
//! (`Arc<str>`). A text has one form (by its length), so equal names have equal forms. Two
//! inline names compare as two big-endian integers each, then by length: the zero padding sorts
//! below every byte but NUL, and two texts whose padded bytes are equal differ only by trailing
//! NULs, where the shorter sorts first — which is the order of the texts.

use std::cmp::Ordering;
use std::sync::Arc;

/// The longest name kept inline.
pub const INLINE: usize = 30;

#[derive(Clone)]
pub enum ShortName {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<str>),
}

impl ShortName {
    pub fn as_str(&self) -> &str {
        match self {
            ShortName::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..*len as usize]).expect("made from a str, cut at its end")
            }
            ShortName::Shared(s) => s,
        }
    }

    /// The inline bytes as two big-endian integers, the first 16 bytes and the rest.
    fn words(bytes: &[u8; INLINE]) -> (u128, u128) {
        let mut high = [0u8; 16];
        let mut low = [0u8; 16];
        high.copy_from_slice(&bytes[..16]);
        low[..INLINE - 16].copy_from_slice(&bytes[16..]);
        (u128::from_be_bytes(high), u128::from_be_bytes(low))
    }
}

impl From<&str> for ShortName {
    fn from(s: &str) -> Self {
        if s.len() > INLINE {
            return ShortName::Shared(Arc::from(s));
        }
        let mut bytes = [0u8; INLINE];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        ShortName::Inline { len: s.len() as u8, bytes }
    }
}

impl From<String> for ShortName {
    fn from(s: String) -> Self {
        ShortName::from(s.as_str())
    }
}

impl std::ops::Deref for ShortName {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for ShortName {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ShortName::Inline { len: a, bytes: x }, ShortName::Inline { len: b, bytes: y }) => a == b && x == y,
            (ShortName::Shared(a), ShortName::Shared(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => false, // one form per text
        }
    }
}

impl Eq for ShortName {}

impl Ord for ShortName {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (ShortName::Inline { len: a, bytes: x }, ShortName::Inline { len: b, bytes: y }) => {
                ShortName::words(x).cmp(&ShortName::words(y)).then(a.cmp(b))
            }
            _ => self.as_str().cmp(other.as_str()),
        }
    }
}

impl PartialOrd for ShortName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for ShortName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::fmt::Debug for ShortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for ShortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        // Short and long, with NULs and multi-byte characters, sharing prefixes often.
        prop::collection::vec(prop::sample::select(vec!["a", "b", "\0", "/", "é", "job-0", "ml"]), 0..12)
            .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn compares_and_sorts_as_its_text(a in text(), b in text()) {
            let (x, y) = (ShortName::from(a.as_str()), ShortName::from(b.as_str()));
            prop_assert_eq!(x.cmp(&y), a.cmp(&b));
            prop_assert_eq!(x == y, a == b);
            prop_assert_eq!(x.as_str(), a.as_str());
            prop_assert_eq!(x.clone().cmp(&x), Ordering::Equal);
        }
    }

    #[test]
    fn short_names_are_inline_and_long_ones_shared() {
        assert!(matches!(ShortName::from("ml/job-000123"), ShortName::Inline { .. }));
        assert!(matches!(ShortName::from("x".repeat(INLINE).as_str()), ShortName::Inline { .. }));
        let long = "a-namespace/a-pod-name-longer-than-thirty-bytes";
        assert!(matches!(ShortName::from(long), ShortName::Shared(_)));
        assert_eq!(&*ShortName::from(long), long);
    }
}
