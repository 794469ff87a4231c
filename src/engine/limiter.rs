//! The bound on concurrent ARM requests: a semaphore around the work, not the walk (style.md
//! habit 6), whose size adapts to ARM's throttling.
//!
//! `--parallelism` (default 64) is the ceiling, chosen high so that ARM's throttling, not dsinfra,
//! limits the speed. The limiter is the ARM client's [`RequestGate`] (`ArmClient::gated`): a slot
//! is held while one request is in flight (a PUT or DELETE, one poll, the final GET) and is free
//! while an operation runs in Azure between polls. So it bounds what ARM sees, requests in
//! flight, not how many resources are being worked on: 64 VMs being created at once hold no slot
//! while they boot (docs/decisions.md, entry 15, says why and what it means next to Terraform's
//! `-parallelism`).
//!
//! A command has one limiter, made with its connection, and every operation it runs sends its
//! requests through it: refresh, preflight, apply's walk, park and unpark, status. None of them
//! keeps a bound of its own, so `--parallelism` means the same everywhere.
//!
//! Every answer adjusts the limit: one that was throttled (429), or that left a rate-limit
//! bucket low so that the client's pacer slows down, halves it (never below [`MIN_LIMIT`]); every
//! other answer raises it by one again, up to the ceiling: additive increase, multiplicative
//! decrease, as TCP does per acknowledgement. The decision is a pure function, [`next_limit`].

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::azure::ratelimit::{GatePermit, Load, RequestGate};

/// The limit never drops below this, so progress never stalls on a noisy signal.
pub const MIN_LIMIT: usize = 4;

/// The default ceiling (`--parallelism`).
pub const DEFAULT_PARALLELISM: NonZeroUsize = NonZeroUsize::new(64).expect("64 is not zero");

/// The next limit after an answer that said `load`, between `min(MIN_LIMIT, ceiling)` and
/// `ceiling`.
pub fn next_limit(current: usize, ceiling: usize, load: Load) -> usize {
    let floor = MIN_LIMIT.min(ceiling).max(1);
    match load {
        Load::Throttled => (current / 2).max(floor),
        Load::Clear => (current + 1).min(ceiling),
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

/// A poisoned book is still consistent: every change to it is a few integer assignments.
fn relock(book: &Mutex<Book>) -> MutexGuard<'_, Book> {
    book.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The adaptive semaphore. Lend it to the ARM client as its gate (`Arc<Limiter>`).
#[derive(Debug)]
pub struct Limiter {
    semaphore: Arc<Semaphore>,
    ceiling: usize,
    book: Arc<Mutex<Book>>,
}

/// A held slot; returning it (drop) may retire it if the limit fell meanwhile.
#[derive(Debug)]
pub struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    book: Arc<Mutex<Book>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut book = relock(&self.book);
        if let Some(permit) = self.permit.take()
            && book.debt > 0
        {
            book.debt -= 1;
            permit.forget();
        }
    }
}

impl Limiter {
    /// A limiter allowing `ceiling` requests at once. The type rules out zero, so `--parallelism`
    /// is checked once, by clap, and never clamped again.
    pub fn new(ceiling: NonZeroUsize) -> Self {
        let ceiling = ceiling.get();
        Self {
            semaphore: Arc::new(Semaphore::new(ceiling)),
            ceiling,
            book: Arc::new(Mutex::new(Book {
                limit: ceiling,
                debt: 0,
            })),
        }
    }

    /// Wait for a slot.
    ///
    /// # Panics
    ///
    /// Never: the semaphore is never closed.
    pub async fn acquire(&self) -> Slot {
        let permit = Arc::clone(&self.semaphore)
            .acquire_owned()
            .await
            .expect("the limiter's semaphore is never closed");
        Slot {
            permit: Some(permit),
            book: Arc::clone(&self.book),
        }
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        relock(&self.book).limit
    }

    /// Adjust the limit after an answer.
    pub fn observe(&self, load: Load) {
        let mut book = relock(&self.book);
        let next = next_limit(book.limit, self.ceiling, load);
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

impl RequestGate for Limiter {
    fn admit(&self) -> Pin<Box<dyn Future<Output = GatePermit> + Send + '_>> {
        Box::pin(async move {
            let slot: GatePermit = Box::new(self.acquire().await);
            slot
        })
    }

    fn observe(&self, load: Load) {
        Limiter::observe(self, load);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceiling(n: usize) -> NonZeroUsize {
        NonZeroUsize::new(n).expect("not zero")
    }

    #[test]
    fn throttling_halves_and_clear_calls_climb_back_one_by_one() {
        assert_eq!(next_limit(64, 64, Load::Throttled), 32);
        assert_eq!(next_limit(5, 64, Load::Throttled), MIN_LIMIT);
        assert_eq!(next_limit(32, 64, Load::Clear), 33);
        assert_eq!(next_limit(64, 64, Load::Clear), 64);
        // A ceiling below the floor is respected: --parallelism 2 means 2.
        assert_eq!(next_limit(2, 2, Load::Throttled), 2);
        assert_eq!(next_limit(1, 1, Load::Clear), 1);
    }

    #[tokio::test]
    async fn a_lower_limit_retires_permits_as_they_come_back() {
        let limiter = Limiter::new(ceiling(8));
        let held: Vec<_> = futures::future::join_all((0..8).map(|_| limiter.acquire())).await;
        limiter.observe(Load::Throttled);
        assert_eq!(limiter.limit(), 4);
        drop(held);
        // Only four permits remain: a fifth acquire would wait.
        let four: Vec<_> = futures::future::join_all((0..4).map(|_| limiter.acquire())).await;
        let fifth =
            tokio::time::timeout(std::time::Duration::from_millis(20), limiter.acquire()).await;
        assert!(fifth.is_err(), "a fifth slot was granted above the limit");
        drop(four);
        limiter.observe(Load::Clear);
        assert_eq!(limiter.limit(), 5);
        let five: Vec<_> = futures::future::join_all((0..5).map(|_| limiter.acquire())).await;
        assert_eq!(five.len(), 5);
    }

    /// A scripted ARM on 127.0.0.1 for network security groups: a PUT answers 201 with an
    /// Azure-AsyncOperation URL and `Retry-After: 1` (ARM seconds), the status URL `Succeeded`,
    /// the final GET the resource. Every answer takes 20 ms. It records what it received, in
    /// order, and the most requests it ever had in flight at once.
    mod scripted {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::{Arc, Mutex};
        use std::time::Duration;

        use axum::extract::State;
        use axum::http::{Method, StatusCode, Uri};
        use axum::response::{IntoResponse, Response};
        use serde_json::json;

        use crate::azure::{ArmClient, ResourceId, StaticTokenCredential};

        #[derive(Default)]
        pub struct Arm {
            endpoint: Mutex<String>,
            /// `METHOD path` of every request, in arrival order.
            pub received: Mutex<Vec<String>>,
            in_flight: AtomicUsize,
            /// The most requests in flight at once.
            pub most: AtomicUsize,
            /// Answer the next PUT with a 429 (then clear this).
            pub throttle_next_put: AtomicBool,
        }

        async fn handle(State(arm): State<Arc<Arm>>, method: Method, uri: Uri) -> Response {
            let now = arm.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            arm.most.fetch_max(now, Ordering::SeqCst);
            arm.received
                .lock()
                .expect("not poisoned")
                .push(format!("{method} {}", uri.path()));
            tokio::time::sleep(Duration::from_millis(20)).await;
            arm.in_flight.fetch_sub(1, Ordering::SeqCst);
            let endpoint = arm.endpoint.lock().expect("not poisoned").clone();
            let resource = json!({"properties": {"provisioningState": "Succeeded"}});
            match method {
                Method::PUT if arm.throttle_next_put.swap(false, Ordering::SeqCst) => (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "0")],
                    axum::Json(
                        json!({"error": {"code": "TooManyRequests", "message": "slow down"}}),
                    ),
                )
                    .into_response(),
                Method::PUT => (
                    StatusCode::CREATED,
                    [
                        (
                            "azure-asyncoperation",
                            format!("{endpoint}/operations{}", uri.path()),
                        ),
                        ("retry-after", "1".to_owned()),
                    ],
                    axum::Json(json!({"properties": {"provisioningState": "Updating"}})),
                )
                    .into_response(),
                _ if uri.path().starts_with("/operations/") => {
                    axum::Json(json!({"status": "Succeeded"})).into_response()
                }
                _ => axum::Json(resource).into_response(),
            }
        }

        /// The server and an (ungated) client for it whose waits are a fifth of ARM's: a poll
        /// comes 200 ms after its operation started.
        pub async fn start() -> (Arc<Arm>, ArmClient) {
            let arm = Arc::new(Arm::default());
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .expect("a free port on 127.0.0.1");
            let endpoint = format!("http://{}", listener.local_addr().expect("bound"));
            endpoint.clone_into(&mut arm.endpoint.lock().expect("not poisoned"));
            let app = axum::Router::new()
                .fallback(handle)
                .with_state(Arc::clone(&arm));
            tokio::spawn(async move { axum::serve(listener, app).await });
            let client = ArmClient::builder(Arc::new(StaticTokenCredential::new("token")))
                .endpoint(endpoint)
                .time_scale(0.2)
                .build()
                .expect("a valid endpoint");
            (arm, client)
        }

        pub fn nsg(name: &str) -> ResourceId {
            ResourceId::from_raw(format!(
                "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/{name}"
            ))
        }
    }

    #[tokio::test]
    async fn at_parallelism_one_two_operations_wait_side_by_side_with_one_request_in_flight() {
        let (arm, client) = scripted::start().await;
        let client = client.gated(Arc::new(Limiter::new(ceiling(1))));
        let body = serde_json::json!({"location": "eastus"});
        let (a, b) = (scripted::nsg("a"), scripted::nsg("b"));
        let (a, b) = tokio::join!(
            client.put::<_, serde_json::Value>(&a, &body),
            client.put::<_, serde_json::Value>(&b, &body),
        );
        a.expect("a is created");
        b.expect("b is created");
        assert_eq!(
            arm.most.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "more than one request was in flight at parallelism 1"
        );
        // Both operations were started before either was polled: the first one's 200 ms wait
        // for its poll held no slot. A slot held per operation would give PUT, GET, GET, PUT.
        let received = arm.received.lock().expect("not poisoned").clone();
        assert_eq!(received.len(), 6, "{received:?}");
        assert!(
            received[..2].iter().all(|r| r.starts_with("PUT ")),
            "{received:?}"
        );
    }

    #[tokio::test]
    async fn a_throttled_answer_halves_the_limit_and_each_clear_one_raises_it_by_one() {
        let (arm, client) = scripted::start().await;
        let limiter = Arc::new(Limiter::new(ceiling(8)));
        let client = client.gated(Arc::clone(&limiter) as Arc<dyn RequestGate>);
        arm.throttle_next_put
            .store(true, std::sync::atomic::Ordering::SeqCst);
        client
            .put::<_, serde_json::Value>(&scripted::nsg("a"), &serde_json::json!({}))
            .await
            .expect("created after the client's retry");
        // 429 (8 -> 4), then the PUT, the poll and the final GET (4 -> 7).
        assert_eq!(arm.received.lock().expect("not poisoned").len(), 4);
        assert_eq!(limiter.limit(), 7);
    }
}
