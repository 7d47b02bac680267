//! The Kubernetes DRA CEL environment: device selectors parsed, checked against the `device`
//! variable's type, and evaluated with CEL's semantics and Kubernetes' libraries and runtime cost
//! limit. It owns the language and nothing else: it never reads files, never decides an
//! allocation (a runtime error is returned to the allocator, which decides what it means), and
//! never panics on any input string.
//!
//! ```
//! use muster_cel::{Env, DeviceView};
//! let env = Env::default();
//! let program = env.compile(r#"device.driver == "gpu.nvidia.com""#).unwrap();
//! # use k8s_openapi::api::resource::v1::Device;
//! let device = DeviceView::new("gpu.nvidia.com", &Device { name: "gpu-0".into(), ..Default::default() }).unwrap();
//! assert_eq!(env.eval(&program, &device), Ok(true));
//! ```
//!
//! # Supported functions
//!
//! With the upstream reference for each group:
//!
//! - CEL standard library (cel-spec `langdef.md`): operators, `size`, `contains`, `startsWith`,
//!   `endsWith`, `matches` (RE2 syntax through the `regex` crate), `int`, `uint`, `double`,
//!   `string`, `bytes`, `bool`, `dyn`, `type`, macros `has`, `all`, `exists`, `exists_one` /
//!   `existsOne`, `map` (2 and 3 arguments), `filter`, and the two-variable forms of `all`,
//!   `exists`, `existsOne` (cel-go `ext.TwoVarComprehensions`).
//! - Strings extension (cel-go `ext.Strings`, version 2): `charAt`, `indexOf`, `lastIndexOf`,
//!   `lowerAscii`, `upperAscii`, `replace`, `split`, `substring`, `trim`, `join`, `reverse`,
//!   `strings.quote`.
//! - `cel.bind` (cel-go `ext.Bindings`); optionals (cel-go `OptionalTypes`): `.?`, `[?]`,
//!   `?` list and map entries, `optional.of`, `optional.none`, `optional.ofNonZeroValue`,
//!   `hasValue`, `value`, `orValue`, `or`.
//! - Kubernetes libraries (`k8s.io/apiserver/pkg/cel/library`): quantity (`quantity`,
//!   `isQuantity`, `compareTo`, `isLessThan`, `isGreaterThan`, `add`, `sub`, `sign`, `isInteger`,
//!   `asInteger`, `asApproximateFloat`), semver (`semver`, `isSemver` with optional
//!   normalization, `major`, `minor`, `patch`, `compareTo`, `isLessThan`, `isGreaterThan`), regex
//!   (`find`, `findAll`), lists (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`), sets
//!   (`sets.contains`, `sets.equivalent`, `sets.intersects`).
//! - DRA (`k8s.io/dynamic-resource-allocation/cel`): the `device` variable and `includes`.
//!
//! Costs: evaluation meters cel-go's runtime cost and stops at Kubernetes' limit of 1,000,000
//! (`operation cancelled: actual cost limit exceeded`); `Program::estimated_cost` is cel-go's
//! static worst-case estimate with the DRA size limits, as API validation computes it.
//!
//! Not supported yet (a compile error names the function): URL, IP, CIDR, the format library,
//! `transformList` / `transformMap`, durations and timestamps, quantity `mul`/`div`.

mod ast;
mod check;
mod cost;
mod device;
mod eval;
mod functions;
mod intern;
mod lexer;
mod lower;
mod parser;
mod regex_cache;
pub mod semver;
mod value;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

pub use device::{DeviceError, DeviceView};
pub use eval::SELECTOR_COST_LIMIT;
pub use parser::{MAX_DEPTH, MAX_EXPRESSION_LEN};
pub use value::Value;

/// The next [`Program::id`]. (Wraps after four billion compilations; each `Env` compiles a
/// source once.)
fn next_program_id() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A compiled selector.
#[derive(Debug)]
pub struct Program {
    source: Arc<str>,
    expr: ast::Expr,
    /// cel-go's static worst-case cost estimate, as API validation computes it.
    pub estimated_cost: u64,
    /// Unique among the programs of this process (every `Env` draws from one counter), for
    /// verdict memos: a memo keyed by it cannot mistake one Env's program for another's.
    pub id: u32,
}

impl Program {
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(src: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(src.len());
    let before = &src[..src.floor_char_boundary(pos)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}

/// How much of a line longer than [`MAX_EXPRESSION_LEN`] a compile error echoes.
const SOURCE_LINE_ECHO: usize = 120;

/// A compile error, printed as cel-go prints it:
///
/// ```text
/// compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')
///  | noSuchVar
///  | ^
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub source_line: String,
}

impl CompileError {
    fn new(src: &str, pos: usize, message: String) -> Self {
        let (line, column) = line_col(src, pos);
        let mut source_line = src.lines().nth(line - 1).unwrap_or("").to_string();
        // Only a refused over-long expression has such a line: echo its start, not all of it.
        if source_line.len() > parser::MAX_EXPRESSION_LEN {
            let keep = source_line.floor_char_boundary(SOURCE_LINE_ECHO.max(column + 40).min(source_line.len()));
            let more = source_line.len() - keep;
            source_line.truncate(keep);
            source_line.push_str(&format!("\u{2026} ({more} more bytes)"));
        }
        CompileError { line, column, message, source_line }
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "compilation failed: ERROR: <input>:{}:{}: {}\n | {}\n | {}^",
            self.line,
            self.column,
            self.message,
            self.source_line,
            ".".repeat(self.column.saturating_sub(1))
        )
    }
}

impl std::error::Error for CompileError {}

/// A runtime error: the message, and where in the expression it arose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

impl RuntimeError {
    /// True for a missing attribute or capacity (`no such key`), which upstream extends with a
    /// hint about optional chaining.
    pub fn is_missing_key(&self) -> bool {
        self.message.starts_with("no such key:")
    }

    pub fn is_cost_limit(&self) -> bool {
        self.message.contains("actual cost limit exceeded")
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if self.is_missing_key() {
            f.write_str(". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields")?;
        }
        Ok(())
    }
}

impl std::error::Error for RuntimeError {}

/// Where a selector is written, for error messages: a DeviceClass or a claim's request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectorOwner<'a> {
    /// `class <name>`.
    Class(&'a str),
    /// `claim <namespace/name>` (upstream names the claim, not the request, in CEL errors).
    Claim(&'a str),
}

impl fmt::Display for SelectorOwner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectorOwner::Class(n) => write!(f, "class {n}"),
            SelectorOwner::Claim(c) => write!(f, "claim {c}"),
        }
    }
}

/// Upstream's text for a selector that does not compile:
/// `class <name>: selector #<i>: CEL compile error: <detail>`.
pub fn selector_compile_error(owner: SelectorOwner<'_>, index: usize, e: &CompileError) -> String {
    format!("{owner}: selector #{index}: CEL compile error: {e}")
}

/// Upstream's text for a selector that fails on a device:
/// `claim <c>: selector #<i> on device <driver>/<pool>/<device>: CEL runtime error: <err>`.
pub fn selector_runtime_error(owner: SelectorOwner<'_>, index: usize, device: &str, e: &RuntimeError) -> String {
    format!("{owner}: selector #{index} on device {device}: CEL runtime error: {e}")
}

/// The environment: compiles selectors (cached by text), and evaluates them.
pub struct Env {
    programs: Mutex<HashMap<Arc<str>, Arc<Program>>>,
    regexes: regex_cache::RegexCache,
    cost_limit: u64,
}

impl Default for Env {
    fn default() -> Self {
        Env::with_cost_limit(SELECTOR_COST_LIMIT)
    }
}

impl Env {
    pub fn with_cost_limit(cost_limit: u64) -> Self {
        Env { programs: Mutex::default(), regexes: Default::default(), cost_limit }
    }

    /// Parses and checks `src`. Successful compilations are cached by text; failed ones are
    /// not (as upstream), and are cheap to redo.
    pub fn compile(&self, src: &str) -> Result<Arc<Program>, CompileError> {
        let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = programs.get(src) {
            return Ok(p.clone());
        }
        let expr = parser::parse(src).map_err(|e| {
            let msg = if e.msg.starts_with("Syntax error") { e.msg } else { format!("Syntax error: {}", e.msg) };
            CompileError::new(src, e.pos, msg)
        })?;
        check::check(&expr).map_err(|e| CompileError::new(src, e.pos as usize, e.msg))?;
        let estimated_cost = cost::estimate(&expr);
        let mut expr = expr;
        lower::lower(&mut expr);
        let program = Arc::new(Program { source: src.into(), expr, estimated_cost, id: next_program_id() });
        programs.insert(program.source.clone(), program.clone());
        Ok(program)
    }

    /// Evaluates a selector against a device: `Ok(verdict)`, or the runtime error (including a
    /// result that is not a bool, and exceeding the cost limit).
    pub fn eval(&self, program: &Program, device: &DeviceView) -> Result<bool, RuntimeError> {
        self.eval_with_cost(program, device).map(|(v, _)| v)
    }

    /// [`Env::eval`], also returning the runtime cost spent.
    pub fn eval_with_cost(&self, program: &Program, device: &DeviceView) -> Result<(bool, u64), RuntimeError> {
        let (r, cost) = self.eval_metered(program, device);
        r.map(|v| (v, cost))
    }

    /// [`Env::eval`] charged to a [`Budget`] shared by many evaluations: `None`, without
    /// evaluating, once the budget is spent. An evaluation that fails is charged what it spent.
    pub fn eval_charged(
        &self,
        program: &Program,
        device: &DeviceView,
        budget: &Budget,
    ) -> Option<Result<bool, RuntimeError>> {
        if budget.is_spent() {
            return None;
        }
        let (r, cost) = self.eval_metered(program, device);
        budget.charge(cost);
        Some(r)
    }

    /// An evaluation and the runtime cost it spent, whatever its outcome.
    pub fn eval_metered(&self, program: &Program, device: &DeviceView) -> (Result<bool, RuntimeError>, u64) {
        let mut ctx = eval::Ctx::new(device, &self.regexes, self.cost_limit);
        let r = ctx.eval(&program.expr);
        let cost = ctx.cost;
        let runtime = |pos: u32, message: String| {
            let (line, column) = line_col(&program.source, pos as usize);
            RuntimeError { message, line, column }
        };
        let r = match r {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(runtime(
                program.expr.pos,
                format!("CEL result of type {} could not be converted to bool", other.type_name()),
            )),
            Err(e) => Err(runtime(e.pos, e.msg)),
        };
        (r, cost)
    }
}

/// A total runtime cost for many evaluations (one command's), on top of the per-evaluation limit:
/// a selector just under Kubernetes' limit can take tens of milliseconds per device, so without it
/// a command over many devices has no bound on its time. Kubernetes has no such total; commands
/// that stop for it say so.
#[derive(Debug)]
pub struct Budget {
    total: u64,
    left: std::cell::Cell<u64>,
}

impl Budget {
    /// The budget `muster devices`, `check` and `why` use: a hundred evaluations at the
    /// per-evaluation limit (a few seconds on the development machine).
    pub const COMMAND: u64 = 100 * SELECTOR_COST_LIMIT;

    /// The budget of one scheduling attempt (all the nodes it tries): a thousand evaluations at
    /// the per-evaluation limit; ordinary selectors cost tens of units per device, so only
    /// selectors near the limit on thousands of devices reach it.
    pub const ATTEMPT: u64 = 1000 * SELECTOR_COST_LIMIT;

    pub fn new(total: u64) -> Self {
        Budget { total, left: std::cell::Cell::new(total) }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// What was charged so far.
    pub fn spent(&self) -> u64 {
        self.total - self.left.get()
    }

    pub fn is_spent(&self) -> bool {
        self.left.get() == 0
    }

    /// Takes `cost` from what is left (an evaluation's cost, or a remembered one's).
    pub fn charge(&self, cost: u64) {
        self.left.set(self.left.get().saturating_sub(cost));
    }
}

/// Memoized verdicts of (program, device) pairs: a selector's verdict on a device never changes
/// while both stay the same, so the allocator asks once per pair.
#[derive(Default)]
pub struct Verdicts {
    map: HashMap<u64, Result<bool, Arc<RuntimeError>>, std::hash::BuildHasherDefault<IdHasher>>,
}

impl Verdicts {
    fn key(program: u32, device: u32) -> u64 {
        (u64::from(program) << 32) | u64::from(device)
    }

    #[inline]
    pub fn get(&self, program: u32, device: u32) -> Option<&Result<bool, Arc<RuntimeError>>> {
        self.map.get(&Self::key(program, device))
    }

    pub fn insert(&mut self, program: u32, device: u32, verdict: Result<bool, RuntimeError>) {
        self.map.insert(Self::key(program, device), verdict.map_err(Arc::new));
    }

    /// The verdict, evaluating and remembering it on first use.
    pub fn get_or_eval(
        &mut self,
        env: &Env,
        program: &Program,
        device_id: u32,
        device: &DeviceView,
    ) -> Result<bool, Arc<RuntimeError>> {
        self.map
            .entry(Self::key(program.id, device_id))
            .or_insert_with(|| env.eval(program, device).map_err(Arc::new))
            .clone()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// A hasher for keys that are already well-mixed integers: one multiply.
#[derive(Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Eight bytes a step: strings (driver, pool and device names) hash in a few steps.
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().expect("chunks of eight")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        // FxHash's step: every field of a composite key moves the state.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        // A `str`'s terminator: one step, not a chunk of one byte.
        self.write_u64(u64::from(n));
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}
