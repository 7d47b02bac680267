//! `muster bench output`: renders one plan as the table, JSON and YAML, each timed, at CLAIMS
//! claims (scheduler_perf's SchedulingWithResourceClaimTemplate shape, planned through the same
//! World and engine as `muster plan`): every output must stay linear in the objects it shows.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::PodResourceClaim;
use muster_manifest::{Loaded, Manifests, Object, Origin, Pos};
use muster_sched::{SchedulerConfig, SchedulerNames};

use super::{basic_node, basic_pod, one_device_claim_spec, perf_class, perf_slice};
use crate::{memory, output};

/// The plan-dra input as loaded manifests: NODES nodes with 8 devices each, CLAIMS pods with one
/// template claim each.
fn manifests(claims: usize) -> anyhow::Result<Manifests> {
    let driver = "test-driver.cdi.k8s.io";
    let origin = Origin { file: Arc::from("<bench>"), pos: Pos { line: 1, col: 1 } };
    let mut objects = Vec::new();
    let mut push = |object: Object| objects.push(Loaded { object, origin: origin.clone() });
    for i in 0..claims.div_ceil(8) {
        let node = basic_node(i);
        push(Object::ResourceSlice(Box::new(perf_slice(
            &node,
            driver,
            8,
            |d| serde_json::json!({"name": format!("device-{d}")}),
        ))));
        push(Object::Node(Box::new(node)));
    }
    push(Object::DeviceClass(Box::new(perf_class(driver))));
    push(Object::ResourceClaimTemplate(Box::new(serde_json::from_value(serde_json::json!({
        "metadata": {"name": "one-device", "namespace": "sched-basic"},
        "spec": {"spec": one_device_claim_spec()}
    }))?)));
    for i in 0..claims {
        let mut p = basic_pod(i, 1);
        let spec = p.spec.as_mut().expect("generated pods have a spec");
        spec.resource_claims = Some(vec![PodResourceClaim {
            name: "gpu".into(),
            resource_claim_name: None,
            resource_claim_template_name: Some("one-device".into()),
        }]);
        push(Object::Pod(Box::new(p)));
    }
    Ok(Manifests { objects, ..Manifests::default() })
}

pub fn output(claims: usize) -> anyhow::Result<String> {
    let mut world = memory::World::from_manifests(manifests(claims)?, &SchedulerNames::default())
        .map_err(|d| anyhow::anyhow!("{} model errors, first: {}", d.len(), d[0]))?;
    let dra = muster_sched::DraContext {
        index: muster_alloc::SliceIndex::new(std::mem::take(&mut world.slices)),
        classes: world.device_classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let t = Instant::now();
    let mut engine =
        muster_sched::Engine::new(std::mem::take(&mut world.cluster), SchedulerConfig::default(), Some(&dra));
    let plan = engine.run_until_idle(0);
    world.cluster = engine.into_cluster();
    let planned = t.elapsed();
    world.slices = dra.index.into_slices();
    let t = Instant::now();
    let table = output::table(&world, &plan);
    let table_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let json = serde_json::to_string_pretty(&output::json(&world, &plan))?;
    let json_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let groups = muster_controllers::podgroup::GroupStatusOptions { now: None, gang_wait_timeout_seconds: 300 };
    let yaml = output::yaml(&world, &plan, &groups)?;
    let yaml_s = t.elapsed().as_secs_f64();
    let mib = |s: &str| s.len() as f64 / (1 << 20) as f64;
    let plan_s = planned.as_secs_f64();
    // What a user waits for: the plan and its rendering (loading is the same for every format).
    let whole = |render: f64| (plan_s + render) / (plan_s + table_s);
    Ok(format!(
        "output: {claims} pods with one claim each, {} placed (plan {plan_s:.3} s)\n  table: {table_s:.3} s ({:.1} MiB)\n  json:  {json_s:.3} s ({:.1} MiB); plan + json = {:.2}x plan + table\n  yaml:  {yaml_s:.3} s ({:.1} MiB); plan + yaml = {:.2}x plan + table\n",
        plan.placements.len(),
        mib(&table),
        mib(&json),
        whole(json_s),
        mib(&yaml),
        whole(yaml_s),
    ))
}
