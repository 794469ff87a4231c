//! Typed ARM request and response bodies for exactly the resources dsinfra manages.
//!
//! Each type was checked against its definition in `shared/azure-specs` at the api-version in
//! [`super::api_version`]: property names (ARM spells `publicIPAddress`, `diskSizeGB`, so many
//! fields carry an explicit `rename`), enums, required properties, and read-only properties.
//! Read-only properties (`id`, `provisioningState`, ...) are `skip_serializing`: they are read
//! from responses and never sent. Optional properties are `skip_serializing_if = None`, so a
//! request body holds only what dsinfra decided. Where the spec's create body differs from the
//! resource (storage accounts), there are separate request and response types.
//!
//! The tests at the bottom of each file serialise bodies and compare them, as JSON values, with
//! the request bodies of the spec's own examples.

pub mod aks;
pub mod authorization;
pub mod availability;
pub mod common;
pub mod compute;
pub mod devtestlab;
pub mod disk;
pub mod features;
pub mod images;
pub mod ml;
pub mod monitor;
pub mod network;
pub mod placement;
pub mod quota;
pub mod registry;
pub mod resources;
pub mod storage;
pub mod vault;

pub use common::{SubResource, Tags};

#[cfg(test)]
pub(crate) mod spec_examples {
    //! Loads request and response bodies from the spec examples in `shared/azure-specs`.

    use std::path::PathBuf;

    /// The spec folder: `DSINFRA_AZURE_SPECS` when set (as `scripts/test` and the openapi tests
    /// honour it), else `shared/azure-specs` beside the checkout.
    pub(crate) fn specs_dir() -> PathBuf {
        std::env::var_os("DSINFRA_AZURE_SPECS").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/azure-specs"),
            PathBuf::from,
        )
    }

    /// The parsed example file at `relative` (under the specs folder). Panics loudly when the
    /// specs are not there: these tests exist to hold the bodies to them.
    pub(crate) fn example(relative: &str) -> serde_json::Value {
        let path = specs_dir().join(relative);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "spec example {} is missing ({e}); the azure body tests need ../shared/azure-specs beside the checkout",
                path.display()
            )
        });
        serde_json::from_str(&text).expect("spec examples are JSON")
    }

    /// The request body parameter `name` of an example.
    pub(crate) fn request_body(relative: &str, name: &str) -> serde_json::Value {
        example(relative)["parameters"][name].clone()
    }

    /// The response body for `status` of an example.
    pub(crate) fn response_body(relative: &str, status: &str) -> serde_json::Value {
        example(relative)["responses"][status]["body"].clone()
    }
}
