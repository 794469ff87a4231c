//! What a provider handler is given and answers: the request's context ([`Ctx`]) and the reply
//! before the front door adds the common headers ([`Reply`]). A leaf: it imports no handler.

use std::collections::BTreeMap;

use axum::http::Uri;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::config::EmulatorConfig;
use super::error::ArmError;

/// What a handler answers, before the common headers are added.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Some(body),
        }
    }

    pub fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: None,
        }
    }

    #[must_use]
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    #[must_use]
    pub fn headers(mut self, headers: Vec<(String, String)>) -> Self {
        self.headers.extend(headers);
        self
    }
}

impl From<ArmError> for Reply {
    fn from(err: ArmError) -> Self {
        Reply::json(err.status, err.body())
    }
}

/// Where the emulator serves AKS clusters' Kubernetes API (over TLS), and the CA (PEM) its
/// certificate is signed by: what a cluster's kubeconfig carries.
#[derive(Debug, Clone)]
pub(crate) struct KubeApiEndpoint {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    pub ca_pem: String,
}

/// Everything a provider handler needs to know about the request.
pub(crate) struct Ctx<'a> {
    pub config: &'a EmulatorConfig,
    pub endpoint: &'a str,
    /// `http://` and the `Host` the request was sent to (the endpoint when it has none): where
    /// links handed back to this client point.
    pub origin: String,
    /// Where clusters' Kubernetes API answers.
    pub kube_api: &'a KubeApiEndpoint,
    /// The URL as sent (path and query still percent-encoded).
    pub uri: &'a Uri,
    pub now: DateTime<Utc>,
    pub method: String,
    /// Query parameters, keys lower-cased.
    pub query: BTreeMap<String, String>,
    pub api_version: String,
    pub body: Option<Value>,
    /// An injected failure for the operation this request starts, if any.
    pub fail_operation: Option<ArmError>,
    pub took_failure: bool,
    /// The principal whose rights ARM checks for this request (a managed identity, a configured
    /// caller); `None` for a token with full access.
    pub caller: Option<String>,
}

impl Ctx<'_> {
    /// Hands the injected failure to an operation being created.
    pub fn take_failure(&mut self) -> Option<ArmError> {
        let failure = self.fail_operation.take();
        self.took_failure |= failure.is_some();
        failure
    }

    /// The request body, or an empty object.
    pub fn body(&self) -> Value {
        self.body
            .clone()
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
    }

    pub fn query(&self, name: &str) -> Option<&str> {
        self.query
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}
