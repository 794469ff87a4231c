//! The Azure Resource Manager client: credentials, transport, long-running operations, retries
//! and typed request/response bodies.
//!
//! This module imports nothing from the rest of dsinfra (it could become its own crate), so it
//! defines its own types. The layers, bottom up:
//! - [`secret`]: the redacting string for tokens, keys and customData.
//! - [`credential`], [`identity`], [`certificate`], [`subscription`]: who we are and where we
//!   work; [`sdk_credential`] lends the same credentials to the Azure SDK clients (Blob storage).
//! - [`retry`], [`ratelimit`]: pure decisions about waiting.
//! - [`client`], [`lro`]: the transport and ARM's async protocol.
//! - [`api_version`], [`resource_id`]: the one api-version table and the path builders.
//! - [`types`]: serde bodies checked against the official specs, and [`ops`], the typed
//!   helpers per resource.
//! - [`error`], [`quota_message`]: one error type that keeps ARM's answer verbatim.
//!
//! See docs/azure-client.md for the design.

pub mod api_version;
pub mod certificate;
pub mod client;
pub mod credential;
pub mod error;
pub mod identity;
pub mod lro;
pub mod ops;
pub mod quota_message;
pub mod ratelimit;
pub mod resource_id;
pub mod retry;
pub mod sdk_credential;
pub mod secret;
pub mod subscription;
pub mod types;

pub use client::{ArmClient, ArmClientBuilder, DeleteOutcome, Idempotency, Method};
pub use credential::{AccessToken, StaticTokenCredential, TokenCredential};
pub use error::{ArmError, ErrorDetail, ThrottleWait};
pub use identity::DefaultCredentialChain;
pub use lro::{LroProgress, PollPolicy, ProgressCallback, ProgressState};
pub use resource_id::ResourceId;
pub use retry::{RetryDecision, RetryPolicy};
pub use sdk_credential::SdkCredential;
pub use secret::Secret;
