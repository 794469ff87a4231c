//! The SSH side of a run: one session per node, the cluster's private nodes reached through
//! the head as the step runner reaches them, every host key checked against the key pinned in
//! the state. A node without a pinned key (an adopted VM, an AML node dsinfra has not reached
//! yet) is trusted on first use with a warning, as `dsinfra ssh` does; the key is not stored
//! (the next apply pins it).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::engine::reach::NodeReach;
use crate::ssh::{self, Auth, RecordHostKey, Session, WaitPolicy};

/// How long one connection attempt may take: the VMs of a run are up already.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens sessions to the nodes of one block.
pub struct Reacher {
    auth: Auth,
    /// The block's head, which private nodes are reached through.
    head: Option<NodeReach>,
    /// The head's session, shared by the nodes that jump through it.
    jump: OnceCell<Result<Session, String>>,
}

impl Reacher {
    /// A reacher for a block whose head is `head`, logging in with `auth`.
    pub fn new(auth: Auth, head: Option<NodeReach>) -> Self {
        Self {
            auth,
            head,
            jump: OnceCell::new(),
        }
    }

    /// The warning for each host on the way to `node` whose key is not pinned.
    pub fn unpinned_warnings(&self, node: &NodeReach) -> Vec<String> {
        let via = self.head.as_ref().filter(|h| h.index != node.index);
        std::iter::once(node)
            .chain(via.filter(|_| !matches!(node.route, crate::engine::reach::Route::Direct { .. })))
            .filter(|n| n.host_key.is_none())
            .map(|n| {
                format!(
                    "warning: {} ({}) has no pinned host key in the state: trusting the key it presents this time",
                    n.node(),
                    n.name
                )
            })
            .collect()
    }

    /// A session to `node`.
    ///
    /// # Errors
    ///
    /// The node (or the head it is reached through) cannot be reached or refused the login or
    /// presented another key than the pinned one; the message says which.
    pub async fn connect(&self, node: &NodeReach) -> Result<Session, String> {
        let tofu: RecordHostKey = Arc::new(|_, _| {});
        let head = self.head.as_ref().filter(|h| h.index != node.index);
        let spec = node.node_spec(head, tofu).map_err(|e| e.to_string())?;
        let wait = WaitPolicy::once(CONNECT_TIMEOUT);
        match &spec.jump {
            None => ssh::connect(&spec.target, &spec.host_key, &self.auth, &wait)
                .await
                .map_err(|e| e.to_string()),
            Some(hop) => {
                let jump = self
                    .jump
                    .get_or_init(|| async {
                        ssh::connect(&hop.target, &hop.host_key, &self.auth, &wait)
                            .await
                            .map_err(|e| e.to_string())
                    })
                    .await
                    .clone()
                    .map_err(|e| format!("cannot reach the head: {e}"))?;
                ssh::connect_via(&jump, &spec.target, &spec.host_key, &self.auth, &wait)
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    }
}
