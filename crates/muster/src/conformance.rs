//! `muster conformance allocator DIR`: runs upstream's allocator test table, kept as data
//! (tests/conformance/README.md describes the format), through muster's allocator.

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use muster_alloc::{AllocError, AllocatedState, Allocator, Features, Outcome, SliceIndex};
use muster_cel::Env;
use muster_manifest::Object;
use serde_json::Value;

/// One case's verdict: `None` when it passed, or what differs.
pub fn run_case(path: &Path) -> (String, Option<String>) {
    let fallback = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match run(path) {
        Ok((name, diff)) => (name, diff),
        Err(e) => (fallback, Some(format!("cannot run the case: {e}"))),
    }
}

/// A case's inputs, parsed.
pub struct Case {
    pub name: String,
    pub features: Features,
    pub nodes: Vec<Node>,
    pub node_name: Option<String>,
    pub classes: Vec<DeviceClass>,
    pub slices: Vec<ResourceSlice>,
    pub claims: Vec<ResourceClaim>,
    /// Indexes into `claims` of the claims to allocate, in order.
    pub to_allocate: Vec<usize>,
    pub state: AllocatedState,
    pub expect: Value,
}

impl Case {
    /// One allocation call, as the scheduler makes it: an allocator for the cycle, then
    /// `allocate` for the node.
    pub fn execute(&self, env: &Env, index: &SliceIndex) -> Result<Outcome, AllocError> {
        let node =
            self.node_name.as_deref().and_then(|n| self.nodes.iter().find(|x| x.metadata.name.as_deref() == Some(n)));
        let claims: Vec<&ResourceClaim> = self.to_allocate.iter().map(|i| &self.claims[*i]).collect();
        Allocator::new(self.features, &self.state, &self.classes, index, env).allocate(node, &claims)
    }
}

/// Reads a case file.
pub fn load(path: &Path) -> anyhow::Result<Case> {
    let text = std::fs::read_to_string(path)?;
    let file = path.display().to_string();
    let m = muster_manifest::load_str_documents(&file, &text)
        .map_err(|d| anyhow::anyhow!("{}", d.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))?;
    let docs = muster_manifest::yaml::parse_stream(&text).map_err(|e| anyhow::anyhow!("{}: {}", e.pos, e.message))?;
    let case: Value = muster_manifest::de::from_node(&docs.last().ok_or_else(|| anyhow::anyhow!("empty file"))?.root)
        .map_err(|e| anyhow::anyhow!("{:?}", e))?;
    if case["kind"] != "AllocationCase" {
        anyhow::bail!("the last document is not an AllocationCase");
    }
    let name = case["metadata"]["name"].as_str().unwrap_or("").to_string();
    let spec = &case["spec"];
    let mut features = Features::default();
    for (k, v) in spec["features"].as_object().into_iter().flatten() {
        if !features.set(k, v.as_bool() == Some(true)) {
            anyhow::bail!("unknown feature {k}");
        }
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut classes: Vec<DeviceClass> = Vec::new();
    let mut slices: Vec<ResourceSlice> = Vec::new();
    let mut claims: Vec<ResourceClaim> = Vec::new();
    for l in m.objects {
        match l.object {
            Object::Node(n) => nodes.push(*n),
            Object::DeviceClass(c) => classes.push(*c),
            Object::ResourceSlice(s) => slices.push(*s),
            Object::ResourceClaim(c) => claims.push(*c),
            other => anyhow::bail!("unexpected {}", other.display_name()),
        }
    }
    let is_allocated = |c: &ResourceClaim| c.status.as_ref().and_then(|s| s.allocation.as_ref()).is_some();
    let state = AllocatedState::from_claims(claims.iter().filter(|c| is_allocated(c)), features);
    // Claims to allocate, in the order the case lists them; repeated names in document order.
    let mut pending: Vec<usize> = (0..claims.len()).filter(|i| !is_allocated(&claims[*i])).collect();
    let mut to_allocate = Vec::new();
    for n in spec["claims"].as_array().into_iter().flatten() {
        let n = n.as_str().unwrap_or("");
        let at = pending
            .iter()
            .position(|i| claims[*i].metadata.name.as_deref() == Some(n))
            .ok_or_else(|| anyhow::anyhow!("claim {n} not found"))?;
        to_allocate.push(pending.remove(at));
    }
    Ok(Case {
        name,
        features,
        nodes,
        node_name: spec["node"].as_str().map(str::to_string),
        classes,
        slices,
        claims,
        to_allocate,
        state,
        expect: spec["expect"].clone(),
    })
}

fn run(path: &Path) -> anyhow::Result<(String, Option<String>)> {
    let case = load(path)?;
    let env = Env::default();
    let index = SliceIndex::new(case.slices.clone());
    let got = case.execute(&env, &index);
    let name = case.name.clone();
    let expect = &case.expect;
    let diff = match (got, expect) {
        (Ok(Outcome::Allocated(results)), e) if e.get("allocations").is_some() => {
            let mut got = serde_json::to_value(&results)?;
            let mut want = e["allocations"].clone();
            normalize(&mut got);
            normalize(&mut want);
            (got != want).then(|| format!("allocations differ:\n    want {want}\n    got  {got}"))
        }
        (Ok(Outcome::Unsatisfiable), e) if e["unsatisfiable"] == true => None,
        (Err(err), e) if e.get("error").is_some() => {
            let want = e["error"].as_str().unwrap_or("");
            let got = err.to_string();
            (got != want && !same_meaning(want, &got))
                .then(|| format!("error differs:\n    want {want:?}\n    got  {got:?}"))
        }
        (got, e) => Some(format!("want {}, got {}", describe_expect(e), describe(&got))),
    };
    Ok((name, diff))
}

/// Errors whose text muster words differently from upstream on purpose, matched by meaning: the
/// same claim, request and cause. (Upstream's class lookup error quotes its lister's internals:
/// `could not retrieve device class class-a:  "not found" not found`.)
const SAME_MEANING: &[&str] = &["could not retrieve device class "];

fn same_meaning(want: &str, got: &str) -> bool {
    SAME_MEANING.iter().any(|marker| match (want.find(marker), got.find(marker)) {
        (Some(w), Some(g)) => {
            // Same claim/request context before the marker, same class name after it.
            let class = |s: &str, at: usize| s[at + marker.len()..].split(':').next().map(str::to_string);
            want[..w] == got[..g] && class(want, w) == class(got, g)
        }
        _ => false,
    })
}

fn describe_expect(e: &Value) -> String {
    if let Some(err) = e.get("error") {
        format!("error {err}")
    } else if e.get("allocations").is_some() {
        format!("allocations {}", e["allocations"])
    } else {
        "unsatisfiable".into()
    }
}

fn describe(got: &Result<Outcome, AllocError>) -> String {
    match got {
        Ok(Outcome::Allocated(r)) => format!("allocations {}", serde_json::to_value(r).unwrap_or_default()),
        Ok(Outcome::Unsatisfiable) => "unsatisfiable".into(),
        Err(e) => format!("error {:?}", e.to_string()),
    }
}

/// Drops nulls and empty lists and maps, which the two sides may spell differently, and replaces
/// generated share IDs by a marker (compared for presence only).
fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "shareID" && x.is_string() {
                    *x = Value::String("<generated>".into());
                }
                normalize(x);
            }
            m.retain(|_, x| {
                !(x.is_null() || x.as_array().is_some_and(Vec::is_empty) || x.as_object().is_some_and(|o| o.is_empty()))
            });
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// Runs every `*.yaml` case in `dir`; returns the report and whether all passed.
pub fn run_dir(dir: &Path) -> anyhow::Result<(String, usize, usize)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut out = String::new();
    let (mut passed, mut failed) = (0, 0);
    for f in &files {
        let (name, diff) = run_case(f);
        match diff {
            None => {
                passed += 1;
                out.push_str(&format!("PASS {name}\n"));
            }
            Some(d) => {
                failed += 1;
                out.push_str(&format!("FAIL {name}: {d}\n"));
            }
        }
    }
    out.push_str(&format!("{passed} passed, {failed} failed\n"));
    Ok((out, passed, failed))
}
