//! A recursive-descent CEL parser with macro expansion, bounded depth, and byte positions.

use crate::ast::{BinOp, CompKind, Comprehension, Expr, Kind, Lit};
use crate::lexer::{Tok, Token, tokenize};

/// Longest expression accepted: the API server rejects selectors over 10 KiB.
pub const MAX_EXPRESSION_LEN: usize = 10 * 1024;
/// Deepest AST accepted. Real selectors are a few levels deep; the bound keeps every recursive
/// walk (check, evaluation, drop) far from the stack's end, even in debug builds.
pub const MAX_DEPTH: usize = 128;
/// Deepest nesting of parentheses, calls, lists and maps the parser descends into.
pub const MAX_NESTING: usize = 32;

#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    pub pos: usize,
    pub msg: String,
}

pub fn parse(src: &str) -> Result<Expr, ParseError> {
    if src.len() > MAX_EXPRESSION_LEN {
        return Err(ParseError { pos: 0, msg: format!("expression is longer than {MAX_EXPRESSION_LEN} bytes") });
    }
    let toks = tokenize(src).map_err(|e| ParseError { pos: e.pos, msg: e.msg })?;
    let mut p = Parser { toks, at: 0, depth: 0 };
    let e = p.expr()?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected("end of expression"));
    }
    let depth = ast_depth(&e);
    if depth > MAX_DEPTH {
        return Err(ParseError {
            pos: 0,
            msg: format!("expression nests {depth} levels deep; the limit is {MAX_DEPTH}"),
        });
    }
    Ok(e)
}

/// The AST's depth, computed without recursion (deep trees must not overflow the stack here).
fn ast_depth(e: &Expr) -> usize {
    let mut max = 0;
    let mut stack = vec![(e, 1usize)];
    let mut kids = Vec::new();
    while let Some((e, d)) = stack.pop() {
        max = max.max(d);
        if d > MAX_DEPTH {
            return d;
        }
        children(e, &mut kids);
        stack.extend(kids.drain(..).map(|c| (c, d + 1)));
    }
    max
}

/// The direct children of a node.
pub(crate) fn children<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match &e.kind {
        Kind::Lit(_)
        | Kind::Ident(_)
        | Kind::Const(_)
        | Kind::DeviceDriver
        | Kind::DeviceAttr { .. }
        | Kind::DeviceCap { .. } => {}
        Kind::Select { operand, .. } | Kind::Has { operand, .. } => out.push(operand),
        Kind::Index { operand, index, .. } => out.extend([&**operand, &**index]),
        Kind::Call { target, args, .. } => {
            out.extend(target.as_deref());
            out.extend(args);
        }
        Kind::Not(x) | Kind::Neg(x) => out.push(x),
        Kind::Binary { lhs, rhs, .. } => out.extend([&**lhs, &**rhs]),
        Kind::And(xs) | Kind::Or(xs) => out.extend(xs),
        Kind::Cond { cond, then, otherwise } => out.extend([&**cond, &**then, &**otherwise]),
        Kind::List(xs) => out.extend(xs.iter().map(|(x, _)| x)),
        Kind::Map(xs) => xs.iter().for_each(|(k, v, _)| out.extend([k, v])),
        Kind::Comprehension(c) => {
            out.extend([&c.range, &c.body]);
            out.extend(c.filter.as_ref());
        }
        Kind::Bind { init, body, .. } => out.extend([&**init, &**body]),
    }
}

struct Parser {
    toks: Vec<Token>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].tok
    }

    fn pos(&self) -> usize {
        self.toks[self.at].pos
    }

    fn next(&mut self) -> Token {
        let t = self.toks[self.at].clone();
        if t.tok != Tok::Eof {
            self.at += 1;
        }
        t
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: Tok) -> Result<usize, ParseError> {
        if self.peek() == &t { Ok(self.next().pos) } else { Err(self.unexpected(&format!("'{t}'"))) }
    }

    fn unexpected(&self, expecting: &str) -> ParseError {
        ParseError {
            pos: self.pos(),
            msg: format!("Syntax error: mismatched input '{}' expecting {expecting}", self.peek()),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(ParseError {
                pos: self.pos(),
                msg: format!("expression nests more than {MAX_NESTING} levels deep"),
            });
        }
        Ok(())
    }

    /// Counts one more link of an operator or member chain (built by a loop, not by recursion).
    fn link(&self, n: &mut usize) -> Result<(), ParseError> {
        *n += 1;
        if *n > MAX_DEPTH {
            return Err(ParseError {
                pos: self.pos(),
                msg: format!("expression nests more than {MAX_DEPTH} levels deep"),
            });
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.enter()?;
        let cond = self.or()?;
        let r = if self.peek() == &Tok::Question {
            let pos = self.next().pos;
            let then = self.or()?;
            self.expect(Tok::Colon)?;
            let otherwise = self.expr()?;
            Expr {
                pos: pos as u32,
                kind: Kind::Cond { cond: Box::new(cond), then: Box::new(then), otherwise: Box::new(otherwise) },
            }
        } else {
            cond
        };
        self.depth -= 1;
        Ok(r)
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let first = self.and()?;
        if self.peek() != &Tok::Or {
            return Ok(first);
        }
        let pos = self.pos() as u32;
        let mut xs = vec![first];
        while self.eat(&Tok::Or) {
            xs.push(self.and()?);
        }
        Ok(Expr { pos, kind: Kind::Or(xs) })
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let first = self.relation()?;
        if self.peek() != &Tok::And {
            return Ok(first);
        }
        let pos = self.pos() as u32;
        let mut xs = vec![first];
        while self.eat(&Tok::And) {
            xs.push(self.relation()?);
        }
        Ok(Expr { pos, kind: Kind::And(xs) })
    }

    fn relation(&mut self) -> Result<Expr, ParseError> {
        self.left_assoc(Self::addition, |t| match t {
            Tok::Lt => Some(BinOp::Lt),
            Tok::Le => Some(BinOp::Le),
            Tok::Gt => Some(BinOp::Gt),
            Tok::Ge => Some(BinOp::Ge),
            Tok::Eq => Some(BinOp::Eq),
            Tok::Ne => Some(BinOp::Ne),
            Tok::In => Some(BinOp::In),
            _ => None,
        })
    }

    fn addition(&mut self) -> Result<Expr, ParseError> {
        self.left_assoc(Self::multiplication, |t| match t {
            Tok::Plus => Some(BinOp::Add),
            Tok::Minus => Some(BinOp::Sub),
            _ => None,
        })
    }

    fn multiplication(&mut self) -> Result<Expr, ParseError> {
        self.left_assoc(Self::unary, |t| match t {
            Tok::Star => Some(BinOp::Mul),
            Tok::Slash => Some(BinOp::Div),
            Tok::Percent => Some(BinOp::Rem),
            _ => None,
        })
    }

    /// One precedence level of left-associative binary operators, built by a loop.
    fn left_assoc(
        &mut self,
        operand: fn(&mut Self) -> Result<Expr, ParseError>,
        op_of: fn(&Tok) -> Option<BinOp>,
    ) -> Result<Expr, ParseError> {
        let mut lhs = operand(self)?;
        let mut n = 0;
        loop {
            self.link(&mut n)?;
            let Some(op) = op_of(self.peek()) else { return Ok(lhs) };
            let pos = self.next().pos as u32;
            let rhs = operand(self)?;
            lhs = Expr { pos, kind: Kind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) } };
        }
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        match self.peek() {
            Tok::Not => {
                let pos = self.pos() as u32;
                let mut n = 0;
                while self.eat(&Tok::Not) {
                    n += 1;
                }
                let operand = self.member()?;
                // An even run of `!` cancels out, as in cel-go.
                Ok(if n % 2 == 0 { operand } else { Expr { pos, kind: Kind::Not(Box::new(operand)) } })
            }
            Tok::Minus => {
                let pos = self.pos() as u32;
                let mut n = 0;
                while self.eat(&Tok::Minus) {
                    n += 1;
                }
                // A single minus before a numeric literal is part of the literal.
                if n % 2 == 1 {
                    let lit = match self.peek().clone() {
                        Tok::Int(i) => Some(Lit::Int(-i)),
                        Tok::IntOverflow(_) => Some(Lit::Int(i64::MIN)),
                        Tok::Double(d) => Some(Lit::Double(-d)),
                        _ => None,
                    };
                    if let Some(lit) = lit {
                        self.next();
                        let e = Expr { pos, kind: Kind::Lit(lit) };
                        return self.member_suffix(e);
                    }
                }
                let operand = self.member()?;
                Ok(if n % 2 == 0 { operand } else { Expr { pos, kind: Kind::Neg(Box::new(operand)) } })
            }
            _ => self.member(),
        }
    }

    fn member(&mut self) -> Result<Expr, ParseError> {
        let primary = self.primary()?;
        self.member_suffix(primary)
    }

    fn member_suffix(&mut self, mut e: Expr) -> Result<Expr, ParseError> {
        let mut n = 0;
        loop {
            self.link(&mut n)?;
            match self.peek() {
                Tok::Dot | Tok::DotQ => {
                    let optional = self.peek() == &Tok::DotQ;
                    let pos = self.next().pos as u32;
                    let Tok::Ident(name) = self.peek().clone() else {
                        return Err(self.unexpected("IDENTIFIER"));
                    };
                    self.next();
                    if !optional && self.peek() == &Tok::LParen {
                        let call_pos = self.next().pos as u32;
                        let args = self.args(Tok::RParen)?;
                        e = self.member_call(e, name, args, call_pos)?;
                    } else {
                        e = Expr { pos, kind: Kind::Select { operand: Box::new(e), field: name.into(), optional } };
                    }
                }
                Tok::LBracket | Tok::LBracketQ => {
                    let optional = self.peek() == &Tok::LBracketQ;
                    let pos = self.next().pos as u32;
                    let index = self.expr()?;
                    self.expect(Tok::RBracket)?;
                    e = Expr { pos, kind: Kind::Index { operand: Box::new(e), index: Box::new(index), optional } };
                }
                _ => return Ok(e),
            }
        }
    }

    fn args(&mut self, close: Tok) -> Result<Vec<Expr>, ParseError> {
        let mut args = Vec::new();
        if self.eat(&close) {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(&close) {
                return Ok(args);
            }
            self.expect(Tok::Comma)?;
        }
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let t = self.next();
        let pos = t.pos as u32;
        let lit = |l: Lit| Ok(Expr { pos, kind: Kind::Lit(l) });
        match t.tok {
            Tok::Int(i) => lit(Lit::Int(i)),
            Tok::IntOverflow(_) => Err(ParseError { pos: t.pos, msg: "int literal out of range".into() }),
            Tok::UInt(u) => lit(Lit::UInt(u)),
            Tok::Double(d) => lit(Lit::Double(d)),
            Tok::Str(s) => lit(Lit::String(s.into())),
            Tok::Bytes(b) => lit(Lit::Bytes(b.into())),
            Tok::True => lit(Lit::Bool(true)),
            Tok::False => lit(Lit::Bool(false)),
            Tok::Null => lit(Lit::Null),
            Tok::LParen => {
                let e = self.expr()?;
                self.expect(Tok::RParen)?;
                Ok(e)
            }
            Tok::LBracket => {
                self.enter()?;
                let mut elems = Vec::new();
                while self.peek() != &Tok::RBracket {
                    let optional = self.eat(&Tok::Question);
                    elems.push((self.expr()?, optional));
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                self.expect(Tok::RBracket)?;
                self.depth -= 1;
                Ok(Expr { pos, kind: Kind::List(elems) })
            }
            Tok::LBrace => {
                self.enter()?;
                let mut entries = Vec::new();
                while self.peek() != &Tok::RBrace {
                    let optional = self.eat(&Tok::Question);
                    let k = self.expr()?;
                    self.expect(Tok::Colon)?;
                    let v = self.expr()?;
                    entries.push((k, v, optional));
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                self.expect(Tok::RBrace)?;
                self.depth -= 1;
                Ok(Expr { pos, kind: Kind::Map(entries) })
            }
            Tok::Dot => match self.next().tok {
                // A leading dot names the root scope: `.device` is `device`.
                Tok::Ident(name) => self.ident_or_call(name, pos),
                _ => Err(ParseError { pos: t.pos, msg: "Syntax error: expected an identifier after '.'".into() }),
            },
            Tok::Ident(name) => self.ident_or_call(name, pos),
            other => {
                self.at -= usize::from(other != Tok::Eof);
                Err(self.unexpected("an expression"))
            }
        }
    }

    fn ident_or_call(&mut self, name: String, pos: u32) -> Result<Expr, ParseError> {
        if self.peek() == &Tok::LBrace {
            return Err(ParseError {
                pos: self.pos(),
                msg: "message construction is not supported in DRA selectors".into(),
            });
        }
        if self.peek() != &Tok::LParen {
            return Ok(Expr { pos, kind: Kind::Ident(name.into()) });
        }
        let call_pos = self.next().pos as u32;
        let args = self.args(Tok::RParen)?;
        if name == "has" {
            return match args.len() {
                1 => match args.into_iter().next().map(|a| (a.pos, a.kind)) {
                    Some((p, Kind::Select { operand, field, optional: false })) => {
                        Ok(Expr { pos: p, kind: Kind::Has { operand, field } })
                    }
                    _ => Err(ParseError { pos: call_pos as usize, msg: "invalid argument to has() macro".into() }),
                },
                _ => Err(ParseError { pos: call_pos as usize, msg: "invalid argument to has() macro".into() }),
            };
        }
        Ok(Expr { pos: call_pos, kind: Kind::Call { func: name.into(), target: None, args } })
    }

    /// A method call `target.name(args)`: expands macros, keeps namespaced functions
    /// (`optional.of(x)`, `cel.bind(...)`) as such.
    fn member_call(&mut self, target: Expr, name: String, args: Vec<Expr>, pos: u32) -> Result<Expr, ParseError> {
        let simple_name = |e: &Expr| match &e.kind {
            Kind::Ident(n) => Ok(n.clone()),
            _ => Err(ParseError { pos: e.pos as usize, msg: "argument must be a simple name".into() }),
        };
        if let Kind::Ident(ns) = &target.kind {
            if ns.as_ref() == "cel" && name == "bind" && args.len() == 3 {
                let mut it = args.into_iter();
                let var = simple_name(&it.next().expect("3 args"))?;
                let init = it.next().expect("3 args");
                let body = it.next().expect("3 args");
                return Ok(Expr { pos, kind: Kind::Bind { var, init: Box::new(init), body: Box::new(body) } });
            }
            if matches!(ns.as_ref(), "optional" | "sets" | "strings" | "math" | "cel") {
                return Ok(Expr { pos, kind: Kind::Call { func: format!("{ns}.{name}").into(), target: None, args } });
            }
        }
        let kind = match (name.as_str(), args.len()) {
            ("all", 2 | 3) => Some(CompKind::All),
            ("exists", 2 | 3) => Some(CompKind::Exists),
            ("exists_one" | "existsOne", 2 | 3) => Some(CompKind::ExistsOne),
            ("map", 2 | 3) => Some(CompKind::Map),
            ("filter", 2) => Some(CompKind::Filter),
            _ => None,
        };
        let Some(kind) = kind else {
            return Ok(Expr { pos, kind: Kind::Call { func: name.into(), target: Some(Box::new(target)), args } });
        };
        let mut it = args.into_iter();
        let var = simple_name(&it.next().expect("2 or 3 args"))?;
        let (var2, filter, body) = match (kind, it.len()) {
            (CompKind::Map, 2) => {
                let f = it.next().expect("3 args");
                (None, Some(f), it.next().expect("3 args"))
            }
            (_, 2) => {
                let v2 = simple_name(&it.next().expect("3 args"))?;
                (Some(v2), None, it.next().expect("3 args"))
            }
            _ => (None, None, it.next().expect("2 args")),
        };
        Ok(Expr {
            pos,
            kind: Kind::Comprehension(Box::new(Comprehension { kind, range: target, var, var2, filter, body })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Expr {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    #[test]
    fn parses_the_dra_shapes() {
        ok(
            r#"device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].productName == 'NVIDIA H100 80GB HBM3'"#,
        );
        ok("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0");
        ok("device.attributes['d'].?x.orValue(0) > 1 || has(device.attributes.d) ? true : false");
        ok("cel.bind(dra, device.attributes['dra.example.com'], dra.a && dra.b)");
        ok("[1, 2, 3].exists(x, x > 2) && {'a': 1}.all(k, v, v > 0) && [1].map(x, x > 0, x * 2).size() == 1");
        ok("-9223372036854775808 < 0 && 1u + 2u == 3u && 0x1F == 31 && 1.5e3 == 1500.0 && b'\\xff' != b''");
        ok("r'raw\\n' + '''triple\nline''' + \"\\u00e9\\U0001F600\\101\"");
    }

    #[test]
    fn rejects_bad_input_with_a_position() {
        let cases = [
            ("device.driver == ", 17),
            ("a.b(", 4),
            ("has(a)", 3),
            ("[1].all(1, true)", 8),
            ("'unterminated", 0),
            ("1 + if", 4),
            ("9223372036854775808", 0),
            ("a ? b", 5),
        ];
        for (src, pos) in cases {
            let e = parse(src).expect_err(src);
            assert_eq!(e.pos, pos, "{src}: {e:?}");
        }
    }

    #[test]
    fn depth_is_bounded_without_overflowing_the_stack() {
        let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        assert!(parse(&deep).unwrap_err().msg.contains("levels deep"));
        let chain = format!("a{}", ".b".repeat(3000));
        assert!(parse(&chain).unwrap_err().msg.contains("levels deep"));
        let sum = format!("1{}", " + 1".repeat(2000));
        assert!(parse(&sum).is_err());
        assert!(parse(&"x".repeat(MAX_EXPRESSION_LEN + 1)).is_err());
    }
}
