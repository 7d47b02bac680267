//! The scheduler configuration file: the part of kube-scheduler's `KubeSchedulerConfiguration`
//! (`kubescheduler.config.k8s.io/v1`) that muster honours. Anything else in the file is an error
//! rather than silently ignored.

use std::path::Path;

use anyhow::{Context, bail};
use muster_sched::{SchedulerConfig, ScoringStrategy};
use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct KubeSchedulerConfiguration {
    api_version: Option<String>,
    kind: Option<String>,
    percentage_of_nodes_to_score: Option<u32>,
    #[serde(default)]
    profiles: Vec<Profile>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Profile {
    scheduler_name: Option<String>,
    percentage_of_nodes_to_score: Option<u32>,
    plugins: Option<Plugins>,
    #[serde(default)]
    plugin_config: Vec<PluginConfig>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Plugins {
    score: Option<PluginSet>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PluginSet {
    #[serde(default)]
    enabled: Vec<PluginRef>,
    #[serde(default)]
    disabled: Vec<PluginRef>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PluginRef {
    name: String,
    weight: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PluginConfig {
    name: String,
    args: NodeResourcesFitArgs,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NodeResourcesFitArgs {
    api_version: Option<String>,
    kind: Option<String>,
    scoring_strategy: Option<ScoringStrategyArgs>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ScoringStrategyArgs {
    #[serde(rename = "type")]
    type_: Option<String>,
    #[serde(default)]
    resources: Vec<ResourceSpec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpec {
    name: String,
    weight: Option<i64>,
}

pub fn parse_strategy(s: &str) -> anyhow::Result<ScoringStrategy> {
    match s {
        "LeastAllocated" | "least-allocated" => Ok(ScoringStrategy::LeastAllocated),
        "MostAllocated" | "most-allocated" => Ok(ScoringStrategy::MostAllocated),
        "RequestedToCapacityRatio" => {
            bail!("scoring strategy RequestedToCapacityRatio is not supported yet; use LeastAllocated or MostAllocated")
        }
        other => bail!("unknown scoring strategy {other:?}; use LeastAllocated or MostAllocated"),
    }
}

/// Reads a configuration file into `config`; returns the scheduler names of its profiles.
pub fn load(path: &Path, config: &mut SchedulerConfig) -> anyhow::Result<Vec<String>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("{file}: cannot read"))?;
    apply(&file, &text, config)
}

pub fn apply(file: &str, text: &str, config: &mut SchedulerConfig) -> anyhow::Result<Vec<String>> {
    let docs = muster_manifest::yaml::parse_stream(text)
        .map_err(|e| anyhow::anyhow!("{file}:{}: invalid YAML: {}", e.pos, e.message))?;
    let Some(doc) = docs.first() else { bail!("{file}: empty configuration") };
    let cfg: KubeSchedulerConfiguration = muster_manifest::de::from_node(&doc.root).map_err(|errs| {
        let lines: Vec<String> = errs
            .iter()
            .map(|e| {
                let pos = e.pos.map(|p| format!(":{p}")).unwrap_or_default();
                let path = e.path.as_deref().filter(|p| !p.is_empty()).map(|p| format!("{p}: ")).unwrap_or_default();
                format!("{file}{pos}: KubeSchedulerConfiguration: {path}{}", e.message)
            })
            .collect();
        anyhow::anyhow!(lines.join("\n"))
    })?;
    if let Some(v) = cfg.api_version.as_deref()
        && v != "kubescheduler.config.k8s.io/v1"
    {
        bail!("{file}: apiVersion {v:?}: muster reads kubescheduler.config.k8s.io/v1");
    }
    if let Some(k) = cfg.kind.as_deref()
        && k != "KubeSchedulerConfiguration"
    {
        bail!("{file}: kind {k:?}: expected KubeSchedulerConfiguration");
    }
    if let Some(p) = cfg.percentage_of_nodes_to_score {
        config.percentage_of_nodes_to_score = p;
    }
    if cfg.profiles.len() > 1 {
        bail!("{file}: profiles: muster runs one profile; found {}", cfg.profiles.len());
    }
    let mut names = Vec::new();
    for profile in cfg.profiles {
        names.extend(profile.scheduler_name);
        if let Some(p) = profile.percentage_of_nodes_to_score {
            config.percentage_of_nodes_to_score = p;
        }
        if let Some(score) = profile.plugins.and_then(|p| p.score) {
            for p in &score.disabled {
                set_weight(&mut config.weights, &p.name, 0, file)?;
            }
            for p in &score.enabled {
                set_weight(&mut config.weights, &p.name, p.weight.unwrap_or(1), file)?;
            }
        }
        for pc in profile.plugin_config {
            if pc.name != "NodeResourcesFit" {
                bail!("{file}: pluginConfig {:?}: muster configures only NodeResourcesFit", pc.name);
            }
            let _ = (pc.args.api_version, pc.args.kind);
            if let Some(s) = pc.args.scoring_strategy {
                if let Some(t) = s.type_.as_deref() {
                    config.scoring_strategy =
                        parse_strategy(t).with_context(|| format!("{file}: NodeResourcesFit args"))?;
                }
                if !s.resources.is_empty() {
                    config.scoring_resources =
                        s.resources.into_iter().map(|r| (r.name, r.weight.unwrap_or(1))).collect();
                }
            }
        }
    }
    if config.percentage_of_nodes_to_score > 100 {
        bail!("{file}: percentageOfNodesToScore must be between 0 and 100");
    }
    Ok(names)
}

fn set_weight(w: &mut muster_sched::ScoreWeights, plugin: &str, weight: i64, file: &str) -> anyhow::Result<()> {
    match plugin {
        "NodeResourcesFit" => w.node_resources_fit = weight,
        "NodeResourcesBalancedAllocation" => w.balanced_allocation = weight,
        "TaintToleration" => w.taint_toleration = weight,
        "NodeAffinity" => w.node_affinity = weight,
        "*" if weight == 0 => {
            *w = muster_sched::ScoreWeights {
                node_resources_fit: 0,
                balanced_allocation: 0,
                taint_toleration: 0,
                node_affinity: 0,
                pod_topology_spread: 0,
                inter_pod_affinity: 0,
            }
        }
        other => bail!(
            "{file}: score plugin {other:?} is not one muster runs (NodeResourcesFit, NodeResourcesBalancedAllocation, TaintToleration, NodeAffinity)"
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_scoring_strategy_and_weights() {
        let mut c = SchedulerConfig::default();
        let names = apply("c.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: muster\n  plugins:\n    score:\n      enabled:\n      - name: TaintToleration\n        weight: 5\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n        resources:\n        - name: nvidia.com/gpu\n          weight: 3\n", &mut c).unwrap();
        assert_eq!(names, ["muster"]);
        assert_eq!(c.scoring_strategy, ScoringStrategy::MostAllocated);
        assert_eq!(c.scoring_resources, [("nvidia.com/gpu".to_string(), 3)]);
        assert_eq!(c.weights.taint_toleration, 5);
    }

    #[test]
    fn unknown_fields_are_errors_with_positions() {
        let mut c = SchedulerConfig::default();
        let e =
            apply("c.yaml", "kind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  plugns: {}\n", &mut c)
                .unwrap_err();
        assert_eq!(e.to_string(), "c.yaml:4:3: KubeSchedulerConfiguration: profiles[0]: unknown field \"plugns\"");
    }
}
