//! Ctrl-C before the engine runs: stop cleanly, having changed nothing.
//!
//! Until the engine starts, a command has only read: it opened the state (taking its lock, a
//! remote lease among them), refreshed it from ARM, planned, and maybe asked for approval. The
//! default SIGINT would kill the process there, leaving a remote lease held until it expires (60
//! s in which every other dsinfra is refused) and the local lock file naming a dead holder. So a
//! command starts its runtime with [`runtime`], and runs its pre-engine waits through
//! [`block_on`]: a Ctrl-C makes the wait return [`Interrupted`], which unwinds normally (the
//! backend is dropped, which releases the lease and clears the lock), and `cli::run` prints one
//! line (`interrupted: nothing was changed`) and exits 130. [`check`] catches a Ctrl-C that came
//! between two waits, before the engine is started.
//!
//! Once the engine runs, its own handler takes over (`apply_cmd`): the first Ctrl-C stops new
//! work and saves. The listener stays installed but nothing consults it any more.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Set by the listener when Ctrl-C was pressed.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Wakes the waits in [`block_on`] when Ctrl-C is pressed.
static PRESSED: Notify = Notify::const_new();

/// Ctrl-C was pressed before anything was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted: nothing was changed")]
pub struct Interrupted;

/// The command's runtime, with the default SIGINT (which kills the process) replaced by a
/// listener that records the press for [`block_on`] and [`check`]. Every command that holds the
/// state's lock while it waits on the network starts its runtime here.
///
/// # Errors
///
/// The runtime could not be started.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("could not start the async runtime: {e}"))?;
    listen(&runtime);
    Ok(runtime)
}

fn listen(runtime: &tokio::runtime::Runtime) {
    runtime.spawn(async {
        // An error means this platform has no signal handling: the default stays.
        while tokio::signal::ctrl_c().await.is_ok() {
            press();
        }
    });
}

fn press() {
    INTERRUPTED.store(true, Ordering::SeqCst);
    PRESSED.notify_waiters();
}

/// Whether Ctrl-C was pressed since the command's [`runtime`] started.
///
/// # Errors
///
/// [`Interrupted`] if it was.
pub fn check() -> Result<(), Interrupted> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Runs `work` to completion on `runtime`, unless Ctrl-C is (or was) pressed first; `work` is
/// then dropped, which cancels its requests.
///
/// # Errors
///
/// [`Interrupted`] if Ctrl-C was pressed.
pub fn block_on<F: Future>(
    runtime: &tokio::runtime::Runtime,
    work: F,
) -> Result<F::Output, Interrupted> {
    runtime.block_on(interruptible(work))
}

async fn interruptible<F: Future>(work: F) -> Result<F::Output, Interrupted> {
    let pressed = PRESSED.notified();
    tokio::pin!(pressed);
    // Registered before the flag is read, so a press in between still wakes this wait.
    pressed.as_mut().enable();
    check()?;
    tokio::select! {
        biased;
        () = pressed => Err(Interrupted),
        output = work => Ok(output),
    }
}

/// The answer to an approval prompt, with a Ctrl-C at the prompt (the terminal is in raw mode
/// there, so it arrives as a key and dialoguer reports an interrupted read) turned into
/// [`Interrupted`].
///
/// # Errors
///
/// [`Interrupted`] for a Ctrl-C at the prompt (or before it), else the prompt's error.
pub fn approval(answer: anyhow::Result<bool>) -> anyhow::Result<bool> {
    match answer {
        Err(err)
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::Interrupted)
            }) =>
        {
            Err(Interrupted.into())
        }
        Ok(answer) => {
            check()?;
            Ok(answer)
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The flag is process-wide, so one test walks through the whole sequence.
    #[test]
    fn a_press_interrupts_the_wait_in_progress_and_every_later_one() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        assert_eq!(block_on(&runtime, async { 7 }), Ok(7));
        assert_eq!(check(), Ok(()));
        assert!(approval(Ok(true)).expect("no press yet"));

        // A wait that would never end on its own ends when Ctrl-C is pressed.
        runtime.spawn(async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            press();
        });
        assert_eq!(
            block_on(&runtime, std::future::pending::<()>()),
            Err(Interrupted)
        );
        assert_eq!(check(), Err(Interrupted));
        assert_eq!(block_on(&runtime, async { 7 }), Err(Interrupted));

        let at_prompt = anyhow::Error::new(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "read interrupted",
        ))
        .context("could not read the answer");
        let err = approval(Err(at_prompt)).expect_err("Ctrl-C at the prompt");
        assert_eq!(err.downcast_ref::<Interrupted>(), Some(&Interrupted));
        assert_eq!(err.to_string(), "interrupted: nothing was changed");
        let other = approval(Err(anyhow::anyhow!("no terminal"))).expect_err("kept");
        assert_eq!(other.to_string(), "no terminal");
    }
}
