//! The emulator's two error types: [`EmulatorError`] for the library API (start, state files),
//! and [`ArmError`], an error answer in ARM's wire format with the status ARM uses.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Why the emulator could not start or keep its state.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// Binding the listening socket failed.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for.
        port: u16,
        /// The socket error.
        source: std::io::Error,
    },
    /// Reading or writing a state or fault file failed.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A state or fault file is not what the emulator wrote or expects.
    #[error("{path} is not valid: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The Kubernetes API's certificate could not be made.
    #[error("cannot make the Kubernetes API's TLS certificate: {0}")]
    Tls(String),
}

/// An ARM error answer: `{"error":{"code","message","target"?,"details"?}}` with its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmError {
    /// HTTP status.
    pub status: u16,
    /// ARM's PascalCase code, e.g. `ResourceGroupNotFound`.
    pub code: String,
    /// The message, in ARM's words.
    pub message: String,
    /// The offending property or resource, when ARM names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl ArmError {
    /// An error with no target.
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_owned(),
            message: message.into(),
            target: None,
        }
    }

    /// 405 for a method the resource type does not serve, in ARM's words.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "HttpMethodNotAllowed",
            format!("The requested resource does not support http method '{method}'."),
        )
    }

    /// Sets the target.
    #[must_use]
    pub fn with_target(mut self, target: &str) -> Self {
        self.target = Some(target.to_owned());
        self
    }

    /// The inner `error` object (used in bodies and in failed operation statuses).
    pub fn inner(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(target) = &self.target {
            error["target"] = json!(target);
        }
        error
    }

    /// The whole error body.
    pub fn body(&self) -> Value {
        json!({"error": self.inner()})
    }

    /// 404 for a resource that does not exist, in ARM's words.
    pub fn not_found(rtype: &str, name: &str, group: &str) -> Self {
        Self::new(
            404,
            "ResourceNotFound",
            format!(
                "The Resource '{rtype}/{name}' under resource group '{group}' was not found. For \
                 more details please go to https://aka.ms/ARMResourceNotFoundFix"
            ),
        )
    }

    /// 404 for a resource group that does not exist.
    pub fn group_not_found(group: &str) -> Self {
        Self::new(
            404,
            "ResourceGroupNotFound",
            format!("Resource group '{group}' could not be found."),
        )
    }

    /// 409 for a write into a resource group that is being deleted.
    pub fn group_being_deleted(group: &str) -> Self {
        Self::new(
            409,
            "ResourceGroupBeingDeleted",
            format!(
                "The resource group '{group}' is in deprovisioning state and cannot perform this \
                 operation."
            ),
        )
    }

    /// 501 for a request the emulator does not serve, naming its method and path, so that it
    /// never reads like one of ARM's own "not found" answers (see docs/emulator.md, "What is not
    /// implemented").
    pub fn not_implemented(method: &str, path: &str) -> Self {
        Self::new(
            501,
            "NotImplemented",
            format!(
                "The dsinfra emulator does not implement {method} {path}; see docs/emulator.md \
                 for what it covers."
            ),
        )
    }

    /// 409 for a request to a namespace the subscription is not registered for, in ARM's words.
    pub fn missing_registration(namespace: &str) -> Self {
        Self::new(
            409,
            "MissingSubscriptionRegistration",
            format!(
                "The subscription is not registered to use namespace '{namespace}'. See \
                 https://aka.ms/rps-not-found for how to register subscriptions."
            ),
        )
    }

    /// 400 for a body that is not JSON or misses a required property.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(400, "InvalidRequestContent", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_arm_shape_and_omits_missing_target() {
        let err = ArmError::group_not_found("rg1");
        assert_eq!(
            err.body(),
            json!({"error": {"code": "ResourceGroupNotFound",
                             "message": "Resource group 'rg1' could not be found."}})
        );
        let err = ArmError::new(400, "InvalidParameter", "bad").with_target("vmSize");
        assert_eq!(err.body()["error"]["target"], "vmSize");
    }
}
