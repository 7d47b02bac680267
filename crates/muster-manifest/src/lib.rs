//! Reads Kubernetes manifests — multi-document YAML, JSON, `kind: List` dumps, files, directories
//! and standard input — into `k8s-openapi` 1.37 objects, and reports every problem with its file,
//! line, column, object and field. It owns the input edge of the in-memory world and nothing else:
//! it never interprets what an object means (that is the model's and the scheduler's job), never
//! drops an object silently (unknown kinds are counted and reported), and never redefines a
//! Kubernetes type.

pub mod beta;
pub mod de;
pub mod load;
pub mod node_allocatable;
pub mod object;
pub mod providers;
pub mod yaml;

pub use load::{
    Diagnostic, Found, Loaded, Manifests, Origin, Partial, Sink, find_files, load_paths, load_paths_partial,
    load_paths_partial_with, load_str, load_str_documents, load_texts_partial,
};
pub use object::Object;
pub use yaml::Pos;
