//! The inference endpoints' part of the report: per endpoint its cold starts (count and
//! percentiles, in seconds), the most replicas it had and those at the end.

use serde::Serialize;

use super::{Percentiles, is_default};
use crate::trace::Millis;

/// One endpoint at the end, as the world counted it.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointOutcome {
    pub name: String,
    pub namespace: String,
    pub class: String,
    /// Each cold start's length.
    pub cold_starts: Vec<Millis>,
    pub peak_replicas: u32,
    pub replicas: u32,
    pub serving: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointLine {
    pub name: String,
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
    pub class: String,
    pub cold_starts: usize,
    pub cold_start_seconds: Percentiles,
    pub peak_replicas: u32,
    /// Replicas at the end, and those serving.
    pub replicas: u32,
    pub serving: u32,
}

impl EndpointLine {
    pub fn of(e: EndpointOutcome) -> EndpointLine {
        let mut cold = e.cold_starts;
        EndpointLine {
            cold_starts: cold.len(),
            cold_start_seconds: Percentiles::of(&mut cold),
            name: e.name,
            namespace: e.namespace,
            class: e.class,
            peak_replicas: e.peak_replicas,
            replicas: e.replicas,
            serving: e.serving,
        }
    }
}

/// Every endpoint's cold starts: their count and percentiles.
pub fn cold_starts(endpoints: &[EndpointOutcome]) -> (usize, Percentiles) {
    let mut all: Vec<Millis> = endpoints.iter().flat_map(|e| e.cold_starts.iter().copied()).collect();
    (all.len(), Percentiles::of(&mut all))
}
