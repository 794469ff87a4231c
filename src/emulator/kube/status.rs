//! The API server's failure answers: a `Status` object with its reason and code, worded as
//! kube-apiserver words them, so a client's own error handling (kubectl's messages, the Python
//! client's `ApiException.reason`) reads them as it would a real server's.

use serde_json::{Value, json};

#[derive(Debug)]
pub(super) struct Status {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl Status {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// `configmaps "x" not found`.
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource} {name:?} not found")).details(json!({
            "name": name,
            "kind": resource,
        }))
    }

    /// A path no resource answers: the API server's plain 404.
    pub fn not_found_path(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} {name:?} already exists"),
        )
        .details(json!({"name": name, "kind": resource}))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 422: `Kind "name" is invalid: field: reason; field: reason`, one cause per field.
    pub fn invalid(kind: &str, name: &str, causes: &[(String, String)]) -> Self {
        let text: Vec<String> = causes.iter().map(|(f, r)| format!("{f}: {r}")).collect();
        let causes: Vec<Value> = causes
            .iter()
            .map(|(field, reason)| json!({"reason": "FieldValueInvalid", "message": reason, "field": field}))
            .collect();
        Self::new(
            422,
            "Invalid",
            format!("{kind} {name:?} is invalid: {}", text.join(", ")),
        )
        .details(json!({"name": name, "kind": kind, "causes": causes}))
    }

    #[must_use]
    pub fn details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn body(&self) -> Value {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            body["details"] = details.clone();
        }
        body
    }
}
