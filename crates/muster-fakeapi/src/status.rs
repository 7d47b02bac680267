//! Kubernetes `Status` bodies: every error the fake returns, and the success of a binding.

use serde_json::{Value, json};

/// A failed request, as the API server reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details`: the object's name, group and kind when known; causes for `Invalid`.
    pub details: Value,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: Value::Null }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn not_found(qualified: &str, name: &str) -> ApiError {
        ApiError::new(404, "NotFound", format!("{qualified} \"{name}\" not found")).named(qualified, name)
    }

    pub fn already_exists(qualified: &str, name: &str) -> ApiError {
        ApiError::new(409, "AlreadyExists", format!("{qualified} \"{name}\" already exists")).named(qualified, name)
    }

    pub fn conflict(qualified: &str, name: &str, why: &str) -> ApiError {
        let message = format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}");
        ApiError::new(409, "Conflict", message).named(qualified, name)
    }

    /// 422 naming the field (`status.reservedFor`) that is wrong.
    pub fn invalid(kind: &str, name: &str, field: &str, why: &str) -> ApiError {
        let message = format!("{kind} \"{name}\" is invalid: {field}: Invalid value: {why}");
        let mut e = ApiError::new(422, "Invalid", message);
        e.details = json!({"name": name, "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": format!("Invalid value: {why}"), "field": field}]});
        e
    }

    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// A fault injected by a test: the reason matches the code.
    pub fn injected(code: u16) -> ApiError {
        let reason = match code {
            409 => "Conflict",
            410 => "Expired",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        ApiError::new(code, reason, format!("injected fault: {code} {reason}"))
    }

    fn named(mut self, qualified: &str, name: &str) -> ApiError {
        let (resource, group) = qualified.split_once('.').unwrap_or((qualified, ""));
        self.details = json!({"name": name, "group": group, "kind": resource});
        self
    }

    /// The `Status` object.
    pub fn body(&self) -> Value {
        let mut v = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        });
        if !self.details.is_null() {
            v["details"] = self.details.clone();
        }
        v
    }
}

/// `Status{status: Success}` with `code`.
pub fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

pub type ApiResult<T> = Result<T, ApiError>;
