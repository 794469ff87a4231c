//! What templates need to know about the VM or cluster they run on, resolved by the engine.
//!
//! A manifest step refers to storage by address (`storage_account.data.container.raw`) and to
//! credentials by address (`sas.read`); the engine resolves those into Azure names and secret
//! values before rendering. Secret values stay in [`Credential::value`] and reach the node only
//! as runner secret inputs (a 0600 file under `$DSINFRA_SECRETS`); templates see a credential's
//! kind and identity, never its value.

use std::collections::BTreeMap;

use crate::ssh::Secret;
use crate::storage::BlobItem;

/// One node of the VM or cluster, head first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node's name (the runner's node name).
    pub name: String,
    /// Its private IP address in the VNet (known after apply; a placeholder for dry runs).
    pub private_ip: String,
    /// The port its sshd listens on for the cluster SSH mesh (22 on Azure; test hosts differ).
    pub ssh_port: u16,
}

/// A blob container or file share, resolved to its Azure names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageTarget {
    /// The storage account's Azure name (`dsinfradata1a2b`).
    pub account: String,
    /// The container or share name.
    pub name: String,
    /// The blob endpoint without a trailing slash (`https://ACCT.blob.core.windows.net`; an
    /// emulator's `http://127.0.0.1:PORT/devstoreaccount1` in tests).
    pub blob_endpoint: String,
    /// The file endpoint host name (`ACCT.file.core.windows.net`).
    pub file_host: String,
    /// For a share: whether it is an NFS 4.1 share (else SMB).
    pub nfs: bool,
}

impl StorageTarget {
    /// A target on public Azure with the standard endpoints.
    pub fn azure(account: &str, name: &str) -> Self {
        Self {
            account: account.to_owned(),
            name: name.to_owned(),
            blob_endpoint: format!("https://{account}.blob.core.windows.net"),
            file_host: format!("{account}.file.core.windows.net"),
            nfs: false,
        }
    }
}

/// What kind of secret a credential is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialKind {
    /// A SAS query string (with or without its leading `?`).
    Sas,
    /// A storage account key (base64).
    AccountKey,
}

/// A secret the engine resolved for a step.
#[derive(Debug, Clone)]
pub struct Credential {
    /// SAS or account key.
    pub kind: CredentialKind,
    /// What identifies the value without revealing it (`sas.read@2026-05-01T00:00Z`): hashed
    /// into the step, so a new identity re-runs the step and a new value alone does not.
    pub identity: String,
    /// The value.
    pub value: Secret,
}

/// Where the cluster SSH mesh lives: root's `~/.ssh` on real nodes; tests redirect it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshSettings {
    /// The user the head logs in as on the other nodes.
    pub user: String,
    /// The directory holding the head's key pair, its SSH config and its known hosts.
    pub ssh_dir: String,
    /// The `authorized_keys` file the head's public key is appended to on every node.
    pub authorized_keys: String,
    /// Where the admin user's mesh lives on every node (its key pair, config, known hosts and
    /// `authorized_keys`): `None` is the user's own `~/.ssh`, found on each node; tests whose
    /// hosts share one filesystem and one login user move it.
    pub admin_dir: Option<String>,
}

impl Default for MeshSettings {
    fn default() -> Self {
        Self {
            user: "root".to_owned(),
            ssh_dir: "/root/.ssh".to_owned(),
            authorized_keys: "/root/.ssh/authorized_keys".to_owned(),
            admin_dir: None,
        }
    }
}

/// Everything a step template may use about the VM or cluster it runs on.
#[derive(Debug, Clone)]
pub struct NodeContext {
    /// The experiment id (names logs and the elbencho results directory).
    pub experiment: String,
    /// The manifest block the steps belong to (`cluster.train`), for script headers.
    pub block: String,
    /// The nodes, head first (a single VM is one node).
    pub nodes: Vec<ClusterNode>,
    /// Whether the size has InfiniBand (catalog `infiniband`).
    pub infiniband: bool,
    /// The VM's admin (SSH login) user.
    pub admin_user: String,
    /// The image's Ubuntu release (`20.04`, `22.04`) when the engine knows it; templates also
    /// check `/etc/os-release` on the node.
    pub ubuntu: Option<String>,
    /// A fixed temp-disk path. `None` (on Azure) resolves it on the node at run time
    /// (`/mnt/resource` on waagent images, `/mnt` on cloud-init images); tests set a directory.
    pub temp_dir: Option<String>,
    /// Containers and shares by address (`storage_account.data.container.raw`).
    pub storage: BTreeMap<String, StorageTarget>,
    /// Credentials by address: `sas.NAME` for SAS blocks, `storage_account.NAME` for the key.
    pub credentials: BTreeMap<String, Credential>,
    /// Blob listings for `stage` steps, by step name (the engine lists each source once).
    pub listings: BTreeMap<String, Vec<BlobItem>>,
    /// The head's SSH public key, read by [`super::head_key_step`] before the mesh is rendered.
    pub head_public_key: Option<String>,
    /// The host key pinned for each node (an OpenSSH public key line), by node name: the SSH mesh
    /// checks nodes strictly against these. A node without one (adopted) is trusted on first use.
    pub host_keys: BTreeMap<String, String>,
    /// Where the SSH mesh lives.
    pub mesh: MeshSettings,
    /// A preinstalled azcopy binary on the nodes; `None` installs the pinned package.
    pub azcopy: Option<String>,
    /// The `beeond` command on the nodes (an absolute path) when it is not the packaged one on
    /// the `PATH`: a BeeOND installed elsewhere, or a test's stand-in. The engine takes it from
    /// `DSINFRA_BEEOND`.
    pub beeond: Option<String>,
    /// A directory standing in for `/` where data-disk steps look for Azure's LUN links
    /// (`/dev/disk/azure/...`) and the fstab; `None` on Azure. Tests point it at links to loop
    /// devices; the engine takes it from `DSINFRA_DISK_ROOT`.
    pub disk_root: Option<String>,
    /// A directory standing in for `/` for the `beeond` step kind: its `bin` comes first on the
    /// `PATH` of the BeeOND scripts and of their commands on other nodes over the mesh, and the
    /// system paths they write are under it; `None` on Azure. The engine takes it from
    /// `DSINFRA_BEEOND_ROOT`.
    pub beeond_root: Option<String>,
    /// A directory standing in for `/` where the `mofed` step reads the node's release
    /// (`etc/os-release`) and writes DOCA-OFED's apt repository and key (`etc/apt/...`); `None`
    /// on Azure. Tests only.
    pub apt_root: Option<String>,
    /// The `elbencho` command on the nodes (an absolute path) when it is not the release the
    /// step installs: a test's stand-in. The engine takes it from `DSINFRA_ELBENCHO`.
    pub elbencho: Option<String>,
    /// The nodes' VM size, when known (benchmark results record it).
    pub vm_size: Option<String>,
    /// The nodes' image (`publisher:offer:sku:version`), when known (benchmark results record
    /// it).
    pub image: Option<String>,
}

impl NodeContext {
    /// A context for `nodes` with defaults: no InfiniBand, run-time temp disk, no storage.
    pub fn new(experiment: &str, block: &str, nodes: Vec<ClusterNode>) -> Self {
        Self {
            experiment: experiment.to_owned(),
            block: block.to_owned(),
            nodes,
            infiniband: false,
            admin_user: "azureuser".to_owned(),
            ubuntu: None,
            temp_dir: None,
            storage: BTreeMap::new(),
            credentials: BTreeMap::new(),
            listings: BTreeMap::new(),
            head_public_key: None,
            host_keys: BTreeMap::new(),
            mesh: MeshSettings::default(),
            azcopy: None,
            beeond: None,
            disk_root: None,
            beeond_root: None,
            apt_root: None,
            elbencho: None,
            vm_size: None,
            image: None,
        }
    }
}
