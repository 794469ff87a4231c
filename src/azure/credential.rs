//! Where bearer tokens come from, behind a trait of our own.
//!
//! The client needs exactly one thing from a credential: a token for ARM's scope. Owning the
//! trait keeps azure_identity's types out of the client (and out of tests, which use a static
//! token against the emulator) and gives one place to enforce that tokens never print: the
//! [`AccessToken`] holds its value in a [`Secret`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, TimeDelta, Utc};

use super::error::ArmError;
use super::secret::Secret;

/// A bearer token and when it stops working.
#[derive(Clone, Debug)]
pub struct AccessToken {
    /// The token; prints as `<redacted>`.
    pub token: Secret,
    /// When it expires; `None` for tokens that do not (the emulator's).
    pub expires_on: Option<DateTime<Utc>>,
}

impl AccessToken {
    /// Whether the token is still good at `now`, keeping `margin` in hand so a request does not
    /// start with a token that expires on the way.
    pub fn is_fresh(&self, now: DateTime<Utc>, margin: TimeDelta) -> bool {
        self.expires_on.is_none_or(|expiry| expiry - margin > now)
    }
}

/// The future a credential returns.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<AccessToken, ArmError>> + Send + 'a>>;

/// Something that can produce bearer tokens for ARM.
pub trait TokenCredential: Send + Sync + fmt::Debug {
    /// A token for `scope` (e.g. `https://management.azure.com/.default`).
    fn get_token<'a>(&'a self, scope: &'a str) -> TokenFuture<'a>;
}

/// A fixed token: for the emulator, and for callers that already hold one.
pub struct StaticTokenCredential {
    token: Secret,
}

impl StaticTokenCredential {
    /// A credential that always returns `token`.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: Secret::new(token),
        }
    }
}

impl fmt::Debug for StaticTokenCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticTokenCredential")
            .field("token", &self.token)
            .finish()
    }
}

impl TokenCredential for StaticTokenCredential {
    fn get_token<'a>(&'a self, _scope: &'a str) -> TokenFuture<'a> {
        let token = AccessToken {
            token: self.token.clone(),
            expires_on: None,
        };
        Box::pin(async move { Ok(token) })
    }
}

/// Caches one token per client and refreshes it before it expires or when ARM says it has.
///
/// The lock is held across the fetch on purpose: concurrent requests wait for one token instead
/// of each asking the credential (the Azure CLI credential spawns a process per call).
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    current: tokio::sync::Mutex<Option<AccessToken>>,
}

/// How long before its expiry a cached token is replaced.
pub(crate) const REFRESH_MARGIN_MINUTES: i64 = 5;

impl TokenCache {
    /// The cached token if fresh, else a new one from `credential`.
    pub(crate) async fn token(
        &self,
        credential: &dyn TokenCredential,
        scope: &str,
    ) -> Result<AccessToken, ArmError> {
        let mut current = self.current.lock().await;
        if let Some(token) = current.as_ref()
            && token.is_fresh(Utc::now(), TimeDelta::minutes(REFRESH_MARGIN_MINUTES))
        {
            return Ok(token.clone());
        }
        let token = credential.get_token(scope).await?;
        *current = Some(token.clone());
        Ok(token)
    }

    /// Forgets the cached token (ARM answered 401 ExpiredAuthenticationToken).
    pub(crate) async fn invalidate(&self) {
        *self.current.lock().await = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_never_print() {
        let token = AccessToken {
            token: Secret::new("eyJ0eXAiOiJKV1Qi"),
            expires_on: None,
        };
        let shown = format!(
            "{token:?} {:?}",
            StaticTokenCredential::new("eyJ0eXAiOiJKV1Qi")
        );
        assert!(!shown.contains("eyJ0"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn freshness_keeps_a_margin() {
        let now = Utc::now();
        let token = |minutes| AccessToken {
            token: Secret::new("t"),
            expires_on: Some(now + TimeDelta::minutes(minutes)),
        };
        let margin = TimeDelta::minutes(5);
        assert!(token(30).is_fresh(now, margin));
        assert!(!token(4).is_fresh(now, margin));
        assert!(!token(-1).is_fresh(now, margin));
        let forever = AccessToken {
            token: Secret::new("t"),
            expires_on: None,
        };
        assert!(forever.is_fresh(now, margin));
    }

    #[tokio::test]
    async fn cache_reuses_until_invalidated() {
        #[derive(Debug, Default)]
        struct Counting(std::sync::atomic::AtomicU32);
        impl TokenCredential for Counting {
            fn get_token<'a>(&'a self, _scope: &'a str) -> TokenFuture<'a> {
                let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Box::pin(async move {
                    Ok(AccessToken {
                        token: Secret::new(format!("t{n}")),
                        expires_on: None,
                    })
                })
            }
        }
        let credential = Counting::default();
        let cache = TokenCache::default();
        let a = cache.token(&credential, "s").await.expect("token");
        let b = cache.token(&credential, "s").await.expect("token");
        assert_eq!((a.token.expose(), b.token.expose()), ("t0", "t0"));
        cache.invalidate().await;
        let c = cache.token(&credential, "s").await.expect("token");
        assert_eq!(c.token.expose(), "t1");
    }
}
