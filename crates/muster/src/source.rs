//! Where `plan` and `why` read a cluster from: manifest files, or a live cluster's current state
//! through a kubeconfig (read once, nothing written), or both ("what if I submit this job?": the
//! files' objects without a `creationTimestamp` get the current time, as the API server would
//! stamp them on creation; the only clock a plan reads, and only in this mode).

use std::path::{Path, PathBuf};

use muster_manifest::{Diagnostic, Manifests};

/// The manifests of `paths`, preceded by the cluster's objects when `kubeconfig` is given (an
/// empty path: the current context of KUBECONFIG or ~/.kube/config, or the pod's service account).
pub fn load(paths: &[PathBuf], kubeconfig: Option<&str>) -> Result<Manifests, Vec<Diagnostic>> {
    let Some(kubeconfig) = kubeconfig else { return muster_manifest::load_paths(paths) };
    let text = read_cluster(kubeconfig).map_err(|e| {
        vec![Diagnostic { file: "<cluster>".into(), pos: None, object: None, field: None, message: format!("{e:#}") }]
    })?;
    let mut manifests = muster_manifest::load_str("<cluster>", &text)?;
    if !paths.is_empty() {
        let mut extra = muster_manifest::load_paths(paths)?;
        // Submitted now: the API server would stamp them, so they queue after what is there.
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
        for l in &mut extra.objects {
            l.object.metadata_mut().creation_timestamp.get_or_insert_with(|| now.clone());
        }
        manifests.objects.extend(extra.objects);
        for (k, n) in extra.ignored {
            *manifests.ignored.entry(k).or_default() += n;
        }
    }
    Ok(manifests)
}

fn read_cluster(kubeconfig: &str) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let path = (!kubeconfig.is_empty()).then_some(Path::new(kubeconfig));
        let client = muster_kube::client(path).await?;
        muster_kube::snapshot::list_cluster(&client).await
    })
}
