//! The one error type of the SSH layer.
//!
//! Like reqwest's error it is opaque: callers ask predicates (`is_timeout`, `is_host_key_mismatch`)
//! instead of matching on russh internals, so the transport can change without breaking them.
//! Every error names the node it is about, because a cluster run talks to many nodes at once and
//! "connection refused" alone does not say which one.

use std::fmt;
use std::time::Duration;

/// An SSH failure on one node.
#[derive(Debug)]
pub struct Error {
    node: String,
    kind: ErrorKind,
}

/// What went wrong; private so variants can be added without breaking callers.
#[derive(Debug)]
pub(crate) enum ErrorKind {
    /// Nothing answered with a usable SSH server within the wait limit.
    Unreachable {
        address: String,
        waited: Duration,
        attempts: u32,
        last: String,
    },
    /// The server presented a host key other than the pinned one.
    HostKeyMismatch { expected: String, actual: String },
    /// The server refused every key we offered.
    AuthRejected { user: String, method: String },
    /// The client key or agent could not be used.
    Credentials(String),
    /// A command ran longer than its limit.
    Timeout { what: String, after: Duration },
    /// The connection broke while a command ran (for example the node rebooted).
    ConnectionLost(String),
    /// Any other protocol failure.
    Protocol(String),
}

impl Error {
    pub(crate) fn new(node: &str, kind: ErrorKind) -> Self {
        Self {
            node: node.to_owned(),
            kind,
        }
    }

    /// The node the error is about.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Whether a connection wait or a command ran out of time.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Unreachable { .. } | ErrorKind::Timeout { .. }
        )
    }

    /// Whether the node never answered with a usable SSH server.
    pub fn is_unreachable(&self) -> bool {
        matches!(self.kind, ErrorKind::Unreachable { .. })
    }

    /// Whether the server's host key differed from the pinned one.
    pub fn is_host_key_mismatch(&self) -> bool {
        matches!(self.kind, ErrorKind::HostKeyMismatch { .. })
    }

    /// Whether the server refused our credentials.
    pub fn is_auth_rejected(&self) -> bool {
        matches!(self.kind, ErrorKind::AuthRejected { .. })
    }

    /// The limit that ran out, when a command timed out.
    pub(crate) fn kind_timeout(&self) -> Option<Duration> {
        match self.kind {
            ErrorKind::Timeout { after, .. } => Some(after),
            _ => None,
        }
    }

    /// Whether the connection dropped under a running command.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self.kind, ErrorKind::ConnectionLost(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = &self.node;
        match &self.kind {
            ErrorKind::Unreachable {
                address,
                waited,
                attempts,
                last,
            } => write!(
                f,
                "node {node}: SSH at {address} not reachable after {}s ({attempts} attempt{}); \
                 last failure: {last}",
                waited.as_secs_f32().round(),
                if *attempts == 1 { "" } else { "s" }
            ),
            ErrorKind::HostKeyMismatch { expected, actual } => write!(
                f,
                "node {node}: host key mismatch: expected {expected}, server presented {actual}; \
                 refusing to connect (a possible man-in-the-middle, or the VM was replaced \
                 outside dsinfra)"
            ),
            ErrorKind::AuthRejected { user, method } => write!(
                f,
                "node {node}: the server refused {method} authentication as user {user}"
            ),
            ErrorKind::Credentials(why) => write!(f, "node {node}: {why}"),
            ErrorKind::Timeout { what, after } => write!(
                f,
                "node {node}: {what} did not finish within {}s",
                after.as_secs_f32().round()
            ),
            ErrorKind::ConnectionLost(why) => {
                write!(f, "node {node}: connection lost: {why}")
            }
            ErrorKind::Protocol(why) => write!(f, "node {node}: SSH error: {why}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_names_node_address_and_last_failure() {
        let error = Error::new(
            "cluster.train[1]",
            ErrorKind::Unreachable {
                address: "10.0.0.5:22".into(),
                waited: Duration::from_millis(2900),
                attempts: 4,
                last: "connection refused".into(),
            },
        );
        assert_eq!(
            error.to_string(),
            "node cluster.train[1]: SSH at 10.0.0.5:22 not reachable after 3s (4 attempts); \
             last failure: connection refused"
        );
        assert!(error.is_timeout() && error.is_unreachable());
        assert!(!error.is_host_key_mismatch());
    }

    #[test]
    fn host_key_mismatch_names_both_fingerprints() {
        let error = Error::new(
            "vm.gpu",
            ErrorKind::HostKeyMismatch {
                expected: "SHA256:aaa".into(),
                actual: "SHA256:bbb".into(),
            },
        );
        assert_eq!(
            error.to_string(),
            "node vm.gpu: host key mismatch: expected SHA256:aaa, server presented SHA256:bbb; \
             refusing to connect (a possible man-in-the-middle, or the VM was replaced outside \
             dsinfra)"
        );
        assert!(error.is_host_key_mismatch() && !error.is_timeout());
    }
}
