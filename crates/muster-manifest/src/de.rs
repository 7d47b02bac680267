//! A serde deserializer over [`yaml::Node`](crate::yaml::Node) that knows where it is.
//!
//! Every error carries the field path (`spec.containers[0].resources`) and the line and column of
//! the offending node. Keys that the target type does not know (k8s-openapi ignores them) are
//! collected as errors, the way the API server's strict field validation reports them. Scalars
//! follow the target type: a plain `2` is the string `"2"` for a string field and the number 2 for
//! a number field, as `sigs.k8s.io/yaml` converts YAML for Kubernetes types.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Unexpected, Visitor};

use crate::yaml::{Node, Pos, Resolved, Value};

/// A deserialization error with its location.
#[derive(Clone, Debug, PartialEq)]
pub struct DeError {
    pub message: String,
    /// The field path where the error arose (empty for the object itself).
    pub path: Option<String>,
    pub pos: Option<Pos>,
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        // serde's messages quote the input (`invalid type: string "..."`): a huge value is cut.
        DeError { message: shorten(&msg.to_string(), MESSAGE_MAX).into_owned(), path: None, pos: None }
    }
}

/// The longest message (in bytes) a value from the input may make; longer ones are cut in the
/// middle, keeping the start and what the message says after the value.
pub const MESSAGE_MAX: usize = 1024;

/// `s` if it has at most `max` bytes, else its start and end around `…(N bytes)…`, cut at
/// character boundaries.
pub fn shorten(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let head = s.floor_char_boundary(max * 2 / 3);
    let tail = s.ceil_char_boundary(s.len() - max / 4);
    std::borrow::Cow::Owned(format!("{}\u{2026}({} bytes)\u{2026}{}", &s[..head], tail - head, &s[tail..]))
}

/// A path inside the object, built on the stack and rendered only when an error needs it.
#[derive(Clone, Copy)]
pub enum Path<'p> {
    Root,
    /// A field of a struct: rendered `.name`.
    Field(&'p Path<'p>, &'p str),
    /// An entry of a map (labels, resource lists): rendered `.name` too, as kubectl prints them.
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.render_into(&mut s);
        s
    }

    fn render_into(&self, s: &mut String) {
        match self {
            Path::Root => {}
            Path::Field(p, name) | Path::Key(p, name) => {
                p.render_into(s);
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(name);
            }
            Path::Index(p, i) => {
                p.render_into(s);
                s.push_str(&format!("[{i}]"));
            }
        }
    }
}

/// Keys the target type ignored, with the path of the object that holds them.
#[derive(Default)]
pub struct Unknown {
    pub fields: RefCell<Vec<DeError>>,
}

/// Deserializes `T` from `node`, returning either the value or every error found (a type error
/// stops the walk; unknown fields are all collected).
pub fn from_node<'de, T: de::Deserialize<'de>>(node: &Node<'_>) -> Result<T, Vec<DeError>> {
    let unknown = Unknown::default();
    let de = De { node, path: Path::Root, key_pos: None, unknown: &unknown };
    let result = T::deserialize(de);
    let mut errors = unknown.fields.into_inner();
    match result {
        Ok(v) if errors.is_empty() => Ok(v),
        Ok(_) => Err(errors),
        Err(e) => {
            errors.push(e);
            Err(errors)
        }
    }
}

pub struct De<'n, 'p> {
    node: &'n Node<'n>,
    path: Path<'p>,
    key_pos: Option<Pos>,
    unknown: &'n Unknown,
}

impl<'n, 'p> De<'n, 'p> {
    fn locate(&self, mut e: DeError) -> DeError {
        if e.pos.is_none() {
            e.path = Some(self.path.render());
            e.pos = Some(self.node.pos);
        }
        e
    }

    fn unexpected(&self) -> Unexpected<'n> {
        match &self.node.value {
            Value::Seq(_) => Unexpected::Seq,
            Value::Map(_) => Unexpected::Map,
            Value::Scalar { text, plain: false } => Unexpected::Str(text),
            Value::Scalar { text, plain: true } => match crate::yaml::resolve_plain(text) {
                Resolved::Null => Unexpected::Unit,
                Resolved::Bool(b) => Unexpected::Bool(b),
                Resolved::Int(i) => Unexpected::Signed(i),
                Resolved::UInt(u) => Unexpected::Unsigned(u),
                Resolved::Float(f) => Unexpected::Float(f),
                Resolved::Str => Unexpected::Str(text),
            },
        }
    }

    fn type_error<V>(&self, exp: &dyn de::Expected) -> Result<V, DeError> {
        Err(self.locate(de::Error::invalid_type(self.unexpected(), exp)))
    }

    fn scalar_text(&self) -> Option<&'n str> {
        match &self.node.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }
}

macro_rules! integer {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            let r = match self.node.resolve() {
                Resolved::Int(i) => visitor.visit_i64(i),
                Resolved::UInt(u) => visitor.visit_u64(u),
                _ => return self.type_error(&visitor),
            };
            r.map_err(|e| self.locate(e))
        }
    )*};
}

impl<'de, 'n, 'p> de::Deserializer<'de> for De<'n, 'p> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Seq(items) => {
                visitor.visit_seq(SeqAccess { items: items.iter(), index: 0, parent: self.path, unknown: self.unknown })
            }
            Value::Map(entries) => visitor.visit_map(self.map_access(entries, false)),
            Value::Scalar { text, .. } => match self.node.resolve() {
                Resolved::Null => visitor.visit_unit(),
                Resolved::Bool(b) => visitor.visit_bool(b),
                Resolved::Int(i) => visitor.visit_i64(i),
                Resolved::UInt(u) => visitor.visit_u64(u),
                Resolved::Float(f) => visitor.visit_f64(f),
                Resolved::Str => visitor.visit_str(text),
            },
        };
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node.resolve() {
            Resolved::Bool(b) if matches!(self.node.value, Value::Scalar { plain: true, .. }) => {
                visitor.visit_bool(b).map_err(|e| self.locate(e))
            }
            _ => self.type_error(&visitor),
        }
    }

    integer!(deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
             deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128);

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match self.node.resolve() {
            Resolved::Int(i) => visitor.visit_f64(i as f64),
            Resolved::UInt(u) => visitor.visit_f64(u as f64),
            Resolved::Float(f) => visitor.visit_f64(f),
            _ => return self.type_error(&visitor),
        };
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.scalar_text() {
            Some(text) => visitor.visit_str(text).map_err(|e| self.locate(e)),
            None => self.type_error(&visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() && matches!(self.node.value, Value::Scalar { .. }) {
            visitor.visit_none().map_err(|e| self.locate(e))
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() { visitor.visit_unit().map_err(|e| self.locate(e)) } else { self.type_error(&visitor) }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, DeError> {
        if name == "Quantity"
            && let Some(text) = self.scalar_text()
            && let Err(e) = muster_api::quantity::parse(text)
        {
            return Err(self.locate(<DeError as de::Error>::custom(format!("invalid quantity {text:?}: {e}"))));
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Seq(items) => {
                visitor.visit_seq(SeqAccess { items: items.iter(), index: 0, parent: self.path, unknown: self.unknown })
            }
            // `null` for a list reads as an empty list, as Go's JSON decoding reads it.
            _ if self.node.is_null() => {
                visitor.visit_seq(SeqAccess { items: [].iter(), index: 0, parent: self.path, unknown: self.unknown })
            }
            _ => return self.type_error(&visitor),
        };
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.mapping(visitor, true)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.mapping(visitor, false)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.scalar_text() {
            Some(text) => {
                let access: de::value::StrDeserializer<'_, DeError> = text.into_deserializer();
                visitor.visit_enum(access).map_err(|e| self.locate(e))
            }
            None => self.type_error(&visitor),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // The target type has no such field: record it where the key was written.
        if let (Path::Field(parent, name), Some(pos)) = (self.path, self.key_pos) {
            let parent = parent.render();
            self.unknown.fields.borrow_mut().push(DeError {
                message: shorten(&format!("unknown field {name:?}"), MESSAGE_MAX).into_owned(),
                path: Some(parent),
                pos: Some(pos),
            });
        }
        visitor.visit_unit()
    }
}

impl<'n, 'p> De<'n, 'p> {
    fn map_access<'m>(&'m self, entries: &'n [(Node<'n>, Node<'n>)], is_map: bool) -> MapAccess<'n, 'm> {
        MapAccess { entries: entries.iter(), value: None, parent: &self.path, is_map, unknown: self.unknown }
    }

    fn mapping<'de, V: Visitor<'de>>(self, visitor: V, is_map: bool) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Map(entries) => visitor.visit_map(self.map_access(entries, is_map)),
            // `null` for an object reads as an empty object.
            _ if self.node.is_null() => visitor.visit_map(self.map_access(&[], is_map)),
            _ => return self.type_error(&visitor),
        };
        r.map_err(|e| self.locate(e))
    }
}

struct SeqAccess<'n, 'p> {
    items: std::slice::Iter<'n, Node<'n>>,
    index: usize,
    parent: Path<'p>,
    unknown: &'n Unknown,
}

impl<'de, 'n, 'p> de::SeqAccess<'de> for SeqAccess<'n, 'p> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DeError> {
        let Some(node) = self.items.next() else { return Ok(None) };
        let path = Path::Index(&self.parent, self.index);
        self.index += 1;
        seed.deserialize(De { node, path, key_pos: None, unknown: self.unknown }).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapAccess<'n, 'm> {
    entries: std::slice::Iter<'n, (Node<'n>, Node<'n>)>,
    value: Option<&'n (Node<'n>, Node<'n>)>,
    parent: &'m Path<'m>,
    is_map: bool,
    unknown: &'n Unknown,
}

impl<'de, 'n, 'm> de::MapAccess<'de> for MapAccess<'n, 'm> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DeError> {
        let Some(entry) = self.entries.next() else { return Ok(None) };
        self.value = Some(entry);
        let key = &entry.0;
        seed.deserialize(De { node: key, path: *self.parent, key_pos: None, unknown: self.unknown }).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let (key, node) = self.value.take().expect("serde calls next_key before next_value");
        let name = key.as_str().unwrap_or_default();
        let path = if self.is_map { Path::Key(self.parent, name) } else { Path::Field(self.parent, name) };
        seed.deserialize(De { node, path, key_pos: Some(key.pos), unknown: self.unknown })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_stream;
    use k8s_openapi::api::core::v1::Pod;

    fn de<T: for<'de> de::Deserialize<'de>>(text: &str) -> Result<T, Vec<DeError>> {
        let docs = parse_stream(text).unwrap();
        from_node(&docs[0].root)
    }

    #[test]
    fn plain_numbers_become_strings_or_quantities_by_target_type() {
        let p: Pod = de("metadata:\n  name: 1.10\nspec:\n  containers:\n  - name: a\n    resources:\n      requests:\n        cpu: 2\n").unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("1.10"));
        let c = &p.spec.unwrap().containers[0];
        assert_eq!(c.resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"].0, "2");
    }

    #[test]
    fn unknown_fields_are_all_reported_with_their_parent_path() {
        let errs = de::<Pod>("metadata:\n  name: p\n  nmae: q\nspec:\n  containers:\n  - name: a\n    imagee: x\n")
            .unwrap_err();
        let rendered: Vec<_> =
            errs.iter().map(|e| format!("{}: {}: {}", e.pos.unwrap(), e.path.as_deref().unwrap(), e.message)).collect();
        assert_eq!(
            rendered,
            ["3:3: metadata: unknown field \"nmae\"", "7:5: spec.containers[0]: unknown field \"imagee\"",]
        );
    }

    #[test]
    fn type_errors_name_the_field_and_position() {
        let errs = de::<Pod>("spec:\n  priority: high\n  containers: []\n").unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path.as_deref(), Some("spec.priority"));
        assert_eq!(errs[0].pos, Some(Pos { line: 2, col: 13 }));
        assert_eq!(errs[0].message, "invalid type: string \"high\", expected i32");
    }

    #[test]
    fn bad_quantities_are_located() {
        let errs =
            de::<Pod>("spec:\n  containers:\n  - name: a\n    resources:\n      limits:\n        memory: 80GB\n")
                .unwrap_err();
        assert_eq!(errs[0].path.as_deref(), Some("spec.containers[0].resources.limits.memory"));
        assert_eq!(errs[0].message, "invalid quantity \"80GB\": unknown quantity suffix \"GB\"");
    }

    #[test]
    fn a_mapping_where_a_list_belongs() {
        let errs = de::<Pod>("spec:\n  containers:\n    name: a\n").unwrap_err();
        assert_eq!(errs[0].path.as_deref(), Some("spec.containers"));
        assert_eq!(errs[0].pos, Some(Pos { line: 3, col: 5 }));
        assert_eq!(errs[0].message, "invalid type: map, expected a sequence");
    }

    #[test]
    fn huge_values_are_not_echoed_in_full() {
        let big = "x".repeat(1 << 20);
        let errs = de::<Pod>(&format!("spec:\n  ? {big}\n  : 1\n  priority: {big}\n  containers: []\n")).unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        for e in &errs {
            assert!(e.message.len() <= MESSAGE_MAX + 40, "{}", e.message.len());
        }
        assert!(errs[0].message.starts_with("unknown field \"xxx"), "{}", errs[0].message);
        assert!(errs[1].message.starts_with("invalid type: string \"xxx"), "{}", errs[1].message);
        assert!(errs[1].message.ends_with("xxx\", expected i32"), "{}", errs[1].message);
        assert!(errs[1].message.contains("\u{2026}(1047"), "{}", errs[1].message);
        assert_eq!(shorten("short", 10), "short");
        assert_eq!(shorten("ééééééééé", 8), "éé\u{2026}(12 bytes)\u{2026}é");
    }

    #[test]
    fn quoted_booleans_are_not_booleans() {
        let errs = de::<Pod>("spec:\n  hostNetwork: 'true'\n  containers: []\n").unwrap_err();
        assert!(errs[0].message.starts_with("invalid type: string \"true\", expected a boolean"), "{:?}", errs[0]);
    }
}
