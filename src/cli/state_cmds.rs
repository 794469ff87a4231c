//! `state pull`, `state push` and `force-unlock`: moving a state between backends and breaking a
//! remote lock.
//!
//! Each reads only the manifest's `backend` block (`manifest::load_backend`), so they work on a
//! manifest whose variables are not given. `pull` reads without locking, as Terraform's does: it
//! is a read, and it must work while an apply holds the lock. `push` takes the lock like any
//! writer and refuses to replace another lineage or a newer serial unless `--force`.
//! `force-unlock` exists only for the remote backend: the local lock is an operating-system
//! lock that disappears with its holder.
//!
//! `pull` and `force-unlock` call the storage API themselves, so they are async and run inside
//! `cli::block_on`; a Ctrl-C while they read abandons the read (nothing was changed, exit 130),
//! and the one request that breaks a lease is let finish. `push` goes through the state backend,
//! which drives its own I/O.

use std::io::IsTerminal as _;
use std::path::Path;

use anyhow::{Context as _, bail};

use super::{Outcome, Output};
use crate::args::{ForceUnlockArgs, PullArgs, PushArgs};
use crate::engine::op::Cancel;
use crate::manifest;
use crate::model::BackendConfig;
use crate::state::{self, State, transfer};

/// The backend block of a manifest; problems in it are printed with their source.
fn backend_of(manifest: &Path, out: &Output) -> anyhow::Result<Option<BackendConfig>> {
    manifest::load_backend(manifest).map_err(|failed| super::request::reported(&failed, out))
}

/// `dsinfra state pull MANIFEST`: the state, byte for byte, on stdout.
pub async fn pull(args: &PullArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let backend = backend_of(&args.manifest, out)?;
    let bytes = cancel
        .interruptible(transfer::pull(&args.manifest, backend.as_ref()))
        .await??;
    out.result(&String::from_utf8_lossy(&bytes));
    Ok(Outcome::Success)
}

/// `dsinfra state push MANIFEST STATEFILE`: upload a state to the manifest's backend.
pub async fn push(args: &PushArgs, out: &Output) -> anyhow::Result<Outcome> {
    let config = backend_of(&args.manifest, out)?;
    let text = std::fs::read_to_string(&args.state_file)
        .with_context(|| format!("could not read {}", args.state_file.display()))?;
    let pushed = State::from_json(&text, &args.state_file)?;
    let command = format!("dsinfra state push {}", args.manifest.display());
    let mut backend = state::open_backend(&args.manifest, config.as_ref(), &command).await?;
    let current = match backend.load().await {
        Ok(current) => current,
        Err(e) => {
            backend.unlock().await?;
            return Err(e.into());
        }
    };
    let pushed = push_into(backend.as_mut(), current, pushed, args, out).await;
    backend.unlock().await?;
    pushed
}

/// The push itself, into the opened `backend` holding `current`.
async fn push_into(
    backend: &mut dyn state::Backend,
    current: Option<State>,
    mut pushed: State,
    args: &PushArgs,
    out: &Output,
) -> anyhow::Result<Outcome> {
    if let Some(why) = transfer::push_refusal(current.as_ref(), &pushed) {
        if !args.force {
            bail!(
                "refusing to push {} to {}: {why}; use --force to replace it anyway (the replaced version is kept)",
                args.state_file.display(),
                backend.location()
            );
        }
        backend.allow_lineage_change();
    }
    if let Some(current) = &current {
        // Serials only grow, even when --force replaces a newer state.
        pushed.serial = pushed.serial.max(current.serial);
    }
    backend.save(&mut pushed).await?;
    out.message(&format!(
        "pushed {} to {} (serial {})\n",
        args.state_file.display(),
        backend.location(),
        pushed.serial
    ));
    Ok(Outcome::Success)
}

/// `dsinfra force-unlock MANIFEST`: break the remote state's lease after confirmation.
pub async fn force_unlock(
    args: &ForceUnlockArgs,
    out: &Output,
    cancel: Cancel,
) -> anyhow::Result<Outcome> {
    let Some(config) = backend_of(&args.manifest, out)? else {
        bail!(
            "the state of {} is local: its lock is an operating-system lock that is released when its holder exits, even if it crashes, so there is nothing to force-unlock",
            args.manifest.display()
        );
    };
    let remote = transfer::remote_state(&config)?;
    let url = remote.url();
    let storage_error = |action, source| state::StateError::remote(action, url.clone(), source);
    let Some(holder) = cancel
        .interruptible(remote.holder())
        .await?
        .map_err(|e| storage_error("read", e))?
    else {
        out.message(&format!("the state {url} is not locked: nothing to do\n"));
        return Ok(Outcome::Success);
    };
    if !args.yes {
        if !std::io::stdin().is_terminal() || !console::Term::stderr().is_term() {
            bail!(
                "force-unlock needs confirmation, but there is no terminal to ask on: the state {url} is locked by {holder}; if that process is not running, run again with --yes"
            );
        }
        let yes = dialoguer::Confirm::new()
            .with_prompt(format!(
                "The state {url} is locked by {holder}. Break the lock? A run still going would then fail its next save"
            ))
            .default(false)
            .interact()
            .context("could not read the answer")?;
        if !yes {
            bail!("force-unlock cancelled: the lock is still held by {holder}");
        }
    }
    let broken = remote
        .force_unlock()
        .await
        .map_err(|e| storage_error("unlock", e))?;
    match broken {
        Some(was) => out.message(&format!("broke the lock on {url}, held by {was}\n")),
        None => out.message(&format!(
            "the state {url} was unlocked in the meantime: nothing to do\n"
        )),
    }
    Ok(Outcome::Success)
}
