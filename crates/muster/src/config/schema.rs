//! The `kubescheduler.config.k8s.io/v1` API of Kubernetes 1.37 as serde types: every field the
//! API has, so that a valid file is read whole and a misspelled key is an error with its place.
//! What muster does with each field is decided in [`super`], not here; fields muster does not
//! act on are still typed, so that their values are checked.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::{NodeAffinity, TopologySpreadConstraint};
use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct KubeSchedulerConfiguration {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub parallelism: Option<i32>,
    pub leader_election: Option<LeaderElection>,
    pub client_connection: Option<ClientConnection>,
    pub enable_profiling: Option<bool>,
    pub enable_contention_profiling: Option<bool>,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub percentage_of_placements_to_score: Option<i32>,
    pub pod_initial_backoff_seconds: Option<i64>,
    pub pod_max_backoff_seconds: Option<i64>,
    #[serde(default)]
    pub profiles: Vec<Profile>,
    #[serde(default)]
    pub extenders: Vec<Extender>,
    pub delay_cache_until_active: Option<bool>,
}

/// `componentbaseconfig.LeaderElectionConfiguration`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElection {
    pub leader_elect: Option<bool>,
    pub lease_duration: Option<String>,
    pub renew_deadline: Option<String>,
    pub retry_period: Option<String>,
    pub resource_lock: Option<String>,
    pub resource_name: Option<String>,
    pub resource_namespace: Option<String>,
}

/// `componentbaseconfig.ClientConnectionConfiguration`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClientConnection {
    pub kubeconfig: Option<String>,
    pub accept_content_types: Option<String>,
    pub content_type: Option<String>,
    pub qps: Option<f32>,
    pub burst: Option<i32>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Extender {
    pub url_prefix: Option<String>,
    pub filter_verb: Option<String>,
    pub preempt_verb: Option<String>,
    pub prioritize_verb: Option<String>,
    pub weight: Option<i64>,
    pub bind_verb: Option<String>,
    #[serde(rename = "enableHTTPS")]
    pub enable_https: Option<bool>,
    pub tls_config: Option<serde_json::Value>,
    pub http_timeout: Option<String>,
    pub node_cache_capable: Option<bool>,
    pub managed_resources: Option<serde_json::Value>,
    pub ignorable: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub scheduler_name: Option<String>,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub percentage_of_placements_to_score: Option<i32>,
    pub plugins: Option<Plugins>,
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

/// The extension points, in the API's order.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Plugins {
    pub pre_enqueue: Option<PluginSet>,
    pub queue_sort: Option<PluginSet>,
    pub pre_filter: Option<PluginSet>,
    pub filter: Option<PluginSet>,
    pub post_filter: Option<PluginSet>,
    pub pre_score: Option<PluginSet>,
    pub score: Option<PluginSet>,
    pub reserve: Option<PluginSet>,
    pub permit: Option<PluginSet>,
    pub pre_bind: Option<PluginSet>,
    pub bind: Option<PluginSet>,
    pub post_bind: Option<PluginSet>,
    pub multi_point: Option<PluginSet>,
    pub placement_generate: Option<PluginSet>,
    pub placement_score: Option<PluginSet>,
    pub placement_feasible: Option<PluginSet>,
    pub pod_group_post_filter: Option<PluginSet>,
}

impl Plugins {
    /// Each extension point that the file sets, with its API name.
    pub fn points(&self) -> Vec<(&'static str, &PluginSet)> {
        let all = [
            ("preEnqueue", &self.pre_enqueue),
            ("queueSort", &self.queue_sort),
            ("preFilter", &self.pre_filter),
            ("filter", &self.filter),
            ("postFilter", &self.post_filter),
            ("preScore", &self.pre_score),
            ("score", &self.score),
            ("reserve", &self.reserve),
            ("permit", &self.permit),
            ("preBind", &self.pre_bind),
            ("bind", &self.bind),
            ("postBind", &self.post_bind),
            ("multiPoint", &self.multi_point),
            ("placementGenerate", &self.placement_generate),
            ("placementScore", &self.placement_score),
            ("placementFeasible", &self.placement_feasible),
            ("podGroupPostFilter", &self.pod_group_post_filter),
        ];
        all.into_iter().filter_map(|(n, s)| s.as_ref().map(|s| (n, s))).collect()
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PluginSet {
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PluginRef {
    pub name: String,
    pub weight: Option<i32>,
}

/// A `pluginConfig` entry; `args` is read again with the plugin's own type once the name is
/// known (see [`super::args`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginConfig {
    pub name: String,
    pub args: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesFitArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    pub scoring_strategy: Option<ScoringStrategy>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ScoringStrategy {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatio>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RequestedToCapacityRatio {
    #[serde(default)]
    pub shape: Vec<ShapePoint>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ShapePoint {
    pub utilization: i32,
    pub score: i32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpec {
    pub name: String,
    pub weight: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesBalancedAllocationArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DefaultPreemptionArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub min_candidate_nodes_percentage: Option<i32>,
    pub min_candidate_nodes_absolute: Option<i32>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct InterPodAffinityArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub hard_pod_affinity_weight: Option<i32>,
    pub ignore_preferred_terms_of_existing_pods: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodTopologySpreadArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    pub defaulting_type: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct VolumeBindingArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub bind_timeout_seconds: Option<i64>,
    #[serde(default)]
    pub shape: Vec<ShapePoint>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinityArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub added_affinity: Option<NodeAffinity>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DynamicResourcesArgs {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub filter_timeout: Option<String>,
    pub binding_timeout: Option<String>,
}
