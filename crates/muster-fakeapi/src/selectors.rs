//! Label and field selectors, as lists and watches take them in `labelSelector` and
//! `fieldSelector`.
//!
//! Labels: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`, comma-separated (all
//! must hold). Fields: `path=value`, `path==value`, `path!=value` on any dotted path of string
//! values (`metadata.name`, `metadata.namespace`, `spec.nodeName`, `spec.schedulerName`,
//! `status.phase`…); a missing field reads as the empty string, so `spec.nodeName=` selects the
//! unassigned pods. Upstream accepts only a few fields per kind; the fake accepts any.

use serde_json::Value;

use crate::status::ApiError;

#[derive(Clone, Debug, PartialEq)]
enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Clone, Debug, PartialEq)]
struct FieldReq {
    path: String,
    value: String,
    equal: bool,
}

/// Both selectors of one request; the default selects everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selector {
    labels: Vec<LabelReq>,
    fields: Vec<FieldReq>,
}

impl Selector {
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Selector, ApiError> {
        let labels = split_top(labels.unwrap_or("")).into_iter().map(label_req).collect::<Result<_, _>>()?;
        let fields = split_top(fields.unwrap_or("")).into_iter().map(field_req).collect::<Result<_, _>>()?;
        Ok(Selector { labels, fields })
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        self.labels.iter().all(|r| label_matches(r, labels)) && self.fields.iter().all(|r| field_matches(r, obj))
    }
}

/// Splits at commas outside parentheses, dropping empty parts.
fn split_top(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

fn label_req(s: &str) -> Result<LabelReq, ApiError> {
    if let Some(req) = set_req(s)? {
        return Ok(req);
    }
    if let Some((k, v)) = s.split_once("!=") {
        return Ok(LabelReq::Ne(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = s.split_once("==").or_else(|| s.split_once('=')) {
        return Ok(LabelReq::Eq(k.trim().into(), v.trim().into()));
    }
    if let Some(k) = s.strip_prefix('!') {
        return Ok(LabelReq::Absent(k.trim().into()));
    }
    if s.contains(char::is_whitespace) {
        return Err(ApiError::bad_request(format!("unable to parse requirement: {s:?}")));
    }
    Ok(LabelReq::Exists(s.into()))
}

/// `key in (a,b)` / `key notin (a,b)`, or `None` when `s` is not set-based.
fn set_req(s: &str) -> Result<Option<LabelReq>, ApiError> {
    let Some(open) = s.find('(') else { return Ok(None) };
    let close = s.rfind(')').filter(|&c| c > open);
    let close = close.ok_or_else(|| ApiError::bad_request(format!("unable to parse requirement: {s:?}")))?;
    let values: Vec<String> =
        s[open + 1..close].split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
    let head: Vec<&str> = s[..open].split_whitespace().collect();
    match head.as_slice() {
        [key, "in"] => Ok(Some(LabelReq::In(key.to_string(), values))),
        [key, "notin"] => Ok(Some(LabelReq::NotIn(key.to_string(), values))),
        _ => Err(ApiError::bad_request(format!("unable to parse requirement: {s:?}"))),
    }
}

fn field_req(s: &str) -> Result<FieldReq, ApiError> {
    let (path, value, equal) = if let Some((k, v)) = s.split_once("!=") {
        (k, v, false)
    } else if let Some((k, v)) = s.split_once("==").or_else(|| s.split_once('=')) {
        (k, v, true)
    } else {
        return Err(ApiError::bad_request(format!("invalid field selector: {s:?}")));
    };
    Ok(FieldReq { path: path.trim().into(), value: value.trim().into(), equal })
}

fn label_matches(req: &LabelReq, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    match req {
        LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
        LabelReq::Ne(k, v) => get(k) != Some(v.as_str()),
        LabelReq::Exists(k) => get(k).is_some(),
        LabelReq::Absent(k) => get(k).is_none(),
        LabelReq::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
        LabelReq::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
    }
}

/// A dotted path's string value ("" when missing; numbers and booleans as JSON text).
pub fn field_value(obj: &Value, path: &str) -> String {
    let v = path.split('.').try_fold(obj, |v, k| v.get(k));
    match v {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

fn field_matches(req: &FieldReq, obj: &Value) -> bool {
    (field_value(obj, &req.path) == req.value) == req.equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ml", "labels": {"app": "train", "tier": "gpu"}},
               "spec": {"schedulerName": "muster"}, "status": {"phase": "Pending"}})
    }

    fn sel(l: &str, f: &str) -> bool {
        Selector::parse(Some(l), Some(f)).unwrap().matches(&pod())
    }

    #[test]
    fn labels() {
        assert!(sel("app=train,tier", ""));
        assert!(sel("app==train,!missing", ""));
        assert!(!sel("app!=train", ""));
        assert!(sel("app in (serve, train),tier notin (cpu)", ""));
        assert!(!sel("app notin (train)", ""));
        assert!(!sel("missing", ""));
        assert!(Selector::parse(Some("app in (x"), None).is_err());
    }

    #[test]
    fn fields() {
        assert!(sel("", "spec.nodeName=,metadata.name=p,metadata.namespace=ml"));
        assert!(sel("", "spec.schedulerName=muster,status.phase!=Running"));
        assert!(!sel("", "spec.nodeName!="));
        assert!(Selector::parse(None, Some("nonsense")).is_err());
    }
}
