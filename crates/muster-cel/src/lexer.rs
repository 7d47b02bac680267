//! CEL tokens (cel-spec `langdef.md`, "Syntax").

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Int(i64),
    /// An integer literal too large for `int` (only valid right after unary minus as `i64::MIN`).
    IntOverflow(u64),
    UInt(u64),
    Double(f64),
    Str(String),
    Bytes(Vec<u8>),
    Ident(String),
    True,
    False,
    Null,
    In,
    LParen,
    RParen,
    LBracket,
    /// `[?`
    LBracketQ,
    RBracket,
    LBrace,
    RBrace,
    Dot,
    /// `.?`
    DotQ,
    Comma,
    Colon,
    Question,
    Not,
    Minus,
    Plus,
    Star,
    Slash,
    Percent,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Tok::Int(i) => return write!(f, "{i}"),
            Tok::IntOverflow(u) => return write!(f, "{u}"),
            Tok::UInt(u) => return write!(f, "{u}u"),
            Tok::Double(d) => return write!(f, "{d}"),
            Tok::Str(s) => return write!(f, "{s:?}"),
            Tok::Bytes(_) => "bytes literal",
            Tok::Ident(i) => return f.write_str(i),
            Tok::True => "true",
            Tok::False => "false",
            Tok::Null => "null",
            Tok::In => "in",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::LBracketQ => "[?",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Dot => ".",
            Tok::DotQ => ".?",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::Question => "?",
            Tok::Not => "!",
            Tok::Minus => "-",
            Tok::Plus => "+",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Eq => "==",
            Tok::Ne => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::And => "&&",
            Tok::Or => "||",
            Tok::Eof => "<EOF>",
        };
        f.write_str(s)
    }
}

/// A token and the byte offset where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub pos: usize,
}

/// A lexical error at a byte offset.
#[derive(Clone, Debug, PartialEq)]
pub struct LexError {
    pub pos: usize,
    pub msg: String,
}

const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

pub fn tokenize(src: &str) -> Result<Vec<Token>, LexError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let two = |t: Tok, i: &mut usize| {
            *i += 2;
            t
        };
        let one = |t: Tok, i: &mut usize| {
            *i += 1;
            t
        };
        let tok = match c {
            b'(' => one(Tok::LParen, &mut i),
            b')' => one(Tok::RParen, &mut i),
            b'[' if b.get(i + 1) == Some(&b'?') => two(Tok::LBracketQ, &mut i),
            b'[' => one(Tok::LBracket, &mut i),
            b']' => one(Tok::RBracket, &mut i),
            b'{' => one(Tok::LBrace, &mut i),
            b'}' => one(Tok::RBrace, &mut i),
            b'.' if b.get(i + 1) == Some(&b'?') => two(Tok::DotQ, &mut i),
            b'.' if b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) => number(src, &mut i)?,
            b'.' => one(Tok::Dot, &mut i),
            b',' => one(Tok::Comma, &mut i),
            b':' => one(Tok::Colon, &mut i),
            b'?' => one(Tok::Question, &mut i),
            b'!' if b.get(i + 1) == Some(&b'=') => two(Tok::Ne, &mut i),
            b'!' => one(Tok::Not, &mut i),
            b'-' => one(Tok::Minus, &mut i),
            b'+' => one(Tok::Plus, &mut i),
            b'*' => one(Tok::Star, &mut i),
            b'/' => one(Tok::Slash, &mut i),
            b'%' => one(Tok::Percent, &mut i),
            b'=' if b.get(i + 1) == Some(&b'=') => two(Tok::Eq, &mut i),
            b'<' if b.get(i + 1) == Some(&b'=') => two(Tok::Le, &mut i),
            b'<' => one(Tok::Lt, &mut i),
            b'>' if b.get(i + 1) == Some(&b'=') => two(Tok::Ge, &mut i),
            b'>' => one(Tok::Gt, &mut i),
            b'&' if b.get(i + 1) == Some(&b'&') => two(Tok::And, &mut i),
            b'|' if b.get(i + 1) == Some(&b'|') => two(Tok::Or, &mut i),
            b'0'..=b'9' => number(src, &mut i)?,
            b'"' | b'\'' => Tok::Str(string_lit(src, &mut i, false, false)?),
            _ if c == b'_' || c.is_ascii_alphabetic() => {
                // String and bytes prefixes: r, b, rb, br (any case).
                let rest = &b[i..];
                let prefix_len = rest.iter().take(2).take_while(|x| matches!(x, b'r' | b'R' | b'b' | b'B')).count();
                let quote_at = i + prefix_len;
                let prefix = &src[i..quote_at];
                let distinct =
                    prefix.len() < 2 || prefix.eq_ignore_ascii_case("rb") || prefix.eq_ignore_ascii_case("br");
                if prefix_len > 0 && distinct && matches!(b.get(quote_at), Some(b'"' | b'\'')) {
                    let raw = prefix.contains(['r', 'R']);
                    let bytes = prefix.contains(['b', 'B']);
                    i = quote_at;
                    if bytes {
                        Tok::Bytes(bytes_lit(src, &mut i, raw)?)
                    } else {
                        Tok::Str(string_lit(src, &mut i, raw, false)?)
                    }
                } else {
                    while i < b.len() && (b[i] == b'_' || b[i].is_ascii_alphanumeric()) {
                        i += 1;
                    }
                    let word = &src[start..i];
                    match word {
                        "true" => Tok::True,
                        "false" => Tok::False,
                        "null" => Tok::Null,
                        "in" => Tok::In,
                        w if RESERVED.contains(&w) => {
                            return Err(LexError { pos: start, msg: format!("reserved identifier: {w}") });
                        }
                        w => Tok::Ident(w.to_string()),
                    }
                }
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(LexError { pos: start, msg: format!("token recognition error at: '{ch}'") });
            }
        };
        out.push(Token { tok, pos: start });
    }
    out.push(Token { tok: Tok::Eof, pos: src.len() });
    Ok(out)
}

fn number(src: &str, i: &mut usize) -> Result<Tok, LexError> {
    let b = src.as_bytes();
    let start = *i;
    let err = |msg: &str| LexError { pos: start, msg: msg.to_string() };
    if b[*i] == b'0' && matches!(b.get(*i + 1), Some(b'x' | b'X')) {
        *i += 2;
        let ds = *i;
        while *i < b.len() && b[*i].is_ascii_hexdigit() {
            *i += 1;
        }
        if ds == *i {
            return Err(err("invalid hex literal"));
        }
        let v = u64::from_str_radix(&src[ds..*i], 16).map_err(|_| err("hex literal out of range"))?;
        if matches!(b.get(*i), Some(b'u' | b'U')) {
            *i += 1;
            return Ok(Tok::UInt(v));
        }
        return i64::try_from(v).map(Tok::Int).map_err(|_| err("int literal out of range"));
    }
    while *i < b.len() && b[*i].is_ascii_digit() {
        *i += 1;
    }
    let mut float = false;
    if b.get(*i) == Some(&b'.') && b.get(*i + 1).is_some_and(|d| d.is_ascii_digit()) {
        float = true;
        *i += 1;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
    }
    if matches!(b.get(*i), Some(b'e' | b'E')) {
        let mut j = *i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if !b.get(j).is_some_and(|d| d.is_ascii_digit()) {
            return Err(err("invalid exponent"));
        }
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        float = true;
        *i = j;
    }
    let text = &src[start..*i];
    if float {
        let v: f64 = text.parse().map_err(|_| err("invalid double literal"))?;
        if v.is_infinite() {
            return Err(err("double literal out of range"));
        }
        return Ok(Tok::Double(v));
    }
    if matches!(b.get(*i), Some(b'u' | b'U')) {
        *i += 1;
        return text.parse().map(Tok::UInt).map_err(|_| err("uint literal out of range"));
    }
    match text.parse::<i64>() {
        Ok(v) => Ok(Tok::Int(v)),
        Err(_) => match text.parse::<u64>() {
            Ok(u) if u == 1 << 63 => Ok(Tok::IntOverflow(u)),
            _ => Err(err("int literal out of range")),
        },
    }
}

/// Reads the quoted body starting at `*i` (at the quote); returns the raw body and advances past
/// the closing quote.
fn quoted<'s>(src: &'s str, i: &mut usize, raw: bool) -> Result<&'s str, LexError> {
    let b = src.as_bytes();
    let start = *i;
    let q = b[*i];
    let triple = b.get(*i + 1) == Some(&q) && b.get(*i + 2) == Some(&q);
    let open = if triple { 3 } else { 1 };
    let mut j = *i + open;
    loop {
        if j >= b.len() {
            return Err(LexError { pos: start, msg: "unterminated string literal".into() });
        }
        if !raw && b[j] == b'\\' {
            j += 2;
            continue;
        }
        if !triple && (b[j] == b'\n' || b[j] == b'\r') {
            return Err(LexError { pos: start, msg: "unterminated string literal".into() });
        }
        if b[j] == q && (!triple || (b.get(j + 1) == Some(&q) && b.get(j + 2) == Some(&q))) {
            let body = &src[*i + open..j];
            *i = j + open;
            return Ok(body);
        }
        j += 1;
    }
}

fn string_lit(src: &str, i: &mut usize, raw: bool, _bytes: bool) -> Result<String, LexError> {
    let start = *i;
    let body = quoted(src, i, raw)?;
    if raw {
        return Ok(body.to_string());
    }
    let bytes = unescape(body, start, false)?;
    String::from_utf8(bytes).map_err(|_| LexError { pos: start, msg: "invalid UTF-8 in string literal".into() })
}

fn bytes_lit(src: &str, i: &mut usize, raw: bool) -> Result<Vec<u8>, LexError> {
    let start = *i;
    let body = quoted(src, i, raw)?;
    if raw { Ok(body.as_bytes().to_vec()) } else { unescape(body, start, true) }
}

fn unescape(body: &str, pos: usize, bytes: bool) -> Result<Vec<u8>, LexError> {
    let err = |m: &str| LexError { pos, msg: m.to_string() };
    let mut out = Vec::with_capacity(body.len());
    let mut chars = body.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let Some((_, e)) = chars.next() else { return Err(err("invalid escape sequence")) };
        let push_char = |cp: u32, out: &mut Vec<u8>| -> Result<(), LexError> {
            if bytes && cp <= 0xff {
                out.push(cp as u8);
                return Ok(());
            }
            let ch = char::from_u32(cp).ok_or_else(|| err("invalid unicode code point"))?;
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            Ok(())
        };
        let mut hex = |n: usize| -> Result<u32, LexError> {
            let mut v = 0u32;
            for _ in 0..n {
                let (_, d) = chars.next().ok_or_else(|| err("invalid escape sequence"))?;
                v = v * 16 + d.to_digit(16).ok_or_else(|| err("invalid escape sequence"))?;
            }
            Ok(v)
        };
        match e {
            '\\' => out.push(b'\\'),
            '"' => out.push(b'"'),
            '\'' => out.push(b'\''),
            '`' => out.push(b'`'),
            '?' => out.push(b'?'),
            'a' => out.push(7),
            'b' => out.push(8),
            'f' => out.push(12),
            'n' => out.push(b'\n'),
            'r' => out.push(b'\r'),
            't' => out.push(b'\t'),
            'v' => out.push(11),
            'x' | 'X' => {
                let v = hex(2)?;
                push_char(v, &mut out)?;
            }
            'u' if !bytes => {
                let v = hex(4)?;
                push_char(v, &mut out)?;
            }
            'U' if !bytes => {
                let v = hex(8)?;
                push_char(v, &mut out)?;
            }
            '0'..='3' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    let (_, d) = chars.next().ok_or_else(|| err("invalid escape sequence"))?;
                    v = v * 8 + d.to_digit(8).ok_or_else(|| err("invalid escape sequence"))?;
                }
                push_char(v, &mut out)?;
            }
            _ => return Err(err("invalid escape sequence")),
        }
    }
    Ok(out)
}
