//! Text from the input placed into outputs and messages: table cells of a bounded width, long
//! echoed input cut short.
//!
//! Names are not length-checked on input, and Rust's format width (`{:<w$}`) is a `u16`: a
//! column 65,536 characters wide would panic. Tables pad with these helpers instead.

use std::borrow::Cow;

/// The widest a table cell is shown, in characters; longer text is cut with an ellipsis. Longer
/// than any valid Kubernetes reference (a `namespace/name` key is at most 63 + 1 + 253).
pub const CELL_MAX: usize = 320;

/// `s` as a table cell: at most [`CELL_MAX`] characters, the last one `…` when it was cut.
pub fn cell(s: &str) -> Cow<'_, str> {
    clip(s, CELL_MAX)
}

/// The width (in characters) `s` takes as a table cell.
pub fn cell_width(s: &str) -> usize {
    s.chars().take(CELL_MAX + 1).count().min(CELL_MAX)
}

/// Appends `s` as a cell left-aligned in `width` characters (no format width argument).
pub fn push_cell(out: &mut String, s: &str, width: usize) {
    let c = cell(s);
    let n = c.chars().count();
    out.push_str(&c);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(n)));
}

/// `s` cut to `max` characters, the last one `…` when it was cut.
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let end = s.char_indices().nth(max.saturating_sub(1)).map_or(s.len(), |(i, _)| i);
            Cow::Owned(format!("{}\u{2026}", &s[..end]))
        }
    }
}

/// A character that YAML text may not hold as it is: a control character (line breaks and tab
/// included), a Unicode line or paragraph separator, a byte-order mark or a non-character.
pub fn special(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')
}

/// `s` as a YAML double-quoted scalar: every [`special`] character escaped, so that it reads back
/// as exactly `s`.
pub fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if special(c) => {
                let _ = std::fmt::Write::write_fmt(&mut out, format_args!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` as the text of a one-line YAML comment (or any one-line message): line breaks, control
/// characters and the characters YAML does not allow in a stream (or reads as line breaks: NEL,
/// LS, PS, BOM) written as escapes (`\n`, `\0`, `\u{2028}`), so that the comment ends where the line
/// does and the output reads back.
pub fn one_line(s: &str) -> Cow<'_, str> {
    if !s.contains(special) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if special(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_cut_and_padded_without_format_widths() {
        assert_eq!(cell("abc"), "abc");
        let long = "x".repeat(70_000);
        let c = cell(&long);
        assert_eq!(c.chars().count(), CELL_MAX);
        assert!(c.ends_with('\u{2026}'));
        assert_eq!(cell_width(&long), CELL_MAX);
        assert_eq!(cell_width("ab"), 2);
        let mut out = String::new();
        push_cell(&mut out, "ab", 5);
        push_cell(&mut out, "é", 2);
        push_cell(&mut out, "toolong", 3);
        assert_eq!(out, "ab   é toolong");
        let mut out = String::new();
        push_cell(&mut out, &long, 100_000);
        assert_eq!(out.chars().count(), 100_000);
    }

    #[test]
    fn one_line_escapes_breaks_and_controls() {
        assert_eq!(one_line("plain text: é\t#"), "plain text: é\t#");
        assert_eq!(
            one_line("a\0b\nc\rd\u{1}\u{7f}\u{85}\u{2028}\u{feff}"),
            "a\\0b\\nc\\rd\\u{1}\\u{7f}\\u{85}\\u{2028}\\u{feff}"
        );
    }

    #[test]
    fn double_quoted_reads_back() {
        for s in ["", "plain", "a\"b\\c", "a\0b\nc\rd\te\u{1}\u{7f}\u{85}\u{2028}\u{feff}", "é ☃ 𝄞"] {
            let text = format!("k: {}\n", double_quoted(s));
            let docs = muster_manifest::yaml::parse_stream(&text).unwrap();
            assert_eq!(docs[0].root.get("k").unwrap().as_str(), Some(s), "{text}");
        }
    }

    #[test]
    fn clips_are_cut_at_a_character_boundary() {
        assert_eq!(clip("ééé", 2), "é\u{2026}");
        assert_eq!(clip("ééé", 3), "ééé");
    }
}
