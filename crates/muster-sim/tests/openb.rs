//! openb traces through the simulation: the cluster an openb node list builds, pods asking for a
//! part of a GPU sharing one (never beyond its capacity), model constraints honoured, and the
//! utilization counting a share as the part of the GPU it holds.

use muster_sched::{Cluster, Engine, SchedulerConfig, SchedulerNames};
use muster_sim::openb::{self, OpenbCluster};
use muster_sim::usage::shared_capacity;
use muster_sim::{Options, Report, Sim};

/// Runs `pods` on the cluster of `nodes`, checking the world at every step; returns the report
/// and the most claims that held shares of one device at once.
fn simulate(nodes: &str, pods: &str) -> (Report, usize) {
    let OpenbCluster { nodes, slices, device_class } = openb::parse_nodes("nodes.csv", nodes).unwrap();
    let slices: Vec<_> = slices.into_iter().map(|(_, s)| s).collect();
    let classes = vec![device_class];
    let nodes = nodes.into_iter().map(|(_, n)| n).collect();
    let c = Cluster::build(nodes, Vec::<muster_sched::StoredPod>::new(), &[], &SchedulerNames::default()).unwrap();
    let ctx = muster_sched::DraContext {
        index: muster_alloc::SliceIndex::new(slices.clone()),
        classes: classes.clone(),
        env: muster_cel::Env::default(),
        features: muster_alloc::Features::kubernetes_1_37(),
    };
    let engine = Engine::new(c, SchedulerConfig::default(), Some(&ctx));
    let devices = slices.iter().map(|s| s.spec.devices.as_ref().map_or(0, Vec::len) as u64).sum();
    let options = Options { devices, shared_capacity: shared_capacity(&slices), ..Options::default() };
    let trace = openb::parse_pods("pods.csv", pods).unwrap().trace;
    let mut sim = Sim::new(engine, trace, options);
    let mut most = 0;
    while sim.step().unwrap() {
        sim.check().unwrap_or_else(|e| panic!("at {} ms: {e}", sim.now()));
        most = most.max(shares_on_one_device(&sim));
    }
    (sim.report(), most)
}

/// The most bound pods' claims holding a share of the same device.
fn shares_on_one_device(sim: &Sim<'_, '_>) -> usize {
    let c = sim.engine().cluster();
    let mut by_device = std::collections::HashMap::<(String, String), usize>::new();
    let claims: std::collections::BTreeSet<_> = c
        .pods
        .iter()
        .filter(|p| p.state.on_node().is_some())
        .flat_map(|p| p.claims.iter().flatten().copied())
        .collect();
    for claim in claims {
        let status = c.claims[claim].claim.status.as_ref();
        let results = status.and_then(|s| s.allocation.as_ref()).and_then(|a| a.devices.as_ref());
        for r in results.and_then(|d| d.results.as_ref()).into_iter().flatten() {
            if r.share_id.is_some() {
                *by_device.entry((r.pool.clone(), r.device.clone())).or_default() += 1;
            }
        }
    }
    by_device.into_values().max().unwrap_or(0)
}

const HEADER: &str =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

fn job<'r>(report: &'r Report, name: &str) -> &'r muster_sim::report::JobLine {
    report.jobs.iter().find(|j| j.name == name).unwrap()
}

/// Two halves of the one GPU run together and use it fully; a whole GPU waits for both to end.
#[test]
fn halves_share_a_gpu_and_a_whole_one_waits_for_them() {
    let nodes = "sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,1,T4\n";
    let pods = format!(
        "{HEADER}a,1000,1024,1,500,,LS,Running,0,3600,0\nb,1000,1024,1,500,,LS,Running,0,3600,0\n\
         c,1000,1024,1,1000,,LS,Running,60,3660,60\n"
    );
    let (report, most) = simulate(nodes, &pods);
    assert_eq!(most, 2, "the halves share the device");
    assert_eq!((job(&report, "a").start, job(&report, "b").start), (Some(0.0), Some(0.0)));
    assert_eq!(job(&report, "c").start, Some(3600.0), "the whole GPU waits for the shares to end");
    assert_eq!(report.summary.finished, 3);
    assert_eq!(report.summary.gpu_utilization, 1.0, "two halves for an hour, then a whole GPU for an hour");
}

/// Shares never exceed a GPU: 600 + 500 > 1000, so the second waits.
#[test]
fn shares_never_exceed_the_gpu() {
    let nodes = "sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,1,T4\n";
    let pods = format!("{HEADER}a,1,1,1,600,,LS,Running,0,100,0\nb,1,1,1,500,,LS,Running,0,100,0\n");
    let (report, most) = simulate(nodes, &pods);
    assert_eq!(most, 1);
    assert_eq!(job(&report, "b").start, Some(100.0));
    assert_eq!(report.summary.gpu_utilization, 0.55, "(600 + 500) milli-GPU for 100 s each over 200 s");
}

/// A pod limited to some models runs only on nodes of those models, and waits when they are full.
#[test]
fn gpu_spec_limits_the_models() {
    let nodes = "sn,cpu_milli,memory_mib,gpu,model\nn-g2,32000,65536,2,G2\nn-t4,32000,65536,2,T4\n";
    let pods = format!(
        "{HEADER}a,1,1,2,1000,T4,LS,Running,0,100,0\nb,1,1,1,1000,T4|V100M32,LS,Running,0,100,0\n\
         c,1,1,1,1000,,LS,Running,0,100,0\n"
    );
    let (report, _) = simulate(nodes, &pods);
    assert_eq!(job(&report, "a").nodes, ["n-t4"]);
    assert_eq!((job(&report, "b").start, job(&report, "b").nodes.as_slice()), (Some(100.0), &["n-t4".to_string()][..]));
    assert_eq!(job(&report, "c").nodes, ["n-g2"]);
}

/// The sample in `examples/sim-openb` runs to the end with every check holding, and shares GPUs.
#[test]
fn the_example_runs_and_shares_gpus() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sim-openb/");
    let read = |f: &str| std::fs::read_to_string(format!("{root}{f}")).unwrap();
    let (report, most) = simulate(&read("nodes.csv"), &read("pods.csv"));
    assert_eq!(report.summary.jobs, 195);
    assert_eq!(report.summary.finished, 195);
    assert!(most >= 2, "some GPU holds two shares at once");
}

mod random {
    use proptest::prelude::*;

    use super::{HEADER, simulate};

    /// (GPUs, model index) of a node.
    type NodeShape = (u64, usize);
    /// (arrival s, duration s, GPUs, milli of one GPU, allowed model index or any).
    type PodShape = (u64, u64, u64, u64, Option<usize>);

    const MODELS: [&str; 2] = ["A", "B"];

    fn pod() -> impl Strategy<Value = PodShape> {
        let gpus =
            prop_oneof![Just((0u64, 0u64)), (1u64..1000).prop_map(|m| (1, m)), (1u64..5).prop_map(|n| (n, 1000))];
        (0u64..600, 1u64..600, gpus, prop::option::of(0usize..2)).prop_map(|(a, d, (n, m), s)| (a, d, n, m, s))
    }

    fn csv(nodes: &[NodeShape], pods: &[PodShape]) -> (String, String) {
        let mut n = String::from("sn,cpu_milli,memory_mib,gpu,model\n");
        for (i, (gpus, model)) in nodes.iter().enumerate() {
            n.push_str(&format!("n{i},64000,65536,{gpus},{}\n", MODELS[*model]));
        }
        let mut p = String::from(HEADER);
        for (i, (arrival, duration, gpus, milli, spec)) in pods.iter().enumerate() {
            let spec = spec.map_or("", |s| MODELS[s]);
            let end = arrival + duration;
            p.push_str(&format!("p{i},1000,1024,{gpus},{milli},{spec},LS,Running,{arrival},{end},{arrival}\n"));
        }
        (n, p)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Shares never exceed a GPU and no device is held whole twice (checked at every step);
        /// run to the end, every pod that fits a node of an allowed model ran.
        #[test]
        fn shares_stay_within_gpus_and_what_fits_runs(
            nodes in prop::collection::vec((1u64..5, 0usize..2), 1..4),
            pods in prop::collection::vec(pod(), 1..12),
        ) {
            let (n, p) = csv(&nodes, &pods);
            let (report, _) = simulate(&n, &p);
            prop_assert!(report.summary.gpu_utilization <= 1.0);
            for (i, (_, _, gpus, _, spec)) in pods.iter().enumerate() {
                let fits = *gpus == 0 || nodes.iter().any(|(g, m)| g >= gpus && spec.is_none_or(|s| s == *m));
                let job = &report.jobs[i];
                prop_assert_eq!(job.state == "finished", fits, "p{}: {:?} ({:?})", i, job.state, job.reason);
            }
        }
    }
}
