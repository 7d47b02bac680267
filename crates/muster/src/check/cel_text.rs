//! DRA CEL selector text as `check` and `convert` read it: the attributes and capacities it names,
//! bare quantity literals (`80Gi`, which is not CEL), and the rewrite of the outdated forms of the
//! seed article (workload-spec.md §12, row 2) into 1.37 CEL.
//!
//! This is a token-level reading, not a second CEL implementation: whether an expression compiles
//! is decided by `muster_cel::Env::compile`. The tokens here only find spans to point at and to
//! replace, and every rewritten expression is compiled again by the caller.

/// The kind of a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokKind {
    Ident,
    Number,
    Str,
    Punct,
}

/// One token and where it starts (a byte offset into the expression).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tok<'s> {
    pub kind: TokKind,
    pub text: &'s str,
    pub start: usize,
}

impl Tok<'_> {
    pub fn end(&self) -> usize {
        self.start + self.text.len()
    }

    fn is(&self, kind: TokKind, text: &str) -> bool {
        self.kind == kind && self.text == text
    }

    fn punct(&self, text: &str) -> bool {
        self.is(TokKind::Punct, text)
    }
}

/// Splits `src` into tokens. Never fails: anything unexpected becomes a one-character token.
pub fn tokens(src: &str) -> Vec<Tok<'_>> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
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
        let start = i;
        // String prefixes (r, R, b, B) directly before a quote belong to the string.
        let prefixed = matches!(c, b'r' | b'R' | b'b' | b'B') && matches!(b.get(i + 1), Some(b'\'' | b'"'));
        let kind = if c == b'\'' || c == b'"' || prefixed {
            if prefixed {
                i += 1;
            }
            let q = b[i];
            let triple = b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q);
            i += if triple { 3 } else { 1 };
            loop {
                match b.get(i) {
                    None => break,
                    Some(b'\\') => i += 2,
                    Some(&x) if x == q => {
                        if !triple {
                            i += 1;
                            break;
                        }
                        if b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) {
                            i += 3;
                            break;
                        }
                        i += 1;
                    }
                    Some(_) => i += 1,
                }
            }
            TokKind::Str
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            TokKind::Ident
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            if c == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')) {
                i += 2;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    i += 1;
                }
            } else {
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                if matches!(b.get(i), Some(b'e' | b'E'))
                    && (b.get(i + 1).is_some_and(u8::is_ascii_digit)
                        || (matches!(b.get(i + 1), Some(b'+' | b'-')) && b.get(i + 2).is_some_and(u8::is_ascii_digit)))
                {
                    i += 2;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            if matches!(b.get(i), Some(b'u' | b'U')) && !b.get(i + 1).is_some_and(|x| x.is_ascii_alphanumeric()) {
                i += 1;
            }
            TokKind::Number
        } else {
            let two = src.get(i..i + 2).unwrap_or("");
            i += if matches!(two, "&&" | "||" | "==" | "!=" | ">=" | "<=" | "?.") {
                2
            } else {
                src[i..].chars().next().map_or(1, char::len_utf8)
            };
            TokKind::Punct
        };
        let end = i.min(b.len());
        out.push(Tok { kind, text: &src[start..end], start });
    }
    out
}

/// The value of a string token (quotes removed, simple escapes resolved).
pub fn unquote(tok: &str) -> String {
    let raw = tok.starts_with(['r', 'R']);
    let t = tok.trim_start_matches(['r', 'R', 'b', 'B']);
    let q = if t.starts_with("'''") || t.starts_with("\"\"\"") { 3 } else { 1 };
    let inner = t.get(q..t.len().saturating_sub(q)).unwrap_or("");
    if raw || !inner.contains('\\') {
        return inner.to_string();
    }
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `device.attributes['domain'].name` or `device.capacity['domain'].name` (or `['name']`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ref {
    pub capacity: bool,
    pub domain: String,
    /// None for `device.attributes['domain']` without a name after it (as in `'x' in ...`).
    pub name: Option<String>,
    /// Byte offsets: of `device`, of the `attributes`/`capacity` word, of the domain string
    /// token, of the name, and the end of the reference.
    pub start: usize,
    pub map_word: (usize, usize),
    pub domain_tok: (usize, usize),
    pub name_tok: Option<(usize, usize)>,
    pub end: usize,
    /// Only tested for presence: `has(device.attributes['d'].x)`, `'x' in device.attributes['d']`.
    pub guard: bool,
}

/// Every attribute and capacity reference in `src`, in order.
pub fn refs(src: &str) -> Vec<Ref> {
    let t = tokens(src);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let ok = t[i].is(TokKind::Ident, "device")
            && t.get(i + 1).is_some_and(|x| x.punct(".") || x.punct("?."))
            && t.get(i + 2).is_some_and(|x| x.is(TokKind::Ident, "attributes") || x.is(TokKind::Ident, "capacity"))
            && t.get(i + 3).is_some_and(|x| x.punct("["))
            && t.get(i + 4).is_some_and(|x| x.kind == TokKind::Str)
            && t.get(i + 5).is_some_and(|x| x.punct("]"));
        if !ok {
            i += 1;
            continue;
        }
        let capacity = t[i + 2].text == "capacity";
        let domain = unquote(t[i + 4].text);
        let mut end = t[i + 5].end();
        let mut name = None;
        let mut name_tok = None;
        let mut next = i + 6;
        if t.get(i + 6).is_some_and(|x| x.punct(".") || x.punct("?."))
            && let Some(n) = t.get(i + 7).filter(|x| x.kind == TokKind::Ident)
        {
            name = Some(n.text.to_string());
            name_tok = Some((n.start, n.end()));
            end = n.end();
            next = i + 8;
        } else if t.get(i + 6).is_some_and(|x| x.punct("["))
            && let Some(n) = t.get(i + 7).filter(|x| x.kind == TokKind::Str)
            && t.get(i + 8).is_some_and(|x| x.punct("]"))
        {
            name = Some(unquote(n.text));
            name_tok = Some((n.start, n.end()));
            end = t[i + 8].end();
            next = i + 9;
        }
        let in_has = i >= 2 && t[i - 1].punct("(") && t[i - 2].is(TokKind::Ident, "has");
        let mut guard = in_has && name.is_some();
        if name.is_none() && i >= 2 && t[i - 1].is(TokKind::Ident, "in") && t[i - 2].kind == TokKind::Str {
            // `'x' in device.attributes['d']`: a presence test of x.
            name = Some(unquote(t[i - 2].text));
            guard = true;
        }
        out.push(Ref {
            capacity,
            domain,
            name,
            start: t[i].start,
            map_word: (t[i + 2].start, t[i + 2].end()),
            domain_tok: (t[i + 4].start, t[i + 4].end()),
            name_tok,
            end,
            guard,
        });
        i = next;
    }
    out
}

/// Quantity suffixes (Kubernetes' quantity grammar).
const QUANTITY_SUFFIXES: &[&str] = &["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"];

/// A quantity written as a bare literal (`80Gi`): a number directly followed by a suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BareQuantity {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

pub fn bare_quantities(src: &str) -> Vec<BareQuantity> {
    let t = tokens(src);
    t.windows(2)
        .filter(|w| {
            w[0].kind == TokKind::Number
                && w[1].kind == TokKind::Ident
                && w[1].start == w[0].end()
                && QUANTITY_SUFFIXES.contains(&w[1].text)
        })
        .map(|w| BareQuantity { start: w[0].start, end: w[1].end(), text: src[w[0].start..w[1].end()].to_string() })
        .collect()
}

/// The DRA driver that publishes under a vendor's bare domain, as the vendors name their drivers
/// (landscape.md §4): `nvidia.com` is not a driver, `gpu.nvidia.com` is.
pub fn driver_for_domain(domain: &str) -> Option<&'static str> {
    match domain {
        "nvidia.com" => Some("gpu.nvidia.com"),
        "amd.com" => Some("gpu.amd.com"),
        "intel.com" => Some("gpu.intel.com"),
        _ => None,
    }
}

/// What NVIDIA's GPU driver (`gpu.nvidia.com`, dra-driver-nvidia-gpu v0.4) publishes, for inputs
/// without ResourceSlices (landscape.md §4.1).
pub const NVIDIA_DRIVER: &str = "gpu.nvidia.com";
pub const NVIDIA_ATTRIBUTES: &[&str] = &[
    "type",
    "uuid",
    "productName",
    "brand",
    "architecture",
    "cudaComputeCapability",
    "driverVersion",
    "cudaDriverVersion",
    "addressingMode",
    "gpuModuleID",
    "partition1",
    "partition2",
    "partition4",
    "partition8",
    "parentUUID",
    "profile",
];
pub const NVIDIA_CAPACITIES: &[&str] =
    &["memory", "multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines", "shares"];

/// Why a name under `gpu.nvidia.com` is not what the driver publishes, and what it publishes
/// instead (`None` when the name is fine).
pub fn nvidia_name_problem(capacity: bool, name: &str) -> Option<(String, Option<String>)> {
    let published_attr = NVIDIA_ATTRIBUTES.contains(&name);
    let published_cap = NVIDIA_CAPACITIES.contains(&name) || name.starts_with("memorySlice");
    match (capacity, name) {
        (false, _) if published_attr => None,
        (true, _) if published_cap => None,
        (false, "model" | "name" | "product") => Some((
            format!(
                "{NVIDIA_DRIVER} publishes no attribute {name:?}; the GPU model is the attribute productName (e.g. 'NVIDIA H100 80GB HBM3')"
            ),
            Some("productName".into()),
        )),
        (false, _) if published_cap => Some((
            format!("{name} is a capacity of {NVIDIA_DRIVER} devices, not an attribute: use device.capacity"),
            None,
        )),
        (true, _) if published_attr => Some((
            format!("{name} is an attribute of {NVIDIA_DRIVER} devices, not a capacity: use device.attributes"),
            None,
        )),
        (false, "index" | "minor") => Some((
            format!("{NVIDIA_DRIVER} no longer publishes {name:?} (removed in 2025); select a GPU by uuid"),
            None,
        )),
        _ => Some((
            format!(
                "{NVIDIA_DRIVER} publishes no {} {name:?}; it publishes {}",
                if capacity { "capacity" } else { "attribute" },
                if capacity { NVIDIA_CAPACITIES.join(", ") } else { NVIDIA_ATTRIBUTES.join(", ") }
            ),
            None,
        )),
    }
}

/// An attribute naming NVLink or NVSwitch grouping, which is not a device attribute.
fn is_nvlink(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("nvlink") || n.contains("nvswitch")
}

/// A rewritten expression and what was assumed doing it (for `# muster convert:` comments).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rewrite {
    /// The expression, top-level `&&` clauses one per line.
    pub text: String,
    pub notes: Vec<String>,
}

/// Top-level `&&` clauses of `src`, and false when a top-level `||` or `?:` kept it whole.
fn clauses(src: &str) -> (Vec<String>, bool) {
    let t = tokens(src);
    let mut depth = 0i32;
    let mut cuts = Vec::new();
    for tok in &t {
        match tok.text {
            "(" | "[" | "{" if tok.kind == TokKind::Punct => depth += 1,
            ")" | "]" | "}" if tok.kind == TokKind::Punct => depth -= 1,
            "||" | "?" if depth == 0 && tok.kind == TokKind::Punct => return (vec![src.trim().to_string()], false),
            "&&" if depth == 0 && tok.kind == TokKind::Punct => cuts.push((tok.start, tok.end())),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut from = 0;
    for (s, e) in cuts {
        out.push(src[from..s].trim().to_string());
        from = e;
    }
    out.push(src[from..].trim().to_string());
    (out.into_iter().filter(|c| !c.is_empty()).collect(), true)
}

/// Applies (start, end, replacement) edits that do not overlap.
fn apply(src: &str, mut edits: Vec<(usize, usize, String)>) -> String {
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut s = src.to_string();
    for (a, b, r) in edits {
        s.replace_range(a..b, &r);
    }
    s
}

/// The start of the operand that ends just before token `end` (exclusive): a chain of
/// identifiers, `.` selections, index and call brackets.
fn operand_start(t: &[Tok<'_>], end: usize) -> Option<usize> {
    let mut i = end;
    let mut start = None;
    loop {
        if i == 0 {
            return start;
        }
        let tok = &t[i - 1];
        if tok.punct(")") || tok.punct("]") {
            let (open, close) = if tok.text == ")" { ("(", ")") } else { ("[", "]") };
            let mut depth = 0;
            let mut j = i;
            loop {
                if j == 0 {
                    return None;
                }
                j -= 1;
                if t[j].punct(close) {
                    depth += 1;
                } else if t[j].punct(open) {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
            }
            i = j;
            start = Some(t[j].start);
            // A call's or index's operand continues before the bracket.
            if i > 0 && (t[i - 1].kind == TokKind::Ident || t[i - 1].punct(")") || t[i - 1].punct("]")) {
                continue;
            }
            return start;
        }
        if matches!(tok.kind, TokKind::Ident | TokKind::Number | TokKind::Str) {
            i -= 1;
            start = Some(tok.start);
            if i > 0 && (t[i - 1].punct(".") || t[i - 1].punct("?.")) {
                i -= 1;
                continue;
            }
            return start;
        }
        return start;
    }
}

/// Rewrites the outdated forms of a selector into 1.37 CEL:
///
/// - attribute and capacity domains that are a vendor's domain, not a driver (`nvidia.com`), to
///   the vendor's driver (`gpu.nvidia.com`);
/// - `memory` read as an attribute to the capacity it is;
/// - `model == 'H100'` on NVIDIA devices to `productName.contains('H100')`;
/// - a clause on NVLink (`nvlink == true`), which NVIDIA's driver does not publish as an attribute,
///   is dropped with a note; a clause on another name it does not publish is kept, with a note;
/// - `x >= 80Gi` (not CEL) to `x.compareTo(quantity('80Gi')) >= 0`;
/// - and `device.driver == '<driver>' &&` is put first when the selector reads one driver's
///   attributes without testing the driver (class selectors run on every device of every driver).
pub fn rewrite(src: &str) -> Rewrite {
    let mut notes = Vec::new();
    let mut out_clauses: Vec<String> = Vec::new();
    let (split, splittable) = clauses(src);
    for clause in split {
        // Pass 1: domains, attribute/capacity, names.
        let mut edits = Vec::new();
        let mut drop_clause = None;
        for r in refs(&clause) {
            let driver = driver_for_domain(&r.domain).map(str::to_string);
            if let Some(d) = &driver {
                edits.push((r.domain_tok.0, r.domain_tok.1, format!("'{d}'")));
                let note = format!("domain '{}' became '{d}': attributes are keyed by the driver's name", r.domain);
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            let effective = driver.as_deref().unwrap_or(&r.domain);
            if effective != NVIDIA_DRIVER {
                if !r.capacity && r.name.as_deref() == Some("memory") && r.name_tok.is_some() {
                    edits.push((r.map_word.0, r.map_word.1, "capacity".into()));
                    notes.push("memory is a capacity, not an attribute".into());
                }
                continue;
            }
            let (Some(name), Some(name_tok)) = (&r.name, r.name_tok) else { continue };
            match nvidia_name_problem(r.capacity, name) {
                None => {}
                Some((_, Some(renamed))) => {
                    edits.push((name_tok.0, name_tok.1, renamed.clone()));
                    notes.push(format!(
                        "attribute {name} became {renamed}, the driver's name for the GPU model (e.g. 'NVIDIA H100 80GB HBM3')"
                    ));
                }
                Some(_) if !r.capacity && NVIDIA_CAPACITIES.contains(&name.as_str()) => {
                    edits.push((r.map_word.0, r.map_word.1, "capacity".into()));
                    notes.push(format!("{name} is a capacity of {NVIDIA_DRIVER} devices, not an attribute"));
                }
                Some(_) if r.capacity && NVIDIA_ATTRIBUTES.contains(&name.as_str()) => {
                    edits.push((r.map_word.0, r.map_word.1, "attributes".into()));
                    notes.push(format!("{name} is an attribute of {NVIDIA_DRIVER} devices, not a capacity"));
                }
                Some(_) if !r.guard && is_nvlink(name) => drop_clause = Some(name.clone()),
                Some((why, _)) if !r.guard => notes.push(format!("kept `{}`: {why}", clause.trim())),
                Some(_) => {}
            }
        }
        if let Some(name) = drop_clause {
            notes.push(format!(
                "dropped `{clause}`: {NVIDIA_DRIVER} publishes no attribute {name:?}, so the clause would fail on every device; \
                 NVLink/NVSwitch grouping is a claim constraint (matchAttribute: {NVIDIA_DRIVER}/partition8, or the node label nvidia.com/gpu.clique)"
            ));
            continue;
        }
        let clause2 = apply(&clause, edits);
        // Pass 2: productName equality from model, and bare quantities in comparisons.
        let t = tokens(&clause2);
        let mut edits = Vec::new();
        for r in refs(&clause2) {
            if r.domain == NVIDIA_DRIVER
                && !r.capacity
                && r.name.as_deref() == Some("productName")
                && clause.contains("model")
                && let Some(k) = t.iter().position(|x| x.start >= r.end)
                && t.get(k).is_some_and(|x| x.punct("=="))
                && let Some(v) = t.get(k + 1).filter(|x| x.kind == TokKind::Str)
                && k + 2 == t.len()
            {
                edits.push((r.end, v.end(), format!(".contains({})", v.text)));
                notes.push(format!(
                    "== {0} became .contains({0}) on productName, which holds the full product name; \
                     compare it with == and the full name to be exact",
                    v.text
                ));
            }
        }
        for q in bare_quantities(&clause2) {
            let Some(qi) = t.iter().position(|x| x.start == q.start) else { continue };
            let op = qi.checked_sub(1).map(|k| t[k]);
            let lhs = op
                .filter(|o| o.kind == TokKind::Punct && matches!(o.text, ">=" | ">" | "<=" | "<" | "==" | "!="))
                .and_then(|_| operand_start(&t, qi - 1));
            match (op, lhs) {
                (Some(o), Some(l)) => {
                    let lhs_text = clause2[l..o.start].trim_end();
                    edits.push((l, q.end, format!("{lhs_text}.compareTo(quantity('{}')) {} 0", q.text, o.text)));
                    if q.text.ends_with("Gi") && matches!(o.text, ">=" | ">") {
                        notes.push(format!(
                            "a GPU sold as \"{}GB\" reports less than {} (an H100 80GB reports 81559Mi); \
                             `muster devices` shows what the devices report",
                            q.text.trim_end_matches("Gi"),
                            q.text
                        ));
                    }
                }
                _ => edits.push((q.start, q.end, format!("quantity('{}')", q.text))),
            }
            notes.push(format!("{} is not CEL: quantities are compared with quantity() and compareTo()", q.text));
        }
        out_clauses.push(apply(&clause2, edits));
    }
    // Class selectors are evaluated on every device of every driver: test the driver first.
    let all = out_clauses.join(" && ");
    let domains: std::collections::BTreeSet<String> =
        refs(&all).into_iter().map(|r| r.domain).filter(|d| d != "resource.kubernetes.io" && d.contains('.')).collect();
    // Only with another rewrite: a selector that needs none is left as written.
    if !notes.is_empty() && domains.len() == 1 && !all.contains("device.driver") && !out_clauses.is_empty() {
        let d = domains.into_iter().next().expect("one");
        if !splittable {
            out_clauses[0] = format!("({})", out_clauses[0]);
        }
        out_clauses.insert(0, format!("device.driver == '{d}'"));
        notes.push(format!(
            "added device.driver == '{d}' first: a class's selector runs on the devices of every driver"
        ));
    }
    if out_clauses.is_empty() {
        out_clauses.push("true".into());
    }
    notes.dedup();
    Rewrite { text: out_clauses.join(" &&\n"), notes }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: &str = "device.attributes['nvidia.com'].model == 'H100' &&\ndevice.attributes['nvidia.com'].memory >= 80Gi &&\ndevice.attributes['nvidia.com'].nvlink == true\n";

    #[test]
    fn finds_references_and_guards() {
        let r = refs(
            "'memory' in device.capacity['gpu.nvidia.com'] && device.attributes[\"x.com\"]['a b'] == 1 && has(device.attributes['y.com'].z)",
        );
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].capacity, r[0].name.as_deref(), r[0].guard), (true, Some("memory"), true));
        assert_eq!((r[1].domain.as_str(), r[1].name.as_deref(), r[1].guard), ("x.com", Some("a b"), false));
        assert_eq!((r[2].domain.as_str(), r[2].guard), ("y.com", true));
    }

    #[test]
    fn finds_bare_quantities_only() {
        let q = bare_quantities("a >= 80Gi && b == 1 && c < 1.5T && d == 'x 80Gi' && e == 2 Gi");
        let texts: Vec<&str> = q.iter().map(|q| q.text.as_str()).collect();
        assert_eq!(texts, ["80Gi", "1.5T"]);
    }

    #[test]
    fn rewrites_the_seed_selector() {
        let r = rewrite(SEED);
        assert_eq!(
            r.text,
            "device.driver == 'gpu.nvidia.com' &&\n\
             device.attributes['gpu.nvidia.com'].productName.contains('H100') &&\n\
             device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
        );
        assert!(r.notes.iter().any(|n| n.contains("nvlink")), "{:?}", r.notes);
        assert!(r.notes.iter().any(|n| n.contains("81559Mi")), "{:?}", r.notes);
        muster_cel::Env::default().compile(&r.text).expect("the rewrite compiles");
    }

    #[test]
    fn leaves_valid_selectors_alone() {
        let s = "device.driver == 'gpu.nvidia.com' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0";
        assert_eq!(rewrite(s).text, s.replace(" && ", " &&\n"));
        assert!(rewrite(s).notes.is_empty());
        let unguarded = "device.attributes['x.com'].a == 1";
        assert_eq!(rewrite(unguarded).text, unguarded);
        let or = "device.attributes['x.com'].a == 1 || device.capacity['x.com'].m > 2Ki";
        assert_eq!(
            rewrite(or).text,
            "device.driver == 'x.com' &&\n(device.attributes['x.com'].a == 1 || device.capacity['x.com'].m.compareTo(quantity('2Ki')) > 0)"
        );
    }
}
