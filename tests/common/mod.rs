//! Helpers shared by the integration tests: real peers (Azurite, sshd) started per test.

pub mod aml_nodes;
pub mod azurite;
pub mod cloud_init;
pub mod farm_apply;
pub mod gzip;
pub mod nodes;
pub mod sshd;
