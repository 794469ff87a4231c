//! A small Blob client for what dsinfra needs: state blobs with leases and conditional writes,
//! containers, listings and metadata.
//!
//! It wraps the official `azure_storage_blob` crate (decision 3 in docs/decisions.md) instead of
//! hand-writing REST calls, and adds three things the crate leaves to its users:
//!
//! - Authentication by SAS, account key or Azure AD token behind one [`Auth`]. The crate only
//!   knows Azure AD tokens (over HTTPS) and SAS query strings in the URL; an account key is used
//!   here by signing a short-lived account SAS locally for each call, so the key itself never
//!   goes on the wire and works against http://127.0.0.1 (Azurite) too.
//! - Errors that keep the storage error code and never a secret ([`Error`]).
//! - Plain types ([`BlobProperties`], [`BlobItem`], [`Conditions`]) so callers do not depend on
//!   the crate's generated models.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use azure_core::credentials::TokenCredential;
use azure_core::http::headers::HeaderName;
use azure_core::http::{
    ClientOptions, Etag, ExponentialRetryOptions, HttpClientOptions, RequestContent, RetryOptions,
    Transport, Url, new_http_client,
};
use azure_storage_blob::models::{
    BlobClientAcquireLeaseOptions, BlobClientAcquireLeaseResultHeaders as _,
    BlobClientBreakLeaseOptions, BlobClientBreakLeaseResultHeaders as _,
    BlobClientCreateSnapshotOptions, BlobClientCreateSnapshotResultHeaders as _,
    BlobClientDownloadOptions, BlobClientGetPropertiesOptions,
    BlobClientGetPropertiesResultHeaders as _, BlobClientSetMetadataOptions,
    BlobClientUploadOptions, BlobContainerClientListBlobsOptions, LeaseState, ListBlobsIncludeItem,
};
use azure_storage_blob::{
    BlobClient, BlobContainerClient, BlobServiceClient, BlobServiceClientOptions,
};
use chrono::Utc;
use futures::TryStreamExt as _;

use super::Error;
use super::error::{first_line, scrub};
use super::sas::{AccountKey, Permissions, ResourceTypes, SasSpec, SasToken, Scope, Services};
use crate::secret::{self, Secret};

/// How requests are authenticated.
#[derive(Clone)]
pub enum Auth {
    /// A SAS query string (without the leading `?`), appended to every request URL.
    Sas(Secret<String>),
    /// A storage account key. Each call signs a fresh account SAS valid for a few minutes.
    AccountKey(AccountKey),
    /// An Azure AD credential (azure_identity): HTTPS endpoints only, as the crate requires.
    Token(Arc<dyn TokenCredential>),
}

impl Auth {
    /// A SAS given as a query string, with or without its leading `?`. It is registered for
    /// redaction.
    pub fn sas(query: &str) -> Self {
        let query = query.trim_start_matches('?');
        secret::register(query);
        Self::Sas(Secret::new(query.to_owned()))
    }

    /// A SAS signed by [`SasSpec::sign`].
    pub fn sas_token(token: &SasToken) -> Self {
        Self::Sas(token.query().clone())
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sas(query) => f.debug_tuple("Sas").field(query).finish(),
            Self::AccountKey(key) => f.debug_tuple("AccountKey").field(key).finish(),
            Self::Token(_) => f.write_str("Token(***)"),
        }
    }
}

/// How long the SAS signed for one call with an account key stays valid. Long enough for a
/// slow upload, short enough that a leaked one is soon useless.
const ACCOUNT_KEY_SAS_LIFETIME: chrono::TimeDelta = chrono::TimeDelta::minutes(15);

/// How far back the start of a per-call SAS is set, to tolerate clock skew with the service.
const CLOCK_SKEW: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// Extra conditions on a write or read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conditions {
    /// Only if the blob's ETag is this (`If-Match`).
    pub if_match: Option<String>,
    /// Only if the blob does not exist (`If-None-Match: *`).
    pub if_not_exists: bool,
    /// The lease id the blob is leased with (`x-ms-lease-id`).
    pub lease_id: Option<String>,
}

impl Conditions {
    /// No conditions.
    pub fn none() -> Self {
        Self::default()
    }

    /// Under a lease.
    pub fn leased(lease_id: &str) -> Self {
        Self {
            lease_id: Some(lease_id.to_owned()),
            ..Self::default()
        }
    }

    /// The same conditions, also requiring this ETag.
    #[must_use]
    pub fn if_match(mut self, etag: &str) -> Self {
        self.if_match = Some(etag.to_owned());
        self
    }
}

/// What to store with a blob.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Content-Encoding`, e.g. `gzip`.
    pub content_encoding: Option<String>,
    /// User metadata; it replaces all metadata the blob had.
    pub metadata: BTreeMap<String, String>,
    /// Preconditions.
    pub conditions: Conditions,
}

/// A blob as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    /// The content, byte for byte.
    pub content: Vec<u8>,
    /// The properties of the version read.
    pub properties: BlobProperties,
}

/// A lease's state as the service reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// No lease: anyone may acquire one.
    Available,
    /// Leased, with a lease that is renewed or not yet expired.
    Leased,
    /// Being broken: it ends when the break period is over.
    Breaking,
    /// Broken: anyone may acquire a new lease.
    Broken,
    /// Expired: anyone may acquire a new lease.
    Expired,
}

impl Lease {
    /// Whether someone holds the blob now.
    pub fn is_held(self) -> bool {
        matches!(self, Self::Leased | Self::Breaking)
    }
}

/// A blob's properties.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobProperties {
    /// The ETag, quotes included as the service sends it.
    pub etag: String,
    /// Size in bytes.
    pub content_length: u64,
    /// `Content-Encoding`.
    pub content_encoding: Option<String>,
    /// User metadata.
    pub metadata: BTreeMap<String, String>,
    /// The lease state.
    pub lease: Lease,
}

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobItem {
    /// The blob name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// `Content-Encoding`, e.g. `gzip`.
    pub content_encoding: Option<String>,
    /// Set for a snapshot: its timestamp id.
    pub snapshot: Option<String>,
}

/// A Blob service endpoint with its credentials.
#[derive(Clone)]
pub struct BlobStore {
    /// The account's blob endpoint, e.g. `https://acct.blob.core.windows.net` or
    /// `http://127.0.0.1:10000/devstoreaccount1`, without a query string.
    endpoint: Url,
    auth: Auth,
    /// One HTTP client for every call, so that building a per-call SDK client is cheap.
    transport: Transport,
}

impl fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlobStore")
            .field("endpoint", &self.endpoint.as_str())
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl BlobStore {
    /// A client for the blob endpoint `endpoint` (any query string in it is refused: pass a SAS
    /// as [`Auth::Sas`] so that it is kept secret).
    pub fn new(endpoint: &str, auth: Auth) -> Result<Self, Error> {
        let endpoint = Url::parse(endpoint.trim_end_matches('/')).map_err(|e| {
            Error::invalid(format!("invalid blob endpoint {}: {e}", scrub(endpoint)))
        })?;
        if endpoint.query().is_some() {
            return Err(Error::invalid(format!(
                "the blob endpoint {} has a query string: give a SAS as the credential instead",
                scrub(endpoint.as_str())
            )));
        }
        if endpoint.cannot_be_a_base() || !matches!(endpoint.scheme(), "http" | "https") {
            return Err(Error::invalid(format!(
                "the blob endpoint {endpoint} is not an http(s) URL"
            )));
        }
        if matches!(auth, Auth::Token(_)) && endpoint.scheme() != "https" {
            return Err(Error::invalid(format!(
                "the blob endpoint {endpoint} must use https with an Azure AD credential"
            )));
        }
        let transport = Transport::new(new_http_client(Some(HttpClientOptions {
            // Blobs stored gzip-encoded must come back byte for byte, not decompressed.
            automatic_decompression: false,
        })));
        Ok(Self {
            endpoint,
            auth,
            transport,
        })
    }

    /// The endpoint, without credentials.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// The URL of a blob as shown in messages: no query string, so no SAS.
    pub fn display_url(&self, container: &str, blob: &str) -> String {
        let mut url = self.endpoint.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(container);
            if !blob.is_empty() {
                segments.push(blob);
            }
        }
        url.to_string()
    }

    fn service(&self) -> Result<BlobServiceClient, Error> {
        let mut url = self.endpoint.clone();
        let credential = match &self.auth {
            Auth::Sas(query) => {
                url.set_query(Some(query.expose()));
                None
            }
            Auth::AccountKey(key) => {
                let now = Utc::now();
                let token = SasSpec {
                    scope: Scope::Account {
                        services: Services::BLOB,
                        resource_types: ResourceTypes::ALL,
                    },
                    permissions: Permissions::ALL,
                    start: Some(now - CLOCK_SKEW),
                    expiry: now + ACCOUNT_KEY_SAS_LIFETIME,
                    ip_range: None,
                    protocol: super::sas::Protocol::HttpsOnly,
                }
                .https_only(url.scheme() == "https")
                .sign(key)?;
                url.set_query(Some(token.expose_query()));
                None
            }
            Auth::Token(credential) => Some(credential.clone()),
        };
        let options = BlobServiceClientOptions {
            client_options: ClientOptions {
                transport: Some(self.transport.clone()),
                // A few quick retries of 408/429/5xx: a lease renewal must not wait a minute.
                retry: RetryOptions::exponential(ExponentialRetryOptions {
                    max_retries: 3,
                    max_total_elapsed: azure_core::time::Duration::seconds(20),
                    ..ExponentialRetryOptions::default()
                }),
                ..ClientOptions::default()
            },
            ..BlobServiceClientOptions::default()
        };
        BlobServiceClient::new(url, credential, Some(options)).map_err(|e| {
            Error::invalid(format!(
                "cannot build a blob client: {}",
                scrub(&e.to_string())
            ))
        })
    }

    fn container_client(&self, container: &str) -> Result<BlobContainerClient, Error> {
        Ok(self.service()?.blob_container_client(container))
    }

    fn blob_client(&self, container: &str, blob: &str) -> Result<BlobClient, Error> {
        Ok(self.service()?.blob_client(container, blob))
    }

    fn error(
        &self,
        operation: &'static str,
        container: &str,
        blob: &str,
        error: azure_core::Error,
    ) -> Error {
        from_sdk(operation, self.display_url(container, blob), error)
    }

    /// Creates a container; `Ok(false)` if it already existed.
    pub async fn create_container(&self, container: &str) -> Result<bool, Error> {
        match self.container_client(container)?.create(None).await {
            Ok(_) => Ok(true),
            Err(e) => {
                let error = self.error("create container", container, "", e);
                if error.code() == Some("ContainerAlreadyExists") {
                    Ok(false)
                } else {
                    Err(error)
                }
            }
        }
    }

    /// Uploads `content` as a block blob and returns its new ETag.
    pub async fn put(
        &self,
        container: &str,
        blob: &str,
        content: &[u8],
        options: &PutOptions,
    ) -> Result<String, Error> {
        let conditions = &options.conditions;
        let upload = BlobClientUploadOptions {
            blob_content_type: options.content_type.clone(),
            blob_content_encoding: options.content_encoding.clone(),
            metadata: (!options.metadata.is_empty()).then(|| to_hash_map(&options.metadata)),
            if_match: conditions.if_match.clone().map(Etag::from),
            if_none_match: conditions.if_not_exists.then(|| Etag::from("*")),
            lease_id: conditions.lease_id.clone(),
            ..BlobClientUploadOptions::default()
        };
        let result = self
            .blob_client(container, blob)?
            .upload(RequestContent::from(content.to_vec()), Some(upload))
            .await
            .map_err(|e| self.error("put blob", container, blob, e))?;
        Ok(result.etag.map(|etag| etag.to_string()).unwrap_or_default())
    }

    /// Downloads a blob (or one of its snapshots), with its properties.
    pub async fn get(
        &self,
        container: &str,
        blob: &str,
        snapshot: Option<&str>,
        conditions: &Conditions,
    ) -> Result<Blob, Error> {
        let options = BlobClientDownloadOptions {
            if_match: conditions.if_match.clone().map(Etag::from),
            lease_id: conditions.lease_id.clone(),
            snapshot: snapshot.map(str::to_owned),
            ..BlobClientDownloadOptions::default()
        };
        let result = self
            .blob_client(container, blob)?
            .download(Some(options))
            .await
            .map_err(|e| self.error("get blob", container, blob, e))?;
        let props = result.properties;
        let properties = BlobProperties {
            etag: props.etag.map(|etag| etag.to_string()).unwrap_or_default(),
            content_length: props.content_length.unwrap_or_default(),
            content_encoding: props.content_encoding,
            metadata: props.metadata.into_iter().collect(),
            lease: lease_of(props.lease_state),
        };
        let content = result
            .body
            .collect()
            .await
            .map_err(|e| self.error("get blob", container, blob, e))?;
        Ok(Blob {
            content: content.to_vec(),
            properties,
        })
    }

    /// A blob's properties and metadata.
    pub async fn properties(&self, container: &str, blob: &str) -> Result<BlobProperties, Error> {
        let response = self
            .blob_client(container, blob)?
            .get_properties(Some(BlobClientGetPropertiesOptions::default()))
            .await
            .map_err(|e| self.error("get blob properties", container, blob, e))?;
        let header = |e| self.error("get blob properties", container, blob, e);
        Ok(BlobProperties {
            etag: response
                .etag()
                .map_err(header)?
                .map(|etag| etag.to_string())
                .unwrap_or_default(),
            content_length: response
                .content_length()
                .map_err(header)?
                .unwrap_or_default(),
            content_encoding: response.content_encoding().map_err(header)?,
            metadata: response.metadata().map_err(header)?.into_iter().collect(),
            lease: lease_of(response.lease_state().map_err(header)?),
        })
    }

    /// The blobs whose names start with `prefix`, with sizes and content encodings; with
    /// `snapshots`, their snapshots too (listed before the base blob, as the service orders them).
    pub async fn list(
        &self,
        container: &str,
        prefix: &str,
        snapshots: bool,
    ) -> Result<Vec<BlobItem>, Error> {
        let options = BlobContainerClientListBlobsOptions {
            prefix: (!prefix.is_empty()).then(|| prefix.to_owned()),
            include: snapshots.then(|| vec![ListBlobsIncludeItem::Snapshots]),
            ..BlobContainerClientListBlobsOptions::default()
        };
        let mut pager = self
            .container_client(container)?
            .list_blobs(Some(options))
            .map_err(|e| self.error("list blobs", container, "", e))?;
        let mut items = Vec::new();
        while let Some(item) = pager
            .try_next()
            .await
            .map_err(|e| self.error("list blobs", container, "", e))?
        {
            let properties = item.properties.unwrap_or_default();
            items.push(BlobItem {
                name: item.name.unwrap_or_default(),
                size: properties.content_length.unwrap_or_default(),
                content_encoding: properties.content_encoding.filter(|e| !e.is_empty()),
                snapshot: item.snapshot.filter(|s| !s.is_empty()),
            });
        }
        Ok(items)
    }

    /// Acquires a lease for `duration` (15 to 60 seconds: dsinfra never takes an infinite
    /// lease, so a holder that dies never leaves the blob locked for good) and returns its id.
    pub async fn acquire_lease(
        &self,
        container: &str,
        blob: &str,
        duration: Duration,
    ) -> Result<String, Error> {
        let seconds = lease_seconds(duration)?;
        let options = BlobClientAcquireLeaseOptions {
            proposed_lease_id: Some(uuid::Uuid::new_v4().to_string()),
            ..BlobClientAcquireLeaseOptions::default()
        };
        let response = self
            .blob_client(container, blob)?
            .acquire_lease(seconds, Some(options))
            .await
            .map_err(|e| self.error("acquire lease", container, blob, e))?;
        response
            .lease_id()
            .map_err(|e| self.error("acquire lease", container, blob, e))?
            .ok_or_else(|| Error::invalid("the service acquired a lease but returned no lease id"))
    }

    /// Renews a lease for another full duration.
    pub async fn renew_lease(
        &self,
        container: &str,
        blob: &str,
        lease_id: &str,
    ) -> Result<(), Error> {
        self.blob_client(container, blob)?
            .renew_lease(lease_id.to_owned(), None)
            .await
            .map_err(|e| self.error("renew lease", container, blob, e))?;
        Ok(())
    }

    /// Releases a lease at once.
    pub async fn release_lease(
        &self,
        container: &str,
        blob: &str,
        lease_id: &str,
    ) -> Result<(), Error> {
        self.blob_client(container, blob)?
            .release_lease(lease_id.to_owned(), None)
            .await
            .map_err(|e| self.error("release lease", container, blob, e))?;
        Ok(())
    }

    /// Breaks whatever lease the blob has, without knowing its id; `break_period` zero ends it
    /// at once. Returns the seconds until the blob can be leased again.
    pub async fn break_lease(
        &self,
        container: &str,
        blob: &str,
        break_period: Duration,
    ) -> Result<u64, Error> {
        let period = i32::try_from(break_period.as_secs().min(60)).unwrap_or(60);
        let options = BlobClientBreakLeaseOptions {
            break_period: Some(period),
            ..BlobClientBreakLeaseOptions::default()
        };
        let response = self
            .blob_client(container, blob)?
            .break_lease(Some(options))
            .await
            .map_err(|e| self.error("break lease", container, blob, e))?;
        let remaining = response
            .lease_time()
            .map_err(|e| self.error("break lease", container, blob, e))?
            .unwrap_or_default();
        Ok(u64::try_from(remaining).unwrap_or_default())
    }

    /// Replaces a blob's metadata and returns its new ETag.
    pub async fn set_metadata(
        &self,
        container: &str,
        blob: &str,
        metadata: &BTreeMap<String, String>,
        conditions: &Conditions,
    ) -> Result<String, Error> {
        let options = BlobClientSetMetadataOptions {
            if_match: conditions.if_match.clone().map(Etag::from),
            lease_id: conditions.lease_id.clone(),
            ..BlobClientSetMetadataOptions::default()
        };
        let response = self
            .blob_client(container, blob)?
            .set_metadata(&to_hash_map(metadata), Some(options))
            .await
            .map_err(|e| self.error("set blob metadata", container, blob, e))?;
        // Set Blob Metadata has no typed response headers in the crate; read the ETag directly.
        Ok(response
            .headers()
            .get_optional_string(&HeaderName::from_static("etag"))
            .unwrap_or_default())
    }

    /// Takes a read-only snapshot of a blob and returns the snapshot's id (a timestamp).
    pub async fn snapshot(
        &self,
        container: &str,
        blob: &str,
        conditions: &Conditions,
    ) -> Result<String, Error> {
        let options = BlobClientCreateSnapshotOptions {
            if_match: conditions.if_match.clone().map(Etag::from),
            lease_id: conditions.lease_id.clone(),
            ..BlobClientCreateSnapshotOptions::default()
        };
        let response = self
            .blob_client(container, blob)?
            .create_snapshot(Some(options))
            .await
            .map_err(|e| self.error("snapshot blob", container, blob, e))?;
        response
            .snapshot()
            .map_err(|e| self.error("snapshot blob", container, blob, e))?
            .ok_or_else(|| {
                Error::invalid("the service took a snapshot but returned no snapshot id")
            })
    }
}

/// The lease duration in whole seconds, within the service's 15..=60 range for finite leases.
fn lease_seconds(duration: Duration) -> Result<i32, Error> {
    match i32::try_from(duration.as_secs()) {
        Ok(seconds @ 15..=60) => Ok(seconds),
        _ => Err(Error::invalid(format!(
            "a lease lasts 15 to 60 seconds, not {} s",
            duration.as_secs()
        ))),
    }
}

fn lease_of(state: Option<LeaseState>) -> Lease {
    match state {
        Some(LeaseState::Leased) => Lease::Leased,
        Some(LeaseState::Breaking) => Lease::Breaking,
        Some(LeaseState::Broken) => Lease::Broken,
        Some(LeaseState::Expired) => Lease::Expired,
        _ => Lease::Available,
    }
}

fn to_hash_map(metadata: &BTreeMap<String, String>) -> HashMap<String, String> {
    metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Converts an SDK error into ours, keeping the status and error code and dropping anything
/// that could hold a secret.
fn from_sdk(operation: &'static str, url: String, error: azure_core::Error) -> Error {
    if error.kind() == &azure_core::error::ErrorKind::Credential {
        return Error::Credential {
            operation,
            url,
            message: scrub(&innermost(&error)),
        };
    }
    let Some(status) = error.http_status() else {
        return Error::Transport {
            operation,
            url,
            message: scrub(&error_chain(&error)),
        };
    };
    let code = match error.kind() {
        azure_core::error::ErrorKind::HttpResponse { error_code, .. } => error_code.clone(),
        _ => None,
    };
    let message = azure_storage_blob::StorageError::try_from(error)
        .ok()
        .and_then(|e| e.message)
        .map(|m: String| first_line(&m))
        .unwrap_or_default();
    Error::Service {
        operation,
        url,
        status: u16::from(status),
        code,
        message,
    }
}

/// The text of the deepest source of `error`: the SDK wraps a credential's error in its own
/// context ("non-transport error occurred which will not be retried"), and the credential's
/// message is the one that says what to do.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = error;
    while let Some(inner) = deepest.source() {
        deepest = inner;
    }
    deepest.to_string()
}

/// An error and its sources in one line: the SDK wraps the transport error, and the useful
/// part ("connection refused") is at the bottom.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_durations_outside_15_to_60_seconds_are_refused() {
        assert_eq!(lease_seconds(Duration::from_secs(15)).ok(), Some(15));
        assert_eq!(lease_seconds(Duration::from_mins(1)).ok(), Some(60));
        assert_eq!(
            lease_seconds(Duration::from_secs(14))
                .expect_err("too short")
                .to_string(),
            "a lease lasts 15 to 60 seconds, not 14 s"
        );
        assert!(lease_seconds(Duration::from_secs(61)).is_err());
    }

    #[test]
    fn endpoint_with_a_query_string_is_refused_without_echoing_it() {
        let error = BlobStore::new(
            "http://127.0.0.1:1/acct?sv=1&sig=c2VjcmV0LXNpZ25hdHVyZQ",
            Auth::sas("sv=1"),
        )
        .expect_err("refused");
        assert_eq!(
            error.to_string(),
            "the blob endpoint http://127.0.0.1:1/acct has a query string: give a SAS as the credential instead"
        );
    }

    #[test]
    fn display_url_appends_container_and_blob_without_credentials() {
        let store = BlobStore::new(
            "http://127.0.0.1:10000/devstoreaccount1/",
            Auth::sas("sv=x&sig=secret-signature"),
        )
        .expect("a valid endpoint");
        assert_eq!(
            store.display_url("state", "exp/a b.tfstate"),
            "http://127.0.0.1:10000/devstoreaccount1/state/exp%2Fa%20b.tfstate"
        );
        assert!(!format!("{store:?}").contains("secret-signature"));
    }
}
