//! Fault injection and the request log: what a test uses to make the fake misbehave on purpose
//! and to see what a client asked.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::server::Shared;

/// One request as the fake saw it, in the order it arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `get list watch create update patch delete deletecollection`, as Kubernetes names verbs.
    pub verb: String,
    /// `""` for the core group.
    pub group: String,
    /// The plural (`pods`); empty for discovery and other non-resource paths (whose path is then
    /// the `name`).
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The HTTP status answered (200 for a watch that started).
    pub status: u16,
}

impl std::fmt::Display for Request {
    /// `patch pods/status ml/p -> 200`, one request a line for `--log-requests`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() { String::new() } else { format!(".{}", self.group) };
        let sub = self.subresource.as_deref().map(|s| format!("/{s}")).unwrap_or_default();
        let at = match (&self.namespace, &self.name) {
            (Some(ns), Some(n)) => format!(" {ns}/{n}"),
            (Some(ns), None) => format!(" {ns}/"),
            (None, Some(n)) => format!(" {n}"),
            (None, None) => String::new(),
        };
        let what = format!("{}{group}{sub}{at}", self.resource);
        write!(f, "{} {} -> {}", self.verb, what.trim_start(), self.status)
    }
}

/// Which requests a fault applies to; `None` fields match anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestMatcher {
    pub verb: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
}

impl RequestMatcher {
    /// `verb` on `resource` (the plural), any subresource unless [`Self::subresource`] narrows it.
    pub fn new(verb: &str, resource: &str) -> RequestMatcher {
        RequestMatcher { verb: Some(verb.into()), resource: Some(resource.into()), subresource: None }
    }

    pub fn subresource(mut self, sub: &str) -> RequestMatcher {
        self.subresource = Some(sub.into());
        self
    }

    pub fn matches(&self, r: &Request) -> bool {
        self.verb.as_ref().is_none_or(|v| *v == r.verb)
            && self.resource.as_ref().is_none_or(|v| *v == r.resource)
            && self.subresource.as_ref().is_none_or(|v| Some(v) == r.subresource.as_ref())
    }
}

#[derive(Debug, Default)]
pub(crate) struct FaultState {
    failures: Vec<(RequestMatcher, u16, u32)>,
    delay: Option<Duration>,
}

impl FaultState {
    /// The status to fail `r` with, counting the use.
    pub(crate) fn take(&mut self, r: &Request) -> Option<u16> {
        let i = self.failures.iter().position(|(m, _, left)| *left > 0 && m.matches(r))?;
        let (_, code, left) = &mut self.failures[i];
        *left -= 1;
        let code = *code;
        self.failures.retain(|(_, _, left)| *left > 0);
        Some(code)
    }

    pub(crate) fn delay(&self) -> Option<Duration> {
        self.delay
    }
}

/// The fault injection handle of a running fake.
#[derive(Clone)]
pub struct Faults {
    pub(crate) shared: Arc<Shared>,
}

impl Faults {
    fn state(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.shared.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next `times` requests `matcher` matches fail with `code` (a `Status` body whose
    /// reason goes with the code: 409 Conflict, 500 InternalError, 503 ServiceUnavailable…).
    pub fn fail_next(&self, matcher: RequestMatcher, code: u16, times: u32) {
        self.state().failures.push((matcher, code, times));
    }

    /// Ends every open watch stream now (clients see the connection end and re-watch).
    pub fn close_watches(&self) {
        self.shared.close_watches();
    }

    /// Forgets the event history: the next watch from an older resourceVersion gets one
    /// `ERROR` event with a 410 `Expired` Status. Open watches that are behind get it too.
    pub fn expire_history(&self) {
        self.shared.store().expire_history();
    }

    /// Every write (create, update, patch, delete, binding) waits `delay` before it is handled;
    /// `Duration::ZERO` turns it off.
    pub fn delay(&self, delay: Duration) {
        self.state().delay = (!delay.is_zero()).then_some(delay);
    }
}

/// The log, behind its lock.
pub(crate) type Log = Mutex<Vec<Request>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn request(verb: &str, resource: &str, sub: Option<&str>) -> Request {
        Request {
            verb: verb.into(),
            group: String::new(),
            resource: resource.into(),
            subresource: sub.map(Into::into),
            namespace: Some("ml".into()),
            name: Some("p".into()),
            status: 200,
        }
    }

    #[test]
    fn failures_are_counted_and_matched_by_subresource() {
        let mut state = FaultState::default();
        state.failures.push((RequestMatcher::new("patch", "pods").subresource("status"), 409, 2));
        assert_eq!(state.take(&request("patch", "pods", None)), None);
        assert_eq!(state.take(&request("patch", "pods", Some("status"))), Some(409));
        assert_eq!(state.take(&request("patch", "pods", Some("status"))), Some(409));
        assert_eq!(state.take(&request("patch", "pods", Some("status"))), None, "used up");
        assert_eq!(request("patch", "pods", Some("status")).to_string(), "patch pods/status ml/p -> 200");
    }
}
