//! Connecting to ARM: the real Azure (credential chain + subscription), a running emulator
//! (`--endpoint URL`), or the built-in emulator in-process (`--emulator`); the result is the
//! [`Arm`] every operation of `engine::op` works through.
//!
//! This sits above the engine and beside the CLI: it is the one place that knows the emulator
//! as a product feature (`--emulator` starts it in-process), so the engine never imports the
//! emulator. The in-process emulator keeps its cloud in `.dsinfra/emulator/` next to the
//! manifest, so `apply` and a later `destroy` (separate processes) see the same resources.
//!
//! `--parallelism` belongs to the connection: the one [`Limiter`] of a command is made here and
//! gates both of the connection's clients.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;

use crate::azure::{ArmClient, DefaultCredentialChain, StaticTokenCredential, TokenCredential};
use crate::catalog;
use crate::emulator::{self, EmulatorConfig, EmulatorHandle, VmSizeSpec};
use crate::engine::events::LroBridge;
use crate::engine::limiter::Limiter;
use crate::engine::op::place::{Azure, Place};
use crate::engine::op::{Arm, Error};
use crate::engine::reach::{Endpoints, SshEndpoint};
use crate::model::AzureSettings;

/// The subscription id used against emulators when the manifest names none.
pub const EMULATOR_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";

/// The bearer token sent to emulators (any non-empty token is accepted unless one is configured).
const EMULATOR_TOKEN: &str = "dsinfra-emulator";

/// Which ARM to use, as the command line chose it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Azure: the manifest's subscription (or the environment's), the credential chain.
    Azure,
    /// A running emulator at this URL.
    Endpoint(String),
    /// The built-in emulator, in-process.
    BuiltInEmulator,
}

/// How to connect: where, and the bound on requests in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Where.
    pub choice: Choice,
    /// At most this many ARM requests in flight (checked non-zero by the command line).
    pub parallelism: NonZeroUsize,
}

/// A ready [`Arm`] and what it needs to stay alive.
#[derive(Debug)]
pub struct Connection {
    /// What the operations use.
    pub arm: Arm,
    /// The in-process emulator, kept alive for as long as the connection.
    emulator: Option<EmulatorHandle>,
}

impl std::ops::Deref for Connection {
    type Target = Arm;

    fn deref(&self) -> &Arm {
        &self.arm
    }
}

impl Connection {
    /// The in-process emulator, if this connection started one.
    pub fn emulator(&self) -> Option<&EmulatorHandle> {
        self.emulator.as_ref()
    }
}

/// Connect as `options` say. `manifest` locates `.dsinfra/emulator/` for `--emulator`.
///
/// # Errors
///
/// The emulator could not start, no subscription resolves, a client could not be built.
pub async fn connect(
    options: &Options,
    manifest: &Path,
    settings: &AzureSettings,
) -> Result<Connection, Error> {
    let limiter = Arc::new(Limiter::new(options.parallelism));
    let bridge = LroBridge::new();
    let (client, subscription, target, emulator) = open(options, manifest, settings).await?;
    let (engine_client, time_scale) = engine_client(&client, &target, &bridge)?;
    let place: Arc<dyn Place> = match &target {
        Target::Azure => Arc::new(Azure),
        Target::Endpoint(url) => Arc::new(Emulator::new(url.clone(), time_scale, false)),
        Target::BuiltInEmulator => Arc::new(Emulator::new(
            emulator
                .as_ref()
                .map(EmulatorHandle::endpoint)
                .unwrap_or_default(),
            time_scale,
            true,
        )),
    };
    Ok(Connection {
        arm: Arm {
            client: client.gated(Arc::clone(&limiter) as _),
            engine_client: engine_client.gated(Arc::clone(&limiter) as _),
            bridge,
            limiter,
            subscription,
            place,
        },
        emulator,
    })
}

/// The connection a command should use when it can also work offline: the one asked for
/// (`--emulator`, `--endpoint`), or Azure when a subscription resolves (the manifest's,
/// `AZURE_SUBSCRIPTION_ID`, or the Azure CLI's default); `None` when nothing is asked for and no
/// subscription resolves.
///
/// # Errors
///
/// As [`connect`].
pub async fn live_connection(
    options: &Options,
    manifest: &Path,
    settings: &AzureSettings,
) -> Result<Option<Connection>, Error> {
    if options.choice == Choice::Azure {
        let resolved = crate::azure::subscription::resolve_subscription_from_environment(
            settings.subscription.as_deref(),
        )
        .await;
        if resolved.is_err() {
            return Ok(None);
        }
    }
    connect(options, manifest, settings).await.map(Some)
}

/// Where a connection goes, as [`open`] decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Azure itself (or the manifest's endpoint override).
    Azure,
    /// A running emulator at this URL (`--endpoint`).
    Endpoint(String),
    /// The built-in emulator, in-process (`--emulator`).
    BuiltInEmulator,
}

/// An emulator as the operations see it ([`Place`]): its pace, and its map of SSH endpoints
/// (`GET URL/_emulator/ssh-endpoints`, docs/emulator.md: IP address -> the local host standing
/// in for the VM).
#[derive(Debug)]
struct Emulator {
    /// Its base URL.
    url: String,
    /// The HTTP client of its admin API, built once (building one loads the TLS roots, several
    /// milliseconds of CPU that used to land in the middle of an apply).
    http: reqwest::Client,
    /// The engine client's latency scale.
    time_scale: f64,
    /// Started in-process by `--emulator` (it cannot be given endpoints from outside).
    in_process: bool,
}

impl Emulator {
    fn new(url: String, time_scale: f64, in_process: bool) -> Self {
        Self {
            url,
            http: reqwest::Client::new(),
            time_scale,
            in_process,
        }
    }
}

impl Place for Emulator {
    fn name(&self) -> String {
        if self.in_process {
            "the built-in emulator".to_owned()
        } else {
            self.url.clone()
        }
    }

    fn time_scale(&self) -> f64 {
        self.time_scale
    }

    fn endpoints(&self) -> futures::future::BoxFuture<'_, Result<Endpoints, Error>> {
        /// The admin API's answer.
        #[derive(serde::Deserialize)]
        struct Listing {
            value: Vec<SshEndpoint>,
        }
        Box::pin(async move {
            let url = format!("{}/_emulator/ssh-endpoints", self.url.trim_end_matches('/'));
            let listing: Listing = async {
                self.http
                    .get(&url)
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await
            }
            .await
            .map_err(|e| {
                Error::Failed(format!(
                    "could not read the emulator's SSH endpoints from {url}: {e}"
                ))
            })?;
            Ok(Endpoints::from_emulator(&listing.value))
        })
    }

    fn no_endpoint_hint(&self) -> String {
        if self.in_process {
            "The in-process emulator (--emulator) cannot map one: run `dsinfra emulator`, map an \
             endpoint with POST URL/_emulator/ssh-endpoints (docs/emulator.md) and apply with \
             --endpoint URL."
                .to_owned()
        } else {
            format!(
                "Map one with `curl -X POST {}/_emulator/ssh-endpoints -H 'content-type: \
                 application/json' -d '{{\"ipAddress\":\"PUBLIC_IP\",\"endpoint\":\"127.0.0.1:PORT\"}}'` \
                 (docs/emulator.md) and apply again.",
                self.url.trim_end_matches('/')
            )
        }
    }
}

/// The parts of a connection, before its clients are gated.
type Parts = (ArmClient, String, Target, Option<EmulatorHandle>);

async fn open(
    options: &Options,
    manifest: &Path,
    settings: &AzureSettings,
) -> Result<Parts, Error> {
    match &options.choice {
        Choice::BuiltInEmulator => {
            let dir = manifest
                .parent()
                .unwrap_or_else(|| Path::new(""))
                .join(".dsinfra")
                .join("emulator");
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::Failed(format!("could not create {}: {e}", dir.display())))?;
            let handle = emulator::start(builtin_emulator_config(Some(&dir), latency_scale(0.01)?))
                .await
                .map_err(|e| {
                    Error::Failed(format!("could not start the built-in emulator: {e}"))
                })?;
            let client = emulator_client(&handle.endpoint())?;
            Ok((
                client,
                emulator_subscription(settings),
                Target::BuiltInEmulator,
                Some(handle),
            ))
        }
        Choice::Endpoint(endpoint) => Ok((
            emulator_client(endpoint)?,
            emulator_subscription(settings),
            Target::Endpoint(endpoint.clone()),
            None,
        )),
        Choice::Azure => {
            let subscription = crate::azure::subscription::resolve_subscription_from_environment(
                settings.subscription.as_deref(),
            )
            .await?;
            let credential: Arc<dyn TokenCredential> =
                Arc::new(DefaultCredentialChain::from_process_env());
            let mut builder = ArmClient::builder(credential);
            if let Some(endpoint) = &settings.endpoint {
                builder = builder.endpoint(endpoint.clone());
            }
            Ok((builder.build()?, subscription.id, Target::Azure, None))
        }
    }
}

/// The client the engine changes things with. Against an emulator it is rebuilt from the
/// connection's endpoint so that long-running-operation progress reaches the engine's events
/// and its waits follow the emulator's latency scale (`DSINFRA_EMULATOR_LATENCY_SCALE`; the
/// built-in emulator defaults to 0.01, a running endpoint to 1). Against Azure the connection's
/// client is used as it is.
fn engine_client(
    client: &ArmClient,
    target: &Target,
    bridge: &Arc<LroBridge>,
) -> Result<(ArmClient, f64), Error> {
    let scale = match target {
        Target::Azure => return Ok((client.clone(), 1.0)),
        Target::BuiltInEmulator => latency_scale(0.01)?,
        Target::Endpoint(_) => latency_scale(1.0)?,
    };
    let client = ArmClient::builder(emulator_credential())
        .endpoint(client.endpoint().to_owned())
        .time_scale(scale)
        .on_progress(bridge.callback())
        .build()?;
    Ok((client, scale))
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
        kube_schemas: kube_schemas(),
        ..EmulatorConfig::default()
    }
}

/// The published Kubernetes schemas at `$DSINFRA_KUBE_SCHEMAS`, if set; one that does not load
/// is said once and left out (the emulator then checks CRD schemas only).
fn kube_schemas() -> Option<std::sync::Arc<crate::kubeschema::Schemas>> {
    match crate::kubeschema::Schemas::from_env() {
        Ok(schemas) => schemas.map(std::sync::Arc::new),
        Err(err) => {
            tracing::warn!("{}: {err}", crate::kubeschema::SCHEMAS_ENV);
            None
        }
    }
}

/// One catalog size as the emulator knows it: offered where the catalog prices it, with the
/// facts Resource SKUs reports. A fact the catalog does not know stays unknown to the emulator.
/// A size priced in no region is offered nowhere, so the emulator does not know it.
fn emulator_size(size: &catalog::VmSize) -> Option<VmSizeSpec> {
    let regions = catalog::regions_offering(&size.name);
    if regions.is_empty() {
        return None;
    }
    // Whole MB: the sizes list's unit; the catalog's GiB can be fractional (0.75).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let memory_mb = (size.memory_gib * 1024.0).round() as u32;
    let mut spec = VmSizeSpec::new(&size.name, size.vcpus, &size.quota_family)
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
    // Resource SKUs mark only the sizes that refuse Trusted Launch.
    spec.trusted_launch = size.trusted_launch.filter(|supported| !supported);
    spec.arm64 = size.arm64();
    spec.nvme_mib = size.nvme_gib.map(|gib| u64::from(gib) * 1024);
    Some(spec)
}

/// The emulator's latency scale: `DSINFRA_EMULATOR_LATENCY_SCALE`, else `default` (the built-in
/// emulator's 0.01 makes a VM take about a second instead of 90, so the quick start is quick but
/// still shows real ordering and parallelism).
fn latency_scale(default: f64) -> Result<f64, Error> {
    match std::env::var("DSINFRA_EMULATOR_LATENCY_SCALE") {
        Ok(text) => text
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                Error::Failed(format!(
                    "DSINFRA_EMULATOR_LATENCY_SCALE={text} is not a non-negative number"
                ))
            }),
        Err(_) => Ok(default),
    }
}

fn emulator_subscription(settings: &AzureSettings) -> String {
    settings
        .subscription
        .clone()
        .unwrap_or_else(|| EMULATOR_SUBSCRIPTION.to_owned())
}

fn emulator_credential() -> Arc<dyn TokenCredential> {
    Arc::new(StaticTokenCredential::new(
        std::env::var("DSINFRA_EMULATOR_TOKEN").unwrap_or_else(|_| EMULATOR_TOKEN.to_owned()),
    ))
}

fn emulator_client(endpoint: &str) -> Result<ArmClient, Error> {
    Ok(ArmClient::builder(emulator_credential())
        .endpoint(endpoint.trim_end_matches('/').to_owned())
        .build()?)
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
        let facts = catalog::shipped_size("Standard_D8ds_v5").expect("in the catalog");
        assert_eq!(d8ds.resource_disk_mb, facts.temp_disk_gib.map(|g| g * 1024));
        assert_eq!(d8ds.rdma, None, "not stated is not `false`");
        let hb = size("Standard_HB176rs_v4");
        let facts = catalog::shipped_size("Standard_HB176rs_v4").expect("in the catalog");
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
            .map(|s| &*s.name);
        if let Some(name) = unknown {
            assert_eq!(size(name).premium_io, None);
        }
    }
}
