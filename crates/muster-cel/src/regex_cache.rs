//! Compiled regular expressions, shared by every evaluation (RE2 syntax, as CEL's `matches`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Patterns longer than this are refused rather than compiled.
const MAX_PATTERN_LEN: usize = 4096;

#[derive(Default)]
pub struct RegexCache {
    compiled: Mutex<HashMap<String, Result<Arc<regex::Regex>, String>>>,
}

impl RegexCache {
    pub fn get(&self, pattern: &str) -> Result<Arc<regex::Regex>, String> {
        if pattern.len() > MAX_PATTERN_LEN {
            return Err(format!("regular expression longer than {MAX_PATTERN_LEN} bytes"));
        }
        let mut map = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = map.get(pattern) {
            return r.clone();
        }
        let r = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map(Arc::new)
            .map_err(|e| format!("invalid regular expression {pattern:?}: {e}"));
        map.insert(pattern.to_string(), r.clone());
        r
    }
}
