//! A growable array whose elements never move: the store's slots of pods, claims, PodGroups and
//! CompositePodGroups.
//!
//! Why: a `Vec` that outgrows its capacity copies every element into a new allocation, so the one
//! change that crosses the capacity costs the whole store (50,000 pods: about 17 MB copied into
//! memory the process has never touched, 0.3–0.6 s on this machine where a first touch of a huge
//! page is slow) — against the store's rule that a change costs what it touches. Here the
//! elements live in chunks of [`CHUNK`] that are allocated as the array grows and never moved: a
//! push that opens a chunk allocates it and touches one element. An index is a chunk and a place
//! in it (a shift and a mask).

/// Elements per chunk (a power of two).
pub const CHUNK: usize = 1 << 10;
const SHIFT: u32 = CHUNK.trailing_zeros();

/// The array (see the module).
#[derive(Clone, Debug)]
pub struct Slots<T> {
    /// Each allocated with room for [`CHUNK`] elements: those before element `len`'s are full,
    /// its own holds the rest, and those after it (left by pops) are empty.
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { chunks: Vec::new(), len: 0 }
    }
}

impl<T> Slots<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `value`; no element moves.
    pub fn push(&mut self, value: T) {
        let c = self.len >> SHIFT;
        if c == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        self.chunks[c].push(value);
        self.len += 1;
    }

    /// Takes the last element out. A chunk it empties is kept for the next push: a store that
    /// adds and removes one element at a chunk's edge does not allocate each time.
    pub fn pop(&mut self) -> Option<T> {
        self.len = self.len.checked_sub(1)?;
        self.chunks[self.len >> SHIFT].pop()
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> SHIFT)?.get(i & (CHUNK - 1))
    }

    /// The elements in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + Clone {
        self.chunks.iter().flatten()
    }

    /// The elements in order, mutably.
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> {
        self.chunks.iter_mut().flatten()
    }
}

impl<T> std::ops::Index<usize> for Slots<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> SHIFT][i & (CHUNK - 1)]
    }
}

impl<T> std::ops::IndexMut<usize> for Slots<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> SHIFT][i & (CHUNK - 1)]
    }
}

impl<T> FromIterator<T> for Slots<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut slots = Slots::new();
        slots.extend(iter);
        slots
    }
}

impl<T> Extend<T> for Slots<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for value in iter {
            self.push(value);
        }
    }
}

impl<'a, T> IntoIterator for &'a Slots<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_and_iterates_as_a_vec_across_chunks() {
        let n = 3 * CHUNK + 5;
        let mut slots = Slots::new();
        let mut vec = Vec::new();
        for i in 0..n {
            slots.push(i);
            vec.push(i);
        }
        assert_eq!(slots.len(), n);
        assert!(slots.iter().eq(vec.iter()));
        assert!(slots.iter().rev().eq(vec.iter().rev()));
        for i in [0, CHUNK - 1, CHUNK, 2 * CHUNK + 1, n - 1] {
            assert_eq!(slots[i], i);
            assert_eq!(slots.get(i), Some(&i));
        }
        assert_eq!(slots.get(n), None);
        slots[CHUNK] = 7;
        assert_eq!(slots.get(CHUNK), Some(&7));
        for i in (2 * CHUNK..n).rev() {
            assert_eq!(slots.pop(), Some(i));
        }
        assert_eq!(
            (slots.len(), slots.get(2 * CHUNK - 1), slots.get(2 * CHUNK)),
            (2 * CHUNK, Some(&(2 * CHUNK - 1)), None)
        );
        slots.push(1);
        assert_eq!((slots.len(), slots[2 * CHUNK]), (2 * CHUNK + 1, 1));
    }

    #[test]
    fn a_push_never_moves_an_element() {
        let mut slots: Slots<u64> = Slots::new();
        slots.push(1);
        let first: *const u64 = &slots[0];
        for i in 0..4 * CHUNK as u64 {
            slots.push(i);
        }
        assert!(std::ptr::eq(first, &slots[0]), "the first element stayed where it was");
    }
}
