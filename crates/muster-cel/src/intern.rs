//! Attribute and capacity names interned into small integers, so that looking a name up on a
//! device compares integers in one contiguous array instead of chasing and comparing strings.
//!
//! The table is process-wide and only grows; symbols are never ordered or shown, so their values
//! (which depend on the order names were first seen) never reach an output.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sym(pub u32);

impl Sym {
    /// A name no device has (it was never interned).
    pub const NONE: Sym = Sym(u32::MAX);
}

#[derive(Default)]
struct Table {
    ids: HashMap<Arc<str>, Sym>,
}

fn table() -> &'static RwLock<Table> {
    static TABLE: OnceLock<RwLock<Table>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// The symbol for `name`, creating it if needed.
pub fn intern(name: &str) -> Sym {
    if let Some(s) = lookup(name) {
        return s;
    }
    let mut t = table().write().unwrap_or_else(|e| e.into_inner());
    let next = Sym(t.ids.len() as u32);
    *t.ids.entry(name.into()).or_insert(next)
}

/// The symbol for `name`, or [`Sym::NONE`] when no device or selector ever used it.
pub fn lookup(name: &str) -> Option<Sym> {
    table().read().unwrap_or_else(|e| e.into_inner()).ids.get(name).copied()
}

/// A shared copy of a string value: devices that publish the same product name, driver or
/// architecture hold one allocation between them, and equal strings are usually the same pointer.
pub fn shared_str(s: &str) -> Arc<str> {
    static VALUES: OnceLock<RwLock<HashMap<Arc<str>, ()>>> = OnceLock::new();
    let values = VALUES.get_or_init(Default::default);
    if let Some((k, _)) = values.read().unwrap_or_else(|e| e.into_inner()).get_key_value(s) {
        return k.clone();
    }
    let mut w = values.write().unwrap_or_else(|e| e.into_inner());
    if let Some((k, _)) = w.get_key_value(s) {
        return k.clone();
    }
    // Long, unique strings (UUIDs, bus IDs) are not worth keeping forever.
    let a: Arc<str> = s.into();
    if s.len() <= 64 && w.len() < 1 << 20 {
        w.insert(a.clone(), ());
    }
    a
}
