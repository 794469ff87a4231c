//! Connections: reach a node (directly or through a jump host), check its host key, log in.
//!
//! One [`Session`] per node carries every command for that node as separate channels, so a
//! run pays the TCP, key-exchange and authentication cost once per node, not once per step.
//! Private cluster nodes are reached like OpenSSH's ProxyJump: a `direct-tcpip` channel through
//! the head node's session carries a second, end-to-end encrypted SSH connection whose host key
//! is pinned too, so the head node cannot impersonate the nodes behind it.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use russh::client::{self, Config, Handle, Handler};
use russh::keys::PublicKeyOrCertificate;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::auth::Auth;
use super::error::{Error, ErrorKind};
use super::host_key::{HostKey, HostKeyPolicy, KeyVerdict};
use super::wait::WaitPolicy;

/// Where a node's SSH server is and whom to log in as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The node's name in messages and logs (`cluster.train[2]`).
    pub node: String,
    /// Host name or IP address (as seen from the client, or from the jump host when jumping).
    pub host: String,
    /// SSH port.
    pub port: u16,
    /// Login user.
    pub user: String,
}

impl Target {
    /// `host:port`, for messages.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// The russh handler: checks the host key against the node's policy.
pub(crate) struct Client {
    node: String,
    policy: HostKeyPolicy,
}

/// Why a handshake failed: russh's own errors, or our host-key verdict.
#[derive(Debug)]
pub(crate) enum HandshakeError {
    Russh(russh::Error),
    HostKey { expected: String, actual: String },
}

impl From<russh::Error> for HandshakeError {
    fn from(error: russh::Error) -> Self {
        Self::Russh(error)
    }
}

impl Handler for Client {
    type Error = HandshakeError;

    async fn check_server_key(
        &mut self,
        server_public_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let presented = HostKey::from_russh(server_public_key.public_key());
        match self.policy.check(&self.node, &presented) {
            KeyVerdict::Accept => Ok(true),
            KeyVerdict::Mismatch { expected, actual } => {
                Err(HandshakeError::HostKey { expected, actual })
            }
        }
    }
}

/// An authenticated connection to one node; cheap to clone, channels are opened per command.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

struct Inner {
    node: String,
    address: String,
    handle: Handle<Client>,
    /// The jump session this one tunnels through; kept alive as long as this one is.
    _via: Option<Session>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("node", &self.inner.node)
            .field("address", &self.inner.address)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// The node this session talks to.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// Whether the connection is gone (closed by either side, or broken).
    pub fn is_closed(&self) -> bool {
        self.inner.handle.is_closed()
    }

    /// Ends the connection politely.
    pub async fn close(&self) {
        // A failure here means the connection is already gone, which is what we want.
        let _ = self
            .inner
            .handle
            .disconnect(russh::Disconnect::ByApplication, "", "en")
            .await;
    }

    pub(crate) fn handle(&self) -> &Handle<Client> {
        &self.inner.handle
    }

    pub(crate) fn error(&self, kind: ErrorKind) -> Error {
        Error::new(&self.inner.node, kind)
    }
}

/// Connects to `target` directly, waiting for it to come up as `wait` allows.
pub async fn connect(
    target: &Target,
    policy: &HostKeyPolicy,
    auth: &Auth,
    wait: &WaitPolicy,
) -> Result<Session, Error> {
    retry(target, wait, || async {
        let stream = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|e| Attempt::Retry(describe_io(&e)))?;
        // Small packets (exit status, short lines) must not wait for Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        handshake(stream, target, policy, auth, None).await
    })
    .await
}

/// Connects to `target` through `jump` (ProxyJump): `target.host` is resolved by the jump host.
pub async fn connect_via(
    jump: &Session,
    target: &Target,
    policy: &HostKeyPolicy,
    auth: &Auth,
    wait: &WaitPolicy,
) -> Result<Session, Error> {
    retry(target, wait, || async {
        let channel = jump
            .handle()
            .channel_open_direct_tcpip(target.host.as_str(), u32::from(target.port), "127.0.0.1", 0)
            .await
            .map_err(|e| {
                let why = format!("jump host {} could not open a tunnel: {e}", jump.node());
                if jump.is_closed() {
                    Attempt::Fatal(ErrorKind::ConnectionLost(why))
                } else {
                    Attempt::Retry(why)
                }
            })?;
        handshake(
            channel.into_stream(),
            target,
            policy,
            auth,
            Some(jump.clone()),
        )
        .await
    })
    .await
}

/// One connection attempt's failure: worth retrying, or final.
enum Attempt {
    Retry(String),
    Fatal(ErrorKind),
}

/// Runs attempts until one succeeds, one fails for good, or the wait limit is reached.
async fn retry<F, Fut>(target: &Target, wait: &WaitPolicy, mut attempt: F) -> Result<Session, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Session, Attempt>>,
{
    let start = Instant::now();
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let last = match tokio::time::timeout(wait.attempt_timeout, attempt()).await {
            Ok(Ok(session)) => return Ok(session),
            Ok(Err(Attempt::Fatal(kind))) => return Err(Error::new(&target.node, kind)),
            Ok(Err(Attempt::Retry(why))) => why,
            Err(_) => format!(
                "no SSH handshake within {}s",
                wait.attempt_timeout.as_secs_f32()
            ),
        };
        let delay = wait.delay(attempts, 0.5 + rand::random::<f64>() / 2.0);
        if !wait.may_retry(start.elapsed(), delay) {
            return Err(Error::new(
                &target.node,
                ErrorKind::Unreachable {
                    address: target.address(),
                    waited: start.elapsed(),
                    attempts,
                    last,
                },
            ));
        }
        tracing::debug!(
            "node {}: SSH not ready ({last}); retrying in {delay:?}",
            target.node
        );
        tokio::time::sleep(delay).await;
    }
}

/// SSH handshake and authentication over an established byte stream.
async fn handshake<S>(
    stream: S,
    target: &Target,
    policy: &HostKeyPolicy,
    auth: &Auth,
    via: Option<Session>,
) -> Result<Session, Attempt>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let client = Client {
        node: target.node.clone(),
        policy: policy.clone(),
    };
    let mut handle = client::connect_stream(config(), stream, client)
        .await
        .map_err(classify)?;
    auth.authenticate(&mut handle, &target.user)
        .await
        .map_err(Attempt::Fatal)?;
    Ok(Session {
        inner: Arc::new(Inner {
            node: target.node.clone(),
            address: target.address(),
            handle,
            _via: via,
        }),
    })
}

/// Decides whether a handshake failure can heal by waiting (a booting node) or not.
fn classify(error: HandshakeError) -> Attempt {
    match error {
        HandshakeError::HostKey { expected, actual } => {
            Attempt::Fatal(ErrorKind::HostKeyMismatch { expected, actual })
        }
        HandshakeError::Russh(e) => match e {
            russh::Error::IO(io) => Attempt::Retry(describe_io(&io)),
            russh::Error::Disconnect | russh::Error::HUP | russh::Error::SendError => {
                Attempt::Retry("connection closed during the SSH handshake".to_owned())
            }
            russh::Error::Version => {
                Attempt::Retry("no SSH banner (the service is still starting)".to_owned())
            }
            russh::Error::ConnectionTimeout | russh::Error::Elapsed(_) => {
                Attempt::Retry("the SSH handshake timed out".to_owned())
            }
            other => Attempt::Fatal(ErrorKind::Protocol(other.to_string())),
        },
    }
}

/// A short, stable description of a socket error ("connection refused").
fn describe_io(error: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match error.kind() {
        K::ConnectionRefused => "connection refused".to_owned(),
        K::TimedOut => "connection timed out".to_owned(),
        K::ConnectionReset => "connection reset".to_owned(),
        K::UnexpectedEof => "connection closed before the SSH banner".to_owned(),
        K::HostUnreachable => "host unreachable".to_owned(),
        K::NetworkUnreachable => "network unreachable".to_owned(),
        _ => error.to_string(),
    }
}

/// The client configuration shared by every connection.
fn config() -> Arc<Config> {
    static CONFIG: OnceLock<Arc<Config>> = OnceLock::new();
    Arc::clone(CONFIG.get_or_init(|| {
        Arc::new(Config {
            nodelay: true,
            // Keepalives notice a node that rebooted under an idle connection.
            keepalive_interval: Some(Duration::from_secs(15)),
            keepalive_max: 4,
            ..Config::default()
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_brackets_ipv6() {
        let mut target = Target {
            node: "n".into(),
            host: "10.0.0.4".into(),
            port: 22,
            user: "azureuser".into(),
        };
        assert_eq!(target.address(), "10.0.0.4:22");
        target.host = "fd00::4".into();
        assert_eq!(target.address(), "[fd00::4]:22");
    }

    #[test]
    fn booting_failures_retry_and_key_mismatch_does_not() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(matches!(
            classify(HandshakeError::Russh(russh::Error::IO(refused))),
            Attempt::Retry(why) if why == "connection refused"
        ));
        assert!(matches!(
            classify(HandshakeError::Russh(russh::Error::Version)),
            Attempt::Retry(_)
        ));
        assert!(matches!(
            classify(HandshakeError::HostKey {
                expected: "SHA256:a".into(),
                actual: "SHA256:b".into()
            }),
            Attempt::Fatal(ErrorKind::HostKeyMismatch { .. })
        ));
        assert!(matches!(
            classify(HandshakeError::Russh(russh::Error::Kex)),
            Attempt::Fatal(ErrorKind::Protocol(_))
        ));
    }
}
