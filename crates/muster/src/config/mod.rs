//! The scheduler configuration file: kube-scheduler's `KubeSchedulerConfiguration`
//! (`kubescheduler.config.k8s.io/v1`, as Kubernetes 1.37 defines it). Every field of the API is
//! read ([`schema`]) and validated as kube-scheduler validates it; what muster honours goes into
//! the [`SchedulerConfig`], and every field muster reads but does not act on is named in a
//! warning, never dropped without a word. `check` and `plan --config` (and `why`, `sim`, `run`)
//! judge a file with this one function, [`judge`].

mod args;
mod duration;
mod plugins;
mod schema;

use std::path::Path;

use anyhow::{Context, bail};
use muster_manifest::yaml::{Node, Pos, Value};
use muster_sched::{SchedulerConfig, ScoringStrategy};

use crate::check::{Finding, Severity};
use plugins::{Support, effective, in_tree};
use schema::{KubeSchedulerConfiguration, Profile};

/// One problem in a configuration file, at a field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub pos: Option<Pos>,
    /// The field path, `profiles[0].plugins.score` (empty for the file itself).
    pub path: String,
    pub message: String,
}

/// What a configuration file says: the profiles' scheduler names, and the problems found.
#[derive(Debug, Default)]
pub struct Judgement {
    pub names: Vec<String>,
    pub errors: Vec<Problem>,
    pub warnings: Vec<Problem>,
}

impl Problem {
    pub fn render(&self, file: &str) -> String {
        let pos = self.pos.map(|p| format!(":{p}")).unwrap_or_default();
        let path = if self.path.is_empty() { String::new() } else { format!("{}: ", self.path) };
        format!("{file}{pos}: KubeSchedulerConfiguration: {path}{}", self.message)
    }
}

pub fn parse_strategy(s: &str) -> anyhow::Result<ScoringStrategy> {
    match s {
        "LeastAllocated" | "least-allocated" => Ok(ScoringStrategy::LeastAllocated),
        "MostAllocated" | "most-allocated" => Ok(ScoringStrategy::MostAllocated),
        "RequestedToCapacityRatio" => Ok(ScoringStrategy::RequestedToCapacityRatio),
        other => bail!(
            "Unsupported value: {other:?}: supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""
        ),
    }
}

/// Reads a configuration file into `config`; returns the scheduler names of its profiles. Its
/// warnings go to standard error; any error refuses the whole file.
pub fn load(path: &Path, config: &mut SchedulerConfig) -> anyhow::Result<Vec<String>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("{file}: cannot read"))?;
    apply(&file, &text, config)
}

/// The configuration the command line gives: `--config FILE` (if any) with `--scoring` over it,
/// and the scheduler names of the file's profiles.
pub fn from_flags(
    path: Option<&Path>,
    scoring: Option<crate::Scoring>,
) -> anyhow::Result<(SchedulerConfig, Vec<String>)> {
    let mut config = SchedulerConfig::default();
    let mut names = Vec::new();
    if let Some(path) = path {
        names = load(path, &mut config)?;
    }
    if let Some(s) = scoring {
        config.scoring_strategy = s.into();
        for p in &mut config.profiles {
            p.config.scoring_strategy = s.into();
        }
    }
    Ok((config, names))
}

/// [`judge`], with the warnings printed and the errors as one error.
pub fn apply(file: &str, text: &str, config: &mut SchedulerConfig) -> anyhow::Result<Vec<String>> {
    let j = judge(text, config);
    for w in &j.warnings {
        eprintln!("warning: {}", w.render(file));
    }
    if !j.errors.is_empty() {
        let lines: Vec<String> = j.errors.iter().map(|e| e.render(file)).collect();
        bail!(lines.join("\n"));
    }
    Ok(j.names)
}

/// Judges a configuration file's text and applies what muster honours to `config` (left as
/// it was when there are errors).
pub fn judge(text: &str, config: &mut SchedulerConfig) -> Judgement {
    let mut j = Judgement::default();
    let docs = match muster_manifest::yaml::parse_stream(text) {
        Ok(d) => d,
        Err(e) => {
            j.errors.push(Problem {
                pos: Some(e.pos),
                path: String::new(),
                message: format!("invalid YAML: {}", e.message),
            });
            return j;
        }
    };
    let Some(doc) = docs.first() else {
        j.errors.push(Problem { pos: None, path: String::new(), message: "empty configuration".into() });
        return j;
    };
    if docs.len() > 1 {
        j.errors.push(Problem {
            pos: Some(docs[1].root.pos),
            path: String::new(),
            message: "a configuration file holds one document".into(),
        });
    }
    judge_node(&doc.root, config, &mut j);
    j
}

fn by_position(list: &mut [Problem]) {
    list.sort_by_key(|p| p.pos.map(|p| (p.line, p.col)));
}

/// [`judge`] over a parsed document (what `check` calls for a KubeSchedulerConfiguration it
/// finds among manifests).
pub fn judge_node(root: &Node<'_>, config: &mut SchedulerConfig, j: &mut Judgement) {
    let cfg: KubeSchedulerConfiguration = match muster_manifest::de::from_node(root) {
        Ok(c) => c,
        Err(errs) => {
            for e in errs {
                j.errors.push(Problem { pos: e.pos, path: e.path.unwrap_or_default(), message: e.message });
            }
            return;
        }
    };
    let mut next = config.clone();
    let mut c = Judge { root, j, config: &mut next };
    c.file_level(&cfg);
    c.profiles(root, &cfg);
    if c.j.errors.is_empty() {
        *config = next;
    }
    by_position(&mut j.errors);
    by_position(&mut j.warnings);
}

/// A KubeSchedulerConfiguration among `check`'s inputs, judged as `plan --config` judges it.
pub fn findings(file: usize, root: &Node<'_>) -> Vec<Finding> {
    let mut j = Judgement::default();
    judge_node(root, &mut SchedulerConfig::default(), &mut j);
    let as_finding = |p: Problem, severity| Finding {
        file,
        pos: p.pos,
        severity,
        object: Some("KubeSchedulerConfiguration".into()),
        field: (!p.path.is_empty()).then_some(p.path),
        message: p.message,
        fix: None,
    };
    let errors = j.errors.into_iter().map(|p| as_finding(p, Severity::Error));
    errors.chain(j.warnings.into_iter().map(|p| as_finding(p, Severity::Warning))).collect()
}

/// The judge's state: the document (for positions), the findings, the configuration being built.
struct Judge<'r, 'a, 'j> {
    root: &'r Node<'a>,
    j: &'j mut Judgement,
    config: &'j mut SchedulerConfig,
}

impl Judge<'_, '_, '_> {
    /// How many errors were found so far (to tell whether a part was valid).
    fn errors_so_far(&self) -> usize {
        self.j.errors.len()
    }

    fn error(&mut self, path: &str, message: impl Into<String>) {
        let pos = locate(self.root, path);
        self.j.errors.push(Problem { pos, path: path.into(), message: message.into() });
    }

    fn warn(&mut self, path: &str, message: impl Into<String>) {
        let pos = locate(self.root, path);
        self.j.warnings.push(Problem { pos, path: path.into(), message: message.into() });
    }

    fn file_level(&mut self, cfg: &KubeSchedulerConfiguration) {
        match cfg.api_version.as_deref() {
            None | Some("kubescheduler.config.k8s.io/v1") => {}
            Some(v) => self.error(
                "apiVersion",
                format!("{v:?}: muster reads kubescheduler.config.k8s.io/v1 (the only version Kubernetes 1.37 serves)"),
            ),
        }
        if let Some(k) = cfg.kind.as_deref().filter(|k| *k != "KubeSchedulerConfiguration") {
            self.error("kind", format!("{k:?}: expected KubeSchedulerConfiguration"));
        }
        if let Some(p) = cfg.parallelism {
            if p <= 0 {
                self.error("parallelism", format!("{p}: must be greater than 0"));
            } else {
                self.warn(
                    "parallelism",
                    "not used: muster's cycles run on one thread and give the same answer at any setting",
                );
            }
        }
        if let Some(p) = self.percentage("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score) {
            self.config.percentage_of_nodes_to_score = p;
        }
        if self.percentage("percentageOfPlacementsToScore", cfg.percentage_of_placements_to_score).is_some() {
            self.warn("percentageOfPlacementsToScore", "not used: muster tries every candidate placement");
        }
        self.backoff(cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds);
        let process = [
            (
                "leaderElection",
                cfg.leader_election.is_some(),
                "muster run's --leader-elect, --lease-name and --lease-namespace",
            ),
            (
                "clientConnection",
                cfg.client_connection.is_some(),
                "muster run's --kubeconfig, --kube-api-qps and --kube-api-burst",
            ),
            ("enableProfiling", cfg.enable_profiling.is_some(), "nothing: muster serves no profiling endpoint"),
            (
                "enableContentionProfiling",
                cfg.enable_contention_profiling.is_some(),
                "nothing: muster serves no profiling endpoint",
            ),
            (
                "delayCacheUntilActive",
                cfg.delay_cache_until_active.is_some(),
                "nothing: muster run always lists before it leads",
            ),
        ];
        for (field, set, instead) in process {
            if set {
                self.warn(field, format!("not read from the file; it is set by {instead}"));
            }
        }
        if !cfg.extenders.is_empty() {
            self.error(
                "extenders",
                "muster calls no scheduler extenders; remove them or run kube-scheduler for those pods",
            );
        }
    }

    /// A percentage field: validated to 0..=100.
    fn percentage(&mut self, path: &str, v: Option<i32>) -> Option<u32> {
        let v = v?;
        if !(0..=100).contains(&v) {
            self.error(path, format!("{v}: not in valid range [0-100]"));
            return None;
        }
        Some(v as u32)
    }

    fn backoff(&mut self, initial: Option<i64>, max: Option<i64>) {
        if let Some(i) = initial {
            if i <= 0 {
                self.error("podInitialBackoffSeconds", format!("{i}: must be greater than 0"));
                return;
            }
            self.config.backoff.initial = (i as u64).saturating_mul(1000);
        }
        if let Some(m) = max {
            let initial_s = initial.unwrap_or(1);
            if m < initial_s {
                self.error(
                    "podMaxBackoffSeconds",
                    format!("{m}: must be greater than or equal to podInitialBackoffSeconds"),
                );
                return;
            }
            self.config.backoff.max = (m as u64).saturating_mul(1000);
        }
    }

    /// Every profile is judged. The first is the base configuration; each later one that
    /// schedules differently becomes one of its further profiles, for the pods that name it.
    fn profiles(&mut self, root: &Node<'_>, cfg: &KubeSchedulerConfiguration) {
        let base = self.config.clone();
        let mut first: Option<SchedulerConfig> = None;
        let mut others = Vec::new();
        for (i, profile) in cfg.profiles.iter().enumerate() {
            let name = profile.scheduler_name.clone().unwrap_or_else(|| "default-scheduler".into());
            let path = format!("profiles[{i}]");
            if self.j.names.contains(&name) {
                self.error(&format!("{path}.schedulerName"), format!("Duplicate value: {name:?}"));
                continue;
            }
            self.j.names.push(name.clone());
            *self.config = base.clone();
            self.profile(root, &path, profile);
            match &first {
                None => first = Some(self.config.clone()),
                Some(c) if c != &*self.config => {
                    others.push(muster_sched::Profile { scheduler_name: name, config: self.config.clone() })
                }
                Some(_) => {}
            }
        }
        if let Some(c) = first {
            *self.config = SchedulerConfig { profiles: others, ..c };
        }
    }

    fn profile(&mut self, root: &Node<'_>, path: &str, profile: &Profile) {
        if let Some(p) =
            self.percentage(&format!("{path}.percentageOfNodesToScore"), profile.percentage_of_nodes_to_score)
        {
            self.config.percentage_of_nodes_to_score = p;
        }
        let placements = format!("{path}.percentageOfPlacementsToScore");
        if self.percentage(&placements, profile.percentage_of_placements_to_score).is_some() {
            self.warn(&placements, "not used: muster tries every candidate placement");
        }
        self.plugins(path, profile);
        for (k, pc) in profile.plugin_config.iter().enumerate() {
            let at = format!("{path}.pluginConfig[{k}]");
            if profile.plugin_config[..k].iter().any(|o| o.name == pc.name) {
                self.error(&format!("{at}.name"), format!("Duplicate value: {:?}", pc.name));
                continue;
            }
            let node = locate_node(root, &format!("{at}.args"));
            args::apply(self, &at, &pc.name, node);
        }
    }

    /// The extension points: names checked, weights taken, what muster cannot turn off refused.
    fn plugins(&mut self, path: &str, profile: &Profile) {
        let plugins = profile.plugins.as_ref();
        if let Some(p) = plugins {
            for (point, set) in p.points() {
                for (list, refs) in [("enabled", &set.enabled), ("disabled", &set.disabled)] {
                    for (i, r) in refs.iter().enumerate() {
                        self.plugin_ref(&format!("{path}.plugins.{point}.{list}[{i}]"), point, list, &r.name, r.weight);
                    }
                }
            }
        }
        self.score_weights(plugins);
        self.placement_weights(plugins);
        self.cannot_turn_off(path, plugins);
    }

    fn plugin_ref(&mut self, at: &str, point: &str, list: &str, name: &str, weight: Option<i32>) {
        if name == "*" && list == "disabled" {
            return;
        }
        let Some(p) = in_tree(name) else {
            self.error(
                &format!("{at}.name"),
                format!("{name:?} is not a plugin of kube-scheduler 1.37; muster runs no out-of-tree plugins"),
            );
            return;
        };
        if point != "multiPoint" && !p.points.contains(&point) {
            self.error(&format!("{at}.name"), format!("plugin {name:?} does not extend {point}"));
        }
        if let Some(w) = weight
            && w < 0
        {
            self.error(&format!("{at}.weight"), format!("{w}: must not be negative"));
        }
        if list == "enabled" && p.support == Support::Missing {
            self.warn(&format!("{at}.name"), format!("muster does not run {name} yet; it is left out"));
        }
    }

    fn score_weights(&mut self, plugins: Option<&schema::Plugins>) {
        let mut w = muster_sched::ScoreWeights {
            node_resources_fit: 0,
            balanced_allocation: 0,
            taint_toleration: 0,
            node_affinity: 0,
            pod_topology_spread: 0,
            inter_pod_affinity: 0,
            image_locality: 0,
            volume_binding: 0,
        };
        for e in effective(plugins, "score") {
            match e.name.as_str() {
                "NodeResourcesFit" => w.node_resources_fit = e.weight,
                "NodeResourcesBalancedAllocation" => w.balanced_allocation = e.weight,
                "TaintToleration" => w.taint_toleration = e.weight,
                "NodeAffinity" => w.node_affinity = e.weight,
                "PodTopologySpread" => w.pod_topology_spread = e.weight,
                "InterPodAffinity" => w.inter_pod_affinity = e.weight,
                "ImageLocality" => w.image_locality = e.weight,
                "VolumeBinding" => w.volume_binding = e.weight,
                _ => {}
            }
        }
        self.config.weights = w;
    }

    fn placement_weights(&mut self, plugins: Option<&schema::Plugins>) {
        let w = &mut self.config.placement_weights;
        (w.node_resources_fit, w.pod_group_pods_count) = (0, 0);
        for e in effective(plugins, "placementScore") {
            match e.name.as_str() {
                "NodeResourcesFit" => w.node_resources_fit = e.weight,
                "PodGroupPodsCount" => w.pod_group_pods_count = e.weight,
                _ => {}
            }
        }
    }

    /// Plugins muster runs at points other than Score and PlacementScore cannot be turned off
    /// yet: a profile that disables one is refused rather than run with it on.
    fn cannot_turn_off(&mut self, path: &str, plugins: Option<&schema::Plugins>) {
        const POINTS: &[&str] = &[
            "preEnqueue",
            "queueSort",
            "preFilter",
            "filter",
            "postFilter",
            "reserve",
            "permit",
            "preBind",
            "bind",
            "placementGenerate",
            "placementFeasible",
            "podGroupPostFilter",
        ];
        for point in POINTS {
            let on = effective(plugins, point);
            for p in plugins::IN_TREE.iter().filter(|p| p.support == Support::Runs && p.points.contains(point)) {
                if !on.iter().any(|e| e.name == p.name) {
                    self.error(
                        &format!("{path}.plugins"),
                        format!("turns {} off at {point}; muster cannot run without it yet", p.name),
                    );
                }
            }
        }
    }
}

/// Where `path` (`a.b[0].c`) is in the document: the value's position, or the nearest parent's.
fn locate(root: &Node<'_>, path: &str) -> Option<Pos> {
    Some(walk(root, path).0.pos)
}

/// The node at `path`, when the document has it.
fn locate_node<'n, 'a>(root: &'n Node<'a>, path: &str) -> Option<&'n Node<'a>> {
    let (node, whole) = walk(root, path);
    whole.then_some(node)
}

/// The deepest node along `path`, and whether it is the whole path's.
fn walk<'n, 'a>(root: &'n Node<'a>, path: &str) -> (&'n Node<'a>, bool) {
    let mut node = root;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, index) = match part.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let Some(next) = node.get(key) else { return (node, false) };
        node = next;
        if let Some(i) = index {
            match &node.value {
                Value::Seq(items) if i < items.len() => node = &items[i],
                _ => return (node, false),
            }
        }
    }
    (node, true)
}

#[cfg(test)]
mod tests;
