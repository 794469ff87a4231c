//! SSH transport for post-boot steps: connect (directly or through a jump host) with a pinned
//! host key, authenticate with the user's key or ssh-agent, run scripts without secrets in argv,
//! stream their output line by line, upload files, read the boot id.
//!
//! This module imports nothing from the rest of dsinfra (its own small types only), so it could
//! become a crate. It wraps russh rather than shelling out to `ssh`: one process, one connection
//! per node carrying many channels, host keys checked in code (never a `known_hosts` file the
//! user might have edited), and exact control over what reaches a remote argv. See docs/ssh.md.

mod auth;
mod error;
mod exec;
mod held;
mod host_key;
mod script;
mod secret;
mod session;
mod wait;

pub use auth::Auth;
pub use error::Error;
pub use exec::{BOOT_ID_PATH, Exit, LineSink, Output, Stream};
pub use held::Held;
pub use host_key::{HostKey, HostKeyPair, HostKeyPolicy, RecordHostKey};
pub(crate) use script::is_file_name;
pub use script::{Privilege, ScriptRequest, TIMEOUT_EXIT, shell_quote};
pub use secret::Secret;
pub use session::{Session, Target, connect, connect_via};
pub use wait::WaitPolicy;
