//! Mutation fuzzing of the input edge: the repository's example manifests, mutated (bytes
//! flipped, text cut, lines duplicated, deleted or re-indented, YAML punctuation inserted), go
//! through the loader, `check` and `convert`; none may panic, and `convert` keeps its promises
//! (converting its output changes nothing; with nothing named, `check` passes its output).
//! Bounded so that it runs in seconds.

use proptest::prelude::*;

use crate::check::{self, Source};
use crate::convert;

/// The seed corpus: every example and test input of the repository (small files).
const SEEDS: &[&str] = &[
    include_str!("../../../examples/quickstart/nodes.yaml"),
    include_str!("../../../examples/quickstart/workloads.yaml"),
    include_str!("../../../examples/gpu-devices/classes.yaml"),
    include_str!("../../../examples/gpu-gang/job.yaml"),
    include_str!("../../../examples/gpu-training/job.yaml"),
    include_str!("../../../examples/mig/cluster.yaml"),
    include_str!("../../../examples/mig/pods.yaml"),
    include_str!("../../../tests/check/cel-errors.yaml"),
    include_str!("../../../tests/check/old-forms.yaml"),
    include_str!("../../../tests/check/references.yaml"),
    include_str!("../../../tests/check/seed-examples.yaml"),
    include_str!("../../../tests/check/unknown-attributes.yaml"),
    include_str!("../../../tests/bad-input/13-bad-list-item.json"),
    include_str!("../../../tests/bad-input/14-wrong-shape.yaml"),
    include_str!("../../../tests/convert/beta-slices.yaml"),
    include_str!("../../../tests/convert/classic-dra.yaml"),
    include_str!("../../../tests/convert/valid-selectors.yaml"),
    include_str!("../../../tests/convert/workload-v1alpha2.yaml"),
    include_str!("../../../tests/bad-input/25-structure.yaml"),
    include_str!("../../../tests/bad-input/25-storage.yaml"),
    include_str!("../../../tests/check/node-allocatable-1-36.yaml"),
    include_str!("../../../tests/scenarios/device-topology-clique/cluster.yaml"),
    include_str!("../../../tests/scenarios/volumes-training/cluster.yaml"),
    include_str!("../../../tests/scenarios/volumes-capacity/cluster.yaml"),
];

/// The sim's seed corpus: every trace of `tests/sim`, run over one small cluster.
const TRACES: &[&str] = &[
    include_str!("../../../tests/sim/device-taint-rule/trace.yaml"),
    include_str!("../../../tests/sim/drain/trace.yaml"),
    include_str!("../../../tests/sim/gang-waits/trace.yaml"),
    include_str!("../../../tests/sim/gpu-failure/trace.yaml"),
    include_str!("../../../tests/sim/packing-least/trace.yaml"),
    include_str!("../../../tests/sim/preemption/trace.yaml"),
    include_str!("../../../tests/sim/racks/trace.yaml"),
    include_str!("../../../tests/sim/scale-to-zero/trace.yaml"),
];
const SIM_CLUSTER: &str = include_str!("../../../tests/sim/gpu-failure/cluster.yaml");

/// Text that YAML gives a meaning to, inserted at random places.
const PUNCTUATION: &[&str] = &[
    ":",
    "- ",
    "? ",
    "&a ",
    "*a",
    "<<: *a",
    "<<: [*a, *a]",
    "{",
    "}",
    "[",
    "]",
    "'",
    "\"",
    "|",
    ">-",
    "#",
    "---\n",
    "...\n",
    "!!str ",
    "!!map ",
    "%YAML 1.2\n",
    "\t",
    "\0",
    "\u{85}",
    "\u{2028}",
    "\u{feff}",
    "~",
    "null",
    "{}",
    "[]",
    "\"\\u0000\"",
    "apiVersion: v1\n",
    "kind: List\n",
    "items:\n",
    "spec:\n",
    "spec: 3\n",
    "metadata:\n",
];

#[derive(Clone, Debug)]
enum Mutation {
    FlipByte { at: usize, xor: u8 },
    Truncate { at: usize },
    DuplicateLine { line: usize },
    DeleteLine { line: usize },
    Reindent { line: usize, spaces: usize },
    Insert { at: usize, what: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, xor)| Mutation::FlipByte { at, xor }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        any::<usize>().prop_map(|line| Mutation::DeleteLine { line }),
        (any::<usize>(), 0..10usize).prop_map(|(line, spaces)| Mutation::Reindent { line, spaces }),
        (any::<usize>(), any::<usize>()).prop_map(|(at, what)| Mutation::Insert { at, what }),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for m in mutations {
        let len = bytes.len().max(1);
        match *m {
            Mutation::FlipByte { at, xor } => {
                if !bytes.is_empty() {
                    bytes[at % len] ^= xor;
                }
            }
            Mutation::Truncate { at } => bytes.truncate(at % len),
            Mutation::Insert { at, what } => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, PUNCTUATION[what % PUNCTUATION.len()].bytes());
            }
            Mutation::DuplicateLine { line } | Mutation::DeleteLine { line } | Mutation::Reindent { line, .. } => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
                if lines.is_empty() {
                    continue;
                }
                let i = line % lines.len();
                match *m {
                    Mutation::DuplicateLine { .. } => {
                        let l = lines[i].clone();
                        lines.insert(i, l);
                    }
                    Mutation::DeleteLine { .. } => {
                        lines.remove(i);
                    }
                    Mutation::Reindent { spaces, .. } => {
                        lines[i] = format!("{}{}", " ".repeat(spaces), lines[i].trim_start_matches(' '));
                    }
                    _ => unreachable!("matched above"),
                }
                bytes = lines.concat().into_bytes();
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Everything the input edge does with a text: load, check (both renderings), convert (and load
/// what it writes).
fn read_every_way(text: &str) {
    if let Ok(manifests) = muster_manifest::load_str("fuzz.yaml", text) {
        plan_every_way(manifests);
    }
    let sources = vec![Source { name: "fuzz.yaml".into(), text: text.to_string() }];
    let findings = check::check(&sources);
    let _ = check::human(&sources, &findings);
    let _ = check::json(&sources, &findings);
    if let Ok(converted) = convert::convert(&sources) {
        for (_, out) in &converted.texts {
            let _ = muster_manifest::load_str("converted.yaml", out);
        }
        // Converting what convert printed changes nothing; with nothing named, check passes it.
        let printed = convert::printed(&sources, &converted);
        let again = vec![Source { name: "fuzz.yaml".into(), text: printed.clone() }];
        if converted.refused.is_empty() {
            let errors: Vec<_> =
                check::check(&again).into_iter().filter(|f| f.severity == check::Severity::Error).collect();
            assert!(errors.is_empty(), "convert named nothing, check finds {errors:?} in\n{printed}");
        }
        let twice = convert::convert(&again).expect("convert's output is YAML");
        assert_eq!(convert::printed(&again, &twice), printed, "converting the output changed it");
    }
}

/// A plan of what loaded, rendered every way; the YAML it writes reads back.
fn plan_every_way(manifests: muster_manifest::Manifests) {
    let Ok(mut world) = crate::memory::World::from_manifests(manifests, &muster_sched::SchedulerNames::default())
    else {
        return;
    };
    let dra = muster_sched::DraContext {
        index: muster_alloc::SliceIndex::new(world.slices.clone()),
        classes: world.device_classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let plan =
        muster_sched::Scheduler::with_dra(&mut world.cluster, muster_sched::SchedulerConfig::default(), &dra).plan();
    let _ = crate::output::table(&world, &plan);
    let _ = serde_json::to_string(&crate::output::json(&world, &plan));
    let groups = muster_controllers::podgroup::GroupStatusOptions { now: None, gang_wait_timeout_seconds: 300 };
    let yaml = crate::output::yaml(&world, &plan, &groups).expect("the plan renders as YAML");
    if let Err(e) = muster_manifest::load_str("plan.yaml", &yaml) {
        panic!("-o yaml does not read back: {e:?}\n{yaml}");
    }
}

/// A trace read, and when it reads, simulated for two days over a small cluster: an error is
/// fine, a panic is not. Traces of more than 2,000 pods or replicas are only read (a trace may ask
/// for any number; the fuzzer's time is bounded).
fn simulate_every_way(text: &str) {
    let Ok(trace) = muster_sim::Trace::parse("fuzz-trace.yaml", text) else { return };
    let pods: u64 = trace.jobs.iter().map(|j| u64::from(j.pods)).sum::<u64>()
        + trace.endpoints.iter().map(|e| u64::from(e.max_replicas)).sum::<u64>();
    if pods > 2_000 {
        return;
    }
    let manifests = muster_manifest::load_str("cluster.yaml", SIM_CLUSTER).expect("the cluster loads");
    let published: Vec<_> = manifests
        .objects
        .iter()
        .filter_map(|o| match &o.object {
            muster_manifest::Object::ResourceSlice(s) => Some((**s).clone()),
            _ => None,
        })
        .collect();
    let names = muster_sched::SchedulerNames::default();
    let mut world = crate::memory::World::from_manifests(manifests, &names).expect("the cluster builds");
    let options = muster_sim::Options {
        until: Some(2 * 86_400_000),
        devices: 8,
        default_class: Some("gpu.example.com".into()),
        inventory: muster_sim::fragmentation::Inventory::from_slices(&world.slices),
        ..muster_sim::Options::default()
    };
    let inputs =
        muster_sim::devices::DeviceInputs::new(published, Vec::new(), std::mem::take(&mut world.device_classes), true);
    let cluster = std::mem::take(&mut world.cluster);
    if let Ok(report) =
        muster_sim::run(cluster, &muster_sched::SchedulerConfig::default(), inputs, trace, options, None)
    {
        let _ = (report.json(), report.text(), muster_sim::html::render(&report, "fuzz"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MUSTER_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).map_or(128, |n: u32| n / 4),
        max_shrink_iters: 1000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_traces_never_panic(seed in 0..TRACES.len(), mutations in prop::collection::vec(mutation(), 1..6)) {
        simulate_every_way(&apply(TRACES[seed], &mutations));
    }
}

proptest! {
    // MUSTER_FUZZ_CASES=100000 for a longer local run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MUSTER_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        max_shrink_iters: 1000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_examples_never_panic(seed in 0..SEEDS.len(), mutations in prop::collection::vec(mutation(), 1..6)) {
        read_every_way(&apply(SEEDS[seed], &mutations));
    }
}

#[test]
fn the_seeds_read_every_way() {
    for s in SEEDS {
        read_every_way(s);
    }
    for t in TRACES {
        assert!(muster_sim::Trace::parse("seed.yaml", t).is_ok());
        simulate_every_way(t);
    }
}
