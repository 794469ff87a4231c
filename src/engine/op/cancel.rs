//! Cancellation, handled in one place for every operation.
//!
//! The CLI's entry point turns each Ctrl-C into [`Canceller::press`]; an operation holds the
//! matching [`Cancel`] and decides what a press means where it is:
//! - before anything is changed (connecting, refreshing, planning, asking): the wait in progress
//!   ends with [`Interrupted`] ([`Cancel::interruptible`], [`Cancel::check`]); the operation
//!   unwinds normally, dropping the state backend (which releases a remote lease and clears the
//!   lock file), and nothing was changed;
//! - while the engine changes Azure (apply's walk, park's power actions): the first press stops
//!   new work and lets running operations finish, a second press (or the grace period) gives up
//!   waiting, after the state is saved ([`Cancel::pressed`] counts presses).
//!
//! Tests make their own pair ([`pair`]) and press when they want, or pass [`Cancel::never`].

use std::future::Future;

use tokio::sync::watch;

/// Ctrl-C was pressed before anything was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted: nothing was changed")]
pub struct Interrupted;

/// The sending side: what the CLI's Ctrl-C handler (or a test) presses.
#[derive(Debug)]
pub struct Canceller {
    presses: watch::Sender<u32>,
}

/// The receiving side, held by an operation; cheap to clone.
#[derive(Debug, Clone)]
pub struct Cancel {
    presses: watch::Receiver<u32>,
}

/// A connected [`Canceller`] and [`Cancel`].
pub fn pair() -> (Canceller, Cancel) {
    let (tx, rx) = watch::channel(0);
    (Canceller { presses: tx }, Cancel { presses: rx })
}

impl Canceller {
    /// One press (one Ctrl-C).
    pub fn press(&self) {
        self.presses.send_modify(|n| *n += 1);
    }
}

impl Cancel {
    /// A token nothing ever presses (library callers and tests that do not cancel).
    pub fn never() -> Self {
        let (canceller, cancel) = pair();
        // The sender is leaked on purpose: a dropped sender would read as "closed", and a
        // closed channel is treated like a platform without signals (never pressed).
        std::mem::forget(canceller);
        cancel
    }

    /// How many presses so far.
    pub fn presses(&self) -> u32 {
        *self.presses.borrow()
    }

    /// Whether a press came at all.
    pub fn is_pressed(&self) -> bool {
        self.presses() > 0
    }

    /// Whether a press came.
    ///
    /// # Errors
    ///
    /// [`Interrupted`] if one did.
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.is_pressed() {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }

    /// Waits for the next press after those already seen by this token; never returns when
    /// no press can come any more (the canceller is gone).
    pub async fn pressed(&mut self) {
        if self.presses.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Runs `work` unless a press comes (or came) first; `work` is then dropped, which cancels
    /// its requests.
    ///
    /// # Errors
    ///
    /// [`Interrupted`] if a press came.
    pub async fn interruptible<F: Future>(&self, work: F) -> Result<F::Output, Interrupted> {
        let mut presses = self.presses.clone();
        presses.mark_unchanged();
        self.check()?;
        tokio::select! {
            biased;
            Ok(()) = presses.changed() => Err(Interrupted),
            output = work => Ok(output),
        }
    }

    /// A `bool` view for code that only needs "stop starting new work" (the engine's walk):
    /// it turns `true` at the first press.
    pub fn as_flag(&self) -> watch::Receiver<bool> {
        let (tx, rx) = watch::channel(self.is_pressed());
        let mut presses = self.presses.clone();
        tokio::spawn(async move {
            while presses.changed().await.is_ok() {
                if tx.send(true).is_err() {
                    break;
                }
            }
        });
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_press_interrupts_the_wait_in_progress_and_every_later_one() {
        let (canceller, cancel) = pair();
        assert_eq!(cancel.interruptible(async { 7 }).await, Ok(7));
        assert_eq!(cancel.check(), Ok(()));
        let waiting = cancel.clone();
        let wait =
            tokio::spawn(async move { waiting.interruptible(std::future::pending::<()>()).await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        canceller.press();
        assert_eq!(wait.await.expect("joined"), Err(Interrupted));
        assert_eq!(cancel.check(), Err(Interrupted));
        assert_eq!(cancel.interruptible(async { 7 }).await, Err(Interrupted));
        assert_eq!(cancel.presses(), 1);
    }

    #[tokio::test]
    async fn pressed_counts_each_press_and_the_flag_turns_at_the_first() {
        let (canceller, mut cancel) = pair();
        let mut flag = cancel.as_flag();
        assert!(!*flag.borrow());
        canceller.press();
        cancel.pressed().await;
        flag.changed().await.expect("the flag turns");
        assert!(*flag.borrow());
        canceller.press();
        cancel.pressed().await;
        assert_eq!(cancel.presses(), 2);
    }

    #[tokio::test]
    async fn never_is_never_pressed() {
        let cancel = Cancel::never();
        assert_eq!(cancel.interruptible(async { 1 }).await, Ok(1));
        let mut waiting = cancel.clone();
        let timed = tokio::time::timeout(std::time::Duration::from_millis(20), waiting.pressed());
        assert!(timed.await.is_err(), "no press ever comes");
    }
}
