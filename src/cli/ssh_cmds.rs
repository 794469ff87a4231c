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

use super::Outcome;
use super::output::Output;
use super::request::{load, read_state};
use crate::args::{ConnectArgs, ManifestArgs, SshArgs, SshConfigArgs};
use crate::connect::connect;
use crate::engine::op::{Cancel, endpoints};
use crate::engine::reach::openssh::{Notice, Reached};
use crate::state::LocalBackend;

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
    let state = read_state(path, loaded.backend.as_ref(), "ssh").await?;
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
