//! Running one block's steps: reach its nodes, resolve what the templates need, render the
//! block, run it, fetch result files and record what succeeded in the state.
//!
//! The order inside [`PostBoot::run_block`] matters: reachability is decided first, before any
//! key is read or Azure is asked for a secret, so a block that cannot run (an emulator without
//! SSH endpoints) costs nothing and needs no SSH identity.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use super::auth::{self, Sources};
use super::context::{base_context, references};
use super::credentials::{Azure, add_credentials, add_listings};
use super::fetch::fetch_files;
use super::idle::idle_watch;
use super::records::{
    RunNode, forced_steps, rebooted_steps, record_mesh_key, recorded_mesh_key, succeeded,
};
use super::secure_boot;
use crate::addr::Address;
use crate::engine::execute::StateStore;
use crate::engine::reach::{AML_CLUSTER, Endpoints, NodeReach, Route, aml, block_nodes};
use crate::model::Step;
use crate::ssh::{Auth, HostKey, RecordHostKey, WaitPolicy};
use crate::steps::library::{
    Expansion, NodeContext, StepRequest, head_key_step, idle_watch_step, parse_head_key,
    render_block,
};
use crate::steps::{self, Event, EventSink, NodeSpec, RunOptions, RunReport};

/// Whether and how strictly steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StepsMode {
    /// Run on every block whose nodes are reachable; say why the others were not run.
    #[default]
    Auto,
    /// Run everywhere; a block that cannot be reached is an error.
    Run,
    /// Do not run steps.
    Skip,
}

/// How steps run in this command.
#[derive(Clone)]
pub struct Options {
    /// Auto, run or skip.
    pub mode: StepsMode,
    /// `--rerun-step` names (manifest step names or runner part names).
    pub rerun: BTreeSet<String>,
    /// Where the SSH identity may come from.
    pub identity: Sources,
    /// The manifest's directory (`.dsinfra/<manifest>`, beside its local state): logs go to
    /// its `logs/<run>/`, fetched files below it.
    pub dir: PathBuf,
    /// This run's id (names its log directory).
    pub run_id: String,
    /// Where runner events go.
    pub events: Option<EventSink>,
    /// How long to wait for a node's SSH.
    pub wait: WaitPolicy,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("mode", &self.mode)
            .field("rerun", &self.rerun)
            .field("dir", &self.dir)
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// What happened to one block.
#[derive(Debug, Clone)]
pub enum BlockResult {
    /// The steps ran; the report says how on each node.
    Ran {
        /// Per-node outcomes.
        report: RunReport,
        /// Files fetched back (local paths), and files that could not be.
        fetched: Vec<String>,
        /// Problems after the run that do not fail it (a file not fetched, a state save).
        warnings: Vec<String>,
    },
    /// Some node cannot be reached (an emulator without SSH endpoints, a parked VM).
    Unreachable {
        /// One line per unreachable node.
        nodes: Vec<String>,
        /// Whether the endpoints are an emulator's.
        emulated: bool,
    },
    /// Something the block needs failed in this apply.
    Blocked(String),
    /// The run could not be prepared (no identity, a secret not readable, a template error).
    Failed(String),
    /// `--steps skip`.
    Skipped,
}

/// One block and what happened to it.
#[derive(Debug, Clone)]
pub struct BlockOutcome {
    /// `vm.gpu`, `cluster.train`.
    pub block: Address,
    /// What happened.
    pub result: BlockResult,
    /// For an `aml_cluster`: its nodes as `listNodes` gave them, one line each (address, node
    /// id, public address and port, private IP, state), since nothing else shows them. Empty
    /// for `vm` and `cluster` blocks, whose nodes are resources the plan shows.
    pub nodes: Vec<String>,
}

impl BlockOutcome {
    /// Whether this block makes the command fail in `mode`.
    pub fn is_failure(&self, mode: StepsMode) -> bool {
        match &self.result {
            BlockResult::Ran { report, .. } => !report.success(),
            BlockResult::Unreachable { .. } => mode == StepsMode::Run,
            BlockResult::Failed(_) => true,
            // The failed resource already fails the apply; skipping is what was asked.
            BlockResult::Blocked(_) | BlockResult::Skipped => false,
        }
    }
}

/// Runs blocks' steps; shared by every block of a command.
pub struct PostBoot<'a> {
    /// Where secrets come from.
    pub azure: Azure<'a>,
    /// The state, saved after each block.
    pub store: &'a StateStore,
    /// How to run.
    pub options: Options,
    auth: OnceLock<Result<Auth, String>>,
}

impl std::fmt::Debug for PostBoot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostBoot")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<'a> PostBoot<'a> {
    /// A runner for the blocks of `azure.desired`.
    pub fn new(azure: Azure<'a>, store: &'a StateStore, options: Options) -> Self {
        Self {
            azure,
            store,
            options,
            auth: OnceLock::new(),
        }
    }

    /// The blocks of the manifest that have steps, in manifest order, then blocks that park
    /// when idle without steps of their own (their head still gets the idle watcher).
    pub fn blocks(&self) -> Vec<Address> {
        let mut blocks: Vec<Address> = Vec::new();
        let desired = self.azure.desired;
        let steps = desired.steps.iter().map(|s| &s.block);
        for block in steps.chain(desired.park_idle.keys()) {
            if !blocks.contains(block) {
                blocks.push(block.clone());
            }
        }
        blocks
    }

    /// The SSH identity, looked up once, when the first block is about to run.
    pub(super) fn auth(&self) -> Result<Auth, String> {
        self.auth
            .get_or_init(|| auth::identity(&self.options.identity))
            .clone()
    }

    /// Runs the steps of `block` on its nodes as `endpoints` reaches them.
    pub async fn run_block(&self, block: &Address, endpoints: &Endpoints) -> BlockOutcome {
        let result = self.run(block, endpoints).await;
        BlockOutcome {
            block: block.clone(),
            result,
            nodes: aml::describe(block, endpoints),
        }
    }

    async fn run(&self, block: &Address, endpoints: &Endpoints) -> BlockResult {
        if self.options.mode == StepsMode::Skip {
            return BlockResult::Skipped;
        }
        let steps: Vec<&Step> = self
            .azure
            .desired
            .steps
            .iter()
            .filter(|s| &s.block == block)
            .collect();
        let state = self.store.snapshot();
        let nodes = block_nodes(&state, block, endpoints);
        if nodes.is_empty() {
            return BlockResult::Failed(format!("{block} has no VMs in the state"));
        }
        // Before reachability: what ARM says about Secure Boot needs no SSH.
        if let Some(why) = secure_boot::refusal(block, &steps, &nodes, endpoints) {
            return BlockResult::Failed(why);
        }
        let unreachable: Vec<String> = nodes
            .iter()
            .filter_map(|n| match &n.route {
                Route::Unreachable { why } => Some(format!("{} {why}", n.node())),
                _ => None,
            })
            .collect();
        if !unreachable.is_empty() {
            return BlockResult::Unreachable {
                nodes: unreachable,
                emulated: endpoints.is_emulated(),
            };
        }
        let block = Block {
            address: block,
            steps: &steps,
            state: &state,
            nodes: &nodes,
            endpoints,
        };
        match self.run_reachable(&block).await {
            Ok(BlockResult::Ran {
                report,
                fetched,
                mut warnings,
            }) => {
                warnings.extend(changed_key_advice(&block, &report.to_string()));
                BlockResult::Ran {
                    report,
                    fetched,
                    warnings,
                }
            }
            Ok(other) => other,
            Err(why) => {
                let advice = changed_key_advice(&block, &why);
                BlockResult::Failed(advice.into_iter().fold(why, |text, a| text + "; " + &a))
            }
        }
    }

    /// Runs a block whose nodes are all reachable.
    async fn run_reachable(&self, block: &Block<'_>) -> Result<BlockResult, String> {
        let auth = self.auth()?;
        let tofu_keys: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let record: RecordHostKey = {
            let keys = Arc::clone(&tofu_keys);
            Arc::new(move |node: &str, key: &HostKey| {
                relock(&keys).push((node.to_owned(), key.to_openssh()));
            })
        };
        let specs = node_specs(block.nodes, &record)?;
        let expansion = self.render(block, &specs, &auth).await?;
        let forced = forced_steps(&self.options.rerun, block.address, &expansion.steps);
        let mut options = self.run_options(auth.clone(), forced);
        options.restarted = rebooted_steps(
            block.steps,
            &run_nodes(block, &specs),
            block.state,
            &expansion.steps,
        );
        let report = steps::run(&specs, &expansion.steps, &options)
            .await
            .map_err(|e| e.to_string())?;
        let mut warnings = Vec::new();
        let fetched = fetch_files(
            &expansion.fetch,
            &report,
            &specs,
            &auth,
            &self.options.dir,
            &mut warnings,
        )
        .await;
        let keys = relock(&tofu_keys).clone();
        if let Err(e) = self
            .save(block, &expansion.steps, &report, &specs, &keys)
            .await
        {
            warnings.push(format!(
                "the steps' results could not be saved in the state: {e}"
            ));
        }
        Ok(BlockResult::Ran {
            report,
            fetched,
            warnings,
        })
    }

    /// The block's context (credentials, listings, the head's key) and its rendered steps.
    async fn render(
        &self,
        block: &Block<'_>,
        specs: &[NodeSpec],
        auth: &Auth,
    ) -> Result<Expansion, String> {
        let desired = self.azure.desired;
        let refs = references(desired, block.steps);
        let mut ctx = base_context(desired, block.address, block.nodes, block.endpoints, &refs);
        add_credentials(self.azure, block.state, &refs, &mut ctx).await?;
        add_listings(block.steps, &mut ctx).await?;
        if block
            .steps
            .iter()
            .any(|s| matches!(s.kind.as_str(), "ssh_mesh" | "beeond"))
        {
            ctx.head_public_key = Some(self.mesh_key(block, &ctx, &specs[0], auth).await?);
        }
        let requests: Vec<StepRequest<'_>> = block
            .steps
            .iter()
            .map(|s| StepRequest::from_model(s))
            .collect();
        let mut expansion = render_block(&requests, &ctx).map_err(|e| e.to_string())?;
        // After the block's own steps: the mesh the watcher samples through exists by then.
        let arm = self.azure.client.endpoint();
        if let Some(watch) = idle_watch(
            desired,
            block.state,
            block.address,
            block.nodes,
            block.endpoints,
            arm,
        )? {
            expansion
                .steps
                .push(idle_watch_step(&ctx, &watch).map_err(|e| e.to_string())?);
        }
        Ok(expansion)
    }

    /// The head's mesh key: as recorded for the head as it is now, else read from the head
    /// (which makes it the first time) and recorded, so that an apply with nothing to do starts
    /// no step at all. An apply with `--rerun-step` reads it again: redoing a step should not
    /// depend on what the state remembers of the head.
    async fn mesh_key(
        &self,
        block: &Block<'_>,
        ctx: &NodeContext,
        head: &NodeSpec,
        auth: &Auth,
    ) -> Result<String, String> {
        let node = &block.nodes[0];
        if self.options.rerun.is_empty()
            && let Some(key) = recorded_mesh_key(block.state, node)
        {
            return Ok(key);
        }
        let options = self.run_options(auth.clone(), BTreeSet::new());
        let key = head_key(ctx, head, &options).await?;
        self.store
            .update(|state| record_mesh_key(state, node, &key))
            .await
            .map_err(|e| {
                format!("the head's cluster SSH key could not be saved in the state: {e}")
            })?;
        Ok(key)
    }

    /// Records what succeeded on each VM, drops records of steps the manifest no longer has,
    /// and pins host keys first seen in this run. An AML node's records and key go to its
    /// compute, under its node id, and nodes the cluster no longer lists lose theirs.
    async fn save(
        &self,
        block: &Block<'_>,
        runner: &[crate::steps::StepSpec],
        report: &RunReport,
        specs: &[NodeSpec],
        keys: &[(String, String)],
    ) -> Result<(), crate::state::StateError> {
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let records = succeeded(
            block.steps,
            runner,
            report,
            &run_nodes(block, specs),
            block.state,
            &at,
        );
        let names: BTreeSet<&str> = block.steps.iter().map(|s| s.name.as_str()).collect();
        if block.address.kind == AML_CLUSTER {
            return self.save_aml(block, &names, records, keys).await;
        }
        self.store
            .update(|state| {
                for node in block.nodes {
                    if let Some(r) = state.resource_mut(&node.vm) {
                        r.steps.retain(|name, _| names.contains(name.as_str()));
                    }
                }
                for (vm, name, record) in records {
                    if let Some(r) = state.resource_mut(&vm) {
                        r.steps.insert(name, record);
                    }
                }
                for (node, key) in keys {
                    if let Some(n) = block.nodes.iter().find(|n| &n.node().to_string() == node)
                        && let Some(r) = state.resource_mut(&n.vm)
                        && r.host_key.is_none()
                    {
                        r.host_key = Some(key.clone());
                    }
                }
            })
            .await
    }

    /// [`Self::save`] for an `aml_cluster`: every record goes to the compute's
    /// [`crate::state::NodeRecord`] of the node id. The block's nodes are every node the cluster
    /// lists now (all were reachable, or nothing ran), so records of other node ids belong to
    /// nodes Azure deleted (a park, a scale down): they are dropped with their pinned keys.
    async fn save_aml(
        &self,
        block: &Block<'_>,
        names: &BTreeSet<&str>,
        records: Vec<(Address, String, crate::state::StepRecord)>,
        keys: &[(String, String)],
    ) -> Result<(), crate::state::StateError> {
        let compute = aml::compute_of(block.address);
        let live: BTreeSet<String> = block.nodes.iter().map(|n| n.name.clone()).collect();
        self.store
            .update(|state| {
                let Some(r) = state.resource_mut(&compute) else {
                    return;
                };
                r.forget_nodes_except(&live);
                for node in block.nodes {
                    r.node_mut(&node.name)
                        .steps
                        .retain(|name, _| names.contains(name.as_str()));
                }
                for (address, name, record) in records {
                    if let Some(n) = block.nodes.iter().find(|n| n.vm == address) {
                        r.node_mut(&n.name).steps.insert(name, record);
                    }
                }
                for (node, key) in keys {
                    if let Some(n) = block.nodes.iter().find(|n| &n.node().to_string() == node) {
                        let pinned = &mut r.node_mut(&n.name).host_key;
                        if pinned.is_none() {
                            *pinned = Some(key.clone());
                        }
                    }
                }
            })
            .await
    }

    pub(super) fn run_options(&self, auth: Auth, forced: BTreeSet<String>) -> RunOptions {
        let mut options = RunOptions::new(
            self.options.run_id.clone(),
            self.options.dir.join("logs"),
            auth,
        );
        options.wait = self.options.wait;
        options.forced = forced;
        options.events.clone_from(&self.options.events);
        options
    }
}

/// The block's nodes as the runner names them (`specs` are in the block's node order).
fn run_nodes(block: &Block<'_>, specs: &[NodeSpec]) -> Vec<RunNode> {
    block
        .nodes
        .iter()
        .zip(specs)
        .map(|(n, s)| RunNode {
            name: s.name().to_owned(),
            vm: n.vm.clone(),
            index: n.index,
            node_id: n.aml_compute().map(|_| n.name.clone()),
        })
        .collect()
}

/// One block being run: its steps, the state they start from, its nodes and endpoints.
struct Block<'b> {
    address: &'b Address,
    steps: &'b [&'b Step],
    state: &'b crate::state::State,
    nodes: &'b [NodeReach],
    endpoints: &'b Endpoints,
}

/// What to do when an AML node presented a host key other than the one pinned for its node id,
/// if `text` (a run's report or error) says one did; `None` otherwise or for VM blocks, whose
/// SSH error already says what a changed key means for a VM.
fn changed_key_advice(block: &Block<'_>, text: &str) -> Option<String> {
    if block.address.kind != AML_CLUSTER || !text.contains("host key mismatch") {
        return None;
    }
    Some(format!(
        "an AML node of {block} presented a host key other than the one dsinfra pinned for its \
         node id the first time it reached it. Azure Machine Learning keeps a node's host key for \
         the node's life, so this is either someone between you and the node or a node the \
         service re-imaged in place. If you trust the node, `dsinfra park` then `dsinfra unpark` \
         replaces the cluster's nodes (new node ids, keys trusted on first use, every step run \
         again); otherwise do not connect to it",
        block = block.address
    ))
}

/// The runner's nodes, head first.
fn node_specs(nodes: &[NodeReach], record: &RecordHostKey) -> Result<Vec<NodeSpec>, String> {
    let head = nodes.first();
    nodes
        .iter()
        .map(|n| {
            n.node_spec(head.filter(|_| !n.is_head()), Arc::clone(record))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Runs [`head_key_step`] on the head and reads the public key it prints.
async fn head_key(
    ctx: &NodeContext,
    head: &NodeSpec,
    options: &RunOptions,
) -> Result<String, String> {
    let step = head_key_step(ctx).map_err(|e| e.to_string())?;
    let found: Arc<Mutex<Option<String>>> = Arc::default();
    let mut options = options.clone();
    let forward = options.events.take();
    let seen = Arc::clone(&found);
    options.events = Some(Arc::new(move |event: &Event<'_>| {
        if let Event::Line { line, .. } = event
            && let Some(key) = parse_head_key(line)
        {
            *relock(&seen) = Some(key);
        }
        if let Some(forward) = &forward {
            forward(event);
        }
    }));
    let report = steps::run(std::slice::from_ref(head), &[step], &options)
        .await
        .map_err(|e| e.to_string())?;
    if !report.success() {
        return Err(format!(
            "could not read the head's cluster SSH key: {}",
            report.to_string().trim_end()
        ));
    }
    relock(&found)
        .clone()
        .ok_or_else(|| "the head did not print its cluster SSH key".to_owned())
}

/// A poisoned lock only means a runner task panicked; the data is still usable.
fn relock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 17: an AML node presenting another key than the one pinned for its node id is
    /// refused by the SSH layer; the block's result then says what that means for an AML node
    /// and what to do. VM blocks keep the SSH layer's own message.
    #[test]
    fn a_changed_aml_node_key_comes_with_advice() {
        let state = crate::state::State::new("exp");
        let endpoints = Endpoints::direct();
        let aml: Address = "aml_cluster.scratch".parse().expect("ok");
        let vm: Address = "cluster.train".parse().expect("ok");
        let block = |address| Block {
            address,
            steps: &[],
            state: &state,
            nodes: &[],
            endpoints: &endpoints,
        };
        let report = "aml_cluster.scratch[1]  failed: node aml_cluster.scratch[1]: host key mismatch: expected SHA256:a, server presented SHA256:b; refusing to connect";
        let advice = changed_key_advice(&block(&aml), report).expect("advice");
        assert!(
            advice.starts_with("an AML node of aml_cluster.scratch presented a host key other than the one dsinfra pinned for its node id"),
            "{advice}"
        );
        assert!(
            advice.contains("`dsinfra park` then `dsinfra unpark`"),
            "{advice}"
        );
        assert_eq!(changed_key_advice(&block(&vm), report), None);
        assert_eq!(changed_key_advice(&block(&aml), "exit status 1"), None);
    }
}
