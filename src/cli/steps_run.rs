//! Transitional (issue 16): what `ops_cmds` (park, unpark) still uses until it moves onto
//! `engine::op::steps`, whose job this file was; delete it with that move.
//!
//! The CLI side of post-boot steps: `--steps`, `--rerun-step` and `-i` turned into
//! [`post_boot::Options`], the run alongside an apply's walk or on its own (an apply with no
//! resource changes, `unpark`), BeeOND stop before `park`/`destroy`, and what the user is told.
//!
//! Runner events and block outcomes are printed to stdout as they happen
//! ([`crate::render::steps`]); the command fails when a block failed (or, with `--steps run`,
//! could not be reached).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::Path;

use chrono::Utc;
use futures::FutureExt as _;

use super::args::{StepsArgs, StepsChoice};
use super::{AlreadyReported, Output};
use crate::addr::Address;
use crate::azure::ArmClient;
use crate::connect::Connection;
use crate::engine::execute::StateStore;
use crate::engine::op::{Target, endpoints};
use crate::engine::post_boot::{self, Azure, BlockOutcome, EndpointsFn, PostBoot, StepsMode, auth};
use crate::model::Desired;
use crate::render;
use crate::ssh::WaitPolicy;
use crate::state::{Backend, LocalBackend, State};

/// The steps part of one command.
pub(super) struct StepsJob<'a> {
    /// The connection (for SSH endpoints and the map hint).
    pub conn: &'a Connection,
    /// The manifest: logs go next to it.
    pub manifest: &'a Path,
    /// The flags.
    pub mode: StepsMode,
    /// `--rerun-step` entries.
    pub rerun: BTreeSet<String>,
    /// `-i`.
    pub identity: Option<&'a Path>,
    /// Names the run's log directory (`apply`, `unpark`).
    pub verb: &'static str,
}

impl<'a> StepsJob<'a> {
    /// The job for `apply` or `unpark` flags.
    pub fn new(
        conn: &'a Connection,
        manifest: &'a Path,
        args: &'a StepsArgs,
        verb: &'static str,
    ) -> Self {
        Self {
            conn,
            manifest,
            mode: match args.mode {
                StepsChoice::Auto => StepsMode::Auto,
                StepsChoice::Run => StepsMode::Run,
                StepsChoice::Skip => StepsMode::Skip,
            },
            rerun: args.rerun_steps.iter().cloned().collect(),
            identity: args.identity.as_deref(),
            verb,
        }
    }

    fn options(&self) -> post_boot::Options {
        // The manifest's own directory under `.dsinfra/` (where its local state and
        // known_hosts live too): two manifests naming the same experiment keep their logs and
        // fetched files apart, and everything about one manifest is in one place.
        let dir = LocalBackend::state_dir(self.manifest).unwrap_or_else(|_| {
            self.manifest
                .parent()
                .unwrap_or_else(|| Path::new(""))
                .join(".dsinfra")
        });
        post_boot::Options {
            mode: self.mode,
            rerun: self.rerun.clone(),
            identity: auth::Sources::from_env(self.identity),
            dir,
            run_id: format!("{}-{}", Utc::now().format("%Y%m%dT%H%M%S%.3fZ"), self.verb),
            events: Some(render::steps::sink()),
            wait: WaitPolicy::default(),
        }
    }

    fn post_boot<'s>(
        &self,
        client: &'s ArmClient,
        subscription: &'s str,
        desired: &'s Desired,
        store: &'s StateStore,
    ) -> PostBoot<'s> {
        PostBoot::new(
            Azure {
                client,
                subscription,
                desired,
            },
            store,
            self.options(),
        )
    }

    /// How an emulated VM gets an SSH endpoint, for the note when none has one.
    fn map_hint(&self) -> String {
        match &self.conn.target {
            Target::Endpoint(url) => format!(
                "Map one with `curl -X POST {}/_emulator/ssh-endpoints -H 'content-type: \
                 application/json' -d '{{\"ipAddress\":\"PUBLIC_IP\",\"endpoint\":\"127.0.0.1:PORT\"}}'` \
                 (docs/emulator.md) and apply again.",
                url.trim_end_matches('/')
            ),
            _ => "The in-process emulator (--emulator) cannot map one: run `dsinfra emulator`, \
                  map an endpoint with POST URL/_emulator/ssh-endpoints (docs/emulator.md) and \
                  apply with --endpoint URL."
                .to_owned(),
        }
    }

    fn print(&self, outcome: &BlockOutcome) {
        let text = render::steps::block_outcome(outcome, self.mode, &self.map_hint());
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }

    /// The endpoint reader: the emulator's map (read again each time: VMs get their endpoints
    /// as they boot) with the VMs' IP addresses from ARM.
    fn endpoints<'s>(&'s self, store: &'s StateStore) -> EndpointsFn<'s> {
        let conn = self.conn;
        Box::new(move || {
            async move {
                endpoints::for_state(conn, &store.snapshot())
                    .await
                    .map_err(|e| e.to_string())
            }
            .boxed()
        })
    }

    /// Runs the blocks of `desired` now (nothing to wait for); with `only`, just the blocks of
    /// its addresses (VMs or blocks).
    pub async fn now(
        &self,
        (client, subscription): (&ArmClient, &str),
        desired: &Desired,
        store: &StateStore,
        only: Option<&[Address]>,
    ) -> Vec<BlockOutcome> {
        if self.mode == StepsMode::Skip {
            return Vec::new();
        }
        let post_boot = self.post_boot(client, subscription, desired, store);
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
                },
            };
            self.print(&outcome);
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Stops BeeOND on the blocks of `only` (all when empty), best effort; prints what
    /// happened.
    pub async fn stop_beeond(
        &self,
        (client, subscription): (&ArmClient, &str),
        desired: &Desired,
        store: &StateStore,
        only: &[Address],
        out: &Output,
    ) {
        if !desired.steps.iter().any(|s| s.kind == "beeond") {
            return;
        }
        let post_boot = self.post_boot(client, subscription, desired, store);
        let lines = match (self.endpoints(store))().await {
            Ok(endpoints) => post_boot.stop_beeond(only, &endpoints).await,
            Err(why) => vec![format!("BeeOND was not stopped ({why}); continuing")],
        };
        for line in lines {
            out.note(&line);
        }
    }

    /// `park`: stops BeeOND on the blocks of the VMs about to be deallocated (best effort),
    /// then hands the backend and state back.
    pub async fn before_park(
        &self,
        desired: &Desired,
        (backend, state): (Box<dyn Backend + Send>, State),
        vms: &[Address],
        out: &Output,
    ) -> (Box<dyn Backend + Send>, State) {
        if self.mode == StepsMode::Skip {
            return (backend, state);
        }
        let store = StateStore::new(backend, state);
        self.stop_beeond(
            (&self.conn.client, &self.conn.subscription),
            desired,
            &store,
            vms,
            out,
        )
        .await;
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
        out: &Output,
    ) -> anyhow::Result<()> {
        if self.mode == StepsMode::Skip || desired.steps.is_empty() {
            return self.conclude(desired, &[], out);
        }
        let store = StateStore::new(backend, state);
        let outcomes = self
            .now(
                (&self.conn.client, &self.conn.subscription),
                desired,
                &store,
                Some(vms),
            )
            .await;
        self.conclude(desired, &outcomes, out)
    }

    /// What the command says at the end about steps, and whether they failed it.
    ///
    /// # Errors
    ///
    /// A block failed (or could not be reached with `--steps run`).
    pub fn conclude(
        &self,
        desired: &Desired,
        outcomes: &[BlockOutcome],
        out: &Output,
    ) -> anyhow::Result<()> {
        if self.mode == StepsMode::Skip && !desired.steps.is_empty() {
            out.note(&format!(
                "the manifest's {} post-boot step(s) were skipped (--steps skip)",
                desired.steps.len()
            ));
            return Ok(());
        }
        let failed = outcomes.iter().filter(|o| o.is_failure(self.mode)).count();
        if failed > 0 {
            return Err(AlreadyReported { count: failed }.into());
        }
        Ok(())
    }
}
