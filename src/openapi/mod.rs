//! A Swagger 2.0 loader and validator for the official Azure REST API specs.
//!
//! The emulator is only an honest test double if its answers are checked against the real API
//! definitions, and the ARM client's request bodies likewise. This module loads the unmodified
//! spec files from `../shared/azure-specs` (see [`Specs::load_default`]), resolves `$ref`s
//! across files, finds the operation for a concrete `(method, path, api-version)`, and validates
//! request and response bodies against its schemas. It knows nothing about the rest of the crate
//! so it could become its own crate.
//!
//! What the validator covers, and why it stops there: `$ref` (relative files and JSON pointers),
//! `allOf`, `properties`, `additionalProperties`, `required`, `type`, `enum` (an `x-ms-enum` with
//! `modelAsString` accepts any string, as autorest-generated clients do), `items`, `readOnly`
//! (must be absent from requests), `x-nullable`, a loose check of `format` and a minimal
//! `discriminator`. Numeric ranges, patterns and lengths are not checked: ARM enforces them with
//! its own messages, which the emulator reproduces where it matters.

mod schema;
mod specs;

pub use schema::{Direction, Violation, ViolationKind};
pub use specs::{Example, Operation, SpecError, Specs, SpecsMissing};

/// Keeps the violations a caller cares about: all of them when `strict`, otherwise everything
/// except [`ViolationKind::UnknownProperty`] (ARM ignores some unknown properties, so callers
/// choose whether an extra property is an error).
pub fn significant(violations: &[Violation], strict: bool) -> Vec<&Violation> {
    violations
        .iter()
        .filter(|v| strict || v.kind != ViolationKind::UnknownProperty)
        .collect()
}
