//! A local ARM-compatible HTTP server: the stand-in for Azure used by the tests, by
//! `dsinfra emulator`, and in-process by `--emulator`.
//!
//! It behaves as real ARM does per `shared/reference/arm.md`: long-running PUTs, DELETEs and
//! actions with Azure-AsyncOperation / Location polling, ARM's error codes and messages,
//! throttling headers and 429s, bearer-token checks, quotas and SKU restrictions. Its responses
//! are checked against the official OpenAPI specs by `tests/conformance/`; the deviations it
//! chose are listed in `docs/emulator.md`. The module imports one thing from the rest of the
//! crate: [`SshEndpoint`], the entry of its SSH endpoint map, which the engine defines because it
//! reads the map (the test server depends on production code, not the reverse; decision 33).
//!
//! Operations complete by elapsed time (tokio time, so tests may pause it), scaled by
//! [`EmulatorConfig::latency_scale`]; the cloud is saved to `state_dir/state.json` after every
//! change so separate CLI runs see the same resources.

mod admin;
mod aks;
mod authorization;
mod boot;
mod compute;
mod config;
mod error;
mod faults;
mod features;
mod generic;
mod groups;
mod hooks;
mod http;
mod imds;
mod json;
mod kube;
mod ml;
mod network;
mod ops;
mod paging;
mod patch;
mod path;
mod providers;
mod registry;
mod render;
mod resource;
mod schedules;
mod server;
mod shared;
mod storage;
mod storage_plane;
mod store;
mod throttle;
mod tls;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use config::{
    BucketShape, Caller, ComputeLimits, DEFAULT_PAGE_SIZE, EmulatorConfig, QuotaConfig, QuotaLimit,
    RecordedViolation, RequestInfo, RequestValidator, ResponseInfo, ResponseValidator,
    SkuRestriction, TRUSTED_LAUNCH_BY_DEFAULT, USE_STANDARD_SECURITY_TYPE, VmSizeSpec,
    default_vm_sizes, normalize_location,
};
pub use error::{ArmError, EmulatorError};
pub use faults::{ActiveFault, FaultAction, FaultRule};
pub use hooks::{AmlNodeBoot, AmlNodeHook, VmBoot, VmBootHook, VmEvictHook, VmEviction};
pub use storage_plane::BlobDataPlane;

use crate::engine::reach::SshEndpoint;
use shared::{Clock, Shared, lock};
use store::Cloud;

/// A running emulator. Dropping it stops the server; [`EmulatorHandle::shutdown`] also waits for
/// open connections to finish.
pub struct EmulatorHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EmulatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Starts an emulator on 127.0.0.1 (`config.port`, 0 for any free port), loading the cloud from
/// `config.state_dir` and fault rules from `config.faults` and `config.faults_file`.
pub async fn start(config: EmulatorConfig) -> Result<EmulatorHandle, EmulatorError> {
    let cloud = match &config.state_dir {
        Some(dir) => Cloud::load(dir)?,
        None => Cloud::default(),
    };
    let mut table = faults::FaultTable::default();
    for rule in config.faults.iter().cloned() {
        table.add(rule);
    }
    if let Some(file) = &config.faults_file {
        let text = std::fs::read_to_string(file).map_err(|source| EmulatorError::Io {
            path: file.clone(),
            source,
        })?;
        let rules: Vec<FaultRule> =
            serde_json::from_str(&text).map_err(|source| EmulatorError::Parse {
                path: file.clone(),
                source,
            })?;
        for rule in rules {
            table.add(rule);
        }
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port))
        .await
        .map_err(|source| EmulatorError::Bind {
            port: config.port,
            source,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|source| EmulatorError::Bind {
            port: config.port,
            source,
        })?;
    let (kube, kube_api) = bind_kube().await?;
    let shared = Arc::new(Shared {
        endpoint: format!("http://{addr}"),
        kube_api,
        throttling: std::sync::atomic::AtomicBool::new(config.throttle),
        requests: Mutex::new(shared::RequestTally::default()),
        config,
        clock: Clock::new(),
        cloud: Mutex::new(cloud),
        faults: Mutex::new(table),
        throttle: Mutex::new(throttle::Throttle::default()),
        completions: providers::completions(),
        tokens_seen: Mutex::new(std::collections::HashSet::new()),
        tokens_expired: Mutex::new(std::collections::HashSet::new()),
        request_violations: Mutex::new(Vec::new()),
        response_violations: Mutex::new(Vec::new()),
    });
    // With a boot hook (VMs or AmlCompute nodes) every answer also passes the boot gate (see
    // boot.rs); without one the plain handler serves, exactly as before.
    let vm_hook = shared.config.on_vm_boot.clone();
    let aml_hook = shared.config.on_aml_node.clone();
    let evict_hook = shared.config.on_vm_evict.clone();
    let booting = (vm_hook.is_some() || aml_hook.is_some()).then(|| {
        Arc::new(boot::Booting {
            shared: Arc::clone(&shared),
            hook: vm_hook,
            aml_hook,
            evict_hook,
            boots: boot::Boots::default(),
            aml_boots: ml::AmlBoots::default(),
        })
    });
    let app = match &booting {
        Some(booting) => axum::Router::new()
            .fallback(boot::handle)
            .with_state(Arc::clone(booting)),
        None => axum::Router::new()
            .fallback(server::handle)
            .with_state(Arc::clone(&shared)),
    };
    let evictions = tokio::spawn(boot::evict_on_time(Arc::clone(&shared), booting));
    let (stop, stopped) = oneshot::channel::<()>();
    let kube_router = axum::Router::new()
        .fallback(server::handle)
        .with_state(Arc::clone(&shared));
    let task = tokio::spawn(async move {
        let (stop_kube, kube_task) = serve_kube(kube, kube_router);
        let serve = axum::serve(listener, app).with_graceful_shutdown(async {
            let _ = stopped.await;
        });
        if let Err(err) = serve.await {
            tracing::error!(%err, "emulator server stopped with an error");
        }
        let _ = stop_kube.send(());
        let _ = kube_task.await;
        evictions.abort();
    });
    tracing::info!(endpoint = %shared.endpoint, "emulator listening");
    Ok(EmulatorHandle {
        addr,
        shared,
        stop: Some(stop),
        task: Some(task),
    })
}

/// AKS clusters' Kubernetes API: the same handler, over TLS on a port of its own.
async fn bind_kube() -> Result<(tls::TlsListener, http::KubeApiEndpoint), EmulatorError> {
    let tcp = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|source| EmulatorError::Bind { port: 0, source })?;
    let addr = tcp
        .local_addr()
        .map_err(|source| EmulatorError::Bind { port: 0, source })?;
    let identity = tls::identity()?;
    let endpoint = http::KubeApiEndpoint {
        url: format!("https://{addr}"),
        ca_pem: identity.ca_pem,
    };
    let listener = tls::TlsListener {
        tcp,
        acceptor: tokio_rustls::TlsAcceptor::from(identity.config),
    };
    Ok((listener, endpoint))
}

/// Serves the Kubernetes API over TLS until the sender is used or dropped.
fn serve_kube(
    listener: tls::TlsListener,
    app: axum::Router,
) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async {
            let _ = stopped.await;
        });
        if let Err(err) = serve.await {
            tracing::error!(%err, "emulator Kubernetes API stopped with an error");
        }
    });
    (stop, task)
}

impl EmulatorHandle {
    /// The base URL clients use instead of `https://management.azure.com`, e.g.
    /// `http://127.0.0.1:41234`.
    pub fn endpoint(&self) -> String {
        self.shared.endpoint.clone()
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and waits for the server task to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Adds a fault rule; returns its id.
    pub fn add_fault(&self, rule: FaultRule) -> u64 {
        lock(&self.shared.faults).add(rule)
    }

    /// The active fault rules with their remaining counts.
    pub fn faults(&self) -> Vec<ActiveFault> {
        lock(&self.shared.faults).list()
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// Declares every bearer token seen so far expired: requests carrying one get 401
    /// ExpiredAuthenticationToken until the client fetches a new token.
    pub fn expire_tokens(&self) {
        self.shared.expire_tokens();
    }

    /// Maps a public IP address (given directly, or found through a public IP or VM resource id)
    /// to a local SSH endpoint such as `127.0.0.1:2222`.
    pub fn map_ssh_endpoint(
        &self,
        ip_address: Option<&str>,
        resource_id: Option<&str>,
        endpoint: &str,
    ) -> Result<SshEndpoint, String> {
        admin::map_ssh(&self.shared, ip_address, resource_id, endpoint)
    }

    /// What [`EmulatorConfig::request_validator`] reported so far, in arrival order. Each of these
    /// requests was answered 400 `InvalidRequestContent`.
    pub fn request_violations(&self) -> Vec<RecordedViolation> {
        lock(&self.shared.request_violations).clone()
    }

    /// What [`EmulatorConfig::response_validator`] reported so far, in arrival order.
    pub fn response_violations(&self) -> Vec<RecordedViolation> {
        lock(&self.shared.response_violations).clone()
    }

    /// The current public IP to SSH endpoint map.
    pub fn ssh_endpoints(&self) -> Vec<SshEndpoint> {
        lock(&self.shared.cloud).ssh_endpoints.clone()
    }
}

impl Drop for EmulatorHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
