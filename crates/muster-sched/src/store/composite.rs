//! The store's CompositePodGroups (`scheduling.k8s.io/v1alpha3`) and the parent links of group
//! trees, one change at a time. A PodGroup or CompositePodGroup naming a parent the store does not
//! have waits for it (its tree's cycle says so) and joins it when it comes; the children of a
//! deleted CompositePodGroup wait for it again. A change to a tree moves its groups' queue
//! entries: the entries they had leave the queue, and each group with pending pods joins its
//! root's entry as the tree is now.

use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;

use super::{Applied, Cluster, ModelError, PodState, QueueEntry, Wake};
use crate::cluster::{CompositeId, CompositeInfo, GroupId, GroupNode};

/// A tree's groups and their queue entries, as they were before a change.
#[derive(Debug, Default)]
pub(super) struct TreeBefore {
    leaves: Vec<GroupId>,
    entries: Vec<QueueEntry>,
}

/// A node's parent link: resolved, or the `namespace/name` of a parent not in the store.
type ParentLink = Option<Result<CompositeId, String>>;

impl TreeBefore {
    pub(super) fn leaves(&self) -> &[GroupId] {
        &self.leaves
    }

    fn merge(&mut self, other: TreeBefore) {
        for g in other.leaves {
            if !self.leaves.contains(&g) {
                self.leaves.push(g);
            }
        }
        for e in other.entries {
            if !self.entries.contains(&e) {
                self.entries.push(e);
            }
        }
    }
}

impl Cluster {
    pub(super) fn upsert_composite_pod_group(&mut self, c: CompositePodGroup) -> Result<Applied, ModelError> {
        let info = self.composite_info(c);
        if let Some((field, message)) = crate::validate::composite_pod_group(&info.composite).into_iter().next() {
            return Err(ModelError { kind: "CompositePodGroup", object: info.key, field: Some(field), message });
        }
        let key = info.key.clone();
        let existing = self.index().composites.get(&key).copied();
        let mut before = existing.map(|id| self.tree_before(GroupNode::Composite(id))).unwrap_or_default();
        // A new one takes in the trees of the children that waited for it.
        if existing.is_none() {
            let waiting = self.index().parent_waiters.get(&key).cloned().unwrap_or_default();
            for child in waiting {
                before.merge(self.tree_before(child));
            }
        }
        let id = match existing {
            Some(id) => {
                let old = &mut self.composites[id];
                let (parent, children) = (old.parent.take(), std::mem::take(&mut old.children));
                self.composites[id] = CompositeInfo { parent, children, ..info };
                id
            }
            None => {
                let id = CompositeId(self.composites.len() as u32);
                self.composites.push(info);
                self.index().composites.insert(key.clone(), id);
                for child in self.index().parent_waiters.remove(&key).unwrap_or_default() {
                    self.link_parent(child);
                }
                id
            }
        };
        let node = GroupNode::Composite(id);
        self.link_parent(node);
        let after = self.tree_leaves(node);
        Ok(self.tree_changed(before, &after))
    }

    /// A deleted CompositePodGroup leaves its tree; its children wait for it again. Its slot
    /// stays, unlinked.
    pub(super) fn delete_composite_pod_group(&mut self, key: &str) -> Applied {
        let Some(id) = self.index().composites.get(key).copied() else { return Applied::default() };
        let node = GroupNode::Composite(id);
        let before = self.tree_before(node);
        self.index().composites.remove(key);
        let had = self.parent_slot(node).take();
        self.unlink_parent(node, had);
        let children = std::mem::take(&mut self.composites[id].children);
        for &child in &children {
            *self.parent_slot(child) = Some(Err(key.to_string()));
        }
        self.index().parent_waiters.entry(key.to_string()).or_default().extend(children);
        self.tree_changed(before, &[])
    }

    /// Links `node` to the parent its object names, unlinking it from the one it had.
    pub(super) fn link_parent(&mut self, node: GroupNode) {
        let want = self.parent_key_named(node);
        let link: ParentLink = want.map(|k| self.index().composites.get(&k).copied().ok_or(k));
        if *self.parent_slot(node) == link {
            return;
        }
        let had = self.parent_slot(node).take();
        self.unlink_parent(node, had);
        match &link {
            Some(Ok(p)) => {
                let key = self.node_key(node).to_string();
                let at = {
                    let children = &self.composites[*p].children;
                    children.partition_point(|c| self.node_key(*c) < key.as_str())
                };
                self.composites[*p].children.insert(at, node);
            }
            Some(Err(k)) => self.index().parent_waiters.entry(k.clone()).or_default().push(node),
            None => {}
        }
        *self.parent_slot(node) = link;
    }

    /// A deleted PodGroup leaves its parent (or the parent it waited for).
    pub(super) fn unlink_group(&mut self, g: GroupId) {
        let node = GroupNode::Group(g);
        let had = self.parent_slot(node).take();
        self.unlink_parent(node, had);
    }

    fn unlink_parent(&mut self, node: GroupNode, had: ParentLink) {
        match had {
            Some(Ok(p)) => self.composites[p].children.retain(|c| *c != node),
            Some(Err(k)) => {
                if let Some(waiting) = self.index().parent_waiters.get_mut(&k) {
                    waiting.retain(|c| *c != node);
                }
            }
            None => {}
        }
    }

    /// `namespace/name` of the parent the node's object names.
    fn parent_key_named(&self, node: GroupNode) -> Option<String> {
        let (meta, parent) = match node {
            GroupNode::Group(g) => {
                let o = &self.groups[g].group;
                (&o.metadata, o.spec.parent_composite_pod_group_name.as_deref())
            }
            GroupNode::Composite(c) => {
                let o = &self.composites[c].composite;
                (&o.metadata, o.spec.parent_composite_pod_group_name.as_deref())
            }
        };
        Some(format!("{}/{}", meta.namespace.as_deref().unwrap_or("default"), parent?))
    }

    fn parent_slot(&mut self, node: GroupNode) -> &mut ParentLink {
        match node {
            GroupNode::Group(g) => &mut self.groups[g].parent,
            GroupNode::Composite(c) => &mut self.composites[c].parent,
        }
    }

    /// The PodGroups of the tree `node` is in (of `node`'s own subtree when its root cannot be
    /// found: a parent missing, or a cycle).
    pub(super) fn tree_leaves(&self, node: GroupNode) -> Vec<GroupId> {
        match self.root(node).unwrap_or(node) {
            GroupNode::Group(g) => vec![g],
            GroupNode::Composite(c) => self.leaves(c),
        }
    }

    /// The groups of `node`'s tree and their queue entries, before a change to the tree.
    pub(super) fn tree_before(&self, node: GroupNode) -> TreeBefore {
        let leaves = self.tree_leaves(node);
        let mut entries: Vec<QueueEntry> = Vec::new();
        for &g in &leaves {
            let entry = self.entry_of_group(g);
            if !entries.contains(&entry) {
                entries.push(entry);
            }
        }
        TreeBefore { leaves, entries }
    }

    /// What a tree change means for the queue: the entries the tree's groups had leave it, and
    /// every group of the tree as it was or is now with pending pods joins its root's entry.
    pub(super) fn tree_changed(&self, before: TreeBefore, after: &[GroupId]) -> Applied {
        let mut applied = Applied { wake: Wake::WORKLOAD_CHANGED, dequeue: before.entries, ..Applied::default() };
        for &g in before.leaves.iter().chain(after) {
            let pending = self.groups[g].members.iter().any(|m| self.pods[m.0 as usize].state == PodState::Pending);
            let entry = self.entry_of_group(g);
            if pending && !applied.queue.contains(&entry) {
                applied.queue.push(entry);
            }
        }
        applied
    }
}
