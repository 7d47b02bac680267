//! Reading manifest files, directories and standard input into [`Object`]s.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod stream;

use crate::object::{self, Object, supported_versions};
use crate::yaml::{self, Node, Pos, Value};

/// Where an object was written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    pub file: Arc<str>,
    pub pos: Pos,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.pos)
    }
}

/// One problem in the input: where, which object, which field, what.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    pub file: Arc<str>,
    pub pos: Option<Pos>,
    /// `Kind namespace/name`, when the object is known.
    pub object: Option<String>,
    /// The field path inside the object, e.g. `spec.containers[0].resources.requests`.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(pos) = self.pos {
            write!(f, ":{pos}")?;
        }
        f.write_str(": ")?;
        // Names, paths and messages hold text from the input: a huge one is cut in the middle.
        let short = |s| crate::de::shorten(s, crate::de::MESSAGE_MAX);
        if let Some(obj) = &self.object {
            write!(f, "{}: ", short(obj))?;
        }
        if let Some(field) = self.field.as_deref().filter(|s| !s.is_empty()) {
            write!(f, "{}: ", short(field))?;
        }
        f.write_str(&short(&self.message))
    }
}

/// An object and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    pub object: Object,
    pub origin: Origin,
}

/// Everything read from the inputs.
#[derive(Debug, Default)]
pub struct Manifests {
    /// Objects in input order (files in the order given, directories walked by name).
    pub objects: Vec<Loaded>,
    /// Objects of kinds muster does not read, counted by (apiVersion, kind).
    pub ignored: BTreeMap<(String, String), usize>,
    /// ResourceClaimTemplates that ignored objects will have made at run time (a driver's
    /// controller), see [`crate::providers`].
    pub provided_templates: Vec<crate::providers::ProvidedTemplate>,
    /// Objects read with a warning: those in a beta version Kubernetes 1.37 serves only where it
    /// is enabled ([`crate::beta`]), read as their v1 form.
    pub warnings: Vec<Diagnostic>,
}

impl Manifests {
    /// "ignored: 3 objects of kinds apps/v1 Deployment, v1 Service", or `None` when nothing was.
    pub fn ignored_summary(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        let n: usize = self.ignored.values().sum();
        let kinds: Vec<String> = self.ignored.keys().map(|(v, k)| format!("{v} {k}")).collect();
        let plural = if n == 1 { "object" } else { "objects" };
        let kind_word = if kinds.len() == 1 { "kind" } else { "kinds" };
        Some(format!("ignored: {n} {plural} of {kind_word} {}", kinds.join(", ")))
    }
}

/// Reads `paths` (files, directories walked recursively for `*.yaml`, `*.yml` and `*.json`, or `-`
/// for standard input). Returns every problem found, not only the first.
pub fn load_paths<P: AsRef<Path>>(paths: &[P]) -> Result<Manifests, Vec<Diagnostic>> {
    read_paths(paths, Loader::default()).finish()
}

/// Takes each object as soon as it is decoded (in input order), instead of the loader keeping it
/// until the whole input is read: a caller that keeps objects in a smaller form (the store's
/// packed pods) never holds the whole input decoded. An object it gives back is kept as usual.
pub type Sink<'s> = &'s mut (dyn FnMut(Loaded) -> Option<Loaded> + Send);

/// What [`load_paths_partial`] read: the objects that loaded, every problem, and the names
/// (`Kind namespace/name` or `Kind name`) of the objects that did not load.
pub struct Partial {
    pub manifests: Manifests,
    pub errors: Vec<Diagnostic>,
    pub not_loaded: Vec<String>,
}

/// [`load_paths`] for reporting problems: whatever loads is kept even when something does not,
/// so that later layers (the cluster model) can report theirs too.
pub fn load_paths_partial<P: AsRef<Path>>(paths: &[P]) -> Partial {
    read_paths(paths, Loader::default()).partial()
}

/// [`load_paths_partial`], handing every object to `sink` as it is decoded. The objects `sink`
/// took count as loaded; when the result has errors, what `sink` took is incomplete.
pub fn load_paths_partial_with<P: AsRef<Path>>(paths: &[P], sink: Sink<'_>) -> Partial {
    read_paths(paths, Loader { sink: Some(sink), ..Loader::default() }).partial()
}

/// [`load_paths_partial`] over texts already read, as `(name, text)`.
pub fn load_texts_partial(texts: &[(&str, &str)]) -> Partial {
    let mut loader = Loader::default();
    for (name, text) in texts {
        loader.add_text(name, text);
    }
    loader.partial()
}

impl Partial {
    /// Does `d` (a later layer's problem) only echo an object that did not load: is it about
    /// one, or does it name one (`PriorityClass "x"`)?
    pub fn echoes(&self, d: &Diagnostic) -> bool {
        self.not_loaded.iter().any(|n| {
            let (kind, name) = n.split_once(' ').unwrap_or((n, ""));
            let name = name.rsplit('/').next().unwrap_or(name);
            d.object.as_deref() == Some(n.as_str()) || d.message.contains(&format!("{kind} \"{name}\""))
        })
    }
}

fn read_paths<'s, P: AsRef<Path>>(paths: &[P], mut loader: Loader<'s>) -> Loader<'s> {
    for p in paths {
        let p = p.as_ref();
        if p == Path::new("-") {
            let mut text = String::new();
            match std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
                Ok(_) => loader.add_text("<stdin>", &text),
                Err(e) => loader.error("<stdin>", None, format!("cannot read standard input: {e}")),
            }
            continue;
        }
        for found in find_files(p) {
            match found {
                Found::File(f) => {
                    let name = f.display().to_string();
                    let large = std::fs::metadata(&f).is_ok_and(|m| m.len() >= stream::STREAM_MIN_BYTES);
                    if large && stream::streamable(&f).unwrap_or(false) {
                        loader.add_file_streaming(&name, &f);
                        continue;
                    }
                    match std::fs::read_to_string(&f) {
                        Ok(text) => loader.add_text(&name, &text),
                        Err(e) => loader.error(&name, None, format!("cannot read: {e}")),
                    }
                }
                Found::Error(f, e) => loader.error(&f.display().to_string(), None, e),
                Found::Skipped(f, why) => eprintln!("warning: {}: skipped: {why}", f.display()),
            }
        }
    }
    loader
}

/// Parses one text as if read from `name`.
pub fn load_str(name: &str, text: &str) -> Result<Manifests, Vec<Diagnostic>> {
    let mut loader = Loader::default();
    loader.add_text(name, text);
    loader.finish()
}

/// Like [`load_str`], but takes the documents exactly as written: objects that repeat a
/// kind/namespace/name are kept in document order, and namespaces are not defaulted. For test-case
/// files (such as the allocator conformance table) whose documents describe successive states or
/// deliberately reuse names.
pub fn load_str_documents(name: &str, text: &str) -> Result<Manifests, Vec<Diagnostic>> {
    let mut loader = Loader { allow_duplicates: true, as_written: true, ..Loader::default() };
    loader.add_text(name, text);
    loader.finish()
}

/// What walking an input path finds, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// A file to read.
    File(PathBuf),
    /// A path that cannot be read (a dangling symbolic link, a directory that cannot be listed),
    /// with why; the path is the entry itself, not the directory that holds it.
    Error(PathBuf, String),
    /// A path left out, with why: a special file (FIFO, socket, device) found in a directory, which
    /// reading would block on or never finish, or a directory already walked (a link loop).
    Skipped(PathBuf, String),
}

/// The manifest files under `path`: `path` itself when it is a file (any file named explicitly is
/// read, a FIFO such as `<(kubectl get ...)` included), or, for a directory, its `*.yaml`, `*.yml`
/// and `*.json` regular files, walked recursively by name, hidden entries left out. Never opens a
/// special file found in a directory; never walks a directory twice.
pub fn find_files(path: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    let mut walked = std::collections::HashSet::new();
    walk(path, true, &mut walked, &mut out);
    out
}

fn walk(p: &Path, explicit: bool, walked: &mut std::collections::HashSet<PathBuf>, out: &mut Vec<Found>) {
    let meta = match std::fs::metadata(p) {
        Ok(m) => m,
        Err(e) => {
            let message = match (std::fs::symlink_metadata(p), std::fs::read_link(p)) {
                (Ok(l), Ok(target)) if l.file_type().is_symlink() => {
                    format!("cannot read: dangling symbolic link to {}: {e}", target.display())
                }
                _ => format!("cannot read: {e}"),
            };
            out.push(Found::Error(p.to_path_buf(), message));
            return;
        }
    };
    let manifest_name = p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
    if meta.is_dir() {
        if let Ok(real) = std::fs::canonicalize(p)
            && !walked.insert(real.clone())
        {
            out.push(Found::Skipped(p.to_path_buf(), format!("directory {} is already read", real.display())));
            return;
        }
        let entries = match std::fs::read_dir(p) {
            Ok(entries) => entries,
            Err(e) => {
                out.push(Found::Error(p.to_path_buf(), format!("cannot list directory: {e}")));
                return;
            }
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for e in entries {
            let hidden = e.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
            if !hidden {
                walk(&e, false, walked, out);
            }
        }
    } else if explicit {
        out.push(Found::File(p.to_path_buf()));
    } else if manifest_name {
        if meta.is_file() {
            out.push(Found::File(p.to_path_buf()));
        } else {
            out.push(Found::Skipped(p.to_path_buf(), format!("not a regular file ({})", special_kind(&meta))));
        }
    }
}

/// What kind of special file `meta` describes, in words.
fn special_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    let _ = meta;
    "a special file"
}

/// The entry of `node` whose key is `key` in other letter cases (`apiversion` for `apiVersion`).
fn miscased_key<'n, 'a>(node: &'n Node<'a>, key: &str) -> Option<(&'n Node<'a>, &'n Node<'a>)> {
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .find(|(k, _)| k.as_str().is_some_and(|k| k != key && k.eq_ignore_ascii_case(key)))
            .map(|(k, v)| (k, v)),
        _ => None,
    }
}

/// Where each document of `text` starts (byte offset, lines before it), one cut per document.
fn document_cuts(text: &str) -> Vec<(usize, u32)> {
    let mut cuts = yaml::split_documents(text, 0);
    cuts.dedup_by_key(|c| c.0);
    cuts
}

/// Texts larger than this are parsed in pieces, in parallel.
const PIECE_BYTES: usize = 256 * 1024;

#[derive(Default)]
struct Loader<'s> {
    manifests: Manifests,
    /// Where decoded objects go instead of `manifests.objects` (see [`Sink`]).
    sink: Option<Sink<'s>>,
    errors: Vec<Diagnostic>,
    /// Every named object of a kind muster reads, loaded or not, in input order: the same object
    /// twice is an error even when one of them is invalid (as `check` reports it).
    identities: Vec<Identity>,
    /// Those of the pieces merged into this loader, in input order, after which `identities`
    /// come (see [`Loader::all_identities`]).
    merged_identities: Vec<Vec<Identity>>,
    allow_duplicates: bool,
    as_written: bool,
}

/// An object's identity (API group, kind, namespace, name), its name for messages, and where it is.
/// One is kept per object until the whole input is read, so it holds one string besides the
/// group: the kind, the namespace and the name are read back out of `display`.
struct Identity {
    group: Box<str>,
    /// `Kind namespace/name` or `Kind name` (see `Loader::add_node`), ending with the name.
    display: Box<str>,
    /// The name's length in bytes, at the end of `display`.
    name_len: u32,
    /// The object decoded (and was kept or handed to the sink).
    loaded: bool,
    origin: Origin,
}

impl Identity {
    fn new(group: &str, display: String, name: &str, origin: Origin) -> Identity {
        debug_assert!(display.ends_with(name));
        let name_len = u32::try_from(name.len()).unwrap_or(u32::MAX);
        Identity { group: group.into(), display: display.into_boxed_str(), name_len, loaded: false, origin }
    }

    /// (API group, kind, namespace, name), as the API server keys the object. The namespace is
    /// the text between the kind and the first `/` (empty without one).
    fn key(&self) -> (&str, &str, &str, &str) {
        let d = &*self.display;
        let name = d.get(d.len().saturating_sub(self.name_len as usize)..).unwrap_or("");
        let (kind, rest) = d.split_once(' ').unwrap_or((d, ""));
        let ns = rest.split_once('/').map_or("", |(ns, _)| ns);
        (&self.group, kind, ns, name)
    }
}

impl Loader<'_> {
    fn error(&mut self, file: &str, pos: Option<Pos>, message: String) {
        self.errors.push(Diagnostic { file: file.into(), pos, object: None, field: None, message });
    }

    fn add_text(&mut self, name: &str, text: &str) {
        let pieces = yaml::split_documents(text, PIECE_BYTES);
        self.add_pieces(&name.into(), text, &pieces, 0);
    }

    /// Adds `text`, cut at `pieces` (byte offset, lines before it in `text`), the first line of
    /// `text` being line `line_base + 1` of `file`.
    fn add_pieces(&mut self, file: &Arc<str>, text: &str, pieces: &[(usize, u32)], line_base: u32) {
        // Large dumps are cut into pieces of whole documents, parsed and decoded on every core;
        // the pieces are merged back in order, so the result does not depend on the thread count.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(pieces.len());
        let results: Vec<std::sync::Mutex<Option<Loader>>> = pieces.iter().map(|_| Default::default()).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = || {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(start, line)) = pieces.get(i) else { break };
                let end = pieces.get(i + 1).map_or(text.len(), |p| p.0);
                let mut part = Loader { as_written: self.as_written, ..Loader::default() };
                part.add_piece(file, &text[start..end], line_base + line);
                *results[i].lock().expect("no worker panics") = Some(part);
            }
        };
        if threads <= 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(work);
                }
            });
        }
        for r in results {
            let part = r.into_inner().expect("no worker panics").expect("every piece is processed");
            self.keep(part.manifests.objects);
            self.manifests.provided_templates.extend(part.manifests.provided_templates);
            self.manifests.warnings.extend(part.manifests.warnings);
            // Kept in the pieces' own vectors: one vector for the whole input would double (and
            // copy) as it grows, holding up to twice what it needs until the input is read.
            let mut own = part.identities;
            own.shrink_to_fit();
            self.merged_identities.extend(part.merged_identities);
            self.merged_identities.push(own);
            for (k, n) in part.manifests.ignored {
                *self.manifests.ignored.entry(k).or_default() += n;
            }
            self.errors.extend(part.errors);
        }
    }

    /// Parses and adds one piece of whole documents. When it is not valid YAML and holds several
    /// documents, each is parsed alone: a bad document is reported and does not hide the others.
    fn add_piece(&mut self, file: &Arc<str>, text: &str, line_offset: u32) {
        let docs = match yaml::parse_stream_at(text, line_offset) {
            Ok(d) => d,
            Err(_) if document_cuts(text).len() > 1 => {
                let cuts = document_cuts(text);
                for (i, &(start, line)) in cuts.iter().enumerate() {
                    let end = cuts.get(i + 1).map_or(text.len(), |c| c.0);
                    self.add_piece(file, &text[start..end], line_offset + line);
                }
                return;
            }
            Err(e) => {
                self.errors.push(Diagnostic {
                    file: file.clone(),
                    pos: Some(e.pos),
                    object: None,
                    field: None,
                    message: format!("invalid YAML: {}", e.message),
                });
                return;
            }
        };
        for doc in &docs {
            self.add_node(file, &doc.root, None);
        }
    }

    /// Adds one object node; `list_default` is the (apiVersion, kind) items of a typed list
    /// (`PodList`) take when they do not say.
    fn add_node(&mut self, file: &Arc<str>, node: &Node<'_>, list_default: Option<(&str, &str)>) {
        let diag = |pos, object: Option<String>, field: Option<&str>, message: String| Diagnostic {
            file: file.clone(),
            pos: Some(pos),
            object,
            field: field.map(str::to_string),
            message,
        };
        if !matches!(node.value, Value::Map(_)) {
            self.errors.push(diag(node.pos, None, None, "expected a Kubernetes object (a mapping)".into()));
            return;
        }
        let field_str = |key: &str| node.get(key).and_then(|n| n.as_str()).filter(|s| !s.is_empty());
        // A key spelled with other letter cases (`apiversion`, `Kind`) is reported, and its value
        // read, so that the rest of the object is checked too.
        let mut miscased: Vec<(&str, String)> = Vec::new();
        let mut type_field = |key: &'static str| {
            field_str(key).or_else(|| {
                let (k, v) = miscased_key(node, key)?;
                self.errors.push(diag(
                    k.pos,
                    None,
                    Some(key),
                    format!("required field is missing; found {:?} (field names are case-sensitive)", k.as_str()?),
                ));
                miscased.push((key, k.as_str()?.to_string()));
                v.as_str().filter(|s| !s.is_empty())
            })
        };
        let (v, k) = (type_field("apiVersion"), type_field("kind"));
        let (api_version, kind) = match (v, k, list_default) {
            (Some(v), Some(k), _) => (v, k),
            (v, k, Some((dv, dk))) => (v.unwrap_or(dv), k.unwrap_or(dk)),
            (None, _, None) => {
                if !miscased.iter().any(|(key, _)| *key == "apiVersion") {
                    self.errors.push(diag(node.pos, None, Some("apiVersion"), "required field is missing".into()));
                }
                return;
            }
            (_, None, None) => {
                if !miscased.iter().any(|(key, _)| *key == "kind") {
                    self.errors.push(diag(node.pos, None, Some("kind"), "required field is missing".into()));
                }
                return;
            }
        };
        if kind == "List" || (kind.ends_with("List") && node.get("items").is_some()) {
            let item_default = kind.strip_suffix("List").filter(|k| !k.is_empty()).map(|k| (api_version, k));
            match node.get("items").map(|n| &n.value) {
                Some(Value::Seq(items)) => {
                    for item in items {
                        self.add_node(file, item, item_default);
                    }
                }
                None => {}
                Some(_) if node.get("items").is_some_and(Node::is_null) => {}
                Some(_) => {
                    self.errors.push(diag(node.pos, Some(kind.to_string()), Some("items"), "expected a list".into()))
                }
            }
            return;
        }
        let origin = Origin { file: file.clone(), pos: node.pos };
        let name_of = || {
            let meta = node.get("metadata");
            let name = meta.and_then(|m| m.get("name")).and_then(Node::as_str).unwrap_or("<unnamed>");
            // As the API server would name it: a namespaced object without one is in `default`.
            let named = name != "<unnamed>";
            let default =
                (named && !self.as_written && object::kind_is_namespaced(kind) == Some(true)).then_some("default");
            match meta.and_then(|m| m.get("namespace")).and_then(Node::as_str).or(default) {
                Some(ns) => format!("{kind} {ns}/{name}"),
                None => format!("{kind} {name}"),
            }
        };
        // The identity as the API server would key it, for the duplicate check.
        let name = node.get("metadata").and_then(|m| m.get("name")).and_then(Node::as_str).filter(|n| !n.is_empty());
        let identified = name.filter(|_| !supported_versions(kind).is_empty()).map(|name| {
            let group = api_version.split_once('/').map_or("", |(g, _)| g);
            self.identities.push(Identity::new(group, name_of(), name, origin.clone()));
        });
        // A device's 1.36 node-allocatable field, in its 1.37 form, with a warning each.
        let rewritten = crate::node_allocatable::rewrite(kind, node);
        for r in rewritten.iter().flat_map(|(_, done)| done) {
            let warning = crate::node_allocatable::warning();
            self.manifests.warnings.push(diag(r.pos, Some(name_of()), Some(&r.field), warning));
        }
        if rewritten.is_none() {
            // Once per slice: a driver publishes the field on every device.
            for r in crate::node_allocatable::in_1_37_form(kind, node).into_iter().take(1) {
                let warning = crate::node_allocatable::unacted();
                self.manifests.warnings.push(diag(r.pos, Some(name_of()), Some(&r.field), warning));
            }
        }
        let node = rewritten.as_ref().map_or(node, |(n, _)| n);
        let decoded = object::decode(api_version, kind, node).or_else(|| {
            let r = crate::beta::decode(api_version, kind, node)?;
            let pos = node.get("apiVersion").map_or(node.pos, |n| n.pos);
            let warning = crate::beta::warning(api_version, kind);
            self.manifests.warnings.push(diag(pos, Some(name_of()), Some("apiVersion"), warning));
            Some(r)
        });
        match decoded {
            Some(Ok(mut obj)) => {
                let meta = obj.metadata_mut();
                if meta.name.as_deref().unwrap_or("").is_empty() {
                    let message = if meta.generate_name.is_some() {
                        "required value: metadata.generateName is not supported, give the object a name"
                    } else {
                        "required value"
                    };
                    self.errors.push(diag(node.pos, Some(name_of()), Some("metadata.name"), message.into()));
                    return;
                }
                if !self.as_written
                    && obj.is_namespaced()
                    && obj.metadata().namespace.as_deref().unwrap_or("").is_empty()
                {
                    obj.metadata_mut().namespace = Some("default".into());
                }
                if identified.is_some()
                    && let Some(id) = self.identities.last_mut()
                {
                    id.loaded = true;
                }
                self.manifests.objects.push(Loaded { object: obj, origin });
            }
            Some(Err(errs)) => {
                let object = name_of();
                // The miscased keys were reported above, not again as unknown fields.
                let reported = |e: &crate::de::DeError| {
                    e.path.as_deref().unwrap_or("").is_empty()
                        && miscased.iter().any(|(_, k)| e.message == format!("unknown field {k:?}"))
                };
                for e in errs.into_iter().filter(|e| !reported(e)) {
                    self.errors.push(Diagnostic {
                        file: file.clone(),
                        pos: e.pos.or(Some(node.pos)),
                        object: Some(object.clone()),
                        field: e.path,
                        message: e.message,
                    });
                }
            }
            None => {
                let versions = supported_versions(kind);
                if versions.is_empty() {
                    *self.manifests.ignored.entry((api_version.to_string(), kind.to_string())).or_default() += 1;
                    self.manifests.provided_templates.extend(crate::providers::provided_template(
                        api_version,
                        kind,
                        node,
                    ));
                } else {
                    let field_pos = node.get("apiVersion").map_or(node.pos, |n| n.pos);
                    self.errors.push(diag(
                        field_pos,
                        Some(name_of()),
                        Some("apiVersion"),
                        format!(
                            "{api_version} {kind} is not a Kubernetes 1.37 form muster reads; use {}",
                            versions.join(" or ")
                        ),
                    ));
                }
            }
        }
    }

    /// Keeps decoded objects, or hands them to the sink.
    fn keep(&mut self, objects: Vec<Loaded>) {
        match self.sink.as_mut() {
            None => self.manifests.objects.extend(objects),
            Some(sink) => self.manifests.objects.extend(objects.into_iter().filter_map(&mut **sink)),
        }
    }

    /// Every identity, in input order.
    fn all_identities(&self) -> impl Iterator<Item = &Identity> {
        self.merged_identities.iter().flatten().chain(&self.identities)
    }

    fn finish(mut self) -> Result<Manifests, Vec<Diagnostic>> {
        if !self.allow_duplicates {
            self.report_duplicates();
        }
        if self.errors.is_empty() { Ok(self.manifests) } else { Err(self.errors) }
    }

    fn partial(mut self) -> Partial {
        // An object defined twice, once loaded, counts as loaded.
        let mut failed: Vec<&str> = self.all_identities().filter(|i| !i.loaded).map(|i| &*i.display).collect();
        if !failed.is_empty() {
            let names: std::collections::HashSet<&str> = failed.iter().copied().collect();
            let loaded: std::collections::HashSet<&str> = self
                .all_identities()
                .filter(|i| i.loaded && names.contains(&*i.display))
                .map(|i| &*i.display)
                .collect();
            failed.retain(|d| !loaded.contains(d));
        }
        let not_loaded = failed.into_iter().map(str::to_string).collect();
        self.report_duplicates();
        Partial { manifests: self.manifests, errors: self.errors, not_loaded }
    }

    /// The same object twice is an error naming both places.
    fn report_duplicates(&mut self) {
        let mut seen: HashMap<(&str, &str, &str, &str), &Origin> = HashMap::new();
        let identities = self.merged_identities.iter().flatten().chain(&self.identities);
        for id in identities {
            if let Some(first) = seen.insert(id.key(), &id.origin) {
                self.errors.push(Diagnostic {
                    file: id.origin.file.clone(),
                    pos: Some(id.origin.pos),
                    object: Some(id.display.to_string()),
                    field: None,
                    message: format!("defined twice; first defined at {first}"),
                });
                seen.insert(id.key(), first);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::load_str;

    fn errors(text: &str) -> Vec<String> {
        load_str("f.yaml", text).unwrap_err().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_miscased_type_key_is_reported_and_the_object_still_checked() {
        let e = errors("apiversion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containerz: []}\n");
        assert_eq!(
            e,
            [
                "f.yaml:1:1: apiVersion: required field is missing; found \"apiversion\" (field names are case-sensitive)",
                "f.yaml:4:8: Pod default/p: spec: unknown field \"containerz\"",
            ]
        );
        let e = errors("apiVersion: v1\nKIND: Node\nmetadata: {name: n}\n");
        assert_eq!(e, ["f.yaml:2:1: kind: required field is missing; found \"KIND\" (field names are case-sensitive)"]);
    }

    #[test]
    fn an_invalid_object_defined_twice_is_reported_twice_over() {
        let e = errors(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {priority: high}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n",
        );
        assert_eq!(
            e,
            [
                "f.yaml:4:18: Pod default/p: spec.priority: invalid type: string \"high\", expected i32",
                "f.yaml:6:1: Pod default/p: defined twice; first defined at f.yaml:1:1",
            ]
        );
    }

    const TWO_PODS_ONE_BAD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\nspec: {containers: [{name: c}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {priority: high}\n";

    #[test]
    fn objects_that_did_not_load_are_named_whether_kept_or_taken() {
        let kept = super::load_texts_partial(&[("f.yaml", TWO_PODS_ONE_BAD)]);
        assert_eq!(kept.not_loaded, ["Pod default/bad"]);
        assert_eq!(kept.manifests.objects.len(), 1);
        let dir = std::env::temp_dir().join(format!("muster-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f.yaml");
        std::fs::write(&file, TWO_PODS_ONE_BAD).unwrap();
        let mut taken = Vec::new();
        let partial = super::load_paths_partial_with(std::slice::from_ref(&file), &mut |l| {
            taken.push(l.object.display_name());
            None
        });
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(taken, ["Pod default/good"]);
        assert!(partial.manifests.objects.is_empty(), "the sink took every object");
        assert_eq!(partial.not_loaded, ["Pod default/bad"]);
        assert_eq!(partial.errors.len(), 1);
    }

    #[test]
    fn an_object_defined_twice_and_loaded_once_counts_as_loaded() {
        let text = format!(
            "{TWO_PODS_ONE_BAD}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: bad}}\nspec: {{containers: [{{name: c}}]}}\n"
        );
        let partial = super::load_texts_partial(&[("f.yaml", &text)]);
        assert!(partial.not_loaded.is_empty(), "{:?}", partial.not_loaded);
    }

    #[test]
    fn a_document_that_is_not_yaml_hides_none_of_the_others() {
        let text = "apiVersion: v1\nkind: Node\nmetadata: {name: a\n  x: [\n---\napiVersion: v1\nkind: Node\n\
                    metadata: {name: b}\nspec: {bad: 1}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: c}\n";
        let e = errors(text);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].starts_with("f.yaml:4:4: invalid YAML"), "{e:?}");
        assert_eq!(e[1], "f.yaml:9:8: Node b: spec: unknown field \"bad\"");
    }
}
