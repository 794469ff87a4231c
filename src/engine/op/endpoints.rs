//! Where SSH connections to the experiment's VMs go: against an emulator, its endpoint map
//! (`GET URL/_emulator/ssh-endpoints`: IP address -> the local host standing in for the VM);
//! on Azure, each IP address itself. [`for_state`] adds the IP addresses ARM reports, which is
//! everything `engine::reach::block_nodes` needs (with the AmlCompute clusters' nodes, which
//! only `listNodes` knows).

use super::{Arm, Error};
use crate::engine::reach::{self, Endpoints};
use crate::state::State;

/// Where SSH connections go (the place's map: an emulator's endpoints, or direct dialling on
/// Azure), with the IP addresses of every VM in `state` read from ARM (its public IP's address
/// and its NIC's private address), and the nodes of every AmlCompute cluster (`listNodes`).
///
/// # Errors
///
/// The map or the addresses could not be read.
pub async fn for_state(arm: &Arm, state: &State) -> Result<Endpoints, Error> {
    let endpoints = arm.place.endpoints().await?;
    let addresses = reach::read_addresses(&arm.client, &arm.subscription, state)
        .await
        .map_err(|e| Error::Failed(format!("could not read the VMs' IP addresses: {e}")))?;
    let aml_nodes = reach::read_aml_nodes(&arm.client, state)
        .await
        .map_err(|e| {
            Error::Failed(format!(
                "could not list the nodes of the AmlCompute clusters: {e}"
            ))
        })?;
    Ok(endpoints
        .with_addresses(addresses)
        .with_aml_nodes(aml_nodes))
}
