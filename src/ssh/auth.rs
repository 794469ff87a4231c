//! Client authentication: the user's private key file or a running ssh-agent.
//!
//! The key is read once per run and shared by every connection (32 nodes must not read and
//! parse the file 32 times). Keys with a passphrase are not supported yet: dsinfra runs
//! unattended and has no prompt; use ssh-agent for those.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use russh::client::{AuthResult, Handle};
use russh::keys::agent::client::AgentClient;
use russh::keys::{PrivateKey, PrivateKeyWithHashAlg};

use super::error::ErrorKind;
use super::session::Client;

/// How to prove who we are to the server.
#[derive(Clone)]
pub enum Auth {
    /// A private key read from a file (ed25519 or RSA, without passphrase).
    Key {
        /// Where the key came from, for messages.
        path: PathBuf,
        /// The parsed key.
        key: Arc<PrivateKey>,
    },
    /// Every identity of the ssh-agent listening on this socket.
    Agent {
        /// The agent's socket (usually `$SSH_AUTH_SOCK`).
        socket: PathBuf,
    },
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key { path, .. } => write!(f, "Auth::Key({})", path.display()),
            Self::Agent { socket } => write!(f, "Auth::Agent({})", socket.display()),
        }
    }
}

impl Auth {
    /// Reads a passphrase-less private key file (OpenSSH or PEM format).
    pub fn key_file(path: &Path) -> Result<Self, String> {
        let key = russh::keys::load_secret_key(path, None).map_err(|e| {
            format!(
                "cannot use private key {}: {e} (keys with a passphrase are not supported yet; \
                 load them into ssh-agent instead)",
                path.display()
            )
        })?;
        Ok(Self::Key {
            path: path.to_owned(),
            key: Arc::new(key),
        })
    }

    /// The ssh-agent named by `SSH_AUTH_SOCK`, if that variable is set and not empty.
    pub fn agent_from_env() -> Option<Self> {
        std::env::var_os("SSH_AUTH_SOCK")
            .filter(|s| !s.is_empty())
            .map(|socket| Self::Agent {
                socket: PathBuf::from(socket),
            })
    }

    /// Authenticates an established connection as `user`.
    pub(crate) async fn authenticate(
        &self,
        handle: &mut Handle<Client>,
        user: &str,
    ) -> Result<(), ErrorKind> {
        match self {
            Self::Key { key, .. } => {
                // RSA keys must be signed with the SHA-2 variant the server accepts; for other
                // key types the hash choice is ignored.
                let hash = handle
                    .best_supported_rsa_hash()
                    .await
                    .map_err(|e| ErrorKind::Protocol(e.to_string()))?
                    .flatten();
                let result = handle
                    .authenticate_publickey(user, PrivateKeyWithHashAlg::new(Arc::clone(key), hash))
                    .await
                    .map_err(|e| ErrorKind::Protocol(e.to_string()))?;
                match result {
                    AuthResult::Success => Ok(()),
                    AuthResult::Failure { .. } => Err(ErrorKind::AuthRejected {
                        user: user.to_owned(),
                        method: format!("public key ({})", key.algorithm()),
                    }),
                }
            }
            Self::Agent { socket } => authenticate_with_agent(handle, user, socket).await,
        }
    }
}

/// Tries each agent identity in turn until the server accepts one.
async fn authenticate_with_agent(
    handle: &mut Handle<Client>,
    user: &str,
    socket: &Path,
) -> Result<(), ErrorKind> {
    let mut agent = AgentClient::connect_uds(socket).await.map_err(|e| {
        ErrorKind::Credentials(format!(
            "cannot reach ssh-agent at {}: {e}",
            socket.display()
        ))
    })?;
    let identities = agent
        .request_identities()
        .await
        .map_err(|e| ErrorKind::Credentials(format!("ssh-agent listed no identities: {e}")))?;
    let hash = handle
        .best_supported_rsa_hash()
        .await
        .map_err(|e| ErrorKind::Protocol(e.to_string()))?
        .flatten();
    for identity in identities {
        let key = identity.public_key().into_owned();
        let key_hash = if key.algorithm().is_rsa() { hash } else { None };
        match handle
            .authenticate_publickey_with(user, key, key_hash, &mut agent)
            .await
        {
            Ok(AuthResult::Success) => return Ok(()),
            Ok(AuthResult::Failure { .. }) => {}
            Err(e) => return Err(ErrorKind::Credentials(format!("ssh-agent: {e}"))),
        }
    }
    Err(ErrorKind::AuthRejected {
        user: user.to_owned(),
        method: "ssh-agent".to_owned(),
    })
}
