//! Which nodes a run goes to: the TARGET argument (a node, a block) or its absence (the head:
//! node 0 of the first cluster, else the only VM), with `--all` widening a node or the default
//! to every node of its block. The job always sees its whole block (hostfile, node count,
//! ranks), so a head-only launcher like `mpirun` can start ranks everywhere.

use crate::addr::Address;
use crate::engine::reach::{self, Endpoints, NodeReach};
use crate::model::Desired;
use crate::state::State;

use super::super::Error;

/// What a run was asked to run on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunTarget {
    /// The TARGET argument: a node (`cluster.c[2]`, `vm.x`) or a block (`cluster.c`).
    pub name: Option<String>,
    /// `--all`: every node of the target's block (of the default block without a target).
    pub all: bool,
}

/// The nodes a run goes to.
#[derive(Debug, Clone)]
pub struct Selected {
    /// The block, whole, head first.
    pub block: Vec<NodeReach>,
    /// The positions in `block` the command runs on.
    pub ranks: Vec<usize>,
    /// The target as recorded (`cluster.c`, `cluster.c[2]`).
    pub label: String,
}

/// Resolves `target` against the nodes of `state`.
///
/// # Errors
///
/// No node or block has that name, or no default can be chosen (the message lists the
/// choices).
pub fn select(
    target: &RunTarget,
    desired: &Desired,
    state: &State,
    endpoints: &Endpoints,
) -> Result<Selected, Error> {
    let blocks = reach::blocks(state);
    let (block, node) = match &target.name {
        Some(name) => named(name, &blocks, state, endpoints)?,
        None => (default_block(desired, &blocks)?, None),
    };
    let nodes = reach::block_nodes(state, &block, endpoints);
    if nodes.is_empty() {
        return Err(Error::Failed(format!("{block} has no VMs in the state")));
    }
    let (ranks, label) = match node {
        Some(index) if !target.all => (vec![index], nodes[index].node().to_string()),
        _ if target.all || target.name.is_some() => ((0..nodes.len()).collect(), block.to_string()),
        _ => (vec![0], nodes[0].node().to_string()),
    };
    Ok(Selected {
        block: nodes,
        ranks,
        label,
    })
}

/// The block (and the node's position in it, for a node) that `name` names.
fn named(
    name: &str,
    blocks: &[Address],
    state: &State,
    endpoints: &Endpoints,
) -> Result<(Address, Option<usize>), Error> {
    for block in blocks {
        if block.to_string() == name {
            return Ok((block.clone(), None));
        }
        let nodes = reach::block_nodes(state, block, endpoints);
        if let Some(pos) = nodes.iter().position(|n| n.node().to_string() == name) {
            return Ok((block.clone(), Some(pos)));
        }
    }
    Err(Error::Failed(format!(
        "no node or block `{name}` in the state; choose one of: {}",
        choices(blocks, state, endpoints)
    )))
}

/// The head's block: the first `cluster` in the manifest, else the only `vm`.
fn default_block(desired: &Desired, blocks: &[Address]) -> Result<Address, Error> {
    let in_manifest_order = |kind: &str| -> Vec<Address> {
        let mut found: Vec<Address> = Vec::new();
        for resource in &desired.resources {
            let block = resource.address.block_address();
            if block.kind == kind && blocks.contains(&block) && !found.contains(&block) {
                found.push(block);
            }
        }
        found
    };
    if let Some(first) = in_manifest_order("cluster").into_iter().next() {
        return Ok(first);
    }
    let vms = in_manifest_order("vm");
    match vms.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(Error::Failed(
            "the state has no cluster or VM to run on (run `dsinfra apply` first)".to_owned(),
        )),
        several => Err(Error::Failed(format!(
            "which VM? the manifest has no cluster and {} VMs: name one as TARGET ({})",
            several.len(),
            several
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Every block and node name, for error messages.
fn choices(blocks: &[Address], state: &State, endpoints: &Endpoints) -> String {
    let mut names = Vec::new();
    for block in blocks {
        let nodes = reach::block_nodes(state, block, endpoints);
        if nodes.len() > 1 {
            names.push(block.to_string());
        }
        names.extend(nodes.iter().map(|n| n.node().to_string()));
    }
    names.join(", ")
}
