//! The checked-in-shape AST: macros are already expanded into dedicated nodes.

use std::sync::Arc;

/// A literal value.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
}

impl BinOp {
    /// The operator's name in CEL's overload vocabulary (`_+_`, `@in`).
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "_+_",
            BinOp::Sub => "_-_",
            BinOp::Mul => "_*_",
            BinOp::Div => "_/_",
            BinOp::Rem => "_%_",
            BinOp::Eq => "_==_",
            BinOp::Ne => "_!=_",
            BinOp::Lt => "_<_",
            BinOp::Le => "_<=_",
            BinOp::Gt => "_>_",
            BinOp::Ge => "_>=_",
            BinOp::In => "@in",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompKind {
    All,
    Exists,
    ExistsOne,
    /// `map(x, t)` or, with a filter, `map(x, f, t)`.
    Map,
    Filter,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comprehension {
    pub kind: CompKind,
    pub range: Expr,
    /// The iteration variable; with two variables, the first is the index (lists) or key (maps).
    pub var: Arc<str>,
    pub var2: Option<Arc<str>>,
    /// For `map` with three arguments: the filter.
    pub filter: Option<Expr>,
    pub body: Expr,
}

/// One expression node and the byte offset in the source that errors point at.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub pos: u32,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Lit(Lit),
    Ident(Arc<str>),
    /// `a.b`, or `a.?b` when `optional`.
    Select {
        operand: Box<Expr>,
        field: Arc<str>,
        optional: bool,
    },
    /// `has(a.b)`.
    Has {
        operand: Box<Expr>,
        field: Arc<str>,
    },
    /// `a[b]`, or `a[?b]` when `optional`.
    Index {
        operand: Box<Expr>,
        index: Box<Expr>,
        optional: bool,
    },
    /// A function or method call; namespaced functions keep their dotted name (`optional.of`).
    Call {
        func: Arc<str>,
        target: Option<Box<Expr>>,
        args: Vec<Expr>,
    },
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `a && b && c`, flattened.
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Cond {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// Elements and whether each is optional (`?x`).
    List(Vec<(Expr, bool)>),
    /// Entries and whether each is optional (`?k: v`).
    Map(Vec<(Expr, Expr, bool)>),
    Comprehension(Box<Comprehension>),
    /// `cel.bind(var, init, body)`.
    Bind {
        var: Arc<str>,
        init: Box<Expr>,
        body: Box<Expr>,
    },
    /// Lowered after checking: a constant computed at compile time (`quantity('79Gi')`).
    Const(crate::value::Value),
    /// Lowered: `device.driver`.
    DeviceDriver,
    /// Lowered: `device.attributes[domain].id` (or `device.attributes.domain.id`), with the
    /// names interned; `id` is kept for the error message.
    DeviceAttr {
        domain: crate::intern::Sym,
        sym: crate::intern::Sym,
        id: Arc<str>,
    },
    /// Lowered: `device.capacity[domain].id`.
    DeviceCap {
        domain: crate::intern::Sym,
        sym: crate::intern::Sym,
        id: Arc<str>,
    },
}
