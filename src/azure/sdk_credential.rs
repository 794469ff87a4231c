//! dsinfra's credentials as an `azure_core` credential, for the official Azure SDK clients that
//! dsinfra uses besides its own ARM client (the Blob client behind the remote state).
//!
//! The ARM client asks our [`TokenCredential`] for ARM's scope; an SDK client asks azure_core's
//! trait for its own scope (azure_storage_blob always asks for `https://storage.azure.com/.default`).
//! Adapting ours, instead of building a second azure_identity chain for the SDK clients, keeps
//! [`super::DefaultCredentialChain`] the one place that decides which sources are tried, in which
//! order, and what the message says when all fail: whatever signs dsinfra in to ARM signs it in
//! to the state's storage account too.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use azure_core::credentials::{
    AccessToken as SdkAccessToken, TokenCredential as SdkTokenCredential, TokenRequestOptions,
};
use azure_core::error::ErrorKind;
use azure_core::time::{Duration as SdkDuration, OffsetDateTime};
use chrono::{TimeDelta, Utc};

use super::credential::{AccessToken, REFRESH_MARGIN_MINUTES, TokenCredential};

/// How long an SDK client may keep a token that has no expiry (the emulator's static token):
/// it asks again after this, which costs a static credential nothing.
const NO_EXPIRY_LIFETIME: SdkDuration = SdkDuration::hours(1);

/// One of our credentials, seen by the Azure SDK clients as an `azure_core` credential.
///
/// Tokens are cached per scope. The SDK clients keep a token only as long as the client lives,
/// and the storage layer builds a client per call (a lease renewal every 20 s is one), while the
/// Azure CLI source spawns `az` for every token: without this cache each blob call would.
pub struct SdkCredential {
    inner: Arc<dyn TokenCredential>,
    cache: tokio::sync::Mutex<HashMap<String, AccessToken>>,
}

impl SdkCredential {
    /// Serves `inner`'s tokens to the Azure SDK clients.
    pub fn new(inner: Arc<dyn TokenCredential>) -> Self {
        Self {
            inner,
            cache: tokio::sync::Mutex::default(),
        }
    }

    /// A fresh token for `scope`: the cached one, or a new one from the inner credential.
    async fn token(&self, scope: &str) -> Result<AccessToken, super::ArmError> {
        // The lock is held across the fetch on purpose, as in the ARM client's cache: concurrent
        // calls wait for one token instead of each running the chain.
        let mut cache = self.cache.lock().await;
        if let Some(token) = cache.get(scope)
            && token.is_fresh(Utc::now(), TimeDelta::minutes(REFRESH_MARGIN_MINUTES))
        {
            return Ok(token.clone());
        }
        let token = self.inner.get_token(scope).await?;
        cache.insert(scope.to_owned(), token.clone());
        Ok(token)
    }
}

impl fmt::Debug for SdkCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The cache holds tokens; only the inner credential (which redacts) is shown.
        f.debug_struct("SdkCredential")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl SdkTokenCredential for SdkCredential {
    async fn get_token(
        &self,
        scopes: &[&str],
        _options: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<SdkAccessToken> {
        // Entra ID's v2 endpoint takes one resource per token, and so do azure_identity's
        // credentials; the SDK clients ask for exactly one.
        let [scope] = scopes else {
            return Err(azure_core::Error::with_message(
                ErrorKind::Credential,
                format!("exactly one scope per token, got {}", scopes.len()),
            ));
        };
        // The error keeps the chain's message whole (every source and why): the storage layer
        // shows it as the reason it could not authenticate.
        let token = self
            .token(scope)
            .await
            .map_err(|e| azure_core::Error::new(ErrorKind::Credential, e))?;
        let expires_on = token
            .expires_on
            .and_then(|t| OffsetDateTime::from_unix_timestamp(t.timestamp()).ok())
            .unwrap_or_else(|| OffsetDateTime::now_utc() + NO_EXPIRY_LIFETIME);
        Ok(SdkAccessToken::new(
            token.token.expose().to_owned(),
            expires_on,
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::azure::credential::TokenFuture;
    use crate::azure::{ArmError, Secret};

    /// Records the scopes asked for; answers a token per call, or fails when told to.
    #[derive(Debug, Default)]
    struct Recording {
        asked: Mutex<Vec<String>>,
        fail: bool,
    }

    impl TokenCredential for Recording {
        fn get_token<'a>(&'a self, scope: &'a str) -> TokenFuture<'a> {
            let mut asked = self.asked.lock().expect("not poisoned");
            asked.push(scope.to_owned());
            let n = asked.len();
            let fail = self.fail;
            Box::pin(async move {
                if fail {
                    return Err(ArmError::credential("no credential worked. Tried: ..."));
                }
                Ok(AccessToken {
                    token: Secret::new(format!("t{n}")),
                    expires_on: Some(Utc::now() + TimeDelta::hours(1)),
                })
            })
        }
    }

    const STORAGE: &str = "https://storage.azure.com/.default";
    const ARM: &str = "https://management.azure.com/.default";

    #[tokio::test]
    async fn the_sdk_clients_scope_reaches_the_credential_and_is_cached_per_scope() {
        let inner = Arc::new(Recording::default());
        let credential = SdkCredential::new(inner.clone());
        let token = |scope| {
            let credential = &credential;
            async move {
                let token = credential.get_token(&[scope], None).await.expect("token");
                token.token.secret().to_owned()
            }
        };
        assert_eq!(token(STORAGE).await, "t1");
        assert_eq!(token(STORAGE).await, "t1");
        assert_eq!(token(ARM).await, "t2");
        assert_eq!(
            *inner.asked.lock().expect("not poisoned"),
            [STORAGE.to_owned(), ARM.to_owned()]
        );
    }

    #[tokio::test]
    async fn a_failure_is_a_credential_error_with_the_inner_message_whole() {
        let inner = Arc::new(Recording {
            fail: true,
            ..Recording::default()
        });
        let err = SdkCredential::new(inner)
            .get_token(&[STORAGE], None)
            .await
            .expect_err("the inner credential fails");
        assert_eq!(err.kind(), &ErrorKind::Credential);
        assert_eq!(
            err.to_string(),
            "could not get an Azure access token: no credential worked. Tried: ..."
        );
        let two = SdkCredential::new(Arc::new(Recording::default()))
            .get_token(&[STORAGE, ARM], None)
            .await
            .expect_err("two scopes");
        assert_eq!(two.to_string(), "exactly one scope per token, got 2");
    }

    #[test]
    fn tokens_never_print() {
        let credential = SdkCredential::new(Arc::new(crate::azure::StaticTokenCredential::new(
            "eyJ0eXAiOiJKV1Qi",
        )));
        let shown = format!("{credential:?}");
        assert!(!shown.contains("eyJ0"), "{shown}");
    }
}
