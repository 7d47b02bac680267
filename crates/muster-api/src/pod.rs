//! A pod's three parts, read through a trait: the scheduler's store keeps pods in a smaller form
//! than `k8s-openapi`'s `Pod` (2,464 bytes of struct before any content), and the code that reads
//! pods — plugins, controllers, outputs — reads either form the same way.

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Read access to a pod's metadata, spec and status.
pub trait PodObject {
    fn meta(&self) -> &ObjectMeta;
    /// The spec. Its `nodeName` is read through [`PodObject::node_name`]: the store's form
    /// shares one spec among the pods of a template, and keeps each pod's node beside it.
    fn spec(&self) -> Option<&PodSpec>;
    fn status(&self) -> Option<&PodStatus>;
    /// `spec.nodeName` as given (an empty name included).
    fn node_name(&self) -> Option<&str>;
}

impl PodObject for Pod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn spec(&self) -> Option<&PodSpec> {
        self.spec.as_ref()
    }

    fn status(&self) -> Option<&PodStatus> {
        self.status.as_ref()
    }

    fn node_name(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.node_name.as_deref())
    }
}

impl<T: PodObject + ?Sized> PodObject for &T {
    fn meta(&self) -> &ObjectMeta {
        (**self).meta()
    }

    fn spec(&self) -> Option<&PodSpec> {
        (**self).spec()
    }

    fn status(&self) -> Option<&PodStatus> {
        (**self).status()
    }

    fn node_name(&self) -> Option<&str> {
        (**self).node_name()
    }
}
