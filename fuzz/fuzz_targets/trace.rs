//! muster's simulation trace format on any text: parsed strictly (jobs, cluster events, device
//! events with DeviceTaintRules, inference endpoints, HPA settings). Errors are fine; a panic is
//! not. (The simulation of what parses is fuzzed by `cargo test`, `crates/muster/src/fuzz.rs`.)
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = muster_sim::Trace::parse("fuzz-trace.yaml", &text);
});
