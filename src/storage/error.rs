//! The storage layer's one error type.
//!
//! Every error keeps what a caller decides on (the HTTP status and the storage error code such as
//! `LeaseAlreadyPresent` or `ConditionNotMet`) and what a human needs (the operation and the URL),
//! and never a secret: URLs lose their query string (where a SAS lives) and every message is
//! passed through the redaction registry, because Azure's own messages can quote a request's
//! signature back.

use std::fmt;

use super::lock::LockInfo;
use crate::secret;

/// A storage operation that failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The service answered with an error status.
    Service {
        /// What dsinfra was doing, e.g. "acquire lease".
        operation: &'static str,
        /// The resource, without its query string.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The `x-ms-error-code`, e.g. `LeaseIdMismatchWithBlobOperation`.
        code: Option<String>,
        /// The first line of the service's message, redacted.
        message: String,
    },
    /// The request did not get an answer (connection refused, timeout, TLS).
    Transport {
        /// What dsinfra was doing.
        operation: &'static str,
        /// The resource, without its query string.
        url: String,
        /// What went wrong, redacted.
        message: String,
    },
    /// No Azure AD token could be had for the request (only with `Auth::Token`).
    Credential {
        /// What dsinfra was doing.
        operation: &'static str,
        /// The resource, without its query string.
        url: String,
        /// The credential's own message, whole (the chain lists every source and why), redacted.
        message: String,
    },
    /// The request could not be made: a bad name, URL, key or SAS specification.
    Invalid(String),
    /// The state lock is held by someone else.
    Locked {
        /// The state blob, without its query string.
        url: String,
        /// Who holds it, from the blob's metadata.
        holder: Box<LockInfo>,
    },
    /// Our lease on the state blob is gone (broken by force-unlock or expired and taken), so the
    /// write was refused and nothing was overwritten.
    LeaseLost {
        /// The state blob, without its query string.
        url: String,
        /// The service error that showed it.
        source: Box<Error>,
    },
}

impl Error {
    /// An [`Error::Invalid`] with this message.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(secret::redact(&message.into()))
    }

    /// The HTTP status, if the service answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Service { status, .. } => Some(*status),
            Self::LeaseLost { source, .. } => source.status(),
            _ => None,
        }
    }

    /// The storage error code, if the service gave one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Service { code, .. } => code.as_deref(),
            Self::LeaseLost { source, .. } => source.code(),
            _ => None,
        }
    }

    /// Whether the blob or container does not exist.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Whether a lease is already held by someone else (`LeaseAlreadyPresent`).
    pub fn is_lease_present(&self) -> bool {
        self.code() == Some("LeaseAlreadyPresent")
    }

    /// Whether an `If-Match`/`If-None-Match` precondition failed.
    pub fn is_condition_not_met(&self) -> bool {
        matches!(
            self.code(),
            Some("ConditionNotMet" | "TargetConditionNotMet")
        ) || (self.status() == Some(412) && self.code().is_none())
    }

    /// Whether the request was refused for lack of permission (a read-only SAS writing, an
    /// expired SAS, a SAS for another container).
    pub fn is_forbidden(&self) -> bool {
        self.status() == Some(403)
    }

    /// Whether a lease id did not match or the lease is gone: the codes that mean "you no longer
    /// hold this blob".
    pub fn is_lease_mismatch(&self) -> bool {
        matches!(
            self.code(),
            Some(
                "LeaseIdMismatchWithBlobOperation"
                    | "LeaseIdMismatchWithLeaseOperation"
                    | "LeaseIdMismatchWithContainerOperation"
                    | "LeaseLost"
                    | "LeaseNotPresentWithBlobOperation"
                    | "LeaseNotPresentWithLeaseOperation"
                    | "LeaseIsBrokenAndCannotBeRenewed"
                    | "LeaseIsBreakingAndCannotBeAcquired"
                    | "LeaseIsBreakingAndCannotBeChanged"
            )
        )
    }

    /// Whether the request may succeed if simply tried again (no answer, throttled, server error).
    ///
    /// A credential failure counts: it only happens here once a source was chosen (a lease is
    /// renewed only after a token was had), so it is an unanswered token endpoint or IMDS, and
    /// the renewal should try again as it does when storage does not answer.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Transport { .. } | Self::Credential { .. } => true,
            Self::Service { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Service {
                operation,
                url,
                status,
                code,
                message,
            } => {
                write!(f, "{operation} {url} failed: HTTP {status}")?;
                if let Some(code) = code {
                    write!(f, " {code}")?;
                }
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            Self::Transport {
                operation,
                url,
                message,
            }
            | Self::Credential {
                operation,
                url,
                message,
            } => write!(f, "{operation} {url} failed: {message}"),
            Self::Invalid(message) => f.write_str(message),
            Self::Locked { url, holder } => write!(f, "the state {url} is locked by {holder}"),
            Self::LeaseLost { url, source } => write!(
                f,
                "the lock on the state {url} was lost (broken or expired and taken); \
                 the state was not written: {source}"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::LeaseLost { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// `text` with the query string of every URL in it removed and every registered secret
/// redacted. Used on every message that comes from outside dsinfra (a library's error, a
/// service's answer) before it is kept in an [`Error`].
pub fn scrub(text: &str) -> String {
    let redacted = secret::redact(text);
    let mut out = String::with_capacity(redacted.len());
    let mut rest = redacted.as_str();
    while let Some(at) = find_url(rest) {
        let (before, url_and_after) = rest.split_at(at);
        out.push_str(before);
        let end = url_and_after
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>' | ','))
            .unwrap_or(url_and_after.len());
        let url = &url_and_after[..end];
        out.push_str(url.split('?').next().unwrap_or(url));
        rest = &url_and_after[end..];
    }
    out.push_str(rest);
    out
}

fn find_url(text: &str) -> Option<usize> {
    match (text.find("http://"), text.find("https://")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The first line of a service message: Azure appends `RequestId:` and `Time:` lines that say
/// nothing to a user.
pub(crate) fn first_line(message: &str) -> String {
    scrub(message.lines().next().unwrap_or_default().trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_drops_query_strings_from_every_url() {
        assert_eq!(
            scrub(
                "error sending request for url (http://127.0.0.1:1/acct/c/b?sv=2026&sig=abc%3D): \
                 see https://x.test/a?b=c and ftp://keep?this"
            ),
            "error sending request for url (http://127.0.0.1:1/acct/c/b): see https://x.test/a and ftp://keep?this"
        );
    }

    #[test]
    fn service_error_display_is_exact() {
        let error = Error::Service {
            operation: "put blob",
            url: "http://127.0.0.1:1/devstoreaccount1/state/a".to_owned(),
            status: 412,
            code: Some("ConditionNotMet".to_owned()),
            message: "The condition specified using HTTP conditional header(s) is not met."
                .to_owned(),
        };
        assert_eq!(
            error.to_string(),
            "put blob http://127.0.0.1:1/devstoreaccount1/state/a failed: HTTP 412 ConditionNotMet: \
             The condition specified using HTTP conditional header(s) is not met."
        );
        assert!(error.is_condition_not_met());
        assert!(!error.is_transient());
    }

    #[test]
    fn first_line_drops_request_id_lines() {
        assert_eq!(
            first_line("There is already a lease present.\nRequestId:1\nTime:2026-01-01T00:00:00Z"),
            "There is already a lease present."
        );
    }
}
