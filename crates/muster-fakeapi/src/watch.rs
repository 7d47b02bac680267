//! Watches: newline-delimited JSON watch events streamed as a chunked response.
//!
//! - `resourceVersion` absent or `"0"`, or `sendInitialEvents=true` (whatever the version): an
//!   ADDED event for every object, then (with `sendInitialEvents=true` and
//!   `allowWatchBookmarks=true`) a BOOKMARK annotated `k8s.io/initial-events-end: "true"`, then
//!   changes;
//! - `resourceVersion=N`: every change after N from the history, then changes; N older than the
//!   history gives one ERROR event (a 410 `Expired` Status) and the stream ends;
//! - `allowWatchBookmarks=true`: a BOOKMARK every second carrying the resourceVersion the watch
//!   has caught up to;
//! - `timeoutSeconds`: the stream ends then; `Faults::close_watches` and shutdown end it too;
//! - selectors apply per event: an object that starts matching shows as ADDED, one that stops
//!   matching as DELETED (its previous state at the new resourceVersion), as the watch cache does.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use serde_json::{Value, json};

use crate::http::{Params, Target, error};
use crate::registry::{self, ResId};
use crate::selectors::Selector;
use crate::server::Shared;
use crate::status::ApiError;
use crate::store::{Event, Store, meta_str};

/// How often a watch that allows bookmarks gets one.
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(1);

/// What one watch asked for.
struct Watch {
    /// Where the objects are kept, and the version they are sent in.
    res: ResId,
    served: ResId,
    ns: Option<String>,
    selector: Selector,
    /// `None`: start with the current state; `Some(n)`: changes after n.
    from: Option<u64>,
    initial_end: bool,
    bookmarks: bool,
    timeout: Option<Duration>,
}

fn flag(params: &Params, name: &str) -> bool {
    params.get(name).is_some_and(|v| v == "true" || v == "1")
}

fn parse(t: &Target, params: &Params) -> Result<Watch, ApiError> {
    let selector = Selector::parse(
        params.get("labelSelector").map(String::as_str),
        params.get("fieldSelector").map(String::as_str),
    )?;
    let send_initial = flag(params, "sendInitialEvents");
    let from = match params.get("resourceVersion").map(String::as_str) {
        // Initial events show the current state, which is newer than any version asked.
        _ if send_initial => None,
        None | Some("" | "0") => None,
        Some(rv) => Some(rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?),
    };
    let timeout = match params.get("timeoutSeconds") {
        Some(s) => Some(Duration::from_secs(s.parse().map_err(|_| ApiError::bad_request("invalid timeoutSeconds"))?)),
        None => None,
    };
    Ok(Watch {
        res: t.res,
        served: t.served,
        ns: t.ns.clone(),
        selector,
        from,
        initial_end: send_initial && flag(params, "allowWatchBookmarks"),
        bookmarks: flag(params, "allowWatchBookmarks"),
        timeout,
    })
}

/// Starts a watch: the response streams until the watch ends.
pub(crate) fn start(shared: Arc<Shared>, t: &Target, params: &Params) -> Response {
    let w = match parse(t, params) {
        Ok(w) => w,
        Err(e) => return error(&e),
    };
    let body = Body::from_stream(events(shared, w));
    let mut r = Response::new(body);
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    r
}

fn line(kind: &str, object: &Value) -> Result<Bytes, std::convert::Infallible> {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Ok(Bytes::from(v))
}

fn bookmark(res: ResId, rv: u64, initial_end: bool) -> Value {
    let rt = registry::get(res);
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": meta})
}

fn expired(asked: u64, oldest: u64) -> Value {
    let message = format!("too old resource version: {asked} ({oldest})");
    ApiError::new(410, "Expired", message).body()
}

impl Watch {
    /// Whether this watch is shown `obj` (namespace and selectors).
    fn sees(&self, obj: &Value) -> bool {
        self.ns.as_deref().is_none_or(|ns| meta_str(obj, "namespace") == Some(ns)) && self.selector.matches(obj)
    }

    /// What this watch sends for `e`, if anything, in the watched version.
    fn render(&self, e: &Event) -> Option<(&'static str, Value)> {
        let (kind, mut obj) = self.render_stored(e)?;
        if self.served != self.res {
            crate::registry::convert(&mut obj, self.served);
        }
        Some((kind, obj))
    }

    fn render_stored(&self, e: &Event) -> Option<(&'static str, Value)> {
        let old = e.old.as_deref().filter(|o| self.sees(o));
        let new = e.new.as_deref().filter(|n| self.sees(n));
        match (old, new, &e.new) {
            (_, Some(n), _) => Some((if old.is_some() { "MODIFIED" } else { "ADDED" }, n.clone())),
            (Some(o), None, None) => Some(("DELETED", o.clone())),
            (Some(o), None, Some(_)) => {
                let mut gone = o.clone();
                gone["metadata"]["resourceVersion"] = json!(e.rv.to_string());
                Some(("DELETED", gone))
            }
            (None, None, _) => None,
        }
    }
}

type Chunk = Result<Bytes, std::convert::Infallible>;

impl Watch {
    /// The objects sent as ADDED first (none when resuming), and the version to go on from.
    fn snapshot(&self, store: &Store) -> (Vec<Value>, u64) {
        match self.from {
            Some(rv) => (Vec::new(), rv),
            None => {
                let objects = store.list(self.res, self.ns.as_deref()).map(|(_, v)| &**v);
                let mut objects: Vec<Value> = objects.filter(|v| self.selector.matches(v)).cloned().collect();
                if self.served != self.res {
                    objects.iter_mut().for_each(|o| crate::registry::convert(o, self.served));
                }
                (objects, store.resource_version())
            }
        }
    }

    /// The lines for the changes after `cursor` and the version now caught up to; the ERROR
    /// line when the history no longer reaches back to `cursor`.
    fn catch_up(&self, store: &Store, cursor: u64) -> Result<(Vec<Chunk>, u64), Chunk> {
        let Some(batch) = store.events_after(self.res, cursor) else {
            return Err(line("ERROR", &expired(cursor, store.oldest())));
        };
        let lines = batch.iter().filter_map(|e| self.render(e)).map(|(kind, obj)| line(kind, &obj)).collect();
        Ok((lines, cursor.max(store.resource_version())))
    }
}

async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn events(shared: Arc<Shared>, w: Watch) -> impl futures_util::Stream<Item = Chunk> + Send + 'static {
    async_stream::stream! {
        let deadline = w.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut closed = shared.closed.subscribe();
        closed.borrow_and_update();
        let (mut changed, (initial, mut cursor)) = {
            let store = shared.store();
            (store.subscribe(), w.snapshot(&store))
        };
        for obj in &initial {
            yield line("ADDED", obj);
        }
        if w.from.is_none() && w.initial_end {
            yield line("BOOKMARK", &bookmark(w.served, cursor, true));
        }
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
        loop {
            changed.borrow_and_update();
            let caught_up = w.catch_up(&shared.store(), cursor);
            let lines = match caught_up {
                Ok((lines, now)) => {
                    cursor = now;
                    lines
                }
                Err(error) => {
                    yield error;
                    break;
                }
            };
            for l in lines {
                yield l;
            }
            tokio::select! {
                r = changed.changed() => if r.is_err() { break },
                _ = closed.changed() => break,
                _ = until(deadline) => break,
                _ = tick.tick(), if w.bookmarks => yield line("BOOKMARK", &bookmark(w.served, cursor, false)),
            }
        }
    }
}
