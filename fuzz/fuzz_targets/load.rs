//! The manifest loader on any text: YAML or JSON, one document or many, any kind. It may refuse
//! the input with diagnostics; it may not panic, hang or run out of memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = muster_manifest::load_str("fuzz.yaml", &text);
});
