//! Connecting to ARM: the real Azure (credential chain + subscription), a running emulator
//! (`--endpoint URL`), or the built-in emulator in-process (`--emulator`).
//!
//! Every command that talks to Azure flattens [`ConnectArgs`] and calls [`connect`]. The in-process
//! emulator keeps its cloud in `.dsinfra/emulator/` next to the manifest, so `apply` and a later
//! `destroy` (separate processes) see the same resources.
//!
//! `--parallelism` belongs to the connection: the one [`Limiter`] of a command is made here and
//! gates the connection's client, so every ARM request of every operation (refresh, preflight,
//! apply's walk, park's power actions, status's reads) counts against the same bound.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;

use crate::azure::{ArmClient, DefaultCredentialChain, StaticTokenCredential, TokenCredential};
use crate::catalog;
use crate::emulator::{self, EmulatorConfig, EmulatorHandle, VmSizeSpec};
use crate::engine::limiter::{DEFAULT_PARALLELISM, Limiter};
use crate::engine::reach::{self, Endpoints, SshEndpoint};
use crate::model::AzureSettings;
use crate::state::State;

/// The subscription id used against emulators when the manifest names none.
pub const EMULATOR_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";

/// The bearer token sent to emulators (any non-empty token is accepted unless one is configured).
const EMULATOR_TOKEN: &str = "dsinfra-emulator";

/// How to reach ARM.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Use the built-in ARM emulator in-process (its cloud is kept in .dsinfra/emulator/ next to
    /// the manifest, so later commands see the same resources). No Azure account needed.
    #[arg(long, conflicts_with = "endpoint")]
    pub emulator: bool,
    /// Use a running ARM-compatible endpoint, e.g. `dsinfra emulator`'s http://127.0.0.1:PORT.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// At most N ARM requests in flight at once, for every call the command makes; fewer while
    /// ARM throttles.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PARALLELISM)]
    pub parallelism: NonZeroUsize,
}

/// Where a connection goes, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Azure itself (or the manifest's endpoint override).
    Azure,
    /// An emulator endpoint given with --endpoint.
    Endpoint(String),
    /// The built-in emulator.
    BuiltInEmulator,
}

/// A ready ARM client and everything it needs to stay alive.
#[derive(Debug)]
pub struct Connection {
    /// The client, gated by [`Connection::limiter`].
    pub client: ArmClient,
    /// The command's bound on ARM requests in flight (`--parallelism`). A client rebuilt for the
    /// engine (see `apply_cmd::engine_client`) is gated by it too.
    pub limiter: Arc<Limiter>,
    /// The subscription all ids live in.
    pub subscription: String,
    /// Where it goes.
    pub target: Target,
    /// The in-process emulator, kept alive for as long as the connection.
    pub emulator: Option<EmulatorHandle>,
    /// For a running emulator (`--endpoint`), the HTTP client of its admin API. Built here, once:
    /// building one loads the TLS roots, several milliseconds of CPU that used to land in the
    /// middle of an apply, when a block's steps asked for the SSH endpoints.
    pub admin: Option<reqwest::Client>,
}

/// Connect as the arguments say. `manifest` locates `.dsinfra/emulator/` for `--emulator`.
pub async fn connect(
    args: &ConnectArgs,
    manifest: &Path,
    settings: &AzureSettings,
) -> anyhow::Result<Connection> {
    let limiter = Arc::new(Limiter::new(args.parallelism));
    let (client, subscription, target, emulator, admin) = open(args, manifest, settings).await?;
    Ok(Connection {
        client: client.gated(Arc::clone(&limiter) as _),
        limiter,
        subscription,
        target,
        emulator,
        admin,
    })
}

/// The parts of a [`Connection`], before its client is gated.
type Parts = (
    ArmClient,
    String,
    Target,
    Option<EmulatorHandle>,
    Option<reqwest::Client>,
);

async fn open(
    args: &ConnectArgs,
    manifest: &Path,
    settings: &AzureSettings,
) -> anyhow::Result<Parts> {
    if args.emulator {
        let dir = manifest
            .parent()
            .unwrap_or_else(|| Path::new(""))
            .join(".dsinfra")
            .join("emulator");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
        let handle = emulator::start(builtin_emulator_config(Some(&dir), latency_scale()?))
            .await
            .context("could not start the built-in emulator")?;
        let client = emulator_client(&handle.endpoint())?;
        return Ok((
            client,
            emulator_subscription(settings),
            Target::BuiltInEmulator,
            Some(handle),
            None,
        ));
    }
    if let Some(endpoint) = &args.endpoint {
        return Ok((
            emulator_client(endpoint)?,
            emulator_subscription(settings),
            Target::Endpoint(endpoint.clone()),
            None,
            Some(reqwest::Client::new()),
        ));
    }
    let subscription = crate::azure::subscription::resolve_subscription_from_environment(
        settings.subscription.as_deref(),
    )
    .await?;
    let credential: Arc<dyn TokenCredential> = Arc::new(DefaultCredentialChain::from_process_env());
    let mut builder = ArmClient::builder(credential);
    if let Some(endpoint) = &settings.endpoint {
        builder = builder.endpoint(endpoint.clone());
    }
    Ok((builder.build()?, subscription.id, Target::Azure, None, None))
}

/// Where SSH connections to the experiment's VMs go: the in-process emulator's map, a running
/// emulator's map (`GET URL/_emulator/ssh-endpoints`), or, on Azure, each IP address itself.
/// The IP addresses are not included: see [`ssh_endpoints_for`].
pub async fn ssh_endpoints(conn: &Connection) -> anyhow::Result<Endpoints> {
    /// The admin API's answer.
    #[derive(serde::Deserialize)]
    struct Listing {
        value: Vec<SshEndpoint>,
    }
    if let Some(handle) = &conn.emulator {
        return Ok(Endpoints::from_emulator(&handle.ssh_endpoints()));
    }
    let Target::Endpoint(endpoint) = &conn.target else {
        return Ok(Endpoints::direct());
    };
    let url = format!("{}/_emulator/ssh-endpoints", endpoint.trim_end_matches('/'));
    let listing: Listing = async {
        conn.admin
            .clone()
            .unwrap_or_default()
            .get(&url)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await
    }
    .await
    .with_context(|| format!("could not read the emulator's SSH endpoints from {url}"))?;
    Ok(Endpoints::from_emulator(&listing.value))
}

/// [`ssh_endpoints`] with the IP addresses of every VM in `state` read from ARM (its public IP's
/// address and its NIC's private address): everything `engine::reach::block_nodes` needs.
pub async fn ssh_endpoints_for(conn: &Connection, state: &State) -> anyhow::Result<Endpoints> {
    let endpoints = ssh_endpoints(conn).await?;
    let addresses = reach::read_addresses(&conn.client, state)
        .await
        .context("could not read the VMs' IP addresses")?;
    Ok(endpoints.with_addresses(addresses))
}

/// The emulator configuration dsinfra uses for `--emulator` and `dsinfra emulator`: every VM size
/// and region dsinfra's catalog knows, so manifests that validate can be applied, and the
/// emulator's Resource SKUs, usages and VM checks answer from the same facts the plan read.
pub fn builtin_emulator_config(state_dir: Option<&Path>, latency_scale: f64) -> EmulatorConfig {
    EmulatorConfig {
        state_dir: state_dir.map(Path::to_path_buf),
        latency_scale,
        vm_sizes: catalog::vm_sizes()
            .iter()
            .filter_map(emulator_size)
            .collect(),
        locations: catalog::LOCATIONS.iter().map(|l| (*l).to_owned()).collect(),
        ..EmulatorConfig::default()
    }
}

/// One catalog size as the emulator knows it: offered where the catalog prices it, with the
/// facts Resource SKUs reports. A fact the catalog does not know stays unknown to the emulator.
/// A size priced in no region is offered nowhere, so the emulator does not know it.
fn emulator_size(size: &catalog::VmSize) -> Option<VmSizeSpec> {
    let regions = catalog::regions_offering(size.name);
    if regions.is_empty() {
        return None;
    }
    // Whole MB: the sizes list's unit; the catalog's GiB can be fractional (0.75).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let memory_mb = (size.memory_gib * 1024.0).round() as u32;
    let mut spec = VmSizeSpec::new(size.name, size.vcpus, size.quota_family)
        .with_memory(memory_mb, size.temp_disk_gib.map(|gib| gib * 1024))
        .in_locations(&regions);
    spec.vcpus_available = Some(size.vcpus_available);
    spec.gpus = Some(size.gpus);
    spec.generations = [(size.gen1, 1), (size.gen2, 2)]
        .into_iter()
        .filter_map(|(boots, generation)| boots.then_some(generation))
        .collect();
    // The catalog states InfiniBand only where a source says so; its `false` also stands for
    // "not stated", so only `true` becomes a fact here.
    spec.rdma = size.infiniband.then_some(true);
    spec.accelerated_networking = size.accelerated_networking;
    spec.premium_io = size.premium_io;
    spec.retirement_date = size.retirement_date;
    Some(spec)
}

/// Latency scale of the built-in emulator: `DSINFRA_EMULATOR_LATENCY_SCALE`, default 0.01 (a VM
/// takes about a second instead of 90, so the quick start is quick but still shows real ordering
/// and parallelism).
fn latency_scale() -> anyhow::Result<f64> {
    match std::env::var("DSINFRA_EMULATOR_LATENCY_SCALE") {
        Ok(text) => text
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .with_context(|| {
                format!("DSINFRA_EMULATOR_LATENCY_SCALE={text} is not a non-negative number")
            }),
        Err(_) => Ok(0.01),
    }
}

fn emulator_subscription(settings: &AzureSettings) -> String {
    settings
        .subscription
        .clone()
        .unwrap_or_else(|| EMULATOR_SUBSCRIPTION.to_owned())
}

fn emulator_client(endpoint: &str) -> anyhow::Result<ArmClient> {
    let credential: Arc<dyn TokenCredential> = Arc::new(StaticTokenCredential::new(
        std::env::var("DSINFRA_EMULATOR_TOKEN").unwrap_or_else(|_| EMULATOR_TOKEN.to_owned()),
    ));
    Ok(ArmClient::builder(credential)
        .endpoint(endpoint.trim_end_matches('/').to_owned())
        .build()?)
}

/// A tokio runtime for the commands that talk to Azure (the rest of the CLI is synchronous).
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_emulator_knows_every_catalog_size_with_its_facts_and_regions() {
        let config = builtin_emulator_config(None, 0.0);
        assert_eq!(config.vm_sizes.len(), catalog::vm_sizes().len());
        let size = |name: &str| {
            config
                .vm_size(name)
                .unwrap_or_else(|| panic!("{name} is in the emulator"))
        };
        let h200 = size("Standard_ND96isr_H200_v5");
        assert!(!h200.offered_in("eastus") && h200.offered_in("eastus2"));
        assert_eq!(
            h200.locations,
            catalog::regions_offering("Standard_ND96isr_H200_v5")
        );
        assert_eq!((h200.gpus, h200.rdma), (Some(8.0), Some(true)));
        let d8ds = size("Standard_D8ds_v5");
        let facts = catalog::vm_size("Standard_D8ds_v5").expect("in the catalog");
        assert_eq!(d8ds.resource_disk_mb, facts.temp_disk_gib.map(|g| g * 1024));
        assert_eq!(d8ds.rdma, None, "not stated is not `false`");
        let hb = size("Standard_HB176rs_v4");
        let facts = catalog::vm_size("Standard_HB176rs_v4").expect("in the catalog");
        assert_eq!(hb.generations.contains(&1), facts.gen1);
        assert_eq!(hb.generations.contains(&2), facts.gen2);
        assert_eq!(hb.rdma, Some(true));
        let nc = size("Standard_NC6s_v3");
        assert_eq!(
            nc.retirement_date.map(|d| d.to_string()).as_deref(),
            Some("2025-09-30")
        );
        // Facts the catalog leaves unknown stay unknown.
        let unknown = catalog::vm_sizes()
            .iter()
            .find(|s| s.premium_io.is_none())
            .map(|s| s.name);
        if let Some(name) = unknown {
            assert_eq!(size(name).premium_io, None);
        }
    }
}
