//! The built-in step library: each manifest step kind (`mofed`, `blobfuse2`, `beeond`, `stage`,
//! ...) rendered from its template into one or more runner [`StepSpec`]s.
//!
//! A manifest names a workflow in one line (`step "beeond" {}`); the library turns it into the
//! runner steps that do it, in order, with the scopes that put the runner's barriers where the
//! workflow needs them (BeeOND: install on all nodes -> SSH mesh -> start on the head -> health
//! gate on all nodes). Templates live in templates/steps/ and are embedded in the binary; every
//! rendered script starts with `set -euo pipefail` and has an "already done?" section
//! (`dsinfra_done`) that makes a re-run cheap and that [`check_only`] runs on its own. Steps
//! whose template defines that section also get it as their runner check
//! ([`StepSpec::check`], built by [`check_command`]), so the runner skips a step whose work the
//! image already did (OFED on an HPC image) and reports it as already done.
//!
//! Secrets never enter a script's text: a step that needs a SAS or an account key gets it as a
//! runner [`SecretInput`] (a 0600 file under `$DSINFRA_SECRETS`), and the text only names the
//! file. What must be known on the workstation before rendering (storage names, credentials,
//! the blob listing for sharding, the head's public key) comes in a [`NodeContext`]. The
//! parameter names and defaults follow src/manifest/step_kinds.rs. docs/steps.md documents
//! every step and how each was verified.

mod bench;
mod cluster;
mod context;
mod disks;
mod idle;
mod mounts;
mod params;
mod plan;
pub mod shard;
mod stage;
mod templates;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::spec::{RunPolicy, Scope, SecretInput, StepFile, StepSpec};

pub use bench::{ResultFormat, ResultsSource};
pub use cluster::{HEAD_KEY_PREFIX, beeond_stop, head_key_step, parse_head_key};
pub use context::{
    ClusterNode, Credential, CredentialKind, MeshSettings, NodeContext, StorageTarget,
};
pub use disks::data_disk_release;
pub use idle::{
    IDLE_STATE_DIR, IDLE_STEP_NAME, IDLE_WATCHER_PATH, IdleError, IdleParking, IdleState,
    IdleWatch, idle_watch_step, parse_idle_state,
};
pub use mounts::{DOCA_VERSION, FETCHED_DIR, NFS_VERSIONS, SCRIPT_SAS, SCRIPT_STORAGE_KEY};
pub use plan::{CHECK_ONLY_PARAM, check_command, check_only, dry_run};
pub use stage::{AZCOPY_MIN_VERSION, AZCOPY_PIN, SHARD_FILE, StageShard, stage_shards};

/// Every step kind the library renders.
pub const KINDS: [&str; 15] = [
    "mofed",
    "blobfuse2",
    "blobfuse",
    "azure_files",
    "nfs_cache",
    "ssh_mesh",
    "beeond",
    "stage",
    "elbencho",
    "storage_bench",
    "alluxio",
    "script",
    // Not a manifest kind: the prelude that reads the head's public key (see head_key_step).
    "head_key",
    // Not a manifest kind: generated for a `disk` block with `mount`, on the VM it is attached to.
    "data_disk",
    // Not a manifest kind: generated for a block whose size's local storage is NVMe only.
    "nvme_temp",
];

/// The mount point a step of `kind` makes on every node: `explicit` (its `mount` parameter)
/// when given, else the kind's default; `None` for kinds that mount nothing. `dsinfra run`
/// hands these to jobs (docs/run.md); the defaults are the ones each kind's renderer uses.
pub fn mount_point<'a>(kind: &str, explicit: Option<&'a str>) -> Option<&'a str> {
    let default = match kind {
        "beeond" => cluster::BEEOND_MOUNT,
        "alluxio" => "/alluxio-fuse",
        "blobfuse2" | "blobfuse" => "/mnt/blob",
        "azure_files" => "/mnt/share",
        "nfs_cache" => "/mnt/nfs",
        "data_disk" => "/data",
        _ => return None,
    };
    Some(explicit.unwrap_or(default))
}

/// One manifest step to render.
#[derive(Debug, Clone)]
pub struct StepRequest<'a> {
    /// The step's name (defaults to its kind in the manifest); sub-steps are `<name>.<part>`.
    pub name: &'a str,
    /// The step kind.
    pub kind: &'a str,
    /// Nodes it runs on (for kinds that expand into several steps: the main part).
    pub scope: Scope,
    /// When it runs again (for kinds that expand into several steps: the per-boot parts;
    /// installs are always `Once`).
    pub policy: RunPolicy,
    /// Parameters after evaluation (`timeout` included); storage and SAS are addresses.
    pub params: &'a BTreeMap<String, Value>,
}

impl<'a> StepRequest<'a> {
    /// A request from the manifest's model.
    pub fn from_model(step: &'a crate::model::Step) -> Self {
        Self {
            name: &step.name,
            kind: &step.kind,
            scope: match step.scope {
                crate::model::StepScope::All => Scope::All,
                crate::model::StepScope::Head => Scope::Head,
            },
            policy: match step.run {
                crate::model::RunPolicy::Once => RunPolicy::Once,
                crate::model::RunPolicy::PerBoot => RunPolicy::PerBoot,
                crate::model::RunPolicy::Always => RunPolicy::Always,
            },
            params: &step.params,
        }
    }
}

/// A file to copy from a node back to the workstation after the run (elbencho's CSV): the
/// engine's post-run hook, since the runner itself only streams output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The step after which the file exists.
    pub after_step: String,
    /// Node index (0 = head).
    pub node: usize,
    /// Path on the node.
    pub remote: String,
    /// Path relative to the workstation's `.dsinfra/<manifest>/` directory.
    pub local: String,
    /// For a benchmark's results: how the file becomes rows of the results table.
    pub results: Option<ResultsSource>,
}

/// What one manifest step expands into.
#[derive(Debug, Clone, Default)]
pub struct Expansion {
    /// Runner steps, in order.
    pub steps: Vec<StepSpec>,
    /// Files to fetch after the run.
    pub fetch: Vec<Fetch>,
}

/// Why a step could not be rendered. Messages name the step and never a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LibraryError {
    /// The kind is not in the library.
    #[error("unknown step kind `{0}`; built-in kinds: {list}", list = KINDS[..12].join(", "))]
    UnknownKind(String),
    /// A required parameter is missing.
    #[error("step `{step}` is missing parameter `{param}`")]
    MissingParam {
        /// Step name.
        step: String,
        /// Parameter name.
        param: String,
    },
    /// A parameter has an unusable value.
    #[error("step `{step}`: parameter `{param}`: {why}")]
    BadParam {
        /// Step name.
        step: String,
        /// Parameter name.
        param: String,
        /// What is wrong.
        why: String,
    },
    /// The engine did not resolve a storage or credential address the step refers to.
    #[error(
        "step `{step}`: {address} is not resolved ({what}); the engine must resolve it before rendering"
    )]
    Unresolved {
        /// Step name.
        step: String,
        /// The address.
        address: String,
        /// What was expected there.
        what: &'static str,
    },
    /// The step cannot work on this VM.
    #[error("step `{step}`: {why}")]
    Unsupported {
        /// Step name.
        step: String,
        /// Why, and what to do instead.
        why: String,
    },
    /// A template failed to render: a bug in the library, not in the manifest.
    #[error("step `{step}`: internal error rendering {template}")]
    Template {
        /// Step name.
        step: String,
        /// The template and the renderer's message.
        template: String,
    },
}

/// Renders one manifest step for the VM or cluster described by `ctx`.
pub fn render(request: &StepRequest<'_>, ctx: &NodeContext) -> Result<Expansion, LibraryError> {
    let mut b = Builder::new(request, ctx)?;
    match request.kind {
        "mofed" => mounts::mofed(&mut b)?,
        "blobfuse2" => mounts::blobfuse2(&mut b)?,
        "blobfuse" => mounts::blobfuse(&mut b)?,
        "azure_files" => mounts::azure_files(&mut b)?,
        "nfs_cache" => mounts::nfs_cache(&mut b)?,
        "ssh_mesh" => cluster::ssh_mesh(&mut b)?,
        "beeond" => cluster::beeond(&mut b)?,
        "stage" => stage::stage(&mut b, None)?,
        "elbencho" => bench::elbencho(&mut b)?,
        "storage_bench" => bench::storage_bench(&mut b)?,
        "alluxio" => cluster::alluxio(&mut b)?,
        "script" => mounts::script(&mut b)?,
        "data_disk" => disks::data_disk(&mut b)?,
        "nvme_temp" => disks::nvme_temp(&mut b)?,
        other => return Err(LibraryError::UnknownKind(other.to_owned())),
    }
    Ok(b.finish())
}

/// Renders a block's steps in order. Unlike [`render`] one at a time, it lets a step see the
/// ones before it: a `stage` into a BeeOND mount refuses to run unless that mount is really
/// BeeGFS (otherwise the copy would silently fill the node's local disk).
pub fn render_block(
    requests: &[StepRequest<'_>],
    ctx: &NodeContext,
) -> Result<Expansion, LibraryError> {
    let mut all = Expansion::default();
    let mut beegfs_mounts: Vec<String> = Vec::new();
    for request in requests {
        let expansion = if request.kind == "stage" {
            let mut b = Builder::new(request, ctx)?;
            let to = b.params().path_or("to", stage::DEFAULT_TO)?.to_owned();
            let gate = beegfs_mounts
                .iter()
                .find(|m| to == **m || to.starts_with(&format!("{m}/")))
                .cloned();
            stage::stage(&mut b, gate.as_deref())?;
            b.finish()
        } else {
            render(request, ctx)?
        };
        if request.kind == "beeond" {
            let b = Builder::new(request, ctx)?;
            beegfs_mounts.push(
                b.params()
                    .path_or("mount", cluster::BEEOND_MOUNT)?
                    .to_owned(),
            );
        }
        all.steps.extend(expansion.steps);
        all.fetch.extend(expansion.fetch);
    }
    Ok(all)
}

/// Collects one expansion's steps.
struct Builder<'a> {
    request: &'a StepRequest<'a>,
    ctx: &'a NodeContext,
    timeout: Option<std::time::Duration>,
    out: Expansion,
}

/// One runner step to add.
struct Part<'t> {
    /// Sub-step suffix (`install`), or `None` for the step's own name.
    pub suffix: Option<&'t str>,
    /// Template name.
    pub template: &'t str,
    /// A short description for the script header.
    pub title: &'t str,
    /// Scope.
    pub scope: Scope,
    /// Policy.
    pub policy: RunPolicy,
    /// Template variables besides the common ones.
    pub vars: Value,
    /// Secret inputs.
    pub secrets: Vec<SecretInput>,
    /// Non-secret input files (a `stage` shard list), each node its own content.
    pub files: Vec<StepFile>,
    /// Non-secret parameters exported to the script.
    pub env: BTreeMap<String, String>,
    /// The user's own "already done?" command (`script` steps); library parts with a
    /// `dsinfra_done` section get theirs from the template instead.
    pub check: Option<String>,
}

impl<'t> Part<'t> {
    /// A part with no secrets and no exported parameters.
    pub fn new(
        suffix: Option<&'t str>,
        template: &'t str,
        title: &'t str,
        scope: Scope,
        policy: RunPolicy,
        vars: Value,
    ) -> Self {
        Self {
            suffix,
            template,
            title,
            scope,
            policy,
            vars,
            secrets: Vec::new(),
            files: Vec::new(),
            env: BTreeMap::new(),
            check: None,
        }
    }
}

impl<'a> Builder<'a> {
    fn new(request: &'a StepRequest<'a>, ctx: &'a NodeContext) -> Result<Self, LibraryError> {
        let params = params::Params {
            step: request.name,
            map: request.params,
        };
        let timeout = params.timeout()?;
        Ok(Self {
            request,
            ctx,
            timeout,
            out: Expansion::default(),
        })
    }

    fn params(&self) -> params::Params<'a> {
        params::Params {
            step: self.request.name,
            map: self.request.params,
        }
    }

    fn request(&self) -> &'a StepRequest<'a> {
        self.request
    }

    fn ctx(&self) -> &'a NodeContext {
        self.ctx
    }

    fn name(&self) -> &'a str {
        self.request.name
    }

    /// The full runner step name of a part.
    fn step_name(&self, suffix: Option<&str>) -> String {
        match suffix {
            Some(s) => format!("{}.{s}", self.request.name),
            None => self.request.name.to_owned(),
        }
    }

    fn unsupported(&self, why: impl Into<String>) -> LibraryError {
        LibraryError::Unsupported {
            step: self.request.name.to_owned(),
            why: why.into(),
        }
    }

    fn unresolved(&self, address: &str, what: &'static str) -> LibraryError {
        LibraryError::Unresolved {
            step: self.request.name.to_owned(),
            address: address.to_owned(),
            what,
        }
    }

    /// The resolved storage target at the address held by parameter `param`.
    fn storage(&self, param: &str) -> Result<&'a StorageTarget, LibraryError> {
        let address = self.params().required(param)?;
        let target = self
            .ctx
            .storage
            .get(address)
            .ok_or_else(|| self.unresolved(address, "a container or share"))?;
        if !params::is_account_name(&target.account) || !params::is_container_name(&target.name) {
            return Err(self.unsupported(format!(
                "{address} resolved to unusable Azure names ({}/{})",
                target.account, target.name
            )));
        }
        Ok(target)
    }

    /// The credential for a storage target: the SAS named by `sas_param` if the step has one,
    /// else the account key of the target's storage account.
    fn credential(
        &self,
        storage_param: &str,
        sas_param: Option<&str>,
    ) -> Result<&'a Credential, LibraryError> {
        if let Some(sas) = sas_param
            .map(|p| self.params().text(p))
            .transpose()?
            .flatten()
        {
            return self
                .ctx
                .credentials
                .get(sas)
                .ok_or_else(|| self.unresolved(sas, "a SAS"));
        }
        let address = self.params().required(storage_param)?;
        let account = account_address(address);
        self.ctx
            .credentials
            .get(&account)
            .ok_or_else(|| self.unresolved(&account, "the storage account key"))
    }

    /// Adds one runner step rendered from `part`.
    fn push(&mut self, part: Part<'_>) -> Result<(), LibraryError> {
        let name = self.step_name(part.suffix);
        let mut context = json!({
            "step": name,
            "kind": self.request.kind,
            "title": part.title,
            "experiment": self.ctx.experiment,
            "block": self.ctx.block,
            "node_count": self.ctx.nodes.len(),
            "temp_dir": self.ctx.temp_dir,
            "infiniband": self.ctx.infiniband,
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut context, part.vars) {
            base.extend(extra);
        }
        let script =
            templates::render(part.template, &context).map_err(|e| LibraryError::Template {
                step: name.clone(),
                template: e,
            })?;
        let check = part
            .check
            .or_else(|| templates::has_check(part.template).then(|| plan::check_command(&script)));
        self.out.steps.push(StepSpec {
            name,
            script,
            params: part.env,
            secrets: part.secrets,
            files: part.files,
            scope: part.scope,
            policy: part.policy,
            timeout: self.timeout,
            check,
        });
        Ok(())
    }

    fn fetch(&mut self, fetch: Fetch) {
        self.out.fetch.push(fetch);
    }

    fn finish(self) -> Expansion {
        self.out
    }
}

/// `storage_account.data.container.raw` -> `storage_account.data`.
fn account_address(address: &str) -> String {
    address.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// A runner secret input from a credential.
fn secret_input(name: &str, credential: &Credential) -> SecretInput {
    let value = match credential.kind {
        CredentialKind::Sas => {
            crate::ssh::Secret::new(credential.value.expose().trim().trim_start_matches('?'))
        }
        CredentialKind::AccountKey => crate::ssh::Secret::new(credential.value.expose().trim()),
    };
    SecretInput {
        name: name.to_owned(),
        identity: credential.identity.clone(),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_addresses_and_error_texts() {
        assert_eq!(
            account_address("storage_account.data.container.raw"),
            "storage_account.data"
        );
        assert_eq!(
            LibraryError::UnknownKind("blobfuse3".into()).to_string(),
            "unknown step kind `blobfuse3`; built-in kinds: mofed, blobfuse2, blobfuse, \
             azure_files, nfs_cache, ssh_mesh, beeond, stage, elbencho, storage_bench, alluxio, \
             script"
        );
    }

    fn render_script(params: &BTreeMap<String, Value>) -> StepSpec {
        let request = StepRequest {
            name: "prep",
            kind: "script",
            scope: Scope::All,
            policy: RunPolicy::Once,
            params,
        };
        let ctx = NodeContext::new("exp", "vm.prep", Vec::new());
        let mut expansion = render(&request, &ctx).expect("a script step renders");
        assert_eq!(expansion.steps.len(), 1);
        expansion.steps.remove(0)
    }

    fn two_nodes_with_credentials() -> NodeContext {
        let node = |name: &str| ClusterNode {
            name: name.to_owned(),
            private_ip: "10.0.0.4".to_owned(),
            ssh_port: 22,
        };
        let mut ctx = NodeContext::new(
            "exp",
            "cluster.train",
            vec![node("exp-train-0"), node("exp-train-1")],
        );
        ctx.credentials.insert(
            "sas.read".to_owned(),
            Credential {
                kind: CredentialKind::Sas,
                identity: "sas.read 1a2b".to_owned(),
                value: crate::ssh::Secret::new("?sv=2022-11-02&sig=c2VjcmV0"),
            },
        );
        ctx.credentials.insert(
            "storage_account.data".to_owned(),
            Credential {
                kind: CredentialKind::AccountKey,
                identity: "storage_account.data key1".to_owned(),
                value: crate::ssh::Secret::new("a2V5a2V5"),
            },
        );
        ctx
    }

    #[test]
    fn a_script_step_gets_its_sas_and_account_key_as_secret_files() {
        let params = BTreeMap::from([
            (
                "script".to_owned(),
                json!("sha256sum \"$DSINFRA_SECRETS/sas\""),
            ),
            ("sas".to_owned(), json!("sas.read")),
            ("storage_key".to_owned(), json!("storage_account.data")),
        ]);
        let request = StepRequest {
            name: "prep",
            kind: "script",
            scope: Scope::All,
            policy: RunPolicy::Once,
            params: &params,
        };
        let ctx = two_nodes_with_credentials();
        let step = render(&request, &ctx).expect("renders").steps.remove(0);
        let secrets: Vec<(&str, &str, &str)> = step
            .secrets
            .iter()
            .map(|s| (s.name.as_str(), s.identity.as_str(), s.value.expose()))
            .collect();
        // The SAS without its leading `?`, as every step reads one.
        assert_eq!(
            secrets,
            [
                ("sas", "sas.read 1a2b", "sv=2022-11-02&sig=c2VjcmV0"),
                ("storage_key", "storage_account.data key1", "a2V5a2V5"),
            ]
        );
        assert!(!step.script.contains("c2VjcmV0") && !step.script.contains("a2V5a2V5"));
        // Unresolved by the engine: an error naming the address, not an empty file.
        let mut bare = ctx.clone();
        bare.credentials.remove("sas.read");
        assert_eq!(
            render(&request, &bare).map(|_| ()),
            Err(LibraryError::Unresolved {
                step: "prep".into(),
                address: "sas.read".into(),
                what: "a SAS",
            })
        );
    }

    #[test]
    fn a_script_step_fetches_its_files_from_every_node_it_runs_on() {
        let mut params = BTreeMap::from([
            ("script".to_owned(), json!("true")),
            (
                "fetch".to_owned(),
                json!(["/data/out/result.csv", "/var/log/run.log"]),
            ),
        ]);
        let ctx = two_nodes_with_credentials();
        let fetches = |scope: Scope, params: &BTreeMap<String, Value>| {
            let request = StepRequest {
                name: "bench",
                kind: "script",
                scope,
                policy: RunPolicy::Once,
                params,
            };
            render(&request, &ctx).map(|e| {
                e.fetch
                    .iter()
                    .map(|f| format!("{} {} {} -> {}", f.after_step, f.node, f.remote, f.local))
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            fetches(Scope::All, &params).expect("renders"),
            [
                "bench 0 /data/out/result.csv -> fetched/bench/exp-train-0/result.csv",
                "bench 0 /var/log/run.log -> fetched/bench/exp-train-0/run.log",
                "bench 1 /data/out/result.csv -> fetched/bench/exp-train-1/result.csv",
                "bench 1 /var/log/run.log -> fetched/bench/exp-train-1/run.log",
            ]
        );
        assert_eq!(
            fetches(Scope::Head, &params).expect("renders"),
            [
                "bench 0 /data/out/result.csv -> fetched/bench/exp-train-0/result.csv",
                "bench 0 /var/log/run.log -> fetched/bench/exp-train-0/run.log",
            ]
        );
        params.insert("fetch".to_owned(), json!(["/a/x.csv", "/b/x.csv"]));
        assert_eq!(
            fetches(Scope::All, &params).map_err(|e| e.to_string()),
            Err(
                "step `bench`: parameter `fetch`: \"/b/x.csv\" must be an absolute path to a \
                 file, without `..`, its file name used once"
                    .to_owned()
            )
        );
        params.insert("fetch".to_owned(), json!(["relative.csv"]));
        assert!(fetches(Scope::All, &params).is_err());
    }

    #[test]
    fn the_beeond_command_can_be_moved_and_must_be_an_absolute_path() {
        let params = BTreeMap::new();
        let mut ctx = two_nodes_with_credentials();
        let stop = beeond_stop("beeond", &params, &ctx).expect("renders");
        assert!(
            stop.script
                .contains("\nbeeond stop -n \"$nodefile\" -L -d -P || beeond stop")
        );
        ctx.beeond = Some("/opt/beegfs/bin/beeond".to_owned());
        let stop = beeond_stop("beeond", &params, &ctx).expect("renders");
        assert!(stop.script.contains(
            "\n'/opt/beegfs/bin/beeond' stop -n \"$nodefile\" -L -d -P || '/opt/beegfs/bin/beeond' stop"
        ));
        ctx.beeond = Some("beeond-7.4".to_owned());
        assert_eq!(
            beeond_stop("beeond", &params, &ctx)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(
                "step `beeond`: the beeond command \"beeond-7.4\" must be an absolute path"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_script_step_carries_the_users_check_command() {
        let mut params = BTreeMap::from([("script".to_owned(), json!("make data"))]);
        assert_eq!(render_script(&params).check, None);
        params.insert("check".to_owned(), json!("test -d /data/ready"));
        let step = render_script(&params);
        assert_eq!(step.check.as_deref(), Some("test -d /data/ready"));
        assert!(step.script.contains("make data"));
    }
}
