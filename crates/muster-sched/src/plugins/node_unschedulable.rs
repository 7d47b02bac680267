//! NodeUnschedulable: cordoned nodes (`spec.unschedulable`) take only pods that tolerate the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint.

use k8s_openapi::api::core::v1::Taint;
use muster_api::taints::{NO_SCHEDULE, UNSCHEDULABLE_TAINT_KEY, tolerated_by};

use crate::cluster::NodeInfo;
use crate::framework::{CycleState, Rejection};

pub const NAME: &str = "NodeUnschedulable";
pub const REASON: &str = "node(s) were unschedulable";

pub fn filter(state: &CycleState<'_>, node: &NodeInfo) -> Result<(), Rejection> {
    if !node.unschedulable {
        return Ok(());
    }
    let taint = Taint { key: UNSCHEDULABLE_TAINT_KEY.into(), effect: NO_SCHEDULE.into(), ..Default::default() };
    if tolerated_by(state.tolerations, &taint) { Ok(()) } else { Err(Rejection::new(NAME, true, REASON)) }
}
