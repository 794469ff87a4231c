//! One SSH session per node, shared with the nodes that jump through it, opened on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::ssh::{self, Session, Target, WaitPolicy};

use crate::steps::spec::NodeSpec;

use super::Context;

fn target_key(target: &Target, via: Option<&Target>) -> String {
    let direct = format!("{}@{}", target.user, target.address());
    match via {
        Some(hop) => format!("{direct} via {}", target_key(hop, None)),
        None => direct,
    }
}

pub(super) fn pool_key(node: &NodeSpec) -> String {
    target_key(&node.target, node.jump.as_ref().map(|hop| &hop.target))
}

/// One connection per destination, shared by the node's own task and the nodes that jump
/// through it. A failed connection is remembered as its message, so 31 nodes behind an
/// unreachable head fail at once instead of each waiting out the limit again.
#[derive(Default)]
pub(super) struct Pool {
    entries: Mutex<HashMap<String, Arc<Slot>>>,
}

/// A pooled connection, or the message of the attempt that failed.
type Slot = OnceCell<Result<Session, String>>;

impl Pool {
    pub(super) async fn get<F, Fut>(&self, key: String, connect: F) -> Result<Session, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Session, ssh::Error>>,
    {
        let cell = {
            let mut entries = self.entries.lock().expect("pool mutex is never poisoned");
            Arc::clone(entries.entry(key).or_default())
        };
        cell.get_or_init(|| async { connect().await.map_err(|e| e.to_string()) })
            .await
            .clone()
    }

    pub(super) fn forget(&self, key: &str) {
        self.entries
            .lock()
            .expect("pool mutex is never poisoned")
            .remove(key);
    }

    pub(super) async fn close_all(&self) {
        let cells: Vec<_> = self
            .entries
            .lock()
            .expect("pool mutex is never poisoned")
            .drain()
            .map(|(_, cell)| cell)
            .collect();
        for cell in cells {
            if let Some(Ok(session)) = cell.get() {
                session.close().await;
            }
        }
    }
}

impl Context {
    /// The node's session, from the pool (through its jump host if it has one).
    pub(super) async fn connect(
        &self,
        node: &NodeSpec,
        wait: &WaitPolicy,
    ) -> Result<Session, String> {
        let auth = &self.options.auth;
        match &node.jump {
            None => {
                self.pool
                    .get(pool_key(node), || {
                        ssh::connect(&node.target, &node.host_key, auth, wait)
                    })
                    .await
            }
            Some(hop) => {
                let jump = self
                    .pool
                    .get(target_key(&hop.target, None), || {
                        ssh::connect(&hop.target, &hop.host_key, auth, &self.options.wait)
                    })
                    .await
                    .map_err(|e| format!("cannot reach the jump host: {e}"))?;
                self.pool
                    .get(pool_key(node), || {
                        ssh::connect_via(&jump, &node.target, &node.host_key, auth, wait)
                    })
                    .await
            }
        }
    }
}
