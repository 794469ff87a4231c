//! The boot hooks a test or `dsinfra emulator` gives: what a new VM or AmlCompute node is
//! created with, and the function that stands a local sshd up for it. A leaf: configuration
//! holds the hooks, and the boot handlers (`boot.rs`, `ml/boot.rs`) call them.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// What a VM was created with, as the boot hook sees it.
#[derive(Clone, PartialEq, Eq)]
pub struct VmBoot {
    /// The VM's `vmId` (a UUID).
    pub vm_id: String,
    /// The VM's name.
    pub name: String,
    /// `osProfile.adminUsername`.
    pub admin_username: String,
    /// The `keyData` of every key in `osProfile.linuxConfiguration.ssh.publicKeys`.
    pub ssh_public_keys: Vec<String>,
    /// `osProfile.customData`, base64-decoded (a cloud-init document); `None` when the create
    /// sent none. A secret: it may hold the VM's private host key.
    pub custom_data: Option<String>,
    /// The address of the VM's public IP, if it has one.
    pub public_ip: Option<String>,
    /// The private address of the VM's primary NIC.
    pub private_ip: Option<String>,
    /// `hardwareProfile.vmSize`.
    pub vm_size: String,
    /// The id of the availability set the VM is in (its InfiniBand fabric); `None` outside any.
    pub fabric: Option<String>,
    /// The loopback address standing for the VM's `ib0` in its fabric; `None` outside any set.
    pub ib0_address: Option<String>,
}

/// Debug output never shows the customData.
impl fmt::Debug for VmBoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VmBoot")
            .field("vm_id", &self.vm_id)
            .field("name", &self.name)
            .field("admin_username", &self.admin_username)
            .field("ssh_public_keys", &self.ssh_public_keys)
            .field(
                "custom_data",
                &self.custom_data.as_ref().map(|_| "<redacted>"),
            )
            .field("public_ip", &self.public_ip)
            .field("private_ip", &self.private_ip)
            .field("vm_size", &self.vm_size)
            .field("fabric", &self.fabric)
            .field("ib0_address", &self.ib0_address)
            .finish()
    }
}

/// Called once per VM whose creation succeeded, outside every emulator lock. A returned
/// `127.0.0.1:PORT` becomes the SSH endpoint of the VM's public and private IP; `None` leaves
/// the VM without one. Answers wait for running boots, so the hook must not call the emulator.
pub type VmBootHook = Arc<dyn Fn(&VmBoot) -> Option<String> + Send + Sync>;

/// A spot VM an eviction took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmEviction {
    /// The VM's name.
    pub name: String,
    /// Deleted (eviction policy Delete), else deallocated.
    pub deleted: bool,
}

/// Called once per evicted spot VM, outside every emulator lock. Answers wait for running
/// hooks, so the hook must not call the emulator.
pub type VmEvictHook = Arc<dyn Fn(&VmEviction) + Send + Sync>;

/// What the hook is told about one AmlCompute node as it becomes usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmlNodeBoot {
    /// The compute's ARM id.
    pub compute_id: String,
    /// The node's `nodeId`, stable for its life.
    pub node_id: String,
    /// Its position in `listNodes` (sorted by node id) when it became usable.
    pub index: usize,
    /// `userAccountCredentials.adminUserName` (empty when the compute has no user account).
    pub admin_username: String,
    /// `userAccountCredentials.adminUserSshPublicKey`, when the compute was given one.
    pub ssh_public_key: Option<String>,
    /// The cluster's public address, shared by every node.
    pub public_ip: String,
    /// The node's own public SSH port (50000 and up).
    pub port: u16,
    /// The node's private address.
    pub private_ip: String,
    /// The compute's `vmSize`.
    pub vm_size: String,
}

/// Called once per AmlCompute node when it becomes idle, outside every emulator lock. A
/// returned address (a local sshd) becomes the SSH endpoint of `public_ip:port` and of
/// `private_ip` until the node leaves; `None` leaves the node without one. Answers wait for
/// running hooks, so the hook must not call the emulator.
pub type AmlNodeHook = Arc<dyn Fn(&AmlNodeBoot) -> Option<SocketAddr> + Send + Sync>;
