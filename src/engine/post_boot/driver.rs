//! Starting each block's steps while the walk runs: engine events come in through a channel,
//! [`Readiness`] says which blocks they made ready or blocked, and ready blocks run
//! concurrently with the walk and with each other.
//!
//! The SSH endpoints are read again for every block that starts (an emulator maps a VM's
//! endpoint when the VM boots, so a map read before the walk would miss it).

use futures::StreamExt as _;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, watch};

use super::block::{BlockOutcome, BlockResult, PostBoot};
use super::trigger::{Readiness, Signal};
use crate::addr::Address;
use crate::engine::events::Event;
use crate::engine::reach::Endpoints;

/// What the driver hears from the apply.
#[derive(Debug, Clone)]
pub enum Message {
    /// An engine event.
    Event(Event),
    /// The walk is over: blocks still waiting will not become ready.
    WalkDone,
}

/// Reads the current SSH endpoints (with the VMs' IP addresses).
pub type EndpointsFn<'a> =
    Box<dyn Fn() -> BoxFuture<'a, Result<Endpoints, String>> + Send + Sync + 'a>;

/// Runs blocks as they become ready until the walk is done and every started block finished.
/// `cancelled` turning `true` (Ctrl-C) starts no new block. `on_outcome` sees each block as it
/// ends, in completion order; the outcomes are also returned.
pub async fn drive<'a, 'p: 'a, 'e: 'a>(
    post_boot: &'a PostBoot<'p>,
    mut readiness: Readiness,
    mut messages: mpsc::UnboundedReceiver<Message>,
    endpoints: &'a EndpointsFn<'e>,
    cancelled: watch::Receiver<bool>,
    on_outcome: &mut (dyn FnMut(&BlockOutcome) + Send),
) -> Vec<BlockOutcome> {
    let mut running: FuturesUnordered<BoxFuture<'a, BlockOutcome>> = FuturesUnordered::new();
    let mut outcomes = Vec::new();
    let mut finish = |outcome: BlockOutcome, outcomes: &mut Vec<BlockOutcome>| {
        on_outcome(&outcome);
        outcomes.push(outcome);
    };
    let start = |signal: Signal, running: &mut FuturesUnordered<BoxFuture<'a, BlockOutcome>>| {
        let (block, why) = match signal {
            Signal::Ready(block) if *cancelled.borrow() => {
                (block, Some("the apply was interrupted".to_owned()))
            }
            Signal::Ready(block) => (block, None),
            Signal::Blocked { block, why } => (block, Some(why)),
        };
        running.push(Box::pin(run_or_block(post_boot, block, why, endpoints)));
    };
    for signal in readiness.ready() {
        start(signal, &mut running);
    }
    let mut walk_done = false;
    loop {
        if walk_done && running.is_empty() {
            break;
        }
        tokio::select! {
            message = messages.recv(), if !walk_done => match message {
                Some(Message::Event(event)) => {
                    for signal in readiness.observe(&event) {
                        start(signal, &mut running);
                    }
                }
                Some(Message::WalkDone) | None => {
                    walk_done = true;
                    for signal in readiness.unfinished() {
                        start(signal, &mut running);
                    }
                }
            },
            Some(outcome) = running.next(), if !running.is_empty() => {
                finish(outcome, &mut outcomes);
            }
        }
    }
    outcomes
}

async fn run_or_block<'a, 'p: 'a, 'e: 'a>(
    post_boot: &'a PostBoot<'p>,
    block: Address,
    blocked: Option<String>,
    endpoints: &'a EndpointsFn<'e>,
) -> BlockOutcome {
    if let Some(why) = blocked {
        return BlockOutcome {
            block,
            result: BlockResult::Blocked(why),
            nodes: Vec::new(),
        };
    }
    match endpoints().await {
        Ok(endpoints) => post_boot.run_block(&block, &endpoints).await,
        Err(why) => BlockOutcome {
            block,
            result: BlockResult::Failed(why),
            nodes: Vec::new(),
        },
    }
}
