//! Where each object of the input was written, by (kind, `namespace/name` or `name`): what a
//! model error about an object points at.
//!
//! One entry is kept per object while the world is built, so the entries sit in one vector sized
//! for the input, and the index by name is built only when something is looked up (an error, a
//! warning, an object a controller created): a hash table for every object would hold twice the
//! entries' size, more while it grows.

use std::collections::HashMap;

use muster_manifest::Origin;

/// The objects' origins; a later entry for the same object wins.
#[derive(Default)]
pub(super) struct Origins {
    list: Vec<(&'static str, String, Origin)>,
    /// Position in `list` by (kind, key), covering `list[..indexed]`.
    index: HashMap<(&'static str, String), usize>,
    indexed: usize,
}

impl Origins {
    pub(super) fn insert(&mut self, kind: &'static str, key: String, origin: Origin) {
        self.list.push((kind, key, origin));
    }

    pub(super) fn get(&mut self, kind: &'static str, key: &str) -> Option<&Origin> {
        for (i, (k, name, _)) in self.list.iter().enumerate().skip(self.indexed) {
            self.index.insert((*k, name.clone()), i);
        }
        self.indexed = self.list.len();
        let i = *self.index.get(&(kind, key.to_string()))?;
        Some(&self.list[i].2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: u32) -> Origin {
        Origin { file: "f.yaml".into(), pos: muster_manifest::Pos { line, col: 1 } }
    }

    #[test]
    fn the_last_entry_for_an_object_wins_whenever_it_was_added() {
        let mut o = Origins::default();
        o.insert("Pod", "default/a".into(), at(1));
        o.insert("Node", "a".into(), at(2));
        assert_eq!(o.get("Pod", "default/a"), Some(&at(1)));
        o.insert("Pod", "default/a".into(), at(3));
        assert_eq!(o.get("Pod", "default/a"), Some(&at(3)));
        assert_eq!(o.get("Node", "a"), Some(&at(2)));
        assert_eq!(o.get("Node", "b"), None);
    }
}
