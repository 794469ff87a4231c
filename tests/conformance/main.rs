//! The emulator and the validator held to the official Azure OpenAPI specs in
//! ../shared/azure-specs: the validator accepts every example request and rejects broken
//! bodies; every example present is replayed against the emulator; and every response of a
//! typical lifecycle validates against its operation's schema.
//!
//! When the specs are not beside the checkout the tests say so on stderr and pass, except
//! under CI (`CI=true`), where they fail: a CI run must never skip conformance silently.

use std::collections::BTreeSet;

use dsinfra::emulator::{self, EmulatorConfig, EmulatorHandle};
use dsinfra::openapi::{Direction, Specs, Violation, ViolationKind, significant};
use serde_json::{Value, json};

fn specs() -> Option<Specs> {
    match Specs::load_default() {
        Ok(specs) => Some(specs),
        Err(missing) => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            assert!(!ci, "conformance specs are required under CI: {missing}");
            eprintln!("SKIPPING conformance test: {missing}");
            None
        }
    }
}

fn describe(violations: &[&Violation]) -> String {
    violations.iter().fold(String::new(), |mut out, v| {
        out.push_str("\n  ");
        out.push_str(&v.to_string());
        out
    })
}

mod lifecycle;
mod replay;
mod validator;

/// The bearer token the tests send (the emulator accepts any).
const TOKEN: &str = "conformance";

struct Answer {
    status: u16,
    body: Option<Value>,
    /// The `Retry-After` header, when sent.
    retry_after: Option<String>,
}

async fn send(
    http: &reqwest::Client,
    endpoint: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Answer {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = http
        .request(method, format!("{endpoint}{path}"))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.expect("emulator reachable");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ASCII header").to_owned());
    let text = response.text().await.expect("body");
    let body = (!text.is_empty()).then(|| serde_json::from_str(&text).expect("JSON body"));
    Answer {
        status,
        body,
        retry_after,
    }
}

fn versioned(path: &str, version: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}api-version={version}")
}
