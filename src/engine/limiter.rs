//! The bound on concurrent ARM calls: a semaphore around the work, not the walk (style.md habit 6),
//! whose size adapts to ARM's throttling.
//!
//! `--parallelism` (default 64) is the ceiling, chosen high so that ARM's throttling, not dsinfra,
//! limits the speed. When the client reports that it is slowing down (a rate-limit bucket is low)
//! or a call ends throttled, the limit halves (never below [`MIN_LIMIT`]); every call that ends
//! without throttling raises it by one again, up to the ceiling: additive increase,
//! multiplicative decrease, as TCP does. The decision is a pure function, [`next_limit`].

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The limit never drops below this, so progress never stalls on a noisy signal.
pub const MIN_LIMIT: usize = 4;

/// The default ceiling (`--parallelism`).
pub const DEFAULT_PARALLELISM: usize = 64;

/// What a finished call says about ARM's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// ARM throttled or the client's pacer is holding requests back.
    Throttled,
    /// The call went through without trouble.
    Clear,
}

/// The next limit after `signal`, between `min(MIN_LIMIT, ceiling)` and `ceiling`.
pub fn next_limit(current: usize, ceiling: usize, signal: Signal) -> usize {
    let floor = MIN_LIMIT.min(ceiling).max(1);
    match signal {
        Signal::Throttled => (current / 2).max(floor),
        Signal::Clear => (current + 1).min(ceiling),
    }
    .max(floor)
}

#[derive(Debug)]
struct Book {
    /// The limit now.
    limit: usize,
    /// Permits to retire when they come back, because the limit fell while they were out.
    debt: usize,
}

/// The adaptive semaphore. Clone the `Arc` into every task.
#[derive(Debug)]
pub struct Limiter {
    semaphore: Arc<Semaphore>,
    ceiling: usize,
    book: Mutex<Book>,
}

/// A held slot; returning it (drop) may retire it if the limit fell meanwhile.
#[derive(Debug)]
pub struct Slot<'a> {
    permit: Option<OwnedSemaphorePermit>,
    limiter: &'a Limiter,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut book = self.limiter.book();
        if let Some(permit) = self.permit.take()
            && book.debt > 0
        {
            book.debt -= 1;
            permit.forget();
        }
    }
}

impl Limiter {
    /// A limiter allowing `ceiling` calls at once (at least 1).
    pub fn new(ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        Self {
            semaphore: Arc::new(Semaphore::new(ceiling)),
            ceiling,
            book: Mutex::new(Book {
                limit: ceiling,
                debt: 0,
            }),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wait for a slot.
    ///
    /// # Panics
    ///
    /// Never: the semaphore is never closed.
    pub async fn acquire(&self) -> Slot<'_> {
        let permit = Arc::clone(&self.semaphore)
            .acquire_owned()
            .await
            .expect("the limiter's semaphore is never closed");
        Slot {
            permit: Some(permit),
            limiter: self,
        }
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        self.book().limit
    }

    /// Adjust the limit after a call.
    pub fn observe(&self, signal: Signal) {
        let mut book = self.book();
        let next = next_limit(book.limit, self.ceiling, signal);
        if next < book.limit {
            let fewer = book.limit - next;
            // Retire idle permits now; the rest when their holders return them.
            let retired = self.semaphore.forget_permits(fewer);
            book.debt += fewer - retired;
        } else if next > book.limit {
            let more = next - book.limit;
            let repaid = more.min(book.debt);
            book.debt -= repaid;
            self.semaphore.add_permits(more - repaid);
        }
        book.limit = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_halves_and_clear_calls_climb_back_one_by_one() {
        assert_eq!(next_limit(64, 64, Signal::Throttled), 32);
        assert_eq!(next_limit(5, 64, Signal::Throttled), MIN_LIMIT);
        assert_eq!(next_limit(32, 64, Signal::Clear), 33);
        assert_eq!(next_limit(64, 64, Signal::Clear), 64);
        // A ceiling below the floor is respected: --parallelism 2 means 2.
        assert_eq!(next_limit(2, 2, Signal::Throttled), 2);
        assert_eq!(next_limit(1, 1, Signal::Clear), 1);
    }

    #[tokio::test]
    async fn a_lower_limit_retires_permits_as_they_come_back() {
        let limiter = Limiter::new(8);
        let held: Vec<_> = futures::future::join_all((0..8).map(|_| limiter.acquire())).await;
        limiter.observe(Signal::Throttled);
        assert_eq!(limiter.limit(), 4);
        drop(held);
        // Only four permits remain: a fifth acquire would wait.
        let four: Vec<_> = futures::future::join_all((0..4).map(|_| limiter.acquire())).await;
        let fifth =
            tokio::time::timeout(std::time::Duration::from_millis(20), limiter.acquire()).await;
        assert!(fifth.is_err(), "a fifth slot was granted above the limit");
        drop(four);
        limiter.observe(Signal::Clear);
        assert_eq!(limiter.limit(), 5);
        let five: Vec<_> = futures::future::join_all((0..5).map(|_| limiter.acquire())).await;
        assert_eq!(five.len(), 5);
    }
}
