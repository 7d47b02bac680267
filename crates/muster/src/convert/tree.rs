//! The YAML tree `convert` rewrites and writes: scalars keep their text and style, mapping
//! entries the comment lines written above them. Read from the located tree of the input
//! ([`Y::from_node`]) and written back as block YAML the way kubectl writes it ([`write_doc`]).

use std::fmt::Write as _;

use muster_manifest::yaml::{Node, Resolved, Value, resolve_plain};

use crate::text;

/// A YAML tree to write: scalars keep their text and whether they were quoted; map entries
/// carry the comment lines written before them.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Y {
    Scalar(String, Style),
    Seq(Vec<Y>),
    Map(Vec<(String, Y, Vec<String>)>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Style {
    /// Written plain (its YAML reading depends on the text: `4` is a number).
    Plain,
    /// Always a string.
    Quoted,
    /// A string written as a folded block (`>-`), one line per line of the text.
    Folded,
}

impl Y {
    /// The tree of `n`; each mapping entry keeps the comment lines written above its key.
    pub(super) fn from_node(n: &Node<'_>, src: &Src<'_>) -> Y {
        match &n.value {
            Value::Scalar { text, plain } => {
                Y::Scalar(text.to_string(), if *plain { Style::Plain } else { Style::Quoted })
            }
            Value::Seq(items) => Y::Seq(items.iter().map(|i| Y::from_node(i, src)).collect()),
            Value::Map(entries) => Y::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.as_str().unwrap_or("").to_string(), Y::from_node(v, src), src.comments_above(k)))
                    .collect(),
            ),
        }
    }

    pub(super) fn plain(s: &str) -> Y {
        Y::Scalar(s.to_string(), Style::Plain)
    }

    /// A string from the input (a name): plain when it reads back as that string, quoted when
    /// plain it would read as something else (`true`, `1`, `~`, `a: b`).
    pub(super) fn text(s: &str) -> Y {
        match resolve_plain(s) {
            Resolved::Str if !needs_quotes(s) => Y::plain(s),
            _ => Y::string(s),
        }
    }

    pub(super) fn string(s: &str) -> Y {
        Y::Scalar(s.to_string(), Style::Quoted)
    }

    pub(super) fn map() -> Y {
        Y::Map(Vec::new())
    }

    pub(super) fn get(&self, key: &str) -> Option<&Y> {
        match self {
            Y::Map(e) => e.iter().find(|(k, _, _)| k == key).map(|(_, v, _)| v),
            _ => None,
        }
    }

    pub(super) fn get_mut(&mut self, key: &str) -> Option<&mut Y> {
        match self {
            Y::Map(e) => e.iter_mut().find(|(k, _, _)| k == key).map(|(_, v, _)| v),
            _ => None,
        }
    }

    pub(super) fn path_mut(&mut self, path: &str) -> Option<&mut Y> {
        path.split('.').try_fold(self, |y, k| y.get_mut(k))
    }

    /// Removes `key`: its value and the comment lines written above it.
    pub(super) fn take(&mut self, key: &str) -> Option<(Y, Vec<String>)> {
        match self {
            Y::Map(e) => e.iter().position(|(k, _, _)| k == key).map(|i| {
                let (_, v, c) = e.remove(i);
                (v, c)
            }),
            _ => None,
        }
    }

    pub(super) fn remove(&mut self, key: &str) -> Option<Y> {
        match self {
            Y::Map(e) => e.iter().position(|(k, _, _)| k == key).map(|i| e.remove(i).1),
            _ => None,
        }
    }

    /// Is this written as nothing (`key:`, `~`, `null`), which reads as an empty mapping?
    pub(super) fn is_null(&self) -> bool {
        matches!(self, Y::Scalar(s, Style::Plain) if matches!(resolve_plain(s), Resolved::Null))
    }

    /// The entries of a mapping; a value of another kind is replaced by an empty mapping first
    /// (callers check with [`mapping`] that it is a mapping or nothing).
    pub(super) fn entries_mut(&mut self) -> &mut Vec<(String, Y, Vec<String>)> {
        if !matches!(self, Y::Map(_)) {
            *self = Y::map();
        }
        match self {
            Y::Map(e) => e,
            _ => unreachable!("made a mapping above"),
        }
    }

    /// Sets `key` (in place if present, else appended) and returns its comment list.
    pub(super) fn set(&mut self, key: &str, value: Y) -> &mut Vec<String> {
        let e = self.entries_mut();
        let i = match e.iter().position(|(k, _, _)| k == key) {
            Some(i) => {
                e[i].1 = value;
                i
            }
            None => {
                e.push((key.to_string(), value, Vec::new()));
                e.len() - 1
            }
        };
        &mut e[i].2
    }

    /// Inserts `key` first.
    pub(super) fn set_first(&mut self, key: &str, value: Y) -> &mut Vec<String> {
        let e = self.entries_mut();
        e.retain(|(k, _, _)| k != key);
        e.insert(0, (key.to_string(), value, Vec::new()));
        &mut e[0].2
    }

    /// Adds a comment line to `key` in the mapping at `path`.
    pub(super) fn comment_path(&mut self, path: &str, key: &str, note: String) {
        if let Some(m) = self.path_mut(path) {
            m.comment(key, note);
        }
    }

    /// The comment lines written above `key`.
    pub(super) fn comments_of(&self, key: &str) -> Vec<String> {
        match self {
            Y::Map(e) => e.iter().find(|(k, _, _)| k == key).map(|(_, _, c)| c.clone()).unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    pub(super) fn comment(&mut self, key: &str, note: String) {
        if let Y::Map(e) = self
            && let Some((_, _, c)) = e.iter_mut().find(|(k, _, _)| k == key)
        {
            c.push(note);
        }
    }

    pub(super) fn str(&self) -> Option<&str> {
        match self {
            Y::Scalar(s, _) => Some(s),
            _ => None,
        }
    }
}

/// The text of the file being converted, for the comments written inside an object.
pub(super) struct Src<'t> {
    pub(super) lines: &'t [&'t str],
    /// The line the document starts on: the comments above it are the document's, kept apart.
    pub(super) floor: u32,
}

impl Src<'_> {
    /// The comment lines directly above `key` when the key starts its line (after any `- `), each
    /// indented as the key or as its list item; their text after `#`.
    pub(super) fn comments_above(&self, key: &Node<'_>) -> Vec<String> {
        let line = key.pos.line as usize;
        let Some(text) = line.checked_sub(1).and_then(|i| self.lines.get(i)) else { return Vec::new() };
        let before: String = text.chars().take((key.pos.col as usize).saturating_sub(1)).collect();
        if !before.chars().all(|c| c == ' ' || c == '-') {
            return Vec::new();
        }
        let (lo, hi) = (indentation(text), before.chars().count());
        let mut out = Vec::new();
        for i in (self.floor as usize..line - 1).rev() {
            let l = self.lines[i];
            let t = l.trim_start_matches(' ');
            if !t.starts_with('#') || !(lo..=hi).contains(&indentation(l)) {
                break;
            }
            let c = t.trim_end().strip_prefix('#').unwrap_or(t);
            out.push(c.strip_prefix(' ').unwrap_or(c).to_string());
        }
        out.reverse();
        out
    }
}

pub(super) fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

// ---------------------------------------------------------------------------------------------
// Writing YAML.

pub(super) fn needs_quotes(s: &str) -> bool {
    s.is_empty()
        || s.starts_with(|c: char| " -?:,[]{}#&*!|>'\"%@`".contains(c))
        || s.ends_with([' ', ':'])
        || s.contains(": ")
        || s.contains(" #")
        || s.contains(text::special)
}

pub(super) fn scalar(s: &str, style: Style) -> String {
    match style {
        Style::Plain if !needs_quotes(s) => s.to_string(),
        _ if !s.contains(['\\']) && !s.contains(text::special) => {
            format!("'{}'", s.replace('\'', "''"))
        }
        _ => text::double_quoted(s),
    }
}

pub(super) fn key(k: &str) -> String {
    if needs_quotes(k) || matches!(muster_manifest::yaml::resolve_plain(k), muster_manifest::yaml::Resolved::Null) {
        scalar(k, Style::Quoted)
    } else {
        k.to_string()
    }
}

pub(super) fn comments(out: &mut String, indent: usize, c: &[String]) {
    for line in c.iter().flat_map(|c| if c.is_empty() { vec![""] } else { c.lines().collect() }) {
        match text::one_line(line) {
            l if l.is_empty() => {
                let _ = writeln!(out, "{:indent$}#", "");
            }
            l => {
                let _ = writeln!(out, "{:indent$}# {l}", "");
            }
        }
    }
}

/// The value after `key:` (a scalar, `{}`, `[]`) or None when it goes on the next lines.
pub(super) fn inline(y: &Y) -> Option<String> {
    match y {
        Y::Scalar(s, Style::Folded) if s.contains(|c| text::special(c) && c != '\n') => Some(scalar(s, Style::Quoted)),
        Y::Scalar(s, Style::Folded) if s.contains('\n') || s.len() > 60 => None,
        Y::Scalar(s, Style::Folded) => Some(scalar(s, Style::Quoted)),
        Y::Scalar(s, _) if s.contains('\n') && literal_ok(s) => None,
        Y::Scalar(s, style) => Some(scalar(s, *style)),
        Y::Seq(v) if v.is_empty() => Some("[]".into()),
        Y::Map(e) if e.is_empty() => Some("{}".into()),
        _ => None,
    }
}

/// Can a multi-line string be written as a literal block (`|`)?
pub(super) fn literal_ok(s: &str) -> bool {
    !s.starts_with([' ', '\n'])
        && !s.contains(['\r', '\t'])
        && !s.trim_end_matches('\n').ends_with(' ')
        && !s.ends_with("\n\n")
        && !s.contains(|c| text::special(c) && c != '\n')
}

/// Writes the value of an entry whose `key:` is already written (without a newline).
pub(super) fn value_after_key(out: &mut String, y: &Y, indent: usize) {
    if let Some(s) = inline(y) {
        let _ = writeln!(out, " {s}");
        return;
    }
    match y {
        Y::Scalar(s, Style::Folded) => {
            out.push_str(" >-\n");
            for l in s.lines() {
                let _ = writeln!(out, "{:w$}{l}", "", w = indent + 2);
            }
        }
        Y::Scalar(s, _) => {
            out.push_str(if s.ends_with('\n') { " |\n" } else { " |-\n" });
            for l in s.trim_end_matches('\n').lines() {
                if l.is_empty() {
                    out.push('\n');
                } else {
                    let _ = writeln!(out, "{:w$}{l}", "", w = indent + 2);
                }
            }
        }
        Y::Map(e) => {
            out.push('\n');
            write_map(out, e, indent + 2);
        }
        Y::Seq(items) => {
            out.push('\n');
            write_seq(out, items, indent);
        }
    }
}

pub(super) fn write_map(out: &mut String, entries: &[(String, Y, Vec<String>)], indent: usize) {
    for (k, v, c) in entries {
        comments(out, indent, c);
        let _ = write!(out, "{:indent$}{}:", "", key(k));
        value_after_key(out, v, indent);
    }
}

/// Sequence items at `indent` (`- ` at the key's indentation, as kubectl writes them).
pub(super) fn write_seq(out: &mut String, items: &[Y], indent: usize) {
    for item in items {
        match item {
            Y::Map(e) if !e.is_empty() => {
                comments(out, indent, &e[0].2);
                let (k, v, _) = &e[0];
                let _ = write!(out, "{:indent$}- {}:", "", key(k));
                value_after_key(out, v, indent + 2);
                write_map(out, &e[1..], indent + 2);
            }
            Y::Seq(inner) if !inner.is_empty() => {
                let _ = writeln!(out, "{:indent$}-", "");
                write_seq(out, inner, indent + 2);
            }
            other => {
                let s = inline(other).unwrap_or_else(|| match other {
                    Y::Scalar(s, _) => text::double_quoted(s),
                    _ => unreachable!("non-empty collections are handled above"),
                });
                let _ = writeln!(out, "{:indent$}- {s}", "");
            }
        }
    }
}

/// One document: its comment lines, then the object.
pub(super) fn write_doc(out: &mut String, y: &Y, doc_comments: &[String]) {
    comments(out, 0, doc_comments);
    match y {
        Y::Map(e) => write_map(out, e, 0),
        other => value_after_key(out, other, 0),
    }
}
