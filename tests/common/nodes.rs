//! A farm of real sshd "VMs" for end-to-end tests against the emulator: the emulator's boot hook
//! ([`dsinfra::emulator::EmulatorConfig::on_vm_boot`]) calls [`NodeFarm::hook`] when a VM's
//! creation succeeds, and the farm starts an OpenSSH `sshd` standing in for that VM, with the host
//! key the VM's cloud-init customData carries. The emulator then maps the VM's public and private
//! IP to it, so `dsinfra` reaches the VM exactly as it would in Azure: pinned host key, jumps
//! through the head, its own login user and key.
//!
//! Like cloud-init, the farm installs the key pair from the cloud-config's `ssh_keys`; a VM
//! created without one gets a fresh random key (what an adopted VM would present). The login
//! user is always [`TEST_USER`]; `authorized_keys` holds the farm's client key and the keys the
//! VM was created with; every host also lets in the keys of the shared [`FarmHosts::mesh_dir`]
//! (where the `ssh_mesh` step appends the head's key under `DSINFRA_MESH_DIR`). A VM booted
//! again under the same name (a replacement) gets a new host in place of the old one. Every host stops when the farm drops; the hook holds the farm weakly so
//! an emulator outliving the farm boots nothing more.
//!
//! A VM of an InfiniBand size also gets an ib0 stand-in ([`sshd::Ib0`]): a member of an
//! availability set gets the address the emulator gives its fabric ([`VmBoot::ib0_address`]) and
//! its sshd listens there too; a VM outside every set gets an address nobody listens on, so the
//! head cannot reach it over "InfiniBand", as on Azure.
//!
//! Use through `mod common;` (it needs the sibling `sshd` module).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dsinfra::emulator::{VmBoot, VmBootHook, VmEvictHook, VmEviction};
use dsinfra::ssh::{HostKey, HostKeyPair};

use super::sshd::{self, ADMIN_USER, Host, Ib0, TEST_USER};

/// What every farm of sshd hosts shares (this one and the AML node farm, `aml_nodes.rs`): a
/// scratch directory, the client key every host lets in, and the running hosts by name. Both
/// farms deref to it.
pub struct FarmHosts {
    /// The hosts, by name; stopped before the directory goes (field order: hosts first).
    hosts: Mutex<BTreeMap<String, Host>>,
    /// The port each name's host last listened on.
    ports: Mutex<BTreeMap<String, u16>>,
    client_key: PathBuf,
    client_public: HostKey,
    dir: tempfile::TempDir,
}

impl FarmHosts {
    /// No hosts yet. `None` (after printing why) when sshd cannot run here; under CI that is a
    /// test failure instead, as for `sshd::start`.
    pub fn new() -> Option<Self> {
        if !sshd::available() {
            return None;
        }
        let dir = sshd::scratch_dir();
        let (client_key, client_public) = sshd::write_client_key(dir.path());
        Some(Self {
            hosts: Mutex::new(BTreeMap::new()),
            ports: Mutex::new(BTreeMap::new()),
            client_key,
            client_public,
            dir,
        })
    }

    /// The client's private key file (for `-i` or `Auth::key_file`).
    pub fn client_key(&self) -> &Path {
        &self.client_key
    }

    /// The client's public key as an OpenSSH line, for a manifest's `ssh_key`.
    pub fn client_public_key(&self) -> String {
        self.client_public.to_openssh()
    }

    /// The login user on every host (the manifest's `admin_username` should be this).
    #[allow(clippy::unused_self)] // A method, as agreed in contracts.md: the farm owns its user.
    pub fn user(&self) -> &str {
        TEST_USER
    }

    /// Starts a host in its own directory `dir_name` with the key pair `(private, public)`,
    /// letting in the client key and `keys` (what the machine was created with), and files it
    /// under `name`, in place of the host that stood for `name` before (stopped after the new
    /// one started). `what` names the machine in the warning about an admin user that cannot log
    /// in. Returns the new host's port on 127.0.0.1.
    #[allow(clippy::too_many_arguments)] // What one sshd stand-in is made of, each one line.
    pub fn start_host(
        &self,
        what: &str,
        (name, dir_name, address): (&str, &str, Option<&str>),
        admin_username: &str,
        (private, public): (&str, &HostKey),
        keys: &[String],
        ib0: Option<&Ib0>,
    ) -> u16 {
        if admin_username != TEST_USER && admin_username != ADMIN_USER {
            eprintln!(
                "{what} has admin user {admin_username:?}; only {TEST_USER} and {ADMIN_USER} can \
                 log in to farm hosts"
            );
        }
        let authorized = self.dir.path().join(format!("{dir_name}.authorized_keys"));
        self.authorize(&authorized, keys);
        // Also the mesh's authorized_keys, which the `ssh_mesh` step appends the head's key to,
        // and the admin user's mesh moved next to it (`admin_mesh_dir`).
        let mesh = self.mesh_dir();
        let admin = self.admin_mesh_dir();
        // A machine started (or created) again under its name keeps its address and port, as
        // a VM keeps its NIC's private IP and port 22: the mesh's known_hosts stay right.
        let port = self
            .ports
            .lock()
            .expect("farm mutex not poisoned")
            .get(name)
            .copied();
        let host = Host::start_with_key_ib0_at(
            self.dir.path(),
            dir_name,
            (private, public),
            &[
                &authorized,
                &mesh.join("authorized_keys"),
                &admin.join("authorized_keys"),
            ],
            ib0,
            (address, port),
        );
        self.ports
            .lock()
            .expect("farm mutex not poisoned")
            .insert(name.to_owned(), host.port);
        self.keep(name, host)
    }

    /// Starts a host for a node that has its own address: like [`FarmHosts::start_host`], but
    /// its sshd also listens on the loopback `address`, and it lets keys in from the file
    /// `authorized` (written with the client key and `keys`, then left for steps to append to,
    /// as a node's `~/.ssh/authorized_keys`). Returns the new host's port.
    pub fn start_host_at(
        &self,
        name: &str,
        dir_name: &str,
        (private, public): (&str, &HostKey),
        (authorized, keys): (&Path, &[String]),
        address: &str,
    ) -> u16 {
        self.authorize(authorized, keys);
        let host = Host::start_with_key_at(
            self.dir.path(),
            dir_name,
            (private, public),
            authorized,
            address,
        );
        self.keep(name, host)
    }

    /// Writes `path` as an authorized_keys file letting in the client key and `keys`.
    fn authorize(&self, path: &Path, keys: &[String]) {
        let mut all = vec![self.client_public_key()];
        all.extend(keys.iter().cloned());
        sshd::write_authorized_keys(path, &all);
    }

    /// Files `host` under `name` in place of the host that stood for it before, and returns its
    /// port.
    fn keep(&self, name: &str, host: Host) -> u16 {
        let port = host.port;
        let old = self
            .hosts
            .lock()
            .expect("farm mutex not poisoned")
            .insert(name.to_owned(), host);
        // Stopping the replaced host waits for its process: outside the lock.
        drop(old);
        port
    }

    /// The farm's scratch directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The directory standing in for the mesh user's `~/.ssh` on every host (for
    /// `DSINFRA_MESH_DIR`; the hosts share one filesystem): every host accepts the keys in its
    /// `authorized_keys`. Created on first use, owned by the login user as a user owns their
    /// `~/.ssh`: the mesh makes it 0700 and sshd reads `authorized_keys` as that user.
    pub fn mesh_dir(&self) -> PathBuf {
        let mesh = self.dir.path().join("mesh");
        if !mesh.is_dir() {
            std::fs::create_dir_all(&mesh).expect("the mesh directory can be created");
            let owned = std::process::Command::new("chown")
                .arg(self.user())
                .arg(&mesh)
                .status()
                .is_ok_and(|s| s.success());
            assert!(owned, "chown {} {}", self.user(), mesh.display());
        }
        mesh
    }

    /// The directory standing in for the admin user's `~/.ssh` on every host (for
    /// `DSINFRA_MESH_ADMIN_DIR`), where the `ssh_mesh` step puts that user's mesh when the
    /// admin user is the mesh's login user too; every host accepts the keys in its
    /// `authorized_keys`. Owned by the login user; made by the step.
    pub fn admin_mesh_dir(&self) -> PathBuf {
        self.dir.path().join("admin-mesh")
    }

    /// Powers off the host filed under `name` (see [`Host::power_off`]) and forgets it; false
    /// when there is none.
    pub fn power_off(&self, name: &str) -> bool {
        let host = self
            .hosts
            .lock()
            .expect("farm mutex not poisoned")
            .remove(name);
        // Killing waits for the processes: outside the lock.
        host.map(|mut h| h.power_off()).is_some()
    }

    /// What `read` says of the host filed under `name`, if there is one.
    pub fn with_host<T>(&self, name: &str, read: impl FnOnce(&Host) -> T) -> Option<T> {
        self.hosts
            .lock()
            .expect("farm mutex not poisoned")
            .get(name)
            .map(read)
    }
}

/// Real sshd hosts standing in for the VMs an emulator creates.
pub struct NodeFarm {
    /// The hosts, by VM name.
    hosts: FarmHosts,
    /// Whether each host also listens on a loopback address of its own made from its private IP
    /// ([`super::aml_nodes::loopback_for`]), the endpoint the emulator then maps the VM to: the
    /// nodes' addresses are distinct, as private IPs are, so an SSH config can tell them apart
    /// by address (what `mpirun` and `pdsh` over a hostfile need).
    addressed: bool,
    /// VM names in the order they booted (a replaced VM appears once per boot).
    order: Mutex<Vec<String>>,
    /// Evicted VMs: (name, deleted), in order.
    evicted: Mutex<Vec<(String, bool)>>,
    /// Where the VMs' step markers live (`DSINFRA_MARKER_DIR`), when a test tells: a VM deleted
    /// by its eviction loses them with its disk.
    markers: Mutex<Option<PathBuf>>,
    /// What else an evicted VM loses, when a test tells (what a stand-in keeps for it on this
    /// shared filesystem and a real VM keeps on its temp disk or in memory: a mount).
    on_evict: Mutex<Option<EvictionLoss>>,
}

/// See [`NodeFarm::set_on_evict`].
type EvictionLoss = Arc<dyn Fn(&VmEviction) + Send + Sync>;

impl std::ops::Deref for NodeFarm {
    type Target = FarmHosts;

    fn deref(&self) -> &FarmHosts {
        &self.hosts
    }
}

/// Where one farm host listens and keeps its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FarmHost {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its directory (config, host key, pid file, log).
    pub dir: PathBuf,
    /// sshd's own log.
    pub log: PathBuf,
}

impl NodeFarm {
    /// A farm with no hosts yet. `None` (after printing why) when sshd cannot run here; under CI
    /// that is a test failure instead, as for `sshd::start`.
    pub fn start() -> Option<Arc<Self>> {
        Self::start_with(false)
    }

    /// A farm whose hosts each listen on an address of their own (see [`NodeFarm::addressed`]).
    pub fn start_addressed() -> Option<Arc<Self>> {
        Self::start_with(true)
    }

    fn start_with(addressed: bool) -> Option<Arc<Self>> {
        Some(Arc::new(Self {
            hosts: FarmHosts::new()?,
            addressed,
            order: Mutex::new(Vec::new()),
            evicted: Mutex::new(Vec::new()),
            markers: Mutex::new(None),
            on_evict: Mutex::new(None),
        }))
    }

    /// The emulator boot hook that starts a host per VM and answers its endpoint.
    pub fn hook(self: &Arc<Self>) -> VmBootHook {
        let farm = Arc::downgrade(self);
        Arc::new(move |boot: &VmBoot| farm.upgrade().map(|farm| farm.boot(boot)))
    }

    /// The emulator eviction hook: the evicted VM's host powers off (its jobs die with it), as
    /// the VM stops; started again, the VM boots a new host through [`NodeFarm::hook`]. Every
    /// eviction is remembered ([`NodeFarm::evictions`]).
    pub fn evict_hook(self: &Arc<Self>) -> VmEvictHook {
        let farm = Arc::downgrade(self);
        Arc::new(move |eviction: &VmEviction| {
            if let Some(farm) = farm.upgrade() {
                farm.power_off(&eviction.name);
                let markers = farm
                    .markers
                    .lock()
                    .expect("farm mutex not poisoned")
                    .clone();
                if let Some(root) = markers.filter(|_| eviction.deleted) {
                    let _ = std::fs::remove_dir_all(root.join(&eviction.name));
                }
                let lose = farm
                    .on_evict
                    .lock()
                    .expect("farm mutex not poisoned")
                    .clone();
                if let Some(lose) = lose {
                    lose(eviction);
                }
                farm.evicted
                    .lock()
                    .expect("farm mutex not poisoned")
                    .push((eviction.name.clone(), eviction.deleted));
            }
        })
    }

    /// Tells the farm where the VMs' step markers are (`DSINFRA_MARKER_DIR`): a VM its eviction
    /// deletes loses its own, as its disk goes.
    pub fn set_marker_root(&self, root: &Path) {
        *self.markers.lock().expect("farm mutex not poisoned") = Some(root.to_owned());
    }

    /// Tells the farm what else an evicted VM loses on this shared filesystem: `lose` is called
    /// for each eviction, after the host powered off.
    pub fn set_on_evict(&self, lose: impl Fn(&VmEviction) + Send + Sync + 'static) {
        *self.on_evict.lock().expect("farm mutex not poisoned") = Some(Arc::new(lose));
    }

    /// The evictions so far: (VM name, deleted), in order.
    pub fn evictions(&self) -> Vec<(String, bool)> {
        self.evicted
            .lock()
            .expect("farm mutex not poisoned")
            .clone()
    }

    /// The host currently standing in for the VM named `vm_name` (the Azure VM name).
    pub fn host(&self, vm_name: &str) -> Option<FarmHost> {
        self.hosts.with_host(vm_name, |h| FarmHost {
            port: h.port,
            dir: h.dir.clone(),
            log: h.log.clone(),
        })
    }

    /// The VM names booted so far, in boot order; a VM booted twice (replaced) appears twice.
    pub fn started(&self) -> Vec<String> {
        self.order.lock().expect("farm mutex not poisoned").clone()
    }

    /// Starts the host for one VM and returns its endpoint.
    fn boot(&self, boot: &VmBoot) -> String {
        // Without a key in customData cloud-init generates one, unknown to dsinfra.
        let (private, public) = boot
            .custom_data
            .as_deref()
            .and_then(cloud_config_host_key)
            .unwrap_or_else(|| {
                let pair = HostKeyPair::generate().expect("ed25519 generation works");
                (
                    pair.private_openssh().expose().to_owned(),
                    pair.public().clone(),
                )
            });
        let boots = {
            let mut order = self.order.lock().expect("farm mutex not poisoned");
            order.push(boot.name.clone());
            order.len()
        };
        let address = self
            .addressed
            .then_some(boot.private_ip.as_deref())
            .flatten()
            .map(|ip| super::aml_nodes::loopback_for(ip).to_string());
        // Each boot gets its own directory: a replacement's host starts before the old one stops.
        let port = self.hosts.start_host(
            &format!("NodeFarm: VM {}", boot.name),
            (
                &boot.name,
                &format!("{}-boot{boots}", boot.name),
                address.as_deref(),
            ),
            &boot.admin_username,
            (&private, &public),
            &boot.ssh_public_keys,
            ib0_of(boot).as_ref(),
        );
        format!("{}:{port}", address.as_deref().unwrap_or("127.0.0.1"))
    }
}

/// The ib0 stand-in of a booted VM: none for a size without InfiniBand; the fabric's address
/// (listened on) for a member of an availability set; else an address in `127.99.0.0/16` that
/// nobody listens on.
fn ib0_of(boot: &VmBoot) -> Option<Ib0> {
    let infiniband = dsinfra::catalog::shipped_size(&boot.vm_size).is_some_and(|s| s.infiniband);
    if !infiniband {
        return None;
    }
    if let Some(address) = &boot.ib0_address {
        return Some(Ib0 {
            address: address.clone(),
            listening: true,
        });
    }
    let last = boot
        .private_ip
        .as_deref()
        .and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok())
        .map_or([0, 0], |ip| [ip.octets()[2], ip.octets()[3]]);
    Some(Ib0 {
        address: format!("127.99.{}.{}", last[0], last[1]),
        listening: false,
    })
}

/// The ed25519 host key pair of a `#cloud-config` document's `ssh_keys` (private PEM, public
/// key), as `HostKeyPair::cloud_config` writes them; `None` if the document has none.
pub fn cloud_config_host_key(doc: &str) -> Option<(String, HostKey)> {
    let keys = cloud_config_ssh_keys(doc)?;
    let private = keys.get("ed25519_private")?.clone();
    let public = HostKey::from_openssh(keys.get("ed25519_public")?).ok()?;
    Some((private, public))
}

/// The entries under `ssh_keys:` of a cloud-config document. A tiny reader for the subset of
/// YAML dsinfra writes (serde_yaml is not a dependency): `key: value` scalars and `key: |`
/// literal blocks, two-space indented under `ssh_keys:`.
pub fn cloud_config_ssh_keys(doc: &str) -> Option<BTreeMap<String, String>> {
    let mut lines = doc.lines();
    if lines.next()?.trim_end() != "#cloud-config" {
        return None;
    }
    let mut lines = lines
        .skip_while(|l| l.trim_end() != "ssh_keys:")
        .skip(1)
        .peekable();
    let mut keys = BTreeMap::new();
    while let Some(line) = lines.next() {
        let Some(entry) = line.strip_prefix("  ").filter(|e| !e.starts_with(' ')) else {
            break;
        };
        let (name, value) = entry.split_once(':')?;
        let value = value.trim();
        if value == "|" {
            let mut block = String::new();
            while let Some(inner) = lines.next_if(|l| l.starts_with("    ")) {
                block.push_str(&inner[4..]);
                block.push('\n');
            }
            keys.insert(name.to_owned(), block);
        } else {
            keys.insert(name.to_owned(), value.to_owned());
        }
    }
    Some(keys)
}
