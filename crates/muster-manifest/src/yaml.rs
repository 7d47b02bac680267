//! YAML (and JSON, which is YAML) into a tree that remembers where every node was written.
//!
//! serde deserializers report *what* is wrong; operators also need *where*. This module parses a
//! stream into [`Node`]s carrying their line and column, keeping each scalar's source text and
//! whether it was quoted, so that the typed deserializer in [`crate::de`] can resolve a plain `2`
//! as the string `"2"` where the field is a string (as `sigs.k8s.io/yaml` does) and as a number
//! elsewhere.
//!
//! Resolution follows what the Kubernetes tooling accepts: anchors and aliases, merge keys (`<<`),
//! YAML 1.1 booleans for plain scalars, and duplicate keys rejected as strict decoding rejects them.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;

use granit_parser::{Event, Parser, ScalarStyle};

/// A 1-based line and column in a source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One YAML node and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Node<'a> {
    pub pos: Pos,
    pub value: Value<'a>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    /// A scalar's text after escape processing; `plain` is false for quoted and block scalars
    /// (and `!!str`-tagged ones), which are always strings.
    Scalar {
        text: Cow<'a, str>,
        plain: bool,
    },
    Seq(Vec<Node<'a>>),
    /// Entries in source order; keys are unique.
    Map(Vec<(Node<'a>, Node<'a>)>),
}

/// A plain scalar's YAML 1.1 reading, as go-yaml v2 (behind `sigs.k8s.io/yaml`) resolves it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str,
}

impl<'a> Node<'a> {
    /// The scalar text, if this is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Is this an explicit or implicit null (`~`, `null`, nothing)?
    pub fn is_null(&self) -> bool {
        matches!(self.resolve(), Resolved::Null)
    }

    /// How a plain scalar reads when the target type does not decide (`deserialize_any`).
    pub fn resolve(&self) -> Resolved {
        match &self.value {
            Value::Scalar { text, plain: true } => resolve_plain(text),
            _ => Resolved::Str,
        }
    }

    /// The value under `key` in a mapping.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// How much a copy of this node holds: (nodes, bytes of scalar text).
    fn weight(&self) -> (usize, usize) {
        match &self.value {
            Value::Scalar { text, .. } => (1, text.len()),
            Value::Seq(items) => items.iter().fold((1, 0), |(n, b), i| {
                let (n2, b2) = i.weight();
                (n + n2, b.saturating_add(b2))
            }),
            Value::Map(entries) => entries.iter().fold((1, 0), |(n, b), (k, v)| {
                let ((n2, b2), (n3, b3)) = (k.weight(), v.weight());
                (n + n2 + n3, b.saturating_add(b2).saturating_add(b3))
            }),
        }
    }
}

pub fn resolve_plain(text: &str) -> Resolved {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Resolved::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Resolved::Bool(false);
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Resolved::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        _ => {}
    }
    let first = text.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.')) {
        return Resolved::Str;
    }
    let cleaned: Cow<'_, str> =
        if text.contains('_') { Cow::Owned(text.replace('_', "")) } else { Cow::Borrowed(text) };
    let (neg, digits) = match cleaned.as_bytes()[0] {
        b'-' => (true, &cleaned[1..]),
        b'+' => (false, &cleaned[1..]),
        _ => (false, &cleaned[..]),
    };
    let radix_int = |radix: u32, body: &str| -> Option<Resolved> {
        let v = u64::from_str_radix(body, radix).ok()?;
        Some(if neg {
            Resolved::Int(0i64.checked_sub_unsigned(v)?)
        } else if let Ok(i) = i64::try_from(v) {
            Resolved::Int(i)
        } else {
            Resolved::UInt(v)
        })
    };
    if let Some(hex) = digits.strip_prefix("0x") {
        return radix_int(16, hex).unwrap_or(Resolved::Str);
    }
    if let Some(bin) = digits.strip_prefix("0b") {
        return radix_int(2, bin).unwrap_or(Resolved::Str);
    }
    if let Some(oct) = digits.strip_prefix("0o") {
        return radix_int(8, oct).unwrap_or(Resolved::Str);
    }
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if digits.len() > 1 && digits.starts_with('0') {
            // YAML 1.1 octal.
            return radix_int(8, digits).unwrap_or(Resolved::Str);
        }
        return radix_int(10, digits).unwrap_or(Resolved::Str);
    }
    let float_like = digits.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && digits.bytes().any(|b| b.is_ascii_digit());
    if float_like && let Ok(f) = cleaned.parse::<f64>() {
        return Resolved::Float(f);
    }
    Resolved::Str
}

/// A YAML syntax error or a structural problem (duplicate key, bad merge, unresolved alias).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    pub pos: Pos,
    pub message: String,
}

/// One document of a stream.
#[derive(Debug)]
pub struct Document<'a> {
    /// Where the document's content starts.
    pub pos: Pos,
    pub root: Node<'a>,
}

enum Frame<'a> {
    Seq { pos: Pos, anchor: usize, items: Vec<Node<'a>> },
    Map { pos: Pos, anchor: usize, entries: Vec<(Node<'a>, Node<'a>)>, key: Option<Node<'a>>, keys: KeyIndex<'a> },
}

/// The keys of a mapping being read, for duplicate detection: a scan while the mapping is small,
/// a hash index (key text → line of its first occurrence) once it is not, so that a mapping with
/// many keys is read in linear time.
#[derive(Default)]
struct KeyIndex<'a> {
    index: Option<HashMap<Cow<'a, str>, u32>>,
}

/// Mappings with more keys than this get a hash index.
const KEY_SCAN_MAX: usize = 16;

impl<'a> KeyIndex<'a> {
    /// The line of an earlier entry with the key of the scalar `key` (merge keys `<<` excluded);
    /// records it.
    fn first_line(&mut self, entries: &[(Node<'a>, Node<'a>)], key: &Node<'a>) -> Option<u32> {
        let Value::Scalar { text: key_text, .. } = &key.value else { return None };
        let text = key_text.as_ref();
        if self.index.is_none() && entries.len() >= KEY_SCAN_MAX {
            let mut index = HashMap::with_capacity(entries.len() * 2);
            for (k, _) in entries {
                if let Value::Scalar { text, .. } = &k.value
                    && text != "<<"
                {
                    index.entry(text.clone()).or_insert(k.pos.line);
                }
            }
            self.index = Some(index);
        }
        match &mut self.index {
            None => entries.iter().find(|(p, _)| p.as_str() == Some(text)).map(|(p, _)| p.pos.line),
            Some(index) => match index.get(text) {
                Some(first) => Some(*first),
                None => {
                    index.insert(key_text.clone(), key.pos.line);
                    None
                }
            },
        }
    }
}

fn pos_of(span: &granit_parser::Span, line_offset: u32) -> Pos {
    Pos { line: span.start.line() as u32 + line_offset, col: span.start.col() as u32 + 1 }
}

/// Upper bound on the nodes that aliases may copy, against "billion laughs" inputs.
const ALIAS_BUDGET_NODES: usize = 10_000_000;

/// Upper bound on the scalar text that aliases may copy: a few aliases of a large string cost as
/// much as many aliases of small nodes. The bound is [`ALIAS_BYTES_PER_BYTE`] times the text
/// parsed, within [`ALIAS_BYTES_MIN`] and [`ALIAS_BYTES_MAX`] (a large stream is parsed in pieces,
/// each with its own bound, so the expansion of a whole input stays proportional to its size).
fn alias_bytes_budget(text_len: usize) -> usize {
    text_len.saturating_mul(ALIAS_BYTES_PER_BYTE).clamp(ALIAS_BYTES_MIN, ALIAS_BYTES_MAX)
}

const ALIAS_BYTES_PER_BYTE: usize = 16;
const ALIAS_BYTES_MIN: usize = 4 << 20;
const ALIAS_BYTES_MAX: usize = 64 << 20;

/// Splits a stream into pieces of at least `min_len` bytes that each hold whole documents, at
/// lines that start a document (`---`). The YAML spec forbids such lines inside
/// any scalar, so every piece parses on its own. Returns (byte offset, lines before it) per piece.
/// A stream with directives (`%YAML`, `%TAG`), which apply across markers, stays one piece.
pub fn split_documents(text: &str, min_len: usize) -> Vec<(usize, u32)> {
    let mut pieces = vec![(0usize, 0u32)];
    if text.starts_with('%') || text.contains("\n%") {
        return pieces;
    }
    let mut offset = 0usize;
    for (line, l) in text.split_inclusive('\n').enumerate() {
        let marker = l.starts_with("---") && l[3..].chars().next().is_none_or(|c| c.is_whitespace());
        if marker && offset - pieces.last().expect("never empty").0 >= min_len {
            pieces.push((offset, line as u32));
        }
        offset += l.len();
    }
    pieces
}

/// Parses every document in `text`. Empty documents (only comments, or nothing) are skipped.
pub fn parse_stream(text: &str) -> Result<Vec<Document<'_>>, YamlError> {
    parse_stream_at(text, 0)
}

/// [`parse_stream`] for a piece of a larger text that starts after `line_offset` lines.
pub fn parse_stream_at(text: &str, line_offset: u32) -> Result<Vec<Document<'_>>, YamlError> {
    let mut docs = Vec::new();
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut anchors: HashMap<usize, Node<'_>> = HashMap::new();
    let mut alias_budget = ALIAS_BUDGET_NODES;
    let alias_bytes_max = alias_bytes_budget(text.len());
    let mut alias_bytes = alias_bytes_max;
    let mut root: Option<Node<'_>> = None;
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| YamlError {
            pos: Pos { line: e.marker().line() as u32 + line_offset, col: e.marker().col() as u32 + 1 },
            message: e.kind().to_string(),
        })?;
        let pos = pos_of(&span, line_offset);
        let (node, anchor) = match event {
            Event::StreamStart | Event::StreamEnd => continue,
            Event::DocumentStart(..) => {
                anchors.clear();
                continue;
            }
            Event::DocumentEnd => {
                if let Some(node) = root.take()
                    && !(node.is_null() && matches!(node.value, Value::Scalar { .. }))
                {
                    docs.push(Document { pos: node.pos, root: node });
                }
                continue;
            }
            Event::Alias(id) => {
                let Some(target) = anchors.get(&id) else {
                    return Err(YamlError { pos, message: "alias refers to an unknown anchor".into() });
                };
                let (nodes, bytes) = target.weight();
                alias_budget = alias_budget.checked_sub(nodes).ok_or_else(|| YamlError {
                    pos,
                    message: format!("aliases expand to more than {ALIAS_BUDGET_NODES} nodes"),
                })?;
                alias_bytes = alias_bytes.checked_sub(bytes).ok_or_else(|| YamlError {
                    pos,
                    message: format!(
                        "aliases expand to more than {alias_bytes_max} bytes of text ({ALIAS_BYTES_PER_BYTE} times \
                         the input, at least {} MiB, at most {} MiB); this alias copies {bytes} bytes",
                        ALIAS_BYTES_MIN >> 20,
                        ALIAS_BYTES_MAX >> 20
                    ),
                })?;
                let mut copy = target.clone();
                copy.pos = pos;
                (copy, 0)
            }
            Event::Scalar(text, style, anchor, tag) => {
                let tagged_str =
                    tag.as_ref().is_some_and(|t| t.to_string().ends_with(":str") || t.to_string() == "!!str");
                let plain = style == ScalarStyle::Plain && !tagged_str;
                (Node { pos, value: Value::Scalar { text, plain } }, anchor)
            }
            Event::SequenceStart(_, anchor, _) => {
                stack.push(Frame::Seq { pos, anchor, items: Vec::new() });
                continue;
            }
            Event::MappingStart(_, anchor, _) => {
                stack.push(Frame::Map { pos, anchor, entries: Vec::new(), key: None, keys: KeyIndex::default() });
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { pos, anchor, items }) => (Node { pos, value: Value::Seq(items) }, anchor),
                _ => unreachable!("the parser balances sequence events"),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map { pos, anchor, entries, .. }) => {
                    (Node { pos, value: Value::Map(apply_merge_keys(entries)?) }, anchor)
                }
                _ => unreachable!("the parser balances mapping events"),
            },
            _ => continue,
        };
        if anchor != 0 {
            anchors.insert(anchor, node.clone());
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, keys, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => {
                    let Value::Scalar { text, .. } = &k.value else {
                        return Err(YamlError { pos: k.pos, message: "mapping keys must be scalars".into() });
                    };
                    if text != "<<"
                        && let Some(first) = keys.first_line(entries, &k)
                    {
                        return Err(YamlError {
                            pos: k.pos,
                            message: format!("duplicate key {text:?} (first at line {first})"),
                        });
                    }
                    entries.push((k, node));
                }
            },
        }
    }
    Ok(docs)
}

/// Resolves `<<` merge keys: entries of the merged mapping(s) are added unless the mapping already
/// has the key; with a list of mappings, earlier ones win.
fn apply_merge_keys<'a>(entries: Vec<(Node<'a>, Node<'a>)>) -> Result<Vec<(Node<'a>, Node<'a>)>, YamlError> {
    let is_merge = |k: &Node<'_>| matches!(&k.value, Value::Scalar { text, plain: true } if text == "<<");
    if !entries.iter().any(|(k, _)| is_merge(k)) {
        return Ok(entries);
    }
    let (merges, mut own): (Vec<_>, Vec<_>) = entries.into_iter().partition(|(k, _)| is_merge(k));
    // The keys the mapping has so far (its own, then those merged in), indexed once.
    let mut have: HashSet<String> = own.iter().filter_map(|(k, _)| k.as_str().map(str::to_string)).collect();
    for (_, merged) in merges {
        let sources = match merged.value {
            Value::Map(_) => vec![merged],
            Value::Seq(items) => items,
            _ => {
                return Err(YamlError {
                    pos: merged.pos,
                    message: "merge key << needs a mapping or a list of mappings".into(),
                });
            }
        };
        for src in sources {
            let Value::Map(src_entries) = src.value else {
                return Err(YamlError {
                    pos: src.pos,
                    message: "merge key << needs a mapping or a list of mappings".into(),
                });
            };
            for (k, v) in src_entries {
                let text = k.as_str().unwrap_or_default();
                if !have.contains(text) {
                    have.insert(text.to_string());
                    own.push((k, v));
                }
            }
        }
    }
    Ok(own)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Node<'_> {
        let mut docs = parse_stream(text).unwrap();
        assert_eq!(docs.len(), 1);
        docs.remove(0).root
    }

    #[test]
    fn positions_are_one_based() {
        let n = one("a: 1\nb:\n  c: x\n");
        let b = n.get("b").unwrap();
        assert_eq!(b.get("c").unwrap().pos, Pos { line: 3, col: 6 });
    }

    #[test]
    fn multi_documents_skip_empty_ones() {
        let docs = parse_stream("---\n# only a comment\n---\na: 1\n---\n---\nb: 2\n...\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].root.get("b").unwrap().pos.line, 7);
    }

    #[test]
    fn scalars_keep_text_and_style() {
        let n = one("a: 1.10\nb: '2'\nc: on\nd: ~\ne: 0x1F\nf: 1e3\ng: 010\n");
        assert_eq!(n.get("a").unwrap().as_str(), Some("1.10"));
        assert_eq!(n.get("a").unwrap().resolve(), Resolved::Float(1.1));
        assert_eq!(n.get("b").unwrap().resolve(), Resolved::Str);
        assert_eq!(n.get("c").unwrap().resolve(), Resolved::Bool(true));
        assert_eq!(n.get("d").unwrap().resolve(), Resolved::Null);
        assert_eq!(n.get("e").unwrap().resolve(), Resolved::Int(31));
        assert_eq!(n.get("f").unwrap().resolve(), Resolved::Float(1000.0));
        assert_eq!(n.get("g").unwrap().resolve(), Resolved::Int(8));
        assert_eq!(resolve_plain("80Gi"), Resolved::Str);
        assert_eq!(resolve_plain("-"), Resolved::Str);
        assert_eq!(resolve_plain("1.2.3"), Resolved::Str);
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let n = one("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n");
        let u = n.get("use").unwrap();
        assert_eq!(u.get("x").unwrap().as_str(), Some("1"));
        assert_eq!(u.get("y").unwrap().as_str(), Some("3"), "explicit keys win over merged ones");
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        let e = parse_stream("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(e.pos, Pos { line: 3, col: 1 });
        assert_eq!(e.message, "duplicate key \"a\" (first at line 1)");
    }

    #[test]
    fn duplicate_keys_in_large_mappings_name_the_first() {
        // Past the scan threshold the keys are hashed: the same errors, the same positions.
        let mut text: String = (0..40).map(|i| format!("k{i}: {i}\n")).collect();
        text += "k7: again\n";
        let e = parse_stream(&text).unwrap_err();
        assert_eq!(e.pos, Pos { line: 41, col: 1 });
        assert_eq!(e.message, "duplicate key \"k7\" (first at line 8)");
        // Quoted and plain spellings are the same key; merge keys may repeat.
        let text = format!("{}'k3': x\n", (0..20).map(|i| format!("k{i}: {i}\n")).collect::<String>());
        assert_eq!(parse_stream(&text).unwrap_err().message, "duplicate key \"k3\" (first at line 4)");
        let text = format!(
            "a: &a {{x: 1}}\nb: &b {{y: 2}}\nm:\n{}  <<: *a\n  <<: *b\n",
            (0..20).map(|i| format!("  k{i}: {i}\n")).collect::<String>()
        );
        let n = one(&text);
        let m = n.get("m").unwrap();
        assert_eq!((m.get("x").unwrap().as_str(), m.get("y").unwrap().as_str()), (Some("1"), Some("2")));
    }

    #[test]
    fn a_mapping_with_100k_keys_is_read() {
        // Duplicate detection and merge keys are hashed: this was quadratic (14.5 s in release).
        let n = 100_000;
        let mut text = String::from("m:\n");
        for i in 0..n {
            text += &format!("  key-{i}: v\n");
        }
        let root = one(&text);
        let Value::Map(entries) = &root.get("m").unwrap().value else { panic!("a mapping") };
        assert_eq!(entries.len(), n);
        text += &format!("  key-{}: again\n", n - 1);
        let e = parse_stream(&text).unwrap_err();
        assert_eq!(e.message, format!("duplicate key \"key-{}\" (first at line {})", n - 1, n + 1));
        // A 50k-key mapping merged into one that has half of its keys.
        let mut text = String::from("base: &b\n");
        for i in 0..n / 2 {
            text += &format!("  key-{i}: base\n");
        }
        text += "use:\n  <<: *b\n";
        for i in (0..n / 2).step_by(2) {
            text += &format!("  key-{i}: own\n");
        }
        let root = one(&text);
        let u = root.get("use").unwrap();
        let Value::Map(entries) = &u.value else { panic!("a mapping") };
        assert_eq!(entries.len(), n / 2);
        assert_eq!(u.get("key-0").unwrap().as_str(), Some("own"));
        assert_eq!(u.get("key-1").unwrap().as_str(), Some("base"));
    }

    #[test]
    fn syntax_errors_are_located() {
        let e = parse_stream("a: 1\nb: [1, 2\n").unwrap_err();
        assert!(e.pos.line >= 2, "{e:?}");
    }

    #[test]
    fn split_pieces_parse_to_the_same_documents() {
        let text = "a: 1\n---\nb: |\n  ---x\n---\n# c\nc: 3\n...\n---\nd: [1,\n  2]\n";
        let whole: Vec<_> = parse_stream(text).unwrap().into_iter().map(|d| d.root).collect();
        let pieces = split_documents(text, 1);
        assert_eq!(pieces.len(), 4);
        let mut joined = Vec::new();
        for (i, (start, line)) in pieces.iter().enumerate() {
            let end = pieces.get(i + 1).map_or(text.len(), |p| p.0);
            joined.extend(parse_stream_at(&text[*start..end], *line).unwrap().into_iter().map(|d| d.root));
        }
        assert_eq!(joined, whole, "positions included");
        assert_eq!(split_documents("%YAML 1.2\n---\na: 1\n---\nb: 2\n", 1).len(), 1);
    }

    #[test]
    fn json_is_yaml() {
        let n = one("{\"kind\": \"Pod\", \"spec\": {\"containers\": []}}");
        assert_eq!(n.get("kind").unwrap().resolve(), Resolved::Str);
    }

    #[test]
    fn billion_laughs_is_refused() {
        let mut s = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..9 {
            let prev = if i == 0 { "a".to_string() } else { format!("l{}", i - 1) };
            s += &format!(
                "l{i}: &l{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            );
        }
        let e = parse_stream(&s).unwrap_err();
        assert!(e.message.contains("aliases expand"), "{e:?}");
    }

    #[test]
    fn aliases_of_a_large_string_are_bounded_by_bytes() {
        // ~100 KB aliased 10^5 times in a file of ~500 KB: 10 GB expanded, few nodes.
        let big = "x".repeat(100_000);
        let mut s = format!("a: &a {big}\nb:\n");
        for _ in 0..100_000 {
            s += "- *a\n";
        }
        let e = parse_stream(&s).unwrap_err();
        let budget = s.len() * 16;
        assert_eq!(
            e.message,
            format!(
                "aliases expand to more than {budget} bytes of text (16 times the input, at least 4 MiB, at most \
                 64 MiB); this alias copies 100000 bytes"
            )
        );
        let line = (budget / 100_000 + 1) as u32 + 2;
        assert_eq!(e.pos, Pos { line, col: 3 }, "the first alias past the budget");
        assert_eq!(alias_bytes_budget(10), 4 << 20);
        assert_eq!(alias_bytes_budget(100 << 20), 64 << 20);
        // Anchors reused as they are meant to be still work, large ones included.
        let big = "y".repeat(10_000);
        let mut s = format!("a: &a {big}\nm: &m {{k: v, l: [1, 2]}}\nb:\n");
        for _ in 0..100 {
            s += "- [*a, *m]\n";
        }
        let root = one(&s);
        let Value::Seq(items) = &root.get("b").unwrap().value else { panic!("a list") };
        assert_eq!(items.len(), 100);
        let Value::Seq(last) = &items[99].value else { panic!("a list") };
        assert_eq!(last[0].as_str(), Some(big.as_str()));
        assert_eq!(last[0].pos, Pos { line: 103, col: 4 }, "a copy is where the alias is");
        assert_eq!(last[1].get("k").unwrap().as_str(), Some("v"));
    }
}
