//! `dsinfra ssh FILE NODE` and `dsinfra ssh-config FILE`: reach the experiment's VMs with the
//! system OpenSSH client, checking each VM's host key against the key pinned in the state.
//!
//! The command reads the state and the IP addresses ARM reports; what OpenSSH is told (the
//! known_hosts file of pinned keys, the command line, the ssh_config text) is worked out by
//! [`crate::engine::reach::openssh`]. What is left here is the arguments, the messages, and the
//! `exec` of `ssh`.
//!
//! The printed config must be saved to a file (or `Include`d): `ssh -F <(dsinfra ssh-config ..)`
//! cannot work, because ssh closes every descriptor above stderr before reading `-F`.

use std::path::Path;

use anyhow::Context as _;

use super::Outcome;
use super::args::{ConnectArgs, ManifestArgs, SshArgs, SshConfigArgs};
use super::output::Output;
use super::request::load;
use crate::connect::connect;
use crate::engine::op::{Cancel, endpoints};
use crate::engine::reach::openssh::{Notice, Reached};
use crate::state::{LocalBackend, State, StateError};

/// `dsinfra ssh`.
pub async fn ssh(args: &SshArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let reached = reach_all(&args.manifest, &args.connect, out, &cancel).await?;
    let host = reached.host(&args.node)?;
    let files = reached.write_known_hosts(args.identity.as_deref())?;
    for warning in host.unpinned_warnings() {
        out.message(&format!("warning: {warning}\n"));
    }
    exec_ssh(&host.argv(&files, &args.command))
}

/// `dsinfra ssh-config`.
pub async fn ssh_config(
    args: &SshConfigArgs,
    out: &Output,
    cancel: Cancel,
) -> anyhow::Result<Outcome> {
    let reached = reach_all(&args.manifest, &args.connect, out, &cancel).await?;
    let files = reached.write_known_hosts(args.identity.as_deref())?;
    let config = reached.config(&files);
    for notice in &config.notices {
        match notice {
            Notice::Unpinned(warning) => out.message(&format!("warning: {warning}\n")),
            Notice::LeftOut(note) => out.note(note),
        }
    }
    if reached.nodes.is_empty() {
        out.note("the state has no VMs: nothing to write");
    }
    out.result(&config.text);
    Ok(Outcome::Success)
}

/// Load the state, read the IP addresses from ARM (or the emulator) and work out every node's
/// route. Nothing is changed, so a Ctrl-C simply abandons the wait.
async fn reach_all(
    manifest: &ManifestArgs,
    connect_args: &ConnectArgs,
    out: &Output,
    cancel: &Cancel,
) -> anyhow::Result<Reached> {
    let loaded = load(manifest, out)?;
    let path = &manifest.manifest;
    let state = read_state(path, loaded.backend.as_ref())?;
    let endpoints = cancel
        .interruptible(async {
            let conn = connect(&connect_args.options(), path, &loaded.desired.azure).await?;
            endpoints::for_state(&conn, &state).await
        })
        .await??;
    Ok(Reached::new(
        &state,
        &endpoints,
        LocalBackend::state_dir(path)?,
    ))
}

/// The manifest's state, read without holding its lock for longer than the read: a session on
/// a node must neither wait for nor block an apply. If an apply holds a local state's lock, the
/// file is read anyway (saves replace it atomically, so a reader sees one whole version).
pub(super) fn read_state(
    manifest: &Path,
    backend: Option<&crate::model::BackendConfig>,
) -> anyhow::Result<State> {
    let command = format!("dsinfra ssh {}", manifest.display());
    let state = match crate::state::open_backend(manifest, backend, &command) {
        Ok(mut opened) => opened.load()?,
        Err(StateError::Locked { state, .. }) => match std::fs::read_to_string(&state) {
            Ok(text) => Some(State::from_json(&text, &state)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(e).with_context(|| format!("could not read {}", state.display()));
            }
        },
        Err(e) => return Err(e.into()),
    };
    state.with_context(|| {
        format!(
            "{} has no state yet: nothing was applied (run `dsinfra apply {}` first)",
            manifest.display(),
            manifest.display()
        )
    })
}

/// Replace this process with `ssh argv...` (unix); elsewhere run it and exit with its code.
fn exec_ssh(argv: &[String]) -> anyhow::Result<Outcome> {
    let mut command = std::process::Command::new("ssh");
    command.args(argv);
    let not_found = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!(
                "the OpenSSH client `ssh` was not found on PATH: install it (Debian/Ubuntu: openssh-client)"
            )
        } else {
            anyhow::Error::new(e).context("could not run ssh")
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        Err(not_found(command.exec()))
    }
    #[cfg(not(unix))]
    {
        let status = command.status().map_err(not_found)?;
        std::process::exit(status.code().unwrap_or(1));
    }
}
