//! A minimal CSV reader for trace importers ([`crate::openb`]): a header line naming the columns,
//! then one row per line, cells split on commas (no quoting: a quoted cell is refused). Columns
//! are found by their header name, not their position. Every read is checked, and every error
//! names the file, the line, the column (1-based, where the cell starts) and the column's name.

use crate::trace::TraceError;

/// A table read from a file.
pub struct Table<'t> {
    pub file: &'t str,
    /// The header's column names, trimmed.
    pub header: Vec<&'t str>,
    /// The header's line (1-based; blank lines before it are skipped).
    pub header_line: u64,
    pub rows: Vec<Row<'t>>,
}

/// One data line: its number and its cells with the column each starts at.
pub struct Row<'t> {
    pub line: u64,
    pub cells: Vec<(u64, &'t str)>,
    /// The column just past the line's end (where a missing cell would have been).
    pub end: u64,
}

/// One cell, located, for typed reads.
#[derive(Clone, Copy)]
pub struct Cell<'t> {
    pub file: &'t str,
    pub line: u64,
    pub column: u64,
    /// The column's header name.
    pub name: &'t str,
    /// The text, trimmed.
    pub text: &'t str,
}

fn error(file: &str, line: u64, column: u64, field: Option<&str>, message: String) -> TraceError {
    TraceError { file: file.into(), line: Some(line), column: Some(column), field: field.map(Into::into), message }
}

/// Splits a line into trimmed cells with their 1-based columns; refuses quoted cells.
fn split<'t>(file: &str, line: u64, text: &'t str) -> Result<Vec<(u64, &'t str)>, TraceError> {
    let mut cells = Vec::new();
    // Counted as it goes (linear in the line, however many cells it has).
    let mut column = 1;
    for part in text.split(',') {
        let cell = part.trim();
        if cell.starts_with('"') {
            return Err(error(file, line, column, None, "quoted cells are not supported".into()));
        }
        cells.push((column, cell));
        column += part.chars().count() as u64 + 1;
    }
    Ok(cells)
}

impl<'t> Table<'t> {
    /// Reads `text` (the name `file` is for errors): a byte-order mark and blank lines are
    /// skipped, `\r\n` line ends are accepted. Every row must have as many cells as the header.
    pub fn parse(file: &'t str, text: &'t str) -> Result<Table<'t>, TraceError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text.lines().enumerate().map(|(i, l)| (i as u64 + 1, l.trim_end_matches('\r')));
        let Some((header_line, header)) = lines.find(|(_, l)| !l.trim().is_empty()) else {
            return Err(TraceError {
                file: file.into(),
                line: None,
                column: None,
                field: None,
                message: "empty: expected a header line naming the columns".into(),
            });
        };
        let header: Vec<&str> = split(file, header_line, header)?.into_iter().map(|(_, c)| c).collect();
        let mut seen = std::collections::HashSet::new();
        for name in &header {
            if !seen.insert(*name) {
                return Err(error(file, header_line, 1, Some(name), "the header names this column twice".into()));
            }
        }
        let mut rows = Vec::new();
        for (line, l) in lines.filter(|(_, l)| !l.trim().is_empty()) {
            let cells = split(file, line, l)?;
            let end = l.chars().count() as u64 + 1;
            if cells.len() > header.len() {
                let (column, _) = cells[header.len()];
                let message = format!("{} cells, but the header names {} columns", cells.len(), header.len());
                return Err(error(file, line, column, None, message));
            }
            if cells.len() < header.len() {
                let message = format!("missing (the row has {} cells, the header {})", cells.len(), header.len());
                return Err(error(file, line, end, Some(header[cells.len()]), message));
            }
            rows.push(Row { line, cells, end });
        }
        Ok(Table { file, header, header_line, rows })
    }

    /// The index of the column named `name`, if the header has it.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| *h == name)
    }

    /// The index of a column the table must have.
    pub fn required(&self, name: &str) -> Result<usize, TraceError> {
        self.column(name).ok_or_else(|| {
            let message = format!("the header has no column {name:?} (it has: {})", self.header.join(", "));
            error(self.file, self.header_line, 1, None, message)
        })
    }

    /// The cell of `row` in column `index` (an index from [`Table::column`]).
    pub fn cell(&self, row: &Row<'t>, index: usize) -> Cell<'t> {
        let (column, text) = row.cells[index];
        Cell { file: self.file, line: row.line, column, name: self.header[index], text }
    }
}

impl Cell<'_> {
    /// An error about this cell.
    pub fn error(&self, message: impl Into<String>) -> TraceError {
        error(self.file, self.line, self.column, Some(self.name), message.into())
    }

    /// Whether the cell is empty (or `nan`, as pandas writes a missing value).
    pub fn is_empty(&self) -> bool {
        self.text.is_empty() || self.text.eq_ignore_ascii_case("nan")
    }

    /// A whole number in `0..=max`; `12.0` is read as 12 (pandas writes integer columns with
    /// missing values as floats).
    pub fn uint(&self, max: u64) -> Result<u64, TraceError> {
        if self.is_empty() {
            return Err(self.error("missing: expected a whole number"));
        }
        let digits = match self.text.split_once('.') {
            Some((whole, fraction)) if !fraction.is_empty() && fraction.bytes().all(|b| b == b'0') => whole,
            Some(_) => return Err(self.error(format!("{:?} is not a whole number", self.text))),
            None => self.text,
        };
        if let Some(rest) = digits.strip_prefix('-')
            && !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(self.error(format!("{} is negative", self.text)));
        }
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.error(format!("{:?} is not a whole number", self.text)));
        }
        match digits.parse::<u64>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(self.error(format!("{} is too large (at most {max})", self.text))),
        }
    }

    /// [`Cell::uint`], or `None` for an empty cell.
    pub fn opt_uint(&self, max: u64) -> Result<Option<u64>, TraceError> {
        if self.is_empty() { Ok(None) } else { self.uint(max).map(Some) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_found_by_name_and_cells_located() {
        let t = Table::parse("f.csv", "\u{feff}\nb, a\r\n1,22\n\n3,  4\n").unwrap();
        assert_eq!((t.header.clone(), t.header_line), (vec!["b", "a"], 2));
        let a = t.column("a").unwrap();
        let c = t.cell(&t.rows[1], a);
        assert_eq!((c.line, c.column, c.name, c.text), (5, 3, "a", "4"));
        assert_eq!(c.uint(10), Ok(4));
        assert!(t.required("z").unwrap_err().to_string().starts_with("f.csv:2:1: the header has no column \"z\""));
    }

    #[test]
    fn columns_count_characters_not_bytes_and_wide_rows_are_read() {
        let t = Table::parse("f.csv", "é,b\nçç,2\n").unwrap();
        let c = t.cell(&t.rows[0], 1);
        assert_eq!((c.column, c.text), (4, "2"));
        let wide: Vec<String> = (0..20_000).map(|i| format!("c{i}")).collect();
        let text = format!("{}\n{}\n", wide.join(","), vec!["1"; 20_000].join(","));
        let t = Table::parse("f.csv", &text).unwrap();
        // "1,1,...": cell i starts at column 2i + 1.
        assert_eq!(t.cell(&t.rows[0], 19_999).column, 39_999);
    }

    #[test]
    fn ragged_rows_and_quotes_are_refused_with_their_place() {
        let e = Table::parse("f.csv", "a,b,c\n1,2\n").err().unwrap();
        assert_eq!(e.to_string(), "f.csv:2:4: c: missing (the row has 2 cells, the header 3)");
        let e = Table::parse("f.csv", "a,b\n1,2,3\n").err().unwrap();
        assert_eq!(e.to_string(), "f.csv:2:5: 3 cells, but the header names 2 columns");
        let e = Table::parse("f.csv", "a,b\n1,\"x,y\"\n").err().unwrap();
        assert_eq!(e.to_string(), "f.csv:2:3: quoted cells are not supported");
        let e = Table::parse("f.csv", "a,a\n").err().unwrap();
        assert!(e.to_string().contains("names this column twice"), "{e}");
        assert!(Table::parse("f.csv", "\n \n").err().unwrap().message.starts_with("empty"));
    }

    #[test]
    fn numbers_are_checked() {
        let cell = |text| Cell { file: "f.csv", line: 3, column: 7, name: "n", text };
        assert_eq!(cell("12").uint(100), Ok(12));
        assert_eq!(cell("12.00").uint(100), Ok(12));
        assert_eq!(cell("").opt_uint(100), Ok(None));
        assert_eq!(cell("nan").opt_uint(100), Ok(None));
        for (text, message) in [
            ("-5", "-5 is negative"),
            ("1.5", "\"1.5\" is not a whole number"),
            ("12.", "\"12.\" is not a whole number"),
            ("abc", "\"abc\" is not a whole number"),
            ("+3", "\"+3\" is not a whole number"),
            ("101", "101 is too large (at most 100)"),
            ("99999999999999999999999", "99999999999999999999999 is too large (at most 100)"),
            ("", "missing: expected a whole number"),
        ] {
            assert_eq!(cell(text).uint(100).unwrap_err().to_string(), format!("f.csv:3:7: n: {message}"));
        }
    }
}
