//! The pods a plan found unschedulable, in queue order, each with its verdict. The members of a
//! group that failed together share one verdict, kept once for all of them: a waiting gang of 64
//! pods tried again at every event is one entry, not 64 copies of the same reason.

use crate::cluster::PodId;
use crate::framework::FitError;

/// Pods that fit nowhere and why, in the order they were found (see the module).
#[derive(Clone, Debug, Default)]
pub struct UnschedulablePods {
    /// The pods, in order.
    pods: Vec<PodId>,
    /// Each verdict with the end of its run of pods in `pods` (the run starts where the one
    /// before it ended). Never an empty run: ends strictly increase.
    runs: Vec<(u32, FitError)>,
}

impl UnschedulablePods {
    /// How many pods.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// `pod` fits nowhere, for `error`.
    pub fn push(&mut self, pod: PodId, error: FitError) {
        self.pods.push(pod);
        self.runs.push((self.end(), error));
    }

    /// `pod` fits nowhere, for a copy of `error`: it joins the last run when that run's verdict
    /// is `error` itself ([`FitError::is_copy_of`]) — equivalent pods found one after another
    /// share one run, as a gang's members do.
    pub fn push_copy(&mut self, pod: PodId, error: &FitError) {
        self.pods.push(pod);
        let end = self.end();
        match self.runs.last_mut() {
            Some((last_end, last)) if last.is_copy_of(error) => *last_end = end,
            _ => self.runs.push((end, error.clone())),
        }
    }

    /// Each of `pods` fits nowhere, for one shared `error` (nothing when `pods` is empty).
    pub fn push_shared(&mut self, pods: &[PodId], error: FitError) {
        if pods.is_empty() {
            return;
        }
        self.pods.extend_from_slice(pods);
        self.runs.push((self.end(), error));
    }

    /// Moves every verdict of `other` after these.
    pub fn append(&mut self, other: &mut UnschedulablePods) {
        let base = self.end();
        self.pods.append(&mut other.pods);
        self.runs.extend(other.runs.drain(..).map(|(end, e)| (base + end, e)));
    }

    /// Each pod with its verdict, in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { pods: &self.pods, runs: self.runs.iter(), at: 0, run: None }
    }

    /// Each verdict with the pods that share it, in order.
    pub fn runs(&self) -> impl ExactSizeIterator<Item = (&[PodId], &FitError)> + '_ {
        let mut start = 0;
        self.runs.iter().map(move |(end, e)| {
            let pods = &self.pods[start..*end as usize];
            start = *end as usize;
            (pods, e)
        })
    }

    /// The pods from the `from`-th on (in order, as counted by [`UnschedulablePods::len`]).
    pub fn pods_from(&self, from: usize) -> &[PodId] {
        &self.pods[from.min(self.pods.len())..]
    }

    /// The verdicts from the `from`-th pod on (`from` is a [`UnschedulablePods::len`] taken earlier).
    /// Found by binary search: a plan's later attempts do not walk its earlier verdicts.
    pub fn since(&self, from: usize) -> impl Iterator<Item = (&[PodId], &FitError)> + '_ {
        let first = self.runs.partition_point(|(end, _)| *end as usize <= from);
        let mut start = from.min(self.pods.len());
        self.runs[first..].iter().map(move |(end, e)| {
            let pods = &self.pods[start..*end as usize];
            start = *end as usize;
            (pods, e)
        })
    }

    /// The `i`-th pod and its verdict.
    pub fn get(&self, i: usize) -> Option<(PodId, &FitError)> {
        let pod = *self.pods.get(i)?;
        let run = self.runs.partition_point(|(end, _)| *end as usize <= i);
        Some((pod, &self.runs[run].1))
    }

    /// The verdict of `pod`, if it has one (the first, should it have several).
    pub fn of(&self, pod: PodId) -> Option<&FitError> {
        self.iter().find(|(p, _)| *p == pod).map(|(_, e)| e)
    }

    /// Keeps the pods for which `keep` holds (a verdict no pod keeps goes).
    pub fn retain(&mut self, mut keep: impl FnMut(PodId) -> bool) {
        let (pods, runs) = (std::mem::take(&mut self.pods), std::mem::take(&mut self.runs));
        let mut start = 0;
        for (end, e) in runs {
            let before = self.pods.len();
            self.pods.extend(pods[start..end as usize].iter().copied().filter(|p| keep(*p)));
            start = end as usize;
            if self.pods.len() > before {
                self.runs.push((self.end(), e));
            }
        }
    }

    /// Keeps the first `len` pods and their verdicts.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.pods.len() {
            return;
        }
        self.pods.truncate(len);
        // Runs wholly within `len` stay; the next one, if it starts before `len`, is cut there.
        let whole = self.runs.partition_point(|(end, _)| *end as usize <= len);
        let start = whole.checked_sub(1).map_or(0, |i| self.runs[i].0 as usize);
        let cut = start < len && whole < self.runs.len();
        self.runs.truncate(whole + usize::from(cut));
        if cut {
            self.runs[whole].0 = len as u32;
        }
    }

    fn end(&self) -> u32 {
        u32::try_from(self.pods.len()).expect("fewer than 2^32 verdicts in one plan")
    }
}

/// Two lists are equal when they give the same pods the same verdicts in the same order,
/// however the verdicts are shared.
impl PartialEq for UnschedulablePods {
    fn eq(&self, other: &UnschedulablePods) -> bool {
        self.pods == other.pods && self.iter().map(|(_, e)| e).eq(other.iter().map(|(_, e)| e))
    }
}

impl Extend<(PodId, FitError)> for UnschedulablePods {
    fn extend<I: IntoIterator<Item = (PodId, FitError)>>(&mut self, verdicts: I) {
        for (pod, error) in verdicts {
            self.push(pod, error);
        }
    }
}

impl FromIterator<(PodId, FitError)> for UnschedulablePods {
    fn from_iter<I: IntoIterator<Item = (PodId, FitError)>>(verdicts: I) -> UnschedulablePods {
        let mut v = UnschedulablePods::default();
        v.extend(verdicts);
        v
    }
}

/// Each pod with its verdict ([`UnschedulablePods::iter`]).
pub struct Iter<'a> {
    pods: &'a [PodId],
    runs: std::slice::Iter<'a, (u32, FitError)>,
    /// The next pod's index in `pods`.
    at: usize,
    /// The run `at` is in: its end and verdict.
    run: Option<(usize, &'a FitError)>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (PodId, &'a FitError);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((end, e)) = self.run
                && self.at < end
            {
                self.at += 1;
                return Some((self.pods[self.at - 1], e));
            }
            let (end, e) = self.runs.next()?;
            self.run = Some((*end as usize, e));
        }
    }
}

impl<'a> IntoIterator for &'a UnschedulablePods {
    type Item = (PodId, &'a FitError);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::NodeId;

    fn error(node: u32) -> FitError {
        FitError::filter_error(3, "Test", NodeId(node), format!("on {node}"))
    }

    /// A verdict over the nodes: every node of three rejected by `Test` for `reason`.
    fn over_nodes(reason: u32) -> FitError {
        let rejection = crate::framework::Rejection::new("Test", false, format!("reason {reason}"));
        FitError::rejected(3, vec![rejection], (0..3).map(|n| (NodeId(n), 0)).collect())
    }

    fn listed(v: &UnschedulablePods) -> Vec<(u32, String)> {
        v.iter().map(|(p, e)| (p.0, e.message())).collect()
    }

    #[test]
    fn shared_verdicts_read_as_one_per_pod_in_order() {
        let mut v = UnschedulablePods::default();
        v.push(PodId(7), error(0));
        v.push_shared(&[PodId(1), PodId(2), PodId(3)], error(1));
        v.push_shared(&[], error(9));
        v.push(PodId(4), error(2));
        assert_eq!(v.len(), 5);
        assert_eq!(v.runs().count(), 3);
        let messages: Vec<u32> = v.iter().map(|(p, _)| p.0).collect();
        assert_eq!(messages, [7, 1, 2, 3, 4]);
        assert_eq!(v.get(3).map(|(p, e)| (p.0, e.message())), Some((3, error(1).message())));
        assert_eq!(v.get(4).map(|(p, _)| p.0), Some(4));
        assert!(v.get(5).is_none());
        assert_eq!(v.of(PodId(2)).map(FitError::message), Some(error(1).message()));
        assert!(v.of(PodId(8)).is_none());
        let since: Vec<Vec<u32>> = v.since(2).map(|(pods, _)| pods.iter().map(|p| p.0).collect()).collect();
        assert_eq!(since, [vec![2, 3], vec![4]]);
        assert_eq!(v.pods_from(4), [PodId(4)]);
        assert!(v.pods_from(9).is_empty());
    }

    #[test]
    fn copies_of_one_verdict_found_one_after_another_share_a_run() {
        let (first, other) = (over_nodes(0), over_nodes(1));
        let mut v = UnschedulablePods::default();
        v.push(PodId(1), first.clone());
        v.push_copy(PodId(2), &first);
        v.push_copy(PodId(3), &first);
        assert_eq!(v.runs().map(|(pods, _)| pods.len()).collect::<Vec<_>>(), [3]);
        // Another verdict between copies, or an equal one built anew, opens a run of its own.
        v.push(PodId(4), other);
        v.push_copy(PodId(5), &first);
        v.push_copy(PodId(6), &over_nodes(0));
        assert_eq!(v.runs().map(|(pods, _)| pods.len()).collect::<Vec<_>>(), [3, 1, 1, 1]);
        let want = |p: u32, r: u32| (p, over_nodes(r).message());
        assert_eq!(listed(&v), [want(1, 0), want(2, 0), want(3, 0), want(4, 1), want(5, 0), want(6, 0)]);
        // Verdicts that are not over the nodes are never taken for copies.
        let plain = error(0);
        assert!(!plain.is_copy_of(&plain.clone()) && first.is_copy_of(&first.clone()));
        v.push_copy(PodId(7), &plain);
        v.push_copy(PodId(8), &plain);
        assert_eq!(v.runs().count(), 6);
    }

    #[test]
    fn retain_drops_pods_and_the_verdicts_left_without_one() {
        let mut v = UnschedulablePods::default();
        v.push(PodId(7), error(0));
        v.push_shared(&[PodId(1), PodId(2)], error(1));
        v.push(PodId(4), error(2));
        v.retain(|p| p != PodId(1) && p != PodId(7));
        assert_eq!(listed(&v), [(2, error(1).message()), (4, error(2).message())]);
        assert_eq!(v.runs().count(), 2);
        v.retain(|p| p != PodId(2));
        assert_eq!(listed(&v), [(4, error(2).message())]);
        assert_eq!(v.get(0).map(|(p, _)| p.0), Some(4));
    }

    #[test]
    fn truncate_cuts_a_shared_run() {
        let mut v = UnschedulablePods::default();
        v.push(PodId(7), error(0));
        v.push_shared(&[PodId(1), PodId(2), PodId(3)], error(1));
        v.push(PodId(4), error(2));
        let mut at_run_end = v.clone();
        at_run_end.truncate(4);
        assert_eq!(at_run_end.iter().map(|(p, _)| p.0).collect::<Vec<_>>(), [7, 1, 2, 3]);
        assert_eq!(at_run_end.runs().count(), 2);
        v.truncate(2);
        assert_eq!(listed(&v), [(7, error(0).message()), (1, error(1).message())]);
        v.push(PodId(5), error(2));
        assert_eq!(v.runs().map(|(pods, _)| pods.len()).collect::<Vec<_>>(), [1, 1, 1]);
        v.truncate(0);
        assert!(v.is_empty() && v.runs().next().is_none());
    }

    #[test]
    fn append_keeps_order_and_sharing() {
        let (mut a, mut b) = (UnschedulablePods::default(), UnschedulablePods::default());
        a.push(PodId(1), error(0));
        b.push_shared(&[PodId(2), PodId(3)], error(1));
        b.push(PodId(5), error(2));
        a.append(&mut b);
        assert!(b.is_empty());
        assert_eq!(a.runs().map(|(pods, _)| pods.len()).collect::<Vec<_>>(), [1, 2, 1]);
        assert_eq!(a.iter().map(|(p, _)| p.0).collect::<Vec<_>>(), [1, 2, 3, 5]);
    }

    #[test]
    fn equal_however_shared() {
        let (mut a, mut b) = (UnschedulablePods::default(), UnschedulablePods::default());
        a.push_shared(&[PodId(1), PodId(2)], error(1));
        b.push(PodId(1), error(1));
        b.push(PodId(2), error(1));
        assert_eq!(a, b);
        b.retain(|p| p != PodId(2));
        assert_ne!(a, b);
    }

    /// What the list must read as: one entry per pod.
    type Model = Vec<(u32, String)>;

    #[derive(Clone, Debug)]
    enum Op {
        Push(u32, u32),
        Shared(Vec<u32>, u32),
        Retain(u32),
        Truncate(usize),
        Append(Vec<u32>, u32),
        /// A copy of one of the verdicts in [`SHARED`].
        Copy(u32, usize),
    }

    thread_local! {
        /// Verdicts over the nodes copied by [`Op::Copy`] (copies of one share its rejections).
        static SHARED: [FitError; 2] = [over_nodes(10), over_nodes(11)];
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let pods = proptest::collection::vec(0u32..12, 0..5);
        prop_oneof![
            (0u32..12, 0u32..3).prop_map(|(p, e)| Op::Push(p, e)),
            (pods.clone(), 0u32..3).prop_map(|(p, e)| Op::Shared(p, e)),
            (0u32..12).prop_map(Op::Retain),
            (0usize..10).prop_map(Op::Truncate),
            (pods, 0u32..3).prop_map(|(p, e)| Op::Append(p, e)),
            (0u32..12, 0usize..2).prop_map(|(p, e)| Op::Copy(p, e)),
        ]
    }

    fn apply(v: &mut UnschedulablePods, m: &mut Model, op: &Op) {
        let ids = |pods: &[u32]| pods.iter().map(|p| PodId(*p)).collect::<Vec<_>>();
        match op {
            Op::Push(p, e) => {
                v.push(PodId(*p), error(*e));
                m.push((*p, error(*e).message()));
            }
            Op::Shared(pods, e) => {
                v.push_shared(&ids(pods), error(*e));
                m.extend(pods.iter().map(|p| (*p, error(*e).message())));
            }
            Op::Retain(gone) => {
                v.retain(|p| p.0 != *gone);
                m.retain(|(p, _)| p != gone);
            }
            Op::Truncate(len) => {
                v.truncate(*len);
                m.truncate(*len);
            }
            Op::Append(pods, e) => {
                let mut other = UnschedulablePods::default();
                other.push_shared(&ids(pods), error(*e));
                v.append(&mut other);
                m.extend(pods.iter().map(|p| (*p, error(*e).message())));
            }
            Op::Copy(p, e) => SHARED.with(|shared| {
                v.push_copy(PodId(*p), &shared[*e]);
                m.push((*p, shared[*e].message()));
            }),
        }
    }

    proptest::proptest! {
        /// Any sequence of operations reads as the same operations on a plain list of pairs: in
        /// order, by index, from an index on, and run by run.
        #[test]
        fn reads_as_a_list_of_pairs(ops in proptest::collection::vec(op(), 0..24)) {
            let (mut v, mut m) = (UnschedulablePods::default(), Model::new());
            for op in &ops {
                apply(&mut v, &mut m, op);
                proptest::prop_assert_eq!(&listed(&v), &m);
                proptest::prop_assert_eq!(v.len(), m.len());
                for (i, want) in m.iter().enumerate() {
                    let got = v.get(i).map(|(p, e)| (p.0, e.message()));
                    proptest::prop_assert_eq!(got.as_ref(), Some(want));
                }
                proptest::prop_assert!(v.get(m.len()).is_none());
                let from = m.len() / 2;
                let since: Vec<(u32, String)> =
                    v.since(from).flat_map(|(pods, e)| pods.iter().map(|p| (p.0, e.message()))).collect();
                proptest::prop_assert_eq!(&since[..], &m[from..]);
                proptest::prop_assert!(v.runs().all(|(pods, _)| !pods.is_empty()));
            }
        }
    }
}
