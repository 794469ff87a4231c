//! Where an operation's cloud is, as far as the operations care: what to call it, how its pace
//! compares with Azure's, and where SSH connections to its VMs go. Azure and an emulator differ
//! exactly there, so `connect` injects a [`Place`] and the operations never ask which one they
//! talk to (the emulator's own, with its endpoint map and latency scale, lives in `connect`).

use futures::future::BoxFuture;

use super::Error;
use crate::engine::reach::Endpoints;

/// What differs between Azure and an emulator, for the operations.
pub trait Place: Send + Sync + std::fmt::Debug {
    /// Where it is, for messages ("Azure", an emulator's URL, "the built-in emulator").
    fn name(&self) -> String;

    /// Whether it is Azure itself: only then does an automatic preview degrade to the offline
    /// plan when the credentials do not work.
    fn is_azure(&self) -> bool {
        false
    }

    /// Its pace against Azure's (1 for Azure): the engine's own pauses are scaled by it, as the
    /// engine client's waits are.
    fn time_scale(&self) -> f64 {
        1.0
    }

    /// Where SSH connections to its VMs go, read again each time (VMs get their endpoints as
    /// they boot); IP addresses are added by the caller (`op::endpoints::for_state`).
    fn endpoints(&self) -> BoxFuture<'_, Result<Endpoints, Error>>;

    /// What to do when a VM has no SSH endpoint (an emulated VM needs one mapped).
    fn no_endpoint_hint(&self) -> String;
}

/// Azure: each IP address is dialled as it is, at Azure's pace.
#[derive(Debug, Clone, Copy, Default)]
pub struct Azure;

impl Place for Azure {
    fn name(&self) -> String {
        "Azure".to_owned()
    }

    fn is_azure(&self) -> bool {
        true
    }

    fn endpoints(&self) -> BoxFuture<'_, Result<Endpoints, Error>> {
        Box::pin(async { Ok(Endpoints::direct()) })
    }

    fn no_endpoint_hint(&self) -> String {
        "Check that the VM has a public IP address (or is reached through its cluster's head) \
         and that the network's `ssh_from` admits this machine."
            .to_owned()
    }
}
