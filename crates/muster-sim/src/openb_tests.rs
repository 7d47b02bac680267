//! The openb adapter's tests: the mapping of node and pod rows, the rows left out, and hostile
//! input refused with its file, line, column and column name.

use super::*;

const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\nnode-a,96000,393216,2,G2\nnode-b,32000,262144,0,\n";

const POD_HEADER: &str =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

fn pods(rows: &str) -> Result<PodList, TraceError> {
    parse_pods("pods.csv", &format!("{POD_HEADER}{rows}"))
}

fn error(rows: &str) -> String {
    pods(rows).unwrap_err().to_string()
}

#[test]
fn a_node_row_is_a_node_and_a_slice_of_shareable_gpus() {
    let c = parse_nodes("nodes.csv", NODES).unwrap();
    assert_eq!(c.nodes.len(), 2);
    let (line, node) = &c.nodes[0];
    assert_eq!(*line, 2);
    let allocatable = node.status.as_ref().unwrap().allocatable.as_ref().unwrap();
    assert_eq!((allocatable["cpu"].0.as_str(), allocatable["memory"].0.as_str()), ("96000m", "393216Mi"));
    assert_eq!(allocatable["pods"].0, "110");
    assert_eq!(c.slices.len(), 1, "no slice for a node without GPUs");
    let spec = &c.slices[0].1.spec;
    assert_eq!((spec.driver.as_str(), spec.node_name.as_deref()), (DRIVER, Some("node-a")));
    let devices = spec.devices.as_ref().unwrap();
    assert_eq!(devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["gpu-0", "gpu-1"]);
    let d = &devices[1];
    assert_eq!(d.allow_multiple_allocations, Some(true));
    assert_eq!(d.attributes.as_ref().unwrap()["model"].string.as_deref(), Some("G2"));
    assert_eq!(d.capacity.as_ref().unwrap()[SHARE_CAPACITY].value.0, "1000");
    assert_eq!(c.device_class.metadata.name.as_deref(), Some(DEVICE_CLASS));
}

#[test]
fn node_columns_are_found_by_name() {
    let c = parse_nodes("nodes.csv", "model,gpu,sn,memory_mib,cpu_milli\nT4,1,n1,1024,4000\n").unwrap();
    assert_eq!(c.slices[0].1.spec.devices.as_ref().unwrap().len(), 1);
    assert_eq!(c.nodes[0].1.metadata.name.as_deref(), Some("n1"));
}

#[test]
fn bad_node_rows_are_refused_where_they_are() {
    let bad = |text: &str| parse_nodes("nodes.csv", text).err().unwrap().to_string();
    let header = "sn,cpu_milli,memory_mib,gpu,model\n";
    assert_eq!(
        bad(&format!("{header}n1,1000,1024,2,\n")),
        "nodes.csv:2:16: model: missing: the node has 2 GPUs, of which model?"
    );
    assert_eq!(bad(&format!("{header}n1,-1000,1024,0,\n")), "nodes.csv:2:4: cpu_milli: -1000 is negative");
    assert_eq!(bad(&format!("{header}n1,1000,1024,129,A\n")), "nodes.csv:2:14: gpu: 129 is too large (at most 128)");
    assert_eq!(
        bad(&format!("{header}N_1,1000,1024,0,\n")).split(": expected").next(),
        Some("nodes.csv:2:1: sn: \"N_1\"")
    );
    assert_eq!(bad(&format!("{header}n1,1,1,0,\nn1,1,1,0,\n")), "nodes.csv:3:1: sn: \"n1\" is also on line 2");
    assert!(bad(&format!("{header}n1,1,1,1,\"V100\"\n")).contains("quoted"));
    assert!(bad(&format!("{header}n1,1,1,1,A B\n")).starts_with("nodes.csv:2:10: model: \"A B\" is not a GPU model"));
    assert!(bad("sn,cpu_milli,memory_mib,gpu\n").starts_with("nodes.csv:1:1: the header has no column \"model\""));
}

#[test]
fn pod_rows_map_to_jobs() {
    let list = pods(
        "p-whole,12000,16384,1,1000,,LS,Running,100,5100,100\n\
         p-share,6000,12288,1,460,,BE,Running,160,400,200\n\
         p-multi,88000,327680,8,1000,V100M16|V100M32,Burstable,Succeeded,190,1190,190\n\
         p-cpu,4000,0,0,0,,LS,Running,300,360,301\n",
    )
    .unwrap();
    assert_eq!(list.skipped, Skipped::default());
    let [whole, share, multi, cpu] = &list.trace.jobs[..] else { panic!("{:?}", list.trace.jobs) };
    assert_eq!((whole.arrival, whole.duration, whole.class.as_str()), (0, 5_000_000, "gpu-whole"));
    assert_eq!((whole.gpus_per_pod, whole.device_class.as_deref()), (1, Some(DEVICE_CLASS)));
    assert_eq!((whole.cpu.as_deref(), whole.memory.as_deref()), (Some("12000m"), Some("16384Mi")));
    assert!(whole.capacity_requests.is_empty() && whole.device_selector.is_none());
    assert_eq!((share.arrival, share.duration, share.class.as_str()), (60_000, 200_000, "gpu-share"));
    assert_eq!(share.capacity_requests, [(SHARE_CAPACITY.to_string(), "460".to_string())]);
    assert_eq!((multi.gpus_per_pod, multi.class.as_str()), (8, "gpu-multi"));
    assert_eq!(
        multi.device_selector.as_deref(),
        Some(r#"device.attributes["gpu.openb.alibaba"].model in ["V100M16", "V100M32"]"#)
    );
    assert_eq!((cpu.gpus_per_pod, cpu.device_class.as_deref(), cpu.class.as_str()), (0, None, "cpu-only"));
    assert_eq!((cpu.memory.as_deref(), cpu.duration), (None, 59_000));
    assert!(list.trace.jobs.iter().all(|j| j.pods == 1 && !j.gang));
}

#[test]
fn rows_that_cannot_run_are_counted_not_dropped_silently() {
    let list = pods(
        "p-pending,1000,1024,1,1000,,BE,Pending,50,60,\n\
         p-running,1000,1024,1,1000,,LS,Running,70,,80\n\
         p-instant,1000,1024,1,1000,,LS,Failed,90,95,95\n\
         p-ran,1000,1024,1,1000,nan,LS,Succeeded,100,200,100\n",
    )
    .unwrap();
    assert_eq!(list.skipped, Skipped { never_scheduled: 1, never_deleted: 1, zero_duration: 1 });
    assert_eq!(list.trace.jobs.len(), 1);
    assert_eq!(list.trace.jobs[0].arrival, 0, "rebased on the first simulated arrival");
    assert_eq!(
        list.skipped.summary().unwrap(),
        "3 rows not simulated: 1 never scheduled (no scheduled_time), 1 never deleted (no deletion_time, so no \
         duration), 1 ran for 0 s (deletion_time = scheduled_time)"
    );
}

#[test]
fn hostile_pod_rows_are_refused_with_file_line_and_column() {
    let row = |r: &str| error(&format!("ok,1000,1024,0,0,,LS,Running,1,2,1\n{r}\n"));
    assert_eq!(row("p,1000,1024,1,1000,,LS"), "pods.csv:3:23: pod_phase: missing (the row has 7 cells, the header 11)");
    assert_eq!(row("p,1000,1024,-1,1000,,LS,Running,1,2,1"), "pods.csv:3:13: num_gpu: -1 is negative");
    assert_eq!(row("p,x,1024,1,1000,,LS,Running,1,2,1"), "pods.csv:3:3: cpu_milli: \"x\" is not a whole number");
    assert_eq!(row("p,,1024,1,1000,,LS,Running,1,2,1"), "pods.csv:3:3: cpu_milli: missing: expected a whole number");
    assert_eq!(row("p,1000,1e9,1,1000,,LS,Running,1,2,1"), "pods.csv:3:8: memory_mib: \"1e9\" is not a whole number");
}

#[test]
fn times_and_shares_are_checked() {
    let row = |r: &str| error(&format!("{r}\n"));
    assert_eq!(
        row("p,1000,1024,1,1000,,LS,Running,1,5,8"),
        "pods.csv:2:34: deletion_time: 5 is before scheduled_time 8"
    );
    assert_eq!(
        row("p,1000,1024,1,1000,,LS,Running,10,50,8"),
        "pods.csv:2:38: scheduled_time: 8 is before creation_time 10"
    );
    assert_eq!(
        row("p,1000,1024,1,1000,,LS,Running,99999999999999999999,1,1"),
        "pods.csv:2:32: creation_time: 99999999999999999999 is too large (at most 1000000000000)"
    );
    assert_eq!(
        row("p,1000,1024,2,500,,LS,Running,1,2,1"),
        "pods.csv:2:15: gpu_milli: 500: a share is of one GPU (num_gpu 1); expected 1000"
    );
    assert_eq!(row("p,1000,1024,0,500,,LS,Running,1,2,1"), "pods.csv:2:15: gpu_milli: 500 with num_gpu 0: expected 0");
    assert_eq!(
        row("p,1000,1024,1,0,,LS,Running,1,2,1"),
        "pods.csv:2:15: gpu_milli: 0 with num_gpu 1: expected 1 to 1000"
    );
    assert_eq!(
        row("p,1000,1024,1,1001,,LS,Running,1,2,1"),
        "pods.csv:2:15: gpu_milli: 1001 is too large (at most 1000)"
    );
    assert!(
        row("p,1000,1024,1,1000,A||B,LS,Running,1,2,1").starts_with("pods.csv:2:20: gpu_spec: \"\" is not a GPU model")
    );
    assert!(row("p,1000,1024,1,1000,A'],LS,Running,1,2,1").starts_with("pods.csv:2:20: gpu_spec: \"A']\" is not"));
    assert!(row("Pod_1,1000,1024,1,1000,,LS,Running,1,2,1").starts_with("pods.csv:2:1: name: \"Pod_1\""));
    assert_eq!(
        error("p,1,1,0,0,,LS,Running,1,2,1\np,1,1,0,0,,LS,Running,1,2,1\n"),
        "pods.csv:3:1: name: \"p\" is also on line 2"
    );
    let missing = parse_pods("pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n").unwrap_err();
    assert!(missing.to_string().starts_with("pods.csv:1:1: the header has no column \"creation_time\""), "{missing}");
}

#[test]
fn huge_times_still_fit() {
    let list = pods("p,1,1,0,0,,LS,Running,0,1000000000000,0\n").unwrap();
    assert_eq!(list.trace.jobs[0].duration, 1_000_000_000_000_000);
}

#[test]
fn a_pod_list_is_recognised_by_its_header() {
    assert!(is_pod_list(POD_HEADER));
    assert!(is_pod_list("\u{feff}\ncreation_time,num_gpu,name\n"));
    assert!(!is_pod_list(NODES));
    assert!(!is_pod_list("apiVersion: muster.dev/v1alpha1\nkind: Trace\n"));
    assert!(!is_pod_list(""));
}

#[test]
fn optional_columns_may_be_absent() {
    let list = parse_pods(
        "pods.csv",
        "creation_time,deletion_time,scheduled_time,name,cpu_milli,memory_mib,num_gpu,gpu_milli\n5,9,6,p,1,1,1,250\n",
    )
    .unwrap();
    assert_eq!(list.trace.jobs[0].capacity_requests, [(SHARE_CAPACITY.to_string(), "250".to_string())]);
    assert_eq!(list.trace.jobs[0].duration, 3_000);
}
