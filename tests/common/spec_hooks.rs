//! The emulator's conformance hooks wired to the official specs, shared by the test binaries
//! that hold a whole client (dsinfra's own, or the Azure SDK for Python) to them: every request
//! must be an operation of the specs at its api-version with a body that validates strictly,
//! and every answer must validate against the status it was sent with.
//!
//! Included with `#[path]` by `tests/client_emulator/harness.rs` and `tests/sdk_python.rs`
//! rather than through `tests/common/mod.rs`, so the test binaries that never start an emulator
//! do not compile it.

use std::sync::Arc;

use dsinfra::emulator::{RecordedViolation, RequestInfo, RequestValidator, ResponseInfo};
use dsinfra::openapi::{Specs, significant};

/// Operation-status and operation-result URLs are not described by the shipped spec files
/// (docs/emulator.md, deviation 19); `tests/emulator/` checks their bodies instead.
pub(crate) fn is_operation_status(path: &str) -> bool {
    path.split('/').any(|segment| {
        [
            "operations",
            "operationresults",
            "asyncoperations",
            "operationstatuses",
        ]
        .iter()
        .any(|name| segment.eq_ignore_ascii_case(name))
    })
}

/// Namespaces the emulator serves with no official spec in shared/azure-specs (the resources
/// an Azure Machine Learning workspace needs beside it): nothing to hold their requests to, so
/// they pass; their shapes are checked by the emulator's own tests instead.
const WITHOUT_SPEC: &[&str] = &[
    "Microsoft.KeyVault",
    "Microsoft.OperationalInsights",
    "Microsoft.Insights",
    "Microsoft.ContainerRegistry",
];

/// Types the emulator serves in a namespace that has a spec here, whose own spec is not in
/// shared/azure-specs (docs/emulator.md, "Role definitions"): they pass the same way.
const TYPES_WITHOUT_SPEC: &[&str] = &["Microsoft.Authorization/roleDefinitions"];

/// Whether `path` addresses a provider of [`WITHOUT_SPEC`] or a type of [`TYPES_WITHOUT_SPEC`].
pub(crate) fn without_spec(path: &str) -> bool {
    let Some((_, rest)) = path.rsplit_once("/providers/") else {
        return false;
    };
    let mut parts = rest.split('/');
    let namespace = parts.next().unwrap_or_default();
    let rtype = format!("{namespace}/{}", parts.next().unwrap_or_default());
    WITHOUT_SPEC
        .iter()
        .any(|n| n.eq_ignore_ascii_case(namespace))
        || TYPES_WITHOUT_SPEC
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&rtype))
}

/// The request hook: the operation for `(method, path, api-version)` must exist in the specs,
/// and the body must validate strictly.
pub(crate) fn request_validator(specs: Arc<Specs>) -> RequestValidator {
    Arc::new(move |request: &RequestInfo| {
        match specs.operation(
            &request.method,
            &request.path,
            request.api_version.as_deref(),
        ) {
            Some(op) => significant(&op.validate_request(request.body.as_ref()), true)
                .iter()
                .map(ToString::to_string)
                .collect(),
            None if request.method == "GET" && is_operation_status(&request.path) => Vec::new(),
            None if without_spec(&request.path) => Vec::new(),
            None => vec![format!(
                "no operation in the specs serves {} {} at api-version {:?}",
                request.method, request.path, request.api_version
            )],
        }
    })
}

/// What is wrong with one answer of a specified operation, strictly, against the status it was
/// sent with. An unknown operation yields nothing here: the request hook reported it.
pub(crate) fn response_violations(
    specs: &Specs,
    request: &RequestInfo,
    response: &ResponseInfo,
) -> Vec<String> {
    let Some(op) = specs.operation(
        &request.method,
        &request.path,
        request.api_version.as_deref(),
    ) else {
        return Vec::new();
    };
    significant(
        &op.validate_response(response.status, response.body.as_ref()),
        true,
    )
    .iter()
    .map(ToString::to_string)
    .collect()
}

/// The recorded violations, one per line, for an assertion message.
pub(crate) fn describe(violations: &[RecordedViolation]) -> String {
    violations.iter().fold(String::new(), |mut out, v| {
        out.push_str("\n  ");
        out.push_str(&v.to_string());
        out
    })
}
