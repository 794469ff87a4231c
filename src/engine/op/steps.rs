//! Post-boot steps inside the operations: the run alongside an apply's walk or on its own (an
//! apply with no resource changes, `unpark`), BeeOND stop before `park`/`destroy`, data disks
//! unmounted before they are detached, and what the operation concludes from the blocks'
//! outcomes.
//!
//! Runner events and block outcomes go to the operation's listener as they happen
//! ([`OpEvent::Step`], [`OpEvent::Block`]); the operation fails when a block failed (or, with
//! `--steps run`, could not be reached).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use futures::FutureExt as _;
use tokio::sync::{mpsc, watch};

use super::{Arm, Error, Events, OpEvent, endpoints};
use crate::addr::Address;
use crate::engine::events::{Event, EventSink};
use crate::engine::execute::StateStore;
use crate::engine::post_boot::{
    self, Azure, BlockOutcome, EndpointsFn, Message, PostBoot, Readiness, StepsMode, auth,
};
use crate::model::Desired;
use crate::plan::Plan;
use crate::ssh::WaitPolicy;
use crate::state::{Backend, LocalBackend, State};

/// What the request says about steps (`--steps`, `--rerun-step`, `-i`).
#[derive(Debug, Clone, Default)]
pub struct StepsOptions {
    /// Run, skip, or run where reachable.
    pub mode: StepsMode,
    /// `--rerun-step` entries.
    pub rerun: BTreeSet<String>,
    /// `-i`: the private key to log in with (else the environment's sources).
    pub identity: Option<PathBuf>,
}

/// The steps part of one operation.
pub struct StepsJob<'a> {
    /// The connection (ARM for addresses, the emulator's SSH endpoint map).
    arm: &'a Arm,
    /// The manifest: logs go next to it.
    manifest: &'a Path,
    /// The flags.
    options: StepsOptions,
    /// Names the run's log directory (`apply`, `unpark`, `stop`).
    verb: &'static str,
    /// Where events go.
    events: Events,
}

impl<'a> StepsJob<'a> {
    /// The job for `apply` or `unpark`.
    pub fn new(
        arm: &'a Arm,
        manifest: &'a Path,
        options: &StepsOptions,
        verb: &'static str,
        events: &Events,
    ) -> Self {
        Self {
            arm,
            manifest,
            options: options.clone(),
            verb,
            events: Arc::clone(events),
        }
    }

    /// A job that only stops BeeOND (`destroy`, `park`).
    pub fn stopping(
        arm: &'a Arm,
        manifest: &'a Path,
        identity: Option<&Path>,
        events: &Events,
    ) -> Self {
        Self {
            arm,
            manifest,
            options: StepsOptions {
                mode: StepsMode::Auto,
                rerun: BTreeSet::new(),
                identity: identity.map(Path::to_path_buf),
            },
            verb: "stop",
            events: Arc::clone(events),
        }
    }

    /// The steps mode.
    pub fn mode(&self) -> StepsMode {
        self.options.mode
    }

    fn note(&self, text: &str) {
        self.events.event(OpEvent::Note(text));
    }

    fn post_boot_options(&self) -> post_boot::Options {
        // The manifest's own directory under `.dsinfra/` (where its local state and
        // known_hosts live too): two manifests naming the same experiment keep their logs and
        // fetched files apart, and everything about one manifest is in one place.
        let dir = LocalBackend::state_dir(self.manifest).unwrap_or_else(|_| {
            self.manifest
                .parent()
                .unwrap_or_else(|| Path::new(""))
                .join(".dsinfra")
        });
        let events = Arc::clone(&self.events);
        post_boot::Options {
            mode: self.options.mode,
            rerun: self.options.rerun.clone(),
            identity: auth::Sources::from_env(self.options.identity.as_deref()),
            dir,
            run_id: format!("{}-{}", Utc::now().format("%Y%m%dT%H%M%S%.3fZ"), self.verb),
            events: Some(Arc::new(move |event: &crate::steps::Event<'_>| {
                events.event(OpEvent::Step(event));
            })),
            wait: WaitPolicy::default(),
        }
    }

    fn post_boot<'s>(&self, desired: &'s Desired, store: &'s StateStore) -> PostBoot<'s>
    where
        'a: 's,
    {
        PostBoot::new(
            Azure {
                client: &self.arm.client,
                subscription: &self.arm.subscription,
                desired,
            },
            store,
            self.post_boot_options(),
        )
    }

    fn report(&self, outcome: &BlockOutcome) {
        self.events.event(OpEvent::Block {
            outcome,
            mode: self.options.mode,
            map_hint: &self.arm.place.no_endpoint_hint(),
        });
    }

    /// The endpoint reader: the emulator's map (read again each time: VMs get their endpoints
    /// as they boot) with the VMs' IP addresses from ARM.
    fn endpoints<'s>(&'s self, store: &'s StateStore) -> EndpointsFn<'s> {
        let arm = self.arm;
        Box::new(move || {
            async move {
                endpoints::for_state(arm, &store.snapshot())
                    .await
                    .map_err(|e| e.to_string())
            }
            .boxed()
        })
    }

    /// Runs the blocks of `desired` alongside the walk whose events arrive on `messages`
    /// (ending with [`Message::WalkDone`]).
    pub async fn during(
        &self,
        (plan, desired): (&Plan, &Desired),
        store: &StateStore,
        messages: mpsc::UnboundedReceiver<Message>,
        cancelled: watch::Receiver<bool>,
    ) -> Vec<BlockOutcome> {
        if self.options.mode == StepsMode::Skip {
            return Vec::new();
        }
        let post_boot = self.post_boot(desired, store);
        let endpoints = self.endpoints(store);
        let readiness = Readiness::new(plan, desired);
        post_boot::drive(
            &post_boot,
            readiness,
            messages,
            &endpoints,
            cancelled,
            &mut |outcome| self.report(outcome),
        )
        .await
    }

    /// Runs the blocks of `desired` now (nothing to wait for); with `only`, just the blocks of
    /// its addresses (VMs or blocks).
    pub async fn now(
        &self,
        desired: &Desired,
        store: &StateStore,
        only: Option<&[Address]>,
    ) -> Vec<BlockOutcome> {
        if self.options.mode == StepsMode::Skip {
            return Vec::new();
        }
        let post_boot = self.post_boot(desired, store);
        let endpoints = self.endpoints(store);
        let mut outcomes = Vec::new();
        for block in post_boot.blocks() {
            if only.is_some_and(|vms| !vms.iter().any(|vm| vm.block_address() == block)) {
                continue;
            }
            let outcome = match endpoints().await {
                Ok(found) => post_boot.run_block(&block, &found).await,
                Err(why) => BlockOutcome {
                    block,
                    result: post_boot::BlockResult::Failed(why),
                    nodes: Vec::new(),
                },
            };
            self.report(&outcome);
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Stops BeeOND on the blocks of `only` (all when empty), best effort; reports what
    /// happened as notes.
    pub async fn stop_beeond(&self, desired: &Desired, store: &StateStore, only: &[Address]) {
        if !desired.steps.iter().any(|s| s.kind == "beeond") {
            return;
        }
        let post_boot = self.post_boot(desired, store);
        let lines = match (self.endpoints(store))().await {
            Ok(endpoints) => post_boot.stop_beeond(only, &endpoints).await,
            Err(why) => vec![format!("BeeOND was not stopped ({why}); continuing")],
        };
        for line in lines {
            self.note(&line);
        }
    }

    /// Unmounts every data disk `plan` detaches from a VM, on that VM, before the walk
    /// (best effort for a VM that cannot be reached); reports what happened as notes.
    ///
    /// # Errors
    ///
    /// A release failed on a reachable VM (a busy disk): nothing was changed in Azure.
    pub async fn release_disks(
        &self,
        plan: &Plan,
        desired: &Desired,
        store: &StateStore,
    ) -> Result<(), Error> {
        let detaches = plan.disk_detaches();
        if detaches.is_empty() {
            return Ok(());
        }
        if self.options.mode == StepsMode::Skip {
            self.note("data disks are detached without unmounting them first (--steps skip)");
            return Ok(());
        }
        let post_boot = self.post_boot(desired, store);
        let endpoints = match (self.endpoints(store))().await {
            Ok(endpoints) => endpoints,
            Err(why) => {
                self.note(&format!(
                    "data disks were not unmounted before detaching ({why}); continuing"
                ));
                return Ok(());
            }
        };
        match post_boot.release_disks(&detaches, &endpoints).await {
            Ok(lines) => {
                for line in lines {
                    self.note(&line);
                }
                Ok(())
            }
            Err(why) => Err(Error::Failed(format!(
                "{why}\nnothing was changed in Azure"
            ))),
        }
    }

    /// `park`: stops BeeOND on the blocks of the VMs about to be deallocated (best effort),
    /// then hands the backend and state back.
    pub async fn before_park(
        &self,
        desired: &Desired,
        (backend, state): (Box<dyn Backend + Send>, State),
        vms: &[Address],
    ) -> (Box<dyn Backend + Send>, State) {
        if self.options.mode == StepsMode::Skip {
            return (backend, state);
        }
        let store = StateStore::new(backend, state);
        self.stop_beeond(desired, &store, vms).await;
        store.into_parts()
    }

    /// `unpark`: the started VMs have new temp disks, so their blocks' steps run again
    /// (per-boot ones re-run, see `engine::post_boot::records`); the state is saved as they end.
    ///
    /// # Errors
    ///
    /// As [`Self::conclude`].
    pub async fn after_unpark(
        &self,
        desired: &Desired,
        (backend, state): (Box<dyn Backend + Send>, State),
        vms: &[Address],
    ) -> Result<(), Error> {
        let store = StateStore::new(backend, state);
        let outcomes = if self.options.mode == StepsMode::Skip || !desired.has_post_boot() {
            Vec::new()
        } else {
            self.now(desired, &store, Some(vms)).await
        };
        super::walk::unlock(&store, &self.events).await;
        self.conclude(desired, &outcomes)
    }

    /// What the operation says at the end about steps, and whether they failed it.
    ///
    /// # Errors
    ///
    /// [`Error::Reported`]: a block failed (or could not be reached with `--steps run`).
    pub fn conclude(&self, desired: &Desired, outcomes: &[BlockOutcome]) -> Result<(), Error> {
        if self.options.mode == StepsMode::Skip && !desired.steps.is_empty() {
            self.note(&format!(
                "the manifest's {} post-boot step(s) were skipped (--steps skip)",
                desired.steps.len()
            ));
            return Ok(());
        }
        let failed = outcomes
            .iter()
            .filter(|o| o.is_failure(self.options.mode))
            .count();
        if failed > 0 {
            return Err(Error::Reported { count: failed });
        }
        Ok(())
    }
}

/// Sends every engine event to the steps' driver as well as to `sink`.
pub fn tee(sink: EventSink, messages: mpsc::UnboundedSender<Message>) -> EventSink {
    Arc::new(move |event: &Event| {
        sink(event);
        let _ = messages.send(Message::Event(event.clone()));
    })
}
